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
//! let users: Vec<_> = db.prefix(b"user:")?.collect::<quietkv::Result<_>>()?;
//! assert_eq!(users, vec![(b"user:2".to_vec(), b"bob".to_vec())]);
//! db.compact_all()?; // full major compaction
//! println!("{:?}", db.stats().compaction);
//! db.close()?; // waits for background work
//! # Ok(())
//! # }
//! ```
//!
//! Snapshots, ranges, prefixes and reverse iteration:
//!
//! ```
//! use quietkv::{Db, Options};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! # let dir = tmp.path();
//! # let db = Db::open(&dir, Options::default())?;
//! # for i in 0..100u32 {
//! #     db.put(format!("k{i:03}").as_bytes(), b"v")?;
//! # }
//! # drop(db);
//! let db = Db::open(&dir, Options::default())?;
//! let snap = db.snapshot();
//! db.put(b"k000", b"changed")?;
//! let old = snap.get(b"k000")?;                                  // the value before
//! let ten = db.range(&b"k010"[..]..&b"k020"[..])?.collect::<Result<Vec<_>, _>>()?;
//! let back = db.range(&b"k010"[..]..&b"k020"[..])?.rev().count();
//! let p = db.prefix(b"k05")?.count();
//! let all_at_snap = snap.range(&b""[..]..)?.count();
//! assert_eq!(old, Some(b"v".to_vec()));
//! assert_eq!((ten.len(), back, p, all_at_snap), (10, 10, 10, 100));
//! assert_eq!(ten[0].0, b"k010");
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod batch;
mod block_cache;
mod check;
mod checkpoint;
mod codec;
mod compaction;
mod cpu_yield;
mod creation;
mod db;
mod error;
mod fileio;
mod filenames;
/// Entry points for the fuzz targets in `fuzz/`; not a public API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod iter;
mod key;
mod keyspace;
mod lockfile;
mod memtable;
mod merge;
mod options;
mod range_tombstone;
mod record_log;
mod repair;
mod snapshot;
mod snapshot_list;
mod table;
pub mod ttl;
mod txn;
mod value;
mod varint;
mod version;
mod wal;

#[cfg(test)]
mod tests;

/// The README's example, compiled as a doctest so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctest;

pub use batch::{WriteBatch, MAX_BATCH_LEN, MAX_KEY_LEN, MAX_VALUE_LEN};
pub use block_cache::CacheStats;
pub use check::{check_dir, check_dir_with, CheckOptions, CheckReport, Finding};
pub use checkpoint::backup::BackupOptions;
pub use checkpoint::{
    pack_checkpoint, pack_checkpoint_with, read_pack_label, restore, restore_point,
    unpack_checkpoint, verify_backup, BackupInfo, BackupPoint, CheckpointInfo, CheckpointOptions,
    PackInfo, RestoreInfo, UnpackInfo, MAX_PACK_LABEL,
};
pub use compaction::{CompactionFilter, CompactionPriority, FilterDecision};
pub use db::{
    CompactionStats, Db, DbIter, DbStats, LevelCompactionStats, LevelStats, WriteStallStats,
};
pub use error::{Error, ErrorKind, Result};
pub use keyspace::{Keyspace, KeyspaceOptions, KeyspaceStats, DEFAULT_KEYSPACE, MAX_KEYSPACE_NAME};
pub use options::{IoPriority, Options, WriteOptions};
/// The fault-injecting, crash-simulating file layer that
/// [`Options::fault_layer`] takes, for tests of code built on quietkv.
pub use quietio::fault;
pub use quietio::{AccessMode, ClassModes, ClassStats, EffectiveMode, IoClass, IoEngine};
pub use repair::{
    repair_dir, Dropped, KeptTable, RepairOptions, RepairReport, RepairedKeyspace, SalvagedTable,
};
pub use snapshot::Snapshot;
pub use table::Compression;
pub use txn::{CasMismatch, Transaction, TxnIter};
pub use value::Value;
pub use wal::WalSync;
