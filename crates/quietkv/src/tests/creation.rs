//! A database exists only once CURRENT does: a directory holding only what
//! a creation cut short leaves is cleaned up and created afresh; one that
//! holds data but lost CURRENT is refused and left alone.

use std::fs;
use std::path::Path;

use crate::record_log::LogWriter;
use crate::version::VersionEdit;
use crate::{check_dir, Db, ErrorKind, Options};

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// The edit a new database's first manifest starts with.
fn initial_manifest() -> Vec<u8> {
    let edit = VersionEdit {
        log_number: Some(2),
        next_file_number: Some(4),
        last_sequence: Some(0),
        db_id: Some(0x5eed),
        ..Default::default()
    };
    let mut w = LogWriter::new(Vec::new());
    w.add_record(&edit.encode()).unwrap();
    w.into_inner()
}

fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

type Setup = fn(&Path);

fn half_created_states() -> Vec<(&'static str, Setup)> {
    vec![
        ("LOCK and an empty manifest", |d| {
            fs::write(d.join("LOCK"), b"").unwrap();
            fs::write(d.join("MANIFEST-000003"), b"").unwrap();
        }),
        ("the initial manifest and an empty WAL", |d| {
            fs::write(d.join("LOCK"), b"").unwrap();
            fs::write(d.join("MANIFEST-000003"), initial_manifest()).unwrap();
            fs::write(d.join("000002.log"), b"").unwrap();
        }),
        ("a zero-padded WAL and CURRENT.3.tmp", |d| {
            fs::write(d.join("LOCK"), b"").unwrap();
            fs::write(d.join("MANIFEST-000003"), initial_manifest()).unwrap();
            fs::write(d.join("000002.log"), [0u8; 4096]).unwrap();
            fs::write(d.join("CURRENT.3.tmp"), b"MANIFEST-000003\n").unwrap();
        }),
        ("a torn manifest", |d| {
            let m = initial_manifest();
            fs::write(d.join("MANIFEST-000003"), &m[..m.len() / 2]).unwrap();
        }),
    ]
}

#[test]
fn half_created_directories_are_created_afresh() {
    for (what, setup) in half_created_states() {
        let d = dir();
        setup(d.path());
        let db = Db::open(d.path(), Options::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
        db.put(b"k", b"v").unwrap();
        db.close().unwrap();
        assert!(
            !names(d.path()).iter().any(|n| n.ends_with(".tmp")),
            "{what}"
        );
        let db = Db::open(d.path(), Options::default()).unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()), "{what}");
        db.close().unwrap();
        let r = check_dir(d.path()).unwrap();
        assert!(r.is_ok(), "{what}: {:?}", r.problems);
    }
}

#[test]
fn half_created_directory_without_create_if_missing_is_no_database() {
    for (what, setup) in half_created_states() {
        let d = dir();
        setup(d.path());
        let before = names(d.path());
        let opts = Options {
            create_if_missing: false,
            ..Options::default()
        };
        let e = Db::open(d.path(), opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{what}: {e}");
        assert!(e.to_string().contains("no database here"), "{what}: {e}");
        // Nothing was removed (a LOCK file may have been taken).
        let after = names(d.path());
        assert!(
            before.iter().all(|n| after.contains(n)),
            "{what}: {after:?}"
        );
        // check has nothing to verify either: not damage.
        let e = check_dir(d.path()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{what}: {e}");
    }
}

#[test]
fn manifest_with_data_but_no_current_is_refused_and_named() {
    let d = dir();
    let db = Db::open(d.path(), Options::default()).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i}").as_bytes(), b"value").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let current = fs::read_to_string(d.path().join("CURRENT")).unwrap();
    let manifest = current.trim().to_string();
    fs::remove_file(d.path().join("CURRENT")).unwrap();
    // Without its tables the manifest alone still says there was data.
    for f in names(d.path()) {
        if f.ends_with(".sst") || f.ends_with(".log") {
            fs::remove_file(d.path().join(f)).unwrap();
        }
    }
    let before = names(d.path());
    for create_if_missing in [true, false] {
        let opts = Options {
            create_if_missing,
            ..Options::default()
        };
        let e = Db::open(d.path(), opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        let msg = e.to_string();
        assert!(msg.contains("CURRENT is missing"), "{msg}");
        assert!(msg.contains(&format!("echo {manifest} > CURRENT")), "{msg}");
    }
    assert_eq!(names(d.path()), before, "nothing was deleted");
    let r = check_dir(d.path()).unwrap();
    assert!(
        r.problems.iter().any(|p| p.message.contains(&manifest)),
        "{:?}",
        r.problems
    );
}

#[test]
fn wal_records_without_current_are_refused() {
    let d = dir();
    let db = Db::open(d.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    // A crash: a clean close would also record the write in the manifest
    // (sealing the WAL), and the manifest would be what refuses.
    std::mem::forget(db);
    let copy = dir();
    for f in fs::read_dir(d.path()).unwrap() {
        let f = f.unwrap().path();
        let name = f.file_name().unwrap();
        if name != "LOCK" && name != "CURRENT" {
            fs::copy(&f, copy.path().join(name)).unwrap();
        }
    }
    let e = Db::open(copy.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("WAL holding records"), "{e}");
}
