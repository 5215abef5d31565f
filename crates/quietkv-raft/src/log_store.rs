//! The raft log store: entries, the vote, the committed log id and the last
//! purged log id, each under its own keys (see [`crate::keys`]).
//!
//! What raft needs on disk before it goes on is written with a synced
//! write: an append is synced before openraft is told it is flushed, and
//! a vote before `save_vote` returns. A log entry that does not decode, or
//! that is stored under another index than its own, is an error naming the
//! key and index.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogId, Vote};
use quietkv::{Db, WriteBatch, WriteOptions};

use crate::codec::{blocking, db_error, decode, encode, error, show_key};
use crate::keys::{self, log_index, log_key, LOG_PREFIX};
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};

/// The first key after every log entry's key: `LOG_PREFIX` with its last
/// byte (`/`) raised by one.
const LOG_END: &[u8] = b"\x00raft/log0";

/// A batch of appended entries is split into writes of about this size, to
/// stay far below quietkv's limit on one batch.
const APPEND_BATCH_BYTES: usize = 4 << 20;

const SYNC: WriteOptions = WriteOptions { sync: true };

/// The log store. Cloning it is cheap; a clone is also the log reader
/// openraft's replication tasks use.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
}

impl LogStore {
    pub(crate) fn new(db: Arc<Db>) -> Self {
        LogStore { db }
    }
}

