//! The replicated key-value application: its data, its applied log id and
//! membership, snapshots of it, and installing a snapshot in its place.
//!
//! The data of the current generation lives under
//! `\x00raft/sm/<generation>d<key>`, its applied log id and membership under
//! `\x00raft/sm/<generation>a` (see [`crate::keys`]). Each `apply` call
//! writes its data changes and the new applied state in one synced batch,
//! so after a crash the data and the applied index always agree.
//!
//! Installing a snapshot replaces the whole state at once:
//!
//! 1. the received file is copied into the snapshot directory, synced, and
//!    checked end to end (checksum, record count, description);
//! 2. its records are written under the next generation, which nothing
//!    reads yet (synced writes);
//! 3. one synced batch writes the new generation's applied state and
//!    points `\x00raft/meta/sm-generation` at it: this is the switch;
//! 4. the old generation is deleted;
//! 5. the received file becomes the current snapshot.
//!
//! A crash before step 3 leaves the old state (the half-written new
//! generation is deleted at the next open), one after it the new state
//! (what is left of the old generation is deleted at the next open).

use std::collections::HashMap;
use std::io::{Seek, SeekFrom};

use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder};
use quietkv::{Db, WriteBatch, WriteOptions};
use serde::{Deserialize, Serialize};

use crate::codec::{blocking, db_error, decode, encode, error, show_key};
use crate::keys;
use crate::log_store::read_json;
use crate::ranges::{delete_range, Order};
use crate::snapshot::{unique, SnapshotDir, SnapshotFileError, SnapshotReader, SnapshotWriter};
use crate::types::{
    Entry, LogId, Request, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

const SYNC: WriteOptions = WriteOptions { sync: true };

/// An apply or install batch is cut at about this size, to stay far below
/// quietkv's limit on one batch.
const BATCH_BYTES: usize = 4 << 20;

/// The first key after every state machine key: `SM_PREFIX` with its last
/// byte (`/`) raised by one.
const SM_END: &[u8] = b"\x00raft/sm0";

/// The applied log id and membership, stored with the data they describe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedState {
    /// The last log entry applied.
    pub last_applied: Option<LogId>,
    /// The last membership applied.
    pub membership: StoredMembership,
}

/// The state machine. There is one per [`Store`](crate::Store); openraft
/// owns it once the node starts.
pub struct StateMachine {
    db: Arc<Db>,
    snapshots: Arc<SnapshotDir>,
    generation: u64,
    applied: AppliedState,
}

fn snap_err(verb: ErrorVerb, e: SnapshotFileError) -> StorageError {
    error(ErrorSubject::Snapshot(None), verb, e)
}

fn sm_db_err(verb: ErrorVerb) -> impl Fn(quietkv::Error) -> StorageError {
    move |e| db_error(ErrorSubject::StateMachine, verb, e)
}

/// The generation the state machine reads, as stored (0 before the first
/// install).
pub(crate) fn current_generation(
    get: impl FnOnce(&[u8]) -> quietkv::Result<Option<Vec<u8>>>,
) -> Result<u64, StorageError> {
    match get(keys::SM_GENERATION).map_err(sm_db_err(ErrorVerb::Read))? {
        None => Ok(0),
        Some(v) => keys::decode_generation(&v).ok_or_else(|| {
            error(
                ErrorSubject::StateMachine,
                ErrorVerb::Read,
                format!(
                    "damaged value under key {}: {} bytes, not an 8-byte generation",
                    show_key(keys::SM_GENERATION),
                    v.len()
                ),
            )
        }),
    }
}

/// Decodes an application value (UTF-8 text) stored under `key`.
pub(crate) fn decode_value(key: &[u8], value: Vec<u8>) -> Result<String, StorageError> {
    String::from_utf8(value).map_err(|e| {
        error(
            ErrorSubject::StateMachine,
            ErrorVerb::Read,
            format!("value under key {} is not UTF-8: {e}", show_key(key)),
        )
    })
}

