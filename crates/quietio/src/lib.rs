//! quietio: page-cache-aware file I/O.
//!
//! Every file belongs to an [`IoClass`]; each class gets an [`AccessMode`]
//! (buffered, O_DIRECT, RWF_DONTCACHE, incremental fadvise, mmap for reads,
//! or auto). [`IoEnv::open`] probes the directory once — does O_DIRECT
//! really work, with which alignment, does RWF_DONTCACHE — and resolves
//! every class's mode, failing clearly where an explicit request cannot
//! work. Files are then written with [`SeqWriter`] and read with
//! [`SeqReader`] or [`RandomReader`], which count bytes, operations, time
//! and page-cache hits per class ([`IoStats`]). [`residency`] tells how much
//! of a file is in the page cache. Direct sequential files keep several
//! requests in flight with io_uring where the kernel allows it ([`IoEngine`]).

pub mod aligned;
pub mod class;
pub mod device;
pub mod env;
pub mod error;
pub mod fault;
pub mod file;
pub mod memlimit;
pub mod mmap_writer;
pub mod probe;
pub mod rate;
mod read_ahead;
pub mod residency;
pub mod stats;
pub mod sys;
pub mod uring;
mod write_behind;

pub use aligned::{direct_io_align, direct_io_audit, AlignedBuf, DirectIoAudit};
pub use class::{resolve, AccessMode, ClassModes, EffectiveMode, IoClass, Resolution};
pub use device::{measure_device, DeviceSpeed};
pub use env::{sync_dir, IoEnv, IoOptions, MAX_IO_DEPTH};
pub use error::{Error, ErrorKind, Result};
pub use file::{FileConfig, RandomReader, SeqReader, SeqWriter};
pub use memlimit::{memory_limit, MemoryLimit};
pub use mmap_writer::MmapWriter;
pub use probe::{probe, probe_uncached, Capabilities, DirectCaps, DontCacheCaps, FallocateCaps};
pub use rate::RateLimiter;
pub use residency::{evict_file, residency, residency_mincore, Residency, ResidencyMethod};
pub use stats::{ClassStats, IoStats};
pub use uring::{resolve_engine, uring_unavailable_reason, Engine, EngineResolution, IoEngine};
