//! The state machine's generations: each state the node has held since it
//! last installed a snapshot is a quietkv database of its own,
//! `<dir>/sm-<generation>`, and the small pointer file `<dir>/SM-CURRENT`
//! names the one in use.
//!
//! Installing a snapshot unpacks it into the next generation's directory
//! (published whole or not at all by quietkv's staging), then switches by
//! writing the pointer to `SM-CURRENT.tmp`, syncing it, renaming it over
//! `SM-CURRENT` and syncing the directory: one rename, so after a crash
//! the pointer names the old generation or the new one. Opening the store
//! deletes every generation the pointer does not name, and what a crash
//! left of an unpack.
//!
//! A pointer file rather than a key in the log database: the state is
//! found without the log (a node's state and its pointer are next to each
//! other and nothing else decides between them), and switching does not
//! wait behind the log's writes.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use quietkv::{Db, Options};

/// The pointer file's name.
const POINTER: &str = "SM-CURRENT";
/// What the pointer's first line must say before the generation number.
const POINTER_TAG: &str = "quietkv-raft state machine generation ";

/// A damaged pointer or a file system error, with the path it concerns.
#[derive(Debug)]
pub struct GenerationError {
    /// The file or directory.
    pub path: PathBuf,
    /// What went wrong.
    pub detail: String,
}

impl std::fmt::Display for GenerationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.detail)
    }
}

impl std::error::Error for GenerationError {}

fn err(path: &Path, detail: impl std::fmt::Display) -> GenerationError {
    GenerationError {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    }
}

/// The directory of `generation` in the node directory `root`.
pub fn dir_of(root: &Path, generation: u64) -> PathBuf {
    root.join(format!("sm-{generation:010}"))
}

/// The generation a directory entry of `root` is, if it is one: `sm-N`,
/// or the hidden staging directory a crash left of unpacking one
/// (`.sm-N.quietkv-tmp`, marked `true`).
fn parse_entry(name: &str) -> Option<(u64, bool)> {
    let (digits, staged) = match name.strip_prefix(".sm-") {
        Some(rest) => (rest.strip_suffix(".quietkv-tmp")?, true),
        None => (name.strip_prefix("sm-")?, false),
    };
    if digits.len() != 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, staged))
}

/// The generation the pointer in `root` names, `None` without a pointer.
pub fn read_pointer(root: &Path) -> Result<Option<u64>, GenerationError> {
    let path = root.join(POINTER);
    let text = match fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(&path, format!("cannot read: {e}"))),
    };
    let parsed = std::str::from_utf8(&text)
        .ok()
        .and_then(|t| t.strip_suffix('\n'))
        .and_then(|t| t.strip_prefix(POINTER_TAG))
        .and_then(|n| n.parse::<u64>().ok());
    match parsed {
        Some(n) => Ok(Some(n)),
        None => Err(err(
            &path,
            format!(
                "damaged state machine pointer {:?}: expected \"{POINTER_TAG}<number>\" and a newline",
                String::from_utf8_lossy(&text)
            ),
        )),
    }
}

/// Points `root` at `generation`: written beside, synced, renamed over the
/// old pointer, and the directory synced, so the switch is one rename.
pub fn write_pointer(root: &Path, generation: u64) -> Result<(), GenerationError> {
    let tmp = root.join(format!("{POINTER}.tmp"));
    let path = root.join(POINTER);
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, format!("{POINTER_TAG}{generation}\n").as_bytes())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, &path)?;
        fs::File::open(root)?.sync_all()
    };
    write().map_err(|e| err(&path, format!("cannot switch the state machine: {e}")))
}

