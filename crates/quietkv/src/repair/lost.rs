//! `DIR/lost/`: where repair keeps every file it replaces or drops.
//!
//! A file is first hard-linked into `lost/` (durable before anything is
//! changed: the link and the directory are synced), and only unlinked from
//! the database directory once the repaired database is installed. A crash
//! at any point therefore leaves every byte reachable, either under its old
//! name or in `lost/`. A name already taken in `lost/` (by an earlier
//! repair) gets a `.1`, `.2`, ... suffix.

use std::fs;
use std::io::ErrorKind as IoErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub(super) const LOST_DIR: &str = "lost";

pub(super) struct Lost {
    dir: PathBuf,
    /// Originals to unlink once the repaired database is installed.
    to_retire: Vec<PathBuf>,
    /// Where each preserved file went.
    pub kept: Vec<PathBuf>,
}

impl Lost {
    pub fn new(db_dir: &Path) -> Lost {
        Lost {
            dir: db_dir.join(LOST_DIR),
            to_retire: Vec::new(),
            kept: Vec::new(),
        }
    }

    /// Links `path` into `lost/` and syncs that; the original stays until
    /// [`Lost::retire_all`] (or the caller removes it). Returns the copy's
    /// path.
    pub fn preserve(&mut self, path: &Path) -> Result<PathBuf> {
        self.ensure_dir()?;
        let name = path
            .file_name()
            .ok_or_else(|| {
                Error::invalid("cannot preserve a path without a file name").with_file(path)
            })?
            .to_string_lossy()
            .into_owned();
        let mut target = self.dir.join(&name);
        let mut n = 0;
        loop {
            match fs::hard_link(path, &target) {
                Ok(()) => break,
                Err(e) if e.kind() == IoErrorKind::AlreadyExists => {
                    n += 1;
                    target = self.dir.join(format!("{name}.{n}"));
                }
                Err(e) => {
                    return Err(Error::io(
                        e,
                        format!("cannot keep a copy in {}", self.dir.display()),
                    )
                    .with_file(path))
                }
            }
        }
        quietio::sync_dir(&self.dir)?;
        self.kept.push(target.clone());
        Ok(target)
    }

    /// [`Lost::preserve`], and unlink the original once the repair is
    /// installed.
    pub fn move_later(&mut self, path: &Path) -> Result<PathBuf> {
        let copy = self.preserve(path)?;
        self.to_retire.push(path.to_path_buf());
        Ok(copy)
    }

    /// Unlinks `path` (already preserved) once the repair is installed.
    pub fn retire_later(&mut self, path: &Path) {
        self.to_retire.push(path.to_path_buf());
    }

    /// Unlinks every original [`Lost::move_later`] was given (their copies
    /// stay in `lost/`).
    pub fn retire_all(&mut self) -> Result<()> {
        for path in self.to_retire.drain(..) {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == IoErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Error::io(e, "cannot remove a file kept in lost/").with_file(&path))
                }
            }
        }
        Ok(())
    }

    fn ensure_dir(&self) -> Result<()> {
        if self.dir.is_dir() {
            return Ok(());
        }
        fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io(e, "cannot create the lost/ directory").with_file(&self.dir))?;
        if let Some(parent) = self.dir.parent() {
            quietio::sync_dir(parent)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preserves_under_a_fresh_name_and_retires_later() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("000005.log");
        fs::write(&f, b"one").unwrap();
        let mut lost = Lost::new(d.path());
        let first = lost.preserve(&f).unwrap();
        assert_eq!(first, d.path().join("lost/000005.log"));
        let second = lost.move_later(&f).unwrap();
        assert_eq!(second, d.path().join("lost/000005.log.1"));
        assert!(f.exists());
        lost.retire_all().unwrap();
        assert!(!f.exists());
        assert_eq!(fs::read(&second).unwrap(), b"one");
        assert_eq!(lost.kept, vec![first, second]);
    }
}
