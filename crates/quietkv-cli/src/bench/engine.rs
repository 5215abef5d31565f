//! The engine experiments' worker side (PROTOCOL.md):
//!
//! - E1 (and E3, which is E1 at several hot-set sizes): fixed-rate reads
//!   over keys `[0, hot_keys)` while ONE major compaction (`compact_all`)
//!   rewrites the whole database. The measured phase starts with the
//!   compaction and ends when it finishes (at least `min_phase_s`, at most
//!   `duration_s`: reads stop there, the compaction is still waited for).
//! - E2: fixed-rate reads over `[0, hot_keys)` while one writer overwrites
//!   random keys over `[0, keys)` at a paced byte rate for `duration_s`,
//!   driving flush and compaction.
//!
//! Each run opens a byte-identical copy of the source database (made by the
//! parent, then sync + drop caches) with the mode's access mode per class,
//! warms the hot set (every hot key once, then reads on schedule), runs a
//! baseline phase with no background work, then the measured phase.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quietkv::{Db, DbStats, IoClass, Options, WriteBatch, WriteOptions};
use serde::{Deserialize, Serialize};

use super::loadgen::{
    percentile_curve, run_open_loop, run_open_loop_until, LoadConfig, PhaseEnd, SplitMix64,
};
use super::result::{timeline, BackgroundWork, PhaseResult, RunResult, WorkerSpec};
use super::sampler::{phase_metrics, ExtraFn, Sampler};
use super::source::{fill_value, key, layout_options};

/// What one engine run needs beyond [`super::result::CommonParams`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineParams {
    pub keys: u64,
    pub value_size: usize,
    /// Reads go to keys `[0, hot_keys)`.
    pub hot_keys: u64,
    /// Background (compaction) I/O limit, MiB/s; 0 = unthrottled.
    pub throttle_mib: u64,
    pub block_cache_bytes: usize,
    pub memtable_bytes: usize,
    /// E2: bytes/s of user writes (keys + values).
    pub write_bytes_per_s: u64,
    /// E1: the measured phase lasts at least this long.
    pub min_phase_s: f64,
}

fn progress(spec: &WorkerSpec, what: &str) {
    crate::progress_line!("{} {what}", spec.label());
}

fn open(spec: &WorkerSpec, p: &EngineParams) -> Result<Db, String> {
    let mut o: Options = layout_options();
    for c in [
        IoClass::UserRead,
        IoClass::CompactionRead,
        IoClass::CompactionWrite,
        IoClass::FlushWrite,
        IoClass::WalWrite,
        IoClass::Manifest,
    ] {
        o = o.io_mode(c, spec.mode.access(c));
    }
    o.create_if_missing = false;
    o.background_threads = 1;
    o.background_rate_limit_mib = p.throttle_mib;
    o.block_cache_bytes = p.block_cache_bytes;
    o.memtable_size = p.memtable_bytes.max(4096);
    o.attribute_cache_hits = true;
    o.warm_compaction_output = spec.mode.warm_output;
    Db::open(&spec.dir, o).map_err(|e| format!("cannot open the run's database: {e}"))
}

fn class(s: &DbStats, c: IoClass) -> quietio::ClassStats {
    s.io.iter()
        .find(|(k, _)| *k == c)
        .map(|(_, v)| *v)
        .unwrap_or_default()
}

/// Engine counters the sampler records each second.
fn extra_fn(db: &Arc<Db>) -> ExtraFn {
    let db = db.clone();
    Arc::new(move || {
        let s = db.stats();
        serde_json::json!({
            "compaction_bytes_read": s.compaction.bytes_read,
            "compaction_bytes_written": s.compaction.bytes_written,
            "compaction_seconds": s.compaction.seconds,
            "compactions_running": s.compaction.running,
            "flush_bytes": s.flush_bytes,
            "write_bytes": s.write_bytes,
            "stall_seconds": s.stalls.stall_seconds,
        })
    })
}

/// Snapshot of the counters a phase reports as deltas.
#[derive(Clone)]
struct Counters {
    comp_read: u64,
    comp_write: u64,
    flush_write: u64,
    hits: u64,
    misses: u64,
    bc_hits: u64,
    bc_misses: u64,
    compactions: u64,
    stall_s: f64,
    warmed_bytes: u64,
}

fn counters(db: &Db) -> Counters {
    let s = db.stats();
    let u = class(&s, IoClass::UserRead);
    Counters {
        comp_read: class(&s, IoClass::CompactionRead).read_bytes,
        comp_write: class(&s, IoClass::CompactionWrite).write_bytes,
        flush_write: class(&s, IoClass::FlushWrite).write_bytes,
        hits: u.cache_hits,
        misses: u.cache_misses,
        bc_hits: s.block_cache.hits,
        bc_misses: s.block_cache.misses,
        compactions: s.compaction.count,
        stall_s: s.stalls.stall_seconds,
        warmed_bytes: s.compaction.warmed_bytes,
    }
}

