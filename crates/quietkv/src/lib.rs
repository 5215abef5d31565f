//! quietkv: an embeddable LSM-tree key-value store whose background work
//! (compaction, flush) goes through page-cache-aware I/O classes.

pub mod batch;
pub mod block_cache;
pub mod error;
pub mod fileio;
pub mod iter;
pub mod key;
pub mod log;
pub mod memtable;
pub mod merge;
pub mod picker;
pub mod table;
pub mod version;

pub use error::{Error, ErrorKind, Result};
