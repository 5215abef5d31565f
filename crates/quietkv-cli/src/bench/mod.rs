//! `quietkv bench`: the page-cache benchmark of PROTOCOL.md.
//!
//! Layout:
//! - [`metrics`]: parsers of /proc and /sys text, device lookup, iostat math
//! - [`sampler`]: per-second samples and per-phase deltas/rates
//! - [`cgroup`]: memory cgroup, PSI cgroup, interrupt flag
//! - [`loadgen`]: open-loop reader with HdrHistogram
//! - [`result`]: `ModeSpec`, `WorkerSpec`, `RunResult` (shared by experiments)
//! - [`runner`]: worker process in the cgroup, experiment registry
//! - [`report`], [`plot`]: report.md, report.json, PNGs
//! - [`e0`]: the no-engine reference experiment
//!
//! Adding an experiment (E1, E2, ...): write a worker function
//! `fn(&WorkerSpec, &AtomicBool) -> Result<RunResult, String>` that opens
//! the engine in `spec.dir` with `spec.mode.access(class)` per I/O class,
//! starts a [`sampler::Sampler`] with `spec.sampler` (plus an `ExtraFn` for
//! engine counters), marks phases, drives reads with
//! [`loadgen::run_open_loop`], and fills a [`result::RunResult`] (see
//! `e0::worker`); register it in [`runner::worker_fn`]; prepare its files in
//! the parent (like `e0::prepare`) and build an [`report::ExperimentReport`]
//! from the runs. Runner, cgroups, report and plots need no change.

// Parts of this API (cgroup and parser helpers, sampler accessors) are for
// the engine experiments E1/E2, which are added on top of it.
#![allow(dead_code)]

pub mod cgroup;
pub mod e0;
pub mod loadgen;
pub mod metrics;
pub mod plot;
pub mod report;
pub mod result;
pub mod runner;
pub mod sampler;

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use quietio::IoClass;

use self::cgroup::{install_interrupt_handler, interrupted};
use self::report::{ExperimentReport, Machine, ModeReport, Report};
use self::result::{CommonParams, ModeSpec, WorkerSpec};
use self::runner::{Runner, RunnerOptions};
use self::sampler::SamplerConfig;

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Experiment to run (E0: the no-engine reference).
    #[arg(long, default_value = "E0")]
    pub experiment: String,
    /// Modes to compare, run in turn (A B C, A B C, ...): buffered, direct,
    /// dontcache, fadvise, write-direct, read-direct, both-direct, all-direct.
    #[arg(
        long,
        default_value = "buffered,direct,dontcache",
        value_delimiter = ','
    )]
    pub modes: Vec<String>,
    /// Runs of each mode; the report shows the median and min..max.
    #[arg(long, default_value_t = 1)]
    pub repeats: u32,
    /// Seconds of the measured phase (background work running).
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Seconds of the baseline phase (no background work); default
    /// duration/3, at most 20.
    #[arg(long)]
    pub baseline: Option<f64>,
    /// Seconds of reads on schedule to warm the hot set before measuring.
    #[arg(long, default_value_t = 5.0)]
    pub warmup: f64,
    /// Memory cgroup limit in MiB for the measured process (0 = none).
    #[arg(long = "memory-limit", default_value_t = 256)]
    pub memory_limit_mib: u64,
    /// User reads per second (open loop, all reader threads together).
    #[arg(long = "read-rate", default_value_t = 2000.0)]
    pub read_rate: f64,
    /// Reader threads.
    #[arg(long, default_value_t = 1)]
    pub readers: usize,
    /// E0: size of the hot file in MiB.
    #[arg(long = "hot-mib", default_value_t = 30)]
    pub hot_mib: u64,
    /// E0: size of each background file in MiB.
    #[arg(long = "bg-file-mib", default_value_t = 512)]
    pub bg_file_mib: u64,
    /// E0: files the background read stream loops over.
    #[arg(long = "bg-read-files", default_value_t = 2)]
    pub bg_read_files: u32,
    /// E0: background read stream MiB/s (0 = unthrottled).
    #[arg(long = "bg-read-rate", default_value_t = 200)]
    pub bg_read_rate: u64,
    /// E0: background write stream MiB/s (0 = unthrottled).
    #[arg(long = "bg-write-rate", default_value_t = 200)]
    pub bg_write_rate: u64,
    /// Scratch directory for the benchmark's files (a subdirectory is
    /// created in it and removed afterwards; default: the current directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Where report.md, report.json and the plots go
    /// (default bench-results/<timestamp>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Do not drop the page cache before each mode.
    #[arg(long)]
    pub no_drop_caches: bool,
    /// throughput: keys to fill.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// throughput: value size in bytes.
    #[arg(long = "value-size", default_value_t = 4096)]
    pub value_size: usize,
    /// throughput: random point reads after the fill.
    #[arg(long = "point-reads", default_value_t = 100_000)]
    pub point_reads: u64,
}