/// Deletes every state machine key outside `generation`: what an install
/// or a generation delete cut short by a crash left. Run at open.
pub(crate) fn delete_other_generations(db: &Db, generation: u64) -> Result<(), StorageError> {
    let own = keys::generation_prefix(generation);
    let next = match generation.checked_add(1) {
        Some(n) => keys::generation_prefix(n),
        None => SM_END.to_vec(),
    };
    delete_range(db, keys::SM_PREFIX, &own, Order::LowestFirst, false)
        .and_then(|_| delete_range(db, &next, SM_END, Order::LowestFirst, false))
        .map(|_| ())
        .map_err(sm_db_err(ErrorVerb::Delete))
}

impl StateMachine {
    /// Loads the state machine of `db`, whose snapshots are in `snapshots`.
    pub(crate) fn load(db: Arc<Db>, snapshots: Arc<SnapshotDir>) -> Result<Self, StorageError> {
        let generation = current_generation(|k| db.get(k))?;
        let applied = read_json(
            &db,
            &keys::applied_key(generation),
            ErrorSubject::StateMachine,
        )?
        .unwrap_or_default();
        Ok(StateMachine {
            db,
            snapshots,
            generation,
            applied,
        })
    }

    /// The last applied log id and membership.
    pub fn applied(&self) -> &AppliedState {
        &self.applied
    }
}

/// Applies `entries` on top of `applied` in `generation`, one synced batch
/// per [`BATCH_BYTES`] of changes, each with the applied state it reaches.
pub(crate) fn apply_entries(
    db: &Db,
    generation: u64,
    applied: &mut AppliedState,
    entries: Vec<Entry>,
) -> Result<Vec<Response>, StorageError> {
    let mut responses = Vec::with_capacity(entries.len());
    // Values this call changed, so a later entry of the same call sees
    // them before they are written.
    let mut changed: HashMap<Vec<u8>, Option<String>> = HashMap::new();
    let mut batch = WriteBatch::new();
    let applied_key = keys::applied_key(generation);
    let count = entries.len();
    for (i, entry) in entries.into_iter().enumerate() {
        let id = entry.log_id;
        let verb_err = |e| db_error(ErrorSubject::Apply(id), ErrorVerb::Write, e);
        let response = match entry.payload {
            EntryPayload::Blank => Response::default(),
            EntryPayload::Membership(m) => {
                applied.membership = StoredMembership::new(Some(id), m);
                Response::default()
            }
            EntryPayload::Normal(req) => {
                let (key, value) = match req {
                    Request::Set { key, value } => (key, Some(value)),
                    Request::Delete { key } => (key, None),
                };
                let data_key = keys::data_key(generation, key.as_bytes());
                let previous = match changed.get(&data_key) {
                    Some(v) => v.clone(),
                    None => match db.get(&data_key).map_err(sm_db_err(ErrorVerb::Read))? {
                        Some(v) => Some(decode_value(&data_key, v)?),
                        None => None,
                    },
                };
                match &value {
                    Some(v) => batch.put(&data_key, v.as_bytes()),
                    None => batch.delete(&data_key),
                }
                .map_err(verb_err)?;
                changed.insert(data_key, value);
                Response { previous }
            }
        };
        applied.last_applied = Some(id);
        responses.push(response);
        if batch.approximate_size() >= BATCH_BYTES || i + 1 == count {
            batch
                .put(&applied_key, encode(&*applied, ErrorSubject::Apply(id))?)
                .map_err(verb_err)?;
            db.write(std::mem::take(&mut batch), SYNC)
                .map_err(verb_err)?;
            changed.clear();
        }
    }
    Ok(responses)
}

