//! quietkv: an embeddable LSM-tree key-value store whose background work
//! (compaction, flush) goes through page-cache-aware I/O classes.

pub mod error;
pub mod iter;
pub mod key;
pub mod merge;
pub mod picker;
pub mod version;

pub use error::{Error, ErrorKind, Result};
