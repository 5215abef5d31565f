//! A three-node cluster in one process, each node on its own quietkv-raft
//! storage, talking through an in-memory router: a leader is elected,
//! writes replicate, and a node cut off while the leader snapshotted and
//! purged its log catches up by installing the snapshot (a packed
//! checkpoint of the leader's state database, sent in chunks, unpacked
//! into a new generation). Every node's state machine ends with the same
//! keys and values.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use quietkv_raft::{NodeId, Request, Store, TypeConfig};

/// Generous: the machine running the tests may be busy.
const WAIT: Duration = Duration::from_secs(60);

/// Delivers each RPC by calling the target node's `Raft` directly; a node
/// marked cut off neither sends nor receives.
#[derive(Default)]
struct Router {
    nodes: Mutex<HashMap<NodeId, Raft<TypeConfig>>>,
    cut_off: Mutex<HashSet<NodeId>>,
}

#[derive(Debug)]
struct CutOff(NodeId, NodeId);

impl std::fmt::Display for CutOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {} cannot reach node {}", self.0, self.1)
    }
}

impl std::error::Error for CutOff {}

impl Router {
    /// The target's `Raft`, or why the RPC cannot be delivered (in
    /// openraft's own error type, which the network methods return).
    #[allow(clippy::result_large_err)]
    fn route<E: std::error::Error>(
        &self,
        from: NodeId,
        to: NodeId,
    ) -> Result<Raft<TypeConfig>, RPCError<NodeId, BasicNode, E>> {
        let cut = self.cut_off.lock().unwrap();
        if cut.contains(&from) || cut.contains(&to) {
            return Err(RPCError::Unreachable(Unreachable::new(&CutOff(from, to))));
        }
        drop(cut);
        self.nodes
            .lock()
            .unwrap()
            .get(&to)
            .cloned()
            .ok_or_else(|| RPCError::Network(NetworkError::new(&CutOff(from, to))))
    }
}

struct Network {
    router: Arc<Router>,
    from: NodeId,
}

struct Connection {
    router: Arc<Router>,
    from: NodeId,
    to: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Connection {
        Connection {
            router: self.router.clone(),
            from: self.from,
            to: target,
        }
    }
}

fn remote<E: std::error::Error>(
    to: NodeId,
    e: RaftError<NodeId, E>,
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::RemoteError(RemoteError::new(to, e))
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let raft = self.router.route(self.from, self.to)?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| remote(self.to, e))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let raft = self.router.route(self.from, self.to)?;
        raft.install_snapshot(rpc)
            .await
            .map_err(|e| remote(self.to, e))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let raft = self.router.route(self.from, self.to)?;
        raft.vote(rpc).await.map_err(|e| remote(self.to, e))
    }
}

/// The leader as node 1 sees it, once there is one.
async fn current_leader(rafts: &BTreeMap<NodeId, Raft<TypeConfig>>) -> NodeId {
    rafts[&1]
        .wait(Some(WAIT))
        .metrics(|m| m.current_leader.is_some(), "a leader is elected")
        .await
        .unwrap()
        .current_leader
        .unwrap()
}