/// Builds a snapshot file of the state as of now and makes it the current
/// snapshot; returns its description and an open handle at its start.
pub(crate) fn build(
    db: &Db,
    snapshots: &SnapshotDir,
) -> Result<(SnapshotMeta, std::fs::File), StorageError> {
    // One quietkv snapshot for everything read: the generation, the
    // applied state and the data agree with each other.
    let view = db.snapshot();
    let generation = current_generation(|k| view.get(k))?;
    let applied: AppliedState = match view.get(keys::applied_key(generation)) {
        Ok(Some(v)) => decode(
            &keys::applied_key(generation),
            &v,
            ErrorSubject::StateMachine,
        )?,
        Ok(None) => AppliedState::default(),
        Err(e) => return Err(db_error(ErrorSubject::StateMachine, ErrorVerb::Read, e)),
    };
    let meta = SnapshotMeta {
        last_log_id: applied.last_applied,
        last_membership: applied.membership.clone(),
        snapshot_id: format!(
            "{}-{}",
            applied
                .last_applied
                .map_or("none".into(), |l| l.to_string()),
            unique()
        ),
    };
    let (temp, file) = snapshots
        .create_temp("build")
        .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    let path = temp.path().to_path_buf();
    let mut w =
        SnapshotWriter::new(&path, file, &meta).map_err(|e| snap_err(ErrorVerb::Write, e))?;
    let prefix = keys::data_prefix(generation);
    for item in view.prefix(&prefix).map_err(sm_db_err(ErrorVerb::Read))? {
        let (k, v) = item.map_err(sm_db_err(ErrorVerb::Read))?;
        w.add(&k[prefix.len()..], &v)
            .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    }
    let mut file = w.finish().map_err(|e| snap_err(ErrorVerb::Write, e))?;
    file.seek(SeekFrom::Start(0)).map_err(|e| {
        snap_err(
            ErrorVerb::Seek,
            SnapshotFileError {
                path: path.clone(),
                offset: None,
                detail: e.to_string(),
            },
        )
    })?;
    // Published unless an install meanwhile made a newer one current; the
    // open handle reads it either way.
    snapshots
        .publish(temp, &meta)
        .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    Ok((meta, file))
}

/// Where [`install`] stops early in tests, to leave what a crash there
/// would leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InstallStep {
    /// The new generation is written, nothing points at it.
    NewDataWritten,
    /// The generation key points at the new generation.
    Switched,
    /// The old generation is deleted.
    OldDeleted,
}

/// Replaces the state of `generation` with the snapshot in `source`,
/// described by `meta`; returns the new generation and applied state.
/// `stop_after` ends it early, as a crash there would (tests only).
pub(crate) fn install(
    db: &Db,
    snapshots: &SnapshotDir,
    generation: u64,
    meta: &SnapshotMeta,
    mut source: std::fs::File,
    stop_after: Option<InstallStep>,
) -> Result<(u64, AppliedState), StorageError> {
    let rd = |e| snap_err(ErrorVerb::Read, e);
    // 1. Our own synced copy (the received handle may be anyone's file),
    //    checked end to end before any of it is applied.
    let (temp, mut copy) = snapshots
        .create_temp("install")
        .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    let path = temp.path().to_path_buf();
    let copy_err = |e: std::io::Error| {
        snap_err(
            ErrorVerb::Write,
            SnapshotFileError {
                path: path.clone(),
                offset: None,
                detail: e.to_string(),
            },
        )
    };
    source.seek(SeekFrom::Start(0)).map_err(copy_err)?;
    std::io::copy(&mut source, &mut copy).map_err(copy_err)?;
    copy.sync_all().map_err(copy_err)?;
    let check = SnapshotReader::new(&path, copy.try_clone().map_err(copy_err)?).map_err(rd)?;
    if check.meta() != meta {
        return Err(error(
            ErrorSubject::Snapshot(Some(meta.signature())),
            ErrorVerb::Read,
            format!(
                "snapshot file {} describes snapshot {:?}, not the {:?} being installed",
                path.display(),
                check.meta().snapshot_id,
                meta.snapshot_id
            ),
        ));
    }
    check.verify().map_err(rd)?;

    // 2. The new generation, beside the current one.
    let new = generation.checked_add(1).ok_or_else(|| {
        error(
            ErrorSubject::StateMachine,
            ErrorVerb::Write,
            "generation numbers ran out",
        )
    })?;
    delete_other_generations(db, generation)?;
    let mut reader = SnapshotReader::new(&path, copy).map_err(rd)?;
    let mut batch = WriteBatch::new();
    while let Some((k, v)) = reader.next_record().map_err(rd)? {
        batch
            .put(keys::data_key(new, &k), &v)
            .map_err(sm_db_err(ErrorVerb::Write))?;
        if batch.approximate_size() >= BATCH_BYTES {
            db.write(std::mem::take(&mut batch), SYNC)
                .map_err(sm_db_err(ErrorVerb::Write))?;
        }
    }
    db.write(std::mem::take(&mut batch), SYNC)
        .map_err(sm_db_err(ErrorVerb::Write))?;
    if stop_after == Some(InstallStep::NewDataWritten) {
        return Ok((generation, AppliedState::default()));
    }

    // 3. The switch: one synced batch.
    let applied = AppliedState {
        last_applied: meta.last_log_id,
        membership: meta.last_membership.clone(),
    };
    batch
        .put(
            keys::applied_key(new),
            encode(&applied, ErrorSubject::StateMachine)?,
        )
        .and_then(|()| batch.put(keys::SM_GENERATION, keys::encode_generation(new)))
        .map_err(sm_db_err(ErrorVerb::Write))?;
    db.write(batch, SYNC).map_err(sm_db_err(ErrorVerb::Write))?;
    if stop_after == Some(InstallStep::Switched) {
        return Ok((new, applied));
    }

    // 4. The old generation: nothing reads it any more.
    delete_other_generations(db, new)?;
    if stop_after == Some(InstallStep::OldDeleted) {
        return Ok((new, applied));
    }

    // 5. The received snapshot is the current one.
    snapshots
        .publish(temp, meta)
        .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    Ok((new, applied))
}

