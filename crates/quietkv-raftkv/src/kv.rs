//! The client API: `PUT`, `GET` and `DELETE /kv/{key}`. Writes go through
//! the raft log and answer once committed and applied; reads are
//! linearizable (the leader confirms with a quorum that it still leads and
//! waits until its state machine has caught up, then reads it). A node
//! that is not the leader redirects to the one it knows.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use quietkv_raft::Request;
use serde::Serialize;

use crate::app::App;
use crate::error::ApiError;

/// What a write answers once applied.
#[derive(Serialize)]
pub struct WriteAnswer {
    /// The log index of the write.
    index: u64,
    /// The key's value before it.
    previous: Option<String>,
}

fn check_key(key: &str) -> Result<(), ApiError> {
    if key.is_empty() {
        return Err(ApiError::bad_request("the key is empty: use /kv/{key}"));
    }
    Ok(())
}

async fn write(app: &App, uri: &Uri, request: Request) -> Result<Json<WriteAnswer>, ApiError> {
    let written = app
        .raft
        .client_write(request)
        .await
        .map_err(|e| ApiError::from_write(uri, e))?;
    Ok(Json(WriteAnswer {
        index: written.log_id.index,
        previous: written.data.previous,
    }))
}

pub async fn put(
    State(app): State<Arc<App>>,
    Path(key): Path<String>,
    uri: Uri,
    body: Bytes,
) -> Result<Json<WriteAnswer>, ApiError> {
    check_key(&key)?;
    // The replicated application stores UTF-8 strings.
    let value = String::from_utf8(body.to_vec())
        .map_err(|e| ApiError::bad_request(format!("the value is not UTF-8: {e}")))?;
    write(&app, &uri, Request::Set { key, value }).await
}

pub async fn delete(
    State(app): State<Arc<App>>,
    Path(key): Path<String>,
    uri: Uri,
) -> Result<Json<WriteAnswer>, ApiError> {
    check_key(&key)?;
    write(&app, &uri, Request::Delete { key }).await
}

pub async fn get(
    State(app): State<Arc<App>>,
    Path(key): Path<String>,
    uri: Uri,
) -> Result<Response, ApiError> {
    check_key(&key)?;
    app.raft
        .ensure_linearizable()
        .await
        .map_err(|e| ApiError::from_read(&uri, e))?;
    match app.store.get(&key).map_err(ApiError::storage)? {
        Some(value) => Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            value,
        )
            .into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no value for key {key:?}"),
        )),
    }
}
