//! The admin routes: start a cluster (`/init`), grow it (`/add-learner`,
//! `/change-membership`), look at a node (`/metrics`, `/debug/entries`),
//! and make the node snapshot and purge its log on request (`/snapshot`,
//! `/purge`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::Json;
use openraft::{BasicNode, RaftMetrics};
use quietkv_raft::{LogId, NodeId};
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::error::ApiError;

/// How long `/snapshot` waits for the snapshot it asked for: building one
/// reads the whole state machine, which on a busy machine takes a while.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(120);

#[derive(Deserialize)]
pub struct InitBody {
    /// Every first member's id and address (`{"1": "127.0.0.1:7001", ...}`).
    /// Without it, the cluster starts with this node alone.
    members: Option<BTreeMap<NodeId, String>>,
}

pub async fn init(
    State(app): State<Arc<App>>,
    body: Option<Json<InitBody>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let members = match body.and_then(|Json(b)| b.members) {
        Some(members) if members.is_empty() => {
            return Err(ApiError::bad_request(
                "members is empty: name at least one node",
            ));
        }
        Some(members) => members,
        None => BTreeMap::from([(app.id, app.addr.clone())]),
    };
    let nodes: BTreeMap<NodeId, BasicNode> = members
        .into_iter()
        .map(|(id, addr)| (id, BasicNode::new(addr)))
        .collect();
    app.raft
        .initialize(nodes.clone())
        .await
        .map_err(ApiError::from_init)?;
    Ok(Json(serde_json::json!({ "initialized": nodes })))
}

#[derive(Deserialize)]
pub struct AddLearnerBody {
    id: NodeId,
    addr: String,
}

/// Adds a node that receives the log but does not vote; answers once it
/// has caught up with the leader.
pub async fn add_learner(
    State(app): State<Arc<App>>,
    uri: Uri,
    Json(body): Json<AddLearnerBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if body.addr.trim().is_empty() {
        return Err(ApiError::bad_request(
            "addr is empty: give the learner's host:port",
        ));
    }
    let written = app
        .raft
        .add_learner(body.id, BasicNode::new(body.addr), true)
        .await
        .map_err(|e| ApiError::from_write(&uri, e))?;
    Ok(Json(serde_json::json!({ "index": written.log_id.index })))
}

#[derive(Deserialize)]
pub struct ChangeMembershipBody {
    /// The ids of every voter after the change (each already a learner or
    /// a voter).
    members: BTreeSet<NodeId>,
    /// Whether voters left out stay as learners (default: they are removed).
    #[serde(default)]
    retain: bool,
}

pub async fn change_membership(
    State(app): State<Arc<App>>,
    uri: Uri,
    Json(body): Json<ChangeMembershipBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if body.members.is_empty() {
        return Err(ApiError::bad_request(
            "members is empty: a cluster needs a voter",
        ));
    }
    let written = app
        .raft
        .change_membership(body.members, body.retain)
        .await
        .map_err(|e| ApiError::from_write(&uri, e))?;
    Ok(Json(serde_json::json!({ "index": written.log_id.index })))
}

pub async fn metrics(State(app): State<Arc<App>>) -> Json<RaftMetrics<NodeId, BasicNode>> {
    Json(app.raft.metrics().borrow().clone())
}

/// Builds a snapshot of everything applied so far and answers with its
/// log id once it exists.
pub async fn snapshot(State(app): State<Arc<App>>) -> Result<Json<serde_json::Value>, ApiError> {
    let applied = app.raft.metrics().borrow().last_applied;
    let Some(applied) = applied else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "nothing is applied yet: there is nothing to snapshot",
        ));
    };
    app.raft
        .trigger()
        .snapshot()
        .await
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let metrics = app
        .raft
        .wait(Some(SNAPSHOT_WAIT))
        .metrics(
            |m| m.snapshot.map(|s| s.index) >= Some(applied.index),
            "a snapshot covering what was applied",
        )
        .await
        .map_err(|e| ApiError::new(StatusCode::GATEWAY_TIMEOUT, e.to_string()))?;
    Ok(Json(serde_json::json!({ "snapshot": metrics.snapshot })))
}

#[derive(Deserialize)]
pub struct PurgeBody {
    /// Purge the log up to and including this index (default: the last
    /// index the current snapshot covers).
    upto: Option<u64>,
}

/// Asks openraft to purge the log up to an index the snapshot covers.
/// Purging happens in the background (a leader waits for replication
/// still reading those entries): watch `purged` in `/metrics`.
pub async fn purge(
    State(app): State<Arc<App>>,
    body: Option<Json<PurgeBody>>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let snapshot = app.raft.metrics().borrow().snapshot;
    let Some(snapshot) = snapshot else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "this node has no snapshot, and only a snapshot's entries can be purged: POST /snapshot first",
        ));
    };
    let upto = body.and_then(|Json(b)| b.upto).unwrap_or(snapshot.index);
    if upto > snapshot.index {
        return Err(ApiError::bad_request(format!(
            "upto {upto} is past the snapshot's last index {}: entries not in a snapshot are never purged",
            snapshot.index
        )));
    }
    app.raft
        .trigger()
        .purge_log(upto)
        .await
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "upto": upto })),
    ))
}

/// This node's state machine as applied here, key by key: for comparing
/// nodes, not a client read (it is not linearizable).
#[derive(Serialize)]
pub struct Entries {
    id: NodeId,
    last_applied: Option<LogId>,
    entries: Vec<(String, String)>,
}

pub async fn entries(State(app): State<Arc<App>>) -> Result<Json<Entries>, ApiError> {
    let last_applied = app.raft.metrics().borrow().last_applied;
    let entries = app.store.entries().map_err(ApiError::storage)?;
    Ok(Json(Entries {
        id: app.id,
        last_applied,
        entries,
    }))
}