/// Writes `request` through the leader; if leadership moved meanwhile (a
/// busy machine can miss heartbeats), through the new leader. Both
/// requests of this test are idempotent, so a retry of a write that did
/// commit changes nothing.
async fn write(rafts: &BTreeMap<NodeId, Raft<TypeConfig>>, request: Request) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let leader = current_leader(rafts).await;
        match rafts[&leader].client_write(request.clone()).await {
            Ok(_) => return,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("retrying {request} after: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{request}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_a_leader_replicate_and_catch_up_from_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let config = Arc::new(
        Config {
            heartbeat_interval: 100,
            election_timeout_min: 500,
            election_timeout_max: 1000,
            // Snapshots only when the test asks, and the log purged right
            // after one, so the cut-off node can only catch up from it.
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: 0,
            // Small chunks, so the snapshot crosses in several pieces.
            snapshot_max_chunk_size: 256,
            ..Default::default()
        }
        .validate()
        .unwrap(),
    );
    let router = Arc::new(Router::default());
    // Node 3 starts cut off: it sees nothing of what follows until the
    // leader has purged its log.
    router.cut_off.lock().unwrap().insert(3);
    let mut stores = BTreeMap::new();
    let mut rafts = BTreeMap::new();
    for id in 1..=3u64 {
        let store = Store::open(tmp.path().join(format!("node-{id}"))).unwrap();
        let network = Network {
            router: router.clone(),
            from: id,
        };
        let raft = Raft::new(
            id,
            config.clone(),
            network,
            store.log_store(),
            store.state_machine().unwrap(),
        )
        .await
        .unwrap();
        router.nodes.lock().unwrap().insert(id, raft.clone());
        stores.insert(id, store);
        rafts.insert(id, raft);
    }
    let members: BTreeMap<NodeId, BasicNode> =
        (1..=3).map(|id| (id, BasicNode::default())).collect();
    rafts[&1].initialize(members).await.unwrap();

    let leader = current_leader(&rafts).await;
    assert_ne!(leader, 3, "the cut-off node cannot win an election");

    let mut expected = BTreeMap::new();
    for i in 0..40u32 {
        let key = format!("key-{:02}", i % 25);
        let request = if i % 7 == 6 {
            expected.remove(&key);
            Request::Delete { key }
        } else {
            let value = format!("value-{i}");
            expected.insert(key.clone(), value.clone());
            Request::Set { key, value }
        };
        write(&rafts, request).await;
    }
    let leader = current_leader(&rafts).await;
    let last = rafts[&leader].metrics().borrow().last_log_index;

    // Snapshot on the leader and purge everything it covers.
    rafts[&leader].trigger().snapshot().await.unwrap();
    rafts[&leader]
        .wait(Some(WAIT))
        .metrics(
            |m| m.purged.map(|p| p.index) >= last,
            "the leader snapshotted and purged its log",
        )
        .await
        .unwrap();

    router.cut_off.lock().unwrap().clear();
    for (id, raft) in &rafts {
        raft.wait(Some(WAIT))
            .applied_index_at_least(last, format!("node {id} applied everything"))
            .await
            .unwrap();
    }
    let expected: Vec<(String, String)> = expected.into_iter().collect();
    for (id, store) in &stores {
        assert_eq!(store.entries().unwrap(), expected, "node {id}");
    }
    // Node 3 got there through a snapshot, not the log (which the leader
    // no longer had): its snapshot covers every write, and it keeps the
    // received snapshot file as its current one.
    let snap = rafts[&3].metrics().borrow().snapshot;
    assert!(
        snap.map(|s| s.index) >= last,
        "node 3 installed a snapshot: {snap:?}"
    );
    let files: Vec<_> = std::fs::read_dir(stores[&3].dir().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        files,
        ["current.snap"],
        "the received file is kept as the current snapshot, nothing else"
    );
    // It crossed in 256-byte chunks, each read from the leader's file and
    // written into node 3's in the Backup class's mode (direct where the
    // file system has it: pieces smaller than a block, rewritten around
    // their neighbours), and arrived byte for byte.
    let sent = std::fs::read(stores[&leader].current_snapshot_path()).unwrap();
    let received = std::fs::read(stores[&3].current_snapshot_path()).unwrap();
    assert!(sent.len() > 4 * 256, "{} bytes", sent.len());
    assert!(
        sent == received,
        "node 3's snapshot file ({} bytes) is the leader's ({} bytes)",
        received.len(),
        sent.len()
    );

    // It switched to the installed state: a new generation of the state
    // database, the only one left in its directory.
    let generation = stores[&3].state_db().generation();
    assert!(generation >= 1, "node 3 installed a new generation");
    let mut states: Vec<_> = std::fs::read_dir(stores[&3].dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("sm-"))
        .collect();
    states.sort();
    assert_eq!(states, [format!("sm-{generation:010}")]);

    for raft in rafts.values() {
        raft.shutdown().await.unwrap();
    }
}