/// Finds the generation in use in `root` (creating the pointer at
/// generation 0 on a new node) and deletes every other generation and
/// every unpack a crash cut short.
///
/// A missing pointer beside generations other than 0 is refused rather
/// than guessed at: deleting them could lose the node's state.
pub fn open_current(root: &Path) -> Result<u64, GenerationError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(root).map_err(|e| err(root, format!("cannot list: {e}")))? {
        let entry = entry.map_err(|e| err(root, format!("cannot list: {e}")))?;
        if let Some(g) = entry.file_name().to_str().and_then(parse_entry) {
            found.push((g, entry.path()));
        }
    }
    let current = match read_pointer(root)? {
        Some(g) => g,
        None => {
            if let Some((_, p)) = found.iter().find(|((g, staged), _)| *g != 0 || *staged) {
                return Err(err(
                    p,
                    format!(
                        "a state machine generation without the {POINTER} file that says which generation is in use; restore {POINTER} or move the directory away"
                    ),
                ));
            }
            write_pointer(root, 0)?;
            0
        }
    };
    for ((g, staged), path) in found {
        if g == current && !staged {
            continue;
        }
        log::warn!(
            "quietkv-raft: removing {}, a state machine generation no longer in use",
            path.display()
        );
        fs::remove_dir_all(&path).map_err(|e| err(&path, format!("cannot remove: {e}")))?;
    }
    let _ = fs::remove_file(root.join(format!("{POINTER}.tmp")));
    Ok(current)
}

/// One generation's open database. Once [`retire`](Self::retire)d, its
/// directory is deleted when the last user lets go of it (a snapshot
/// being built may still read it after an install switched away).
pub struct StateDb {
    generation: u64,
    dir: PathBuf,
    db: Option<Db>,
    retired: AtomicBool,
}

impl StateDb {
    /// Opens generation `generation` of `root`.
    pub fn open(root: &Path, generation: u64, options: Options) -> quietkv::Result<StateDb> {
        let dir = dir_of(root, generation);
        let db = Db::open(&dir, options)?;
        Ok(StateDb {
            generation,
            dir,
            db: Some(db),
            retired: AtomicBool::new(false),
        })
    }

    /// Its generation number.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Marks it replaced: its directory goes when it is dropped.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }
}

impl std::ops::Deref for StateDb {
    type Target = Db;

    fn deref(&self) -> &Db {
        // Only `drop` takes the database out.
        self.db.as_ref().expect("the database is open until drop")
    }
}

impl Drop for StateDb {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            if let Err(e) = db.close() {
                log::warn!("quietkv-raft: closing {}: {e}", self.dir.display());
            }
        }
        if self.retired.load(Ordering::Acquire) {
            // Best effort: what is left is removed when the store is next
            // opened, since the pointer no longer names it.
            if let Err(e) = fs::remove_dir_all(&self.dir) {
                log::warn!(
                    "quietkv-raft: cannot remove the replaced state {}: {e}",
                    self.dir.display()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_only_as_this_crate_writes_them() {
        assert_eq!(parse_entry("sm-0000000007"), Some((7, false)));
        assert_eq!(parse_entry(".sm-0000000007.quietkv-tmp"), Some((7, true)));
        for other in [
            "sm-7",
            "sm-00000000070",
            "sm-000000000x",
            "log",
            "snapshots",
            ".sm-0000000007",
        ] {
            assert_eq!(parse_entry(other), None, "{other}");
        }
        assert_eq!(dir_of(Path::new("/n"), 7), Path::new("/n/sm-0000000007"));
    }

    #[test]
    fn the_pointer_round_trips_and_damage_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read_pointer(tmp.path()).unwrap(), None);
        write_pointer(tmp.path(), 42).unwrap();
        assert_eq!(read_pointer(tmp.path()).unwrap(), Some(42));
        fs::write(
            tmp.path().join(POINTER),
            b"quietkv-raft state machine generation 4",
        )
        .unwrap();
        let e = read_pointer(tmp.path()).unwrap_err();
        assert!(e.to_string().contains(POINTER), "{e}");
    }

    #[test]
    fn opening_keeps_the_named_generation_and_removes_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert_eq!(open_current(root).unwrap(), 0);
        for name in [
            "sm-0000000000",
            "sm-0000000001",
            ".sm-0000000002.quietkv-tmp",
            "keep",
        ] {
            fs::create_dir(root.join(name)).unwrap();
        }
        write_pointer(root, 1).unwrap();
        assert_eq!(open_current(root).unwrap(), 1);
        let mut left: Vec<_> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["SM-CURRENT", "keep", "sm-0000000001"]);

        // Without the pointer, a generation other than 0 is not guessed at.
        fs::remove_file(root.join(POINTER)).unwrap();
        let e = open_current(root).unwrap_err();
        assert!(e.to_string().contains("sm-0000000001"), "{e}");
        assert!(root.join("sm-0000000001").exists());
    }
}
