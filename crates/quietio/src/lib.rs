//! quietio: page-cache-aware file I/O for a storage engine.
//!
//! A storage engine's background work (compaction, flushes) reads and
//! writes far more bytes than its users do, and through the page cache
//! those bytes push the users' hot pages out. quietio lets each kind of
//! I/O choose how it treats the cache, finds out once per directory what
//! the kernel and file system there really support, and counts what every
//! kind of I/O did.
//!
//! # I/O classes and access modes
//!
//! Every file is opened for an [`IoClass`], which says why it is touched:
//! [`UserRead`](IoClass::UserRead), [`CompactionRead`](IoClass::CompactionRead),
//! [`CompactionWrite`](IoClass::CompactionWrite), [`FlushWrite`](IoClass::FlushWrite),
//! [`WalWrite`](IoClass::WalWrite), [`Manifest`](IoClass::Manifest) or
//! [`Backup`](IoClass::Backup) (the copies of checkpoints, backups and
//! restores).
//! [`IoOptions::modes`] requests an [`AccessMode`] per class:
//!
//! | mode        | what it does                                              | needs                                   |
//! |-------------|-----------------------------------------------------------|-----------------------------------------|
//! | `buffered`  | plain page-cache I/O                                      | nothing                                 |
//! | `direct`    | O_DIRECT: aligned buffers, offsets and lengths, no cache  | a file system that does it (not tmpfs)  |
//! | `dontcache` | buffered, with `RWF_DONTCACHE`: pages dropped after the I/O | Linux 6.14+; ext4 from 6.17, xfs from 6.15 |
//! | `fadvise`   | buffered, written back and dropped (`POSIX_FADV_DONTNEED`) as it goes | nothing                     |
//! | `mmap`      | memory-mapped reads (read classes only)                   | nothing                                 |
//! | `auto`      | the default: let the probe decide                         |                                         |
//!
//! # The probe
//!
//! [`IoEnv::open`] probes the directory ([`probe()`]) once per process: it
//! creates a hidden probe file there and tries an aligned O_DIRECT write
//! and read-back (with the alignment `statx` reports, see [`DirectCaps`])
//! and an `RWF_DONTCACHE` write and read-back, and reads the device's
//! limits from sysfs ([`Capabilities`]). Every class's mode is then
//! resolved ([`resolve`]): `auto` gives the compaction classes direct I/O
//! where it works, else dontcache, else buffered (logging the fallback once),
//! and every other class buffered; an explicit mode that cannot work in
//! the directory fails the open with an [`ErrorKind::NotSupported`] error
//! that says why and what to set instead, not the first write.
//! [`IoEnv::open_read_only`] probes a read-only directory through an
//! existing file instead.
//!
//! # Files
//!
//! Files are written front to back with [`SeqWriter`] and read with
//! [`SeqReader`] (front to back, with its own readahead) or
//! [`RandomReader`] (positional reads); a file that arrives and leaves in
//! pieces of any size at any offset (a snapshot streamed between nodes)
//! is a [`PositionalFile`]. All modes produce byte-identical
//! files. They count bytes, operations, time and, for buffered random
//! reads, page-cache hits per class ([`IoStats`]), and throttle the
//! compaction classes with one shared [`RateLimiter`]. Direct sequential
//! files keep several requests in flight with io_uring where the kernel
//! allows it ([`IoEngine`]). [`residency()`] tells how much of a file is in
//! the page cache.
//!
//! # Example
//!
//! Write a file with O_DIRECT where the directory supports it (buffered
//! elsewhere), then read it back.
//!
//! ```
//! use quietio::{AccessMode, IoClass, IoEnv, IoOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("quietio-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let env = IoEnv::open(&dir, IoOptions::default())?;
//!
//! // What `auto` chose for compaction output here, and why if it fell back.
//! let r = env.resolution(IoClass::CompactionWrite);
//! println!("compaction writes: {} ({:?})", r.mode, r.fallback);
//!
//! // Choose a mode for one file: direct only where the probe found it works.
//! let mode = match env.capabilities().direct_unusable_reason(true) {
//!     None => AccessMode::Direct,
//!     Some(_) => AccessMode::Buffered,
//! };
//! let path = dir.join("example.dat");
//! let mut w = env.create_with_mode(&path, IoClass::FlushWrite, mode)?;
//! w.write_all(b"hello, page cache")?;
//! let len = w.finish(true)?; // the tail written, the file fdatasync'ed
//! env.sync_dir()?; // and its name made durable
//! assert_eq!(len, 17);
//!
//! let reader = env.open_random_with_mode(&path, IoClass::UserRead, mode)?;
//! assert_eq!(reader.read_vec(7, 4)?, b"page");
//! let mut seq = env.open_sequential(&path, IoClass::CompactionRead)?;
//! let mut all = vec![0u8; len as usize];
//! seq.read_exact(&mut all)?;
//! assert_eq!(all, b"hello, page cache");
//! assert_eq!(env.stats().class(IoClass::UserRead).read_bytes, 4);
//!
//! std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Other tools
//!
//! [`memory_limit`] reads the cgroup memory limit; [`measure_device`]
//! measures the raw O_DIRECT speed of the device under a directory.
//!
//! Every name above is reached from the crate root. Two modules stay
//! namespaces of their own, their names not repeated at the root:
//! [`sys`] wraps the Linux system calls quietio needs (and the few other
//! ones the workspace uses), whose short names (`pread`, `fsync`,
//! `ENOSPC`) read best qualified; [`fault`] is a fault-injecting,
//! crash-simulating layer for tests.

#![deny(missing_docs)]

mod aligned;
mod class;
mod device;
mod env;
mod error;
pub mod fault;
mod file;
mod kept;
mod memlimit;
mod probe;
mod rate;
mod residency;
mod stats;
pub mod sys;
mod uring;

pub use aligned::{direct_io_align, direct_io_audit, AlignedBuf, DirectIoAudit};
pub use class::{resolve, AccessMode, ClassModes, EffectiveMode, IoClass, Resolution};
pub use device::{measure_device, DeviceSpeed};
pub use env::{sync_dir, IoEnv, IoOptions, MAX_IO_DEPTH};
pub use error::{Error, ErrorKind, Result};
pub use file::{FileConfig, MmapWriter, PositionalFile, RandomReader, SeqReader, SeqWriter};
pub use memlimit::{memory_limit, memory_limit_from, usable_memory, MemoryLimit};
pub use probe::{
    known_bad_direct_writes, probe, probe_read_only, probe_uncached, Capabilities, DirectCaps,
    DontCacheCaps, FallocateCaps,
};
pub use rate::RateLimiter;
pub use residency::{evict_file, residency, residency_mincore, Residency, ResidencyMethod};
pub use stats::{ClassStats, IoStats};
pub use uring::{resolve_engine, uring_unavailable_reason, Engine, EngineResolution, IoEngine};

/// Gives back what quietio keeps between files for speed: freed huge
/// direct-I/O buffers (at most 32 MiB in all) and idle io_uring rings (at
/// most 8). Files in use are not affected; the next direct file allocates
/// afresh. quietkv calls this when a database closes.
pub fn release_kept_io_memory() {
    aligned::release_spare_buffers();
    uring::release_kept_rings();
}
