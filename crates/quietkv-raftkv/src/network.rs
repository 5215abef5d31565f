//! The client half of the Raft RPCs between nodes: openraft's
//! `RaftNetworkFactory` and `RaftNetwork` over HTTP, each RPC one POST
//! to the target node's `/raft/...` route (served by `rpc.rs`): a
//! serde_json body, except snapshot chunks, whose bytes go as they are
//! (`snapshot_wire.rs`), held to the node's snapshot send budget if it
//! has one and sent from the snapshot sender's thread if the node sends
//! snapshots at the idle priority (`snapshot_sender.rs`).

use std::fmt;
use std::sync::Arc;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use quietio::RateLimiter;
use quietkv_raft::{NodeId, TypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::snapshot_sender::SnapshotSender;

/// Hands out one connection per target node; all of them share one HTTP
/// client (and so its pool of kept-alive connections), the node's
/// snapshot budget and its snapshot sender.
#[derive(Clone)]
pub struct Network {
    client: reqwest::Client,
    snapshot_pacer: Option<Arc<RateLimiter>>,
    snapshot_sender: Option<Arc<SnapshotSender>>,
}

impl Network {
    /// `snapshot_pacer`: the budget every snapshot this node sends is held
    /// to, over all its streams; `None` sends as fast as the chunks can go.
    /// A stream at full speed holds the node's readers up for a CPU while
    /// each chunk is read and copied into the socket; a budget spreads the
    /// same bytes over more time, so fewer reads meet a chunk in flight.
    /// `snapshot_sender`: the thread snapshot chunks are sent from; `None`
    /// sends them from the node's own threads, like every other RPC.
    pub fn new(
        client: reqwest::Client,
        snapshot_pacer: Option<Arc<RateLimiter>>,
        snapshot_sender: Option<SnapshotSender>,
    ) -> Network {
        Network {
            client,
            snapshot_pacer,
            snapshot_sender: snapshot_sender.map(Arc::new),
        }
    }
}

/// The way to one other node: its base URL, from the address the cluster's
/// membership records for it.
pub struct Connection {
    client: reqwest::Client,
    target: NodeId,
    base: String,
    snapshot_pacer: Option<Arc<RateLimiter>>,
    snapshot_sender: Option<Arc<SnapshotSender>>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            client: self.client.clone(),
            target,
            base: format!("http://{}", node.addr),
            snapshot_pacer: self.snapshot_pacer.clone(),
            snapshot_sender: self.snapshot_sender.clone(),
        }
    }
}

/// A node answered an RPC with something other than success (a body it
/// could not decode, say): the transport worked, the exchange did not.
#[derive(Debug)]
struct HttpStatus {
    url: String,
    status: reqwest::StatusCode,
    body: String,
}

impl fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} answered {}: {}", self.url, self.status, self.body)
    }
}

impl std::error::Error for HttpStatus {}

/// A snapshot chunk that could not be encoded.
#[derive(Debug)]
struct WireError(String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl Connection {
    /// POSTs `request` to `path` on the target and decodes its answer: the
    /// target's own `Result`, whose error becomes openraft's remote error.
    /// A node that cannot be connected to is `Unreachable` (openraft backs
    /// off from it); any other transport failure is a network error.
    async fn call<Req, Resp, E>(
        &self,
        path: &str,
        request: &Req,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body =
            serde_json::to_vec(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        self.post(path, body, "application/json", option).await
    }

    /// POSTs `body` of type `content_type` to `path`; see [`call`](Self::call).
    async fn post<Resp, E>(
        &self,
        path: &str,
        body: Vec<u8>,
        content_type: &str,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let url = format!("{}{}", self.base, path);
        let response = self
            .client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body)
            .timeout(option.hard_ttl())
            .send()
            .await
            .map_err(|e| {
                if e.is_connect() {
                    RPCError::Unreachable(Unreachable::new(&e))
                } else {
                    RPCError::Network(NetworkError::new(&e))
                }
            })?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(RPCError::Network(NetworkError::new(&HttpStatus {
                url,
                status,
                body,
            })));
        }
        let answer: Result<Resp, RaftError<NodeId, E>> = response
            .json()
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.call("/raft/append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        if let Some(pacer) = &self.snapshot_pacer {
            let wait = pacer.reserve(rpc.data.len() as u64);
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        let Some(sender) = &self.snapshot_sender else {
            return send_chunk(self, rpc, option).await;
        };
        // The same request, encoded and sent on the sender's thread with
        // its client.
        let on_sender = Connection {
            client: sender.client().clone(),
            target: self.target,
            base: self.base.clone(),
            snapshot_pacer: None,
            snapshot_sender: None,
        };
        sender
            .run(async move { send_chunk(&on_sender, rpc, option).await })
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&WireError(e))))?
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.call("/raft/vote", &rpc, &option).await
    }
}

/// Encodes a snapshot chunk (its bytes as they are) and POSTs it.
async fn send_chunk(
    to: &Connection,
    rpc: InstallSnapshotRequest<TypeConfig>,
    option: RPCOption,
) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
    let body = crate::snapshot_wire::encode(rpc)
        .map_err(|e| RPCError::Network(NetworkError::new(&WireError(e))))?;
    to.post(
        "/raft/snapshot",
        body,
        crate::snapshot_wire::CONTENT_TYPE,
        &option,
    )
    .await
}
