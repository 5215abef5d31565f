//! `quietkv bench`: the page-cache benchmark of PROTOCOL.md, as a library;
//! the `quietkv` command's `bench` and `bench-worker` are a thin front on
//! [`run`] and [`runner::worker_main`].
//!
//! Layout:
//! - [`metrics`]: parsers of /proc and /sys text, device lookup, iostat math
//! - [`sampler`]: per-second samples and per-phase deltas/rates
//! - [`cgroup`]: memory cgroup, PSI cgroup, interrupt flag
//! - [`loadgen`]: open-loop readers (a pool on one schedule) with HdrHistogram
//! - [`engines`]: the [`engines::BenchEngine`] trait every experiment drives
//!   an engine through, each engine's configuration type and what it does
//!   to the page cache; [`keys`]: the keys and values every engine stores
//! - [`result`]: `WorkerSpec`, `RunResult` (shared by experiments)
//! - [`runner`]: worker process in the cgroup, experiment registry
//! - [`report`], [`plot`]: report.md, report.json, PNGs
//! - [`verdict`]: the same-work rule and the recommendation, from figures
//! - [`engine`]: the worker of E1/E2/E3, generic over the engine;
//!   [`suite`]: their parent side; [`source`]: each engine's source database
//! - [`e0`]: the no-engine reference experiment (quietio files in the access
//!   modes of quietkv's configuration of the same name: no engine to seam)
//! - [`throughput`]: fill, cold reads and a full compaction per
//!   configuration, generic over the engine
//!
//! The worker process re-executes the binary as `<exe> bench-worker`: a
//! front must route that hidden subcommand to [`runner::worker_main`].
//!
//! Adding an engine: implement [`engines::BenchEngine`] and its
//! [`engines::EngineConfig`], add a variant to [`engines::EngineMode`]; the
//! compiler then points at every dispatch (worker, source, E0).
//!
//! Adding an experiment (E1, E2, ...): write a worker function
//! `fn(&WorkerSpec, &AtomicBool) -> Result<RunResult, String>` that opens
//! the engine of `spec.mode` in `spec.dir` through [`engines::BenchEngine`],
//! starts a [`sampler::Sampler`] with `spec.sampler` (plus an `ExtraFn` for
//! engine counters), marks phases, drives reads with
//! [`loadgen::run_open_loop`], and fills a [`result::RunResult`] (see
//! `e0::worker`); register it in [`runner::worker_fn`]; prepare its files in
//! the parent (like `e0::prepare`) and build an [`report::ExperimentReport`]
//! from the runs. Runner, cgroups, report and plots need no change.

pub mod cgroup;
pub mod closed_loop;
pub mod cpu;
pub mod disturbance;
pub mod e0;
pub mod e4;
pub mod e5;
pub mod engine;
pub mod engines;
pub mod keys;
pub mod loadgen;
pub mod metrics;
pub mod peers;
pub mod plot;
pub mod progress;
pub mod report;
pub mod result;
pub mod runner;
pub mod sampler;
pub mod scale;
pub mod source;
pub mod suite;
pub mod throughput;
pub mod verdict;

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Args;

