//! One run of the engine throughput experiment, in this process: fill N
//! keys, wait for compaction to catch up, random point reads from a cold
//! cache, then a full compaction, timed and counted. Figures for
//! `docs/results/`; the page-cache experiments are elsewhere.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::cpu::CpuSource;
use crate::engines::{stall_delta, Batch, BenchEngine, Tuning};
use crate::keys::{key, scatter, KEY_SIZE};
use crate::process_cpu::ProcessCpu;
use crate::runner::drop_page_cache;

/// What every run does, from the command line.
#[derive(Debug, Clone)]
pub struct Params {
    pub keys: u64,
    pub value_size: usize,
    pub reads: u64,
    /// The report names of the configurations (`engine:config` when
    /// several engines run), each run on its engine's defaults otherwise.
    pub modes: Vec<String>,
    pub repeats: u32,
    pub dir: PathBuf,
}

/// What one run measured (report.json's `runs`).
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub mode: String,
    pub repeat: u32,
    pub fill_seconds: f64,
    pub fill_mib_s: f64,
    pub fill_ops_s: f64,
    /// Seconds compaction needed after the fill to catch up.
    pub settle_seconds: f64,
    /// Seconds the fill's writes waited for background work (the engine's
    /// own stall counter): an engine that stalls early fills slower and
    /// leaves less to catch up.
    pub fill_write_stall_s: Option<f64>,
    /// User bytes over fill plus catch-up: the rate at which the data
    /// reaches a settled tree, whatever each engine's stall policy.
    pub fill_settled_mib_s: f64,
    pub read_ops_s: f64,
    pub read_p50_us: f64,
    pub read_p99_us: f64,
    pub compact_seconds: f64,
    /// Bytes written by the full compaction per second.
    pub compact_mib_s: f64,
    pub compact_read_mib: f64,
    pub compact_written_mib: f64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Where the CPU times came from (raw cpuacct, or rescaled getrusage).
    pub cpu_source: CpuSource,
}

/// One run of `config` of engine `E`, reported as `mode`.
pub fn run_one<E: BenchEngine>(
    p: &Params,
    config: &E::Config,
    mode: &str,
    repeat: u32,
    progress: &dyn Fn(&str),
) -> Result<Run, String> {
    let dir = p.dir.join(format!(
        "throughput-{}-{repeat}",
        mode.replace(
            |c: char| !(c.is_ascii_alphanumeric() || "+=._".contains(c)),
            "-"
        )
    ));
    let _ = std::fs::remove_dir_all(&dir);
    // Its own cgroup for the run: raw CPU times, not the process's rescaled
    // ones (see `cpu`).
    let cpu = ProcessCpu::start();
    let cpu0 = cpu.read();
    let db = E::open(&dir, config, &Tuning::engine_defaults())?;
    let mut value = vec![0u8; p.value_size];
    for (i, b) in value.iter_mut().enumerate() {
        *b = (i * 131 % 251) as u8;
    }
    progress(&format!("{mode} #{repeat}: fill {} keys", p.keys));
    let filling = db.counters();
    let t = Instant::now();
    let per_batch = 16;
    let mut batch = Batch::new();
    let mut i = 0;
    while i < p.keys {
        batch.clear();
        for j in i..(i + per_batch).min(p.keys) {
            let k = scatter(j, p.keys);
            value[..8].copy_from_slice(&k.to_le_bytes());
            batch.put(&key(k), &value);
        }
        db.put_batch(&batch)?;
        i += per_batch;
    }
    db.flush()?;
    let fill = t.elapsed().as_secs_f64();
    let filled = db.counters();
    // Reads are measured on a quiet tree: compaction still catching up
    // would compete for the disk and replace tables mid-phase.
    progress(&format!(
        "{mode} #{repeat}: waiting for background compaction"
    ));
    let t = Instant::now();
    db.wait_idle()?;
    let settle = t.elapsed().as_secs_f64();

    progress(&format!("{mode} #{repeat}: {} random reads", p.reads));
    // Cold reads: a machine that refuses only loses that (as before).
    let _ = drop_page_cache();
    let mut lat = Vec::with_capacity(p.reads as usize);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D ^ repeat as u64;
    let t = Instant::now();
    for _ in 0..p.reads {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = x % p.keys;
        let s = Instant::now();
        let v = db.get(&key(k))?;
        lat.push(s.elapsed().as_secs_f64() * 1e6);
        match v {
            Some(v) if v.len() == p.value_size && v[..8] == k.to_le_bytes() => {}
            _ => return Err(format!("read of key {k} returned the wrong value")),
        }
    }
    let reads = t.elapsed().as_secs_f64();
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |q: f64| lat[((lat.len() as f64 - 1.0) * q) as usize];

    progress(&format!("{mode} #{repeat}: compact_all"));
    let before = db.counters();
    let t = Instant::now();
    db.compact_all()?;
    let compact = t.elapsed().as_secs_f64();
    let after = db.counters();
    db.close()?;
    let used = cpu.read().since(&cpu0);
    let cpu_source = cpu.source();
    drop(cpu);
    let _ = std::fs::remove_dir_all(&dir);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let written = after.compaction_write_bytes - before.compaction_write_bytes;
    let bytes = p.keys as f64 * (p.value_size + KEY_SIZE) as f64;
    Ok(Run {
        mode: mode.into(),
        repeat,
        fill_seconds: fill,
        fill_mib_s: bytes / (1 << 20) as f64 / fill,
        fill_ops_s: p.keys as f64 / fill,
        settle_seconds: settle,
        fill_write_stall_s: stall_delta(&filling, &filled),
        fill_settled_mib_s: bytes / (1 << 20) as f64 / (fill + settle),
        read_ops_s: p.reads as f64 / reads,
        read_p50_us: pct(0.5),
        read_p99_us: pct(0.99),
        compact_seconds: compact,
        compact_mib_s: mib(written) / compact,
        compact_read_mib: mib(after.compaction_read_bytes - before.compaction_read_bytes),
        compact_written_mib: mib(written),
        cpu_user_s: used.user_s,
        cpu_sys_s: used.sys_s,
        cpu_source,
    })
}
