//! Snapshots are owned read views: they move into threads, clone, and keep
//! the versions they see until the last clone is dropped, also across
//! compactions and after the database is closed.

mod common;
use common::{dir, small};

use std::sync::Arc;

use quietkv::{Db, Snapshot};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-").repeat(8).into_bytes()
}

fn write_round(db: &Db, keys: u32, round: u32) {
    for i in 0..keys {
        db.put(key(i), value(i, round)).unwrap();
    }
}

/// Every key reads its round-`round` value through `snap`, by point reads
/// and by a scan.
fn assert_sees_round(snap: &Snapshot, keys: u32, round: u32) {
    for i in (0..keys).step_by(37) {
        assert_eq!(snap.get(key(i)).unwrap(), Some(value(i, round)), "key {i}");
    }
    let all: Vec<_> = snap
        .iter()
        .unwrap()
        .collect::<quietkv::Result<_>>()
        .unwrap();
    assert_eq!(all.len(), keys as usize);
    for (i, (k, v)) in all.iter().enumerate() {
        assert_eq!((k, v), (&key(i as u32), &value(i as u32, round)));
    }
}

#[test]
fn a_snapshot_is_owned_and_shareable() {
    fn owned<T: 'static + Send + Sync + Clone>() {}
    owned::<Snapshot>();
}

#[test]
fn snapshots_move_into_threads_beside_an_arc_db() {
    let d = dir();
    let db = Arc::new(Db::open(d.path(), small()).unwrap());
    let keys = 3000;
    write_round(&db, keys, 0);
    let snap = db.snapshot();
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let snap = snap.clone();
            std::thread::spawn(move || {
                for _ in 0..3 {
                    assert_sees_round(&snap, keys, 0);
                }
            })
        })
        .collect();
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            write_round(&db, keys, 1);
            db.compact_all().unwrap();
        })
    };
    for r in readers {
        r.join().unwrap();
    }
    writer.join().unwrap();
    assert_sees_round(&snap, keys, 0);
    assert_eq!(db.get(key(5)).unwrap(), Some(value(5, 1)));
}

#[test]
fn a_clone_keeps_the_versions_after_the_original_is_dropped() {
    let d = dir();
    let db = Db::open(d.path(), small()).unwrap();
    let keys = 3000;
    write_round(&db, keys, 0);
    let original = db.snapshot();
    let clone = original.clone();
    drop(original);
    // Overwrite everything and compact it to the bottom: without the
    // clone's own registration, compaction would drop round 0.
    write_round(&db, keys, 1);
    db.compact_all().unwrap();
    let shape: Vec<_> = db.stats().levels.iter().map(|l| l.files).collect();
    assert_eq!(shape.iter().filter(|&&n| n > 0).count(), 1, "{shape:?}");
    assert_sees_round(&clone, keys, 0);
    drop(clone);
    // With no snapshot left, the next full compaction drops round 0.
    write_round(&db, keys, 2);
    db.compact_all().unwrap();
    let live: u64 = db.stats().levels.iter().map(|l| l.bytes).sum();
    let one_round: u64 = (0..keys).map(|i| value(i, 2).len() as u64).sum();
    assert!(live < 2 * one_round, "old rounds dropped: {live} bytes");
}

#[test]
fn a_snapshot_outlives_its_database() {
    let d = dir();
    let keys = 2000;
    let snap = {
        let db = Db::open(d.path(), small()).unwrap();
        write_round(&db, keys, 0);
        db.flush().unwrap();
        let snap = db.snapshot();
        write_round(&db, keys, 1);
        db.close().unwrap();
        snap
    };
    assert_sees_round(&snap, keys, 0);
    // Closing released the directory: it opens again while the snapshot
    // lives, and sees the newest round.
    let db = Db::open(d.path(), small()).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(7, 1)));
    assert_sees_round(&snap, keys, 0);
}
