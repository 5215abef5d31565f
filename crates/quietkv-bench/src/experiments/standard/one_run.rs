//! One run of the standard experiment for one engine configuration:
//! db_bench's workloads in db_bench's order (fillseq on a database of its
//! own; fillrandom, overwrite, a full compaction, then the reads on a
//! second one), then YCSB's load and workloads on a third. The bench runs
//! each run in a worker process of its own ([`worker`]), so that no run
//! inherits what another left in the allocator, and everything a run's
//! process allocates is charged to the run's memory cgroup.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::dbbench::{self, Shape};
use super::keygen::{Workload, YCSB_KEY_SPAN};
use super::phase::Phase;
use super::ycsb::{self, YcsbState};
use crate::engines::{dispatch, BenchEngine, Tuning};
use crate::result::WorkerSpec;

/// db_bench's memtable (`--write_buffer_size`), every engine's.
pub const MEMTABLE_BYTES: usize = 64 << 20;
/// db_bench's block cache (`--cache_size`) as this benchmark sets it.
pub const BLOCK_CACHE_BYTES: usize = 32 << 20;

/// What every run of a section does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    pub keys: u64,
    pub value_size: usize,
    /// Seconds of each read phase and each YCSB workload.
    pub phase_seconds: f64,
    /// YCSB records (0: no YCSB workloads).
    pub ycsb_records: u64,
    /// The memory cgroup limit each run's process is in (page cache and
    /// its own memory together), for the report: the bench's runner puts
    /// the worker there; `None` runs it unlimited.
    pub memory_limit_bytes: Option<u64>,
    pub dir: PathBuf,
}

/// What one run measured (report.json's `runs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub mode: String,
    pub repeat: u32,
    /// The process the run ran in: each run has its own.
    pub process_id: u32,
    pub value_size: usize,
    pub keys: u64,
    /// Seconds of the full compaction (and the wait after it) before the
    /// read phases.
    pub compact_seconds: f64,
    pub phases: Vec<Phase>,
}

/// The options every engine is opened with: db_bench's memtable and block
/// cache, the bench's shared tree shape, the engine's defaults otherwise.
pub fn tuning<E: BenchEngine>() -> Tuning {
    Tuning {
        create: true,
        layout: Some(E::bench_layout()),
        block_cache_bytes: Some(BLOCK_CACHE_BYTES),
        memtable_bytes: Some(MEMTABLE_BYTES),
        background_threads: None,
        background_rate_limit_mib: 0,
        key_span: None,
        // Nothing here reports it; every engine runs without statistics.
        count_page_cache_hits: false,
    }
}

