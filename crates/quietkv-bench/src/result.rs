//! What a benchmark run is asked to do (`WorkerSpec`) and what it returns
//! (`RunResult`), shared by every experiment, plus the flat metric keys the
//! report aggregates and prints.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::engines::EngineMode;
use crate::loadgen::{percentile_curve, LatencySummary, LoadResult};
use crate::sampler::{PhaseMetrics, Sample, SamplerConfig};

/// Parameters every experiment shares.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommonParams {
    /// Target user reads per second (all reader threads together).
    pub read_rate: f64,
    pub reader_threads: usize,
    pub warmup_s: f64,
    pub baseline_s: f64,
    /// The measured phase (background work running).
    pub duration_s: f64,
    pub memory_limit_bytes: Option<u64>,
}

/// Everything the worker process needs to do one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub experiment: String,
    /// The engine and its configuration.
    pub mode: EngineMode,
    /// The mode's name in the report.
    pub name: String,
    /// 1-based.
    pub repeat: u32,
    pub repeats: u32,
    /// Scratch directory holding the experiment's prepared files.
    pub dir: PathBuf,
    pub common: CommonParams,
    /// Experiment-specific parameters.
    pub params: serde_json::Value,
    /// Filled in by the runner: where the worker's cgroups are.
    pub sampler: SamplerConfig,
}

impl WorkerSpec {
    /// `[E0 buffered 1/3]`, for progress lines.
    pub fn label(&self) -> String {
        format!(
            "[{} {} {}/{}]",
            self.experiment, self.name, self.repeat, self.repeats
        )
    }
}

/// What every run of one report section shares: the parts of its
/// [`WorkerSpec`]s that do not change from run to run.
#[derive(Debug, Clone)]
pub struct SectionRuns {
    experiment: String,
    repeats: u32,
    common: CommonParams,
    params: serde_json::Value,
    /// The disk the sampler watches (name under `/sys/block`).
    block_device: Option<String>,
}

impl SectionRuns {
    /// `repeats` runs of each mode of `experiment` with these parameters.
    pub fn new(
        experiment: &str,
        repeats: u32,
        common: &CommonParams,
        params: &impl Serialize,
        block_device: &Option<String>,
    ) -> Result<SectionRuns, String> {
        Ok(SectionRuns {
            experiment: experiment.to_string(),
            repeats,
            common: common.clone(),
            params: serde_json::to_value(params).map_err(|e| e.to_string())?,
            block_device: block_device.clone(),
        })
    }

    /// The spec of repeat `repeat` of `mode` (named `name` in the report)
    /// on the files in `dir`, sampled once a second.
    pub fn spec(
        &self,
        mode: &EngineMode,
        name: &str,
        repeat: u32,
        dir: &std::path::Path,
    ) -> WorkerSpec {
        WorkerSpec {
            experiment: self.experiment.clone(),
            mode: mode.clone(),
            name: name.to_string(),
            repeat,
            repeats: self.repeats,
            dir: dir.to_path_buf(),
            common: self.common.clone(),
            params: self.params.clone(),
            sampler: SamplerConfig {
                block_device: self.block_device.clone(),
                interval_ms: 1000,
                ..Default::default()
            },
        }
    }
}

/// One phase of user reads with its kernel metrics.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PhaseResult {
    pub latency: LatencySummary,
    pub service: LatencySummary,
    /// Scheduled-to-issue time: the load generator's own lateness.
    #[serde(default)]
    pub lateness: LatencySummary,
    /// The readers' run-queue wait (runnable, no CPU) per issued read, us.
    #[serde(default)]
    pub reader_cpu_wait_us_per_read: Option<f64>,
    pub scheduled: u64,
    pub done: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub cache_hit_ratio: Option<f64>,
    pub kernel: PhaseMetrics,
}

impl PhaseResult {
    /// The run notes every experiment adds about its measured phase: where
    /// its CPU figures came from (see [`crate::sampler::cpu_notes`]) and
    /// the first of any failed reads.
    pub fn notes(&self, sampler: &SamplerConfig) -> Vec<String> {
        let mut notes = crate::sampler::cpu_notes(sampler, &self.kernel);
        if let Some(e) = &self.first_error {
            notes.push(format!("{} user reads failed, first: {e}", self.errors));
        }
        notes
    }

