//! Installing a received snapshot in place of the state machine's data,
//! all at once: after a crash at any point the node has the old state or
//! the new one, never a mix.
//!
//! 1. The received file is synced and whatever of it is in the page cache
//!    dropped (openraft wrote it through a [`crate::SnapshotFile`], in the
//!    `Backup` class's mode, which may be buffered). Its description (its
//!    pack label) must be the one openraft is installing.
//! 2. It is unpacked into the next generation's directory: every name,
//!    length and checksum checked, every byte read and written in the
//!    `Backup` I/O class, the directory staged and renamed into place
//!    whole (see [`quietkv::unpack_checkpoint`]). Its applied state must
//!    match the description.
//! 3. The switch: the generation pointer is replaced with one rename (see
//!    [`crate::generations`]).
//! 4. The new database is used from now on; the old generation's
//!    directory is deleted once nothing reads it.
//! 5. The received file becomes the current snapshot.
//!
//! A crash before step 3 leaves the old state (opening deletes the new
//! generation, or the staging directory of an unpack cut short); after it
//! the new state (opening deletes the old generation).

use openraft::{ErrorSubject, ErrorVerb};
use quietio::PositionalFile;
use quietkv::UnpackInfo;

use crate::codec::{db_error, error};
use crate::generations::{dir_of, write_pointer, StateDb};
use crate::shared::{read_applied, snap_err, AppliedState, Shared};
use crate::snapshot::{io_err, read_meta, TempPath};
use crate::types::{SnapshotMeta, StorageError};

/// Where [`install`] stops early in tests, to leave what a crash there
/// would leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InstallStep {
    /// The new generation is unpacked, nothing points at it.
    Unpacked,
    /// The pointer names the new generation.
    Switched,
    /// The old generation is deleted.
    OldDeleted,
}

/// The snapshot file to install.
pub(crate) enum Source {
    /// A file this state machine handed openraft to receive into: unpacked
    /// where it is, then kept as the current snapshot.
    Received(TempPath, PositionalFile),
    /// Any other open file: copied into the snapshot directory first,
    /// since unpacking reads a file by name.
    Handle(PositionalFile),
}

/// What installing a snapshot did, for tests and statistics.
#[derive(Debug, Clone)]
pub(crate) struct InstallReport {
    /// Unpacking it: files, bytes and the I/O per class.
    pub unpack: UnpackInfo,
    /// Bytes copied first because the file was not one received through
    /// `begin_receiving_snapshot`.
    pub copied: u64,
}

fn snapshot_error(meta: &SnapshotMeta, verb: ErrorVerb, detail: String) -> StorageError {
    error(ErrorSubject::Snapshot(Some(meta.signature())), verb, detail)
}

/// Bytes one step of [`copy_handle`] moves.
const COPY_PIECE: usize = 4 << 20;

/// Copies an open file into a new file of the snapshot directory, synced,
/// both in the snapshot transfer mode.
fn copy_handle(
    shared: &Shared,
    from: PositionalFile,
) -> Result<(TempPath, PositionalFile, u64), StorageError> {
    let (temp, mut to) = shared
        .snapshots
        .create_temp("install")
        .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    let mut piece = vec![0u8; COPY_PIECE];
    let mut at = 0u64;
    loop {
        let n = from
            .read_at(at, &mut piece)
            .map_err(|e| snap_err(ErrorVerb::Read, io_err(from.path(), e)))?;
        if n == 0 {
            break;
        }
        to.write_at(at, &piece[..n])
            .map_err(|e| snap_err(ErrorVerb::Write, io_err(temp.path(), e)))?;
        at += n as u64;
    }
    to.sync()
        .map_err(|e| snap_err(ErrorVerb::Write, io_err(temp.path(), e)))?;
    Ok((temp, to, at))
}