/// Builds snapshots of the state machine; see [`crate::snapshot`].
pub struct SnapshotBuilder {
    db: Arc<Db>,
    snapshots: Arc<SnapshotDir>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let db = self.db.clone();
        let snapshots = self.snapshots.clone();
        let (meta, file) = blocking(move || build(&db, &snapshots)).await?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.applied.last_applied, self.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let db = self.db.clone();
        let generation = self.generation;
        let mut applied = self.applied.clone();
        let (responses, applied) = blocking(move || {
            let r = apply_entries(&db, generation, &mut applied, entries)?;
            Ok((r, applied))
        })
        .await?;
        self.applied = applied;
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            db: self.db.clone(),
            snapshots: self.snapshots.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError> {
        // Dropping the path removes the file's name at once: the open
        // handle keeps its data until openraft drops it after the install,
        // so nothing is left behind whether the install succeeds or not.
        let (_, file) = self
            .snapshots
            .create_temp("receive")
            .map_err(|e| snap_err(ErrorVerb::Write, e))?;
        Ok(Box::new(tokio::fs::File::from_std(file)))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError> {
        let source = snapshot.into_std().await;
        let db = self.db.clone();
        let snapshots = self.snapshots.clone();
        let generation = self.generation;
        let meta = meta.clone();
        let (generation, applied) =
            blocking(move || install(&db, &snapshots, generation, &meta, source, None)).await?;
        self.generation = generation;
        self.applied = applied;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let snapshots = self.snapshots.clone();
        let current = blocking(move || {
            snapshots
                .current()
                .map_err(|e| snap_err(ErrorVerb::Read, e))
        })
        .await?;
        Ok(current.map(|(meta, file)| Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        }))
    }
}

/// The value of `key` in the current generation, read from one consistent
/// view.
pub(crate) fn read_value(db: &Db, key: &str) -> Result<Option<String>, StorageError> {
    let view = db.snapshot();
    let generation = current_generation(|k| view.get(k))?;
    let data_key = keys::data_key(generation, key.as_bytes());
    match view.get(&data_key).map_err(sm_db_err(ErrorVerb::Read))? {
        Some(v) => decode_value(&data_key, v).map(Some),
        None => Ok(None),
    }
}

/// Every key and value of the current generation, in key order.
pub(crate) fn read_all(db: &Db) -> Result<Vec<(String, String)>, StorageError> {
    let view = db.snapshot();
    let generation = current_generation(|k| view.get(k))?;
    let prefix = keys::data_prefix(generation);
    let mut out = Vec::new();
    for item in view.prefix(&prefix).map_err(sm_db_err(ErrorVerb::Read))? {
        let (k, v) = item.map_err(sm_db_err(ErrorVerb::Read))?;
        let key = decode_value(&k, k[prefix.len()..].to_vec())?;
        out.push((key, decode_value(&k, v)?));
    }
    Ok(out)
}
