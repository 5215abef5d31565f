//! The openraft type configuration: what the cluster replicates (a small
//! key-value application's requests), what it answers, how nodes are named
//! and what a snapshot travels as.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::snapshot_file::SnapshotFile;

/// A node's id in the cluster.
pub type NodeId = u64;

/// A write to the replicated key-value application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Sets `key` to `value`.
    Set {
        /// The key to set.
        key: String,
        /// Its new value.
        value: String,
    },
    /// Removes `key`; removing a missing key is not an error.
    Delete {
        /// The key to remove.
        key: String,
    },
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Set { key, value } => write!(f, "set {key:?} = {value:?}"),
            Request::Delete { key } => write!(f, "delete {key:?}"),
        }
    }
}

/// What applying one log entry answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The key's value before the request (`None` if it had none, and for
    /// entries that are not requests: blanks and membership changes).
    pub previous: Option<String>,
}

openraft::declare_raft_types!(
    /// The types this crate's log store and state machine work with.
    ///
    /// A snapshot is a file (see [`crate::snapshot`]): the state machine is
    /// written to disk once and shipped from there, so neither building
    /// nor receiving one holds the whole application state in memory.
    /// openraft reads and writes it as a [`SnapshotFile`], in the `Backup`
    /// I/O class.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = SnapshotFile,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log entry of this configuration.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id of this configuration.
pub type LogId = openraft::LogId<NodeId>;
/// The membership a state machine records with its applied index.
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
/// A snapshot's description.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
/// The error every storage call returns.
pub type StorageError = openraft::StorageError<NodeId>;
