//! I/O classes, access modes, and the one function that decides which mode
//! a class really gets in a directory.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::probe::Capabilities;

/// Why the engine touches a file. Each class has its own access mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IoClass {
    /// Point reads and iterators serving the user.
    UserRead,
    /// Reading compaction input tables.
    CompactionRead,
    /// Writing compaction output tables.
    CompactionWrite,
    /// Writing a memtable out as a new table.
    FlushWrite,
    /// Appending to the write-ahead log.
    WalWrite,
    /// Writing the manifest and CURRENT.
    Manifest,
    /// Copying files out of or into a database: the reads and writes of a
    /// checkpoint, a backup and a restore. Cold bytes for the page cache:
    /// shipping a copy must not evict what the user reads.
    Backup,
}

impl IoClass {
    /// Every class, in the order per-class tables use (the order of
    /// [`IoStats::snapshot`](crate::IoStats::snapshot)).
    pub const ALL: [IoClass; IoClass::COUNT] = [
        IoClass::UserRead,
        IoClass::CompactionRead,
        IoClass::CompactionWrite,
        IoClass::FlushWrite,
        IoClass::WalWrite,
        IoClass::Manifest,
        IoClass::Backup,
    ];

    /// How many classes there are: the length of every per-class table.
    pub const COUNT: usize = 7;

    /// The class's name as printed (`UserRead`, `CompactionWrite`, ...),
    /// the same as its `Display`.
    pub fn name(self) -> &'static str {
        match self {
            IoClass::UserRead => "UserRead",
            IoClass::CompactionRead => "CompactionRead",
            IoClass::CompactionWrite => "CompactionWrite",
            IoClass::FlushWrite => "FlushWrite",
            IoClass::WalWrite => "WalWrite",
            IoClass::Manifest => "Manifest",
            IoClass::Backup => "Backup",
        }
    }

    /// The class's position in [`ALL`](Self::ALL), for per-class arrays.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Classes that only read files (mmap is allowed only for these).
    pub fn is_read(self) -> bool {
        matches!(self, IoClass::UserRead | IoClass::CompactionRead)
    }

    /// Background classes share the background rate limiter: a copy
    /// taken while the database serves users is background work too.
    pub fn is_throttled(self) -> bool {
        matches!(
            self,
            IoClass::CompactionRead | IoClass::CompactionWrite | IoClass::Backup
        )
    }
}

impl fmt::Display for IoClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a user asks for, per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AccessMode {
    /// Plain page-cache I/O.
    Buffered,
    /// O_DIRECT: bypasses the page cache entirely.
    Direct,
    /// Buffered I/O with RWF_DONTCACHE: pages this I/O brings in are dropped
    /// when it completes.
    DontCache,
    /// Buffered I/O plus incremental write-back and POSIX_FADV_DONTNEED as the
    /// work proceeds.
    Fadvise,
    /// Memory-mapped reads (read classes), or for the WAL a preallocated
    /// segment written through a shared mapping and synced with `msync`.
    Mmap,
    /// Let the directory probe decide.
    #[default]
    Auto,
}

impl AccessMode {
    /// The lower-case name `FromStr` accepts and `Display` prints:
    /// `buffered`, `direct`, `dontcache`, `fadvise`, `mmap` or `auto`.
    pub fn name(self) -> &'static str {
        match self {
            AccessMode::Buffered => "buffered",
            AccessMode::Direct => "direct",
            AccessMode::DontCache => "dontcache",
            AccessMode::Fadvise => "fadvise",
            AccessMode::Mmap => "mmap",
            AccessMode::Auto => "auto",
        }
    }
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AccessMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "buffered" => Ok(AccessMode::Buffered),
            "direct" | "o_direct" => Ok(AccessMode::Direct),
            "dontcache" | "rwf_dontcache" => Ok(AccessMode::DontCache),
            "fadvise" => Ok(AccessMode::Fadvise),
            "mmap" => Ok(AccessMode::Mmap),
            "auto" => Ok(AccessMode::Auto),
            other if other.contains("mmap") && other.contains("direct") => Err(Error::invalid(
                format!("access mode '{s}': mmap reads and O_DIRECT cannot be combined for one class; pick one of them"),
            )),
            _ => Err(Error::invalid(format!(
                "unknown access mode '{s}' (expected buffered, direct, dontcache, fadvise, mmap or auto)"
            ))),
        }
    }
}

