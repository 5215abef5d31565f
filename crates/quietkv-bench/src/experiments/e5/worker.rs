//! E5's modes and one E5 run in the worker process: 100% random point
//! reads over a database eight times the memory limit, with user reads
//! `buffered` (the page cache is their cache), `direct` (O_DIRECT, the
//! engine's block cache sized from the cgroup limit is their only cache)
//! or `mmap` (tables mapped, reads copy from the mapping; the page cache
//! again). The seed saw, under a heavy read load, kernel CPU -90%,
//! throughput up to +80% and latency -40-50% for O_DIRECT plus the
//! application's own cache.
//!
//! Loads: closed loop with N reader threads (how much the machine serves),
//! and an open loop at a fixed rate (latency at the same offered load).
//! Every run starts from a fresh copy of a fully compacted source after
//! sync + drop caches, warms for `warmup_s` with the closed loop, then
//! measures. No writes, no compaction: only the read path and the caches.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::closed_loop::{run_closed_loop, ClosedLoopConfig};
use crate::engines::{
    close_shared, BenchEngine, Counters, EngineMode, QuietkvConfig, QuietkvEngine, Tuning,
};
use crate::keys::{is_value_of, key};
use crate::loadgen::{run_open_loop, LoadConfig, LoadResult};
use crate::result::{timeline, PhaseResult, RunResult, WorkerSpec};
use crate::sampler::{phase_metrics, ExtraFn};
use crate::scale::MIB;

/// The modes of E5, in the report's order.
pub const MODES: [&str; 3] = ["buffered", "direct", "mmap"];

/// Closed-loop threads of the warm-up.
pub(super) const WARMUP_THREADS: usize = 32;

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

    /// The load in words, for progress lines and the report's header.
    pub fn text(&self) -> String {
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

/// What one E5 run needs beyond [`crate::result::CommonParams`].
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
        key_span: None,
        // Off, as a user runs it: the count would cost every buffered
        // read a system call that direct reads do not pay, in the very
        // comparison of the two. The hit ratio comes from the readers'
        // own device reads instead, as in E1.
        count_page_cache_hits: false,
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
    // The engine's own count where a mode asked for it (`+hits=1`), else
    // the readers' sampled device reads (the load generator's).
    let hits = z
        .user_read_page_cache
        .zip(a.user_read_page_cache)
        .map(|(z, a)| z.since(&a))
        .filter(|d| d.hits + d.misses > 0)
        .map(|d| (d.hits, d.misses));
    let measured = PhaseResult::new(&r, kernel, hits);
    let notes = measured.notes(&spec.sampler);
    close_shared(db)?;
    Ok(RunResult {
        timeline: timeline(&r, 0.0, false),
        extra,
        ..RunResult::new(spec, &r.latency, measured, samples, notes)
    })
}
