//! One writer process at a time; readers (`check`, read-only opens) beside
//! each other but not beside a writer.
//!
//! Two `flock` locks hold a database:
//!
//! * on the **directory itself**, which no file operation inside it can
//!   replace: deleting or replacing the LOCK file (an operator cleaning up
//!   during an incident) cannot let a second writer in;
//! * on the **LOCK file**, which is what other tools (and versions of
//!   quietkv before the directory lock) look for.
//!
//! A writer also re-checks, before every manifest write and WAL switch,
//! that the file at the LOCK path is still the one it locked
//! ([`DirLock::verify`]). If the LOCK file was removed or replaced, it
//! takes the file now at the path (creating it if needed); if another
//! process holds that one, the database stops taking writes with Busy
//! rather than share the directory.
//!
//! Where `flock` cannot lock a directory (NFS emulates `flock` with POSIX
//! record locks, which refuse a directory opened for reading), the LOCK
//! file alone holds the database, as it did before; the re-check then is
//! what notices a removed LOCK file. quietkv is not meant to be shared
//! between machines over NFS: locks there are only as good as the server's
//! lock manager.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use quietio::sys::{try_flock, LockKind};

use crate::error::{Error, ErrorKind, Result};
use crate::filenames::LOCK;

/// The databases this process holds, by the directory's (device, inode)
/// and how: flock cannot tell this process from another (its locks belong
/// to open file descriptions), so a second open here would read as "in use
/// by another process" without this list.
static HELD_HERE: std::sync::Mutex<Vec<((u64, u64), LockKind)>> = std::sync::Mutex::new(Vec::new());

fn held_here() -> std::sync::MutexGuard<'static, Vec<((u64, u64), LockKind)>> {
    // A panic elsewhere while holding the list leaves it consistent (every
    // change is one push or one remove).
    HELD_HERE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Busy if this process already holds `dir` in a way `kind` conflicts
/// with (anything, for a writer; a writer, for a reader).
fn check_not_held_here(
    held: &[((u64, u64), LockKind)],
    id: (u64, u64),
    kind: LockKind,
    dir: &Path,
) -> Result<()> {
    let conflict = held
        .iter()
        .find(|(h, k)| *h == id && (kind == LockKind::Exclusive || *k == LockKind::Exclusive));
    match conflict {
        None => Ok(()),
        Some((_, LockKind::Exclusive)) => Err(Error::new(
            ErrorKind::Busy,
            "the database is already open for writing in this process: share that handle (a Db is Send and Sync) instead of opening it again",
        )
        .with_file(dir)),
        Some(_) => Err(Error::new(
            ErrorKind::Busy,
            "the database is open read-only in this process (a read-only handle or a check): close it before opening the database for writing",
        )
        .with_file(dir)),
    }
}

fn dir_identity(dir: &Path) -> Result<(u64, u64)> {
    std::fs::metadata(dir)
        .map(|m| identity(&m))
        .map_err(|e| Error::io(e, "cannot read the database directory").with_file(dir))
}

/// A held lock; released when dropped (the files are closed).
#[derive(Debug)]
pub(crate) struct DirLock {
    /// The LOCK file this process holds (`None`: a reader of a directory
    /// without one).
    file: Mutex<Option<File>>,
    /// The directory, locked too where the file system allows it.
    _dir: Option<File>,
    path: PathBuf,
    kind: LockKind,
    /// The directory's entry in [`HELD_HERE`].
    id: (u64, u64),
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let mut held = held_here();
        if let Some(i) = held.iter().position(|e| *e == (self.id, self.kind)) {
            held.swap_remove(i);
        }
    }
}

/// Takes the lock exclusively, creating the LOCK file if needed. Busy if
/// any other process holds it.
pub(crate) fn lock_exclusive(dir: &Path) -> Result<DirLock> {
    lock_exclusive_with(dir, |path| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    })
}

