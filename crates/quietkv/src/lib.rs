//! quietkv: an embeddable LSM-tree key-value store whose background work
//! (compaction, flush) goes through page-cache-aware I/O classes.
//!
//! ```
//! use quietkv::{AccessMode, Db, IoClass, Options, WriteBatch, WriteOptions};
//! # fn main() -> quietkv::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let opts = Options::default() // every class `auto`
//!     .io_mode(IoClass::CompactionWrite, AccessMode::Buffered); // or be explicit
//! let db = Db::open(dir.path(), opts)?;
//!
//! db.put(b"user:1", b"alice")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"user:2", b"bob")?;
//! batch.delete(b"user:1")?;
//! db.write(batch, WriteOptions { sync: true })?; // atomic, durable
//!
//! assert_eq!(db.get(b"user:2")?, Some(b"bob".to_vec()));
//! let _snap = db.snapshot(); // a consistent view
//! let users: Vec<_> = db
//!     .range(Some(b"user:"), Some(b"user;"))?
//!     .collect::<quietkv::Result<_>>()?;
//! assert_eq!(users, vec![(b"user:2".to_vec(), b"bob".to_vec())]);
//! db.compact_all()?; // full major compaction
//! println!("{:?}", db.stats().compaction);
//! db.close()?; // waits for background work
//! # Ok(())
//! # }
//! ```

pub mod batch;
pub mod block_cache;
pub mod check;
mod codec;
pub mod creation;
mod db;
pub mod error;
pub mod fileio;
pub mod filenames;
/// Entry points for the fuzz targets in `fuzz/`; not a public API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod iter;
pub mod key;
mod lockfile;
pub mod log;
pub mod memtable;
pub mod merge;
pub mod options;
pub mod picker;
pub mod repair;
pub mod snapshot;
pub mod table;
pub mod table_cache;
mod varint;
pub mod version;
pub mod wal_set;
mod wal_sync;
pub mod warm;

pub use batch::WriteBatch;
pub use check::{check_dir, CheckReport};
pub use db::{CompactionStats, Db, DbIter, DbStats, LevelStats, WriteStallStats};
pub use error::{Error, ErrorKind, Result};
pub use options::{IoPriority, Options, ReadOptions, WriteOptions};
pub use quietio::{AccessMode, EffectiveMode, IoClass};
pub use repair::{repair_dir, RepairOptions, RepairReport};
pub use snapshot::Snapshot;
pub use table::Compression;
pub use wal_sync::WalSync;
