//! `approximate_len` and `approximate_size`: exact where the docs promise
//! it, close and monotone where they estimate.

mod common;
use common::{dir, small};

use quietkv::Db;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-").repeat(10).into_bytes()
}

/// A database with keys `0..n`, put one at a time.
fn db_with(n: u32) -> (tempfile::TempDir, Db) {
    let d = dir();
    let db = Db::open(d.path(), small()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i)).unwrap();
    }
    (d, db)
}

#[test]
fn an_empty_database_estimates_nothing() {
    let d = dir();
    let db = Db::open(d.path(), small()).unwrap();
    assert_eq!(db.approximate_len(), 0);
    assert_eq!(db.approximate_size(&b""[..]..).unwrap(), 0);
}

#[test]
fn len_is_exact_after_a_full_compaction_and_runs_ahead_before() {
    let n = 5000;
    let (_d, db) = db_with(n);
    assert_eq!(
        db.approximate_len(),
        n as u64,
        "distinct puts count once each"
    );
    // Overwrite a fifth: every version counts until compaction merges them.
    for i in (0..n).step_by(5) {
        db.put(key(i), b"again").unwrap();
    }
    assert_eq!(db.approximate_len(), (n + n / 5) as u64);
    db.compact_all().unwrap();
    assert_eq!(db.approximate_len(), n as u64);
    // Delete half: each delete cancels its put even before compaction.
    for i in (0..n).step_by(2) {
        db.delete(key(i)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.approximate_len(), (n / 2) as u64);
    db.compact_all().unwrap();
    assert_eq!(db.approximate_len(), (n / 2) as u64);
}

#[test]
fn size_covers_the_tables_and_splits_them_by_range() {
    let n = 20000;
    let (_d, db) = db_with(n);
    db.compact_all().unwrap();
    let on_disk: u64 = db.stats().levels.iter().map(|l| l.bytes).sum();
    let all = db.approximate_size(&b""[..]..).unwrap();
    // Whole tables count their whole file (blocks, index, filter, footer).
    assert_eq!(all, on_disk);
    let half = db.approximate_size(key(0)..key(n / 2)).unwrap();
    assert!(
        half as f64 > 0.4 * all as f64 && (half as f64) < 0.6 * all as f64,
        "half the keys: {half} of {all}"
    );
    let quarter = db.approximate_size(key(0)..key(n / 4)).unwrap();
    assert!(quarter <= half, "{quarter} > {half}");
    // A range inside one table is a part of it, not the whole file.
    let few = db.approximate_size(key(100)..key(110)).unwrap();
    assert!(few < 16 << 10, "ten keys: {few} bytes");
    // Nothing past the last key.
    assert_eq!(db.approximate_size(&b"zzz"[..]..).unwrap(), 0);
    // Memtables are not counted until flushed.
    for i in n..n + 100 {
        db.put(key(i), value(i)).unwrap();
    }
    assert_eq!(db.approximate_size(key(n)..).unwrap(), 0);
    db.flush().unwrap();
    assert!(db.approximate_size(key(n)..).unwrap() > 0);
}
