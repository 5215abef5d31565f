//! quietkv as the storage of an [openraft](https://docs.rs/openraft/0.9)
//! cluster: a raft log store ([`LogStore`]) and a replicated key-value
//! state machine ([`StateMachine`]) in one quietkv database, each under a
//! key range of its own (see [`keys`]).
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use quietkv_raft::Store;
//! let store = Store::open("/var/lib/node-1")?;
//! let (log_store, state_machine) = (store.log_store(), store.state_machine()?);
//! // openraft::Raft::new(1, config, network, log_store, state_machine).await?;
//! # let _ = (log_store, state_machine);
//! println!("{:?}", store.get("some-key")?);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]
// openraft's storage traits return its `StorageError` (224 bytes) by value;
// the helpers behind them return the same type rather than a boxed one
// converted at every trait method. Errors are the rare path here.
#![allow(clippy::result_large_err)]

mod codec;
pub mod keys;
mod log_store;
mod ranges;
pub mod snapshot;
mod state_machine;
mod types;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::{ErrorSubject, ErrorVerb};
use quietkv::{Db, Options};

pub use log_store::LogStore;
pub use state_machine::{AppliedState, SnapshotBuilder, StateMachine};
pub use types::{
    Entry, LogId, NodeId, Request, Response, SnapshotMeta, StorageError, StoredMembership,
    TypeConfig,
};

use crate::codec::{db_error, error};
use crate::snapshot::SnapshotDir;

/// One node's storage: the quietkv database (`<dir>/db`) holding the raft
/// log and the state machine, and the snapshot files (`<dir>/snapshots`).
///
/// Take one [`LogStore`] and one [`StateMachine`] from it for the node's
/// `openraft::Raft`; the store itself stays usable for reading the
/// application's data.
#[derive(Clone)]
pub struct Store {
    dir: PathBuf,
    db: Arc<Db>,
    snapshots: Arc<SnapshotDir>,
}

impl Store {
    /// Opens (or creates) the storage in `dir` with quietkv's default
    /// options.
    ///
    /// # Errors
    ///
    /// As [`Store::open_with`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Store, StorageError> {
        Store::open_with(dir, Options::default())
    }

    /// Opens (or creates) the storage in `dir`, the database with `options`.
    /// Finishes what a crash interrupted: the rest of a log purge, the
    /// deletion of a state machine generation that was replaced or only
    /// half installed, temporary snapshot files.
    ///
    /// # Errors
    ///
    /// What quietkv's [`Db::open`] returns (for instance `Busy` while
    /// another process has it open); a file system error creating the
    /// directories; a damaged stored value, naming its key.
    pub fn open_with(dir: impl AsRef<Path>, options: Options) -> Result<Store, StorageError> {
        let dir = dir.as_ref().to_path_buf();
        let db = Db::open(dir.join("db"), options)
            .map_err(|e| db_error(ErrorSubject::Store, ErrorVerb::Read, e))?;
        let snapshots = SnapshotDir::open(&dir.join("snapshots"))
            .map_err(|e| error(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?;
        log_store::finish_purge(&db)?;
        let generation = state_machine::current_generation(|k| db.get(k))?;
        state_machine::delete_other_generations(&db, generation)?;
        Ok(Store {
            dir,
            db: Arc::new(db),
            snapshots: Arc::new(snapshots),
        })
    }

    /// The directory the storage lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The quietkv database underneath (for statistics, or keys of the
    /// application's own outside `\x00raft/`).
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// A log store on this storage.
    pub fn log_store(&self) -> LogStore {
        LogStore::new(self.db.clone())
    }

    /// The state machine on this storage, loaded from disk. Give one to
    /// the node; two used at once would each think their applied state is
    /// the only one.
    ///
    /// # Errors
    ///
    /// A read error or a damaged applied state, naming its key.
    pub fn state_machine(&self) -> Result<StateMachine, StorageError> {
        StateMachine::load(self.db.clone(), self.snapshots.clone())
    }

    /// The application's value of `key`, as applied on this node.
    ///
    /// # Errors
    ///
    /// A read error, or a stored value that is not UTF-8 (naming its key).
    pub fn get(&self, key: &str) -> Result<Option<String>, StorageError> {
        state_machine::read_value(&self.db, key)
    }

    /// Every key of the application and its value, in key order, as
    /// applied on this node.
    ///
    /// # Errors
    ///
    /// As [`Store::get`].
    pub fn entries(&self) -> Result<Vec<(String, String)>, StorageError> {
        state_machine::read_all(&self.db)
    }
}