/// The mode a class really gets after resolution: never `Auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectiveMode {
    /// Plain page-cache reads and writes.
    Buffered,
    /// O_DIRECT, which the probe found working in the directory. Buffers
    /// start on a page boundary; offsets and lengths are multiples of
    /// [`DirectCaps::offset_align`](crate::DirectCaps::offset_align), a
    /// partial last block being written zero-padded and the file then
    /// truncated to its true length.
    Direct,
    /// Buffered I/O with `RWF_DONTCACHE`, which the probe found working: the
    /// kernel needs Linux 6.14+ and the file system support for it (ext4
    /// from 6.17, xfs from 6.15).
    DontCache,
    /// Buffered I/O; writers start write-back every
    /// [`IoOptions::fadvise_chunk_size`](crate::IoOptions::fadvise_chunk_size)
    /// bytes (`sync_file_range`) and drop the pages written back
    /// (`POSIX_FADV_DONTNEED`), sequential readers drop the pages behind
    /// them, random readers only turn readahead off. Works on every kernel.
    Fadvise,
    /// Memory-mapped reads ([`RandomReader`](crate::RandomReader) only: a
    /// [`SeqReader`](crate::SeqReader) reads such a file buffered).
    Mmap,
}

impl EffectiveMode {
    /// The lower-case name, spelled as [`AccessMode::name`] spells the same
    /// mode.
    pub fn name(self) -> &'static str {
        match self {
            EffectiveMode::Buffered => "buffered",
            EffectiveMode::Direct => "direct",
            EffectiveMode::DontCache => "dontcache",
            EffectiveMode::Fadvise => "fadvise",
            EffectiveMode::Mmap => "mmap",
        }
    }
}

impl fmt::Display for EffectiveMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A resolved mode plus, when `auto` had to fall back, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The mode the class gets.
    pub mode: EffectiveMode,
    /// Why `auto` could not give a compaction class direct I/O and what it
    /// chose instead (logged once per directory and class); `None` for an
    /// explicit mode and for `auto` that got its first choice.
    pub fallback: Option<String>,
}

/// Decides the mode `class` gets in the directory described by `caps`.
///
/// `Auto`: compaction reads and writes, flushes and backup copies get
/// direct where it works, else dontcache, else buffered; every other class
/// gets buffered (the WAL is small and sequential, user reads want the
/// cache). `Backup` both reads and writes, so it gets direct only where
/// direct writes work too. An explicit mode that cannot work
/// is a `NotSupported` error that says why and what to set instead.
pub fn resolve(class: IoClass, requested: AccessMode, caps: &Capabilities) -> Result<Resolution> {
    let plain = |mode| {
        Ok(Resolution {
            mode,
            fallback: None,
        })
    };
    let writes = !class.is_read();
    match requested {
        AccessMode::Buffered => plain(EffectiveMode::Buffered),
        AccessMode::Fadvise => plain(EffectiveMode::Fadvise),
        AccessMode::Mmap if class == IoClass::WalWrite => match &caps.fallocate.reason {
            None if caps.fallocate.supported => plain(EffectiveMode::Mmap),
            why => Err(Error::not_supported(format!(
                "{class}: an mmap WAL was requested but fallocate cannot work in {} ({}): {}; a write through a mapping into a block the file system could not allocate would kill the process (SIGBUS); set {class} to buffered, direct or dontcache",
                caps.dir.display(),
                caps.filesystem,
                why.as_deref().unwrap_or("not supported"),
            ))
            .with_file(&caps.dir)),
        },
        AccessMode::Mmap if writes => Err(Error::invalid(format!(
            "{class}: mmap writes are only for the WAL (WalWrite); for {class} mmap is not a mode, use buffered, direct, dontcache or fadvise"
        ))),
        AccessMode::Mmap => plain(EffectiveMode::Mmap),
        AccessMode::Direct => match caps.direct_unusable_reason(writes) {
            None => plain(EffectiveMode::Direct),
            Some(why) => Err(Error::not_supported(format!(
                "{class}: direct I/O was requested but cannot work in {} ({}): {why}; set {class} to auto, buffered or fadvise{}",
                caps.dir.display(),
                caps.filesystem,
                if caps.dontcache.supported { ", or dontcache" } else { "" },
            ))
            .with_file(&caps.dir)),
        },
        AccessMode::DontCache => match &caps.dontcache.reason {
            None if caps.dontcache.supported => plain(EffectiveMode::DontCache),
            why => Err(Error::not_supported(format!(
                "{class}: RWF_DONTCACHE was requested but cannot work in {} ({}): {}; set {class} to auto, buffered or fadvise",
                caps.dir.display(),
                caps.filesystem,
                why.as_deref().unwrap_or("not supported"),
            ))
            .with_file(&caps.dir)),
        },
        AccessMode::Auto => {
            // Background bytes bypass the cache where they can: compaction
            // reads and writes, and flushes, whose tables hold mostly keys
            // nobody reads soon (random writes spread over the key space).
            if !matches!(
                class,
                IoClass::CompactionRead
                    | IoClass::CompactionWrite
                    | IoClass::FlushWrite
                    | IoClass::Backup
            ) {
                return plain(EffectiveMode::Buffered);
            }
            if caps.direct_unusable_reason(writes).is_none() {
                return plain(EffectiveMode::Direct);
            }
            let direct_why = caps.direct_unusable_reason(writes).unwrap_or_default();
            if caps.dontcache.supported {
                return Ok(Resolution {
                    mode: EffectiveMode::DontCache,
                    fallback: Some(format!("direct I/O unavailable ({direct_why}); using dontcache")),
                });
            }
            Ok(Resolution {
                mode: EffectiveMode::Buffered,
                fallback: Some(format!(
                    "direct I/O unavailable ({direct_why}) and RWF_DONTCACHE unavailable ({}); using buffered",
                    caps.dontcache.reason.as_deref().unwrap_or("not supported")
                )),
            })
        }
    }
}