use self::cgroup::{install_interrupt_handler, interrupted};
use self::engines::{engine_count, EngineMode, QuietkvConfig};
use self::report::{ExperimentReport, Machine, ModeReport, Report};
use self::result::{CommonParams, WorkerSpec};
use self::runner::{Runner, RunnerOptions};
use self::sampler::SamplerConfig;

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Experiments to run, comma-separated: E1, E2, E3 (engine), E0 (the
    /// no-engine reference), E4 (WAL modes, write-only), E5 (direct user
    /// reads; modes buffered, direct, mmap), throughput. Default: E1.
    #[arg(long)]
    pub experiment: Option<String>,
    /// Modes to compare, run in turn (A B C, A B C, ...): buffered, direct,
    /// dontcache, fadvise, write-direct, read-direct, both-direct, all-direct,
    /// auto (the engine's defaults). Default: buffered,auto (E0:
    /// buffered,direct,dontcache; throughput: buffered,direct).
    #[arg(long, value_delimiter = ',')]
    pub modes: Option<Vec<String>>,
    /// Engines to run, comma-separated: quietkv, rocksdb, fjall (the peers
    /// need the Cargo features of the same names). Each runs its default
    /// configurations (quietkv: --modes or the default list; RocksDB: the
    /// five of PR #14743; fjall: buffered) unless --modes names some as
    /// `engine:config`. Modes are named `engine:config` when more than one
    /// engine runs, and interleaved across engines. Default: quietkv.
    #[arg(long, value_delimiter = ',')]
    pub engines: Option<Vec<String>>,
    /// Preset sizes of E1/E2/E3 (PROTOCOL.md): quick (2 GiB db, 256 MiB
    /// cgroup, minutes) or full (8 GiB db, 1 GiB cgroup). Flags override.
    #[arg(long, default_value = "quick")]
    pub scale: String,
    /// Runs of each mode, interleaved; the report shows the median and
    /// min..max (a single run is a smoke test, not a result).
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// E1/E2/E3: runs the machine disturbed (CPU steal, other processes'
    /// CPU, a baseline far off; see docs/disturbed-runs.md) are left out of
    /// the medians and run again, at most this many times per report
    /// section. A mode left with fewer clean runs than --repeats is not
    /// ranked.
    #[arg(long = "max-reruns", default_value_t = 3)]
    pub max_reruns: u32,
    /// Keep runs the machine disturbed among the runs (each noted in the
    /// report) instead of leaving them out: for checking that the bench
    /// works on a busy machine, never for figures.
    #[arg(long = "keep-disturbed")]
    pub keep_disturbed: bool,
    /// Seconds of the measured phase (background work running); E1/E3: the
    /// cap of the phase, which lasts as long as the compaction. Default:
    /// E0 60, else the scale's.
    #[arg(long)]
    pub duration: Option<f64>,
    /// E1/E3: seconds of reads after the compaction's last install, when
    /// reads meet the new tables; reported as the "after" phase beside
    /// "during" and the whole window. Default: at least as long as the
    /// compaction can take (the database read and written at the throttle,
    /// or at 400 MiB/s unthrottled), and at least 5 s (quick) or 60 s
    /// (full): quick 10 s, full 60 s unthrottled and 256 s at 64 MiB/s.
    #[arg(long)]
    pub after: Option<f64>,
    /// Seconds of the baseline phase (no background work); default
    /// duration/3, at most 20.
    #[arg(long)]
    pub baseline: Option<f64>,
    /// Seconds of reads on schedule to warm the hot set before measuring.
    /// Default: E0 5, else the scale's.
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Memory cgroup limit in MiB for the measured process (0 = none).
    /// Default: E0 256, else the scale's.
    #[arg(long = "memory-limit")]
    pub memory_limit_mib: Option<u64>,
    /// User reads per second (open loop, all reader threads together).
    #[arg(long = "read-rate")]
    pub read_rate: Option<f64>,
    /// E1/E2/E3: hot-set sizes in keys of 4 KiB values, comma-separated
    /// (one report section each); see --hot-layout for which keys.
    #[arg(long = "hot-keys", value_delimiter = ',')]
    pub hot_keys: Option<Vec<u64>>,
    /// E1/E2/E3: where the hot keys lie: `scattered` (default: a fixed
    /// pseudo-random set spread over the whole key space, the same for
    /// every engine) or `contiguous` (keys [0, H)).
    #[arg(long = "hot-layout", default_value = "scattered")]
    pub hot_layout: String,
    /// E1/E2/E3: database size (2G, 512M, 16MiB; a plain number is MiB).
    #[arg(long = "db-size")]
    pub db_size: Option<String>,
    /// E2: user write rate in MiB/s (paced).
    #[arg(long = "write-rate")]
    pub write_rate: Option<f64>,
    /// E1/E3: compaction I/O limits in MiB/s, comma-separated (0 =
    /// unthrottled; one report section each).
    #[arg(long, value_delimiter = ',')]
    pub throttle: Option<Vec<u64>>,
    /// E1/E3: the measured phase lasts at least this many seconds even if
    /// the compaction is done sooner.
    #[arg(long = "min-phase", default_value_t = 1.0)]
    pub min_phase: f64,
    /// E1/E2/E3: block cache of the engine in MiB. Small, so user reads
    /// depend on the page cache (an 8 MiB cache would hold E1 quick's
    /// whole 8 MiB hot set).
    #[arg(long = "block-cache-mib", default_value_t = 1)]
    pub block_cache_mib: u64,
    /// E1/E2/E3: memtable size in MiB (it counts against the cgroup).
    #[arg(long = "memtable-mib", default_value_t = 16)]
    pub memtable_mib: u64,
    /// Reuse a source database whose manifest matches (default true).
    #[arg(long = "reuse-source", default_value_t = true, action = clap::ArgAction::Set)]
    pub reuse_source: bool,
    /// Build the source database again even if one matches.
    #[arg(long = "rebuild-source")]
    pub rebuild_source: bool,
    /// Keep the source database in --dir after the run (else removed).
    #[arg(long = "keep-source")]
    pub keep_source: bool,
    /// Reader threads of the open-loop load generator: a pool in which each
    /// thread takes the next scheduled read (1 = a single reader, where one
    /// slow read delays every read scheduled behind it).
    #[arg(long, default_value_t = 8)]
    pub readers: usize,
    /// E5: closed-loop reader thread counts, comma-separated (one report
    /// section each). Default: 32 (full scale: 1,8,32,128).
    #[arg(long, value_delimiter = ',')]
    pub threads: Option<Vec<usize>>,
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
    /// E4: closed-loop writer threads (the seed's 32).
    #[arg(long, default_value_t = 32)]
    pub writers: usize,
    /// E4: value size in bytes (the seed's stress command wrote 818).
    #[arg(long = "record-size", default_value_t = 818)]
    pub record_size: usize,
    /// E4: the share of each value that is random bytes, the rest
    /// repeating them (as db_bench's --compression_ratio): 1.0 (the
    /// default) cannot be compressed, 0.5 compresses to about half. Only
    /// compressible values let the lz4/zstd WAL modes write fewer bytes.
    #[arg(long = "value-compression-ratio", default_value_t = 1.0)]
    pub value_compression_ratio: f64,
    /// E4: writes per run (the run also ends after --duration). Default:
    /// quick unlimited (30 s a run), full 2,000,000.
    #[arg(long)]
    pub writes: Option<u64>,
}

