//! E5 (seed 002, CASSANDRA-14466): 100% random point reads over a database
//! eight times the memory limit, with user reads `buffered` (the page cache
//! is their cache), `direct` (O_DIRECT, the engine's block cache sized from
//! the cgroup limit is their only cache) or `mmap` (tables mapped, reads
//! copy from the mapping; the page cache again). The seed saw, under a
//! heavy read load, kernel CPU -90%, throughput up to +80% and latency
//! -40-50% for O_DIRECT plus the application's own cache.
//!
//! Loads: closed loop with N reader threads (how much the machine serves),
//! and an open loop at a fixed rate (latency at the same offered load).
//! Every run starts from a fresh copy of a fully compacted source after
//! sync + drop caches, warms for `warmup_s` with the closed loop, then
//! measures. No writes, no compaction: only the read path and the caches.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cgroup::interrupted;
use crate::closed_loop::{run_closed_loop, ClosedLoopConfig};
use crate::engines::{BenchEngine, Counters, EngineMode, QuietkvConfig, QuietkvEngine, Tuning};
use crate::keys::{is_value_of, key};
use crate::loadgen::{percentile_curve, run_open_loop, LoadConfig, LoadResult};
use crate::report::{ExperimentReport, ModeReport, Report};
use crate::result::{timeline, CommonParams, PhaseResult, RunResult, WorkerSpec};
use crate::runner::{Runner, RunnerOptions};
use crate::sampler::{phase_metrics, ExtraFn, SamplerConfig};
use crate::scale::{e5_threads, mib, parse_size, preset, Overrides, Scale, MIB, VALUE_SIZE};
use crate::{fmt_secs, loadavg, machine, timestamp, write_outputs, BenchArgs, Scratch};

/// The modes of E5, in the report's order.
pub const MODES: [&str; 3] = ["buffered", "direct", "mmap"];

/// Closed-loop threads of the warm-up.
const WARMUP_THREADS: usize = 32;

/// The engine configuration of an E5 mode: only the user reads differ;
/// nothing else runs (no writes, no compaction).
pub fn mode_config(name: &str) -> Result<QuietkvConfig, String> {
    let user_read = match name.trim().to_ascii_lowercase().as_str() {
        "buffered" => "buffered",
        "direct" => "direct",
        "mmap" => "mmap",
        other => {
            return Err(format!(
                "unknown E5 mode '{other}' (expected buffered, direct or mmap)"
            ))
        }
    };
    Ok(QuietkvConfig {
        name: user_read.into(),
        user_read: user_read.into(),
        compaction_read: "buffered".into(),
        compaction_write: "buffered".into(),
        flush_write: "buffered".into(),
        wal_write: "buffered".into(),
        warm_output: false,
        wal_sync: None,
        wal_compression: None,
        wal_recycle_count: None,
        knobs: Default::default(),
    })
}

/// The block cache a mode gets under a memory limit: `direct` leaves the
/// size to the engine (its share of the cgroup limit); `buffered` and
/// `mmap`, whose cache is the page cache, keep a small one: the engine's
/// default 32 MiB beside a 1 GiB limit, scaled with the limit.
pub fn block_cache_bytes(mode: &str, limit: Option<u64>) -> Option<usize> {
    if mode == "direct" {
        return None;
    }
    Some(limit.map_or(32 << 20, |l| (l / 32) as usize))
}

/// How a run loads the database.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Load {
    Closed { threads: usize },
    Open { rate: f64, threads: usize },
}

impl Load {
    pub fn id(&self) -> String {
        match self {
            Load::Closed { threads } => format!("E5-closed{threads}"),
            Load::Open { .. } => "E5-open".into(),
        }
    }

    fn text(&self) -> String {
        match self {
            Load::Closed { threads } => format!(
                "closed loop: {threads} reader threads, each issuing its next get as soon as the last one returned (latency = service time)"
            ),
            Load::Open { rate, threads } => format!(
                "open loop at {rate} gets/s from a pool of {threads} reader threads; latency from the scheduled time"
            ),
        }
    }
}

/// What one E5 run needs beyond [`CommonParams`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct E5Params {
    pub keys: u64,
    pub value_size: usize,
    pub load: Load,
    /// Closed-loop threads of the warm-up.
    pub warmup_threads: usize,
}

