//! Keyspaces: persistence, per-keyspace options, drops, WAL retention with
//! an idle keyspace, transactions across keyspaces, and a model test of
//! batches across keyspaces with flushes, compactions and reopens.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use quietkv::{
    check_dir, Db, ErrorKind, Keyspace, KeyspaceOptions, Options, WriteBatch, WriteOptions,
};

fn small() -> Options {
    Options::default()
        .memtable_size(64 << 10)
        .background_threads(1)
}

fn all(ks: &Keyspace) -> Vec<(Vec<u8>, Vec<u8>)> {
    ks.iter().unwrap().collect::<quietkv::Result<_>>().unwrap()
}

#[test]
fn keyspaces_persist_across_reopen_with_their_data_and_options() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), small()).unwrap();
        let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
        let b = db
            .keyspace("b", KeyspaceOptions::default().block_size(1024))
            .unwrap();
        db.put(b"k", b"default").unwrap();
        a.put(b"k", b"in a").unwrap();
        b.put(b"k", b"in b").unwrap();
        a.flush().unwrap();
        // b stays in the WAL only; a in a table; the default keyspace too.
        assert_eq!(db.keyspace_names(), ["default", "a", "b"]);
        assert_eq!(a.stats().unwrap().levels[0].files, 1);
        assert_eq!(b.stats().unwrap().levels[0].files, 0);
    }
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "a", "b"]);
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    let b = db.keyspace("b", KeyspaceOptions::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"default".to_vec()));
    assert_eq!(a.get(b"k").unwrap(), Some(b"in a".to_vec()));
    assert_eq!(b.get(b"k").unwrap(), Some(b"in b".to_vec()));
    // Table options are fixed at creation.
    let e = db
        .keyspace("b", KeyspaceOptions::default().block_size(4096))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("block_size 1024"), "{e}");
    db.keyspace("b", KeyspaceOptions::default().block_size(1024))
        .unwrap();
    drop(db);
    let report = check_dir(dir.path()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn stats_count_every_keyspaces_memtables() {
    let dir = tempfile::tempdir().unwrap();
    // Memtables large enough that nothing flushes on its own.
    let db = Db::open(dir.path(), Options::default().background_threads(1)).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    assert_eq!(db.stats().all_memtables_bytes, 0);
    for i in 0..200u32 {
        db.put(format!("d{i:04}"), [7u8; 100]).unwrap();
        a.put(format!("a{i:04}"), [9u8; 300]).unwrap();
    }
    let (default_bytes, a_bytes) = (
        db.stats().memtable_bytes as u64,
        a.stats().unwrap().memtable_bytes as u64,
    );
    // Each keyspace holds at least its keys and values.
    assert!(default_bytes >= 200 * 105, "{default_bytes}");
    assert!(a_bytes >= 200 * 305, "{a_bytes}");
    assert_eq!(db.stats().all_memtables_bytes, default_bytes + a_bytes);
    // Flushed, the memtables are empty again, in both keyspaces.
    a.flush().unwrap();
    assert_eq!(db.stats().all_memtables_bytes, default_bytes);
    db.flush().unwrap();
    assert_eq!(db.stats().all_memtables_bytes, 0);
}

#[test]
fn block_size_of_a_keyspace_is_used_for_its_tables() {
    let dir = tempfile::tempdir().unwrap();
    let blocks = |dir: &Path| check_dir(dir).unwrap().blocks;
    let fill = |ks: &Keyspace| {
        for i in 0..2000u32 {
            ks.put(format!("key{i:06}"), [b'v'; 100]).unwrap();
        }
        ks.flush().unwrap();
    };
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let tiny = db
            .keyspace("tiny", KeyspaceOptions::default().block_size(256))
            .unwrap();
        fill(&tiny);
    }
    let after_tiny = blocks(dir.path());
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let big = db
            .keyspace("big", KeyspaceOptions::default().block_size(256 << 10))
            .unwrap();
        fill(&big);
    }
    let big_blocks = blocks(dir.path()) - after_tiny;
    // 2000 entries of ~110 bytes: hundreds of 256-byte blocks, a few of
    // 256 KiB (plus each table's index, filter and properties blocks).
    assert!(after_tiny > 500, "{after_tiny}");
    assert!(big_blocks < 20, "{big_blocks}");
}