/// Removes the scratch directory however the benchmark ends.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn timestamp() -> String {
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

pub(crate) fn machine(dir: &Path) -> Machine {
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

/// Each mode's page-cache use as `name = compaction read ... / ... / user
/// read ...`, joined by `; `, with what a choice left to the engine
/// resolves to in `dir`.
pub(crate) fn describe_modes(dir: &Path, modes: &[EngineMode]) -> String {
    let engines = engine_count(modes);
    modes
        .iter()
        .map(|m| {
            format!(
                "{} = {}",
                m.report_name(engines),
                m.page_cache(dir).describe()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The modes' report names, in order.
pub(crate) fn report_names(modes: &[EngineMode]) -> Vec<String> {
    let engines = engine_count(modes);
    modes.iter().map(|m| m.report_name(engines)).collect()
}

/// Each mode's page-cache use in `dir`, by report name, for the verdict.
pub(crate) fn page_cache_by_name(
    dir: &Path,
    modes: &[EngineMode],
) -> std::collections::BTreeMap<String, engines::PageCacheUse> {
    report_names(modes)
        .into_iter()
        .zip(modes.iter().map(|m| m.page_cache(dir)))
        .collect()
}

/// Parses `--modes` (`config` or `engine:config`), skipping empty names.
pub(crate) fn parse_modes(names: &[String]) -> Result<Vec<EngineMode>, String> {
    names
        .iter()
        .filter(|m| !m.trim().is_empty())
        .map(|m| EngineMode::parse(m))
        .collect()
}

/// The modes of a run: without `--engines`, `--modes` (or
/// `quietkv_default`) as given; with it, each listed engine's modes from
/// `--modes` (`engine:config`; bare names are quietkv's) or else its
/// defaults, merged round-robin across engines so that no engine's runs
/// bunch together. An engine this binary lacks is an error saying which
/// feature builds it.
pub(crate) fn engine_modes(
    args: &BenchArgs,
    quietkv_default: &[&str],
    rocksdb_default: &[&str],
) -> Result<Vec<EngineMode>, String> {
    let given = match &args.modes {
        Some(m) => parse_modes(m)?,
        None => Vec::new(),
    };
    let Some(engines) = &args.engines else {
        if args.modes.is_none() {
            if let Some(how) = engines::how_to_build_peers() {
                crate::progress_line!("quietkv bench: {how}");
            }
            return parse_modes(
                &quietkv_default
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>(),
            );
        }
        return Ok(given);
    };
    let engines: Vec<String> = engines
        .iter()
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .collect();
    if let Some(m) = given
        .iter()
        .find(|m| !engines.iter().any(|e| e == m.engine()))
    {
        return Err(format!(
            "mode {}:{} names an engine not in --engines {}",
            m.engine(),
            m.config_name(),
            engines.join(",")
        ));
    }
    let mut per_engine = Vec::new();
    for e in &engines {
        let mine: Vec<EngineMode> = given.iter().filter(|m| m.engine() == e).cloned().collect();
        per_engine.push(if mine.is_empty() {
            EngineMode::defaults_of(e, quietkv_default, rocksdb_default)?
        } else {
            mine
        });
    }
    let longest = per_engine.iter().map(Vec::len).max().unwrap_or(0);
    Ok((0..longest)
        .flat_map(|i| per_engine.iter().filter_map(move |v| v.get(i).cloned()))
        .collect())
}

/// The header line of the user reads' load generator.
pub(crate) fn readers_text(common: &CommonParams) -> String {
    let pool = if common.reader_threads > 1 {
        format!(
            "from a pool of {} reader threads: each takes the next scheduled read, so a slow read does not hold back the ones scheduled after it",
            common.reader_threads
        )
    } else {
        "from a single reader thread (--readers 1): a slow read delays every read scheduled after it".to_string()
    };
    format!(
        "open loop at {} reads/s {pool}; latency runs from the scheduled time, and the readers' own lateness (scheduled to issued) has its own rows",
        common.read_rate
    )
}

/// Fails before any run if a mode cannot work in `dir`.
pub(crate) fn check_modes(dir: &Path, modes: &[EngineMode]) -> Result<(), String> {
    modes.iter().try_for_each(|m| m.check(dir))
}

pub(crate) fn fmt_secs(s: f64) -> String {
    if s >= 120.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

/// What `quietkv bench` runs without `--experiment`: E1 at quick scale,
/// `auto` against buffered, 3 interleaved runs each, in about five
/// minutes (with reruns of disturbed runs, well under ten); E2 and the
/// other modes on request.
pub const DEFAULT_EXPERIMENTS: &str = "E1";

/// `quietkv bench`.
pub fn run(mut args: BenchArgs) -> Result<(), String> {
    install_interrupt_handler();
    let list = args
        .experiment
        .clone()
        .unwrap_or_else(|| DEFAULT_EXPERIMENTS.into());
    let exps: Vec<String> = list
        .split(',')
        .map(|e| e.trim().to_ascii_uppercase())
        .filter(|e| !e.is_empty())
        .collect();
    if exps == ["THROUGHPUT"] {
        return run_throughput(&args);
    }
    if exps == ["E4"] {
        return run_e4(&args);
    }
    if exps == ["E5"] {
        return e5::run(&args);
    }
    if exps.iter().any(|e| e == "E0")
        && args
            .engines
            .iter()
            .flatten()
            .any(|e| !e.trim().eq_ignore_ascii_case("quietkv"))
    {
        return Err("E0 has no engine: --engines other than quietkv do not apply".into());
    }
    if exps == ["E0"] {
        args.modes.get_or_insert_with(|| {
            ["buffered", "direct", "dontcache"]
                .map(String::from)
                .to_vec()
        });
        return run_e0(args, "E0".into());
    }
    if let Some(bad) = exps
        .iter()
        .find(|e| !matches!(e.as_str(), "E1" | "E2" | "E3"))
    {
        return Err(format!(
            "unknown or not yet implemented experiment '{bad}' (available: E1, E2, E3, E0, E4, E5, throughput; E0, E4, E5 and throughput run alone)"
        ));
    }
    suite::run(&args, &exps)
}

fn run_e0(args: BenchArgs, experiment: String) -> Result<(), String> {
    let duration = args.duration.unwrap_or(60.0);
    let read_rate = args.read_rate.unwrap_or(2000.0);
    let memory_limit_mib = args.memory_limit_mib.unwrap_or(256);
    let warmup = args.warmup.unwrap_or(5.0);
    let modes = parse_modes(args.modes.as_deref().unwrap_or_default())?;
    if modes.iter().any(|m| !matches!(m, EngineMode::Quietkv(_))) {
        return Err(
            "E0 has no engine: its modes are quietio's access modes (quietkv's configurations)"
                .into(),
        );
    }
    let names = report_names(&modes);
    if modes.is_empty() {
        return Err("no modes given".into());
    }
    if args.repeats == 0 || duration <= 0.0 || read_rate <= 0.0 {
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
    let limit = (memory_limit_mib > 0).then_some(memory_limit_mib << 20);
    let mut runner = Runner::new(RunnerOptions {
        memory_limit: limit,
        drop_caches: !args.no_drop_caches,
    });
    let baseline = args.baseline.unwrap_or((duration / 3.0).clamp(1.0, 20.0));
    let common = CommonParams {
        read_rate,
        reader_threads: args.readers.max(1),
        warmup_s: warmup.max(0.0),
        baseline_s: baseline.max(0.0),
        duration_s: duration,
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
    crate::progress_line!(
        "quietkv bench: {experiment}: preparing {} MiB hot file and {} x {} MiB background files in {}",
        args.hot_mib,
        args.bg_read_files,
        args.bg_file_mib,
        scratch.0.display()
    );
    e0::prepare(&scratch.0, &p)?;
    crate::progress_line!(
        "quietkv bench: prepared in {:.1} s",
        t_prep.elapsed().as_secs_f64()
    );

    let params = serde_json::json!({
        "experiment": "E0",
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
        "modes": modes.iter().map(EngineMode::config_json).collect::<Vec<_>>(),
    });
    let per_run = common.warmup_s + common.baseline_s + common.duration_s + 3.0;
    let total_runs = modes.len() as u32 * args.repeats;
    let page_cache = page_cache_by_name(&scratch.0, &modes);
    let mut reports: Vec<ModeReport> = names
        .iter()
        .map(|n| ModeReport::new(n.clone(), page_cache.get(n).cloned(), 0))
        .collect();
    let block_device = metrics::block_device_of(&scratch.0);
    let mut done = 0u32;
    for repeat in 1..=args.repeats {
        // Each round starts with another mode, as E1-E3 do: a slot's own
        // effect (a warmer host cache, a later write-back) then falls on
        // every mode alike.
        for mi in crate::suite::round_order(modes.len(), repeat) {
            let mode = &modes[mi];
            if interrupted() {
                return Err("interrupted; cgroups and scratch files removed".into());
            }
            let spec = WorkerSpec {
                experiment: experiment.clone(),
                mode: mode.clone(),
                name: names[mi].clone(),
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
            crate::progress_line!(
                "{} starting: cold cache, then warmup {} s, baseline {} s, measured {} s (ETA {} for {} runs left)",
                spec.label(),
                common.warmup_s,
                common.baseline_s,
                common.duration_s,
                fmt_secs(per_run * (total_runs - done) as f64),
                total_runs - done
            );
            progress::start_run(spec.label(), per_run * (total_runs - done) as f64);
            let r = runner.run(spec).map_err(|e| {
                if interrupted() {
                    "interrupted; cgroups and scratch files removed".to_string()
                } else {
                    e
                }
            })?;
            crate::progress_line!(
                "[{experiment} {} {repeat}/{}] done: p99 {:.0} us, p99.9 {:.0} us, reads {}/{}, background {:.0} MiB/s",
                names[mi],
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
            format!("{}, uniform keys", readers_text(&common)),
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
        ("Modes".into(), describe_modes(&scratch.0, &modes)),
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
    let verdict = write_outputs_with_verdict(
        &report,
        &out,
        "E0 has no engine: it shows what the kernel allows, the ceiling of the engine experiments.",
    )?;
    println!("{}", report::markdown_table(&report.experiments[0]));
    let j = verdict::judge(&verdict::figures_of(&report.experiments[0]));
    for m in j.not_same_work() {
        if let Some(line) = verdict::not_same_work_line(&j, m) {
            println!("Not the same work: {line}");
        }
    }
    for line in report::readers_behind(&report.experiments[0]) {
        println!("Readers fell behind: {line}");
    }
    for n in runner.notes() {
        println!("note: {n}");
    }
    println!("\nVerdict: {verdict}\n");
    println!("report: {}", out.join("report.md").display());
    println!("json:   {}", out.join("report.json").display());
    Ok(())
}

pub(crate) fn loadavg() -> String {
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

/// [`write_outputs`], then the verdict (same-work rule included) appended
/// to report.md as its own section, followed by `tail`, and to report.json
/// under `verdict`. Returns the verdict.
pub fn write_outputs_with_verdict(
    report: &Report,
    out: &Path,
    tail: &str,
) -> Result<String, String> {
    write_outputs(report, out)?;
    let verdict = if report.experiments.iter().any(peers::is_multi_engine) {
        peers::verdict(&report.experiments)
    } else {
        verdict::verdict(&report.experiments)
    };
    let mut md = report::render_markdown(report);
    md.push_str(&format!("\n## Verdict\n\n{verdict}\n\n{tail}\n"));
    std::fs::write(out.join("report.md"), md).map_err(|e| e.to_string())?;
    let mut j = report::render_json(report);
    j["verdict"] = serde_json::json!(verdict);
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    Ok(verdict)
}

/// E4: the write path per WAL mode, sync policy and compression, on the
/// scratch directory's file system and on a loop-mounted xfs image.
fn run_e4(args: &BenchArgs) -> Result<(), String> {
    let full = match args.scale.as_str() {
        "quick" => false,
        "full" => true,
        other => return Err(format!("unknown --scale '{other}' (quick or full)")),
    };
    let xfs_missing = e4::XfsMount::unavailable_reason();
    let names = args
        .modes
        .clone()
        .unwrap_or_else(|| e4::default_modes(xfs_missing.is_none()));
    let modes: Vec<e4::WalConfig> = names
        .iter()
        .map(|m| e4::WalConfig::parse(m))
        .collect::<Result<_, _>>()?;
    if let (Some(why), true) = (&xfs_missing, modes.iter().any(|m| m.fs == e4::Fs::Xfs)) {
        return Err(format!("E4 xfs modes cannot run here: {why}"));
    }
    if args.writers == 0 || args.record_size == 0 || args.repeats == 0 {
        return Err("--writers, --record-size and --repeats must be positive".into());
    }
    let ratio = args.value_compression_ratio;
    if !(ratio > 0.0 && ratio <= 1.0) {
        return Err(format!(
            "--value-compression-ratio must be in (0, 1], not {ratio}"
        ));
    }
    let params = e4::Params {
        writers: args.writers,
        value_size: args.record_size,
        value_compression_ratio: ratio,
        key_space: 10_000_000,
        writes: args
            .writes
            .unwrap_or(if full { 2_000_000 } else { u64::MAX }),
        duration: std::time::Duration::from_secs_f64(
            args.duration
                .unwrap_or(if full { 900.0 } else { 30.0 })
                .max(0.1),
        ),
        repeats: args.repeats,
        memtable_bytes: (args.memtable_mib as usize) << 20,
        xfs_image_bytes: 16 << 30,
    };
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let scratch = Scratch(base.join(format!("quietkv-e4-scratch-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| format!("cannot create {}: {e}", scratch.0.display()))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(timestamp()));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let progress = |msg: &str| crate::progress_line!("[E4] {msg}");
    if let Some(why) = &xfs_missing {
        if args.modes.is_none() {
            progress(&format!("xfs skipped: {why}"));
        }
    }
    let runs = e4::run::<engines::QuietkvEngine>(&params, &modes, &scratch.0, &progress)?;
    let mach = machine(&scratch.0);
    let header = format!(
        "# quietkv E4: commit-log modes\n\nMachine: {}\n",
        serde_json::to_string(&mach).unwrap_or_default()
    );
    let md = e4::markdown(&params, &modes, &runs, &header);
    let json = serde_json::json!({
        "machine": mach,
        "experiments": [e4::json(&params, &modes, &runs)],
    });
    write_plain_report(&out, &md, &json)
}

/// Writes report.md and report.json of an experiment without plots (E4,
/// throughput) into `out` and prints the table and where it is.
fn write_plain_report(out: &Path, md: &str, json: &serde_json::Value) -> Result<(), String> {
    std::fs::write(out.join("report.md"), md).map_err(|e| e.to_string())?;
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(json).unwrap(),
    )
    .map_err(|e| e.to_string())?;
    println!("{md}");
    println!("report: {}", out.join("report.md").display());
    Ok(())
}

/// RocksDB's configurations in the engine experiments unless --modes
/// names some: the five of PR #14743, tuned, and the seed's own recipe.
pub(crate) const ROCKSDB_MODES: [&str; 6] = [
    "buffered",
    "write-direct",
    "read-direct",
    "both-direct",
    "all-direct",
    "seed-all-direct",
];

/// The engine throughput experiment (fill, random reads, compact_all per
/// configuration, every engine of --engines); no cgroup: it measures the
/// engine, not the cache.
fn run_throughput(args: &BenchArgs) -> Result<(), String> {
    // quietkv's configurations set compaction alone (the rest `auto`).
    let modes: Vec<EngineMode> =
        engine_modes(args, &["buffered", "direct"], &["buffered", "both-direct"])?
            .into_iter()
            .map(|m| match m {
                EngineMode::Quietkv(c) => {
                    QuietkvConfig::parse_compaction_only(&c.name).map(EngineMode::Quietkv)
                }
                #[allow(unreachable_patterns)]
                other => Ok(other),
            })
            .collect::<Result<_, _>>()?;
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let scratch = Scratch(base.join(format!("quietkv-throughput-scratch-{}", std::process::id())));
    let params = throughput::Params {
        keys: args.keys,
        value_size: args.value_size,
        reads: args.point_reads,
        modes: report_names(&modes),
        repeats: args.repeats,
        dir: scratch.0.clone(),
    };
    if params.keys == 0 || params.value_size < 8 || params.repeats == 0 {
        return Err("--keys and --repeats must be positive and --value-size at least 8".into());
    }
    if modes.is_empty() {
        return Err("no modes given".into());
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(timestamp()));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    std::fs::create_dir_all(&params.dir)
        .map_err(|e| format!("cannot create {}: {e}", params.dir.display()))?;
    let progress = |msg: &str| crate::progress_line!("[throughput] {msg}");
    // Interleaved (A B C, B C A, ...): the order rotates each round as in
    // the engine experiments.
    let mut runs = Vec::new();
    for r in 0..params.repeats {
        for i in 0..modes.len() {
            let mi = (i + r as usize) % modes.len();
            let name = &params.modes[mi];
            runs.push(engines::dispatch!(&modes[mi], |c: E| {
                throughput::run_one::<E>(&params, c, name, r, &progress)
            })?);
        }
    }
    let mach = machine(&scratch.0);
    let engines_line = match engines::how_to_build_peers() {
        Some(how) if engine_count(&modes) == 1 => format!("\nEngines: quietkv ({how})\n"),
        _ => String::new(),
    };
    let header = format!(
        "# quietkv engine throughput\n\nMachine: {}\n{engines_line}",
        serde_json::to_string(&mach).unwrap_or_default()
    );
    let md = throughput::markdown(&params, &runs, &header);
    let same_work = throughput::same_work_lines(&throughput::judge_compaction(&params, &runs));
    let json = serde_json::json!({
        "machine": mach,
        "experiment": "throughput",
        "modes": params.modes.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>(),
        "runs": runs,
        "same_work": same_work,
    });
    write_plain_report(&out, &md, &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modes_line_reads_as_before_the_engine_seam() {
        // The README's results quote these lines; a quietkv-only run keeps
        // its bare mode names and its per-direction wording.
        let dir = tempfile::tempdir().unwrap();
        let modes =
            parse_modes(&["buffered".into(), " ".into(), "write-direct+warm".into()]).unwrap();
        assert_eq!(report_names(&modes), ["buffered", "write-direct+warm"]);
        assert_eq!(
            describe_modes(dir.path(), &modes),
            "buffered = compaction read buffered / compaction+flush write buffered / user read buffered; write-direct+warm = compaction read buffered / compaction+flush write direct / user read buffered"
        );
        let page_cache = page_cache_by_name(dir.path(), &modes);
        assert_eq!(
            page_cache["write-direct+warm"].also,
            ["warm_compaction_output on"]
        );
        assert!(parse_modes(&["quietkv:turbo".into()]).is_err());
    }

    fn args(cli: &[&str]) -> BenchArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let mut v = vec!["bench"];
        v.extend_from_slice(cli);
        Cli::parse_from(v).bench
    }

    /// The README's main command, `quietkv bench` with no flags: E1 at
    /// quick scale, auto against buffered, 3 runs each, disturbed runs
    /// rerun up to 3 times.
    #[test]
    fn the_main_command_compares_auto_with_buffered_three_times() {
        let a = args(&[]);
        assert_eq!(a.experiment, None);
        assert_eq!(DEFAULT_EXPERIMENTS, "E1");
        assert_eq!(a.scale, "quick");
        assert_eq!(a.repeats, 3);
        assert_eq!(a.max_reruns, 3);
        let modes = engine_modes(&a, &crate::suite::DEFAULT_MODES, &ROCKSDB_MODES).unwrap();
        assert_eq!(report_names(&modes), ["buffered", "auto"]);
    }

    #[test]
    fn engines_select_modes_and_interleave_them() {
        let names = |a: &[&str]| -> Result<Vec<String>, String> {
            let m = engine_modes(&args(a), &["buffered", "auto"], &ROCKSDB_MODES)?;
            Ok(report_names(&m))
        };
        // No --engines: quietkv's modes as before, bare names.
        assert_eq!(names(&[]).unwrap(), ["buffered", "auto"]);
        assert_eq!(names(&["--modes", "dontcache"]).unwrap(), ["dontcache"]);
        assert_eq!(
            names(&["--engines", "quietkv", "--modes", "direct,auto"]).unwrap(),
            ["direct", "auto"]
        );
        // A mode of an engine left out of --engines is refused (and where
        // the engine is not built at all, that is what the error says).
        let e = names(&["--engines", "quietkv", "--modes", "fjall:buffered"]).unwrap_err();
        if cfg!(feature = "fjall") {
            assert!(e.contains("not in --engines"), "{e}");
        } else {
            assert!(e.contains("--features fjall"), "{e}");
        }
        #[cfg(not(feature = "rocksdb"))]
        {
            let e = names(&["--engines", "quietkv,rocksdb"]).unwrap_err();
            assert!(e.contains("--features rocksdb"), "{e}");
        }
        #[cfg(feature = "fjall")]
        {
            // Round-robin across engines; --modes' bare names are quietkv's.
            assert_eq!(
                names(&[
                    "--engines",
                    "quietkv,fjall",
                    "--modes",
                    "buffered,both-direct,auto"
                ])
                .unwrap(),
                [
                    "quietkv:buffered",
                    "fjall:buffered",
                    "quietkv:both-direct",
                    "quietkv:auto"
                ]
            );
            assert_eq!(
                names(&["--engines", "fjall,quietkv"]).unwrap(),
                ["fjall:buffered", "quietkv:buffered", "quietkv:auto"]
            );
        }
        #[cfg(feature = "rocksdb")]
        {
            let all = names(&["--engines", "rocksdb"]).unwrap();
            assert_eq!(all, ROCKSDB_MODES);
        }
    }

    #[test]
    fn a_quietkv_only_run_says_how_to_build_the_peers() {
        let modes = parse_modes(&["buffered".into()]).unwrap();
        let t = engines::engines_text(&modes);
        assert!(t.starts_with("quietkv ("), "{t}");
        if engines::built_engines().len() < engines::ALL_ENGINES.len() {
            assert!(t.contains("to bench the peers too, build with `cargo build --release -p quietkv-cli --features"), "{t}");
        } else {
            assert!(!t.contains("build with"), "{t}");
        }
    }

    #[test]
    fn the_header_states_the_reader_pool() {
        let mut c = CommonParams {
            read_rate: 2000.0,
            reader_threads: 8,
            warmup_s: 1.0,
            baseline_s: 1.0,
            duration_s: 1.0,
            memory_limit_bytes: None,
        };
        let t = readers_text(&c);
        assert!(
            t.starts_with("open loop at 2000 reads/s from a pool of 8 reader threads"),
            "{t}"
        );
        c.reader_threads = 1;
        let t = readers_text(&c);
        assert!(
            t.contains("from a single reader thread (--readers 1)"),
            "{t}"
        );
        assert!(!t.contains("pool"), "{t}");
    }
}
