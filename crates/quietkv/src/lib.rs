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

mod batch;
mod block_cache;
mod check;
mod creation;
mod db;
mod error;
mod fileio;
mod filenames;
mod iter;
mod key;
mod lockfile;
mod log;
mod memtable;
mod merge;
mod options;
mod picker;
mod repair;
mod snapshot;
mod table;
mod table_cache;
mod varint;
mod version;
mod wal_set;
mod warm;

#[cfg(test)]
mod tests;

pub use batch::WriteBatch;
pub use block_cache::CacheStats;
pub use check::{check_dir, check_dir_with, CheckOptions, CheckReport, Finding};
pub use db::{CompactionStats, Db, DbIter, DbStats, LevelStats, WriteStallStats};
pub use error::{Error, ErrorKind, Result};
pub use options::{IoPriority, Options, ReadOptions, WriteOptions};
pub use quietio::{AccessMode, ClassModes, ClassStats, EffectiveMode, IoClass, IoEngine};
pub use repair::{repair_dir, Dropped, KeptTable, RepairOptions, RepairReport, SalvagedTable};
pub use snapshot::Snapshot;
pub use table::Compression;