fn hit_delta(a: &Counters, b: &Counters) -> Option<(u64, u64)> {
    Some((b.hits - a.hits, b.misses - a.misses))
}

/// The worker of E1 and E3 (compaction) and E2 (writer).
pub fn worker(spec: &WorkerSpec, stop: &AtomicBool) -> Result<RunResult, String> {
    let p: EngineParams = serde_json::from_value(spec.params.clone())
        .map_err(|e| format!("bad {} params: {e}", spec.experiment))?;
    let writer = spec.experiment.starts_with("E2");
    let db = Arc::new(open(spec, &p)?);
    let c = &spec.common;
    let hot = p.hot_keys.clamp(1, p.keys.max(1));
    let value_size = p.value_size;
    let read = |k: u64| -> super::loadgen::ReadResult {
        match db.get(&key(k)) {
            Ok(Some(v)) if v.len() == value_size && v[..8] == k.to_le_bytes() => Ok(None),
            Ok(Some(_)) => Err(format!("key {k}: wrong value")),
            Ok(None) => Err(format!("key {k}: not found")),
            Err(e) => Err(e.to_string()),
        }
    };
    let load = |secs: f64, seed: u64| LoadConfig {
        rate_per_s: c.read_rate,
        threads: c.reader_threads,
        duration: Duration::from_secs_f64(secs.max(0.001)),
        keys: hot,
        seed,
        grace: Duration::from_secs_f64((secs * 0.5).max(2.0)),
    };
    let sampler = Sampler::start(spec.sampler.clone(), "warmup", Some(extra_fn(&db)));

    progress(
        spec,
        &format!(
            "warmup: read {hot} hot keys once, then {} s on schedule",
            c.warmup_s
        ),
    );
    for k in 0..hot {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        read(k)?;
    }
    if c.warmup_s > 0.0 {
        run_open_loop(&load(c.warmup_s, 1), read, stop);
    }

    let mut tl = Vec::new();
    let mut offset = 0.0;
    let mut baseline = None;
    if c.baseline_s > 0.0 {
        progress(
            spec,
            &format!("baseline (no background work) {} s", c.baseline_s),
        );
        let i = sampler.mark("baseline");
        let a = counters(&db);
        let r = run_open_loop(&load(c.baseline_s, 2), read, stop);
        let b = counters(&db);
        let j = sampler.mark("baseline-end");
        tl.extend(timeline(&r, 0.0, false));
        offset = r.per_second.len() as f64;
        baseline = Some((r, i, j, hit_delta(&a, &b)));
    }

    let mut notes = Vec::new();
    let mut extra = BTreeMap::new();
    let i = sampler.mark("measured");
    let a = counters(&db);
    let t0 = Instant::now();
    let (r, background, bg_secs) = if writer {
        progress(
            spec,
            &format!(
                "measured: writer at {:.1} MiB/s over {} keys, reads over {hot} keys, {} s",
                p.write_bytes_per_s as f64 / (1 << 20) as f64,
                p.keys,
                c.duration_s
            ),
        );
        let wstop = AtomicBool::new(false);
        let (r, written) = std::thread::scope(|s| {
            let w = s.spawn(|| write_paced(&db, &p, &wstop, stop));
            let r = run_open_loop(&load(c.duration_s, 3), read, stop);
            wstop.store(true, Ordering::Relaxed);
            (r, w.join().unwrap_or(Err("writer panicked".into())))
        });
        let (batches_bytes, wsecs) = written?;
        let b = counters(&db);
        let secs = t0.elapsed().as_secs_f64();
        let achieved = batches_bytes as f64 / wsecs.max(1e-9) / (1 << 20) as f64;
        let target = p.write_bytes_per_s as f64 / (1 << 20) as f64;
        extra.insert("write_mib_s".into(), achieved);
        extra.insert("write_target_mib_s".into(), target);
        extra.insert(
            "flush_mib".into(),
            (b.flush_write - a.flush_write) as f64 / (1 << 20) as f64,
        );
        extra.insert("compactions".into(), (b.compactions - a.compactions) as f64);
        extra.insert("write_stall_s".into(), b.stall_s - a.stall_s);
        if achieved < 0.9 * target {
            notes.push(format!(
                "the writer fell short: {achieved:.1} of {target:.1} MiB/s (write stalls {:.1} s); not the same work",
                b.stall_s - a.stall_s
            ));
        }
        let bg = BackgroundWork {
            read_bytes: b.comp_read - a.comp_read,
            write_bytes: (b.comp_write - a.comp_write) + (b.flush_write - a.flush_write),
            seconds: secs,
        };
        (r, bg, secs)
    } else {
        progress(
            spec,
            &format!(
                "measured: compact_all ({}), reads over {hot} keys until it ends (at most {} s)",
                if p.throttle_mib > 0 {
                    format!("throttled to {} MiB/s", p.throttle_mib)
                } else {
                    "unthrottled".into()
                },
                c.duration_s
            ),
        );
        let end = PhaseEnd::default();
        let min_phase = Duration::from_secs_f64(p.min_phase_s.max(0.0).min(c.duration_s));
        let (r, compaction) = std::thread::scope(|s| {
            let comp = s.spawn(|| {
                let t = Instant::now();
                let res = db.compact_all().map_err(|e| e.to_string());
                let took = t.elapsed();
                if took < min_phase {
                    std::thread::sleep(min_phase - took);
                }
                end.end_now();
                res.map(|_| took.as_secs_f64())
            });
            let r = run_open_loop_until(&load(c.duration_s, 3), read, stop, &end);
            let comp = comp
                .join()
                .unwrap_or(Err("compaction thread panicked".into()));
            (r, comp)
        });
        let comp_secs = compaction?;
        let phase_s = comp_secs.max(min_phase.as_secs_f64()).min(c.duration_s);
        let b = counters(&db);
        if comp_secs > c.duration_s {
            notes.push(format!(
                "compaction took {comp_secs:.1} s, longer than the {:.0} s cap: reads covered only its first {:.0} s",
                c.duration_s, c.duration_s
            ));
        }
        extra.insert("compaction_wall_s".into(), comp_secs);
        extra.insert("measured_phase_s".into(), phase_s);
        let bg = BackgroundWork {
            read_bytes: b.comp_read - a.comp_read,
            write_bytes: b.comp_write - a.comp_write,
            seconds: comp_secs,
        };
        (r, bg, comp_secs)
    };
    // The scope above waited for the background thread, so take the
    // boundary sample right after the reads are accounted.
    let j = sampler.mark("end");
    let z = counters(&db);
    let samples = sampler.stop();
    if stop.load(Ordering::Relaxed) {
        return Err("stopped".into());
    }
    if spec.mode.warm_output {
        extra.insert(
            "warmed_mib".into(),
            (z.warmed_bytes - a.warmed_bytes) as f64 / (1 << 20) as f64,
        );
    }
    let bc = (z.bc_hits - a.bc_hits, z.bc_misses - a.bc_misses);
    if bc.0 + bc.1 > 0 {
        extra.insert(
            "block_cache_hit_ratio".into(),
            bc.0 as f64 / (bc.0 + bc.1) as f64,
        );
    }
    tl.extend(timeline(&r, offset, true));
    for t in tl.iter_mut().filter(|t| t.background) {
        t.background = t.t_s < offset + bg_secs;
    }
    let measured = PhaseResult::new(&r, phase_metrics(&samples, i, j), hit_delta(&a, &z));
    let baseline =
        baseline.map(|(b, bi, bj, h)| PhaseResult::new(&b, phase_metrics(&samples, bi, bj), h));
    if let Some(e) = &measured.first_error {
        notes.push(format!("{} user reads failed, first: {e}", measured.errors));
    }
    match Arc::try_unwrap(db) {
        Ok(db) => db.close().map_err(|e| e.to_string())?,
        Err(_) => return Err("database still shared at the end of the run".into()),
    }
    Ok(RunResult {
        mode: spec.mode.name.clone(),
        repeat: spec.repeat,
        curve: percentile_curve(&r.latency),
        measured,
        baseline,
        background,
        background_interval_s: (offset, offset + bg_secs.min(c.duration_s)),
        timeline: tl,
        samples,
        extra,
        notes,
    })
}

