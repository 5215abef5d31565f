//! quietkv: an embeddable LSM-tree key-value store whose background work
//! (compaction, flush) goes through page-cache-aware I/O classes.

pub mod batch;
pub mod block_cache;
pub mod check;
mod db;
pub mod error;
pub mod fileio;
pub mod filenames;
pub mod iter;
pub mod key;
pub mod log;
pub mod memtable;
pub mod merge;
pub mod options;
pub mod picker;
pub mod snapshot;
pub mod table;
pub mod table_cache;
pub mod version;

pub use batch::WriteBatch;
pub use check::{check_dir, CheckReport};
pub use db::{CompactionStats, Db, DbIter, DbStats, LevelStats, WriteStallStats};
pub use error::{Error, ErrorKind, Result};
pub use options::{IoPriority, Options, ReadOptions, WriteOptions};
pub use quietio::{AccessMode, EffectiveMode, IoClass};
pub use snapshot::Snapshot;
pub use table::Compression;