/// Removes the scratch directory however the benchmark ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn machine(dir: &Path) -> Machine {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let mem_kb = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    let caps = quietio::probe(dir).ok();
    Machine {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        memory_bytes: mem_kb * 1024,
        filesystem: caps
            .as_ref()
            .map(|c| c.filesystem.clone())
            .unwrap_or_else(|| "unknown".into()),
        device: metrics::block_device_of(dir),
        dir: dir.display().to_string(),
    }
}

/// Fails before any run if a mode cannot work in `dir`.
fn check_modes(dir: &Path, modes: &[ModeSpec]) -> Result<(), String> {
    let env =
        quietio::IoEnv::open(dir, quietio::IoOptions::default()).map_err(|e| e.to_string())?;
    for m in modes {
        for class in [
            IoClass::UserRead,
            IoClass::CompactionRead,
            IoClass::CompactionWrite,
        ] {
            env.resolve_explicit(class, m.access(class))
                .map_err(|e| format!("mode {}: {e}", m.name))?;
        }
    }
    Ok(())
}

fn fmt_secs(s: f64) -> String {
    if s >= 120.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

/// `quietkv bench`.
pub fn run(args: BenchArgs) -> Result<(), String> {
    install_interrupt_handler();
    let experiment = args.experiment.to_ascii_uppercase();
    if experiment == "THROUGHPUT" {
        return run_throughput(&args);
    }
    if runner::worker_fn(&experiment).is_none() {
        return Err(format!(
            "unknown or not yet implemented experiment '{}' (available: E0)",
            args.experiment
        ));
    }
    let modes: Vec<ModeSpec> = args
        .modes
        .iter()
        .filter(|m| !m.trim().is_empty())
        .map(|m| ModeSpec::parse(m))
        .collect::<Result<_, _>>()?;
    if modes.is_empty() {
        return Err("no modes given".into());
    }
    if args.repeats == 0 || args.duration <= 0.0 || args.read_rate <= 0.0 {
        return Err("--repeats, --duration and --read-rate must be positive".into());
    }
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let scratch_dir = base.join(format!("quietkv-bench-scratch-{}", std::process::id()));
    std::fs::create_dir_all(&scratch_dir)
        .map_err(|e| format!("cannot create {}: {e}", scratch_dir.display()))?;
    let scratch = Scratch(scratch_dir.canonicalize().unwrap_or(scratch_dir));
    check_modes(&scratch.0, &modes)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(timestamp()));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;

    let mach = machine(&scratch.0);
    let load_start = loadavg();
    let limit = (args.memory_limit_mib > 0).then_some(args.memory_limit_mib << 20);
    let mut runner = Runner::new(RunnerOptions {
        memory_limit: limit,
        drop_caches: !args.no_drop_caches,
    });
    let baseline = args
        .baseline
        .unwrap_or((args.duration / 3.0).clamp(1.0, 20.0));
    let common = CommonParams {
        read_rate: args.read_rate,
        reader_threads: args.readers.max(1),
        warmup_s: args.warmup.max(0.0),
        baseline_s: baseline.max(0.0),
        duration_s: args.duration,
        memory_limit_bytes: runner.memory_limit(),
    };
    let p = e0::E0Params {
        hot_bytes: args.hot_mib << 20,
        bg_file_bytes: args.bg_file_mib << 20,
        bg_read_files: args.bg_read_files,
        bg_read_rate: args.bg_read_rate << 20,
        bg_write_rate: args.bg_write_rate << 20,
        block_size: 4096,
    };
    let t_prep = Instant::now();
    eprintln!(
        "quietkv bench: {experiment}: preparing {} MiB hot file and {} x {} MiB background files in {}",
        args.hot_mib,
        args.bg_read_files,
        args.bg_file_mib,
        scratch.0.display()
    );
    e0::prepare(&scratch.0, &p)?;
    eprintln!(
        "quietkv bench: prepared in {:.1} s",
        t_prep.elapsed().as_secs_f64()
    );

    let params = serde_json::json!({
        "hot_bytes": p.hot_bytes,
        "bg_file_bytes": p.bg_file_bytes,
        "bg_read_files": p.bg_read_files,
        "bg_read_bytes_per_s": p.bg_read_rate,
        "bg_write_bytes_per_s": p.bg_write_rate,
        "block_size": p.block_size,
        "read_rate": common.read_rate,
        "reader_threads": common.reader_threads,
        "warmup_s": common.warmup_s,
        "baseline_s": common.baseline_s,
        "duration_s": common.duration_s,
        "memory_limit_bytes": common.memory_limit_bytes,
        "repeats": args.repeats,
        "modes": modes,
    });
    let per_run = common.warmup_s + common.baseline_s + common.duration_s + 3.0;
    let total_runs = modes.len() as u32 * args.repeats;
    let mut reports: Vec<ModeReport> = modes
        .iter()
        .map(|m| ModeReport {
            name: m.name.clone(),
            runs: Vec::new(),
        })
        .collect();
    let block_device = metrics::block_device_of(&scratch.0);
    let mut done = 0u32;
    for repeat in 1..=args.repeats {
        for (mi, mode) in modes.iter().enumerate() {
            if interrupted() {
                return Err("interrupted; cgroups and scratch files removed".into());
            }
            let spec = WorkerSpec {
                experiment: experiment.clone(),
                mode: mode.clone(),
                repeat,
                repeats: args.repeats,
                dir: scratch.0.clone(),
                common: common.clone(),
                params: serde_json::to_value(&p).map_err(|e| e.to_string())?,
                sampler: SamplerConfig {
                    block_device: block_device.clone(),
                    interval_ms: 1000,
                    ..Default::default()
                },
            };
            eprintln!(
                "{} starting: cold cache, then warmup {} s, baseline {} s, measured {} s (ETA {} for {} runs left)",
                spec.label(),
                common.warmup_s,
                common.baseline_s,
                common.duration_s,
                fmt_secs(per_run * (total_runs - done) as f64),
                total_runs - done
            );
            let r = runner.run(spec).map_err(|e| {
                if interrupted() {
                    "interrupted; cgroups and scratch files removed".to_string()
                } else {
                    e
                }
            })?;
            eprintln!(
                "[{experiment} {} {repeat}/{}] done: p99 {:.0} us, p99.9 {:.0} us, reads {}/{}, background {:.0} MiB/s",
                mode.name,
                args.repeats,
                r.measured.latency.p99,
                r.measured.latency.p999,
                r.measured.done,
                r.measured.scheduled,
                r.background.mib_s()
            );
            reports[mi].runs.push(r);
            done += 1;
        }
    }

    let mut header = vec![
        (
            "Cgroup limit".to_string(),
            match runner.memory_limit() {
                Some(l) => format!("{} MiB (memory cgroup of the worker process)", l >> 20),
                None => "none".into(),
            },
        ),
        ("Hot set".into(), format!("{} MiB file, {} B random reads ({} blocks), buffered, pre-warmed", args.hot_mib, p.block_size, (p.hot_bytes / p.block_size).max(1))),
        (
            "User reads".into(),
            format!("{} reads/s open loop over {} thread(s), uniform keys", common.read_rate, common.reader_threads),
        ),
        (
            "Background work".into(),
            format!(
                "sequential read of {} x {} MiB files at {} + sequential write of {} MiB files at {}, in the mode under test (compaction read / write classes)",
                p.bg_read_files,
                args.bg_file_mib,
                rate_text(args.bg_read_rate),
                args.bg_file_mib,
                rate_text(args.bg_write_rate)
            ),
        ),
        (
            "Phases".into(),
            format!(
                "sync + drop caches, warm-up {} s, baseline {} s (no background work), measured {} s (background work)",
                common.warmup_s, common.baseline_s, common.duration_s
            ),
        ),
        (
            "Repeats".into(),
            if args.repeats == 1 {
                "1 (a single run is a smoke test, not a result)".into()
            } else {
                format!("{} per mode, interleaved; cells show median (min..max)", args.repeats)
            },
        ),
        (
            "Modes".into(),
            modes
                .iter()
                .map(|m| format!("{} = read {} / write {} / user {}", m.name, m.compaction_read, m.compaction_write, m.user_read))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    ];
    header.push((
        "Load average (1 min) at start / end".into(),
        format!(
            "{load_start} / {} (other processes compete for the CPUs: the baseline tail shows how much)",
            loadavg()
        ),
    ));
    header.push(("Finished".into(), timestamp() + " UTC"));
    let exp = ExperimentReport {
        id: experiment.clone(),
        title: "no-engine reference (hot-file reads beside sequential background streams)".into(),
        params,
        header,
        notes: runner.notes().to_vec(),
        modes: reports,
    };
    let report = Report {
        machine: mach,
        experiments: vec![exp],
    };
    write_outputs(&report, &out)?;
    println!("{}", report::markdown_table(&report.experiments[0]));
    for n in runner.notes() {
        println!("note: {n}");
    }
    println!("report: {}", out.join("report.md").display());
    println!("json:   {}", out.join("report.json").display());
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn rate_text(mib_s: u64) -> String {
    if mib_s == 0 {
        "full speed".into()
    } else {
        format!("{mib_s} MiB/s")
    }
}

/// Writes report.md, report.json and each experiment's plots into `out`.
pub fn write_outputs(report: &Report, out: &Path) -> Result<(), String> {
    let md = report::render_markdown(report);
    std::fs::write(out.join("report.md"), md).map_err(|e| e.to_string())?;
    let json =
        serde_json::to_string_pretty(&report::render_json(report)).map_err(|e| e.to_string())?;
    std::fs::write(out.join("report.json"), json).map_err(|e| e.to_string())?;
    for e in &report.experiments {
        let id = e.id.to_lowercase();
        plot::percentile_chart(e, &out.join(format!("{id}-percentiles.png")))?;
        plot::timeline_chart(e, &out.join(format!("{id}-p99-over-time.png")))?;
    }
    Ok(())
}

/// The engine throughput experiment (fill, random reads, compact_all per
/// compaction mode); no cgroup: it measures the engine, not the cache.
fn run_throughput(args: &BenchArgs) -> Result<(), String> {
    let modes: Vec<quietkv::AccessMode> = args
        .modes
        .iter()
        .map(|m| m.parse::<quietkv::AccessMode>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let scratch = Scratch(base.join(format!("quietkv-throughput-scratch-{}", std::process::id())));
    let params = crate::throughput::Params {
        keys: args.keys,
        value_size: args.value_size,
        reads: args.point_reads,
        modes,
        repeats: args.repeats,
        dir: scratch.0.clone(),
    };
    if params.keys == 0 || params.value_size < 8 || params.repeats == 0 {
        return Err("--keys and --repeats must be positive and --value-size at least 8".into());
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(timestamp()));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let progress = |msg: &str| eprintln!("[throughput] {msg}");
    let runs = crate::throughput::run(&params, &progress)?;
    let mach = machine(&scratch.0);
    let header = format!(
        "# quietkv engine throughput\n\nMachine: {}\n",
        serde_json::to_string(&mach).unwrap_or_default()
    );
    let md = crate::throughput::markdown(&params, &runs, &header);
    std::fs::write(out.join("report.md"), &md).map_err(|e| e.to_string())?;
    let json = serde_json::json!({"machine": mach, "experiment": "throughput", "runs": runs});
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&json).unwrap(),
    )
    .map_err(|e| e.to_string())?;
    println!("{md}");
    println!("report: {}", out.join("report.md").display());
    Ok(())
}
