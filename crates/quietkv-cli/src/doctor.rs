//! `quietkv doctor`: what this directory's kernel and file system support,
//! which mode each I/O class gets under `auto`, and a self-test that shows
//! what each mode leaves in the page cache.

use std::path::{Path, PathBuf};
use std::time::Instant;

use quietio::{
    measure_device, residency, AccessMode, Capabilities, IoClass, IoEngine, IoEnv, IoOptions,
    MmapWriter, SeqWriter,
};
use serde::Serialize;

#[derive(Serialize)]
pub struct Report {
    dir: String,
    filesystem: String,
    device: Option<String>,
    kernel: String,
    max_sectors_kb: Option<u64>,
    logical_block_size: Option<u64>,
    residency_method: &'static str,
    direct: DirectReport,
    dontcache: Support,
    /// `fallocate` (WAL segments are allocated ahead; the mmap WAL needs it).
    fallocate: Support,
    /// Each WAL write mode: whether it can be set here, and why not.
    wal_modes: Vec<WalModeSupport>,
    auto: serde_json::Map<String, serde_json::Value>,
    auto_fallbacks: serde_json::Map<String, serde_json::Value>,
    selftest_file_mib: u64,
    selftest: Vec<SelfTest>,
    /// Small synced appends through the WAL class, per mode.
    wal_selftest: Vec<WalSelfTest>,
    io: IoReport,
    /// Plain O_DIRECT sequential write and read at depth 1 and at the I/O
    /// depth; empty where direct I/O does not work.
    device_reference: Vec<DeviceReference>,
}

/// How direct sequential files move their bytes here.
#[derive(Serialize)]
struct IoReport {
    engine: &'static str,
    /// Requests in flight per direct file (1 with the sync engine).
    depth: usize,
    /// Why `auto` did not get io_uring, if it did not.
    fallback: Option<String>,
}

#[derive(Serialize)]
struct DeviceReference {
    depth: usize,
    write_mib_s: f64,
    read_mib_s: f64,
}

#[derive(Serialize)]
struct DirectReport {
    supported: bool,
    reason: Option<String>,
    writes_supported: bool,
    write_reason: Option<String>,
    mem_align: usize,
    offset_align: usize,
    align_source: String,
}

#[derive(Serialize)]
struct Support {
    supported: bool,
    reason: Option<String>,
}

#[derive(Serialize)]
struct WalModeSupport {
    mode: String,
    supported: bool,
    reason: Option<String>,
}

#[derive(Serialize)]
struct SelfTest {
    mode: String,
    write_mib_s: f64,
    read_mib_s: f64,
    resident_after_write: f64,
    resident_after_read: f64,
}

/// What a write-ahead log costs in each mode: records appended and synced
/// one at a time, as a `sync` write does.
#[derive(Serialize)]
struct WalSelfTest {
    mode: String,
    appends: usize,
    record_bytes: usize,
    syncs_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    /// File size at the end over the bytes appended: above 1 where a mode
    /// pads its tail (direct) and the padding stays in the file.
    file_bytes_per_record_byte: f64,
}

/// WAL self-test files are allocated this much at a time, as the engine's
/// WALs are (`wal_segment_size`; smaller here, the test writes 200 KiB).
const WAL_SEGMENT_BYTES: u64 = 1 << 20;

/// Records per WAL self-test: enough for a p99, short on a slow disk.
const WAL_APPENDS: usize = 200;
/// Bytes per record: a small write batch.
const WAL_RECORD_BYTES: usize = 1024;

/// Removes the self-test file however the test ends.
struct TestFile(PathBuf);

