//! What the device gives E5's closed loop at most: the same number of
//! synchronous readers reading the same tables with O_DIRECT and nothing
//! in between, as `fio --rw=randread --direct=1 --ioengine=psync
//! --numjobs=N` would. A direct get cannot read faster than this, so the
//! report can say how much of the device a mode used, and the kernel's CPU
//! per such read is the floor for a direct get's system CPU.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::report::stat_of;

/// One measurement of the ceiling, or the median of several
/// ([`combine`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ceiling {
    /// Synchronous readers, one request in flight each.
    pub threads: usize,
    /// Bytes per read, a multiple of the direct-I/O alignment.
    pub read_bytes: usize,
    /// Wall time the readers ran (each time).
    pub seconds: f64,
    /// Reads completed (in all).
    pub reads: u64,
    pub reads_per_s: f64,
    /// Each measurement's reads/s, in the order taken (one per round).
    #[serde(default)]
    pub each_reads_per_s: Vec<f64>,
    /// Mean time of one read, issue to completion.
    pub mean_us: f64,
    /// The readers' own system and user CPU per read (getrusage per thread).
    pub sys_us_per_read: f64,
    pub user_us_per_read: f64,
}

impl Ceiling {
    /// One line for the report's header.
    pub fn text(&self) -> String {
        let spread = match stat_of(self.each_reads_per_s.clone()) {
            Some(s) if s.n > 1 => format!(
                " (median of {} measurements, one after each round: {:.0}..{:.0})",
                s.n, s.min, s.max
            ),
            _ => String::new(),
        };
        format!(
            "{} synchronous O_DIRECT readers of {} B at random aligned offsets of the same tables, {:.0} s, nothing in between (as fio --rw=randread --ioengine=psync --direct=1): {:.0} reads/s{spread}, mean {:.0} us, {:.1} us of system and {:.1} us of user CPU per read",
            self.threads,
            self.read_bytes,
            self.seconds,
            self.reads_per_s,
            self.mean_us,
            self.sys_us_per_read,
            self.user_us_per_read
        )
    }
}

/// The median of each figure over `all` (measured with the same readers
/// and read size), and every measurement's reads/s; `None` for none.
pub fn combine(all: &[Ceiling]) -> Option<Ceiling> {
    let first = all.first()?;
    let median =
        |f: fn(&Ceiling) -> f64| stat_of(all.iter().map(f).collect()).map_or(0.0, |s| s.median);
    Some(Ceiling {
        threads: first.threads,
        read_bytes: first.read_bytes,
        seconds: median(|c| c.seconds),
        reads: all.iter().map(|c| c.reads).sum(),
        reads_per_s: median(|c| c.reads_per_s),
        each_reads_per_s: all.iter().map(|c| c.reads_per_s).collect(),
        mean_us: median(|c| c.mean_us),
        sys_us_per_read: median(|c| c.sys_us_per_read),
        user_us_per_read: median(|c| c.user_us_per_read),
    })
}

/// The read size the ceiling uses: the direct mode's mean device read
/// (bytes per device read in its runs) to the nearest multiple of the
/// alignment, so the ceiling reads what a direct get reads; without one,
/// a value and its entry's overhead rounded up.
pub fn read_size(mean_device_read: Option<f64>, value_size: usize, align: usize) -> usize {
    let align = align.max(1);
    match mean_device_read.filter(|b| b.is_finite() && *b > 0.0) {
        Some(b) => ((b / align as f64).round() as usize).max(1) * align,
        None => (value_size + 64).next_multiple_of(align),
    }
}

/// The readable part of one table: `slots` possible read offsets, every
/// `align` bytes from 0.
struct Target {
    file: File,
    path: PathBuf,
    slots: u64,
}

/// Where the `n`th of all the tables' slots lies: the table (by the
/// running sum of slots before each) and the offset in it.
fn locate(starts: &[u64], n: u64, align: usize) -> (usize, u64) {
    let i = starts.partition_point(|&s| s <= n) - 1;
    (i, (n - starts[i]) * align as u64)
}

/// A fast, seedable generator for offsets (splitmix64); offsets need to
/// be spread, not unpredictable.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// This thread's (system, user) CPU seconds.
fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage writes the struct it is given and nothing else;
    // RUSAGE_THREAD asks for the calling thread's usage.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(ru.ru_stime), s(ru.ru_utime))
}

/// What one reader did.
#[derive(Default)]
struct ReaderTally {
    reads: u64,
    busy: Duration,
    sys_s: f64,
    user_s: f64,
}

