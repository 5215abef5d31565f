//! Checkpoints, backups and restores: consistent, openable copies of a
//! database at one sequence number, taken while it goes on serving writes.
//!
//! The database side ([`crate::db`]) captures what a copy holds under its
//! state lock: the current table version (pinned, so compaction cannot
//! delete its tables while they are copied), the memtables, and the
//! newest sequence number writers were told about. Everything here works
//! from that [`Capture`] and never touches the live database's state:
//!
//! * tables are immutable: hard-linked, or copied through the `Backup`
//!   I/O class (see [`copy`]);
//! * the data not yet in a table is written from the memtables, only the
//!   entries up to the sequence number, as new level-0 tables (see
//!   [`image`]): the WAL is neither copied nor cut, and the source is not
//!   made to flush;
//! * a fresh manifest that requires no WAL describes the copy;
//! * the copy is built in a hidden staging directory and renamed into
//!   place once complete (see [`staging`]);
//! * a checkpoint directory becomes one file and back (see [`pack`]), to
//!   ship it over a byte stream.

pub(crate) mod backup;
mod copy;
mod image;
mod pack;
mod point;
pub(crate) mod staging;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use quietio::{IoEnv, IoOptions};

use crate::error::Result;
use crate::filenames::table_path;
use crate::key::SeqNo;
use crate::memtable::Memtable;
use crate::table::TableOptions;
use crate::version::{Version, VersionEdit};

pub use backup::{restore, restore_point, verify_backup, BackupInfo, BackupPoint, RestoreInfo};
pub use pack::{
    pack_checkpoint, pack_checkpoint_with, read_pack_label, unpack_checkpoint, PackInfo,
    UnpackInfo, MAX_PACK_LABEL,
};

/// How [`Db::checkpoint_with`](crate::Db::checkpoint_with) places tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointOptions {
    /// Hard-link tables where the file system allows it (the default):
    /// no bytes move and the checkpoint costs almost no space while the
    /// source keeps the tables. Off, every table is copied (through the
    /// [`Backup`](crate::IoClass::Backup) I/O class), so the checkpoint
    /// shares no inode with the source.
    pub link_tables: bool,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions { link_tables: true }
    }
}

/// What a checkpoint holds and what making it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The directory the checkpoint was written to.
    pub dir: PathBuf,
    /// Every write with a sequence number up to this one is in the
    /// checkpoint, and none after it: the writes acknowledged before the
    /// checkpoint was taken.
    pub sequence: u64,
    /// Tables hard-linked from the source.
    pub tables_linked: u64,
    /// Tables copied byte for byte (links refused or turned off).
    pub tables_copied: u64,
    /// Bytes of the copied tables.
    pub bytes_copied: u64,
    /// Tables written from the source's memtables (its writes not yet in a
    /// table).
    pub tables_written: u64,
    /// Bytes of the tables, manifest and CURRENT written anew.
    pub bytes_written: u64,
}

/// One consistent state of a live database, taken under its state lock:
/// what every kind of copy is made from.
pub(crate) struct Capture {
    /// The source database's environment: its tables are read through it,
    /// and its counters count the copy's I/O.
    pub source: Arc<IoEnv>,
    /// The source's I/O options, for the environments of the copy.
    pub io_options: IoOptions,
    pub db_id: u64,
    /// The newest sequence number readers could see when it was taken.
    pub seq: SeqNo,
    /// Every keyspace's version, the default one first: held for as long
    /// as the capture lives, so the tables they name are not deleted.
    pub versions: Vec<Arc<Version>>,
    /// The memtables, oldest first, each with a file number reserved for
    /// its table.
    pub memtables: Vec<CapturedMemtable>,
    /// The number reserved for the copy's manifest.
    pub manifest_number: u64,
    /// The copy's manifest without the memtables' tables: the version, the
    /// counters and the database id, and no WAL required.
    pub snapshot: VersionEdit,
}

/// A memtable of a capture, to be written as table `number` of its
/// keyspace.
pub(crate) struct CapturedMemtable {
    pub keyspace: u32,
    pub mem: Arc<Memtable>,
    pub number: u64,
    pub table_options: TableOptions,
}

impl CapturedMemtable {
    /// Adds its table to the copy's manifest `edit`, in its keyspace.
    pub fn add_to(&self, edit: &mut VersionEdit, meta: crate::version::FileMeta) {
        match edit.keyspaces.iter_mut().find(|k| k.id == self.keyspace) {
            Some(k) if self.keyspace != 0 => k.edit.add_file(0, meta),
            _ => edit.add_file(0, meta),
        }
    }
}

impl Capture {
    /// Every table of every keyspace.
    fn files(&self) -> Vec<Arc<crate::version::FileMeta>> {
        self.versions
            .iter()
            .flat_map(|v| (0..crate::version::NUM_LEVELS).flat_map(move |l| v.files(l).to_vec()))
            .collect()
    }

    /// The source tables the copy needs, with their sizes.
    fn tables(&self) -> Vec<(u64, u64)> {
        self.files().iter().map(|f| (f.number, f.size)).collect()
    }

    fn source_table(&self, number: u64) -> PathBuf {
        table_path(self.source.dir(), number)
    }
}

/// Writes the checkpoint of `capture` to `target` (which must not exist or
/// be empty): staged, then renamed into place.
pub(crate) fn write_checkpoint(
    capture: &Capture,
    target: &Path,
    opts: CheckpointOptions,
) -> Result<CheckpointInfo> {
    let staging = staging::Staging::begin(target)?;
    let env = IoEnv::open(&staging.dir, capture.io_options.clone())?
        .with_stats(capture.source.stats().clone());
    let dir = env.dir().to_path_buf();
    let mut info = CheckpointInfo {
        dir: target.to_path_buf(),
        sequence: capture.seq,
        tables_linked: 0,
        tables_copied: 0,
        bytes_copied: 0,
        tables_written: 0,
        bytes_written: 0,
    };
    for (number, size) in capture.tables() {
        let placed = copy::link_or_copy(
            &capture.source,
            &capture.source_table(number),
            &env,
            &table_path(&dir, number),
            size,
            opts.link_tables,
        )?;
        match placed {
            copy::Placed::Linked => info.tables_linked += 1,
            copy::Placed::Copied { bytes, .. } => {
                info.tables_copied += 1;
                info.bytes_copied += bytes;
            }
        }
    }
    let mut edit = capture.snapshot.clone();
    for m in &capture.memtables {
        let written = image::write_memtable(
            &env,
            &dir,
            &m.mem,
            capture.seq,
            m.number,
            capture.db_id,
            m.table_options,
        )?;
        if let Some(meta) = written {
            info.tables_written += 1;
            info.bytes_written += meta.size;
            m.add_to(&mut edit, meta);
        }
    }
    info.bytes_written += image::write_manifest(&env, &dir, capture.manifest_number, &edit)?;
    info.bytes_written += image::write_current(&env, &dir, capture.manifest_number)?;
    env.sync_dir()?;
    drop(env);
    staging.publish()?;
    Ok(info)
}
