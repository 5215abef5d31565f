//! The options of `quietkv bench`, as a front flattens them into its own
//! command line (the `quietkv` command's `bench`). Each experiment reads
//! the ones it uses; their help says which.

use std::path::PathBuf;

use clap::Args;

// Without a doc comment: clap's derive turns one into help text, and
// `quietkv bench --help` is the command's own.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Experiments to run, comma-separated: E1, E2, E3 (engine), E0 (the
    /// no-engine reference), E4 (WAL modes, write-only), E5 (direct user
    /// reads; modes buffered, direct, mmap), throughput, standard
    /// (db_bench's and YCSB's workloads on every built engine). Default: E1.
    #[arg(long)]
    pub experiment: Option<String>,
    /// Modes to compare, run in turn (A B C, A B C, ...): buffered, direct,
    /// dontcache, fadvise, write-direct, read-direct, both-direct, all-direct,
    /// auto (the engine's defaults), each with optional `+key=value` knobs
    /// (docs/benchmark.md); `+ks=N` spreads quietkv's keys over N keyspaces
    /// by key range (standard, E1, E2). Default: buffered,auto (E0:
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
    /// Preset sizes of E1/E2/E3 (docs/benchmark.md): quick (2 GiB db, 256 MiB
    /// cgroup, minutes) or full (8 GiB db, 1 GiB cgroup); standard: quick
    /// 1,000,000 keys of 100 B, 4 s per read phase, no cgroup; full
    /// 16,000,000, 30 s, a 1 GiB cgroup. Flags override.
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
    /// E1/E2/E3: before each run, wait up to this many seconds for the
    /// host to be quiet: keep every CPU waking up for 10 s, as readers
    /// do, and read the CPU steal; above the disturbance rule's limit
    /// (30 ms/s), pause 20 s and check again; then start (the run is
    /// judged by the rule as ever). For shared virtual machines whose
    /// host takes the CPUs in spells longer than a run
    /// (docs/disturbed-runs.md). 0 (default): start at once.
    #[arg(long = "wait-quiet", default_value_t = 0)]
    pub wait_quiet_s: u64,
    /// Seconds of the measured phase (background work running); E1/E3: the
    /// cap of the phase, which lasts as long as the compaction; standard:
    /// each read and YCSB phase. Default: E0 60, else the scale's.
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
    /// E2: a user write rate of its own for one mode, `NAME=MIBS` by the
    /// mode's name in the report (`quietkv:auto=19`), comma-separated; the
    /// other modes write at --write-rate. For an engine whose compaction
    /// moves fewer bytes per user byte: writing more until its background
    /// bytes match a peer's makes the two do the same background work, the
    /// engine with the lower rate still writing no more user data.
    #[arg(long = "mode-write-rate", value_delimiter = ',')]
    pub mode_write_rate: Option<Vec<String>>,
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
    /// throughput and standard: keys to fill. Default: throughput
    /// 1,000,000; standard the scale's (quick: 1,000,000 of 100-byte
    /// values, as many bytes for other value sizes).
    #[arg(long)]
    pub keys: Option<u64>,
    /// throughput and standard: value size in bytes. standard takes a
    /// list (`100,4096`: one report section each). Default: throughput
    /// 4096, standard 100.
    #[arg(long = "value-size", value_delimiter = ',')]
    pub value_size: Option<Vec<usize>>,
    /// standard: skip YCSB's load and workloads (db_bench's workloads
    /// only). YCSB's records are 1 KiB whatever `--value-size` says, so a
    /// run of another value size alone repeats nothing it would measure.
    #[arg(long = "no-ycsb")]
    pub no_ycsb: bool,
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

/// Parses a `quietkv bench` command line, for tests of what its options
/// default to and select.
#[cfg(test)]
pub(crate) mod tests {
    use super::BenchArgs;

    pub(crate) fn args(cli: &[&str]) -> BenchArgs {
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
}
