//! Keyspaces (RocksDB's column families): named, separately ordered sets
//! of keys in one database, each with its own memtables, its own levels of
//! tables and its own table options, sharing one WAL, one group commit, the
//! background threads and the caches. A [`WriteBatch`](crate::WriteBatch),
//! a [`Snapshot`](crate::Snapshot) and a
//! [`Transaction`](crate::Transaction) span keyspaces.

mod admin;
mod batch;
pub(crate) mod def;
mod handle;
mod options;
mod read;
pub(crate) mod tree;

pub use def::{DEFAULT_KEYSPACE, MAX_KEYSPACE_NAME};
pub use handle::{Keyspace, KeyspaceStats};
pub use options::KeyspaceOptions;
