//! A flush writes of each key only the versions a reader can still see:
//! the newest, and the newest below each live snapshot. Overwritten
//! versions that nobody can read do not reach the table.

mod common;

use common::dir;
use quietkv::{Db, Options};

fn value(version: u32) -> Vec<u8> {
    let mut v = version.to_le_bytes().to_vec();
    v.resize(200, b'x');
    v
}

#[test]
fn a_flush_drops_overwritten_versions_nobody_can_read() {
    let d = dir();
    let db = Db::open(d.path(), Options::default()).unwrap();
    for version in 0..2_000u32 {
        db.put(b"hot", value(version)).unwrap();
    }
    db.put(b"other", b"1").unwrap();
    db.flush().unwrap();
    let s = db.stats();
    // 2,000 versions of 200 bytes would be 400 KB; one version and the
    // table's own blocks are a few KB.
    assert!(
        s.flush_bytes < 32 << 10,
        "flushed {} bytes for two live keys",
        s.flush_bytes
    );
    assert_eq!(db.get(b"hot").unwrap(), Some(value(1_999)));
    assert_eq!(db.get(b"other").unwrap().as_deref(), Some(&b"1"[..]));
    db.close().unwrap();
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"hot").unwrap(), Some(value(1_999)));
}

#[test]
fn a_flush_keeps_the_versions_live_snapshots_read() {
    let d = dir();
    let db = Db::open(d.path(), Options::default()).unwrap();
    let mut snaps = Vec::new();
    for version in 0..1_000u32 {
        db.put(b"k", value(version)).unwrap();
        if version % 250 == 100 {
            snaps.push((version, db.snapshot()));
        }
    }
    db.delete(b"k").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None, "the tombstone is kept");
    for (version, snap) in &snaps {
        assert_eq!(
            snap.get(b"k").unwrap(),
            Some(value(*version)),
            "the snapshot taken at version {version}"
        );
    }
    // Four snapshots, the tombstone: five entries, not a thousand.
    assert!(db.stats().flush_bytes < 32 << 10);
    // Once they are gone, a compaction to the bottom removes the key.
    drop(snaps);
    db.compact_all().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
}
