//! What every HTTP handler shares: the node's id, its address, its `Raft`
//! and its storage. The handlers (`kv`, `admin`, `rpc`) take it as their
//! state; the route table that ties them together is in `routes`.

use openraft::Raft;
use quietkv_raft::{NodeId, Store, TypeConfig};

/// One node's state, shared by every request it serves.
pub struct App {
    /// This node's id in the cluster.
    pub id: NodeId,
    /// The address other nodes and clients reach this node at.
    pub addr: String,
    /// The node's Raft instance.
    pub raft: Raft<TypeConfig>,
    /// The node's storage, for reads of applied data.
    pub store: Store,
}