#[test]
fn dropped_keyspaces_are_gone_with_their_tables_and_handles_refuse_calls() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    for i in 0..100u32 {
        a.put(i.to_be_bytes(), [7u8; 100]).unwrap();
    }
    a.flush().unwrap();
    let tables = |dir: &Path| common::tables(dir).len();
    assert_eq!(tables(dir.path()), 1);
    let it = a.iter().unwrap();
    db.drop_keyspace("a").unwrap();
    // A running iterator keeps the table.
    assert_eq!(tables(dir.path()), 1);
    assert_eq!(it.count(), 100);
    // Obsolete files are deleted after background work: give it some.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let default_tables = |db: &Db| db.stats().levels.iter().map(|l| l.files).sum::<usize>();
    let mut i = 0u32;
    loop {
        db.put(i.to_be_bytes(), b"y").unwrap();
        db.flush().unwrap();
        db.wait_idle().unwrap();
        i += 1;
        if tables(dir.path()) == default_tables(&db) || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The default keyspace's tables are all there is now.
    assert_eq!(
        tables(dir.path()),
        default_tables(&db),
        "the dropped keyspace's table is gone"
    );
    assert_eq!(
        a.get(0u32.to_be_bytes()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        a.put(b"k", b"v").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let mut b = WriteBatch::new();
    assert!(b.put_in(&a, b"k", b"v").is_err());
    assert_eq!(db.keyspace_names(), ["default"]);
    assert!(db.drop_keyspace("a").is_err());
    assert!(db.drop_keyspace("default").is_err());
    drop(db);
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(db.keyspace_names(), ["default"]);
    // Recreated under the same name: a new, empty keyspace.
    let a2 = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    assert!(all(&a2).is_empty());
}

#[test]
fn a_batch_written_while_its_keyspace_is_dropped_fails_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"d", b"1").unwrap();
    batch.put_in(&a, b"a", b"1").unwrap();
    db.drop_keyspace("a").unwrap();
    let e = db.write(batch, WriteOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(
        db.get(b"d").unwrap(),
        None,
        "nothing of the batch was applied"
    );
}

#[test]
fn an_idle_keyspace_does_not_keep_wals_forever() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small().max_total_wal_size(256 << 10);
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let idle = db.keyspace("idle", KeyspaceOptions::default()).unwrap();
    idle.put(b"rare", b"write").unwrap();
    let wals = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".log")
            })
            .count()
    };
    let mut most = 0;
    // About 4 MiB into the default keyspace: some 60 memtable switches.
    for i in 0..4000u32 {
        db.put(i.to_be_bytes(), [1u8; 1000]).unwrap();
        if i % 100 == 0 {
            db.wait_idle().unwrap();
            most = most.max(wals(dir.path()));
        }
    }
    db.wait_idle().unwrap();
    most = most.max(wals(dir.path()));
    // The limit is 4 memtables of WAL; a few more are in flight.
    assert!(most <= 10, "{most} WAL files kept for one idle keyspace");
    assert_eq!(
        idle.stats().unwrap().levels[0].files,
        1,
        "the idle keyspace was flushed"
    );
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    let idle = db.keyspace("idle", KeyspaceOptions::default()).unwrap();
    assert_eq!(idle.get(b"rare").unwrap(), Some(b"write".to_vec()));
}

#[test]
fn transactions_conflict_per_keyspace_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    let b = db.keyspace("b", KeyspaceOptions::default()).unwrap();
    a.put(b"k", b"1").unwrap();

    // Read a:k, write b:k; a write of the same key in another keyspace
    // is no conflict.
    let mut t = db.transaction();
    assert_eq!(t.get_in(&a, b"k").unwrap(), Some(b"1".to_vec()));
    t.put_in(&b, b"k", b"from txn").unwrap();
    assert_eq!(t.get_in(&b, b"k").unwrap(), Some(b"from txn".to_vec()));
    db.put(b"k", b"default").unwrap();
    t.commit().unwrap();
    assert_eq!(b.get(b"k").unwrap(), Some(b"from txn".to_vec()));

    // A write of a:k after the read makes the commit fail; nothing applied.
    let mut t = db.transaction();
    t.get_in(&a, b"k").unwrap();
    t.put_in(&b, b"k2", b"x").unwrap();
    t.put(b"d", b"x").unwrap();
    a.put(b"k", b"2").unwrap();
    let e = t.commit().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(b.get(b"k2").unwrap(), None);
    assert_eq!(db.get(b"d").unwrap(), None);

    // A write of a key the transaction wrote in a keyspace conflicts too.
    let mut t = db.transaction();
    t.put_in(&a, b"w", b"txn").unwrap();
    a.put(b"w", b"other").unwrap();
    assert_eq!(t.commit().unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(a.get(b"w").unwrap(), Some(b"other".to_vec()));
}

