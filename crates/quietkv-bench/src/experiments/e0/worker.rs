//! E0's files and one E0 run in the worker process: buffered 4 KiB random
//! reads of a pre-warmed hot file at a fixed rate, a baseline with no
//! background work, then the same reads beside a sequential read stream
//! and a sequential write stream of big files in the mode under test (the
//! compaction classes' access modes of quietkv's configuration of that
//! name), all in the same memory cgroup.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quietio::{IoClass, IoEnv, IoOptions, RateLimiter};
use serde::{Deserialize, Serialize};

use crate::cgroup::interrupted;
use crate::engines::{EngineMode, QuietkvConfig};
use crate::loadgen::{run_open_loop, LoadConfig};
use crate::result::{timeline, BackgroundWork, PhaseResult, RunResult, WorkerSpec};
use crate::sampler::{phase_metrics, Sampler};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct E0Params {
    pub hot_bytes: u64,
    /// Size of each background file (read stream input, write stream output).
    pub bg_file_bytes: u64,
    /// How many files the read stream loops over.
    pub bg_read_files: u32,
    /// Bytes/s of each stream; 0 = unthrottled.
    pub bg_read_rate: u64,
    pub bg_write_rate: u64,
    pub block_size: u64,
}

const HOT: &str = "hot.dat";
const CHUNK: usize = 1 << 20;

fn read_file_name(i: u32) -> String {
    format!("bg-read-{i}.dat")
}

/// Creates the hot file and the read stream's input files (once, shared by
/// every mode), synced so that dropping the cache leaves them cold.
pub fn prepare(dir: &Path, p: &E0Params) -> Result<(), String> {
    let mut files = vec![(dir.join(HOT), p.hot_bytes)];
    for i in 0..p.bg_read_files {
        files.push((dir.join(read_file_name(i)), p.bg_file_bytes));
    }
    let mut buf = vec![0u8; CHUNK];
    let mut rng = crate::loadgen::SplitMix64::new(42);
    for (path, size) in files {
        let mut f = std::fs::File::create(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut left = size;
        while left > 0 {
            if interrupted() {
                return Err("interrupted".into());
            }
            for w in buf.chunks_exact_mut(8) {
                w.copy_from_slice(&rng.next_u64().to_le_bytes());
            }
            let n = left.min(CHUNK as u64) as usize;
            f.write_all(&buf[..n])
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            left -= n as u64;
        }
        f.sync_all()
            .map_err(|e| format!("cannot sync {}: {e}", path.display()))?;
        // Written by the parent: leave nothing of it cached.
        let _ = quietio::evict_file(&path);
    }
    Ok(())
}

fn progress(spec: &WorkerSpec, phase: &str, secs: f64) {
    crate::progress_line!("{} {phase} {secs:.0} s", spec.label());
}

/// Background streams: one sequential reader over the input files and one
/// sequential writer of new files, each paced on its own.
struct Streams {
    stop: Arc<AtomicBool>,
    read_bytes: Arc<AtomicU64>,
    write_bytes: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<Result<(), String>>>,
    started: Instant,
}

impl Streams {
    fn start(env: &Arc<IoEnv>, dir: &Path, modes: &QuietkvConfig, p: &E0Params) -> Streams {
        let stop = Arc::new(AtomicBool::new(false));
        let read_bytes = Arc::new(AtomicU64::new(0));
        let write_bytes = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        let rmode = modes.access(IoClass::CompactionRead);
        let wmode = modes.access(IoClass::CompactionWrite);
        if p.bg_read_files > 0 {
            let (env, stop, bytes, dir, p) = (
                env.clone(),
                stop.clone(),
                read_bytes.clone(),
                dir.to_path_buf(),
                p.clone(),
            );
            threads.push(std::thread::spawn(move || -> Result<(), String> {
                let limiter = RateLimiter::new(p.bg_read_rate);
                let mut buf = vec![0u8; CHUNK];
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let path = dir.join(read_file_name(i % p.bg_read_files));
                    let mut r = env
                        .open_sequential_with_mode(&path, IoClass::CompactionRead, rmode)
                        .map_err(|e| e.to_string())?;
                    while !stop.load(Ordering::Relaxed) {
                        limiter.request(CHUNK as u64);
                        let n = r.read(&mut buf).map_err(|e| e.to_string())?;
                        if n == 0 {
                            break;
                        }
                        bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    i += 1;
                }
                Ok(())
            }));
        }
        {
            let (env, stop, bytes, dir, p) = (
                env.clone(),
                stop.clone(),
                write_bytes.clone(),
                dir.to_path_buf(),
                p.clone(),
            );
            threads.push(std::thread::spawn(move || -> Result<(), String> {
                let limiter = RateLimiter::new(p.bg_write_rate);
                let mut rng = crate::loadgen::SplitMix64::new(7);
                let mut buf = vec![0u8; CHUNK];
                for w in buf.chunks_exact_mut(8) {
                    w.copy_from_slice(&rng.next_u64().to_le_bytes());
                }
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let path = dir.join(format!("bg-write-{}.dat", i % 2));
                    let mut w = env
                        .create_with_mode(&path, IoClass::CompactionWrite, wmode)
                        .map_err(|e| e.to_string())?;
                    let mut written = 0u64;
                    while written < p.bg_file_bytes && !stop.load(Ordering::Relaxed) {
                        limiter.request(CHUNK as u64);
                        buf[..8].copy_from_slice(&written.to_le_bytes());
                        w.write_all(&buf).map_err(|e| e.to_string())?;
                        written += CHUNK as u64;
                        bytes.fetch_add(CHUNK as u64, Ordering::Relaxed);
                    }
                    w.finish(false).map_err(|e| e.to_string())?;
                    i += 1;
                }
                Ok(())
            }));
        }
        Streams {
            stop,
            read_bytes,
            write_bytes,
            threads,
            started: Instant::now(),
        }
    }

    fn finish(self) -> Result<BackgroundWork, String> {
        let seconds = self.started.elapsed().as_secs_f64();
        let work = BackgroundWork {
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            seconds,
        };
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join()
                .map_err(|_| "background stream panicked".to_string())??;
        }
        Ok(work)
    }
}