/// [`lock_exclusive`] of the environment's directory, the LOCK file opened
/// through the environment (so a test's fault layer sees it).
pub(crate) fn lock_exclusive_in(env: &quietio::IoEnv) -> Result<DirLock> {
    lock_exclusive_with(env.dir(), |path| env.open_lock_file(path))
}

fn lock_exclusive_with(
    dir: &Path,
    open: impl FnOnce(&Path) -> std::io::Result<File>,
) -> Result<DirLock> {
    let id = dir_identity(dir)?;
    let mut held = held_here();
    check_not_held_here(&held, id, LockKind::Exclusive, dir)?;
    let dir_lock = lock_dir(dir, LockKind::Exclusive)?;
    let path = dir.join(LOCK);
    let f = open(&path).map_err(|e| Error::io(e, "cannot open the lock file").with_file(&path))?;
    take(&f, LockKind::Exclusive, dir, &path)?;
    held.push((id, LockKind::Exclusive));
    Ok(DirLock {
        file: Mutex::new(Some(f)),
        _dir: dir_lock,
        path,
        kind: LockKind::Exclusive,
        id,
    })
}

/// Takes the lock shared, without creating or writing anything (the LOCK
/// file is locked only if there is one). Busy if a writer holds it.
pub(crate) fn lock_shared(dir: &Path) -> Result<DirLock> {
    let id = dir_identity(dir)?;
    let mut held = held_here();
    check_not_held_here(&held, id, LockKind::Shared, dir)?;
    let dir_lock = lock_dir(dir, LockKind::Shared)?;
    let path = dir.join(LOCK);
    let file = match File::open(&path) {
        Ok(f) => {
            take(&f, LockKind::Shared, dir, &path)?;
            Some(f)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(e, "cannot open the lock file").with_file(&path)),
    };
    held.push((id, LockKind::Shared));
    Ok(DirLock {
        file: Mutex::new(file),
        _dir: dir_lock,
        path,
        kind: LockKind::Shared,
        id,
    })
}

/// Locks the directory itself; `None` where the file system cannot lock a
/// directory (the LOCK file then holds the database alone).
fn lock_dir(dir: &Path, kind: LockKind) -> Result<Option<File>> {
    let f = match File::open(dir) {
        Ok(f) => f,
        Err(e) => {
            return Err(
                Error::io(e, "cannot open the database directory to lock it").with_file(dir),
            )
        }
    };
    match try_flock(f.as_raw_fd(), kind) {
        Ok(true) => Ok(Some(f)),
        Ok(false) => Err(busy(dir)),
        Err(e) => {
            log::info!(
                "quietkv: {}: the file system cannot lock a directory ({e}); the LOCK file alone holds the database",
                dir.display()
            );
            Ok(None)
        }
    }
}

fn busy(dir: &Path) -> Error {
    Error::new(
        ErrorKind::Busy,
        "the database is in use by another process (its lock is held)",
    )
    .with_file(dir)
}

fn take(f: &File, kind: LockKind, dir: &Path, path: &Path) -> Result<()> {
    match try_flock(f.as_raw_fd(), kind) {
        Ok(true) => Ok(()),
        Ok(false) => Err(busy(dir)),
        Err(e) => Err(Error::io(e, "cannot lock the database").with_file(path)),
    }
}

/// (device, inode) of an open file or a path.
fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

