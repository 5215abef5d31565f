//! A database exists only once its CURRENT file does.
//!
//! Creating a database writes, in order: LOCK, the first manifest
//! (MANIFEST-000003, describing an empty tree), the first WAL (empty), and
//! CURRENT (through `CURRENT.<n>.tmp` and a rename). A process killed
//! before the rename leaves some of those files but no CURRENT. Such a
//! directory never held data — nothing can be written before CURRENT
//! exists — so [`inspect`] recognises it and the next open deletes the
//! remains and creates the database afresh.
//!
//! Anything else without CURRENT (a table, a WAL record, a manifest that
//! describes tables or writes) is a database that lost its CURRENT: it is
//! refused as Corruption, naming the newest manifest so the user can
//! restore CURRENT, and nothing is deleted.

use std::fs;
use std::io::ErrorKind as IoErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::filenames::{self, FileKind, CURRENT};
use crate::record_log::{LogReader, TailState};
use crate::version::VersionEdit;

/// Whether a directory holds a created database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creation {
    /// CURRENT exists.
    Complete,
    /// No CURRENT and nothing but what a creation cut short leaves (or
    /// nothing at all, or no directory): `leftovers` (manifests, WALs and
    /// temporary files, sorted) may be deleted before creating the
    /// database. The LOCK file is not among them: it is the lock an
    /// opener holds.
    NotCreated { leftovers: Vec<PathBuf> },
}

/// Looks at `dir` without writing to it; see the module docs. Corruption
/// (naming CURRENT) when CURRENT is missing but the directory holds a
/// database.
pub fn inspect(dir: &Path) -> Result<Creation> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == IoErrorKind::NotFound => {
            return Ok(Creation::NotCreated {
                leftovers: Vec::new(),
            })
        }
        Err(e) => return Err(Error::io(e, "cannot list the database directory").with_file(dir)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| Error::io(e, "cannot list the database directory").with_file(dir))?;
        if let Some(kind) = entry.file_name().to_str().and_then(filenames::parse) {
            files.push((kind, entry.path()));
        }
    }
    if files.iter().any(|(k, _)| *k == FileKind::Current) {
        return Ok(Creation::Complete);
    }
    #[cfg(test)]
    tests::AFTER_LISTING.with(|h| h.take().map(|f| f()));
    let newest_manifest = files
        .iter()
        .filter_map(|(k, p)| match k {
            FileKind::Manifest(n) => Some((*n, p)),
            _ => None,
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, p)| p.clone());
    let mut leftovers = Vec::new();
    for (kind, path) in &files {
        let holds_data = match kind {
            FileKind::Table(_) => Some("a table".to_string()),
            FileKind::Wal(_) => wal_holds_data(path)?,
            FileKind::Manifest(_) => manifest_holds_data(path)?,
            FileKind::Temp => None,
            FileKind::Lock | FileKind::Current => continue,
        };
        if let Some(what) = holds_data {
            // The listing is older than the files' contents: another
            // process may have finished creating the database (and written
            // to it) since. CURRENT, once there, is only ever replaced, so
            // it existing now settles it.
            if current_exists(dir)? {
                return Ok(Creation::Complete);
            }
            return Err(lost_current(dir, path, &what, newest_manifest.as_deref()));
        }
        leftovers.push(path.clone());
    }
    leftovers.sort();
    Ok(Creation::NotCreated { leftovers })
}

/// Deletes what [`inspect`] reported as left over (a file already gone is
/// fine).
pub(crate) fn remove_leftovers(env: &quietio::IoEnv, leftovers: &[PathBuf]) -> Result<()> {
    for path in leftovers {
        match env.remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == IoErrorKind::NotFound => {}
            Err(e) => {
                return Err(
                    Error::io(e, "cannot remove the remains of an unfinished creation")
                        .with_file(path),
                )
            }
        }
    }
    Ok(())
}

fn lost_current(dir: &Path, evidence: &Path, what: &str, newest: Option<&Path>) -> Error {
    let name = |p: &Path| {
        p.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    };
    let restore = match newest {
        Some(m) => format!(
            "if CURRENT was lost, restore it naming the newest manifest: echo {} > CURRENT",
            name(m)
        ),
        None => "no manifest remains to restore CURRENT from".to_string(),
    };
    Error::corruption(format!(
        "CURRENT is missing but the directory holds a database ({} is {what}), so it is neither opened nor replaced; {restore}",
        name(evidence)
    ))
    .with_file(dir.join(CURRENT))
}