/// An access mode for every class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassModes([AccessMode; IoClass::COUNT]);

impl ClassModes {
    /// The same requested mode for every class. `Mmap` for all of them
    /// fails at [`IoEnv::open`](crate::IoEnv::open), since the write
    /// classes cannot map (a read-only environment ignores them).
    pub fn all(mode: AccessMode) -> Self {
        ClassModes([mode; IoClass::COUNT])
    }

    /// The mode requested for `class`.
    pub fn get(&self, class: IoClass) -> AccessMode {
        self.0[class.index()]
    }

    /// Requests `mode` for `class`; returns `self` so calls can be chained.
    pub fn set(&mut self, class: IoClass, mode: AccessMode) -> &mut Self {
        self.0[class.index()] = mode;
        self
    }

    /// [`set`](Self::set) by value, to build the modes in one expression:
    /// `ClassModes::default().with(IoClass::CompactionWrite, AccessMode::Direct)`.
    pub fn with(mut self, class: IoClass, mode: AccessMode) -> Self {
        self.set(class, mode);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{Capabilities, DirectCaps, DontCacheCaps, FallocateCaps};
    use std::path::PathBuf;

    fn caps(direct: bool, direct_writes: bool, dontcache: bool) -> Capabilities {
        Capabilities {
            dir: PathBuf::from("/x"),
            filesystem: "testfs".into(),
            device: None,
            kernel: "6.18.0".into(),
            direct: DirectCaps {
                supported: direct,
                reason: (!direct).then(|| "EINVAL at open".to_string()),
                writes_supported: direct_writes,
                write_reason: (!direct_writes).then(|| "known bad kernel".to_string()),
                mem_align: 512,
                offset_align: 512,
                align_source: "test".into(),
            },
            dontcache: DontCacheCaps {
                supported: dontcache,
                reason: (!dontcache).then(|| "EOPNOTSUPP".to_string()),
            },
            fallocate: FallocateCaps {
                supported: true,
                reason: None,
            },
            max_sectors_kb: Some(1024),
            logical_block_size: Some(512),
            cachestat: true,
        }
    }

    #[test]
    fn auto_prefers_direct_then_dontcache_then_buffered() {
        let c = caps(true, true, true);
        assert_eq!(
            resolve(IoClass::CompactionWrite, AccessMode::Auto, &c)
                .unwrap()
                .mode,
            EffectiveMode::Direct
        );
        assert_eq!(
            resolve(IoClass::UserRead, AccessMode::Auto, &c)
                .unwrap()
                .mode,
            EffectiveMode::Buffered
        );
        // Flushes bypass the cache like compaction writes.
        assert_eq!(
            resolve(IoClass::FlushWrite, AccessMode::Auto, &c)
                .unwrap()
                .mode,
            EffectiveMode::Direct
        );
        assert_eq!(
            resolve(IoClass::WalWrite, AccessMode::Auto, &c)
                .unwrap()
                .mode,
            EffectiveMode::Buffered
        );
        // Copies for checkpoints and backups bypass the cache too.
        assert_eq!(
            resolve(IoClass::Backup, AccessMode::Auto, &c).unwrap().mode,
            EffectiveMode::Direct
        );
        let c = caps(false, false, true);
        assert_eq!(
            resolve(IoClass::Backup, AccessMode::Auto, &c).unwrap().mode,
            EffectiveMode::DontCache
        );
        let r = resolve(IoClass::CompactionRead, AccessMode::Auto, &c).unwrap();
        assert_eq!(r.mode, EffectiveMode::DontCache);
        assert!(r.fallback.unwrap().contains("EINVAL"));
        let c = caps(false, false, false);
        assert_eq!(
            resolve(IoClass::CompactionRead, AccessMode::Auto, &c)
                .unwrap()
                .mode,
            EffectiveMode::Buffered
        );
    }

    #[test]
    fn bad_kernel_refuses_direct_writes_only() {
        let c = caps(true, false, false);
        assert_eq!(
            resolve(IoClass::CompactionRead, AccessMode::Direct, &c)
                .unwrap()
                .mode,
            EffectiveMode::Direct
        );
        let e = resolve(IoClass::CompactionWrite, AccessMode::Direct, &c).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::NotSupported);
        assert!(e.to_string().contains("known bad kernel"), "{e}");
        assert_eq!(
            resolve(IoClass::CompactionWrite, AccessMode::Auto, &c)
                .unwrap()
                .mode,
            EffectiveMode::Buffered
        );
        // A copy writes as well as reads: no direct on such a kernel.
        assert_eq!(
            resolve(IoClass::Backup, AccessMode::Auto, &c).unwrap().mode,
            EffectiveMode::Buffered
        );
        assert!(resolve(IoClass::Backup, AccessMode::Direct, &c).is_err());
    }