/// Replaces the state machine's state with the snapshot in `source`,
/// described by `meta`; returns the new applied state. `stop_after` ends
/// it early, as a crash there would (tests only).
pub(crate) fn install(
    shared: &Shared,
    meta: &SnapshotMeta,
    source: Source,
    stop_after: Option<InstallStep>,
) -> Result<(AppliedState, InstallReport), StorageError> {
    let (temp, mut file, copied) = match source {
        Source::Received(temp, file) => (temp, file, 0),
        Source::Handle(file) => copy_handle(shared, file)?,
    };
    let path = temp.path().to_path_buf();
    // Synced (and a direct file's padding cut) before anything depends on
    // it; cheap when openraft's shutdown of the stream did it already.
    file.sync()
        .map_err(|e| snap_err(ErrorVerb::Write, io_err(&path, e)))?;
    drop(file);
    // Unless the transfer mode kept them out, the received chunks are in
    // the page cache; they are read back below in the Backup class, which
    // may bypass it, so the cached copy would only push the node's hot data
    // out. Advisory: a failure costs cache space, not correctness.
    if let Err(e) = quietio::evict_file(&path) {
        log::debug!(
            "quietkv-raft: cannot drop the cached pages of {}: {e}",
            path.display()
        );
    }

    // 1. The file is the snapshot being installed.
    let described = read_meta(&path).map_err(|e| snap_err(ErrorVerb::Read, e))?;
    if &described != meta {
        return Err(snapshot_error(
            meta,
            ErrorVerb::Read,
            format!(
                "snapshot file {} describes snapshot {:?}, not the {:?} being installed",
                path.display(),
                described.snapshot_id,
                meta.snapshot_id
            ),
        ));
    }

    // 2. The next generation, unpacked and checked beside the current one.
    let old = shared.state();
    let new = old.generation().checked_add(1).ok_or_else(|| {
        error(
            ErrorSubject::StateMachine,
            ErrorVerb::Write,
            "generation numbers ran out",
        )
    })?;
    let target = dir_of(&shared.root, new);
    let unpack = quietkv::unpack_checkpoint(&path, &target).map_err(|e| {
        snapshot_error(
            meta,
            ErrorVerb::Read,
            format!("cannot unpack {}: {e}", path.display()),
        )
    })?;
    let opened = StateDb::open(&shared.root, new, shared.options.clone())
        .map_err(|e| db_error(ErrorSubject::StateMachine, ErrorVerb::Read, e))
        .and_then(|db| {
            let applied = read_applied(&db)?;
            Ok((db, applied))
        });
    let refused = |detail: String| {
        // Not ours to keep: the pointer never named it.
        let _ = std::fs::remove_dir_all(&target);
        snapshot_error(meta, ErrorVerb::Read, detail)
    };
    let (state, applied) = match opened {
        Ok((db, applied))
            if applied.last_applied == meta.last_log_id
                && applied.membership == meta.last_membership =>
        {
            (db, applied)
        }
        Ok((db, applied)) => {
            drop(db);
            return Err(refused(format!(
                "snapshot file {} holds a state applied up to {:?}, but describes one applied up to {:?} (or another membership)",
                path.display(),
                applied.last_applied,
                meta.last_log_id
            )));
        }
        Err(e) => {
            return Err(refused(format!(
                "the state unpacked from snapshot file {}: {e}",
                path.display()
            )))
        }
    };
    let report = InstallReport { unpack, copied };
    if stop_after == Some(InstallStep::Unpacked) {
        return Ok((applied, report));
    }

    // 3. The switch.
    write_pointer(&shared.root, new)
        .map_err(|e| error(ErrorSubject::StateMachine, ErrorVerb::Write, e))?;
    if stop_after == Some(InstallStep::Switched) {
        return Ok((applied, report));
    }

    // 4. The new state is read from now on; the old one goes when the
    //    last reader (a snapshot being built) lets go of it.
    {
        let _gate = shared.gate();
        shared.replace(state);
    }
    drop(old);
    if stop_after == Some(InstallStep::OldDeleted) {
        return Ok((applied, report));
    }

    // 5. The received snapshot is the current one.
    shared
        .snapshots
        .publish(temp, meta)
        .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    Ok((applied, report))
}