fn fresh(dir: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// A fresh database in `dir` for a workload whose key numbers lie below
/// `key_span` (how a configuration that spreads keys over keyspaces cuts
/// them).
fn open<E: BenchEngine>(dir: &Path, config: &E::Config, key_span: u64) -> Result<E, String> {
    fresh(dir)?;
    let tuning = Tuning {
        key_span: Some(key_span),
        ..tuning::<E>()
    };
    E::open(dir, config, &tuning)
}

/// One run of `config` of engine `E`, reported as `mode`; `seed` is the
/// round's, the same for every configuration.
pub fn run_one<E: BenchEngine>(
    p: &Params,
    config: &E::Config,
    mode: &str,
    repeat: u32,
    seed: u64,
    progress: &dyn Fn(&str),
) -> Result<Run, String> {
    let base = p.dir.join(format!(
        "standard-{}-{}-{repeat}",
        p.value_size,
        mode.replace(
            |c: char| !(c.is_ascii_alphanumeric() || "+=._".contains(c)),
            "-"
        )
    ));
    let shape = Shape {
        keys: p.keys,
        value_size: p.value_size,
        read_for: Duration::from_secs_f64(p.phase_seconds),
        seed,
    };
    let tag = |what: &str| progress(&format!("{mode} #{repeat}: {what}"));
    // Each phase reports the disk's stalls, for judging whether the
    // machine disturbed it.
    super::measure::watch_device_of(&p.dir);
    // db_bench's present keys are the even numbers below 2 x keys, its
    // absent ones the odd numbers between them.
    let dbbench_span = 2 * p.keys;
    let mut phases = Vec::new();

    tag(&format!("fillseq {} keys", p.keys));
    let dir = base.join("fillseq");
    let db = open::<E>(&dir, config, dbbench_span)?;
    phases.push(dbbench::fill(&db, &dir, &shape, false)?);
    db.close()?;
    let _ = std::fs::remove_dir_all(&dir);

    let dir = base.join("db");
    let db = open::<E>(&dir, config, dbbench_span)?;
    tag(&format!("fillrandom {} keys", p.keys));
    phases.push(dbbench::fill(&db, &dir, &shape, true)?);
    tag("overwrite");
    phases.push(dbbench::overwrite(&db, &shape)?);
    // Every engine reads the same shape: one sorted run at the bottom.
    tag("full compaction before the reads");
    let t = Instant::now();
    db.compact_all()?;
    db.wait_idle()?;
    let compact_seconds = t.elapsed().as_secs_f64();
    for threads in [1, 2, 8] {
        tag(&format!("readrandom, {threads} thread(s)"));
        phases.push(dbbench::read_random(&db, &shape, threads)?);
    }
    tag("readmissing");
    phases.push(dbbench::read_missing(&db, &shape)?);
    tag("seekrandom");
    phases.push(dbbench::seek_random(&db, &shape)?);
    tag("readseq");
    phases.push(dbbench::scan(&db, &shape, false)?);
    tag("readreverse");
    phases.push(dbbench::scan(&db, &shape, true)?);
    tag("readwhilewriting");
    phases.push(dbbench::read_while_writing(&db, &shape)?);
    db.close()?;
    let _ = std::fs::remove_dir_all(&dir);

    if p.ycsb_records > 0 {
        let dir = base.join("ycsb");
        let db = open::<E>(&dir, config, YCSB_KEY_SPAN)?;
        let mut st = YcsbState::new(p.ycsb_records, shape.read_for, seed);
        tag(&format!("ycsb load {} records", p.ycsb_records));
        phases.push(ycsb::load(&db, &dir, &st)?);
        db.compact_all()?;
        db.wait_idle()?;
        for w in Workload::ORDER {
            tag(w.name());
            phases.push(ycsb::run(&db, w, &mut st)?);
        }
        db.close()?;
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(Run {
        mode: mode.to_string(),
        repeat,
        process_id: std::process::id(),
        value_size: p.value_size,
        keys: p.keys,
        compact_seconds,
        phases,
    })
}

/// What the worker process of one run is handed (`WorkerSpec::params`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunParams {
    pub params: Params,
    /// The round's seed, the same for every configuration of a round.
    pub seed: u64,
    /// 0-based, as the report numbers runs.
    pub repeat: u32,
}

/// The worker side of one run: [`run_one`] for the engine of `spec.mode`,
/// in the process (and memory cgroup) the bench's runner started for it.
pub fn worker(spec: &WorkerSpec, _stop: &AtomicBool) -> Result<Run, String> {
    let rp: RunParams = serde_json::from_value(spec.params.clone())
        .map_err(|e| format!("bad standard run parameters: {e}"))?;
    let progress = |msg: &str| crate::progress_line!("[standard] {msg}");
    dispatch!(&spec.mode, |c: E| {
        run_one::<E>(&rp.params, c, &spec.name, rp.repeat, rp.seed, &progress)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::{QuietkvConfig, QuietkvEngine};

    /// A tiny run on quietkv: every workload, in order, with its figures.
    #[test]
    fn a_tiny_run_measures_every_workload() {
        let dir = tempfile::tempdir().unwrap();
        let p = Params {
            keys: 3000,
            value_size: 100,
            phase_seconds: 0.05,
            ycsb_records: 500,
            memory_limit_bytes: None,
            dir: dir.path().to_path_buf(),
        };
        let c = QuietkvConfig::parse("auto").unwrap();
        let r = run_one::<QuietkvEngine>(&p, &c, "auto", 0, 1, &|_| {}).unwrap();
        let names: Vec<&str> = r.phases.iter().map(|p| p.workload.as_str()).collect();
        assert_eq!(names, super::super::WORKLOADS);
        assert_eq!(r.process_id, std::process::id());
        // What the machine did meanwhile is read for every phase: the
        // disk's stalls wherever its counters can be found.
        let watched = crate::metrics::block_device_of(dir.path()).is_some();
        for ph in &r.phases {
            assert!(ph.ops > 0 && ph.ops_s > 0.0, "{ph:?}");
            assert!(ph.cpu_us_per_op.unwrap() > 0.0, "{ph:?}");
            assert!(ph.host.other_cpu_ms_per_s.is_some(), "{ph:?}");
            assert_eq!(ph.host.device_longest_held_ms.is_some(), watched, "{ph:?}");
        }
        let by = |n: &str| r.phases.iter().find(|p| p.workload == n).unwrap();
        assert_eq!(by("readseq").ops, 3000);
        assert!(by("readseq").p99_us.is_none());
        assert!(by("fillrandom").space_amp.unwrap() > 0.0);
        assert!(by("overwrite").write_amp.is_some());
        assert!(by("readrandom-8").p999_us.unwrap() > 0.0);
        assert!(by("readwhilewriting").side_writes.is_some());
        // Write phases say what they left in L0 (the catch-up leaves it
        // below the compaction trigger); phases that only read, nothing.
        for w in ["fillseq", "fillrandom", "overwrite", "ycsb-load", "ycsb-a"] {
            let n = by(w).l0_tables_after;
            assert!(n.is_some_and(|n| n < 4), "{w}: {n:?}");
        }
        for w in ["readrandom-1", "readseq", "ycsb-c"] {
            assert_eq!(by(w).l0_tables_after, None, "{w}");
        }
        // Nothing is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
