//! `Db::delete_range` end to end: one record whatever it covers, durable
//! through a power cut (WAL replay) and through a flush, honoured by
//! snapshots taken before it, and reclaimed by compaction.

mod common;

use std::path::Path;

use quietio::fault::{CutPolicy, FaultLayer};
use quietkv::{AccessMode, Db, IoClass, Options, WriteBatch, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:07}").into_bytes()
}

/// Bytes of the tables in `dir`.
fn table_bytes(dir: &Path) -> u64 {
    common::tables(dir)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

/// A database at `dir` holding the keys `0..n` (a multiple of 10,000),
/// written in batches of 10,000 and compacted into the bottom level.
fn filled(dir: &Path, n: u32, opts: Options) -> Db {
    let db = Db::open(dir, opts).unwrap();
    for chunk in 0..n / 10_000 {
        let mut b = WriteBatch::new();
        for i in chunk * 10_000..(chunk + 1) * 10_000 {
            b.put(key(i), format!("v{i}")).unwrap();
        }
        db.write(b, WriteOptions::default()).unwrap();
    }
    db.compact_all().unwrap();
    db
}

/// Checks that `db` holds exactly the keys `0..n` outside `lo..hi`, by get
/// and by iteration both ways.
fn check_hole(db: &Db, n: u32, lo: u32, hi: u32, what: &str) {
    let want: Vec<Vec<u8>> = (0..n).filter(|i| *i < lo || *i >= hi).map(key).collect();
    let got: Vec<Vec<u8>> = db.iter().unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(got, want, "{what}: forward");
    let mut back: Vec<Vec<u8>> = db.iter().unwrap().rev().map(|r| r.unwrap().0).collect();
    back.reverse();
    assert_eq!(back, want, "{what}: reverse");
    for i in [
        0,
        lo.saturating_sub(1),
        lo,
        (lo + hi) / 2,
        hi - 1,
        hi,
        n - 1,
    ] {
        let expect = (i < lo || i >= hi).then(|| format!("v{i}").into_bytes());
        assert_eq!(db.get(key(i)).unwrap(), expect, "{what}: get {i}");
    }
}

#[test]
fn a_synced_range_delete_survives_a_power_cut_before_and_after_its_flush() {
    let root = common::dir();
    let db_dir = root.path().join("db");
    let layer = FaultLayer::new(&db_dir).unwrap();
    let mut opts = common::small();
    opts.fault_layer = Some(layer.clone());
    let db = Db::open(&db_dir, opts).unwrap();
    let mut b = WriteBatch::new();
    for i in 0..300 {
        b.put(key(i), format!("v{i}")).unwrap();
    }
    db.write(b, WriteOptions { sync: true }).unwrap();
    db.flush().unwrap();
    let mut b = WriteBatch::new();
    b.delete_range(key(100), key(200)).unwrap();
    db.write(b, WriteOptions { sync: true }).unwrap();

    // Cut the power with the range delete only in the WAL: replay brings
    // it back.
    let in_wal = root.path().join("in-wal");
    layer
        .power_cut_image(&in_wal, CutPolicy::DropUnsynced)
        .unwrap();
    // And once it is in a table (the flush syncs it and the manifest).
    db.flush().unwrap();
    let in_table = root.path().join("in-table");
    layer
        .power_cut_image(&in_table, CutPolicy::DropUnsynced)
        .unwrap();
    drop(db);

    for dir in [&in_wal, &in_table] {
        let db = Db::open(dir, common::small()).unwrap();
        check_hole(&db, 300, 100, 200, &dir.display().to_string());
        // The tombstone is in a table now (replayed WALs are flushed at
        // open): check reads it without a finding.
        db.close().unwrap();
        let report = quietkv::check_dir(dir).unwrap();
        assert!(report.is_ok(), "{report:?}");
        let db = Db::open(dir, common::small()).unwrap();
        // Through a compaction and another reopen too.
        db.compact_all().unwrap();
        check_hole(&db, 300, 100, 200, "compacted");
        drop(db);
        let db = Db::open(dir, common::small()).unwrap();
        check_hole(&db, 300, 100, 200, "compacted and reopened");
        db.close().unwrap();
        let report = quietkv::check_dir(dir).unwrap();
        assert!(report.is_ok(), "{report:?}");
    }
}

#[test]
fn snapshots_taken_before_a_range_delete_keep_the_keys_through_compaction() {
    let d = common::dir();
    let db = Db::open(d.path(), common::small()).unwrap();
    for i in 0..500 {
        db.put(key(i), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    let before = db.snapshot();
    db.delete_range(key(10)..=key(19)).unwrap();
    // Written after the range delete: not deleted by it.
    db.put(key(15), b"v15").unwrap();
    db.compact_all().unwrap();
    assert_eq!(before.iter().unwrap().count(), 500);
    assert_eq!(before.get(key(12)).unwrap(), Some(b"v12".to_vec()));
    assert_eq!(db.get(key(12)).unwrap(), None);
    assert_eq!(db.get(key(15)).unwrap(), Some(b"v15".to_vec()));
    assert_eq!(db.get(key(20)).unwrap(), Some(b"v20".to_vec()));
    let rev: Vec<_> = db
        .range(key(5)..key(25))
        .unwrap()
        .rev()
        .map(|r| r.unwrap().0)
        .collect();
    let want: Vec<_> = (5..25)
        .rev()
        .filter(|i| !(10..20).contains(i) || *i == 15)
        .map(key)
        .collect();
    assert_eq!(rev, want);
    drop(before);
    // Bound shapes the call refuses or ignores.
    assert_eq!(
        db.delete_range(key(1)..).unwrap_err().kind(),
        quietkv::ErrorKind::InvalidArgument
    );
    assert_eq!(
        db.delete_range(key(9)..key(1)).unwrap_err().kind(),
        quietkv::ErrorKind::InvalidArgument
    );
    db.delete_range(key(3)..key(3)).unwrap();
    assert_eq!(db.get(key(3)).unwrap(), Some(b"v3".to_vec()));
    db.delete_range(..key(3)).unwrap();
    assert_eq!(db.iter().unwrap().next().unwrap().unwrap().0, key(3));
    // A range of one key, alone in its table: its bounds are that key.
    db.flush().unwrap();
    db.delete_range(key(40)..=key(40)).unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(key(40)).unwrap(), None);
    assert_eq!(db.get(key(41)).unwrap(), Some(b"v41".to_vec()));
    db.compact_all().unwrap();
    assert_eq!(db.get(key(40)).unwrap(), None);
    assert_eq!(db.iter().unwrap().count(), 500 - 10 + 1 - 3 - 1);
}

#[test]
fn a_range_delete_over_a_million_keys_is_one_record_and_compaction_reclaims_them() {
    const N: u32 = 1_000_000;
    let d = common::dir();
    let opts = Options::default()
        .memtable_size(8 << 20)
        .io_mode(IoClass::WalWrite, AccessMode::Buffered);
    let db = filled(d.path(), N, opts);
    let full = table_bytes(d.path());
    assert!(full > 10 << 20, "{full} bytes of tables for {N} keys");

    let wal_bytes = |db: &Db| {
        db.stats()
            .io
            .iter()
            .find(|(c, _)| *c == IoClass::WalWrite)
            .map(|(_, s)| s.write_bytes)
            .unwrap()
    };
    let (writes, wal, mem) = (db.stats().writes, wal_bytes(&db), db.stats().memtable_bytes);
    let mut b = WriteBatch::new();
    b.delete_range(key(0), key(N)).unwrap();
    db.write(b, WriteOptions { sync: true }).unwrap();
    let s = db.stats();
    assert_eq!(s.writes - writes, 1, "one entry");
    // One record: its header, the batch header, the two keys, a sync mark.
    let wal_growth = wal_bytes(&db) - wal;
    assert!(wal_growth < 200, "the WAL grew by {wal_growth} bytes");
    let mem_growth = s.memtable_bytes - mem;
    assert!(mem_growth < 1024, "the memtable grew by {mem_growth} bytes");

    assert_eq!(db.get(key(N / 2)).unwrap(), None);
    assert_eq!(db.iter().unwrap().count(), 0);
    assert_eq!(db.iter().unwrap().rev().count(), 0);

    // The compaction drops every covered key (no snapshot needs them) and,
    // at the bottom, the tombstone itself.
    db.compact_all().unwrap();
    let after = table_bytes(d.path());
    assert!(after < full / 100, "{after} bytes left of {full}");
    assert_eq!(db.iter().unwrap().count(), 0);
    db.put(key(7), b"back").unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(b"back".to_vec()));
}

/// Data blocks a user read looked up in the block cache, and positional
/// reads of the user-read class (a block not in the cache is read once).
fn user_blocks_read(db: &Db) -> u64 {
    let s = db.stats();
    let reads =
        s.io.iter()
            .find(|(c, _)| *c == IoClass::UserRead)
            .map(|(_, s)| s.read_ops)
            .unwrap();
    s.block_cache.hits + s.block_cache.misses + reads
}

#[test]
fn a_scan_jumps_over_what_a_range_delete_covers_in_older_tables() {
    const N: u32 = 200_000;
    let d = common::dir();
    let opts = Options::default()
        .memtable_size(8 << 20)
        .block_cache_bytes(64 << 20)
        .io_mode(IoClass::WalWrite, AccessMode::Buffered);
    let db = filled(d.path(), N, opts);
    assert!(table_bytes(d.path()) > 2 << 20);
    let before = db.snapshot();
    db.delete_range(key(10)..key(N - 10)).unwrap();
    // Written after the delete, in the middle of it: must stay visible.
    db.put(key(N / 2), format!("v{}", N / 2)).unwrap();
    let want: Vec<Vec<u8>> = (0..10).chain([N / 2]).chain(N - 10..N).map(key).collect();

    // Every covered key sits in the bottom level, older than the tombstone:
    // a scan reads the blocks around the range's ends, not the blocks
    // between them.
    let read = user_blocks_read(&db);
    let got: Vec<Vec<u8>> = db.iter().unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(got, want, "forward");
    let forward = user_blocks_read(&db) - read;
    let read = user_blocks_read(&db);
    let mut back: Vec<Vec<u8>> = db.iter().unwrap().rev().map(|r| r.unwrap().0).collect();
    back.reverse();
    assert_eq!(back, want, "reverse");
    let backward = user_blocks_read(&db) - read;
    // Reading every block of the range would be several hundred.
    assert!(forward < 40, "a forward scan read {forward} blocks");
    assert!(backward < 40, "a reverse scan read {backward} blocks");
    // A seek into the range lands past it as well.
    let from: Vec<Vec<u8>> = db
        .range(key(1000)..)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(from, want[10..]);

    // A snapshot from before the delete still sees every key, both ways.
    assert_eq!(before.iter().unwrap().count(), N as usize);
    assert_eq!(before.iter().unwrap().rev().count(), N as usize);
    drop(before);

    // Once flushed, the tombstone and the newer key are in a table of
    // their own, newer than the bottom level: the same jump.
    db.flush().unwrap();
    let read = user_blocks_read(&db);
    let got: Vec<Vec<u8>> = db.iter().unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(got, want, "forward, tombstone in L0");
    let after_flush = user_blocks_read(&db) - read;
    assert!(after_flush < 40, "read {after_flush} blocks");
}