impl TestFile {
    /// `.quietkv-doctor-PID-WHAT` in the probed directory: named by this
    /// process so that two doctors never share one.
    fn in_dir(caps: &Capabilities, what: &str) -> TestFile {
        TestFile(
            caps.dir
                .join(format!(".quietkv-doctor-{}-{what}", std::process::id())),
        )
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn run(dir: &Path, size_mib: u64, engine: IoEngine, depth: usize) -> Result<Report, String> {
    if size_mib == 0 {
        return Err("--size must be at least 1 MiB".into());
    }
    let opts = IoOptions {
        io_engine: engine,
        io_depth: depth,
        ..IoOptions::default()
    };
    let env = IoEnv::open(dir, opts).map_err(|e| e.to_string())?;
    let caps = env.capabilities().clone();
    let mut auto = serde_json::Map::new();
    let mut fallbacks = serde_json::Map::new();
    for class in IoClass::ALL {
        let r = env.resolution(class);
        auto.insert(class.name().into(), r.mode.name().into());
        if let Some(why) = &r.fallback {
            fallbacks.insert(class.name().into(), why.clone().into());
        }
    }
    let mut modes = vec![AccessMode::Buffered];
    if caps.direct_unusable_reason(true).is_none() {
        modes.push(AccessMode::Direct);
    }
    if caps.dontcache.supported {
        modes.push(AccessMode::DontCache);
    }
    modes.push(AccessMode::Fadvise);
    let resolved = env.engine().clone();
    let depth = env.effective_io_depth();
    // The device first, at depth 1 and at the depth direct files use.
    let mut device_reference = Vec::new();
    if caps.direct_unusable_reason(true).is_none() {
        let mut depths = vec![1];
        if depth > 1 {
            depths.push(depth);
        }
        for d in depths {
            let s = measure_device(&caps.dir, size_mib << 20, d, resolved.engine)
                .map_err(|e| format!("device reference at depth {d}: {e}"))?;
            device_reference.push(DeviceReference {
                depth: d,
                write_mib_s: round1(s.write_mib_s),
                read_mib_s: round1(s.read_mib_s),
            });
        }
    }
    let wal_modes = wal_mode_support(&env);
    let mut selftest = Vec::new();
    let mut wal_selftest = Vec::new();
    for mode in modes {
        selftest.push(self_test(&env, &caps, mode, size_mib)?);
        wal_selftest.push(wal_self_test(&env, &caps, mode)?);
    }
    // The mmap WAL has no file self-test (tables are not written mapped).
    if wal_modes.iter().any(|w| w.mode == "mmap" && w.supported) {
        wal_selftest.push(wal_self_test(&env, &caps, AccessMode::Mmap)?);
    }
    Ok(Report {
        dir: caps.dir.display().to_string(),
        filesystem: caps.filesystem.clone(),
        device: caps.device.clone(),
        kernel: caps.kernel.clone(),
        max_sectors_kb: caps.max_sectors_kb,
        logical_block_size: caps.logical_block_size,
        residency_method: if caps.cachestat {
            "cachestat"
        } else {
            "mincore"
        },
        direct: DirectReport {
            supported: caps.direct.supported,
            reason: caps.direct.reason.clone(),
            writes_supported: caps.direct.writes_supported,
            write_reason: caps.direct.write_reason.clone(),
            mem_align: caps.direct.mem_align,
            offset_align: caps.direct.offset_align,
            align_source: caps.direct.align_source.clone(),
        },
        dontcache: Support {
            supported: caps.dontcache.supported,
            reason: caps.dontcache.reason.clone(),
        },
        fallocate: Support {
            supported: caps.fallocate.supported,
            reason: caps.fallocate.reason.clone(),
        },
        wal_modes,
        auto,
        auto_fallbacks: fallbacks,
        selftest_file_mib: size_mib,
        selftest,
        wal_selftest,
        io: IoReport {
            engine: resolved.engine.name(),
            depth,
            fallback: resolved.fallback,
        },
        device_reference,
    })
}

fn self_test(
    env: &IoEnv,
    caps: &Capabilities,
    mode: AccessMode,
    size_mib: u64,
) -> Result<SelfTest, String> {
    let file = TestFile::in_dir(caps, mode.name());
    let size = (size_mib as usize) << 20;
    // Incompressible-looking bytes, generated once per 1 MiB and reused.
    let chunk: Vec<u8> = {
        let mut x: u64 = 0x243F_6A88_85A3_08D3;
        (0..1 << 20)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    let err = |e: quietio::Error| format!("self-test in {mode} mode: {e}");

    let t = Instant::now();
    let mut w = env
        .create_with_mode(&file.0, IoClass::CompactionWrite, mode)
        .map_err(err)?;
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len());
        w.write_all(&chunk[..n]).map_err(err)?;
        left -= n;
    }
    w.finish(true).map_err(err)?;
    let write_s = t.elapsed().as_secs_f64();
    let resident_after_write = residency(&file.0).map_err(err)?.fraction();

    // Start the read from a cold cache for this file, whatever the write left.
    quietio::evict_file(&file.0).map_err(err)?;
    let t = Instant::now();
    let mut r = env
        .open_sequential_with_mode(&file.0, IoClass::CompactionRead, mode)
        .map_err(err)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        let n = r.read(&mut buf).map_err(err)?;
        if n == 0 {
            break;
        }
        total += n;
    }
    drop(r);
    let read_s = t.elapsed().as_secs_f64();
    if total != size {
        return Err(format!(
            "self-test in {mode} mode read {total} bytes back, wrote {size}"
        ));
    }
    let resident_after_read = residency(&file.0).map_err(err)?.fraction();
    let mib = size as f64 / (1 << 20) as f64;
    Ok(SelfTest {
        mode: mode.name().into(),
        write_mib_s: round1(mib / write_s.max(1e-9)),
        read_mib_s: round1(mib / read_s.max(1e-9)),
        resident_after_write: round3(resident_after_write),
        resident_after_read: round3(resident_after_read),
    })
}