impl DirLock {
    /// Checks that the file at the LOCK path is still the one this process
    /// locked. If it was removed or replaced, the file now at the path is
    /// created (if needed) and locked instead, with a warning; Busy if
    /// another process holds it, which the caller must treat as the end
    /// of its writes. Only for an exclusive lock; a shared one has nothing
    /// to defend.
    pub(crate) fn verify(&self) -> Result<()> {
        if self.kind != LockKind::Exclusive {
            return Ok(());
        }
        let mut held = self.file.lock();
        let ours = held
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| identity(&m));
        let at_path = match std::fs::metadata(&self.path) {
            Ok(m) => Some(identity(&m)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(e, "cannot check the lock file").with_file(&self.path)),
        };
        if ours.is_some() && ours == at_path {
            return Ok(());
        }
        let what = if at_path.is_none() {
            "removed"
        } else {
            "replaced"
        };
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .map_err(|e| Error::io(e, "cannot open the lock file again").with_file(&self.path))?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        match try_flock(f.as_raw_fd(), LockKind::Exclusive) {
            Ok(true) => {
                log::warn!(
                    "quietkv: {}: the LOCK file was {what} while the database was open; it is locked again",
                    self.path.display()
                );
                *held = Some(f);
                Ok(())
            }
            Ok(false) => Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "the LOCK file was {what} while the database was open, and another process now holds the one at its path: writes stop, so that two processes never write one database"
                ),
            )
            .with_file(&self.path)),
            Err(e) => Err(Error::io(e, "cannot lock the database again").with_file(dir)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_exclude_everyone_readers_share() {
        let d = tempfile::tempdir().unwrap();
        let r = lock_shared(d.path()).unwrap();
        assert!(
            !d.path().join(LOCK).exists(),
            "a shared lock creates nothing"
        );
        drop(r);
        let w = lock_exclusive(d.path()).unwrap();
        // flock locks belong to open file descriptions, so a second open
        // conflicts like another process would...
        assert_eq!(
            lock_dir(d.path(), LockKind::Exclusive).unwrap_err().kind(),
            ErrorKind::Busy
        );
        let again = File::open(d.path().join(LOCK)).unwrap();
        assert!(!try_flock(again.as_raw_fd(), LockKind::Shared).unwrap());
        // ... and this process's own second open says so.
        let e = lock_exclusive(d.path()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        assert!(
            e.to_string()
                .contains("already open for writing in this process"),
            "{e}"
        );
        assert_eq!(lock_shared(d.path()).unwrap_err().kind(), ErrorKind::Busy);
        drop(w);
        let r1 = lock_shared(d.path()).unwrap();
        let r2 = lock_shared(d.path()).unwrap();
        let e = lock_exclusive(d.path()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        assert!(
            e.to_string().contains("open read-only in this process"),
            "{e}"
        );
        assert_eq!(
            lock_dir(d.path(), LockKind::Exclusive).unwrap_err().kind(),
            ErrorKind::Busy
        );
        drop(r1);
        drop(r2);
        lock_exclusive(d.path()).unwrap();
    }

    #[test]
    fn a_removed_lock_file_lets_no_second_writer_in() {
        let d = tempfile::tempdir().unwrap();
        let w = lock_exclusive(d.path()).unwrap();
        std::fs::remove_file(d.path().join(LOCK)).unwrap();
        // The directory lock still holds, for another process too (a new
        // open file description, as another process would make).
        assert_eq!(
            lock_dir(d.path(), LockKind::Exclusive).unwrap_err().kind(),
            ErrorKind::Busy
        );
        assert_eq!(
            lock_dir(d.path(), LockKind::Shared).unwrap_err().kind(),
            ErrorKind::Busy
        );
        assert_eq!(
            lock_exclusive(d.path()).unwrap_err().kind(),
            ErrorKind::Busy
        );
        assert_eq!(lock_shared(d.path()).unwrap_err().kind(), ErrorKind::Busy);
        // The writer notices and takes the LOCK file again.
        assert!(!d.path().join(LOCK).exists());
        w.verify().unwrap();
        assert!(d.path().join(LOCK).exists());
        w.verify().unwrap();
    }

    #[test]
    fn a_lock_file_held_by_another_after_a_replacement_stops_the_writer() {
        let d = tempfile::tempdir().unwrap();
        let lock = d.path().join(LOCK);
        let w = lock_exclusive(d.path()).unwrap();
        // Someone replaces LOCK and holds the new file (as a writer on a
        // file system without directory locks would).
        std::fs::remove_file(&lock).unwrap();
        let other = File::create(&lock).unwrap();
        assert!(try_flock(other.as_raw_fd(), LockKind::Exclusive).unwrap());
        let e = w.verify().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        assert!(e.to_string().contains("was replaced"), "{e}");
        assert!(e.to_string().contains("writes stop"), "{e}");
    }
}
