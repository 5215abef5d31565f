//! E4 (seed 001, Cassandra's commit log): a write-only load of many
//! closed-loop writers, per WAL access mode, sync policy and compression,
//! on ext4 and on a loop-mounted xfs image made and removed by the bench.
//! It measures the engine's write path, not the page cache, so it runs in
//! this process without a memory cgroup.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cpu::{CpuSource, ProcessCpu};
use crate::engines::{BenchEngine, QuietkvConfig, Tuning};
use crate::loadgen::{new_histogram, LatencySummary, SplitMix64};
use crate::metrics::{block_device_of, read_block_stat, BlockStat};
use quietkv::AccessMode;

/// The file system a configuration writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    /// The scratch directory's own file system (ext4 on the development
    /// machine; the report names what it really is).
    Native,
    /// A loop-mounted xfs image in the scratch directory.
    Xfs,
}

/// One E4 configuration: `FS/MODE/SYNC/COMPRESSION[/recycle:N]`, e.g.
/// `ext4/direct/group/none` or `xfs/buffered/periodic:10/lz4` (`ext4` means
/// the scratch directory's own file system); `/recycle:N` keeps up to N
/// flushed WAL files for reuse (`Options::wal_recycle_count`; without it
/// the engine's default, `/recycle:0` turns recycling off).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WalConfig {
    pub name: String,
    pub fs: Fs,
    pub wal_mode: String,
    pub sync: String,
    pub compression: String,
    /// `Options::wal_recycle_count`: `/recycle:N`, else the engine's default.
    pub recycle: usize,
}

impl WalConfig {
    pub fn parse(name: &str) -> Result<WalConfig, String> {
        let parts: Vec<&str> = name.trim().split('/').collect();
        let (fs, mode, sync, compression, recycle) = match parts[..] {
            [fs, mode, sync, compression] => {
                let default = quietkv::Options::default().wal_recycle_count;
                (fs, mode, sync, compression, default)
            }
            [fs, mode, sync, compression, recycle] => {
                let n = recycle
                    .strip_prefix("recycle:")
                    .and_then(|n| n.parse::<usize>().ok())
                    .ok_or_else(|| {
                        format!("E4 mode '{name}': expected recycle:N (N >= 0) after the compression, not '{recycle}'")
                    })?;
                (fs, mode, sync, compression, n)
            }
            _ => {
                return Err(format!(
                    "E4 mode '{name}': expected FS/MODE/SYNC/COMPRESSION[/recycle:N], e.g. ext4/direct/group/none"
                ))
            }
        };
        let fs = match fs {
            "ext4" | "native" => Fs::Native,
            "xfs" => Fs::Xfs,
            other => {
                return Err(format!(
                    "E4 mode '{name}': unknown file system '{other}' (ext4 or xfs)"
                ))
            }
        };
        let access: AccessMode = mode.parse().map_err(|e| format!("E4 mode '{name}': {e}"))?;
        // Validated by the engine's own parsers.
        QuietkvConfig::wal(name, access, sync, compression)
            .map_err(|e| format!("E4 mode '{name}': {e}"))?;
        Ok(WalConfig {
            name: name.trim().to_string(),
            fs,
            wal_mode: mode.into(),
            sync: sync.into(),
            compression: compression.into(),
            recycle,
        })
    }

    /// The configuration without its file system: what the xfs/ext4
    /// ratio pairs up.
    fn rest(&self) -> String {
        let mut s = format!("{}/{}/{}", self.wal_mode, self.sync, self.compression);
        if self.recycle != quietkv::Options::default().wal_recycle_count {
            s.push_str(&format!("/recycle:{}", self.recycle));
        }
        s
    }

    fn engine_config(&self) -> QuietkvConfig {
        let mode: AccessMode = self.wal_mode.parse().expect("checked by parse");
        let mut c = QuietkvConfig::wal(&self.name, mode, &self.sync, &self.compression)
            .expect("checked by parse");
        c.wal_recycle_count = Some(self.recycle);
        c
    }
}

/// The default grid: every WAL mode with group commit, plus a periodic
/// sync and lz4 compression (of the buffered and the mmap WAL: does
/// compression remove an mmap penalty?), on both file systems.
pub fn default_modes(with_xfs: bool) -> Vec<String> {
    let per_fs = [
        "buffered/group/none",
        "direct/group/none",
        "dontcache/group/none",
        "mmap/group/none",
        "mmap/group/lz4",
        "buffered/periodic:10/none",
        "buffered/group/lz4",
    ];
    let mut v: Vec<String> = per_fs.iter().map(|m| format!("ext4/{m}")).collect();
    if with_xfs {
        v.extend(per_fs.iter().map(|m| format!("xfs/{m}")));
    }
    v
}

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