    /// `hits_misses` overrides the generator's own hit count (for reads
    /// whose closure could not tell, e.g. from quietio's class counters).
    pub fn new(load: &LoadResult, kernel: PhaseMetrics, hits_misses: Option<(u64, u64)>) -> Self {
        let (h, m) = hits_misses.unwrap_or((load.hits, load.misses));
        PhaseResult {
            latency: LatencySummary::of(&load.latency),
            service: LatencySummary::of(&load.service),
            lateness: LatencySummary::of(&load.lateness),
            reader_cpu_wait_us_per_read: load
                .reader_run_delay_s
                .filter(|_| load.done + load.errors > 0)
                .map(|s| s * 1e6 / (load.done + load.errors) as f64),
            scheduled: load.scheduled,
            done: load.done,
            errors: load.errors,
            first_error: load.first_error.clone(),
            cache_hit_ratio: (h + m > 0).then(|| h as f64 / (h + m) as f64),
            kernel,
        }
    }
}

/// Background (compaction) work done during the measured phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BackgroundWork {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub seconds: f64,
}

impl BackgroundWork {
    pub fn mib_s(&self) -> f64 {
        if self.seconds > 0.0 {
            (self.read_bytes + self.write_bytes) as f64 / (1 << 20) as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// One second of the latency time series.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimePoint {
    /// Seconds since the start of the baseline phase.
    pub t_s: f64,
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Background work was running in this second.
    pub background: bool,
}

/// The time series of a phase's per-second histograms, starting at
/// `offset_s`.
pub fn timeline(load: &LoadResult, offset_s: f64, background: bool) -> Vec<TimePoint> {
    load.per_second
        .iter()
        .enumerate()
        .map(|(i, h)| TimePoint {
            t_s: offset_s + i as f64,
            count: h.len(),
            p50_us: if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(0.5) as f64
            },
            p99_us: if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(0.99) as f64
            },
            max_us: h.max() as f64,
            background,
        })
        .collect()
}

/// What one worker run returns (as JSON on its stdout).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunResult {
    pub mode: String,
    pub repeat: u32,
    pub measured: PhaseResult,
    pub baseline: Option<PhaseResult>,
    pub background: BackgroundWork,
    pub timeline: Vec<TimePoint>,
    /// (start, end) of background work on the timeline's clock.
    pub background_interval_s: (f64, f64),
    /// Percentile curve of the measured phase: (nines, us).
    pub curve: Vec<[f64; 2]>,
    pub samples: Vec<Sample>,
    /// Experiment-specific numbers (engine counters ...), reported as
    /// `extra.NAME` rows.
    pub extra: BTreeMap<String, f64>,
    pub notes: Vec<String>,
    /// Parts of the measured phase with their own figures: E1's `during`
    /// (the compaction) and `after` (reads meeting the new tables);
    /// `measured` is the whole window.
    #[serde(default)]
    pub phases: BTreeMap<String, PhaseResult>,
}

impl RunResult {
    /// A run of `spec` whose measured phase is `measured` (its read
    /// latencies in `latency`), with its samples and notes; the rest is
    /// the experiment's to fill in.
    pub fn new(
        spec: &WorkerSpec,
        latency: &hdrhistogram::Histogram<u64>,
        measured: PhaseResult,
        samples: Vec<Sample>,
        notes: Vec<String>,
    ) -> RunResult {
        RunResult {
            mode: spec.name.clone(),
            repeat: spec.repeat,
            curve: percentile_curve(latency),
            measured,
            samples,
            notes,
            ..Default::default()
        }
    }

    /// The run in one line for the progress output: its read latency,
    /// reads done of those scheduled, the background work's speed, and the
    /// baseline p99 and CPU steal, so that whoever watches a campaign sees
    /// the host's state in every run, not only in the runs set aside for it.
    pub fn summary(&self) -> String {
        let m = &self.measured;
        let mut line = format!(
            "p99 {:.0} us, p99.9 {:.0} us, reads {}/{}, background {:.0} MiB/s",
            m.latency.p99,
            m.latency.p999,
            m.done,
            m.scheduled,
            self.background.mib_s()
        );
        if let Some(b) = &self.baseline {
            line.push_str(&format!(", baseline p99 {:.0} us", b.latency.p99));
        }
        if let Some(s) = m.kernel.steal_ms_per_s {
            line.push_str(&format!(", CPU steal {s:.0} ms/s"));
        }
        line
    }
}

/// Experiment numbers reported under their own key rather than
/// `extra.NAME`: E5's throughput and system CPU share.
pub const TOP_LEVEL_EXTRA: [&str; 3] = ["ops_per_s", "cpu.sys_pct", "cpu.user_pct"];

/// The metric keys of the report, in `report.json`'s nesting (dots).
pub const LATENCY_KEYS: [&str; 8] = [
    "p50", "p90", "p99", "p999", "p9999", "max", "mean", "stddev",
];

