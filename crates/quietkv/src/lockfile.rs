//! The directory's LOCK file: one writer process at a time, readers
//! (`check`, read-only opens) beside each other but not beside a writer.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

use quietio::sys::{try_flock, LockKind};

use crate::error::{Error, ErrorKind, Result};
use crate::filenames::LOCK;

/// A held lock; released when dropped (the file is closed).
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

/// Takes the lock exclusively, creating the LOCK file if needed. Busy if
/// any other process holds it.
pub(crate) fn lock_exclusive(dir: &Path) -> Result<DirLock> {
    let path = dir.join(LOCK);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(e, "cannot open the lock file").with_file(&path))?;
    take(f, LockKind::Exclusive, dir, &path)
}

/// [`lock_exclusive`] of the environment's directory, the LOCK file opened
/// through the environment (so a test's fault layer sees it).
pub(crate) fn lock_exclusive_in(env: &quietio::IoEnv) -> Result<DirLock> {
    let dir = env.dir();
    let path = dir.join(LOCK);
    let f = env
        .open_lock_file(&path)
        .map_err(|e| Error::io(e, "cannot open the lock file").with_file(&path))?;
    take(f, LockKind::Exclusive, dir, &path)
}

/// Takes the lock shared, without creating or writing anything: `None`
/// when there is no LOCK file (no process can hold it then). Busy if a
/// writer holds it.
pub(crate) fn lock_shared(dir: &Path) -> Result<Option<DirLock>> {
    let path = dir.join(LOCK);
    let f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(e, "cannot open the lock file").with_file(&path)),
    };
    take(f, LockKind::Shared, dir, &path).map(Some)
}

fn take(f: File, kind: LockKind, dir: &Path, path: &Path) -> Result<DirLock> {
    match try_flock(f.as_raw_fd(), kind) {
        Ok(true) => Ok(DirLock { _file: f }),
        Ok(false) => Err(Error::new(
            ErrorKind::Busy,
            "the database is in use by another process (its LOCK file is held)",
        )
        .with_file(dir)),
        Err(e) => Err(Error::io(e, "cannot lock the database").with_file(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_exclude_everyone_readers_share() {
        let d = tempfile::tempdir().unwrap();
        assert!(lock_shared(d.path()).unwrap().is_none(), "no LOCK file yet");
        assert!(
            !d.path().join(LOCK).exists(),
            "a shared lock creates nothing"
        );
        let w = lock_exclusive(d.path()).unwrap();
        // flock locks belong to open file descriptions, so a second open in
        // the same process conflicts like another process would.
        assert_eq!(
            lock_exclusive(d.path()).unwrap_err().kind(),
            ErrorKind::Busy
        );
        assert_eq!(lock_shared(d.path()).unwrap_err().kind(), ErrorKind::Busy);
        drop(w);
        let r1 = lock_shared(d.path()).unwrap().unwrap();
        let _r2 = lock_shared(d.path()).unwrap().unwrap();
        assert_eq!(
            lock_exclusive(d.path()).unwrap_err().kind(),
            ErrorKind::Busy
        );
        drop(r1);
        drop(_r2);
        lock_exclusive(d.path()).unwrap();
    }
}
