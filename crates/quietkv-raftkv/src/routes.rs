//! The route table: the client API (`kv`), the cluster administration
//! (`admin`) and the Raft RPCs (`rpc`), all on one [`App`].

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode, Uri};
use axum::routing::{get, post, put};
use axum::Router;

use crate::app::App;
use crate::error::ApiError;
use crate::{admin, kv, rpc};

/// Raft RPC bodies carry batches of log entries (JSON) and snapshot chunks
/// of up to 8 MiB: more room than axum's 2 MiB default, which still
/// applies to the client API.
const RPC_BODY_LIMIT: usize = 64 << 20;

pub fn router(app: Arc<App>) -> Router {
    let raft_rpc = Router::new()
        .route("/raft/append", post(rpc::append))
        .route("/raft/vote", post(rpc::vote))
        .route("/raft/snapshot", post(rpc::install_snapshot))
        .layer(DefaultBodyLimit::max(RPC_BODY_LIMIT));
    Router::new()
        .route("/kv/{*key}", put(kv::put).get(kv::get).delete(kv::delete))
        .route("/init", post(admin::init))
        .route("/add-learner", post(admin::add_learner))
        .route("/change-membership", post(admin::change_membership))
        .route("/metrics", get(admin::metrics))
        .route("/snapshot", post(admin::snapshot))
        .route("/purge", post(admin::purge))
        .route("/debug/entries", get(admin::entries))
        .merge(raft_rpc)
        .fallback(no_route)
        .with_state(app)
}

/// Any other path (including `/kv/` with no key) gets a JSON error saying
/// what the routes are, not an empty 404.
async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "no route {method} {}: the API is PUT, GET and DELETE /kv/{{key}} (the key not empty), \
             POST /init, /add-learner, /change-membership, /snapshot, /purge, \
             GET /metrics and /debug/entries",
            uri.path()
        ),
    )
}
