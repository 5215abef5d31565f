//! One crash cycle's engine options, drawn at random and handed to the
//! worker process as a short `name=value,...` string.

use std::fmt;
use std::str::FromStr;

use std::time::Duration;

use quietkv::{AccessMode, Compression, IoClass, Options, WalSync};

/// xorshift64*: the stress tool's only randomness, seeded for replays.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The classes whose mode a cycle chooses, in the order of `StressConfig::modes`.
pub const CLASSES: [IoClass; 5] = [
    IoClass::WalWrite,
    IoClass::FlushWrite,
    IoClass::CompactionWrite,
    IoClass::CompactionRead,
    IoClass::UserRead,
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StressConfig {
    pub memtable_size: usize,
    pub compression: Compression,
    pub bloom_bits: usize,
    pub block_cache: usize,
    /// Every policy must keep every acknowledged write across SIGKILL.
    pub wal_sync: WalSync,
    pub wal_compression: Compression,
    pub modes: [AccessMode; 5],
    /// `Options::wal_recycle_count`: kills land in reused WAL files.
    pub wal_recycle: usize,
}

impl StressConfig {
    /// A random configuration using only modes the directory supports
    /// (`direct`, `dontcache`, and `mmap_wal` - fallocate works, so the WAL
    /// may be written through a mapping: what the probe found).
    pub fn random(rng: &mut Rng, direct: bool, dontcache: bool, mmap_wal: bool) -> StressConfig {
        let mut writes = vec![AccessMode::Buffered, AccessMode::Fadvise, AccessMode::Auto];
        if direct {
            writes.push(AccessMode::Direct);
        }
        if dontcache {
            writes.push(AccessMode::DontCache);
        }
        let mut reads = writes.clone();
        reads.push(AccessMode::Mmap);
        // The mmap write mode is the WAL's alone.
        let mut wal_writes = writes.clone();
        if mmap_wal {
            wal_writes.push(AccessMode::Mmap);
        }
        let mut modes = [AccessMode::Auto; 5];
        for (m, class) in modes.iter_mut().zip(CLASSES) {
            *m = rng.pick(if class_reads(class) {
                &reads
            } else if class == IoClass::WalWrite {
                &wal_writes
            } else {
                &writes
            });
        }
        StressConfig {
            memtable_size: rng.pick(&[32 << 10, 128 << 10, 1 << 20]),
            compression: rng.pick(&[Compression::None, Compression::Lz4, Compression::Zstd]),
            bloom_bits: rng.pick(&[0, 10]),
            block_cache: rng.pick(&[0, 1 << 20]),
            wal_sync: rng.pick(&[
                WalSync::None,
                WalSync::Group,
                WalSync::PerWrite,
                WalSync::Periodic(Duration::from_millis(5)),
                WalSync::Periodic(Duration::from_millis(50)),
            ]),
            wal_compression: rng.pick(&[Compression::None, Compression::Lz4, Compression::Zstd]),
            modes,
            wal_recycle: rng.pick(&[0, 0, 2]),
        }
    }

    /// Replaces the drawn WAL mode and recycle count with the ones given
    /// (the `--wal-mode` and `--wal-recycle` flags).
    pub fn pin_wal(&mut self, mode: Option<AccessMode>, recycle: Option<usize>) {
        let wal = CLASSES.iter().position(|c| *c == IoClass::WalWrite);
        if let (Some(m), Some(i)) = (mode, wal) {
            self.modes[i] = m;
        }
        if let Some(r) = recycle {
            self.wal_recycle = r;
        }
    }

    /// Small trees, so a short cycle flushes and compacts through several
    /// levels.
    pub fn options(&self) -> Options {
        let mut o = Options::default()
            .memtable_size(self.memtable_size)
            .l0_compaction_trigger(2)
            .l0_slowdown_trigger(6)
            .l0_stop_trigger(10)
            .level_base_bytes(1 << 20)
            .target_file_size(256 << 10)
            .compression(self.compression)
            .bloom_bits_per_key(self.bloom_bits)
            .block_cache_bytes(self.block_cache)
            .direct_write_buffer_size(64 << 10)
            .compaction_readahead_size(128 << 10)
            .wal_sync(self.wal_sync)
            .wal_compression(self.wal_compression)
            .wal_recycle_count(self.wal_recycle);
        for (class, mode) in CLASSES.into_iter().zip(self.modes) {
            o = o.io_mode(class, mode);
        }
        o
    }
}

fn class_reads(c: IoClass) -> bool {
    matches!(c, IoClass::UserRead | IoClass::CompactionRead)
}

fn compression_name(c: Compression) -> &'static str {
    match c {
        Compression::None => "none",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
    }
}