#[test]
fn snapshots_read_every_keyspace_at_one_point() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"d1").unwrap();
    batch.put_in(&a, b"k", b"a1").unwrap();
    db.write(batch, WriteOptions::default()).unwrap();
    let snap = db.snapshot();
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"d2").unwrap();
    batch.put_in(&a, b"k", b"a2").unwrap();
    batch.delete_range_in(&a, &b"a"[..]..&b"z"[..]).unwrap();
    batch.put_in(&a, b"z", b"after").unwrap();
    db.write(batch, WriteOptions::default()).unwrap();
    a.compact_all().unwrap();
    let other = std::thread::spawn(move || {
        (
            snap.get(b"k").unwrap(),
            snap.get_in(&a, b"k").unwrap(),
            snap.iter_in(&a).unwrap().count(),
        )
    })
    .join()
    .unwrap();
    assert_eq!(other, (Some(b"d1".to_vec()), Some(b"a1".to_vec()), 1));
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    assert_eq!(all(&a), vec![(b"z".to_vec(), b"after".to_vec())]);
}

#[test]
fn checkpoints_hold_every_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let cp = out.path().join("cp");
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db
        .keyspace("a", KeyspaceOptions::default().block_size(512))
        .unwrap();
    let b = db.keyspace("b", KeyspaceOptions::default()).unwrap();
    for i in 0..500u32 {
        a.put(i.to_be_bytes(), b"a").unwrap();
        b.put(i.to_be_bytes(), b"b").unwrap();
    }
    a.flush().unwrap(); // a in a table, b in its memtable
    db.put(b"d", b"d").unwrap();
    db.checkpoint(&cp).unwrap();
    a.put(b"later", b"x").unwrap();
    drop(db);
    let copy = Db::open(&cp, small()).unwrap();
    assert_eq!(copy.keyspace_names(), ["default", "a", "b"]);
    let a = copy
        .keyspace("a", KeyspaceOptions::default().block_size(512))
        .unwrap();
    let b = copy.keyspace("b", KeyspaceOptions::default()).unwrap();
    assert_eq!(all(&a).len(), 500);
    assert_eq!(all(&b).len(), 500);
    assert_eq!(b.get(7u32.to_be_bytes()).unwrap(), Some(b"b".to_vec()));
    assert_eq!(copy.get(b"d").unwrap(), Some(b"d".to_vec()));
    assert_eq!(a.get(b"later").unwrap(), None);
}

