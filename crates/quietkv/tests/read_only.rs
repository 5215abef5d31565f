//! `Db::open_read_only`: reads everything (tables and WAL-only data)
//! without writing a byte to the directory, refuses writes with a clear
//! error, and keeps out of a writer's way through the LOCK file.

mod common;

#[path = "support/skip.rs"]
mod skip;

#[path = "support/ro_mount.rs"]
mod ro_mount;

#[path = "support/file_states.rs"]
mod file_states;
use std::fs;
use std::path::Path;

use common::dir;
use file_states::file_states;
use quietkv::{Db, ErrorKind, Options, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-").repeat(10).into_bytes()
}

/// 3,000 keys: the first 2,000 in tables, the rest only in the WAL; key 5
/// deleted. `crash` leaves the WAL unsealed, as a killed process would.
fn make_db(d: &Path, crash: bool) {
    let db = Db::open(d, Options::default()).unwrap();
    for i in 0..2000 {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    for i in 2000..3000 {
        db.put(key(i), value(i)).unwrap();
    }
    db.delete(key(5)).unwrap();
    if crash {
        // No background work may touch the files once they are copied.
        db.wait_idle().unwrap();
        std::mem::forget(db);
    } else {
        db.close().unwrap();
    }
}

fn expect_all(db: &Db) {
    for i in (0..3000).step_by(7) {
        let want = (i != 5).then(|| value(i));
        assert_eq!(db.get(key(i)).unwrap(), want, "key {i}");
    }
    assert_eq!(db.iter().unwrap().count(), 2999);
}

#[test]
fn reads_tables_and_wal_and_writes_nothing() {
    let d = dir();
    make_db(d.path(), false);
    let before = file_states(d.path());
    // Small memtables: the WAL replay fills several, kept in memory.
    let opts = Options::default().memtable_size(64 << 10);
    let db = Db::open_read_only(d.path(), opts).unwrap();
    assert!(db.is_read_only());
    expect_all(&db);
    let snap = db.snapshot();
    assert_eq!(snap.iter().unwrap().count(), db.iter().unwrap().count());
    assert!(snap.get(key(1)).unwrap().is_some());
    for (what, e) in [
        ("put", db.put(b"x", b"y").unwrap_err()),
        ("delete", db.delete(key(1)).unwrap_err()),
        (
            "write",
            db.write(quietkv::WriteBatch::new(), WriteOptions { sync: true })
                .unwrap_err(),
        ),
        ("flush", db.flush().unwrap_err()),
        ("compact", db.compact_all().unwrap_err()),
    ] {
        assert_eq!(e.kind(), ErrorKind::ReadOnly, "{what}: {e}");
    }
    db.wait_idle().unwrap();
    drop(snap);
    db.close().unwrap();
    assert_eq!(
        file_states(d.path()),
        before,
        "a read-only open changed the directory"
    );
    // And the database opens for writing afterwards, all there.
    let db = Db::open(d.path(), Options::default()).unwrap();
    expect_all(&db);
}

#[test]
fn reads_an_unsealed_wal_after_a_crash() {
    let d = dir();
    make_db(d.path(), true);
    // The "crashed" writer is this process, which still holds the LOCK:
    // read a copy, as a new process would see the files.
    let copy = dir();
    for f in fs::read_dir(d.path()).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap() != "LOCK" {
            // The live writer may still unlink a file it no longer needs
            // (an obsolete WAL or table) between the listing and the copy:
            // such a file is not part of the database, as after a crash.
            match fs::copy(&f, copy.path().join(f.file_name().unwrap())) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => panic!("copying {}: {e}", f.display()),
            }
        }
    }
    let before = file_states(copy.path());
    let db = Db::open_read_only(copy.path(), Options::default()).unwrap();
    expect_all(&db);
    drop(db);
    assert_eq!(file_states(copy.path()), before);
}

#[test]
fn a_writer_and_readers_exclude_each_other() {
    let d = dir();
    make_db(d.path(), false);
    let w = Db::open(d.path(), Options::default()).unwrap();
    let e = Db::open_read_only(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    drop(w);
    let r1 = Db::open_read_only(d.path(), Options::default()).unwrap();
    let r2 = Db::open_read_only(d.path(), Options::default()).unwrap();
    let e = Db::open(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    expect_all(&r1);
    expect_all(&r2);
}

#[test]
fn refuses_a_directory_without_a_database() {
    let d = dir();
    let e = Db::open_read_only(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        fs::read_dir(d.path()).unwrap().next().is_none(),
        "created files"
    );
    let e = Db::open_read_only(d.path().join("missing"), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(!d.path().join("missing").exists());
}

/// On a read-only mount a writable open cannot even probe the directory;
/// the read-only open serves every key.
#[test]
fn works_on_a_read_only_mount() {
    if quietio::sys::effective_uid() != 0 {
        skip::skip("bind mounts need root");
        return;
    }
    let d = dir();
    let src = d.path().join("db");
    let ro = d.path().join("ro");
    fs::create_dir_all(&ro).unwrap();
    make_db(&src, false);
    let _guard = ro_mount::RoBindMount::new(&src, &ro);
    assert!(Db::open(&ro, Options::default()).is_err());
    let db = Db::open_read_only(&ro, Options::default()).unwrap();
    expect_all(&db);
}
