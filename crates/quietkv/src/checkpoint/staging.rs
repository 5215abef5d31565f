//! Making a copied database visible only once it is complete.
//!
//! A checkpoint or a restore is built in a hidden sibling of its target
//! (`.NAME.quietkv-tmp`) holding a marker file, [`INCOMPLETE_COPY`]. Once
//! every file is written and synced, the marker is removed, the directory
//! synced and renamed to the target, and the parent synced. A crash at any
//! point leaves either no target (and a hidden leftover the next copy to
//! the same target removes) or the complete target. [`Db::open`](crate::Db::open)
//! refuses a directory that still holds the marker, so opening the
//! leftover by hand fails with a clear error instead of creating a fresh
//! database in it. (A crash between creating the directory and writing
//! the marker leaves a leftover with no marker, but then nothing else in
//! it either, beside the lock file.)

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};
pub(crate) use crate::filenames::INCOMPLETE_COPY;

/// A directory being filled, renamed to its target by [`Staging::publish`]
/// and removed if dropped before that.
pub(crate) struct Staging {
    pub dir: PathBuf,
    target: PathBuf,
    published: bool,
    /// Held while the copy is written, so another copy to the same target
    /// finds it busy instead of taking it for a crash's leftover.
    _lock: crate::lockfile::DirLock,
}

/// The hidden sibling a copy to `target` is built in.
fn staging_path(target: &Path) -> Result<PathBuf> {
    let name = target.file_name().ok_or_else(|| {
        Error::invalid("the target of a copy must name a directory (it has no last component)")
            .with_file(target)
    })?;
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(".quietkv-tmp");
    Ok(target.with_file_name(hidden))
}

impl Staging {
    /// Starts a copy to `target`, which must not exist or be an empty
    /// directory. A leftover staging directory of an earlier copy to the
    /// same target that never finished is removed first (it is recognised
    /// by its name and its contents: the marker, or a complete database
    /// that was never renamed).
    pub fn begin(target: &Path) -> Result<Staging> {
        match fs::read_dir(target) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(Error::invalid(
                        "the target directory is not empty: a copy is only written to a new or empty directory",
                    )
                    .with_file(target));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::io(e, "cannot read the target directory").with_file(target))
            }
        }
        let dir = staging_path(target)?;
        let parent = parent_of(&dir);
        fs::create_dir_all(parent).map_err(|e| {
            Error::io(e, "cannot create the target's parent directory").with_file(parent)
        })?;
        if dir.exists() {
            remove_leftover(&dir)?;
        }
        fs::create_dir(&dir)
            .map_err(|e| Error::io(e, "cannot create the staging directory").with_file(&dir))?;
        let lock = crate::lockfile::lock_exclusive(&dir)?;
        let staging = Staging {
            dir,
            target: target.to_path_buf(),
            published: false,
            _lock: lock,
        };
        let marker = staging.dir.join(INCOMPLETE_COPY);
        fs::write(
            &marker,
            b"a copy of a quietkv database that did not finish; safe to delete\n",
        )
        .map_err(|e| Error::io(e, "cannot write the incomplete-copy marker").with_file(&marker))?;
        sync_path(&marker)?;
        sync_dir(&staging.dir)?;
        sync_dir(parent_of(&staging.dir))?;
        Ok(staging)
    }

    /// Makes the copy visible under its target name: every file in it must
    /// be synced already. Removes the marker, syncs the directory, renames
    /// it to the target (replacing an empty directory) and syncs the
    /// parent.
    pub fn publish(mut self) -> Result<PathBuf> {
        let marker = self.dir.join(INCOMPLETE_COPY);
        fs::remove_file(&marker).map_err(|e| {
            Error::io(e, "cannot remove the incomplete-copy marker").with_file(&marker)
        })?;
        sync_dir(&self.dir)?;
        fs::rename(&self.dir, &self.target).map_err(|e| {
            Error::io(
                e,
                format!(
                    "cannot rename the finished copy {} to its target",
                    self.dir.display()
                ),
            )
            .with_file(&self.target)
        })?;
        self.published = true;
        sync_dir(parent_of(&self.target))?;
        Ok(self.target.clone())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.published {
            if let Err(e) = fs::remove_dir_all(&self.dir) {
                log::warn!(
                    "quietkv: cannot remove the unfinished copy {}: {e}",
                    self.dir.display()
                );
            }
        }
    }
}