#[test]
fn read_only_opens_see_keyspaces_and_cannot_create_them() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), small()).unwrap();
        let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
        a.put(b"k", b"v").unwrap();
    }
    let db = Db::open_read_only(dir.path(), small()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    assert_eq!(a.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(
        db.keyspace("new", KeyspaceOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::ReadOnly
    );
}

// ------------------------------------------------------------ model test

#[derive(Debug, Clone)]
enum Op {
    Put(usize, u8, u8),
    Delete(usize, u8),
    DeleteRange(usize, u8, u8),
    /// Writes to several keyspaces in one batch.
    Batch(Vec<(usize, u8, Option<u8>)>),
    Flush(usize),
    Compact(usize),
    Reopen,
}

const KEYSPACES: [&str; 3] = ["default", "a", "b"];

fn op() -> impl Strategy<Value = Op> {
    let ks = 0..KEYSPACES.len();
    prop_oneof![
        6 => (ks.clone(), any::<u8>(), any::<u8>()).prop_map(|(k, key, v)| Op::Put(k, key, v)),
        2 => (ks.clone(), any::<u8>()).prop_map(|(k, key)| Op::Delete(k, key)),
        1 => (ks.clone(), any::<u8>(), any::<u8>()).prop_map(|(k, a, b)| Op::DeleteRange(k, a.min(b), a.max(b))),
        4 => prop::collection::vec((ks.clone(), any::<u8>(), prop::option::of(any::<u8>())), 1..8).prop_map(Op::Batch),
        1 => ks.clone().prop_map(Op::Flush),
        1 => ks.prop_map(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
}

fn value(v: u8) -> Vec<u8> {
    // Long enough that a few hundred writes switch memtables.
    vec![v; 300]
}

fn open_all(dir: &Path) -> (Db, Vec<Keyspace>) {
    let opts = Options::default()
        .memtable_size(16 << 10)
        .background_threads(1);
    let db = Db::open(dir, opts).unwrap();
    let handles = KEYSPACES
        .iter()
        .map(|n| db.keyspace(n, KeyspaceOptions::default()).unwrap())
        .collect();
    (db, handles)
}

fn check(handles: &[Keyspace], model: &BTreeMap<(usize, Vec<u8>), Vec<u8>>, when: &str) {
    for (i, ks) in handles.iter().enumerate() {
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .range((i, Vec::new())..(i + 1, Vec::new()))
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(all(ks), want, "keyspace {} {when}", KEYSPACES[i]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn keyspaces_match_a_model(ops in prop::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let (mut db, mut hs) = open_all(dir.path());
        let mut model: BTreeMap<(usize, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for op in &ops {
            match op {
                Op::Put(k, key_, v) => {
                    hs[*k].put(key(*key_), value(*v)).unwrap();
                    model.insert((*k, key(*key_)), value(*v));
                }
                Op::Delete(k, key_) => {
                    hs[*k].delete(key(*key_)).unwrap();
                    model.remove(&(*k, key(*key_)));
                }
                Op::DeleteRange(k, a, b) => {
                    hs[*k].delete_range(key(*a)..key(*b)).unwrap();
                    let doomed: Vec<_> = model
                        .range((*k, key(*a))..(*k, key(*b)))
                        .map(|(x, _)| x.clone())
                        .collect();
                    for d in doomed {
                        model.remove(&d);
                    }
                }
                Op::Batch(entries) => {
                    let mut batch = WriteBatch::new();
                    for (k, key_, v) in entries {
                        match v {
                            Some(v) => {
                                batch.put_in(&hs[*k], key(*key_), value(*v)).unwrap();
                                model.insert((*k, key(*key_)), value(*v));
                            }
                            None => {
                                batch.delete_in(&hs[*k], key(*key_)).unwrap();
                                model.remove(&(*k, key(*key_)));
                            }
                        }
                    }
                    db.write(batch, WriteOptions::default()).unwrap();
                }
                Op::Flush(k) => hs[*k].flush().unwrap(),
                Op::Compact(k) => hs[*k].compact_all().unwrap(),
                Op::Reopen => {
                    drop(hs);
                    db.close().unwrap();
                    (db, hs) = open_all(dir.path());
                    check(&hs, &model, "after reopen");
                }
            }
        }
        check(&hs, &model, "at the end");
        drop(hs);
        db.close().unwrap();
        let (_db, hs) = open_all(dir.path());
        check(&hs, &model, "after the last reopen");
    }
}

/// Removes values equal to `b"drop"`.
#[derive(Debug)]
struct DropMarked;

impl quietkv::CompactionFilter for DropMarked {
    fn filter(&self, _key: &[u8], value: &[u8]) -> quietkv::FilterDecision {
        if value == b"drop" {
            quietkv::FilterDecision::Remove
        } else {
            quietkv::FilterDecision::Keep
        }
    }
}

#[test]
fn a_keyspace_compaction_filter_applies_to_that_keyspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let filtered = db
        .keyspace(
            "filtered",
            KeyspaceOptions::default().compaction_filter(std::sync::Arc::new(DropMarked)),
        )
        .unwrap();
    let plain = db.keyspace("plain", KeyspaceOptions::default()).unwrap();
    for ks in [&filtered, &plain] {
        // Two overlapping tables, so the full compaction merges (a move
        // of a lone table would not offer its entries to the filter).
        ks.put(b"a", b"old").unwrap();
        ks.put(b"b", b"keep").unwrap();
        ks.flush().unwrap();
        ks.put(b"a", b"drop").unwrap();
        ks.flush().unwrap();
        ks.compact_all().unwrap();
    }
    db.put(b"a", b"drop").unwrap();
    db.compact_all().unwrap();
    assert_eq!(all(&filtered), vec![(b"b".to_vec(), b"keep".to_vec())]);
    assert_eq!(all(&plain).len(), 2);
    assert_eq!(db.get(b"a").unwrap(), Some(b"drop".to_vec()));
}

#[test]
fn backups_hold_every_keyspace_and_restore_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (bk, restored) = (out.path().join("bk"), out.path().join("restored"));
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    for i in 0..300u32 {
        a.put(i.to_be_bytes(), b"a").unwrap();
    }
    a.flush().unwrap();
    a.put(b"in-memtable", b"a").unwrap();
    db.put(b"d", b"d").unwrap();
    db.backup(&bk).unwrap();
    // A second point, incremental, after a drop and a new keyspace.
    db.drop_keyspace("a").unwrap();
    let b = db.keyspace("b", KeyspaceOptions::default()).unwrap();
    b.put(b"k", b"b").unwrap();
    db.backup(&bk).unwrap();
    drop(db);
    quietkv::verify_backup(&bk).unwrap();
    quietkv::restore(&bk, &restored).unwrap();
    let r = Db::open(&restored, small()).unwrap();
    assert_eq!(r.keyspace_names(), ["default", "b"]);
    let b = r.keyspace("b", KeyspaceOptions::default()).unwrap();
    assert_eq!(b.get(b"k").unwrap(), Some(b"b".to_vec()));
    drop(r);
    let first = out.path().join("first");
    let points = quietkv::verify_backup(&bk).unwrap();
    let oldest = points.iter().map(|p| p.point).min().unwrap();
    quietkv::restore_point(&bk, oldest, &first).unwrap();
    let r = Db::open(&first, small()).unwrap();
    assert_eq!(r.keyspace_names(), ["default", "a"]);
    let a = r.keyspace("a", KeyspaceOptions::default()).unwrap();
    assert_eq!(all(&a).len(), 301);
    assert_eq!(r.get(b"d").unwrap(), Some(b"d".to_vec()));
}

#[test]
fn dropping_a_keyspace_while_it_is_written_and_flushed_leaves_the_database_working() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    for round in 0..5u32 {
        let name = format!("busy{round}");
        let ks = db.keyspace(&name, KeyspaceOptions::default()).unwrap();
        let writer = {
            let ks = ks.clone();
            std::thread::spawn(move || {
                // Until the drop stops it.
                for i in 0u32.. {
                    let r = ks.put(i.to_be_bytes(), [3u8; 200]).and_then(|()| {
                        if i % 100 == 0 {
                            ks.flush()
                        } else {
                            Ok(())
                        }
                    });
                    if let Err(e) = r {
                        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
                        return i;
                    }
                }
                unreachable!("the keyspace was dropped")
            })
        };
        // Drop it once the writer is under way (a busy machine may start
        // the thread late).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while ks.get(0u32.to_be_bytes()).unwrap().is_none() && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(10 * round as u64));
        db.drop_keyspace(&name).unwrap();
        let written = writer.join().unwrap();
        assert!(written > 0, "the drop came before any write");
        // No background error: the default keyspace still takes writes.
        db.put(b"after", round.to_be_bytes()).unwrap();
        db.flush().unwrap();
        db.wait_idle().unwrap();
        assert!(db.stats().background_error.is_none());
    }
    assert_eq!(db.keyspace_names(), ["default"]);
    drop(db);
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(db.keyspace_names(), ["default"]);
    assert_eq!(db.get(b"after").unwrap(), Some(4u32.to_be_bytes().to_vec()));
}

#[test]
fn transactions_iterate_other_keyspaces_over_their_own_writes_and_track_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    for k in [b"k1", b"k2", b"k3"] {
        a.put(k, b"old").unwrap();
    }
    db.put(b"k9", b"default").unwrap();
    let mut t = db.transaction();
    t.put_in(&a, b"k2", b"mine").unwrap();
    t.delete_in(&a, b"k3").unwrap();
    t.put_in(&a, b"k4", b"new").unwrap();
    let seen: Vec<_> = t.iter_in(&a).unwrap().map(Result::unwrap).collect();
    assert_eq!(
        seen,
        vec![
            (b"k1".to_vec(), b"old".to_vec()),
            (b"k2".to_vec(), b"mine".to_vec()),
            (b"k4".to_vec(), b"new".to_vec()),
        ]
    );
    assert_eq!(t.prefix_in(&a, b"k4").unwrap().count(), 1);
    assert_eq!(t.range_in(&a, &b"k2"[..]..).unwrap().rev().count(), 2);
    // k1 came from the snapshot through the iterator: written since, the
    // commit conflicts.
    a.put(b"k1", b"other").unwrap();
    assert_eq!(t.commit().unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(a.get(b"k4").unwrap(), None);
}
