//! The server half of the Raft RPCs (the client half is `network.rs`):
//! each route hands the decoded request to this node's `Raft` and answers
//! with its `Result` as JSON, error included, so the caller sees the
//! remote error openraft produced.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use quietkv_raft::{NodeId, TypeConfig};

use crate::app::App;

pub async fn append(
    State(app): State<Arc<App>>,
    Json(request): Json<AppendEntriesRequest<TypeConfig>>,
) -> Json<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>> {
    Json(app.raft.append_entries(request).await)
}

pub async fn vote(
    State(app): State<Arc<App>>,
    Json(request): Json<VoteRequest<NodeId>>,
) -> Json<Result<VoteResponse<NodeId>, RaftError<NodeId>>> {
    Json(app.raft.vote(request).await)
}

pub async fn install_snapshot(
    State(app): State<Arc<App>>,
    Json(request): Json<InstallSnapshotRequest<TypeConfig>>,
) -> Json<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>> {
    // One line per piece, so the log shows a snapshot arriving (and the
    // tests can see that it came in several pieces).
    tracing::info!(
        snapshot = %request.meta.snapshot_id,
        offset = request.offset,
        bytes = request.data.len(),
        last = request.done,
        "received snapshot chunk"
    );
    Json(app.raft.install_snapshot(request).await)
}
