//! Snapshot files: the state machine's database at one applied log id,
//! packed into one file openraft ships to a follower in chunks, and the
//! directory that keeps the current one.
//!
//! A snapshot file is a quietkv checkpoint pack (see
//! [`quietkv::pack_checkpoint`] and docs/format.md): a checkpoint of the
//! state machine's database (which holds the application's data, the
//! applied log id and the membership, and nothing of the raft log), every
//! table read and the file written in quietkv's `Backup` I/O class. The
//! pack's label holds the snapshot's description (openraft's
//! `SnapshotMeta`, as JSON), so the current snapshot is described without
//! reading it whole. Every name, length and checksum in it is checked when
//! it is unpacked.
//!
//! openraft streams the file from the leader's directory into a new file
//! in the follower's through [`crate::SnapshotFile`]; the directory opens
//! both in the mode [`SnapshotIo`] chose, resolved by quietio's probe of
//! the directory itself.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use quietio::PositionalFile;
use quietio::{AccessMode, ClassStats, EffectiveMode, IoClass, IoEnv, IoOptions};

use crate::types::SnapshotMeta;

/// How snapshot files are read and written while openraft streams them
/// from a leader to a follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotIo {
    /// In the `Backup` I/O class's mode, as the options request it and
    /// the probe of the snapshot directory resolves it: with `auto`,
    /// direct where the file system allows it, else dontcache, else
    /// buffered. The streamed bytes then stay out of the page cache.
    #[default]
    Backup,
    /// Through the page cache, whatever the `Backup` class says: how
    /// openraft reads and writes a plain file; for comparison.
    Buffered,
}

impl std::fmt::Display for SnapshotIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SnapshotIo::Backup => "backup",
            SnapshotIo::Buffered => "buffered",
        })
    }
}

impl std::str::FromStr for SnapshotIo {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "backup" => Ok(SnapshotIo::Backup),
            "buffered" => Ok(SnapshotIo::Buffered),
            other => Err(format!(
                "snapshot I/O {other:?}: use backup (the Backup class's mode) or buffered"
            )),
        }
    }
}

/// The name of the current snapshot in the snapshot directory.
const CURRENT: &str = "current.snap";
/// Files and directories being built or received end with this; what a
/// crash leaves of them is removed when the directory is opened.
const TEMP_SUFFIX: &str = ".tmp";
/// What quietkv's staging leaves of a checkpoint that a crash cut short.
const STAGING_SUFFIX: &str = ".quietkv-tmp";

/// A damaged or unreadable snapshot file, or one that could not be written.
#[derive(Debug)]
pub struct SnapshotFileError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub detail: String,
}

impl std::fmt::Display for SnapshotFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "snapshot file {}: {}", self.path.display(), self.detail)
    }
}

impl std::error::Error for SnapshotFileError {}

