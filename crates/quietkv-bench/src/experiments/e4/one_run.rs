//! One E4 run, in this process: a fresh database in the configuration's
//! file system, many closed-loop writers until the run's writes or time
//! are up, and what the device and the CPU did meanwhile.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::config::WalConfig;
use crate::cpu::CpuSource;
use crate::engines::{BenchEngine, QuietkvConfig, Tuning};
use crate::loadgen::{new_histogram, LatencySummary, SplitMix64};
use crate::metrics::{block_device_of, read_block_stat, BlockStat};
use crate::process_cpu::ProcessCpu;

/// What every E4 run does, from the command line.
#[derive(Debug, Clone)]
pub struct Params {
    pub writers: usize,
    pub value_size: usize,
    /// Share of each value that is random; the rest repeats it.
    pub value_compression_ratio: f64,
    pub key_space: u64,
    /// Writes per run; the run also ends after `duration`.
    pub writes: u64,
    pub duration: Duration,
    pub repeats: u32,
    pub memtable_bytes: usize,
    pub xfs_image_bytes: u64,
}

/// One run of one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub mode: String,
    pub repeat: u32,
    pub filesystem: String,
    pub writes: u64,
    pub seconds: f64,
    pub writes_per_s: f64,
    pub write_latency_us: LatencySummary,
    pub device: Option<DeviceFigures>,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Where the CPU times came from (raw cpuacct, or rescaled getrusage).
    pub cpu_source: CpuSource,
    pub user_bytes: u64,
}

/// What the device under the database did during the run.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceFigures {
    pub name: String,
    pub w_mib_s: f64,
    pub w_per_s: f64,
    pub w_merges_per_s: f64,
    pub aqu_sz: f64,
    pub flushes_per_s: f64,
    /// Bytes the device wrote per byte of user keys and values.
    pub bytes_per_user_byte: f64,
}

/// The file system `dir` is on, as quietio's probe names it.
fn fs_name(dir: &Path) -> String {
    quietio::IoEnv::open(dir, quietio::IoOptions::default())
        .map(|e| e.capabilities().filesystem.clone())
        .unwrap_or_else(|_| "unknown".into())
}

/// Fills `value` with random bytes for its first `ratio` share and repeats
/// them over the rest, so that a compressor shrinks it to about `ratio`
/// (1.0: incompressible).
fn fill_value(rng: &mut SplitMix64, value: &mut [u8], ratio: f64) {
    let random = ((value.len() as f64 * ratio).ceil() as usize).clamp(1, value.len().max(1));
    let (head, tail) = value.split_at_mut(random.min(value.len()));
    for chunk in head.chunks_mut(8) {
        let x = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&x[..chunk.len()]);
    }
    for (i, b) in tail.iter_mut().enumerate() {
        *b = head[i % head.len()];
    }
}

/// Runs `cfg` once in a fresh database under `base`.
pub fn run_one<E: BenchEngine<Config = QuietkvConfig>>(
    cfg: &WalConfig,
    base: &Path,
    p: &Params,
    repeat: u32,
) -> Result<Run, String> {
    let dir = base.join(format!("e4-db-{repeat}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tuning = Tuning {
        memtable_bytes: Some(p.memtable_bytes),
        ..Tuning::engine_defaults()
    };
    let db = E::open(&dir, &cfg.engine_config(), &tuning)?;
    let device = block_device_of(&dir);
    let stat0 = device.as_deref().and_then(read_block_stat);
    // A cgroup of its own for the run: its CPU times are raw, where the
    // process's own are rescaled over everything it ran before (see `cpu`).
    let cpu = ProcessCpu::start();
    let cpu0 = cpu.read();
    let issued = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let hists: Vec<Result<Histogram<u64>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..p.writers)
            .map(|w| {
                let (db, issued, stop) = (&db, &issued, &stop);
                s.spawn(move || -> Result<Histogram<u64>, String> {
                    let mut h = new_histogram();
                    let mut rng = SplitMix64::new(0xE4 + w as u64);
                    let mut value = vec![0u8; p.value_size];
                    while !stop.load(Ordering::Relaxed) {
                        if issued.fetch_add(1, Ordering::Relaxed) >= p.writes
                            || t0.elapsed() >= p.duration
                        {
                            stop.store(true, Ordering::Relaxed);
                            break;
                        }
                        let key = format!("key{:012}", rng.below(p.key_space));
                        fill_value(&mut rng, &mut value, p.value_compression_ratio);
                        let t = Instant::now();
                        db.put(key.as_bytes(), &value)?;
                        let _ = h.record((t.elapsed().as_micros() as u64).max(1));
                    }
                    Ok(h)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err("writer panicked".into())))
            .collect()
    });
    let seconds = t0.elapsed().as_secs_f64();
    let stat1 = device.as_deref().and_then(read_block_stat);
    let cpu1 = cpu.read();
    let cpu_source = cpu.source();
    drop(cpu);
    let mut all = new_histogram();
    for h in hists {
        all.add(h?).map_err(|e| e.to_string())?;
    }
    db.close()?;
    let _ = std::fs::remove_dir_all(&dir);
    let writes = all.len();
    let user_bytes = writes * (p.value_size as u64 + 15);
    let used = cpu1.since(&cpu0);
    let device = match (device, stat0, stat1) {
        (Some(name), Some(a), Some(b)) => Some(device_figures(name, &a, &b, seconds, user_bytes)),
        _ => None,
    };
    Ok(Run {
        mode: cfg.name.clone(),
        repeat,
        filesystem: fs_name(base),
        writes,
        seconds,
        writes_per_s: writes as f64 / seconds.max(1e-9),
        write_latency_us: LatencySummary::of(&all),
        device,
        cpu_user_s: used.user_s,
        cpu_sys_s: used.sys_s,
        cpu_source,
        user_bytes,
    })
}

fn device_figures(
    name: String,
    a: &BlockStat,
    b: &BlockStat,
    secs: f64,
    user_bytes: u64,
) -> DeviceFigures {
    let r = crate::metrics::device_rates(a, b, secs);
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let written = d(a.write_sectors, b.write_sectors) * 512.0;
    DeviceFigures {
        name,
        w_mib_s: r.w_mib_s,
        w_per_s: r.w_per_s,
        w_merges_per_s: d(a.write_merges, b.write_merges) / secs.max(1e-9),
        aqu_sz: r.aqu_sz,
        flushes_per_s: d(a.flush_ios, b.flush_ios) / secs.max(1e-9),
        bytes_per_user_byte: if user_bytes > 0 {
            written / user_bytes as f64
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compress_to_about_their_ratio() {
        let mut rng = SplitMix64::new(1);
        for (ratio, lo, hi) in [(1.0, 0.99, 1.02), (0.5, 0.48, 0.62), (0.25, 0.23, 0.40)] {
            let mut total = 0usize;
            let mut value = vec![0u8; 818];
            for _ in 0..50 {
                fill_value(&mut rng, &mut value, ratio);
                total += lz4_flex::compress(&value).len();
            }
            let got = total as f64 / (50.0 * 818.0);
            assert!(
                (lo..=hi).contains(&got),
                "ratio {ratio}: lz4 left {got:.3} of the bytes"
            );
        }
        // Tiny values still get a random byte.
        let mut one = [0u8; 1];
        fill_value(&mut rng, &mut one, 0.1);
    }
}
