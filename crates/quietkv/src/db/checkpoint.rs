//! The database's side of checkpoints and backups: taking one consistent
//! state under the state lock (see [`crate::checkpoint`] for the copying).

use std::path::Path;
use std::sync::atomic::Ordering;

use super::state::Inner;
use super::Db;
use crate::checkpoint::backup::{BackupInfo, BackupOptions};
use crate::checkpoint::{Capture, CapturedMemtable, CheckpointInfo, CheckpointOptions};
use crate::error::Result;
use crate::wal::WalSet;
use quietio::{ClassModes, IoClass};

impl Db {
    /// Writes a checkpoint of the database into `dir`: a complete database
    /// directory, openable with [`Db::open`], holding every write
    /// acknowledged before the call and none that started after it
    /// (exactly the writes up to [`CheckpointInfo::sequence`]). Writes and
    /// background work go on meanwhile.
    ///
    /// Tables are hard-linked where the file system allows it and copied
    /// otherwise; the data still in memtables is written as new tables
    /// (the WAL is not copied and the database is not flushed), and a new
    /// manifest describes the copy. Copies read and write in the
    /// [`Backup`](crate::IoClass::Backup) I/O class. The checkpoint is
    /// built in a hidden sibling of `dir` and renamed to `dir` only when
    /// complete and synced: after a crash `dir` is either complete or
    /// absent, and the next checkpoint to `dir` removes the leftover.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `dir` exists and is not an empty directory, or
    /// has no last path component; `Busy` while another checkpoint or
    /// restore to `dir` is being written; `Corruption` (naming the table) if a
    /// table's length differs from what the manifest says; `Io` (naming
    /// the file) for an I/O error or a full disk. On an error nothing is
    /// left at `dir` and the database is unchanged.
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<CheckpointInfo> {
        self.checkpoint_with(dir, CheckpointOptions::default())
    }

    /// [`Db::checkpoint`] with options (copy tables instead of linking
    /// them).
    ///
    /// # Errors
    ///
    /// As [`Db::checkpoint`].
    pub fn checkpoint_with(
        &self,
        dir: impl AsRef<Path>,
        opts: CheckpointOptions,
    ) -> Result<CheckpointInfo> {
        let capture = capture(&self.inner);
        crate::checkpoint::write_checkpoint(&capture, dir.as_ref(), opts)
    }

    /// Adds a backup point to `backup_dir` (created if missing), which may
    /// be on another file system: only the tables no earlier point stored
    /// are copied, plus the data still in memtables and a manifest. Each
    /// point holds the writes up to its [`BackupInfo::sequence`], like a
    /// checkpoint; every point is kept. Restore with
    /// [`restore`](crate::restore); check with
    /// [`verify_backup`](crate::verify_backup).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `backup_dir` holds backups of another
    /// database; `Busy` if another backup is writing to it; `Corruption`
    /// if a table's length differs from what the manifest says or an
    /// earlier point's metadata is damaged; `Io` for an I/O error. On an
    /// error the new point is removed; earlier points stay.
    pub fn backup(&self, backup_dir: impl AsRef<Path>) -> Result<BackupInfo> {
        self.backup_with(backup_dir, BackupOptions::default())
    }

    /// [`Db::backup`] with options (how many points to keep).
    ///
    /// # Errors
    ///
    /// As [`Db::backup`].
    pub fn backup_with(
        &self,
        backup_dir: impl AsRef<Path>,
        opts: BackupOptions,
    ) -> Result<BackupInfo> {
        let capture = capture(&self.inner);
        crate::checkpoint::backup::backup(&capture, backup_dir.as_ref(), opts)
    }
}

/// Takes the state a copy holds. Under the state lock no memtable is
/// frozen and no flush or compaction installed, so the sequence number and
/// the reader view read here agree: every write up to the sequence number
/// is in the view's memtables or tables, and the tables hold nothing newer
/// (a memtable is frozen only between write groups).
fn capture(inner: &Inner) -> Capture {
    let mut st = inner.state.lock();
    let seq = inner.visible_seq.load(Ordering::Acquire);
    let views: Vec<_> = st
        .trees
        .iter()
        .map(|t| {
            let sv = t.handle.super_version.read().clone();
            (t.id(), sv, t.handle.table_options)
        })
        .collect();
    // Oldest first, so their tables are numbered in the order the data
    // was written, as flushes would number them.
    let mut memtables = Vec::new();
    for (id, sv, table_options) in &views {
        for m in sv.imms.iter().rev().chain(std::iter::once(&sv.mem)) {
            if !m.is_empty() {
                memtables.push(CapturedMemtable {
                    keyspace: *id,
                    mem: m.clone(),
                    number: st.new_file_number(),
                    table_options: *table_options,
                });
            }
        }
    }
    let manifest_number = st.new_file_number();
    let mut snapshot = super::manifest::snapshot_edit(
        &views[0].1.version,
        super::manifest::keyspace_parts(&st.trees),
        st.next_keyspace_id,
        // The copy needs no WAL: the memtables' data becomes tables.
        &WalSet::default(),
        st.next_file,
        seq,
        inner.db_id,
    );
    snapshot.manifest_number = Some(manifest_number);
    snapshot.wals_have_identity = true;
    drop(st);
    Capture {
        source: inner.env.clone(),
        io_options: copy_io_options(&inner.opts),
        db_id: inner.db_id,
        seq,
        // Held by the capture: a version a reader holds keeps its tables
        // (see `Inner::delete_obsolete_files`).
        versions: views.iter().map(|(_, sv, _)| sv.version.clone()).collect(),
        memtables,
        manifest_number,
        snapshot,
    }
}

/// The I/O options of the environments a copy is written through: the
/// source's, but with only the `Backup` class's requested mode. The copy
/// writes nothing in the other classes, and a mode they were given
/// explicitly may not work on the copy's file system (direct I/O on a
/// tmpfs), which must not fail a copy that never uses it.
fn copy_io_options(opts: &crate::options::Options) -> quietio::IoOptions {
    let mut io = opts.io_options();
    let backup = io.modes.get(IoClass::Backup);
    io.modes = ClassModes::default().with(IoClass::Backup, backup);
    io
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietio::AccessMode;

    #[test]
    fn a_copy_keeps_only_the_backup_classs_mode() {
        let opts = crate::options::Options::default()
            .io_mode(IoClass::CompactionWrite, AccessMode::Direct)
            .io_mode(IoClass::Backup, AccessMode::Fadvise);
        let io = copy_io_options(&opts);
        assert_eq!(io.modes.get(IoClass::Backup), AccessMode::Fadvise);
        assert_eq!(io.modes.get(IoClass::CompactionWrite), AccessMode::Auto);
        assert_eq!(io.io_depth, opts.io_options().io_depth);
    }
}