/// The worker side of one E0 run.
pub fn worker(spec: &WorkerSpec, stop: &AtomicBool) -> Result<RunResult, String> {
    let p: E0Params =
        serde_json::from_value(spec.params.clone()).map_err(|e| format!("bad E0 params: {e}"))?;
    let dir: PathBuf = spec.dir.clone();
    let env = Arc::new(
        IoEnv::open(
            &dir,
            IoOptions {
                attribute_cache_hits: true,
                background_bytes_per_sec: 0,
                ..IoOptions::default()
            },
        )
        .map_err(|e| e.to_string())?,
    );
    // No engine runs here: the streams use quietio's access modes per
    // class, as quietkv's configuration of the same name sets them.
    // Irrefutable when no peer engine is built.
    #[allow(irrefutable_let_patterns)]
    let EngineMode::Quietkv(modes) = &spec.mode
    else {
        return Err(format!(
            "E0 has no engine: mode {} is not one of quietio's access modes",
            spec.name
        ));
    };
    let umode = modes.access(IoClass::UserRead);
    let hot = env
        .open_random_with_mode(&dir.join(HOT), IoClass::UserRead, umode)
        .map_err(|e| e.to_string())?;
    let bs = p.block_size.max(512);
    let blocks = (p.hot_bytes / bs).max(1);
    let read = |k: u64| -> crate::loadgen::ReadResult {
        let mut b = [0u8; 4096];
        let n = (bs as usize).min(b.len());
        hot.read_exact_at(k * bs, &mut b[..n])
            .map(|_| None)
            .map_err(|e| e.to_string())
    };
    let c = &spec.common;
    let load = |secs: f64, seed: u64| LoadConfig {
        rate_per_s: c.read_rate,
        threads: c.reader_threads,
        duration: Duration::from_secs_f64(secs),
        keys: blocks,
        seed,
        grace: Duration::from_secs_f64((secs * 0.5).max(2.0)),
    };
    let hits = || {
        let s = env.stats().class(IoClass::UserRead);
        (s.cache_hits, s.cache_misses)
    };
    let delta = |a: (u64, u64), b: (u64, u64)| Some((b.0 - a.0, b.1 - a.1));

    let sampler = Sampler::start(spec.sampler.clone(), "warmup", None);
    // Warm-up: the whole hot file once, then reads on schedule.
    progress(spec, "warmup", c.warmup_s);
    {
        let mut f = std::fs::File::open(dir.join(HOT)).map_err(|e| e.to_string())?;
        std::io::copy(&mut f, &mut std::io::sink()).map_err(|e| e.to_string())?;
    }
    if c.warmup_s > 0.0 {
        run_open_loop(&load(c.warmup_s, 1), read, stop);
    }

    let mut baseline = None;
    let mut tl = Vec::new();
    let mut offset = 0.0;
    if c.baseline_s > 0.0 {
        progress(spec, "baseline (no background work)", c.baseline_s);
        let i = sampler.mark("baseline");
        let h0 = hits();
        let r = run_open_loop(&load(c.baseline_s, 2), read, stop);
        let h1 = hits();
        let j = sampler.mark("measured");
        tl.extend(timeline(&r, 0.0, false));
        offset = r.per_second.len() as f64;
        baseline = Some((r, i, j, delta(h0, h1)));
    }
    progress(spec, "measured (background work running)", c.duration_s);
    let i = if baseline.is_some() {
        baseline.as_ref().map(|b| b.2).unwrap_or(0)
    } else {
        sampler.mark("measured")
    };
    let streams = Streams::start(&env, &dir, modes, &p);
    let h0 = hits();
    let r = run_open_loop(&load(c.duration_s, 3), read, stop);
    let h1 = hits();
    let j = sampler.mark("end");
    let background = streams.finish()?;
    let samples = sampler.stop();
    for k in 0..2 {
        let _ = std::fs::remove_file(dir.join(format!("bg-write-{k}.dat")));
    }
    if stop.load(Ordering::Relaxed) {
        return Err("stopped".into());
    }
    tl.extend(timeline(&r, offset, true));
    let measured = PhaseResult::new(&r, phase_metrics(&samples, i, j), delta(h0, h1));
    let baseline =
        baseline.map(|(b, bi, bj, h)| PhaseResult::new(&b, phase_metrics(&samples, bi, bj), h));
    let notes = measured.notes(&spec.sampler);
    Ok(RunResult {
        baseline,
        background,
        background_interval_s: (offset, offset + c.duration_s),
        timeline: tl,
        ..RunResult::new(spec, &r.latency, measured, samples, notes)
    })
}