/// Whether each WAL write mode can be set in this directory, with the
/// engine's own reason when it cannot.
fn wal_mode_support(env: &IoEnv) -> Vec<WalModeSupport> {
    [
        AccessMode::Buffered,
        AccessMode::Direct,
        AccessMode::DontCache,
        AccessMode::Fadvise,
        AccessMode::Mmap,
    ]
    .into_iter()
    .map(|mode| {
        let r = env.resolve_explicit(IoClass::WalWrite, mode);
        WalModeSupport {
            mode: mode.name().into(),
            supported: r.is_ok(),
            reason: r.err().map(|e| e.to_string()),
        }
    })
    .collect()
}

/// A WAL self-test file: written with system calls, or through a mapping.
// One at a time, briefly: the size difference of the variants costs nothing.
#[allow(clippy::large_enum_variant)]
enum WalFile {
    Seq(SeqWriter),
    Mapped(MmapWriter),
}

impl WalFile {
    /// Created as the engine creates a WAL in `mode`: allocated a segment
    /// at a time.
    fn create(env: &IoEnv, path: &Path, mode: AccessMode) -> quietio::Result<WalFile> {
        if mode == AccessMode::Mmap {
            return Ok(WalFile::Mapped(env.create_mapped(
                path,
                IoClass::WalWrite,
                WAL_SEGMENT_BYTES,
            )?));
        }
        let mut w = env.create_with_mode(path, IoClass::WalWrite, mode)?;
        w.preallocate_segments(WAL_SEGMENT_BYTES)?;
        Ok(WalFile::Seq(w))
    }

    fn append_synced(&mut self, record: &[u8]) -> quietio::Result<()> {
        match self {
            WalFile::Seq(w) => w.write_all(record).and_then(|()| w.sync()),
            WalFile::Mapped(w) => w.write_all(record).and_then(|()| w.sync()),
        }
    }

    fn finish(self) -> quietio::Result<u64> {
        match self {
            WalFile::Seq(w) => w.finish(true),
            WalFile::Mapped(w) => w.finish(true),
        }
    }
}

