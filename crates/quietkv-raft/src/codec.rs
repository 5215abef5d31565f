//! How values are encoded, and how failures become openraft errors.
//!
//! Values are JSON (serde_json): openraft's own types (log ids, votes,
//! memberships, entries) derive serde, JSON is already the workspace's
//! serde format, and a stored entry stays readable with the quietkv
//! command-line tool when a cluster needs debugging. Its cost, a few times
//! the size of a binary encoding, matters little next to the entry's
//! payload for this application. A value that does not decode is an error
//! naming its key, never a panic.

use std::fmt::Display;

use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageIOError};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::types::StorageError;

/// An openraft storage error about `subject`, met while doing `verb`, with
/// `detail` saying what went wrong.
pub fn error(
    subject: ErrorSubject<crate::NodeId>,
    verb: ErrorVerb,
    detail: impl Display,
) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::error(detail)).into()
}

/// `value` as stored.
pub fn encode<T: Serialize>(
    value: &T,
    subject: ErrorSubject<crate::NodeId>,
) -> Result<Vec<u8>, StorageError> {
    serde_json::to_vec(value).map_err(|e| {
        error(
            subject,
            ErrorVerb::Write,
            format!("cannot encode a value: {e}"),
        )
    })
}

/// The value stored under `key`, decoded; an error naming the key (shown
/// escaped) if the bytes are not a valid encoding.
pub fn decode<T: DeserializeOwned>(
    key: &[u8],
    bytes: &[u8],
    subject: ErrorSubject<crate::NodeId>,
) -> Result<T, StorageError> {
    serde_json::from_slice(bytes).map_err(|e| {
        error(
            subject,
            ErrorVerb::Read,
            format!("damaged value under key {}: {e}", show_key(key)),
        )
    })
}

/// A key as printable text: raft keys are mostly ASCII with binary numbers.
pub fn show_key(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

/// A quietkv error met while doing `verb` on `subject`.
pub fn db_error(
    subject: ErrorSubject<crate::NodeId>,
    verb: ErrorVerb,
    e: quietkv::Error,
) -> StorageError {
    error(subject, verb, format!("quietkv: {e}"))
}

/// Runs blocking storage work (quietkv calls, file I/O, syncs) on tokio's
/// blocking pool, so a sync to disk does not stall the runtime's workers.
pub async fn blocking<T, F>(f: F) -> Result<T, StorageError>
where
    F: FnOnce() -> Result<T, StorageError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        error(
            ErrorSubject::Store,
            ErrorVerb::Write,
            format!("storage task failed: {e}"),
        )
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_value_is_an_error_naming_its_key() {
        let err = decode::<crate::LogId>(b"\x00raft/meta/purged", b"{not json", ErrorSubject::Logs)
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\\x00raft/meta/purged"), "{text}");
    }
}
