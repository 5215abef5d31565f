//! The replicated key-value application: its data, its applied log id and
//! membership, in the state machine's own quietkv database (see
//! [`crate::generations`]), and the openraft state machine on top.
//!
//! Each `apply` call writes its data changes together with the applied
//! log id and membership they reach in one synced batch, so after a crash
//! the data and the applied index always agree. Snapshots are built by
//! [`crate::build`] and installed by [`crate::install`].

use std::collections::HashMap;
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder};
use quietio::PositionalFile;
use quietkv::{Db, WriteBatch, WriteOptions};

use crate::build::build;
use crate::codec::{blocking, db_error, encode, error, show_key};
use crate::install::{install, Source};
use crate::keys;
use crate::shared::{read_applied, sm_db_err, snap_err, AppliedState, Shared};
use crate::snapshot::TempPath;
use crate::snapshot_file::SnapshotFile;
use crate::types::{
    Entry, LogId, Request, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

const SYNC: WriteOptions = WriteOptions { sync: true };

/// An apply batch is cut at about this size, to stay far below quietkv's
/// limit on one batch.
const BATCH_BYTES: usize = 4 << 20;

/// A snapshot file being received, kept by name so that installing it
/// needs no copy: it is unpacked from where openraft wrote it.
struct Receiving {
    temp: TempPath,
    /// Device and inode, to recognise the handle openraft gives back.
    id: (u64, u64),
}

/// The state machine. There is one per [`Store`](crate::Store); openraft
/// owns it once the node starts.
pub struct StateMachine {
    shared: Arc<Shared>,
    applied: AppliedState,
    receiving: Vec<Receiving>,
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

fn file_id(file: &PositionalFile) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    file.file().metadata().ok().map(|m| (m.dev(), m.ino()))
}

impl StateMachine {
    /// Loads the state machine of `shared`.
    pub(crate) fn load(shared: Arc<Shared>) -> Result<Self, StorageError> {
        let applied = read_applied(&shared.state())?;
        Ok(StateMachine {
            shared,
            applied,
            receiving: Vec::new(),
        })
    }

    /// The last applied log id and membership.
    pub fn applied(&self) -> &AppliedState {
        &self.applied
    }
}

/// Applies `entries` on top of `applied` in the state database `db`, one synced batch
/// per [`BATCH_BYTES`] of changes, each with the applied state it reaches.
pub(crate) fn apply_entries(
    db: &Db,
    applied: &mut AppliedState,
    entries: Vec<Entry>,
) -> Result<Vec<Response>, StorageError> {
    let mut responses = Vec::with_capacity(entries.len());
    // Values this call changed, so a later entry of the same call sees
    // them before they are written.
    let mut changed: HashMap<Vec<u8>, Option<String>> = HashMap::new();
    let mut batch = WriteBatch::new();
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
                let data_key = keys::data_key(key.as_bytes());
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
                .put(keys::APPLIED, encode(&*applied, ErrorSubject::Apply(id))?)
                .map_err(verb_err)?;
            db.write(std::mem::take(&mut batch), SYNC)
                .map_err(verb_err)?;
            changed.clear();
        }
    }
    Ok(responses)
}

/// Builds snapshots of the state machine; see [`crate::build`].
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let shared = self.shared.clone();
        let (meta, file, report) = blocking(move || build(&shared)).await?;
        log::debug!(
            "quietkv-raft: built snapshot {}: checkpoint linked {} tables, packed {} files ({} bytes) into {} bytes",
            meta.snapshot_id,
            report.checkpoint.tables_linked,
            report.pack.files,
            report.pack.file_bytes,
            report.pack.bytes
        );
        Ok(Snapshot {
            meta,
            snapshot: Box::new(SnapshotFile::new(file)),
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
        let shared = self.shared.clone();
        let mut applied = self.applied.clone();
        let (responses, applied) = blocking(move || {
            let _gate = shared.gate();
            let r = apply_entries(&shared.state(), &mut applied, entries)?;
            Ok((r, applied))
        })
        .await?;
        self.applied = applied;
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            shared: self.shared.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFile>, StorageError> {
        // openraft receives one snapshot at a time: one begun earlier and
        // never installed was abandoned, and its file goes now.
        self.receiving.clear();
        let (temp, file) = self
            .shared
            .snapshots
            .create_temp("receive")
            .map_err(|e| snap_err(ErrorVerb::Write, e))?;
        let id = file_id(&file).ok_or_else(|| {
            error(
                ErrorSubject::Snapshot(None),
                ErrorVerb::Write,
                format!("cannot read the metadata of {}", temp.path().display()),
            )
        })?;
        self.receiving.push(Receiving { temp, id });
        Ok(Box::new(SnapshotFile::new(file)))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError> {
        // The error of the last write openraft made, if it failed.
        let file = snapshot.into_file().await.map_err(|e| {
            error(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Write,
                e,
            )
        })?;
        let id = file_id(&file);
        let source = match self.receiving.iter().position(|r| Some(r.id) == id) {
            Some(i) => Source::Received(self.receiving.swap_remove(i).temp, file),
            None => Source::Handle(file),
        };
        let shared = self.shared.clone();
        let meta = meta.clone();
        let id = meta.snapshot_id.clone();
        let (applied, report) = blocking(move || install(&shared, &meta, source, None)).await?;
        log::debug!(
            "quietkv-raft: installed snapshot {id}: unpacked {} files ({} bytes), {} bytes copied first",
            report.unpack.files,
            report.unpack.file_bytes,
            report.copied
        );
        self.applied = applied;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let shared = self.shared.clone();
        let current = blocking(move || {
            shared
                .snapshots
                .current()
                .map_err(|e| snap_err(ErrorVerb::Read, e))
        })
        .await?;
        Ok(current.map(|(meta, file)| Snapshot {
            meta,
            snapshot: Box::new(SnapshotFile::new(file)),
        }))
    }
}

/// The value of `key` in the state database `db`.
pub(crate) fn read_value(db: &Db, key: &str) -> Result<Option<String>, StorageError> {
    let data_key = keys::data_key(key.as_bytes());
    match db.get(&data_key).map_err(sm_db_err(ErrorVerb::Read))? {
        Some(v) => decode_value(&data_key, v).map(Some),
        None => Ok(None),
    }
}

/// Every key and value of the state database `db`, in key order, from one
/// consistent view.
pub(crate) fn read_all(db: &Db) -> Result<Vec<(String, String)>, StorageError> {
    let view = db.snapshot();
    let mut out = Vec::new();
    for item in view
        .prefix(keys::DATA_PREFIX)
        .map_err(sm_db_err(ErrorVerb::Read))?
    {
        let (k, v) = item.map_err(sm_db_err(ErrorVerb::Read))?;
        let key = decode_value(&k, k[keys::DATA_PREFIX.len()..].to_vec())?;
        out.push((key, decode_value(&k, v)?));
    }
    Ok(out)
}