/// Reads the `.sst` files among `files` (names relative to `dir`, with
/// their sizes) from `threads` synchronous readers for `seconds`, each read
/// at a random multiple of the direct-I/O alignment, of the size
/// [`read_size`] gives for `mean_device_read` and `value_size`. The files
/// are only read. An error names what failed: no table, no direct reads in
/// `dir`, no table as large as one read, or a read (file and offset).
pub fn measure(
    dir: &Path,
    files: &[(String, u64)],
    threads: usize,
    mean_device_read: Option<f64>,
    value_size: usize,
    seconds: f64,
) -> Result<Ceiling, String> {
    let sst: Vec<(PathBuf, u64)> = files
        .iter()
        .filter(|(name, _)| name.ends_with(".sst"))
        .map(|(name, len)| (dir.join(name), *len))
        .collect();
    let Some((sample, _)) = sst.first() else {
        return Err(format!("no table in {} to read", dir.display()));
    };
    let caps = quietio::probe_read_only(dir, sample).map_err(|e| e.to_string())?;
    if let Some(why) = caps.direct_unusable_reason(false) {
        return Err(format!("no direct reads in {}: {why}", dir.display()));
    }
    let align = caps.direct.offset_align.max(1);
    let read_bytes = read_size(mean_device_read, value_size, align);
    if threads == 0 {
        return Err("the ceiling needs at least one reader".into());
    }
    let tables: Vec<(PathBuf, u64)> = sst
        .into_iter()
        .filter(|(_, len)| *len >= read_bytes as u64)
        .collect();
    if tables.is_empty() {
        return Err(format!(
            "no table in {} holds a read of {read_bytes} B",
            dir.display()
        ));
    }
    let mut targets = Vec::with_capacity(tables.len());
    for (path, len) in tables {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .map_err(|e| format!("cannot open {} for direct reads: {e}", path.display()))?;
        let slots = (len - read_bytes as u64) / align as u64 + 1;
        targets.push(Target { file, path, slots });
    }
    let mut starts = Vec::with_capacity(targets.len());
    let mut total = 0u64;
    for t in &targets {
        starts.push(total);
        total += t.slots;
    }

    let mem_align = caps.direct.mem_align;
    let stop = AtomicBool::new(false);
    let began = Instant::now();
    let tallies: Vec<Result<ReaderTally, String>> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..threads)
            .map(|i| {
                let (targets, starts, stop) = (&targets, &starts, &stop);
                s.spawn(move || {
                    let mut buf =
                        quietio::AlignedBuf::for_direct_io_once(read_bytes, mem_align, align)
                            .map_err(|e| e.to_string())?;
                    let mut rng = 0x5eed_0000 + i as u64;
                    let mut tally = ReaderTally::default();
                    let (sys0, user0) = thread_cpu();
                    while !stop.load(Ordering::Relaxed) {
                        let (ti, offset) = locate(starts, next_random(&mut rng) % total, align);
                        let t = &targets[ti];
                        let start = Instant::now();
                        let n = t
                            .file
                            .read_at(&mut buf.full_mut()[..read_bytes], offset)
                            .map_err(|e| {
                                format!(
                                    "direct read of {} at offset {offset}: {e}",
                                    t.path.display()
                                )
                            })?;
                        tally.busy += start.elapsed();
                        if n != read_bytes {
                            return Err(format!(
                                "direct read of {} at offset {offset}: {n} B of {read_bytes}",
                                t.path.display()
                            ));
                        }
                        tally.reads += 1;
                    }
                    let (sys1, user1) = thread_cpu();
                    tally.sys_s = sys1 - sys0;
                    tally.user_s = user1 - user0;
                    Ok(tally)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds.max(0.0)));
        stop.store(true, Ordering::Relaxed);
        readers
            .into_iter()
            .map(|r| {
                r.join()
                    .unwrap_or_else(|_| Err("a ceiling reader panicked".into()))
            })
            .collect()
    });
    let wall = began.elapsed().as_secs_f64();
    let mut all = ReaderTally::default();
    for t in tallies {
        let t = t?;
        all.reads += t.reads;
        all.busy += t.busy;
        all.sys_s += t.sys_s;
        all.user_s += t.user_s;
    }
    let per_read = |x: f64| x * 1e6 / all.reads.max(1) as f64;
    let reads_per_s = all.reads as f64 / wall.max(1e-9);
    Ok(Ceiling {
        threads,
        read_bytes,
        seconds: wall,
        reads: all.reads,
        reads_per_s,
        each_reads_per_s: vec![reads_per_s],
        mean_us: per_read(all.busy.as_secs_f64()),
        sys_us_per_read: per_read(all.sys_s),
        user_us_per_read: per_read(all.user_s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_size_is_the_direct_reads_mean_to_the_nearest_sector() {
        // A 4.1 KiB block spans 9 sectors of 512 B, sometimes 10.
        assert_eq!(read_size(Some(4649.0), 4096, 512), 4608);
        assert_eq!(read_size(Some(4900.0), 4096, 512), 5120);
        assert_eq!(read_size(Some(100.0), 4096, 512), 512);
        assert_eq!(read_size(None, 4096, 512), 4608);
        assert_eq!(read_size(Some(f64::NAN), 100, 4096), 4096);
    }

    #[test]
    fn every_slot_maps_to_one_aligned_offset_inside_its_table() {
        // Tables of 3, 1 and 2 slots.
        let starts = [0, 3, 4];
        let got: Vec<_> = (0..6).map(|n| locate(&starts, n, 512)).collect();
        assert_eq!(got, [(0, 0), (0, 512), (0, 1024), (1, 0), (2, 0), (2, 512)]);
    }

    #[test]
    fn several_measurements_combine_into_their_medians() {
        let one = |reads_per_s: f64, sys: f64| Ceiling {
            threads: 32,
            read_bytes: 4608,
            seconds: 20.0,
            reads: (reads_per_s * 20.0) as u64,
            reads_per_s,
            each_reads_per_s: vec![reads_per_s],
            mean_us: 32.0 / reads_per_s * 1e6,
            sys_us_per_read: sys,
            user_us_per_read: 1.8,
        };
        assert_eq!(combine(&[]), None);
        let all = [one(64_000.0, 8.4), one(6_000.0, 13.0), one(60_000.0, 8.2)];
        let c = combine(&all).unwrap();
        assert_eq!(c.reads_per_s, 60_000.0);
        assert_eq!(c.sys_us_per_read, 8.4);
        assert_eq!(c.each_reads_per_s, [64_000.0, 6_000.0, 60_000.0]);
        assert_eq!(c.reads, 2_600_000);
        assert!(
            c.text().contains(
                "60000 reads/s (median of 3 measurements, one after each round: 6000..64000)"
            ),
            "{}",
            c.text()
        );
        let two = combine(&all[..2]).unwrap();
        assert_eq!(two.reads_per_s, 35_000.0);
        // One measurement is shown as it is.
        assert!(!combine(&all[..1]).unwrap().text().contains("median"));
    }

    #[test]
    fn the_ceiling_reads_the_tables_and_counts_its_reads() {
        // On the repository's disk, not /tmp, which may be a tmpfs.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut files = Vec::new();
        for (name, len) in [
            ("000001.sst", 1 << 20),
            ("000002.sst", 300 << 10),
            ("MANIFEST", 8192),
        ] {
            std::fs::write(dir.path().join(name), vec![7u8; len]).unwrap();
            files.push((name.to_string(), len as u64));
        }
        // Too small for one read: left out, not an error.
        std::fs::write(dir.path().join("000003.sst"), [1u8; 100]).unwrap();
        files.push(("000003.sst".into(), 100));
        let caps = quietio::probe(dir.path()).unwrap();
        if let Some(why) = caps.direct_unusable_reason(false) {
            skip(&why);
            return;
        }
        let c = measure(dir.path(), &files, 2, Some(4000.0), 4096, 0.3).unwrap();
        assert_eq!((c.threads, c.read_bytes), (2, 4096));
        assert!(c.reads > 0 && c.reads_per_s > 0.0, "{c:?}");
        assert!(c.mean_us > 0.0 && c.sys_us_per_read >= 0.0, "{c:?}");
        assert!(c
            .text()
            .contains("2 synchronous O_DIRECT readers of 4096 B"));
        // A directory with no table as large as one read is refused.
        let none = measure(dir.path(), &files, 1, Some(4e6), 4096, 0.1).unwrap_err();
        assert!(
            none.contains("no table") && none.contains("holds a read"),
            "{none}"
        );
        let no_tables = &files[2..3];
        let empty = measure(dir.path(), no_tables, 1, None, 4096, 0.1).unwrap_err();
        assert!(empty.contains("no table"), "{empty}");
    }

    /// A machine without O_DIRECT here: say so and skip; under CI, fail.
    fn skip(reason: &str) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to run this test, but: {reason}"
        );
        eprintln!("skipped: {reason}");
    }
}