fn current_exists(dir: &Path) -> Result<bool> {
    let path = dir.join(CURRENT);
    match fs::symlink_metadata(&path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == IoErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(e, "cannot look for CURRENT").with_file(path)),
    }
}

/// The file's bytes; `None` if it is gone (another process opening the
/// database removed it since the directory was listed: a leftover of a
/// creation, or a manifest or WAL made obsolete).
fn read(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(d) => Ok(Some(d)),
        Err(e) if e.kind() == IoErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(e, "cannot read").with_file(path)),
    }
}

/// `Some(what)` unless the WAL holds no record: empty or zero padding.
fn wal_holds_data(path: &Path) -> Result<Option<String>> {
    let Some(data) = read(path)? else {
        return Ok(None);
    };
    let mut reader = LogReader::new(path, &data);
    Ok(match reader.read_record() {
        Ok(Some(_)) => Some("a WAL holding records".into()),
        Ok(None)
            if matches!(
                reader.tail(),
                TailState::Torn { .. } | TailState::Unpersisted { .. }
            ) =>
        {
            Some("a WAL with a partial record".into())
        }
        Ok(None) => None,
        Err(_) => Some("a WAL with damaged records".into()),
    })
}

/// `Some(what)` unless the manifest is empty, torn, or describes only the
/// initial empty tree (no tables, last sequence 0).
fn manifest_holds_data(path: &Path) -> Result<Option<String>> {
    let Some(data) = read(path)? else {
        return Ok(None);
    };
    let mut reader = LogReader::new(path, &data);
    loop {
        let record = match reader.read_record() {
            Ok(Some(r)) => r,
            // A torn (or missing) first edit: the creation stopped while
            // writing it.
            Ok(None) => return Ok(None),
            Err(_) => return Ok(Some("a damaged manifest".into())),
        };
        let Ok(edit) = VersionEdit::decode(&record) else {
            return Ok(Some("a manifest with an undecodable edit".into()));
        };
        if !edit.new_files.is_empty() || !edit.deleted_files.is_empty() {
            return Ok(Some("a manifest that lists tables".into()));
        }
        if edit.last_sequence.unwrap_or(0) != 0 {
            return Ok(Some("a manifest that records writes".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_log::LogWriter;

    thread_local! {
        /// Runs once between listing the directory and reading its files:
        /// what another process does in that window.
        pub(super) static AFTER_LISTING: std::cell::Cell<Option<Box<dyn FnOnce()>>> =
            std::cell::Cell::new(None);
    }

    /// Another process finishes creating the database and writes to it
    /// between this one's listing and its reads: the WAL holds records,
    /// CURRENT was not in the listing, and yet nothing is lost.
    /// A directory an unfinished creation left (its first manifest and an
    /// empty WAL, no CURRENT), with `meanwhile` set to run on it between
    /// `inspect`'s listing and its reads.
    fn unfinished_then(meanwhile: impl FnOnce(&Path) + 'static) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().to_path_buf();
        fs::write(p.join("MANIFEST-000003"), manifest_bytes(&[initial_edit()])).unwrap();
        fs::write(p.join("000002.log"), b"").unwrap();
        AFTER_LISTING.with(|h| h.set(Some(Box::new(move || meanwhile(&p)))));
        d
    }

    #[test]
    fn a_creation_finished_meanwhile_is_a_database_not_damage() {
        let d = unfinished_then(|q| {
            let mut wal = LogWriter::new(Vec::new());
            wal.add_record(b"a batch").unwrap();
            fs::write(q.join("000002.log"), wal.into_inner()).unwrap();
            fs::write(q.join(CURRENT), b"MANIFEST-000003\n").unwrap();
        });
        assert_eq!(inspect(d.path()).unwrap(), Creation::Complete);
    }

    /// A file removed between the listing and the read (an opener deleting
    /// what an unfinished creation left) is no error.
    #[test]
    fn a_file_removed_meanwhile_is_no_error() {
        let d = unfinished_then(|q| {
            fs::remove_file(q.join("000002.log")).unwrap();
            fs::remove_file(q.join("MANIFEST-000003")).unwrap();
        });
        assert!(matches!(
            inspect(d.path()).unwrap(),
            Creation::NotCreated { .. }
        ));
    }

    fn manifest_bytes(edits: &[VersionEdit]) -> Vec<u8> {
        let mut w = LogWriter::new(Vec::new());
        for e in edits {
            w.add_record(&e.encode()).unwrap();
        }
        w.into_inner()
    }

    fn initial_edit() -> VersionEdit {
        VersionEdit {
            log_number: Some(2),
            next_file_number: Some(4),
            last_sequence: Some(0),
            db_id: Some(77),
            ..Default::default()
        }
    }

    #[test]
    fn classifies_files_without_current() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        assert_eq!(
            inspect(&p.join("missing")).unwrap(),
            Creation::NotCreated { leftovers: vec![] }
        );
        assert_eq!(
            inspect(p).unwrap(),
            Creation::NotCreated { leftovers: vec![] }
        );
        fs::write(p.join("LOCK"), b"").unwrap();
        fs::write(p.join("notes.txt"), b"not ours").unwrap();
        let full = manifest_bytes(&[initial_edit()]);
        fs::write(p.join("MANIFEST-000003"), &full).unwrap();
        fs::write(p.join("MANIFEST-000005"), &full[..full.len() - 3]).unwrap();
        fs::write(p.join("000002.log"), b"").unwrap();
        fs::write(p.join("000004.log"), [0u8; 4096]).unwrap();
        fs::write(p.join("CURRENT.3.tmp"), b"MANIFEST-0").unwrap();
        let Creation::NotCreated { leftovers } = inspect(p).unwrap() else {
            panic!("not created");
        };
        let names: Vec<_> = leftovers
            .iter()
            .map(|l| l.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "000002.log",
                "000004.log",
                "CURRENT.3.tmp",
                "MANIFEST-000003",
                "MANIFEST-000005"
            ]
        );

        fs::write(p.join("CURRENT"), b"MANIFEST-000003\n").unwrap();
        assert_eq!(inspect(p).unwrap(), Creation::Complete);
    }

    #[test]
    fn data_without_current_is_a_lost_database() {
        let mut with_table = initial_edit();
        with_table.add_file(0, crate::version::tests::meta(9, "a", "b", 100));
        let wrote = VersionEdit {
            last_sequence: Some(12),
            ..Default::default()
        };
        let mut wal = LogWriter::new(Vec::new());
        wal.add_record(b"a batch").unwrap();
        let wal = wal.into_inner();
        let mut damaged = manifest_bytes(&[initial_edit(), initial_edit()]);
        damaged[10] ^= 1;
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("000009.sst", b"x".to_vec(), "000009.sst is a table"),
            ("000004.log", wal.clone(), "WAL holding records"),
            (
                "000004.log",
                wal[..wal.len() - 2].to_vec(),
                "partial record",
            ),
            (
                "MANIFEST-000007",
                manifest_bytes(&[initial_edit(), with_table]),
                "lists tables",
            ),
            (
                "MANIFEST-000007",
                manifest_bytes(&[initial_edit(), wrote]),
                "records writes",
            ),
            ("MANIFEST-000007", damaged, "damaged manifest"),
        ];
        for (name, bytes, expect) in cases {
            let d = tempfile::tempdir().unwrap();
            fs::write(d.path().join("MANIFEST-000003"), b"").unwrap();
            fs::write(d.path().join(name), bytes).unwrap();
            let e = inspect(d.path()).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Corruption, "{name}: {e}");
            assert_eq!(e.file(), Some(d.path().join(CURRENT).as_path()));
            let msg = e.to_string();
            assert!(msg.contains("CURRENT is missing"), "{msg}");
            assert!(msg.contains(expect), "{name}: {msg}");
            let newest = if name.starts_with("MANIFEST") {
                name
            } else {
                "MANIFEST-000003"
            };
            assert!(msg.contains(&format!("echo {newest} > CURRENT")), "{msg}");
        }
    }
}
