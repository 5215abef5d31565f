//! The engine experiments' worker side (docs/benchmark.md):
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

use serde::{Deserialize, Serialize};

use crate::engines::{close_shared, dispatch, stall_delta, Batch, BenchEngine, Counters, Tuning};
use crate::keys::{fill_value, is_value_of, key, KEY_SIZE};
use crate::loadgen::{run_open_loop, run_open_loop_until, LoadConfig, PhaseEnd, SplitMix64};
use crate::result::{timeline, BackgroundWork, PhaseResult, RunResult, WorkerSpec};
use crate::sampler::{phase_metrics, ExtraFn, Sampler};

/// What one engine run needs beyond [`crate::result::CommonParams`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineParams {
    pub keys: u64,
    pub value_size: usize,
    /// Reads go to `hot_keys` keys, laid out as `hot_layout` says.
    pub hot_keys: u64,
    #[serde(default)]
    pub hot_layout: crate::keys::HotLayout,
    /// Background (compaction) I/O limit, MiB/s; 0 = unthrottled.
    pub throttle_mib: u64,
    pub block_cache_bytes: usize,
    pub memtable_bytes: usize,
    /// E2: bytes/s of user writes (keys + values).
    pub write_bytes_per_s: u64,
    /// E1: the measured phase lasts at least this long.
    pub min_phase_s: f64,
    /// E1: seconds of reads after the compaction's last install.
    #[serde(default)]
    pub after_s: f64,
}

fn progress(spec: &WorkerSpec, what: &str) {
    crate::progress_line!("{} {what}", spec.label());
}

/// Engine counters the sampler records each second.
fn extra_fn<E: BenchEngine + 'static>(db: &Arc<E>) -> ExtraFn {
    let db = db.clone();
    Arc::new(move || {
        let s = db.counters();
        serde_json::json!({
            "compaction_bytes_read": s.compaction_read_bytes,
            "compaction_bytes_written": s.compaction_write_bytes,
            "compaction_seconds": s.compaction_seconds,
            "compactions_running": s.compactions_running,
            "flush_bytes": s.flush_write_bytes,
            "write_bytes": s.user_write_bytes,
            "stall_seconds": s.write_stall_seconds,
        })
    })
}

fn hit_delta(a: &Counters, b: &Counters) -> Option<(u64, u64)> {
    let d = b.user_read_page_cache?.since(&a.user_read_page_cache?);
    Some((d.hits, d.misses))
}

/// The worker of E1, E2 and E3, for the engine of `spec.mode`.
pub fn worker(spec: &WorkerSpec, stop: &AtomicBool) -> Result<RunResult, String> {
    dispatch!(&spec.mode, |c: E| run::<E>(spec, c, stop))
}