/// The entries with indexes in `[start, end)` (`end` `None`: to the last).
fn read_entries(db: &Db, start: u64, end: Option<u64>) -> Result<Vec<Entry>, StorageError> {
    let from = log_key(start);
    let to = end.map_or_else(|| LOG_END.to_vec(), log_key);
    let mut out = Vec::new();
    let iter = db
        .range(&from[..]..&to[..])
        .map_err(|e| db_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
    for item in iter {
        let (key, value) = item.map_err(|e| db_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
        out.push(decode_entry(&key, &value)?);
    }
    Ok(out)
}

/// A stored entry, checked to be the one its key names.
fn decode_entry(key: &[u8], value: &[u8]) -> Result<Entry, StorageError> {
    let Some(index) = log_index(key) else {
        return Err(error(
            ErrorSubject::Logs,
            ErrorVerb::Read,
            format!("key {} in the log range is not a log key", show_key(key)),
        ));
    };
    let entry: Entry = decode(key, value, ErrorSubject::LogIndex(index))?;
    if entry.get_log_id().index != index {
        return Err(error(
            ErrorSubject::LogIndex(index),
            ErrorVerb::Read,
            format!(
                "the entry under key {} (index {index}) says it is index {}",
                show_key(key),
                entry.get_log_id().index
            ),
        ));
    }
    Ok(entry)
}

/// The JSON value under `key`, if there is one.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    db: &Db,
    key: &[u8],
    subject: ErrorSubject<NodeId>,
) -> Result<Option<T>, StorageError> {
    match db.get(key) {
        Ok(Some(v)) => decode(key, &v, subject).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(db_error(subject, ErrorVerb::Read, e)),
    }
}

/// Stores `value` under `key` with one synced write.
fn write_json_synced<T: serde::Serialize>(
    db: &Db,
    key: &[u8],
    value: &T,
    subject: ErrorSubject<NodeId>,
) -> Result<(), StorageError> {
    let bytes = encode(value, subject.clone())?;
    let mut batch = WriteBatch::new();
    batch
        .put(key, bytes)
        .and_then(|()| db.write(batch, SYNC))
        .map_err(|e| db_error(subject, ErrorVerb::Write, e))
}

/// Deletes the entries left at or below the last purged index by a purge
/// that a crash interrupted; run when the store is opened.
pub(crate) fn finish_purge(db: &Db) -> Result<(), StorageError> {
    let purged: Option<LogId> = read_json(db, keys::PURGED, ErrorSubject::Logs)?;
    if let Some(p) = purged {
        delete_entries(db, 0, p.index.checked_add(1))?;
    }
    Ok(())
}

/// Deletes the entries with indexes in `[start, end)` (`end` `None`: to
/// the last) with one synced range delete: all of them or, after a crash,
/// none, however long the range.
fn delete_entries(db: &Db, start: u64, end: Option<u64>) -> Result<(), StorageError> {
    let to = end.map_or_else(|| LOG_END.to_vec(), log_key);
    let mut batch = WriteBatch::new();
    batch
        .delete_range(log_key(start), to)
        .and_then(|()| db.write(batch, SYNC))
        .map_err(|e| db_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => match s.checked_add(1) {
                Some(s) => s,
                None => return Ok(Vec::new()),
            },
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => None,
        };
        if end.is_some_and(|e| e <= start) {
            return Ok(Vec::new());
        }
        let db = self.db.clone();
        blocking(move || read_entries(&db, start, end)).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let db = self.db.clone();
        blocking(move || {
            let purged: Option<LogId> = read_json(&db, keys::PURGED, ErrorSubject::Logs)?;
            // Look only above the purged entries: they are range-deleted,
            // and an iterator reads every entry a range delete covers
            // until compaction drops them, so a search down from the end
            // of a fully purged log would read the whole purged log (on a
            // node that had just snapshotted 2 GiB, minutes at its open).
            let first_kept = match purged {
                Some(p) => match p.index.checked_add(1) {
                    Some(i) => log_key(i),
                    None => LOG_END.to_vec(),
                },
                None => LOG_PREFIX.to_vec(),
            };
            let last = db
                .range(&first_kept[..]..LOG_END)
                .map_err(|e| db_error(ErrorSubject::Logs, ErrorVerb::Read, e))?
                .next_back()
                .transpose()
                .map_err(|e| db_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
            let last = match last {
                Some((k, v)) => Some(*decode_entry(&k, &v)?.get_log_id()),
                None => None,
            };
            // With every entry purged the last log id is the purged one.
            let last = last.max(purged);
            Ok(LogState {
                last_purged_log_id: purged,
                last_log_id: last,
            })
        })
        .await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let db = self.db.clone();
        let vote = *vote;
        blocking(move || write_json_synced(&db, keys::VOTE, &vote, ErrorSubject::Vote)).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        let db = self.db.clone();
        blocking(move || read_json(&db, keys::VOTE, ErrorSubject::Vote)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let db = self.db.clone();
        blocking(move || {
            // Not synced: openraft only uses it to re-apply committed
            // entries sooner after a restart; losing the newest value to a
            // power cut only delays that until the leader says it again.
            let bytes = encode(&committed, ErrorSubject::Store)?;
            db.put(keys::COMMITTED, bytes)
                .map_err(|e| db_error(ErrorSubject::Store, ErrorVerb::Write, e))
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let db = self.db.clone();
        blocking(move || {
            Ok(read_json::<Option<LogId>>(&db, keys::COMMITTED, ErrorSubject::Store)?.flatten())
        })
        .await
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batches = vec![WriteBatch::new()];
        for entry in entries {
            let id = *entry.get_log_id();
            let bytes = encode(&entry, ErrorSubject::Log(id))?;
            let batch = batches.last_mut().expect("starts with one batch");
            if !batch.is_empty() && batch.approximate_size() + bytes.len() > APPEND_BATCH_BYTES {
                batches.push(WriteBatch::new());
            }
            batches
                .last_mut()
                .expect("just pushed")
                .put(log_key(id.index), bytes)
                .map_err(|e| db_error(ErrorSubject::Log(id), ErrorVerb::Write, e))?;
        }
        let db = self.db.clone();
        let result = blocking(move || {
            for batch in batches {
                db.write(batch, SYNC)
                    .map_err(|e| db_error(ErrorSubject::Logs, ErrorVerb::Write, e))?;
            }
            Ok(())
        })
        .await;
        // Synced above: the entries are durable when the callback runs.
        match &result {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
        result
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let db = self.db.clone();
        // One range delete: a crash leaves the whole log or the truncated
        // one, never a log with a hole.
        blocking(move || delete_entries(&db, log_id.index, None)).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let db = self.db.clone();
        blocking(move || {
            let before: Option<LogId> = read_json(&db, keys::PURGED, ErrorSubject::Logs)?;
            if before.is_some_and(|b| b >= log_id) {
                return Ok(());
            }
            // The purged id first: a crash during the deletes then leaves
            // entries at or below it, which reads never ask for and the
            // next open deletes (`finish_purge`); never a log whose first
            // entry is missing without a purged id saying so.
            write_json_synced(&db, keys::PURGED, &log_id, ErrorSubject::Logs)?;
            delete_entries(&db, 0, log_id.index.checked_add(1))
        })
        .await
    }
}