fn extra_fn(db: &Arc<QuietkvEngine>) -> ExtraFn {
    let db = db.clone();
    Arc::new(move || {
        let s = db.db().stats().block_cache;
        serde_json::json!({
            "block_cache_hits": s.hits,
            "block_cache_misses": s.misses,
            "block_cache_usage": s.usage,
            "block_cache_pinned": s.pinned,
        })
    })
}

/// This process's major page faults so far (`/proc/self/stat` field 12):
/// for mmap reads, the page-cache misses.
fn major_faults() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = s.rsplit_once(')')?.1;
    // Fields after the command: state(3) ... majflt is field 12.
    after.split_whitespace().nth(9)?.parse().ok()
}

fn ratio(h: u64, m: u64) -> Option<f64> {
    (h + m > 0).then(|| h as f64 / (h + m) as f64)
}

/// The worker side of one E5 run.
pub fn worker(spec: &WorkerSpec, stop: &AtomicBool) -> Result<RunResult, String> {
    let p: E5Params =
        serde_json::from_value(spec.params.clone()).map_err(|e| format!("bad E5 params: {e}"))?;
    #[allow(irrefutable_let_patterns)]
    let EngineMode::Quietkv(config) = &spec.mode
    else {
        return Err("E5 runs quietkv only".into());
    };
    let c = &spec.common;
    let tuning = Tuning {
        create: false,
        layout: Some(QuietkvEngine::bench_layout()),
        block_cache_bytes: block_cache_bytes(&config.name, c.memory_limit_bytes),
        memtable_bytes: None,
        background_threads: Some(1),
        background_rate_limit_mib: 0,
    };
    let db = Arc::new(
        QuietkvEngine::open(&spec.dir, config, &tuning)
            .map_err(|e| format!("cannot open the run's database: {e}"))?,
    );
    let keys = p.keys.max(1);
    let value_size = p.value_size;
    let read = |k: u64| -> crate::loadgen::ReadResult {
        match db.get(&key(k)) {
            Ok(Some(v)) if is_value_of(&v, k, value_size) => Ok(None),
            Ok(Some(_)) => Err(format!("key {k}: wrong value")),
            Ok(None) => Err(format!("key {k}: not found")),
            Err(e) => Err(e),
        }
    };
    let sampler =
        crate::sampler::Sampler::start(spec.sampler.clone(), "warmup", Some(extra_fn(&db)));
    crate::progress_line!(
        "{} warm-up: {} s closed loop, {} threads",
        spec.label(),
        c.warmup_s,
        p.warmup_threads
    );
    if c.warmup_s > 0.0 {
        let w = ClosedLoopConfig {
            threads: p.warmup_threads,
            duration: Duration::from_secs_f64(c.warmup_s),
            keys,
            seed: 0xE5,
        };
        let r = run_closed_loop(&w, read, stop);
        if let Some(e) = r.first_error {
            return Err(format!("warm-up reads failed: {e}"));
        }
    }
    crate::progress_line!(
        "{} measured: {} for {} s",
        spec.label(),
        p.load.text(),
        c.duration_s
    );
    let i = sampler.mark("measured");
    let a: Counters = db.counters();
    let f0 = major_faults();
    let r: LoadResult = match p.load {
        Load::Closed { threads } => run_closed_loop(
            &ClosedLoopConfig {
                threads,
                duration: Duration::from_secs_f64(c.duration_s),
                keys,
                seed: 0x5EED,
            },
            read,
            stop,
        ),
        Load::Open { rate, threads } => run_open_loop(
            &LoadConfig {
                rate_per_s: rate,
                threads,
                duration: Duration::from_secs_f64(c.duration_s),
                keys,
                seed: 0x5EED,
                grace: Duration::from_secs_f64((c.duration_s * 0.5).max(2.0)),
            },
            read,
            stop,
        ),
    };
    let f1 = major_faults();
    let z: Counters = db.counters();
    let j = sampler.mark("end");
    let samples = sampler.stop();
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        return Err("stopped".into());
    }
    let kernel = phase_metrics(&samples, i, j);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let mut extra = std::collections::BTreeMap::new();
    extra.insert("ops_per_s".into(), r.done as f64 / r.elapsed_s.max(1e-9));
    if let Some(s) = kernel.cpu_sys_s {
        extra.insert("cpu.sys_pct".into(), s / (kernel.seconds * cpus) * 100.0);
    }
    if let Some(u) = kernel.cpu_user_s {
        extra.insert("cpu.user_pct".into(), u / (kernel.seconds * cpus) * 100.0);
    }
    if let (Some(za), Some(aa)) = (z.block_cache, a.block_cache) {
        let d = za.since(&aa);
        if let Some(h) = ratio(d.hits, d.misses) {
            extra.insert("block_cache_hit_ratio".into(), h);
        }
    }
    let bc = db.db().stats().block_cache;
    extra.insert("block_cache_mib".into(), bc.capacity as f64 / MIB as f64);
    extra.insert(
        "pinned_index_filter_mib".into(),
        bc.pinned as f64 / MIB as f64,
    );
    if let (Some(x), Some(y)) = (f0, f1) {
        if r.done > 0 {
            extra.insert(
                "major_faults_per_read".into(),
                y.saturating_sub(x) as f64 / r.done as f64,
            );
        }
    }
    let hits = z
        .user_read_page_cache
        .zip(a.user_read_page_cache)
        .map(|(z, a)| z.since(&a))
        .filter(|d| d.hits + d.misses > 0)
        .map(|d| (d.hits, d.misses));
    let measured = PhaseResult::new(&r, kernel, hits);
    let mut notes = Vec::new();
    notes.extend(crate::sampler::cpu_notes(&spec.sampler, &measured.kernel));
    if let Some(e) = &measured.first_error {
        notes.push(format!("{} user reads failed, first: {e}", measured.errors));
    }
    match Arc::try_unwrap(db) {
        Ok(db) => db.close()?,
        Err(_) => return Err("database still shared at the end of the run".into()),
    }
    Ok(RunResult {
        mode: spec.name.clone(),
        repeat: spec.repeat,
        curve: percentile_curve(&r.latency),
        measured,
        baseline: None,
        background: Default::default(),
        background_interval_s: (0.0, 0.0),
        timeline: timeline(&r, 0.0, false),
        samples,
        extra,
        notes,
        ..Default::default()
    })
}