/// E2's writer: batches of 16 overwrites of random keys in `[0, keys)`,
/// each batch due at `bytes so far / rate` (paced, not flat out). Returns
/// the bytes written and the seconds it ran.
fn write_paced(
    db: &Db,
    p: &EngineParams,
    wstop: &AtomicBool,
    stop: &AtomicBool,
) -> Result<(u64, f64), String> {
    let per_batch = 16u64;
    let entry = (p.value_size + super::source::KEY_SIZE) as u64;
    let rate = p.write_bytes_per_s.max(1) as f64;
    let mut rng = SplitMix64::new(0xE2);
    let mut value = vec![0u8; p.value_size];
    let start = Instant::now();
    let mut bytes = 0u64;
    let mut version = 1u64;
    while !wstop.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        let due = start + Duration::from_secs_f64(bytes as f64 / rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep((due - now).min(Duration::from_millis(100)));
            continue;
        }
        let mut b = WriteBatch::new();
        for _ in 0..per_batch {
            let k = rng.below(p.keys.max(1));
            fill_value(&mut value, k, version);
            b.put(&key(k), &value).map_err(|e| e.to_string())?;
        }
        version += 1;
        db.write(b, WriteOptions::default())
            .map_err(|e| format!("write failed: {e}"))?;
        bytes += per_batch * entry;
    }
    Ok((bytes, start.elapsed().as_secs_f64()))
}
