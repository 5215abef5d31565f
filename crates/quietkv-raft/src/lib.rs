//! quietkv as the storage of an [openraft](https://docs.rs/openraft/0.9)
//! cluster: a raft log store ([`LogStore`]) in one quietkv database and a
//! replicated key-value state machine ([`StateMachine`]) in another (see
//! [`keys`]), so that a checkpoint of the state machine's database is
//! exactly a snapshot: snapshots are built as packed checkpoints and
//! installed by switching to a new database (see [`snapshot`]).
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

mod build;
mod codec;
mod generations;
mod install;
pub mod keys;
mod log_store;
mod shared;
pub mod snapshot;
mod snapshot_file;
mod state_machine;
mod types;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use openraft::{ErrorSubject, ErrorVerb};
use quietkv::{Db, Options};

pub use generations::StateDb;
pub use log_store::LogStore;
pub use shared::AppliedState;
pub use snapshot::SnapshotIo;
pub use snapshot_file::SnapshotFile;
pub use state_machine::{SnapshotBuilder, StateMachine};
pub use types::{
    Entry, LogId, NodeId, Request, Response, SnapshotMeta, StorageError, StoredMembership,
    TypeConfig,
};

use crate::codec::{db_error, error};
use crate::shared::Shared;
use crate::snapshot::SnapshotDir;

/// One node's storage, in its directory:
///
/// * `log/`: the quietkv database of the raft log, vote and committed id;
/// * `sm-<generation>/`: the quietkv database of the state machine, one
///   per installed snapshot, and `SM-CURRENT`, naming the one in use;
/// * `snapshots/`: the current snapshot file.
///
/// Take one [`LogStore`] and one [`StateMachine`] from it for the node's
/// `openraft::Raft`; the store itself stays usable for reading the
/// application's data.
#[derive(Clone)]
pub struct Store {
    dir: PathBuf,
    log: Arc<Db>,
    shared: Arc<Shared>,
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

    /// Opens (or creates) the storage in `dir`, both databases with
    /// `options`. Finishes what a crash interrupted: the rest of a log
    /// purge, the deletion of a state machine generation that was replaced
    /// or only half installed, temporary snapshot files.
    ///
    /// # Errors
    ///
    /// What quietkv's [`Db::open`] returns (for instance `Busy` while
    /// another process has it open); a file system error creating the
    /// directories; a damaged stored value, naming its key; a damaged or
    /// missing generation pointer, naming the file; a directory in the
    /// layout of an earlier version of this crate (one database, `db/`).
    pub fn open_with(dir: impl AsRef<Path>, options: Options) -> Result<Store, StorageError> {
        Store::open_with_snapshot_io(dir, options, SnapshotIo::Backup)
    }

    /// Opens the storage as [`Store::open_with`] does, with snapshot files
    /// streamed to and from other nodes as `snapshot_io` says (see
    /// [`SnapshotFile`]): in the `Backup` I/O class's mode (the default),
    /// or through the page cache, to compare.
    ///
    /// # Errors
    ///
    /// As [`Store::open_with`]; also the probe of the snapshot directory
    /// failing, or the options requesting a `Backup` mode it cannot do.
    pub fn open_with_snapshot_io(
        dir: impl AsRef<Path>,
        options: Options,
        snapshot_io: SnapshotIo,
    ) -> Result<Store, StorageError> {
        let dir = dir.as_ref().to_path_buf();
        if dir.join("db").is_dir() && !dir.join("log").exists() {
            return Err(error(
                ErrorSubject::Store,
                ErrorVerb::Read,
                format!(
                    "{} holds db/, the single-database layout of an earlier quietkv-raft; this version keeps the log in log/ and the state in sm-<generation>/ and does not convert it",
                    dir.display()
                ),
            ));
        }
        let log = Db::open(dir.join("log"), options.clone())
            .map_err(|e| db_error(ErrorSubject::Store, ErrorVerb::Read, e))?;
        // The snapshot directory's own I/O environment: the modes the
        // options request and their background rate limit (a limiter of
        // its own, not shared with the databases').
        let io = quietio::IoOptions {
            modes: options.io_modes,
            background_bytes_per_sec: options.background_rate_limit_mib << 20,
            ..quietio::IoOptions::default()
        };
        let snapshots = SnapshotDir::open(&dir.join("snapshots"), io, snapshot_io)
            .map_err(|e| error(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?;
        log_store::finish_purge(&log)?;
        let generation = generations::open_current(&dir)
            .map_err(|e| error(ErrorSubject::StateMachine, ErrorVerb::Read, e))?;
        let state = StateDb::open(&dir, generation, options.clone())
            .map_err(|e| db_error(ErrorSubject::StateMachine, ErrorVerb::Read, e))?;
        Ok(Store {
            shared: Arc::new(Shared {
                root: dir.clone(),
                options,
                current: RwLock::new(Arc::new(state)),
                gate: Mutex::new(()),
                snapshots: Arc::new(snapshots),
            }),
            dir,
            log: Arc::new(log),
        })
    }

    /// The directory the storage lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The quietkv database of the raft log (for statistics).
    pub fn log_db(&self) -> &Arc<Db> {
        &self.log
    }

    /// The quietkv database of the state machine in use now (for
    /// statistics, or keys of the application's own outside `\x00raft/`).
    /// Installing a snapshot replaces it with a new one; this one stays
    /// readable as long as it is held, and its directory is deleted after.
    pub fn state_db(&self) -> Arc<StateDb> {
        self.shared.state()
    }

    /// The access mode snapshot files are streamed in: what
    /// [`SnapshotIo`] and the probe of the snapshot directory decided.
    pub fn snapshot_transfer_mode(&self) -> quietio::EffectiveMode {
        self.shared.snapshots.transfer_mode()
    }

    /// What streaming snapshots from and into this node read and wrote so
    /// far: bytes, operations and time (building and installing them are
    /// in the state database's `Backup` counters).
    pub fn snapshot_transfer_stats(&self) -> quietio::ClassStats {
        self.shared.snapshots.transfer_stats()
    }

    /// The current snapshot file's path (which may not exist).
    pub fn current_snapshot_path(&self) -> PathBuf {
        self.shared.snapshots.current_path()
    }

    /// A log store on this storage.
    pub fn log_store(&self) -> LogStore {
        LogStore::new(self.log.clone())
    }

    /// The state machine on this storage, loaded from disk. Give one to
    /// the node; two used at once would each think their applied state is
    /// the only one.
    ///
    /// # Errors
    ///
    /// A read error or a damaged applied state, naming its key.
    pub fn state_machine(&self) -> Result<StateMachine, StorageError> {
        StateMachine::load(self.shared.clone())
    }

    /// The application's value of `key`, as applied on this node.
    ///
    /// # Errors
    ///
    /// A read error, or a stored value that is not UTF-8 (naming its key).
    pub fn get(&self, key: &str) -> Result<Option<String>, StorageError> {
        state_machine::read_value(&self.shared.state(), key)
    }

    /// Every key of the application and its value, in key order, as
    /// applied on this node.
    ///
    /// # Errors
    ///
    /// As [`Store::get`].
    pub fn entries(&self) -> Result<Vec<(String, String)>, StorageError> {
        state_machine::read_all(&self.shared.state())
    }
}
