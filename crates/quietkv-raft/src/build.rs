//! Building a snapshot: a checkpoint of the state machine's database,
//! packed into one file.
//!
//! 1. Under the apply gate, the applied state is read and a checkpoint of
//!    the state database taken into a scratch directory beside the
//!    snapshot files: tables are hard-linked (no bytes move), only the
//!    data still in memory is written, in the `Backup` I/O class. The
//!    gate keeps `apply` out for that moment only, so the description
//!    (applied log id, membership) is exactly what the checkpoint holds.
//! 2. The checkpoint is packed into the snapshot file, reading every table
//!    and writing the file in the `Backup` class: building a snapshot does
//!    not read the database through the block cache or the page cache its
//!    readers use. The scratch checkpoint is deleted.
//! 3. The file becomes the current snapshot, unless an install meanwhile
//!    made a newer one current; openraft sends it from an open handle, a
//!    [`crate::SnapshotFile`] reading in the `Backup` class too.

use openraft::ErrorVerb;
use quietio::PositionalFile;
use quietkv::{CheckpointInfo, PackInfo};

use crate::shared::{read_applied, sm_db_err, snap_err, Shared};
use crate::snapshot::{encode_label, io_err, unique};
use crate::types::{SnapshotMeta, StorageError};

/// What building a snapshot did, for tests and statistics.
#[derive(Debug, Clone)]
pub(crate) struct BuildReport {
    /// The checkpoint of the state database.
    pub checkpoint: CheckpointInfo,
    /// Packing it: files, bytes and the I/O per class.
    pub pack: PackInfo,
}

/// Builds a snapshot of the state as of now and makes it the current
/// snapshot; returns its description, an open handle at its start and
/// what it cost.
pub(crate) fn build(
    shared: &Shared,
) -> Result<(SnapshotMeta, PositionalFile, BuildReport), StorageError> {
    let snapshots = &shared.snapshots;
    let scratch = snapshots.temp_path("checkpoint");
    let (applied, checkpoint) = {
        let _gate = shared.gate();
        let state = shared.state();
        let applied = read_applied(&state)?;
        let checkpoint = state
            .checkpoint(scratch.path())
            .map_err(sm_db_err(ErrorVerb::Read))?;
        (applied, checkpoint)
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
    let out = snapshots.temp_path("build");
    let label = encode_label(out.path(), &meta).map_err(|e| snap_err(ErrorVerb::Write, e))?;
    let pack = quietkv::pack_checkpoint_with(scratch.path(), out.path(), &label)
        .map_err(|e| snap_err(ErrorVerb::Write, io_err(out.path(), e)))?;
    drop(scratch);
    // Opened in the mode openraft will stream it in.
    let file = snapshots
        .open_file(out.path())
        .map_err(|e| snap_err(ErrorVerb::Read, e))?;
    // Published unless an install meanwhile made a newer one current; the
    // open handle reads it either way.
    snapshots
        .publish(out, &meta)
        .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    Ok((meta, file, BuildReport { checkpoint, pack }))
}