/// Appends [`WAL_APPENDS`] records through the WAL class in `mode`, each
/// followed by a sync, and times each append + sync.
fn wal_self_test(
    env: &IoEnv,
    caps: &Capabilities,
    mode: AccessMode,
) -> Result<WalSelfTest, String> {
    let file = TestFile::in_dir(caps, &format!("wal-{}", mode.name()));
    let err = |e: quietio::Error| format!("WAL self-test in {mode} mode: {e}");
    let record: Vec<u8> = (0..WAL_RECORD_BYTES).map(|i| (i * 31 + 7) as u8).collect();
    let mut w = WalFile::create(env, &file.0, mode).map_err(err)?;
    let mut took = Vec::with_capacity(WAL_APPENDS);
    let t0 = Instant::now();
    for _ in 0..WAL_APPENDS {
        let t = Instant::now();
        w.append_synced(&record).map_err(err)?;
        took.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let total_s = t0.elapsed().as_secs_f64();
    w.finish().map_err(err)?;
    let file_len = std::fs::metadata(&file.0)
        .map_err(|e| format!("WAL self-test in {mode} mode: {}: {e}", file.0.display()))?
        .len();
    took.sort_by(f64::total_cmp);
    let pct = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
    Ok(WalSelfTest {
        mode: mode.name().into(),
        appends: WAL_APPENDS,
        record_bytes: WAL_RECORD_BYTES,
        syncs_per_s: round1(WAL_APPENDS as f64 / total_s.max(1e-9)),
        p50_us: round1(pct(0.5)),
        p99_us: round1(pct(0.99)),
        max_us: round1(took[took.len() - 1]),
        file_bytes_per_record_byte: round3(
            file_len as f64 / (WAL_APPENDS * WAL_RECORD_BYTES) as f64,
        ),
    })
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn yes_no(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "no"
    }
}

pub fn print_human(r: &Report) {
    println!("quietkv doctor: {}", r.dir);
    println!();
    println!("  file system     {}", r.filesystem);
    println!(
        "  device          {}{}",
        r.device
            .as_deref()
            .unwrap_or("none (memory-backed or virtual)"),
        r.max_sectors_kb
            .map(|k| format!(", max_sectors_kb {k}"))
            .unwrap_or_default()
    );
    println!("  kernel          {}", r.kernel);
    if r.direct.supported {
        println!(
            "  O_DIRECT        yes (memory alignment {}, offset alignment {}, from {})",
            r.direct.mem_align, r.direct.offset_align, r.direct.align_source
        );
        if !r.direct.writes_supported {
            println!(
                "                  but direct WRITES are refused: {}",
                r.direct.write_reason.as_deref().unwrap_or("")
            );
        }
    } else {
        println!(
            "  O_DIRECT        no: {}",
            r.direct.reason.as_deref().unwrap_or("not supported")
        );
    }
    match &r.dontcache.reason {
        None => println!("  RWF_DONTCACHE   {}", yes_no(r.dontcache.supported)),
        Some(why) => println!("  RWF_DONTCACHE   no: {why}"),
    }
    match &r.fallocate.reason {
        None => println!("  fallocate       {}", yes_no(r.fallocate.supported)),
        Some(why) => println!("  fallocate       no: {why}"),
    }
    println!("  residency via   {}", r.residency_method);
    println!();
    println!("  WAL write modes (WalWrite)");
    for w in &r.wal_modes {
        match &w.reason {
            None => println!("  {:<16} {}", w.mode, yes_no(w.supported)),
            Some(why) => println!("  {:<16} no: {why}", w.mode),
        }
    }
    println!();
    println!("  I/O class        mode under auto");
    for (class, mode) in &r.auto {
        // The reasons are printed above; say only that auto fell back.
        let note = if r.auto_fallbacks.contains_key(class) {
            "  (auto fell back: no usable O_DIRECT/RWF_DONTCACHE, see above)"
        } else {
            ""
        };
        println!("  {class:<16} {}{note}", mode.as_str().unwrap_or("?"));
    }
    println!();
    println!(
        "  self-test: write then read a {} MiB file in each mode",
        r.selftest_file_mib
    );
    println!("  (cached = share of the file's pages left in the page cache)");
    println!();
    println!(
        "  {:<10} {:>11} {:>14} {:>11} {:>13}",
        "mode", "write MiB/s", "cached after", "read MiB/s", "cached after"
    );
    println!(
        "  {:<10} {:>11} {:>14} {:>11} {:>13}",
        "", "", "write", "", "read"
    );
    for s in &r.selftest {
        println!(
            "  {:<10} {:>11.1} {:>13.1}% {:>11.1} {:>12.1}%",
            s.mode,
            s.write_mib_s,
            s.resident_after_write * 100.0,
            s.read_mib_s,
            s.resident_after_read * 100.0
        );
    }
    // The device itself, beside the modes: how close each mode comes.
    for d in &r.device_reference {
        println!(
            "  {:<10} {:>11.1} {:>14} {:>11.1} {:>13}",
            format!("device q{}", d.depth),
            d.write_mib_s,
            "-",
            d.read_mib_s,
            "-"
        );
    }
    if !r.device_reference.is_empty() {
        println!();
        println!("  device qN: plain O_DIRECT with N 1 MiB requests in flight, a new");
        println!("  preallocated file written (then fdatasync) and read back, like fio");
    }
    println!();
    println!(
        "  WAL self-test: {} appends of {} B, each synced (a `sync` write), to a\n  file allocated {} MiB at a time as the engine's WALs are",
        r.wal_selftest.first().map_or(0, |w| w.appends),
        r.wal_selftest.first().map_or(0, |w| w.record_bytes),
        WAL_SEGMENT_BYTES >> 20
    );
    println!();
    println!(
        "  {:<10} {:>9} {:>9} {:>9} {:>10}",
        "mode", "syncs/s", "p50 us", "p99 us", "file/data"
    );
    for w in &r.wal_selftest {
        println!(
            "  {:<10} {:>9.0} {:>9.0} {:>9.0} {:>9.2}x",
            w.mode, w.syncs_per_s, w.p50_us, w.p99_us, w.file_bytes_per_record_byte
        );
    }
    println!();
    match &r.io.fallback {
        None => println!(
            "  direct files: {} engine, {} request{} in flight",
            r.io.engine,
            r.io.depth,
            if r.io.depth == 1 { "" } else { "s" }
        ),
        Some(why) => println!("  direct files: {} engine: {why}", r.io.engine),
    }
    if !r.device_reference.is_empty() {
        let direct = r.selftest.iter().find(|s| s.mode == "direct");
        if let (Some(s), Some(d)) = (direct, r.device_reference.last()) {
            println!();
            println!(
                "  direct mode at depth {}: write {:.2}x, read {:.2}x the device reference",
                d.depth,
                s.write_mib_s / d.write_mib_s.max(1e-9),
                s.read_mib_s / d.read_mib_s.max(1e-9)
            );
        }
    }
    println!();
    println!("  direct and dontcache should leave ~0% cached: background work in those");
    println!("  modes does not push your hot data out of the page cache. Throughput on a");
    println!("  shared or host-cached disk is noisy; compare modes within one run.");
}
