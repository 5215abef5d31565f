//! Keyspaces (RocksDB's column families): named, separately ordered sets
//! of keys in one database, each with its own memtables, its own levels of
//! tables and its own table options, sharing one WAL, one group commit, the
//! background threads and the caches. A [`WriteBatch`](crate::WriteBatch),
//! a [`Snapshot`](crate::Snapshot) and a
//! [`Transaction`](crate::Transaction) span keyspaces.
//!
//! ```
//! use quietkv::{Db, KeyspaceOptions, Options, WriteBatch, WriteOptions};
//! # fn main() -> quietkv::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::default())?;
//! let users = db.keyspace("users", KeyspaceOptions::default())?;
//! let index = db.keyspace("by-email", KeyspaceOptions::default().block_size(16 << 10))?;
//!
//! // One atomic write across both, also after a crash.
//! let mut batch = WriteBatch::new();
//! batch.put_in(&users, b"1", b"alice")?;
//! batch.put_in(&index, b"alice@example.com", b"1")?;
//! db.write(batch, WriteOptions::default())?;
//!
//! let snap = db.snapshot();
//! assert_eq!(snap.get_in(&users, b"1")?, Some(b"alice".to_vec()));
//! assert_eq!(db.get(b"1")?, None); // the default keyspace is another one
//! assert_eq!(db.keyspace_names(), ["default", "users", "by-email"]);
//! # Ok(())
//! # }
//! ```

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
