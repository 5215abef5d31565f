//! What `bench-snapshot` measured, run by run, and its report: each
//! metric's median (min..max) per mode, as report.md and report.json.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use quietkv_bench::metrics::{MemoryStat, Psi};
use serde::{Deserialize, Serialize};

use quietkv_bench::disturbance::HostSigns;

use super::spec::PhaseReads;
use crate::snapshot_sender::SendPriority;

/// The leader cgroup's counters at one instant.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Counters {
    pub memory: MemoryStat,
    pub psi: Psi,
}

/// One phase of one run: the leader's reads and what its cgroup went
/// through meanwhile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Phase {
    pub reads: PhaseReads,
    /// Page-cache refaults in the leader's cgroup (`workingset_refault`).
    pub refaults: u64,
    pub major_faults: u64,
    /// Time some or all of the leader's tasks stalled on memory, ms (PSI).
    pub psi_some_ms: f64,
    pub psi_full_ms: f64,
    /// The cgroup's page cache at the end of the phase, bytes.
    pub cache_bytes_end: u64,
    /// The most anonymous memory (heaps, buffers: what cannot be dropped
    /// under pressure) the cgroup held during the phase, sampled, bytes.
    #[serde(default)]
    pub anon_peak_bytes: u64,
    /// What the machine showed of itself in the phase (CPU steal, other
    /// processes' CPU, the disk's stalls).
    #[serde(default)]
    pub host: HostSigns,
}

impl Phase {
    pub fn new(reads: PhaseReads, before: &Counters, after: &Counters) -> Phase {
        Phase {
            reads,
            refaults: after
                .memory
                .workingset_refault_file
                .saturating_sub(before.memory.workingset_refault_file),
            major_faults: after
                .memory
                .pgmajfault
                .saturating_sub(before.memory.pgmajfault),
            psi_some_ms: after
                .psi
                .some_total_us
                .saturating_sub(before.psi.some_total_us) as f64
                / 1000.0,
            psi_full_ms: after
                .psi
                .full_total_us
                .saturating_sub(before.psi.full_total_us) as f64
                / 1000.0,
            cache_bytes_end: after.memory.file,
            anon_peak_bytes: 0,
            host: HostSigns::default(),
        }
    }

    pub fn with_anon_peak(self, bytes: u64) -> Phase {
        Phase {
            anon_peak_bytes: bytes,
            ..self
        }
    }

    pub fn with_host(self, host: HostSigns) -> Phase {
        Phase { host, ..self }
    }
}

/// One run: one mode, one round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// `buffered` or `backup`.
    pub mode: String,
    pub round: u32,
    /// The access mode the snapshot really moved in on the leader.
    pub transfer_mode: String,
    pub baseline: Phase,
    pub stream: Phase,
    /// The snapshot file sent, bytes.
    pub snapshot_bytes: u64,
    /// From asking the leader to add the learner to the learner having
    /// caught up (the whole snapshot sent, received and installed).
    pub snapshot_secs: f64,
    /// Bytes the leader's snapshot streaming read during the run.
    pub leader_transfer_read_bytes: u64,
    /// The most anonymous memory the leader held while it opened its
    /// store, before the baseline, sampled, bytes.
    #[serde(default)]
    pub start_anon_peak_bytes: u64,
    /// The cgroup's highest usage over the run, page cache included (which
    /// fills up to the limit in any mode that reads through it), bytes.
    #[serde(default)]
    pub usage_peak_bytes: u64,
    /// Why the machine disturbed the run (empty: it did not); a disturbed
    /// run is left out of the medians unless the setup keeps them.
    #[serde(default)]
    pub disturbed: Vec<String>,
}

