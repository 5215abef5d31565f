//! The server half of the Raft RPCs (the client half is `network.rs`):
//! each route hands the decoded request to this node's `Raft` and answers
//! with its `Result` as JSON, error included, so the caller sees the
//! remote error openraft produced. Requests are JSON but for snapshot
//! chunks (`snapshot_wire.rs`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::Json;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use quietkv_raft::{NodeId, TypeConfig};

use crate::app::App;
use crate::snapshot_wire;

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

/// A snapshot chunk, in `snapshot_wire`'s layout (its bytes not as JSON);
/// a body in any other layout is answered 400 with what was wrong.
pub async fn install_snapshot(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<
    Json<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>>,
    (StatusCode, String),
> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type != snapshot_wire::CONTENT_TYPE {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "a snapshot chunk is sent as {}, not {content_type:?}",
                snapshot_wire::CONTENT_TYPE
            ),
        ));
    }
    let request: InstallSnapshotRequest<TypeConfig> =
        snapshot_wire::decode(&body).map_err(|e| (StatusCode::BAD_REQUEST, e))?;
    // One line per piece, so the log shows a snapshot arriving (and the
    // tests can see that it came in several pieces).
    tracing::info!(
        snapshot = %request.meta.snapshot_id,
        offset = request.offset,
        bytes = request.data.len(),
        last = request.done,
        "received snapshot chunk"
    );
    Ok(Json(app.raft.install_snapshot(request).await))
}