    #[test]
    fn explicit_unsupported_modes_say_what_to_set() {
        let c = caps(false, false, false);
        let e = resolve(IoClass::CompactionWrite, AccessMode::Direct, &c).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("/x")
                && msg.contains("testfs")
                && msg.contains("EINVAL")
                && msg.contains("auto"),
            "{msg}"
        );
        let e = resolve(IoClass::CompactionWrite, AccessMode::DontCache, &c).unwrap_err();
        assert!(e.to_string().contains("EOPNOTSUPP"));
    }

    #[test]
    fn mmap_is_for_reads_and_the_wal_only() {
        let c = caps(true, true, true);
        for class in [
            IoClass::UserRead,
            IoClass::CompactionRead,
            IoClass::WalWrite,
        ] {
            assert_eq!(
                resolve(class, AccessMode::Mmap, &c).unwrap().mode,
                EffectiveMode::Mmap
            );
        }
        for class in [
            IoClass::FlushWrite,
            IoClass::CompactionWrite,
            IoClass::Manifest,
            IoClass::Backup,
        ] {
            let e = resolve(class, AccessMode::Mmap, &c).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains("only for the WAL"), "{e}");
        }
        // Without fallocate an mmap WAL could die of SIGBUS on a full disk.
        let mut c = caps(true, true, true);
        c.fallocate = FallocateCaps {
            supported: false,
            reason: Some("fallocate failed: EOPNOTSUPP".into()),
        };
        let e = resolve(IoClass::WalWrite, AccessMode::Mmap, &c).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::NotSupported);
        assert!(e.to_string().contains("fallocate failed"), "{e}");
    }

    #[test]
    fn parse_modes() {
        assert_eq!("Direct".parse::<AccessMode>().unwrap(), AccessMode::Direct);
        assert_eq!(
            "dontcache".parse::<AccessMode>().unwrap(),
            AccessMode::DontCache
        );
        let e = "mmap+direct".parse::<AccessMode>().unwrap_err();
        assert!(e.to_string().contains("cannot be combined"));
        assert!("turbo".parse::<AccessMode>().is_err());
    }
}