/// One run of E1 and E3 (compaction) or E2 (writer) with engine `E`.
fn run<E: BenchEngine + 'static>(
    spec: &WorkerSpec,
    config: &E::Config,
    stop: &AtomicBool,
) -> Result<RunResult, String> {
    let p: EngineParams = serde_json::from_value(spec.params.clone())
        .map_err(|e| format!("bad {} params: {e}", spec.experiment))?;
    let writer = spec.experiment.starts_with("E2");
    let tuning = Tuning {
        create: false,
        layout: Some(E::bench_layout()),
        block_cache_bytes: Some(p.block_cache_bytes),
        memtable_bytes: Some(p.memtable_bytes),
        background_threads: Some(1),
        background_rate_limit_mib: p.throttle_mib,
        // The source's keys: 0..keys.
        key_span: Some(p.keys),
        // For the engine's own page-cache row beside the harness's count.
        count_page_cache_hits: true,
    };
    let db = Arc::new(
        E::open(&spec.dir, config, &tuning)
            .map_err(|e| format!("cannot open the run's database: {e}"))?,
    );
    let c = &spec.common;
    let hot = p.hot_keys.clamp(1, p.keys.max(1));
    let value_size = p.value_size;
    let (layout, n) = (p.hot_layout, p.keys.max(1));
    // The load generator draws hot-key numbers 0..hot; the layout says
    // which keys of the database they are.
    let read = |i: u64| -> crate::loadgen::ReadResult {
        let k = layout.key_of(i, n);
        match db.get(&key(k)) {
            Ok(Some(v)) if is_value_of(&v, k, value_size) => Ok(None),
            Ok(Some(_)) => Err(format!("key {k}: wrong value")),
            Ok(None) => Err(format!("key {k}: not found")),
            Err(e) => Err(e),
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
            "warmup: read {hot} hot keys ({}) once, then {} s on schedule",
            layout.name(),
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
        let a = db.counters();
        let r = run_open_loop(&load(c.baseline_s, 2), read, stop);
        let b = db.counters();
        let j = sampler.mark("baseline-end");
        tl.extend(timeline(&r, 0.0, false));
        offset = r.per_second.len() as f64;
        baseline = Some((r, i, j, hit_delta(&a, &b)));
    }

    let mut notes = Vec::new();
    let mut extra = BTreeMap::new();
    // E1's parts of the measured window: (name, reads, from mark, to mark).
    let mut phase_parts: Vec<(&str, crate::loadgen::LoadResult, usize, usize)> = Vec::new();
    let i = sampler.mark("measured");
    let a = db.counters();
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
            let w = s.spawn(|| write_paced(&*db, &p, &wstop, stop));
            let r = run_open_loop(&load(c.duration_s, 3), read, stop);
            wstop.store(true, Ordering::Relaxed);
            (r, w.join().unwrap_or(Err("writer panicked".into())))
        });
        let (batches_bytes, wsecs) = written?;
        let b = db.counters();
        let secs = t0.elapsed().as_secs_f64();
        let achieved = batches_bytes as f64 / wsecs.max(1e-9) / (1 << 20) as f64;
        let target = p.write_bytes_per_s as f64 / (1 << 20) as f64;
        extra.insert("write_mib_s".into(), achieved);
        extra.insert("write_target_mib_s".into(), target);
        extra.insert(
            "flush_mib".into(),
            (b.flush_write_bytes - a.flush_write_bytes) as f64 / (1 << 20) as f64,
        );
        extra.insert("compactions".into(), (b.compactions - a.compactions) as f64);
        let stalled = stall_delta(&a, &b);
        if let Some(s) = stalled {
            extra.insert("write_stall_s".into(), s);
        }
        if achieved < 0.9 * target {
            let stalls = match stalled {
                Some(s) => format!("write stalls {s:.1} s"),
                None => "the engine does not count its write stalls".into(),
            };
            notes.push(format!(
                "the writer fell short: {achieved:.1} of {target:.1} MiB/s ({stalls}); not the same work"
            ));
        }
        let bg = BackgroundWork {
            read_bytes: b.compaction_read_bytes - a.compaction_read_bytes,
            write_bytes: (b.compaction_write_bytes - a.compaction_write_bytes)
                + (b.flush_write_bytes - a.flush_write_bytes),
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
        let (during, compaction) = std::thread::scope(|s| {
            let comp = s.spawn(|| {
                let t = Instant::now();
                let res = db.compact_all();
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
        let b = db.counters();
        // Then the reads meet the new tables: the window goes on for
        // `after_s`, reported as its own phase beside the compaction's.
        let mut r = during.clone_counts();
        let j_during = sampler.mark("after");
        phase_parts.push(("during", during, i, j_during));
        if p.after_s > 0.0 {
            progress(
                spec,
                &format!("after: reads over {hot} keys for {} s", p.after_s),
            );
            let after = run_open_loop(&load(p.after_s, 4), read, stop);
            r.append(&after);
            let k = sampler.mark("after-end");
            phase_parts.push(("after", after, j_during, k));
        }

        if comp_secs > c.duration_s {
            notes.push(format!(
                "compaction took {comp_secs:.1} s, longer than the {:.0} s cap: reads covered only its first {:.0} s",
                c.duration_s, c.duration_s
            ));
        }
        extra.insert("compaction_wall_s".into(), comp_secs);
        extra.insert("measured_phase_s".into(), phase_s);
        let bg = BackgroundWork {
            read_bytes: b.compaction_read_bytes - a.compaction_read_bytes,
            write_bytes: b.compaction_write_bytes - a.compaction_write_bytes,
            seconds: comp_secs,
        };
        (r, bg, comp_secs)
    };
    // The scope above waited for the background thread, so take the
    // boundary sample right after the reads are accounted.
    let j = sampler.mark("end");
    let z = db.counters();
    let samples = sampler.stop();
    if let (Some(c0), Some(c1)) = (a.background_cpu_seconds, z.background_cpu_seconds) {
        // What a mode costs in CPU for the same work: direct I/O should
        // not buy its quiet page cache with the compaction thread's time.
        let cpu = c1 - c0;
        extra.insert("background_cpu_s".into(), cpu);
        let gib = (background.read_bytes + background.write_bytes) as f64 / (1u64 << 30) as f64;
        if gib > 0.0 {
            extra.insert("background_cpu_s_per_gib".into(), cpu / gib);
        }
    }
    if let (Some(s0), Some(s1)) = (a.full_compaction_slices, z.full_compaction_slices) {
        if s1 > s0 {
            extra.insert("full_compaction_slices".into(), (s1 - s0) as f64);
        }
    }
    if let Some(peak) = z.full_compaction_peak_extra_bytes.filter(|&p| p > 0) {
        // Since the run's open: the peak of this run's compaction.
        extra.insert(
            "full_compaction_peak_extra_mib".into(),
            peak as f64 / (1 << 20) as f64,
        );
    }
    if let (Some(o0), Some(o1)) = (a.table_opens_by_reads, z.table_opens_by_reads) {
        extra.insert("table_opens_by_reads".into(), (o1 - o0) as f64);
    }
    if let (Some(l0), Some(l1)) = (&a.compaction_into_levels, &z.compaction_into_levels) {
        level_work_into(&mut extra, l0, l1);
    }
    if let (Some(g0), Some(g1)) = (a.get_times, z.get_times) {
        for (name, v) in g1.phase_figures(&g0) {
            extra.insert(name.into(), v);
        }
    }
    // Memory at the measured phase's end: the engine's own account beside
    // what the process holds (the difference is the allocator's and the
    // bench's), and the process's peak over the whole run.
    if let Some(m) = z.memory {
        for (name, v) in m.figures() {
            extra.insert(name.into(), v);
        }
    }
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    if let Some(anon) = crate::process::status_bytes("RssAnon:") {
        extra.insert("worker_anon_mib".into(), mib(anon));
    }
    if let Some(peak) = crate::process::status_bytes("VmHWM:") {
        extra.insert("worker_peak_rss_mib".into(), mib(peak));
    }
    if stop.load(Ordering::Relaxed) {
        return Err("stopped".into());
    }
    if z.warmed_bytes > a.warmed_bytes || spec.mode.warms_output() {
        extra.insert(
            "warmed_mib".into(),
            (z.warmed_bytes - a.warmed_bytes) as f64 / (1 << 20) as f64,
        );
    }
    if let (Some(za), Some(aa)) = (z.block_cache, a.block_cache) {
        let bc = za.since(&aa);
        if bc.hits + bc.misses > 0 {
            extra.insert(
                "block_cache_hit_ratio".into(),
                bc.hits as f64 / (bc.hits + bc.misses) as f64,
            );
        }
    }
    tl.extend(timeline(&r, offset, true));
    for t in tl.iter_mut().filter(|t| t.background) {
        t.background = t.t_s < offset + bg_secs;
    }
    // Hits and misses come from the reader threads' device reads, the
    // same for every engine; the engine's own page-cache count, where it
    // keeps one, is an extra row.
    if let Some((h, m)) = hit_delta(&a, &z) {
        if h + m > 0 {
            extra.insert(
                "engine_page_cache_hit_ratio".into(),
                h as f64 / (h + m) as f64,
            );
        }
    }
    let measured = PhaseResult::new(&r, phase_metrics(&samples, i, j), None);
    let baseline =
        baseline.map(|(b, bi, bj, _)| PhaseResult::new(&b, phase_metrics(&samples, bi, bj), None));
    let phases: BTreeMap<String, PhaseResult> = phase_parts
        .iter()
        .map(|(name, lr, from, to)| {
            let to = (*to).min(samples.len() - 1);
            (
                name.to_string(),
                PhaseResult::new(lr, phase_metrics(&samples, *from, to), None),
            )
        })
        .collect();
    notes.extend(measured.notes(&spec.sampler));
    close_shared(db)?;
    Ok(RunResult {
        baseline,
        background,
        background_interval_s: (offset, offset + bg_secs.min(c.duration_s)),
        timeline: tl,
        extra,
        phases,
        ..RunResult::new(spec, &r.latency, measured, samples, notes)
    })
}

/// E2's writer: batches of 16 overwrites of random keys in `[0, keys)`,
/// each batch due at `bytes so far / rate` (paced, not flat out). Returns
/// the bytes written and the seconds it ran.
fn write_paced<E: BenchEngine>(
    db: &E,
    p: &EngineParams,
    wstop: &AtomicBool,
    stop: &AtomicBool,
) -> Result<(u64, f64), String> {
    let per_batch = 16u64;
    let entry = (p.value_size + KEY_SIZE) as u64;
    let rate = p.write_bytes_per_s.max(1) as f64;
    let mut rng = SplitMix64::new(0xE2);
    let mut value = vec![0u8; p.value_size];
    let mut batch = Batch::new();
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
        batch.clear();
        for _ in 0..per_batch {
            let k = rng.below(p.keys.max(1));
            fill_value(&mut value, k, version);
            batch.put(&key(k), &value);
        }
        version += 1;
        db.put_batch(&batch)?;
        bytes += per_batch * entry;
    }
    Ok((bytes, start.elapsed().as_secs_f64()))
}

/// The measured phase's compaction work by output level, in MiB, as
/// `into_L<n>_{read_above,read_level,written,moved}_mib` for each level
/// that had any: where the background bytes went.
fn level_work_into(
    extra: &mut std::collections::BTreeMap<String, f64>,
    before: &[crate::engines::LevelWork],
    after: &[crate::engines::LevelWork],
) {
    let mib = |a: u64, b: u64| b.saturating_sub(a) as f64 / (1 << 20) as f64;
    for (level, z) in after.iter().enumerate() {
        let a = before.get(level).copied().unwrap_or_default();
        let parts = [
            (
                "read_above",
                mib(a.read_from_above_bytes, z.read_from_above_bytes),
            ),
            (
                "read_level",
                mib(a.read_from_level_bytes, z.read_from_level_bytes),
            ),
            ("written", mib(a.written_bytes, z.written_bytes)),
            ("moved", mib(a.moved_bytes, z.moved_bytes)),
        ];
        if parts.iter().all(|(_, v)| *v == 0.0) {
            continue;
        }
        for (name, v) in parts {
            extra.insert(format!("into_L{level}_{name}_mib"), v);
        }
    }
}