/// The settings of the measurement, for the report's header.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Setup {
    pub keys: u64,
    pub value_bytes: usize,
    pub cgroup_bytes: u64,
    pub hot_keys: u64,
    pub rate: f64,
    pub readers: usize,
    pub baseline_secs: f64,
    pub stream_cap_secs: f64,
    pub chunk_bytes: u64,
    /// The leader's snapshot send budget, MiB/s; 0 for none.
    #[serde(default)]
    pub send_mib_per_sec: u64,
    /// The CPU priority the leader sent the snapshot at.
    pub send_priority: SendPriority,
    pub repeats: u32,
    pub modes: Vec<String>,
    pub psi_source: String,
    /// The CPU the joining node was pinned to, and the leader's CPUs then.
    #[serde(default)]
    pub joiner_cpu: Option<usize>,
    #[serde(default)]
    pub leader_cpus: Vec<usize>,
    /// The joining node's niceness (0: the leader's own).
    #[serde(default)]
    pub joiner_nice: i32,
    /// The joining node ran at the idle scheduling policy.
    #[serde(default)]
    pub joiner_idle: bool,
    /// Disturbed runs were run again up to this many times.
    #[serde(default)]
    pub max_reruns: u32,
    /// Disturbed runs count among the results.
    #[serde(default)]
    pub keep_disturbed: bool,
}

/// A metric's median and range over the runs of one mode.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(values: &mut [f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(|a, b| a.total_cmp(b));
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: values[0],
            max: values[n - 1],
        })
    }
}

