//! Preallocated WAL segments in the modes that write with system calls: a
//! new WAL takes no space until its first record, which allocates
//! `wal_segment_size` bytes at once; writes inside it
//! never extend the file, it grows by whole segments, and a clean close
//! cuts it to its true length; a crash leaves the allocated zeros, which
//! replay reads as padding. (The mmap mode: `wal_mmap.rs`; power cuts of
//! preallocated WALs in every mode: `power_cut.rs`, whose options use small
//! segments.)

mod common;

#[path = "common/wal_modes.rs"]
mod wal_modes;

use common::dir;
use quietkv::{AccessMode, Db, IoClass, Options, WriteBatch, WriteOptions};

const SEGMENT: u64 = 16 << 10;

/// The newest WAL file's metadata (its length, its allocated blocks).
fn live_wal(d: &std::path::Path) -> std::fs::Metadata {
    let mut wals: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    wals.sort();
    std::fs::metadata(wals.last().unwrap()).unwrap()
}

fn live_wal_len(d: &std::path::Path) -> u64 {
    live_wal(d).len()
}

fn live_wal_blocks(d: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    live_wal(d).blocks()
}

fn put(db: &Db, i: usize, sync: bool) {
    let mut b = WriteBatch::new();
    b.put(format!("k{i:05}").as_bytes(), [b'v'; 100]).unwrap();
    db.write(b, WriteOptions { sync }).unwrap();
}

fn modes() -> Vec<AccessMode> {
    wal_modes::supported_wal_modes(dir().path(), false)
}

#[test]
fn steady_writes_stay_inside_the_allocated_segments() {
    for mode in modes() {
        let d = dir();
        let opts = Options::default()
            .io_mode(IoClass::WalWrite, mode)
            .wal_segment_size(SEGMENT);
        let db = Db::open(d.path(), opts.clone()).unwrap();
        assert_eq!(
            live_wal_len(d.path()),
            0,
            "{mode}: nothing before the first record"
        );
        assert_eq!(live_wal_blocks(d.path()), 0, "{mode}: no blocks either");
        // About 120 bytes a record: 100 records stay inside one segment,
        // synced or not.
        for i in 0..100 {
            put(&db, i, i % 3 == 0);
            assert_eq!(live_wal_len(d.path()), SEGMENT, "{mode}: write {i}");
        }
        for i in 100..400 {
            put(&db, i, i % 3 == 0);
        }
        let len = live_wal_len(d.path());
        assert!(
            len > SEGMENT && len.is_multiple_of(SEGMENT),
            "{mode}: grown by whole segments to {len}"
        );
        db.close().unwrap();
        let closed = live_wal_len(d.path());
        assert!(
            closed < len && !closed.is_multiple_of(SEGMENT),
            "{mode}: cut to its true length at close, {closed}"
        );
        // Replayed in the default mode and segment size.
        let db = Db::open(d.path(), Options::default()).unwrap();
        for i in 0..400 {
            assert!(
                db.get(format!("k{i:05}").as_bytes()).unwrap().is_some(),
                "{mode}: k{i}"
            );
        }
    }
}

#[test]
fn a_crashed_preallocated_wal_replays_with_its_zero_tail() {
    let d = dir();
    let opts = Options::default().wal_segment_size(SEGMENT);
    let db = Db::open(d.path(), opts.clone()).unwrap();
    for i in 0..50 {
        put(&db, i, false);
    }
    // A process crash: no close, the WAL keeps its allocated zeros. The
    // files are copied as a restarted process would find them (the leaked
    // database still holds the lock).
    std::mem::forget(db);
    let d2 = dir();
    for f in std::fs::read_dir(d.path()).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap() != "LOCK" {
            std::fs::copy(&f, d2.path().join(f.file_name().unwrap())).unwrap();
        }
    }
    assert_eq!(live_wal_len(d2.path()), SEGMENT, "the zero tail is there");
    let db = Db::open(d2.path(), opts).unwrap();
    for i in 0..50 {
        assert!(db.get(format!("k{i:05}").as_bytes()).unwrap().is_some());
    }
    db.close().unwrap();
    let r = quietkv::check_dir(d2.path()).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}