pub(crate) fn io_err(path: &Path, e: impl std::fmt::Display) -> SnapshotFileError {
    SnapshotFileError {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// The label a snapshot file is packed with: its description.
pub fn encode_label(path: &Path, meta: &SnapshotMeta) -> Result<Vec<u8>, SnapshotFileError> {
    serde_json::to_vec(meta).map_err(|e| {
        io_err(
            path,
            format!("cannot encode the snapshot's description: {e}"),
        )
    })
}

/// The description of the snapshot file at `path`, from its label.
pub fn read_meta(path: &Path) -> Result<SnapshotMeta, SnapshotFileError> {
    let label = quietkv::read_pack_label(path).map_err(|e| io_err(path, e))?;
    serde_json::from_slice(&label).map_err(|e| {
        io_err(
            path,
            format!("the pack's label is not a snapshot description: {e}"),
        )
    })
}

/// The directory that keeps the current snapshot file and the files being
/// built or received.
#[derive(Debug)]
pub struct SnapshotDir {
    path: PathBuf,
    /// The directory's probed I/O environment; snapshot files are read
    /// and written through it, counted under `Backup`.
    env: IoEnv,
    io: SnapshotIo,
    /// Held while a snapshot is published, so that comparing with the
    /// current snapshot and replacing it are one step.
    publishing: std::sync::Mutex<()>,
}

/// A temporary file or directory in the snapshot directory, removed when
/// dropped unless it was published.
#[derive(Debug)]
pub struct TempPath(Option<PathBuf>);

impl TempPath {
    /// Where the file is.
    pub fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            // Best effort: what is left is removed at the next open.
            remove_any(&p);
        }
    }
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

impl SnapshotDir {
    /// Opens (creating) `path` and removes the temporary files a crash
    /// left. Snapshot files are read and written as `io` says, the
    /// `Backup` class's mode being the one `options` request (built from
    /// the state database's options), resolved by probing `path`.
    pub fn open(
        path: &Path,
        options: IoOptions,
        io: SnapshotIo,
    ) -> Result<SnapshotDir, SnapshotFileError> {
        fs::create_dir_all(path).map_err(|e| io_err(path, e))?;
        for entry in fs::read_dir(path).map_err(|e| io_err(path, e))? {
            let entry = entry.map_err(|e| io_err(path, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(TEMP_SUFFIX) || name.ends_with(STAGING_SUFFIX) {
                let path = entry.path();
                let removed = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                removed.map_err(|e| io_err(&path, e))?;
            }
        }
        let env = IoEnv::open(path, options).map_err(|e| io_err(path, e))?;
        Ok(SnapshotDir {
            path: path.to_path_buf(),
            env,
            io,
            publishing: std::sync::Mutex::new(()),
        })
    }

    /// The mode snapshot files are streamed in here.
    pub fn transfer_mode(&self) -> EffectiveMode {
        match self.io {
            SnapshotIo::Backup => self.env.mode(IoClass::Backup),
            SnapshotIo::Buffered => EffectiveMode::Buffered,
        }
    }

    /// What streaming snapshot files from and into this directory read
    /// and wrote so far (building and unpacking them are counted by
    /// quietkv, not here).
    pub fn transfer_stats(&self) -> ClassStats {
        self.env.stats().class(IoClass::Backup)
    }

    /// Opens the snapshot file at `path` for reading in the transfer mode.
    pub fn open_file(&self, path: &Path) -> Result<PositionalFile, SnapshotFileError> {
        match self.io {
            SnapshotIo::Backup => self.env.open_positional(path, IoClass::Backup),
            SnapshotIo::Buffered => {
                self.env
                    .open_positional_with_mode(path, IoClass::Backup, AccessMode::Buffered)
            }
        }
        .map_err(|e| io_err(path, e))
    }

    /// The current snapshot's path (which may not exist).
    pub fn current_path(&self) -> PathBuf {
        self.path.join(CURRENT)
    }

    /// A new temporary name for a file or directory `what` is for, with
    /// nothing there yet; whatever is created there is removed when the
    /// returned [`TempPath`] is dropped, unless it was published.
    pub fn temp_path(&self, what: &str) -> TempPath {
        TempPath(Some(
            self.path.join(format!("{what}-{}{TEMP_SUFFIX}", unique())),
        ))
    }

    /// A new temporary file, open for reading and writing, named after
    /// `what` it is for. It is removed when the returned [`TempPath`] is
    /// dropped, unless [`SnapshotDir::publish`] made it the current
    /// snapshot.
    pub fn create_temp(&self, what: &str) -> Result<(TempPath, PositionalFile), SnapshotFileError> {
        let path = self.path.join(format!("{what}-{}{TEMP_SUFFIX}", unique()));
        let file = match self.io {
            SnapshotIo::Backup => self.env.create_positional(&path, IoClass::Backup),
            SnapshotIo::Buffered => {
                self.env
                    .create_positional_with_mode(&path, IoClass::Backup, AccessMode::Buffered)
            }
        }
        .map_err(|e| io_err(&path, e))?;
        Ok((TempPath(Some(path)), file))
    }

    /// Makes the complete, synced file at `temp`, holding the snapshot
    /// `meta` describes, the current snapshot: renamed over the old one,
    /// and the directory synced so the rename survives a power cut. A crash
    /// leaves the old snapshot or the new. Returns `false`, and removes
    /// `temp`, if the current snapshot is newer (a build that raced with
    /// an install): the current snapshot never goes back.
    pub fn publish(
        &self,
        mut temp: TempPath,
        meta: &SnapshotMeta,
    ) -> Result<bool, SnapshotFileError> {
        let _serial = self.publishing.lock().unwrap_or_else(|p| p.into_inner());
        // A damaged current snapshot is replaced whatever it says.
        if let Ok(Some((current, _))) = self.current_unserialized() {
            if current.last_log_id > meta.last_log_id {
                return Ok(false);
            }
        }
        let path = temp.0.take().expect("a temporary path is published once");
        let current = self.current_path();
        if let Err(e) = fs::rename(&path, &current) {
            temp.0 = Some(path.clone());
            return Err(io_err(&path, e));
        }
        File::open(&self.path)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err(&self.path, e))?;
        Ok(true)
    }

    /// The current snapshot's description and an open handle, if there is
    /// one.
    pub fn current(&self) -> Result<Option<(SnapshotMeta, PositionalFile)>, SnapshotFileError> {
        // Not while one is published: the handle and the description read
        // by name must be of the same file.
        let _serial = self.publishing.lock().unwrap_or_else(|p| p.into_inner());
        self.current_unserialized()
    }

    fn current_unserialized(
        &self,
    ) -> Result<Option<(SnapshotMeta, PositionalFile)>, SnapshotFileError> {
        let path = self.current_path();
        match fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, e)),
        }
        let file = self.open_file(&path)?;
        let meta = read_meta(&path)?;
        Ok(Some((meta, file)))
    }
}

