//! quietkv: an embeddable LSM-tree key-value store whose background work
//! (compaction, flush) goes through page-cache-aware I/O classes.

pub mod error;

pub use error::{Error, ErrorKind, Result};