/// A loop-mounted xfs image, removed (unmounted, detached, deleted) on drop.
pub struct XfsMount {
    image: PathBuf,
    loop_dev: String,
    mount: PathBuf,
}

fn run_tool(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl XfsMount {
    /// Why xfs cannot be used here, if it cannot.
    pub fn unavailable_reason() -> Option<String> {
        if quietio::sys::effective_uid() != 0 {
            return Some("mounting an xfs image needs root".into());
        }
        if run_tool(Command::new("mkfs.xfs").arg("-V")).is_err() {
            return Some("mkfs.xfs is missing (install xfsprogs)".into());
        }
        None
    }

    pub fn create(scratch: &Path, bytes: u64) -> Result<XfsMount, String> {
        if let Some(why) = Self::unavailable_reason() {
            return Err(why);
        }
        let image = scratch.join("e4-xfs.img");
        let f = std::fs::File::create(&image)
            .map_err(|e| format!("cannot create {}: {e}", image.display()))?;
        f.set_len(bytes)
            .map_err(|e| format!("cannot size {}: {e}", image.display()))?;
        drop(f);
        let cleanup_image = |e: String| {
            let _ = std::fs::remove_file(&image);
            e
        };
        run_tool(Command::new("mkfs.xfs").args(["-q", "-f"]).arg(&image)).map_err(cleanup_image)?;
        let loop_dev = run_tool(
            Command::new("losetup")
                .args(["--find", "--show"])
                .arg(&image),
        )
        .map_err(cleanup_image)?;
        let mount = scratch.join("e4-xfs");
        let m = XfsMount {
            image,
            loop_dev,
            mount,
        };
        std::fs::create_dir_all(&m.mount)
            .map_err(|e| format!("cannot create {}: {e}", m.mount.display()))?;
        run_tool(Command::new("mount").arg(&m.loop_dev).arg(&m.mount))?;
        Ok(m)
    }

    pub fn dir(&self) -> &Path {
        &self.mount
    }

    /// Hands the file system's free blocks back to the image (`fstrim`,
    /// which the loop device turns into holes), so a run's deleted
    /// database does not stay allocated in the image: xfs places each
    /// run's new directory in another allocation group, and without this
    /// a full-scale E4 grows the sparse image to its whole size.
    /// The file system is synced first, but xfs may still hold extents
    /// freed moments ago (an `fstrim` right after a run's delete found
    /// almost nothing to trim; one a run later trimmed it all), so this
    /// bounds the image to about the last runs' data, not to one run's.
    pub fn trim(&self) -> Result<(), String> {
        run_tool(Command::new("sync").arg("-f").arg(&self.mount))?;
        run_tool(Command::new("fstrim").arg(&self.mount)).map(|_| ())
    }
}

impl Drop for XfsMount {
    fn drop(&mut self) {
        if let Err(e) = run_tool(Command::new("umount").arg(&self.mount)) {
            eprintln!("quietkv bench: {e}");
        }
        if let Err(e) = run_tool(Command::new("losetup").arg("-d").arg(&self.loop_dev)) {
            eprintln!("quietkv bench: {e}");
        }
        let _ = std::fs::remove_dir(&self.mount);
        let _ = std::fs::remove_file(&self.image);
    }
}

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

/// Every configuration `repeats` times, the order rotated each round so no
/// configuration always runs first (a fresh file system, a cold host cache).
pub fn run<E: BenchEngine<Config = QuietkvConfig>>(
    p: &Params,
    modes: &[WalConfig],
    scratch: &Path,
    progress: &dyn Fn(&str),
) -> Result<Vec<Run>, String> {
    let xfs = if modes.iter().any(|m| m.fs == Fs::Xfs) {
        progress(&format!(
            "making a {} MiB xfs image in {}",
            p.xfs_image_bytes >> 20,
            scratch.display()
        ));
        Some(XfsMount::create(scratch, p.xfs_image_bytes)?)
    } else {
        None
    };
    let mut runs = Vec::new();
    for repeat in 1..=p.repeats {
        for mi in crate::suite::round_order(modes.len(), repeat) {
            let m = &modes[mi];
            let base = match m.fs {
                Fs::Native => scratch.to_path_buf(),
                Fs::Xfs => xfs.as_ref().expect("made above").dir().to_path_buf(),
            };
            progress(&format!(
                "{} {repeat}/{}: {} writers",
                m.name, p.repeats, p.writers
            ));
            if m.fs == Fs::Xfs {
                // Before the run, outside its measured time, when the
                // earlier runs' deletes have had time to settle. Without it
                // the image only grows, which costs disk space, not results.
                if let Err(e) = xfs.as_ref().expect("made above").trim() {
                    progress(&format!("cannot trim the xfs image: {e}"));
                }
            }
            let r = run_one::<E>(m, &base, p, repeat)?;
            progress(&format!(
                "{} {repeat}/{}: {:.0} writes/s, p99 {:.0} us, on {}",
                m.name, p.repeats, r.writes_per_s, r.write_latency_us.p99, r.filesystem
            ));
            runs.push(r);
        }
    }
    Ok(runs)
}

fn median_min_max(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (med, v[0], v[n - 1])
}

/// The report's table: one row per configuration, median (min..max) over
/// repeats, and the xfs/ext4 ratio of writes/s for each mode present on both.
pub fn markdown(p: &Params, modes: &[WalConfig], runs: &[Run], header: &str) -> String {
    let mut md = String::from(header);
    let limit = if p.writes == u64::MAX {
        format!("{:.0} s per run", p.duration.as_secs_f64())
    } else {
        format!(
            "{} writes per run (at most {:.0} s)",
            p.writes,
            p.duration.as_secs_f64()
        )
    };
    md.push_str(&format!(
        "\n## E4: WAL modes under a write-only load\n\n{} closed-loop writers, {} B values ({}), \
         {limit}, {} repeat(s), order rotated each round; median (min..max). Device \
         columns count the whole device under the database (for xfs the loop \
         device, exactly the benchmark's; for the native file system the disk, \
         with whatever else the machine wrote).\n\n",
        p.writers,
        p.value_size,
        if p.value_compression_ratio >= 1.0 {
            "random bytes, incompressible".to_string()
        } else {
            format!(
                "{:.0}% random, the rest repeating it",
                p.value_compression_ratio * 100.0
            )
        },
        p.repeats
    ));
    md.push_str("| Mode | FS | Writes/s | p50 us | p99 us | p99.9 us | max us | Device MiB/s | Device writes/s | Merges/s | aqu-sz | Device B / user B | CPU user s | CPU sys s |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let of = |m: &WalConfig| -> Vec<&Run> { runs.iter().filter(|r| r.mode == m.name).collect() };
    let cell = |v: Vec<f64>, digits: usize| {
        let (med, lo, hi) = median_min_max(v);
        format!("{med:.digits$} ({lo:.digits$}..{hi:.digits$})")
    };
    for m in modes {
        let rs = of(m);
        if rs.is_empty() {
            continue;
        }
        let dev = |f: fn(&DeviceFigures) -> f64| -> Vec<f64> {
            rs.iter().filter_map(|r| r.device.as_ref().map(f)).collect()
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            m.name,
            rs[0].filesystem,
            cell(rs.iter().map(|r| r.writes_per_s).collect(), 0),
            cell(rs.iter().map(|r| r.write_latency_us.p50).collect(), 0),
            cell(rs.iter().map(|r| r.write_latency_us.p99).collect(), 0),
            cell(rs.iter().map(|r| r.write_latency_us.p999).collect(), 0),
            cell(rs.iter().map(|r| r.write_latency_us.max).collect(), 0),
            cell(dev(|d| d.w_mib_s), 1),
            cell(dev(|d| d.w_per_s), 0),
            cell(dev(|d| d.w_merges_per_s), 0),
            cell(dev(|d| d.aqu_sz), 2),
            cell(dev(|d| d.bytes_per_user_byte), 2),
            cell(rs.iter().map(|r| r.cpu_user_s).collect(), 1),
            cell(rs.iter().map(|r| r.cpu_sys_s).collect(), 1),
        ));
    }
    let sources: Vec<CpuSource> = runs.iter().map(|r| r.cpu_source).collect();
    md.push_str(&format!("\n{}\n", CpuSource::describe(&sources)));
    let ratios = xfs_ratios(modes, runs);
    if !ratios.is_empty() {
        md.push_str("\nxfs / ext4 writes/s, per mode (median of each):\n\n");
        for (mode, r) in ratios {
            md.push_str(&format!("- {mode}: {r:.2}x\n"));
        }
    }
    md
}

/// For each MODE/SYNC/COMPRESSION present on both file systems, xfs's
/// median writes/s over the native file system's.
pub fn xfs_ratios(modes: &[WalConfig], runs: &[Run]) -> Vec<(String, f64)> {
    let med = |name: &str| {
        median_min_max(
            runs.iter()
                .filter(|r| r.mode == name)
                .map(|r| r.writes_per_s)
                .collect(),
        )
        .0
    };
    let mut out = Vec::new();
    for x in modes.iter().filter(|m| m.fs == Fs::Xfs) {
        let rest = x.rest();
        if let Some(n) = modes
            .iter()
            .find(|m| m.fs == Fs::Native && m.rest() == rest)
        {
            let base = med(&n.name);
            if base > 0.0 {
                out.push((rest, med(&x.name) / base));
            }
        }
    }
    out
}

/// report.json's experiment object: `modes[]` name their file system, WAL
/// mode, compression and sync policy beside the figures.
pub fn json(p: &Params, modes: &[WalConfig], runs: &[Run]) -> serde_json::Value {
    let modes_json: Vec<serde_json::Value> = modes
        .iter()
        .map(|m| {
            let rs: Vec<&Run> = runs.iter().filter(|r| r.mode == m.name).collect();
            let (med, lo, hi) = median_min_max(rs.iter().map(|r| r.writes_per_s).collect());
            serde_json::json!({
                "name": m.name,
                "fs": match m.fs { Fs::Native => rs.first().map_or("native".to_string(), |r| r.filesystem.clone()), Fs::Xfs => "xfs".into() },
                "wal_mode": m.wal_mode,
                "sync": m.sync,
                "compression": m.compression,
                "wal_recycle": m.recycle,
                "runs": rs.len(),
                "writes_per_s": {"median": med, "min": lo, "max": hi},
                "repeats": rs,
            })
        })
        .collect();
    serde_json::json!({
        "id": "E4",
        "params": {
            "writers": p.writers,
            "value_size": p.value_size,
            "value_compression_ratio": p.value_compression_ratio,
            "writes": p.writes,
            "duration_s": p.duration.as_secs_f64(),
            "repeats": p.repeats,
            "memtable_bytes": p.memtable_bytes,
        },
        "modes": modes_json,
        "xfs_over_ext4": xfs_ratios(modes, runs)
            .into_iter()
            .map(|(m, r)| serde_json::json!({"mode": m, "ratio": r}))
            .collect::<Vec<_>>(),
    })
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

    #[test]
    fn configurations_parse_and_bad_ones_say_what_is_expected() {
        let c = WalConfig::parse("xfs/direct/periodic:10/lz4").unwrap();
        assert_eq!(c.fs, Fs::Xfs);
        assert_eq!(
            (c.wal_mode.as_str(), c.sync.as_str(), c.compression.as_str()),
            ("direct", "periodic:10", "lz4")
        );
        let r = WalConfig::parse("ext4/buffered/group/none/recycle:9").unwrap();
        assert_eq!(
            (r.recycle, r.rest().as_str()),
            (9, "buffered/group/none/recycle:9")
        );
        assert_eq!(r.engine_config().wal_recycle_count, Some(9));
        // Without the suffix: what the engine does by default.
        let default = quietkv::Options::default().wal_recycle_count;
        assert_eq!(c.recycle, default);
        assert_eq!(c.engine_config().wal_recycle_count, Some(default));
        assert_eq!(c.rest(), "direct/periodic:10/lz4");
        let off = WalConfig::parse("ext4/buffered/group/none/recycle:0").unwrap();
        assert_eq!(off.engine_config().wal_recycle_count, Some(0));
        // The suffix names only what differs from the engine's default.
        let expected = if default == 0 {
            "buffered/group/none"
        } else {
            "buffered/group/none/recycle:0"
        };
        assert_eq!(off.rest(), expected);
        for bad in [
            "ext4/buffered/group/none/recycle:-1",
            "ext4/buffered/group/none/recycle:x",
            "ext4/buffered/group/none/keep:4",
            "ext4/direct/group",
            "zfs/direct/group/none",
            "ext4/sideways/group/none",
            "ext4/direct/sometimes/none",
            "ext4/direct/group/snappy",
        ] {
            assert!(WalConfig::parse(bad).is_err(), "{bad}");
        }
        for m in default_modes(true) {
            WalConfig::parse(&m).unwrap();
        }
        assert_eq!(default_modes(false).len() * 2, default_modes(true).len());
    }

    #[test]
    fn xfs_ratio_pairs_the_same_mode_on_both_file_systems() {
        let modes: Vec<WalConfig> = [
            "ext4/buffered/group/none",
            "xfs/buffered/group/none",
            "xfs/direct/group/none",
        ]
        .iter()
        .map(|m| WalConfig::parse(m).unwrap())
        .collect();
        let run = |mode: &str, w: f64| Run {
            mode: mode.into(),
            repeat: 1,
            filesystem: "x".into(),
            writes: 1,
            seconds: 1.0,
            writes_per_s: w,
            write_latency_us: LatencySummary::default(),
            device: None,
            cpu_user_s: 0.0,
            cpu_sys_s: 0.0,
            cpu_source: CpuSource::Cpuacct,
            user_bytes: 0,
        };
        let runs = vec![
            run("ext4/buffered/group/none", 1000.0),
            run("xfs/buffered/group/none", 500.0),
            run("xfs/direct/group/none", 800.0),
        ];
        let r = xfs_ratios(&modes, &runs);
        assert_eq!(r, vec![("buffered/group/none".to_string(), 0.5)]);
    }
}