/// Order of the modes in round `repeat` (1-based): rotated each round so
/// every mode runs in every slot.
fn round_order(n: usize, repeat: u32) -> impl Iterator<Item = usize> {
    let shift = (repeat as usize).saturating_sub(1);
    (0..n).map(move |i| (i + shift) % n)
}

/// The median of a metric of a mode in a section.
fn median(e: &ExperimentReport, mode: &str, key: &str) -> Option<f64> {
    let m = e.modes.iter().find(|m| m.name == mode)?;
    m.stats().get(key).map(|s| s.median)
}

/// Whether any run of `mode` has a tick-sampled CPU split that strays from
/// its exact runtime (see `cpu`).
fn split_aliased(e: &ExperimentReport, mode: &str) -> bool {
    e.modes.iter().filter(|m| m.name == mode).any(|m| {
        m.runs.iter().any(|r| {
            let k = &r.measured.kernel;
            match (k.cpu_user_s, k.cpu_sys_s, k.cpu_run_s) {
                (Some(u), Some(s), Some(run)) => crate::sampler::split_strays(u + s, run),
                _ => false,
            }
        })
    })
}

/// The seed's targets, judged from the measured medians of a closed-loop
/// section: direct >= 1.3x buffered's reads/s, system CPU >= 50% lower, p99
/// not worse. One line per non-buffered mode.
pub fn judge_section(e: &ExperimentReport) -> Vec<String> {
    let mut out = Vec::new();
    for mode in ["direct", "mmap"] {
        let get = |m: &str, k: &str| median(e, m, k);
        let (Some(ob), Some(om)) = (get("buffered", "ops_per_s"), get(mode, "ops_per_s")) else {
            continue;
        };
        let mut parts = vec![format!(
            "{mode}: {:.2}x the reads/s of buffered ({om:.0} vs {ob:.0})",
            om / ob.max(1e-9)
        )];
        let sampled_fairly = !["buffered", mode].iter().any(|m| split_aliased(e, m));
        let sys = get("buffered", "cpu.sys_s")
            .zip(get(mode, "cpu.sys_s"))
            .filter(|_| sampled_fairly);
        if let Some((sb, sm)) = sys {
            parts.push(format!(
                "system CPU {sm:.1} s vs {sb:.1} s ({:+.0}%)",
                (sm - sb) / sb.max(1e-9) * 100.0
            ));
        } else if let Some((rb, rm)) = get("buffered", "cpu.run_s").zip(get(mode, "cpu.run_s")) {
            parts.push(format!(
                "system CPU not measurable (tick samples in step with the load; see the run notes), exact CPU time {rm:.1} s vs {rb:.1} s"
            ));
        }
        let p99 = get("buffered", "read_latency_us.p99").zip(get(mode, "read_latency_us.p99"));
        if let Some((pb, pm)) = p99 {
            parts.push(format!("p99 {pm:.0} us vs {pb:.0} us"));
        }
        if mode == "direct" {
            let met = om >= 1.3 * ob
                && sys.is_some_and(|(sb, sm)| sm <= 0.5 * sb)
                && p99.is_some_and(|(pb, pm)| pm <= pb);
            parts.push(if met {
                "the seed's target (>= 1.3x reads/s, >= 50% less system CPU, p99 not worse) is met".into()
            } else {
                "the seed's target (>= 1.3x reads/s, >= 50% less system CPU, p99 not worse) is not met".into()
            });
        }
        out.push(parts.join("; "));
    }
    out
}