/// The metrics the report summarises, by name, with how each is read from
/// a run.
type Metric = (&'static str, fn(&Run) -> f64);

const METRICS: &[Metric] = &[
    ("baseline read p50 (us)", |r| r.baseline.reads.latency.p50),
    ("baseline read p99 (us)", |r| r.baseline.reads.latency.p99),
    ("baseline read p99.9 (us)", |r| {
        r.baseline.reads.latency.p999
    }),
    ("stream read p50 (us)", |r| r.stream.reads.latency.p50),
    ("stream read p99 (us)", |r| r.stream.reads.latency.p99),
    ("stream read p99.9 (us)", |r| r.stream.reads.latency.p999),
    ("baseline service p99 (us)", |r| {
        r.baseline.reads.service.p99
    }),
    ("stream service p99 (us)", |r| r.stream.reads.service.p99),
    ("baseline reader lateness p99 (us)", |r| {
        r.baseline.reads.lateness.p99
    }),
    ("stream reader lateness p99 (us)", |r| {
        r.stream.reads.lateness.p99
    }),
    ("stream readers' CPU wait (ms)", |r| {
        r.stream.reads.reader_run_delay_s.unwrap_or(f64::NAN) * 1e3
    }),
    ("baseline refaults", |r| r.baseline.refaults as f64),
    ("stream refaults", |r| r.stream.refaults as f64),
    ("stream major faults", |r| r.stream.major_faults as f64),
    ("stream PSI some (ms)", |r| r.stream.psi_some_ms),
    ("stream PSI full (ms)", |r| r.stream.psi_full_ms),
    ("snapshot bytes", |r| r.snapshot_bytes as f64),
    ("snapshot duration (s)", |r| r.snapshot_secs),
    ("stream reads done", |r| r.stream.reads.done as f64),
    ("stream read errors", |r| r.stream.reads.errors as f64),
    ("baseline peak anon memory (MiB)", |r| {
        mib(r.baseline.anon_peak_bytes)
    }),
    ("stream peak anon memory (MiB)", |r| {
        mib(r.stream.anon_peak_bytes)
    }),
    ("peak cgroup usage, cache included (MiB)", |r| {
        mib(r.usage_peak_bytes)
    }),
];

fn mib(bytes: u64) -> f64 {
    (bytes as f64 / (1u64 << 20) as f64).round()
}

/// Every metric's spread, per mode, over the runs that count: the clean
/// ones, and the disturbed ones too if `keep_disturbed`.
pub fn summarise(
    runs: &[Run],
    modes: &[String],
    keep_disturbed: bool,
) -> BTreeMap<String, BTreeMap<String, Spread>> {
    let mut out = BTreeMap::new();
    for mode in modes {
        let of_mode: Vec<&Run> = runs
            .iter()
            .filter(|r| &r.mode == mode && (keep_disturbed || r.disturbed.is_empty()))
            .collect();
        let mut metrics = BTreeMap::new();
        for (name, get) in METRICS {
            // A metric the kernel did not report is NaN: left out, not 0.
            let mut values: Vec<f64> = of_mode
                .iter()
                .map(|r| get(r))
                .filter(|v| !v.is_nan())
                .collect();
            if let Some(s) = Spread::of(&mut values) {
                metrics.insert(name.to_string(), s);
            }
        }
        out.insert(mode.clone(), metrics);
    }
    out
}

fn show(s: Option<&Spread>) -> String {
    let Some(s) = s else {
        return "-".into();
    };
    let f = |v: f64| {
        if v.abs() >= 100.0 || v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    format!("{} ({}..{})", f(s.median), f(s.min), f(s.max))
}

/// The Markdown report.
pub fn markdown(setup: &Setup, runs: &[Run], notes: &[String]) -> String {
    let summary = summarise(runs, &setup.modes, setup.keep_disturbed);
    let mut md = String::new();
    let _ = writeln!(md, "# quietkv-raftkv bench-snapshot\n");
    let _ = writeln!(
        md,
        "A leader holding {} keys of {} B (about {} MiB) in a {} MiB memory cgroup serves {} reads/s of {} hot keys from {} threads (open loop, latency from the scheduled instant) while a new, empty node joins as a learner and receives a full snapshot. Baseline: {} s of reads without a snapshot. Modes: the snapshot file read (leader) and written (joiner) `buffered` through the page cache, or in the Backup I/O class's mode (`backup`: direct where the probe allows). {} round(s), modes interleaved; median (min..max). PSI from {}.\n",
        setup.keys,
        setup.value_bytes,
        (setup.keys * setup.value_bytes as u64) >> 20,
        setup.cgroup_bytes >> 20,
        setup.rate,
        setup.hot_keys,
        setup.readers,
        setup.baseline_secs,
        setup.repeats,
        setup.psi_source,
    );
    let budget = match setup.send_mib_per_sec {
        0 => "as fast as the chunks go".to_string(),
        r => format!("held to {r} MiB/s by the leader's send budget"),
    };
    let priority = match setup.send_priority {
        SendPriority::Idle => "from a thread of its own at the idle CPU priority",
        SendPriority::Normal => "from the leader's own threads",
    };
    let _ = writeln!(
        md,
        "The snapshot is sent in chunks of {} KiB, {budget}, {priority}.\n",
        setup.chunk_bytes >> 10
    );
    if setup.joiner_idle {
        let _ = writeln!(
            md,
            "The joining node runs at the idle scheduling policy (it takes a CPU only when the leader's threads leave one), as if it were another machine.\n"
        );
    }
    if setup.joiner_nice != 0 {
        let _ = writeln!(
            md,
            "The joining node runs at niceness {}, the leader at 0.\n",
            setup.joiner_nice
        );
    }
    if let Some(c) = setup.joiner_cpu {
        let _ = writeln!(
            md,
            "CPUs: the joining node on CPU {c} alone, the leader on {:?}, as if the joiner were another machine.\n",
            setup.leader_cpus
        );
    }
    let _ = writeln!(
        md,
        "A run the machine disturbed (CPU steal over {:.0} ms/s, other processes' CPU over {:.0} ms/s, or the disk held by the host over {:.0} ms, in its baseline or its stream) {}.\n",
        quietkv_bench::disturbance::MAX_STEAL_MS_PER_S,
        quietkv_bench::disturbance::MAX_OTHER_CPU_MS_PER_S,
        quietkv_bench::disturbance::MAX_DEVICE_STALL_MS,
        if setup.keep_disturbed {
            "counts among the results here, as asked (a smoke test), and is noted".to_string()
        } else {
            format!(
                "is listed below but left out of the medians, and run again ({} reruns allowed in all)",
                setup.max_reruns
            )
        }
    );
    let _ = write!(md, "| metric |");
    for m in &setup.modes {
        let _ = write!(md, " {m} |");
    }
    let _ = write!(md, "\n|---|");
    for _ in &setup.modes {
        let _ = write!(md, "---|");
    }
    md.push('\n');
    for (name, _) in METRICS {
        let _ = write!(md, "| {name} |");
        for m in &setup.modes {
            let _ = write!(md, " {} |", show(summary.get(m).and_then(|s| s.get(*name))));
        }
        md.push('\n');
    }
    let _ = writeln!(md, "\n## Runs\n");
    let _ = writeln!(
        md,
        "| mode | round | moved as | baseline p99.9 (us) | stream p99.9 (us) | stream refaults | snapshot (MiB) | duration (s) | peak anon: start / baseline / stream (MiB) | stream: steal, others' CPU (ms/s), longest disk hold (ms) | disturbed |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for r in runs {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.0} | {} | {:.1} | {:.2} | {} / {} / {} | {}, {}, {} | {} |",
            r.mode,
            r.round,
            r.transfer_mode,
            r.baseline.reads.latency.p999,
            r.stream.reads.latency.p999,
            r.stream.refaults,
            r.snapshot_bytes as f64 / (1 << 20) as f64,
            r.snapshot_secs,
            mib(r.start_anon_peak_bytes),
            mib(r.baseline.anon_peak_bytes),
            mib(r.stream.anon_peak_bytes),
            opt(r.stream.host.steal_ms_per_s),
            opt(r.stream.host.other_cpu_ms_per_s),
            opt(r.stream.host.device_longest_held_ms),
            if r.disturbed.is_empty() { "no" } else { "yes" },
        );
    }
    if !notes.is_empty() {
        let _ = writeln!(md, "\n## Notes\n");
        for n in notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    md
}

/// Writes report.md and report.json into `out`.
pub fn write(out: &Path, setup: &Setup, runs: &[Run], notes: &[String]) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let json = serde_json::json!({
        "setup": setup,
        "runs": runs,
        "summary": summarise(runs, &setup.modes, setup.keep_disturbed),
        "notes": notes,
    });
    let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    std::fs::write(out.join("report.json"), text)
        .map_err(|e| format!("writing {}: {e}", out.join("report.json").display()))?;
    std::fs::write(out.join("report.md"), markdown(setup, runs, notes))
        .map_err(|e| format!("writing {}: {e}", out.join("report.md").display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_is_the_median_and_range() {
        let s = Spread::of(&mut [3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(&mut [4.0, 1.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert!(Spread::of(&mut []).is_none());
    }

    #[test]
    fn phase_deltas_are_taken_between_the_counters() {
        let mut before = Counters::default();
        before.memory.workingset_refault_file = 10;
        before.psi.some_total_us = 1_000;
        let mut after = before;
        after.memory.workingset_refault_file = 25;
        after.psi.some_total_us = 4_500;
        after.memory.file = 7 << 20;
        let p = Phase::new(PhaseReads::default(), &before, &after);
        assert_eq!(p.refaults, 15);
        assert_eq!(p.psi_some_ms, 3.5);
        assert_eq!(p.cache_bytes_end, 7 << 20);
    }

    fn run_with_stream_secs(secs: f64, disturbed: bool) -> Run {
        let phase = Phase::new(
            PhaseReads::default(),
            &Counters::default(),
            &Counters::default(),
        );
        Run {
            mode: "backup".into(),
            round: 0,
            transfer_mode: "direct".into(),
            baseline: phase.clone(),
            stream: phase,
            snapshot_bytes: 1,
            snapshot_secs: secs,
            leader_transfer_read_bytes: 0,
            start_anon_peak_bytes: 0,
            usage_peak_bytes: 0,
            disturbed: if disturbed {
                vec!["CPU steal".into()]
            } else {
                Vec::new()
            },
        }
    }

    #[test]
    fn disturbed_runs_are_left_out_of_the_medians_unless_kept() {
        let runs = [
            run_with_stream_secs(10.0, false),
            run_with_stream_secs(1000.0, true),
            run_with_stream_secs(12.0, false),
        ];
        let modes = ["backup".to_string()];
        let duration = |keep| summarise(&runs, &modes, keep)["backup"]["snapshot duration (s)"];
        let clean = duration(false);
        assert_eq!((clean.median, clean.max), (11.0, 12.0));
        let kept = duration(true);
        assert_eq!((kept.median, kept.max), (12.0, 1000.0));
    }
}