/// Removes the file or directory at `path`, if there is one.
fn remove_any(path: &Path) {
    let _ = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(_) => Ok(()),
    };
}

/// A name no other snapshot file of this process or an earlier one has.
pub fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{nanos:x}-{}-{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: &str, index: Option<u64>) -> SnapshotMeta {
        SnapshotMeta {
            snapshot_id: id.into(),
            last_log_id: index
                .map(|i| openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), i)),
            ..Default::default()
        }
    }

    /// A snapshot file of a small database, labelled with `meta`.
    fn write_sample(dir: &SnapshotDir, meta: &SnapshotMeta) -> TempPath {
        let scratch = tempfile::tempdir().unwrap();
        let db = quietkv::Db::open(scratch.path().join("db"), quietkv::Options::default()).unwrap();
        db.put("a", "1").unwrap();
        db.checkpoint(scratch.path().join("ck")).unwrap();
        let temp = dir.temp_path("test");
        let label = encode_label(temp.path(), meta).unwrap();
        quietkv::pack_checkpoint_with(scratch.path().join("ck"), temp.path(), &label).unwrap();
        temp
    }

    #[test]
    fn the_description_is_read_from_the_label_and_damage_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(tmp.path(), IoOptions::default(), SnapshotIo::Backup).unwrap();
        let temp = write_sample(&dir, &meta("s1", Some(3)));
        assert_eq!(read_meta(temp.path()).unwrap(), meta("s1", Some(3)));
        let mut bytes = fs::read(temp.path()).unwrap();
        bytes[20] ^= 1;
        let bad = tmp.path().join("bad");
        fs::write(&bad, &bytes).unwrap();
        let e = read_meta(&bad).unwrap_err();
        assert!(e.to_string().contains("bad"), "{e}");
    }

    #[test]
    fn opening_the_directory_removes_leftover_temporary_files_and_directories_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(tmp.path(), IoOptions::default(), SnapshotIo::Backup).unwrap();
        let temp = write_sample(&dir, &meta("s1", None));
        assert!(dir.publish(temp, &meta("s1", None)).unwrap());
        let (left, _) = dir.create_temp("receive").unwrap();
        let left_path = left.path().to_path_buf();
        std::mem::forget(left); // as a crash would leave it
        let scratch = tmp.path().join(".build-x.tmp.quietkv-tmp");
        fs::create_dir(&scratch).unwrap();
        fs::write(scratch.join("000001.sst"), b"half").unwrap();
        let dir = SnapshotDir::open(tmp.path(), IoOptions::default(), SnapshotIo::Backup).unwrap();
        assert!(!left_path.exists());
        assert!(!scratch.exists());
        assert_eq!(dir.current().unwrap().unwrap().0.snapshot_id, "s1");
    }

    #[test]
    fn the_current_snapshot_never_goes_back_and_unpublished_files_go_away() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(tmp.path(), IoOptions::default(), SnapshotIo::Backup).unwrap();
        let newer = write_sample(&dir, &meta("newer", Some(10)));
        assert!(dir.publish(newer, &meta("newer", Some(10))).unwrap());
        let older = write_sample(&dir, &meta("older", Some(5)));
        let older_path = older.path().to_path_buf();
        assert!(!dir.publish(older, &meta("older", Some(5))).unwrap());
        assert!(!older_path.exists());
        assert_eq!(dir.current().unwrap().unwrap().0.snapshot_id, "newer");
        let same = write_sample(&dir, &meta("same", Some(10)));
        assert!(dir.publish(same, &meta("same", Some(10))).unwrap());
        assert_eq!(dir.current().unwrap().unwrap().0.snapshot_id, "same");
        let files = fs::read_dir(tmp.path()).unwrap().count();
        assert_eq!(files, 1, "only current.snap is left");
    }
}