/// Removes the staging directory an earlier copy left, if it is one: only
/// database files, the marker and the probe's file; anything else is
/// someone's data and is refused.
fn remove_leftover(dir: &Path) -> Result<()> {
    let _lock = crate::lockfile::lock_exclusive(dir).map_err(|e| {
        if e.kind() == ErrorKind::Busy {
            Error::new(
                ErrorKind::Busy,
                "another copy to the same target is being written",
            )
            .with_file(dir)
        } else {
            e
        }
    })?;
    let entries = fs::read_dir(dir)
        .map_err(|e| Error::io(e, "cannot read a leftover copy").with_file(dir))?;
    for entry in entries {
        let entry =
            entry.map_err(|e| Error::io(e, "cannot read a leftover copy").with_file(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = name == INCOMPLETE_COPY
            || name.starts_with(".quietio")
            || crate::filenames::parse(&name).is_some();
        if !ours {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "a directory with the name a copy is staged under holds {name:?}, which no copy writes; move it away"
                ),
            )
            .with_file(dir));
        }
    }
    log::warn!(
        "quietkv: removing {}, left by a copy that never finished",
        dir.display()
    );
    fs::remove_dir_all(dir)
        .map_err(|e| Error::io(e, "cannot remove a leftover copy").with_file(dir))
}

/// The directory holding `path`: `.` for a bare relative name, whose
/// `parent()` is the empty path.
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn sync_path(path: &Path) -> Result<()> {
    fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(e, "cannot sync").with_file(path))
}

/// Makes the names in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    Ok(quietio::sync_dir(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_visible_only_after_publish_and_an_abandoned_one_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("copy");
        let s = Staging::begin(&target).unwrap();
        assert!(s.dir.join(INCOMPLETE_COPY).exists());
        assert!(!target.exists());
        let staged = s.dir.clone();
        drop(s);
        assert!(!staged.exists(), "dropped before publish: removed");

        let s = Staging::begin(&target).unwrap();
        fs::write(s.dir.join("000001.sst"), b"x").unwrap();
        s.publish().unwrap();
        assert!(target.join("000001.sst").exists());
        assert!(!target.join(INCOMPLETE_COPY).exists());
        let e = Staging::begin(&target).err().unwrap();
        assert!(e.to_string().contains("not empty"), "{e}");
    }

    #[test]
    fn a_bare_relative_name_has_the_current_directory_as_parent() {
        assert_eq!(parent_of(Path::new("ck")), Path::new("."));
        assert_eq!(parent_of(Path::new("a/ck")), Path::new("a"));
        assert_eq!(parent_of(Path::new("/ck")), Path::new("/"));
    }

    #[test]
    fn a_copy_being_written_is_not_taken_for_a_leftover() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("copy");
        let first = Staging::begin(&target).unwrap();
        let e = Staging::begin(&target).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        assert!(first.dir.join(INCOMPLETE_COPY).exists());
        first.publish().unwrap();
        assert!(target.is_dir());
    }

    #[test]
    fn a_crashed_copys_leftover_is_removed_but_foreign_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("copy");
        let leftover = staging_path(&target).unwrap();
        fs::create_dir(&leftover).unwrap();
        fs::write(leftover.join(INCOMPLETE_COPY), b"").unwrap();
        fs::write(leftover.join("000007.sst"), b"half").unwrap();
        let s = Staging::begin(&target).unwrap();
        assert!(!s.dir.join("000007.sst").exists());
        drop(s);

        fs::create_dir(&leftover).unwrap();
        fs::write(leftover.join("notes.txt"), b"mine").unwrap();
        let e = Staging::begin(&target).err().unwrap();
        assert!(e.to_string().contains("notes.txt"), "{e}");
        assert!(leftover.join("notes.txt").exists());
    }
}
