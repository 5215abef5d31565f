//! quietio: page-cache-aware file I/O.

pub mod error;

pub use error::{Error, ErrorKind, Result};
