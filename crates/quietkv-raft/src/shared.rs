//! What the state machine, its snapshot builds and its snapshot installs
//! all use: the state they share (the node directory, the state database
//! in use, the snapshot directory), the applied state stored with the
//! data, and the errors they report. It sits below all three so that none
//! of them imports another one's internals.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use openraft::{ErrorSubject, ErrorVerb};
use quietkv::{Db, Options};
use serde::{Deserialize, Serialize};

use crate::codec::{db_error, error};
use crate::generations::StateDb;
use crate::keys;
use crate::log_store::read_json;
use crate::snapshot::{SnapshotDir, SnapshotFileError};
use crate::types::{LogId, StorageError, StoredMembership};

/// The applied log id and membership, stored with the data they describe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedState {
    /// The last log entry applied.
    pub last_applied: Option<LogId>,
    /// The last membership applied.
    pub membership: StoredMembership,
}

/// What the state machine, its snapshot builders and the [`Store`](crate::Store)
/// share: the node directory, the state database in use, and the
/// snapshot directory.
pub(crate) struct Shared {
    /// The node directory, where generations and their pointer live.
    pub root: PathBuf,
    /// The options every state database is opened with.
    pub options: Options,
    /// The generation in use; an install replaces it.
    pub current: RwLock<Arc<StateDb>>,
    /// Held by `apply` while it writes, by a snapshot build while it reads
    /// the applied state and takes its checkpoint (so the description and
    /// the data agree), and by an install while it switches.
    pub gate: Mutex<()>,
    /// The snapshot files: the current one, those being built or received.
    pub snapshots: Arc<SnapshotDir>,
}

impl Shared {
    /// The state database in use now.
    pub fn state(&self) -> Arc<StateDb> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Takes the apply gate (see [`Shared::gate`]'s field).
    pub fn gate(&self) -> MutexGuard<'_, ()> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `new` the state database in use; the old one is deleted once
    /// nothing uses it any more.
    pub fn replace(&self, new: StateDb) {
        let old = std::mem::replace(
            &mut *self.current.write().unwrap_or_else(|p| p.into_inner()),
            Arc::new(new),
        );
        old.retire();
    }
}

/// A snapshot file error as openraft's storage error.
pub(crate) fn snap_err(verb: ErrorVerb, e: SnapshotFileError) -> StorageError {
    error(ErrorSubject::Snapshot(None), verb, e)
}

/// Turns a quietkv error of the state database into openraft's storage
/// error, for `map_err`.
pub(crate) fn sm_db_err(verb: ErrorVerb) -> impl Fn(quietkv::Error) -> StorageError {
    move |e| db_error(ErrorSubject::StateMachine, verb, e)
}

/// The applied state stored in a state database (the default before
/// anything was applied).
pub(crate) fn read_applied(db: &Db) -> Result<AppliedState, StorageError> {
    Ok(read_json(db, keys::APPLIED, ErrorSubject::StateMachine)?.unwrap_or_default())
}
