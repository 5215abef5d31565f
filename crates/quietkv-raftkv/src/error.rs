//! What a request that did not succeed answers: an HTTP status and a JSON
//! body `{"error": "...", "leader_id": .., "leader_addr": ..}`. A node that
//! is not the leader redirects (307, which keeps the method and body) to
//! the leader it knows, or says that it knows none.

use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use openraft::error::{
    CheckIsLeaderError, ClientWriteError, ForwardToLeader, InitializeError, RaftError,
};
use openraft::BasicNode;
use quietkv_raft::NodeId;
use serde::Serialize;

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    leader_id: Option<NodeId>,
    leader_addr: Option<String>,
    location: Option<String>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    leader_id: Option<NodeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    leader_addr: Option<&'a str>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            leader_id: None,
            leader_addr: None,
            location: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// This node is not the leader: send the client to the one it knows
    /// (same path and query, on the leader's address), or tell it to retry
    /// once an election is over.
    pub fn forward(uri: &Uri, forward: &ForwardToLeader<NodeId, BasicNode>) -> ApiError {
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        match (&forward.leader_id, &forward.leader_node) {
            (Some(id), Some(node)) => ApiError {
                status: StatusCode::TEMPORARY_REDIRECT,
                message: format!("this node is not the leader; node {id} at {} is", node.addr),
                leader_id: Some(*id),
                leader_addr: Some(node.addr.clone()),
                location: Some(format!("http://{}{path}", node.addr)),
            },
            (Some(id), None) => ApiError {
                leader_id: Some(*id),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("this node is not the leader; node {id} is, at an address this node does not know"),
                )
            },
            _ => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "no leader is known yet (an election may be under way): retry shortly",
            ),
        }
    }

    /// openraft stopped (a storage error, or the node is shutting down).
    fn fatal(e: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("raft is not running: {e}"),
        )
    }

    pub fn from_write(
        uri: &Uri,
        e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>,
    ) -> ApiError {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ApiError::forward(uri, &f),
            RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
                ApiError::new(StatusCode::CONFLICT, e.to_string())
            }
            RaftError::Fatal(e) => ApiError::fatal(e),
        }
    }

    pub fn from_read(
        uri: &Uri,
        e: RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>,
    ) -> ApiError {
        match e {
            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => {
                ApiError::forward(uri, &f)
            }
            RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e)) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the leader cannot reach a quorum to confirm it still leads: {e}"),
            ),
            RaftError::Fatal(e) => ApiError::fatal(e),
        }
    }

    pub fn from_init(e: RaftError<NodeId, InitializeError<NodeId, BasicNode>>) -> ApiError {
        match e {
            RaftError::APIError(InitializeError::NotAllowed(e)) => ApiError::new(
                StatusCode::CONFLICT,
                format!("the cluster is already initialized: {e}"),
            ),
            RaftError::APIError(InitializeError::NotInMembers(e)) => {
                ApiError::bad_request(e.to_string())
            }
            RaftError::Fatal(e) => ApiError::fatal(e),
        }
    }

    pub fn storage(e: quietkv_raft::StorageError) -> ApiError {
        ApiError::internal(format!("reading this node's storage: {e}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(Body {
            error: &self.message,
            leader_id: self.leader_id,
            leader_addr: self.leader_addr.as_deref(),
        });
        match self.location {
            Some(location) => (self.status, [(header::LOCATION, location)], body).into_response(),
            None => (self.status, body).into_response(),
        }
    }
}
