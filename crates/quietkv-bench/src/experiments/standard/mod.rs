//! The standard experiment: db_bench's workloads (fillseq, fillrandom,
//! overwrite, readrandom with 1, 2 and 8 threads, readmissing, seekrandom,
//! readseq, readreverse, readwhilewriting) and YCSB's core workloads A-F,
//! on every engine configuration, interleaved and repeated, each run in a
//! worker process of its own (at full scale in a memory cgroup, so that the
//! database is several times the page cache it gets).
//!
//! - [`keygen`]: the keys the workloads ask for (present and absent keys,
//!   zipfian, scrambled, latest) and YCSB's mixes;
//! - [`measure`]: CPU, device reads and writes, peak memory, page cache,
//!   bytes on disk and latency histograms around a phase;
//! - [`phase`]: one workload's figures in one run;
//! - [`dbbench`] and [`ycsb`]: the workloads;
//! - [`one_run`]: one run of a configuration, every workload in order, and
//!   the worker process's side of it;
//! - [`tables`]: the report's tables and JSON;
//! - [`parent`]: `--experiment standard`: scale, campaign and report.

pub mod dbbench;
pub mod keygen;
pub mod measure;
pub mod one_run;
pub mod parent;
pub mod phase;
pub mod tables;
pub mod ycsb;

pub use self::one_run::worker;
pub use self::parent::run;

/// Every workload, in the order a run does them.
pub const WORKLOADS: [&str; 18] = [
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom-1",
    "readrandom-2",
    "readrandom-8",
    "readmissing",
    "seekrandom",
    "readseq",
    "readreverse",
    "readwhilewriting",
    "ycsb-load",
    "ycsb-a",
    "ycsb-b",
    "ycsb-c",
    "ycsb-f",
    "ycsb-d",
    "ycsb-e",
];

/// What a workload does, for the report.
pub fn describe(workload: &str) -> String {
    use self::keygen::Workload;
    let w = match workload {
        "fillseq" => "Every key once in key order, one put each, on a fresh database; then flush and wait for compaction (write amplification counts both).",
        "fillrandom" => "Every key once in a pseudo-random order (not db_bench's draws with replacement: every key is then present for the reads), one put each, on a fresh database; then flush and wait for compaction; space amplification measured after.",
        "overwrite" => "As many puts as keys, each to a uniformly random key; then flush and wait for compaction. A full compaction and a wait for idle follow before the reads, so that every engine reads one sorted run.",
        "readrandom-1" | "readrandom-2" | "readrandom-8" => "Point reads of uniformly random present keys, closed loop, from the given number of threads (figures over all of them); each value checked.",
        "readmissing" => "Point reads of absent keys that sort between present ones: only a filter can skip a table.",
        "seekrandom" => "A seek to a random present key and the next 10 entries (11 read).",
        "readseq" => "One full scan in key order; an operation is an entry (no per-operation latency: the operation timed is the whole scan).",
        "readreverse" => "One full scan from the last key backwards; an operation is an entry.",
        "readwhilewriting" => "One reader at full speed (random present keys) while one writer overwrites random keys at 2 MiB/s of keys and values; the figures are the reads' (CPU includes the writer's).",
        "ycsb-load" => "YCSB's load phase: every record of 1 KiB once under hashed keys, one put each, on a fresh database, then flush, wait, and a full compaction before the workloads.",
        _ => {
            return Workload::ORDER
                .iter()
                .find(|w| w.name() == workload)
                .map(|w| format!("YCSB workload {}: {}; one client thread; an update writes the whole record.", &w.name()[5..].to_uppercase(), w.describe()))
                .unwrap_or_default()
        }
    };
    w.to_string()
}