impl fmt::Display for StressConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mem={},comp={},bloom={},cache={},sync={},walcomp={}",
            self.memtable_size,
            compression_name(self.compression),
            self.bloom_bits,
            self.block_cache,
            self.wal_sync,
            compression_name(self.wal_compression)
        )?;
        for m in self.modes {
            write!(f, ",{m}")?;
        }
        write!(f, ",recycle={}", self.wal_recycle)
    }
}

impl FromStr for StressConfig {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(',').collect();
        if parts.len() != 7 + CLASSES.len() {
            return Err(format!("bad stress config {s:?}"));
        }
        let field = |i: usize, name: &str| -> Result<&str, String> {
            parts[i]
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix('='))
                .ok_or_else(|| format!("bad stress config {s:?}: expected {name}=..."))
        };
        let num = |i: usize, name: &str| -> Result<usize, String> {
            field(i, name)?
                .parse()
                .map_err(|_| format!("bad stress config {s:?}: {name}"))
        };
        let codec = |name: &str| match name {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            other => Err(format!("bad compression {other:?}")),
        };
        let compression = codec(field(1, "comp")?)?;
        let wal_compression = codec(field(5, "walcomp")?)?;
        let mut modes = [AccessMode::Auto; 5];
        for (i, m) in modes.iter_mut().enumerate() {
            *m = parts[6 + i]
                .parse()
                .map_err(|_| format!("bad access mode {:?}", parts[6 + i]))?;
        }
        Ok(StressConfig {
            memtable_size: num(0, "mem")?,
            compression,
            bloom_bits: num(2, "bloom")?,
            block_cache: num(3, "cache")?,
            wal_sync: field(4, "sync")?
                .parse()
                .map_err(|e| format!("bad stress config {s:?}: {e}"))?,
            wal_compression,
            modes,
            wal_recycle: num(6 + CLASSES.len(), "recycle")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_round_trip_and_validate() {
        let mut rng = Rng::new(9);
        let mut mmap_wals = 0;
        for _ in 0..200 {
            let c = StressConfig::random(&mut rng, true, true, true);
            assert_eq!(c.to_string().parse::<StressConfig>().unwrap(), c);
            c.options().validate().unwrap();
            // Mmap only for read classes and the WAL.
            assert_eq!(CLASSES[0], IoClass::WalWrite);
            assert!(c.modes[1..3].iter().all(|m| *m != AccessMode::Mmap));
            mmap_wals += usize::from(c.modes[0] == AccessMode::Mmap);
        }
        assert!(mmap_wals > 0, "no cycle drew the mmap WAL");
        let mut rng = Rng::new(9);
        let recycled = (0..200)
            .filter(|_| StressConfig::random(&mut rng, true, true, true).wal_recycle > 0)
            .count();
        assert!(recycled > 0, "no cycle drew WAL recycling");
        let c = StressConfig::random(&mut rng, false, false, false);
        assert_ne!(c.modes[0], AccessMode::Mmap);
        assert!(c
            .modes
            .iter()
            .all(|m| !matches!(m, AccessMode::Direct | AccessMode::DontCache)));
        assert!("mem=1".parse::<StressConfig>().is_err());
    }

    #[test]
    fn pinning_the_wal_keeps_the_other_draws() {
        let mut rng = Rng::new(3);
        let drawn = StressConfig::random(&mut rng, true, true, true);
        let mut pinned = drawn.clone();
        pinned.pin_wal(Some(AccessMode::Mmap), Some(4));
        assert_eq!(pinned.modes[0], AccessMode::Mmap);
        assert_eq!(pinned.wal_recycle, 4);
        assert_eq!(pinned.modes[1..], drawn.modes[1..]);
        assert_eq!(pinned.wal_sync, drawn.wal_sync);
        assert_eq!(pinned.to_string().parse::<StressConfig>().unwrap(), pinned);
        let mut unpinned = drawn.clone();
        unpinned.pin_wal(None, None);
        assert_eq!(unpinned, drawn);
    }
}