impl RunResult {
    /// Every number of the run under a dotted key
    /// (`read_latency_us.p99`, `device.r_await_ms`, ...).
    pub fn flat_metrics(&self) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::new();
        let lat = |m: &mut BTreeMap<String, f64>, prefix: &str, s: &LatencySummary| {
            let v = [
                s.p50, s.p90, s.p99, s.p999, s.p9999, s.max, s.mean, s.stddev,
            ];
            for (k, x) in LATENCY_KEYS.iter().zip(v) {
                m.insert(format!("{prefix}.{k}"), x);
            }
        };
        let p = &self.measured;
        lat(&mut m, "read_latency_us", &p.latency);
        lat(&mut m, "service_time_us", &p.service);
        lat(&mut m, "reader_lateness_us", &p.lateness);
        if let Some(w) = p.reader_cpu_wait_us_per_read {
            m.insert("reader_cpu_wait_us_per_read".into(), w);
        }
        m.insert("reads.scheduled".into(), p.scheduled as f64);
        m.insert("reads.done".into(), p.done as f64);
        m.insert("reads.errors".into(), p.errors as f64);
        if let Some(b) = &self.baseline {
            lat(&mut m, "baseline_read_latency_us", &b.latency);
            m.insert("baseline_reads.scheduled".into(), b.scheduled as f64);
            m.insert("baseline_reads.done".into(), b.done as f64);
            if let Some(h) = b.cache_hit_ratio {
                m.insert("baseline_cache_hit_ratio".into(), h);
            }
        }
        if let Some(h) = p.cache_hit_ratio {
            m.insert("cache_hit_ratio".into(), h);
        }
        let k = &p.kernel;
        m.insert("dirty_pages_per_s".into(), k.dirty_pages_per_s);
        m.insert("written_pages_per_s".into(), k.written_pages_per_s);
        m.insert("refaults_per_s".into(), k.refaults_per_s);
        m.insert("pgscan_file_per_s".into(), k.pgscan_file_per_s);
        m.insert("pgsteal_file_per_s".into(), k.pgsteal_file_per_s);
        let mut opt = |key: &str, v: Option<f64>| {
            if let Some(v) = v {
                m.insert(key.to_string(), v);
            }
        };
        opt("stall_us_per_s", k.stall_us_per_s);
        opt("active_file_bytes", k.active_file_bytes);
        opt("inactive_file_bytes", k.inactive_file_bytes);
        opt("cpu.user_s", k.cpu_user_s);
        opt("cpu.sys_s", k.cpu_sys_s);
        opt("cpu.run_s", k.cpu_run_s);
        opt("system_cpu.user_s", k.system_cpu_user_s);
        opt("system_cpu.sys_s", k.system_cpu_sys_s);
        opt("system_cpu.iowait_s", k.system_iowait_s);
        opt("steal_ms_per_s", k.steal_ms_per_s);
        opt("other_cpu_ms_per_s", k.other_cpu_ms_per_s);
        opt("device.longest_stall_ms", k.device_longest_stall_ms);
        opt("device.longest_held_ms", k.device_longest_held_ms);
        opt("device.stalled_ms_per_s", k.device_stalled_ms_per_s);
        if let Some(d) = &k.device {
            for (key, v) in [
                ("r_await_ms", d.r_await_ms),
                ("w_await_ms", d.w_await_ms),
                ("aqu_sz", d.aqu_sz),
                ("util_pct", d.util_pct),
                ("r_per_s", d.r_per_s),
                ("w_per_s", d.w_per_s),
                ("r_mib_s", d.r_mib_s),
                ("w_mib_s", d.w_mib_s),
            ] {
                m.insert(format!("device.{key}"), v);
            }
        }
        for (name, ph) in &self.phases {
            m.insert(format!("{name}.read_latency_us.p99"), ph.latency.p99);
            m.insert(format!("{name}.read_latency_us.p999"), ph.latency.p999);
            m.insert(format!("{name}.service_time_us.p99"), ph.service.p99);
            m.insert(format!("{name}.reads.done"), ph.done as f64);
            if let Some(h) = ph.cache_hit_ratio {
                m.insert(format!("{name}.cache_hit_ratio"), h);
            }
        }
        m.insert("compaction_mib_s".into(), self.background.mib_s());
        m.insert("compaction_seconds".into(), self.background.seconds);
        m.insert(
            "compaction_read_mib".into(),
            self.background.read_bytes as f64 / (1 << 20) as f64,
        );
        m.insert(
            "compaction_write_mib".into(),
            self.background.write_bytes as f64 / (1 << 20) as f64,
        );
        for (k, v) in &self.extra {
            let key = if TOP_LEVEL_EXTRA.contains(&k.as_str()) {
                k.clone()
            } else {
                format!("extra.{k}")
            };
            m.insert(key, *v);
        }
        m
    }
}