/// `quietkv bench --experiment E5`.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    let scale = Scale::parse(&args.scale)?;
    let overrides = Overrides {
        db_bytes: args.db_size.as_deref().map(parse_size).transpose()?,
        memory_limit_mib: args.memory_limit_mib,
        read_rate: args.read_rate,
        duration_s: args.duration,
        warmup_s: args.warmup,
        ..Default::default()
    };
    let pre = preset("E5", scale)?.apply("E5", &overrides);
    let names: Vec<String> = match &args.modes {
        Some(m) => m.iter().filter(|m| !m.trim().is_empty()).cloned().collect(),
        None => MODES.map(String::from).to_vec(),
    };
    let configs: Vec<QuietkvConfig> = names
        .iter()
        .map(|n| mode_config(n))
        .collect::<Result<_, _>>()?;
    if configs.is_empty() || args.repeats == 0 || pre.duration_s <= 0.0 || pre.read_rate <= 0.0 {
        return Err("E5 needs modes, and positive --repeats, --duration and --read-rate".into());
    }
    let threads = match &args.threads {
        Some(t) if !t.is_empty() => t.clone(),
        _ => e5_threads(scale),
    };
    if threads.contains(&0) {
        return Err("--threads must be positive".into());
    }
    let mut loads: Vec<Load> = threads
        .iter()
        .map(|&t| Load::Closed { threads: t })
        .collect();
    loads.push(Load::Open {
        rate: pre.read_rate,
        threads: args.readers.max(1),
    });

    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let base = base.canonicalize().unwrap_or(base);
    let scratch = Scratch(base.join(format!("quietkv-bench-scratch-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| format!("cannot create {}: {e}", scratch.0.display()))?;
    let modes: Vec<EngineMode> = configs.iter().cloned().map(EngineMode::Quietkv).collect();
    crate::check_modes(&scratch.0, &modes)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(timestamp()));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mach = machine(&scratch.0);
    let block_device = crate::metrics::block_device_of(&scratch.0);
    let progress = |m: &str| crate::progress_line!("quietkv bench: {m}");

    let reuse = args.reuse_source && !args.rebuild_source;
    let (src_dir, manifest, reused) =
        modes[0].prepare_source(&base, pre.db_bytes, VALUE_SIZE, reuse, &progress)?;
    let _source = SourceGuard {
        dir: src_dir.clone(),
        keep: args.keep_source,
    };
    let run_db = scratch.0.join("db");
    let limit = (pre.memory_limit_mib > 0).then_some(pre.memory_limit_mib * MIB);
    let load_start = loadavg();
    let per_run = pre.db_bytes as f64 / (400.0 * MIB as f64) + pre.warmup_s + pre.duration_s + 3.0;
    let mut runs_left = (loads.len() * modes.len()) as u32 * args.repeats;
    let mut experiments = Vec::new();
    for load in &loads {
        let mut runner = Runner::new(RunnerOptions {
            memory_limit: limit,
            drop_caches: !args.no_drop_caches,
        });
        let common = CommonParams {
            read_rate: match load {
                Load::Open { rate, .. } => *rate,
                Load::Closed { .. } => 0.0,
            },
            reader_threads: match load {
                Load::Open { threads, .. } | Load::Closed { threads } => *threads,
            },
            warmup_s: pre.warmup_s.max(0.0),
            baseline_s: 0.0,
            duration_s: pre.duration_s,
            memory_limit_bytes: runner.memory_limit(),
        };
        let params = E5Params {
            keys: manifest.spec.keys,
            value_size: manifest.spec.value_size,
            load: *load,
            warmup_threads: WARMUP_THREADS,
        };
        let mut reports: Vec<ModeReport> = names
            .iter()
            .zip(&modes)
            .map(|(n, m)| {
                ModeReport::new(n.to_ascii_lowercase(), Some(m.page_cache(&scratch.0)), 0)
            })
            .collect();
        for repeat in 1..=args.repeats {
            for mi in round_order(modes.len(), repeat) {
                if interrupted() {
                    return Err("interrupted; cgroups and scratch files removed".into());
                }
                let t = Instant::now();
                crate::source::copy_to(
                    &src_dir,
                    &manifest,
                    &run_db,
                    &QuietkvEngine::immutable_file,
                )?;
                let spec = WorkerSpec {
                    experiment: "E5".into(),
                    mode: modes[mi].clone(),
                    name: reports[mi].name.clone(),
                    repeat,
                    repeats: args.repeats,
                    dir: run_db.clone(),
                    common: common.clone(),
                    params: serde_json::to_value(&params).map_err(|e| e.to_string())?,
                    sampler: SamplerConfig {
                        block_device: block_device.clone(),
                        interval_ms: 1000,
                        ..Default::default()
                    },
                };
                crate::progress_line!(
                    "[{} {} {repeat}/{}] copied the source in {:.1} s (ETA {} for {} runs left)",
                    load.id(),
                    spec.name,
                    args.repeats,
                    t.elapsed().as_secs_f64(),
                    fmt_secs(per_run * runs_left as f64),
                    runs_left
                );
                crate::progress::start_run(spec.label(), per_run * runs_left as f64);
                let r = runner.run(spec).map_err(|e| {
                    if interrupted() {
                        "interrupted; cgroups and scratch files removed".to_string()
                    } else {
                        e
                    }
                })?;
                let _ = std::fs::remove_dir_all(&run_db);
                crate::progress_line!(
                    "[{} {} {repeat}/{}] done: {:.0} reads/s, p99 {:.0} us, system CPU {:.1} s",
                    load.id(),
                    reports[mi].name,
                    args.repeats,
                    r.extra.get("ops_per_s").copied().unwrap_or(0.0),
                    r.measured.latency.p99,
                    r.measured.kernel.cpu_sys_s.unwrap_or(f64::NAN)
                );
                reports[mi].runs.push(r);
                runs_left = runs_left.saturating_sub(1);
            }
        }
        let header = header(
            args, scale, &pre, load, &manifest, reused, &runner, &common, &names,
        );
        experiments.push(ExperimentReport {
            id: load.id(),
            title: "100% random point reads over a database larger than memory: buffered vs direct + block cache vs mmap user reads".into(),
            params: serde_json::json!({
                "experiment": "E5",
                "scale": scale,
                "db_bytes": manifest.total_bytes,
                "keys": manifest.spec.keys,
                "value_size": manifest.spec.value_size,
                "load": load,
                "warmup_s": common.warmup_s,
                "duration_s": common.duration_s,
                "memory_limit_bytes": common.memory_limit_bytes,
                "block_cache_bytes": names.iter().map(|n| (n.clone(), block_cache_bytes(n, common.memory_limit_bytes))).collect::<std::collections::BTreeMap<_, _>>(),
                "repeats": args.repeats,
                "modes": modes.iter().map(EngineMode::config_json).collect::<Vec<_>>(),
                "source_reused": reused,
            }),
            header,
            notes: runner.notes().to_vec(),
            modes: reports,
        });
    }
    let report = Report {
        machine: mach,
        experiments,
    };
    write_outputs(&report, &out)?;
    let mut verdict = String::new();
    for e in &report.experiments {
        for line in judge_section(e) {
            verdict.push_str(&format!("- {}: {line}\n", e.id));
        }
    }
    let scale_note = if scale == Scale::Quick {
        "Quick scale: the seed's targets are stated for the full scale (8 GiB in a 1 GiB cgroup, 3 repeats); these lines only say what this run measured."
    } else {
        "Full scale."
    };
    let tail = format!(
        "\n## Verdict\n\n{verdict}\n{scale_note}\n\nLoad average (1 min) at start / end: {load_start} / {}.\n",
        loadavg()
    );
    let mut md = crate::report::render_markdown(&report);
    md.push_str(&tail);
    std::fs::write(out.join("report.md"), md).map_err(|e| e.to_string())?;
    let mut j = crate::report::render_json(&report);
    j["verdict"] = serde_json::json!(verdict.lines().collect::<Vec<_>>());
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    for e in &report.experiments {
        println!("\n## {}\n", e.id);
        println!("{}", crate::report::markdown_table(e));
    }
    println!("{tail}");
    println!("report: {}", out.join("report.md").display());
    println!("json:   {}", out.join("report.json").display());
    Ok(())
}

/// Removes the source database unless `--keep-source`.
struct SourceGuard {
    dir: PathBuf,
    keep: bool,
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_dir_all(self.dir.with_extension("building"));
        } else {
            println!("source kept: {}", self.dir.display());
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn header(
    args: &BenchArgs,
    scale: Scale,
    pre: &crate::scale::Preset,
    load: &Load,
    m: &crate::source::Manifest,
    reused: bool,
    runner: &Runner,
    common: &CommonParams,
    names: &[String],
) -> Vec<(String, String)> {
    let limit = runner.memory_limit();
    let caches: Vec<String> = names
        .iter()
        .map(|n| match block_cache_bytes(n, limit) {
            Some(b) => format!("{n} {}", mib(b as u64)),
            None => format!(
                "{n} the engine's own sizing (block_cache_limit_share 0.5 of the cgroup limit{}, index and filter charged to it)",
                limit.map(|l| format!(" = {}", mib(l / 2))).unwrap_or_default()
            ),
        })
        .collect();
    vec![
        (
            "Scale".to_string(),
            match scale {
                Scale::Quick => "quick (a smoke-sized run on a shared, noisy 2-core machine; not the seed's scale)".into(),
                Scale::Full => "full".into(),
            },
        ),
        (
            "Cgroup limit".into(),
            match limit {
                Some(l) => format!(
                    "{} (memory cgroup of the worker process); dataset : memory = {:.1} : 1",
                    mib(l),
                    m.total_bytes as f64 / l as f64
                ),
                None => "none".into(),
            },
        ),
        (
            "Database".into(),
            format!(
                "{} keys x {} B values, {} on disk in {} files, fully compacted ({}); each run starts from a fresh copy after sync + drop caches",
                m.spec.keys,
                m.spec.value_size,
                mib(m.total_bytes),
                m.files.len(),
                if reused { "source reused: manifest matched" } else { "source built for this run" }
            ),
        ),
        (
            "User reads".into(),
            format!(
                "{}; keys uniform over the whole database; every value checked",
                load.text()
            ),
        ),
        ("Block cache".into(), caches.join("; ")),
        (
            "Phases".into(),
            format!(
                "warm-up {} s (closed loop, {WARMUP_THREADS} threads), measured {} s; no writes, no compaction",
                common.warmup_s, pre.duration_s
            ),
        ),
        (
            "Repeats".into(),
            if args.repeats == 1 {
                "1 (a single run is a smoke test, not a result)".into()
            } else {
                format!(
                    "{} per mode, interleaved, the order rotated each round; cells show median (min..max)",
                    args.repeats
                )
            },
        ),
        (
            "Counters".into(),
            "page-cache hit ratio: buffered reads attributed per read (cachestat / RWF_NOWAIT), n/a for direct (bypassed) and mmap (see major_faults_per_read); CPU % = CPU seconds of the worker over the phase's wall time x CPUs".into(),
        ),
        ("Finished".into(), timestamp() + " UTC"),
    ]
}
