//! Optimistic transactions and compare-and-swap: a transaction reads its
//! snapshot with its own writes laid over (checked against a model), its
//! commit fails on a write to a key it read or wrote since it began (by
//! another transaction or a plain write, also once that write is in a
//! table) and then applies nothing, concurrent read-modify-write loses no
//! update, and a committed transaction survives a crash while an
//! uncommitted one leaves nothing.

mod common;
use common::{dir, small};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use quietkv::fault::{CutPolicy, FaultLayer};
use quietkv::{Db, ErrorKind, Options, Transaction, TxnIter, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn is_conflict(r: &quietkv::Result<()>) -> bool {
    matches!(r, Err(e) if e.kind() == ErrorKind::Conflict)
}

fn collect(it: TxnIter<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.collect::<quietkv::Result<_>>().unwrap()
}

#[test]
fn transactions_and_their_iterators_are_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Transaction>();
    assert_send::<TxnIter<'static>>();
}

#[derive(Debug, Clone)]
enum Op {
    Put(u32, Vec<u8>),
    Delete(u32),
    Get(u32),
    /// `a..b`, forward or backward.
    Range(u32, u32, bool),
    /// `a..=b`, alternating `next` and `next_back`.
    Zigzag(u32, u32),
    /// Keys starting with the first `n` bytes of `key(k)`.
    Prefix(u32, usize),
    /// A plain write by someone else to a key outside what the snapshot
    /// holds: the transaction must not see it.
    Outside(u32),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u32..60;
    prop_oneof![
        6 => (k.clone(), proptest::collection::vec(any::<u8>(), 0..20)).prop_map(|(k, v)| Op::Put(k, v)),
        3 => k.clone().prop_map(Op::Delete),
        4 => k.clone().prop_map(Op::Get),
        3 => (k.clone(), k.clone(), any::<bool>()).prop_map(|(a, b, f)| Op::Range(a, b, f)),
        2 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Zigzag(a.min(b), a.max(b))),
        2 => (k.clone(), 0usize..5).prop_map(|(k, n)| Op::Prefix(k, n)),
        2 => (1000u32..1100).prop_map(Op::Outside),
    ]
}

fn model_range(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    lo: &[u8],
    hi: &[u8],
) -> Vec<(Vec<u8>, Vec<u8>)> {
    if lo >= hi {
        return Vec::new();
    }
    model
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A transaction reads its own writes over its snapshot, by point
    /// reads, ranges (both ways, and both ends mixed) and prefixes; writes
    /// by others after it began stay invisible; its commit applies exactly
    /// its writes.
    #[test]
    fn a_transaction_reads_its_own_writes_like_a_model(
        base in proptest::collection::btree_map(0u32..60, proptest::collection::vec(any::<u8>(), 0..20), 0..40),
        flush_base in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let tmp = dir();
        let db = Db::open(tmp.path(), small()).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (k, v) in &base {
            db.put(key(*k), v).unwrap();
            model.insert(key(*k), v.clone());
        }
        if flush_base {
            db.flush().unwrap();
        }
        let mut outside = BTreeMap::new();
        let before = model.clone();
        let mut txn = db.transaction();
        for op in &ops {
            match op {
                Op::Put(k, v) => {
                    txn.put(key(*k), v).unwrap();
                    model.insert(key(*k), v.clone());
                }
                Op::Delete(k) => {
                    txn.delete(key(*k)).unwrap();
                    model.remove(&key(*k));
                }
                Op::Get(k) => {
                    prop_assert_eq!(txn.get(key(*k)).unwrap(), model.get(&key(*k)).cloned());
                }
                Op::Range(a, b, forward) => {
                    let (lo, hi) = (key(*a), key(*b));
                    let mut want = model_range(&model, &lo, &hi);
                    let it = txn.range(lo.as_slice()..hi.as_slice()).unwrap();
                    let got = if *forward {
                        collect(it)
                    } else {
                        want.reverse();
                        it.rev().collect::<quietkv::Result<_>>().unwrap()
                    };
                    prop_assert_eq!(got, want);
                }
                Op::Zigzag(a, b) => {
                    let (lo, hi) = (key(*a), key(*b));
                    let mut want: std::collections::VecDeque<_> = model
                        .range(lo.clone()..=hi.clone())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    let mut it = txn.range(lo.as_slice()..=hi.as_slice()).unwrap();
                    for step in 0.. {
                        let (got, exp) = if step % 2 == 0 {
                            (it.next(), want.pop_front())
                        } else {
                            (it.next_back(), want.pop_back())
                        };
                        let got = got.map(|r| r.unwrap());
                        let end = got.is_none();
                        prop_assert_eq!(got, exp);
                        if end {
                            break;
                        }
                    }
                }
                Op::Prefix(k, n) => {
                    let full = key(*k);
                    let p = &full[..(*n).min(full.len())];
                    let want: Vec<_> = model
                        .iter()
                        .filter(|(k, _)| k.starts_with(p))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    prop_assert_eq!(collect(txn.prefix(p).unwrap()), want);
                }
                Op::Outside(k) => {
                    db.put(key(*k), b"outside").unwrap();
                    outside.insert(key(*k), b"outside".to_vec());
                    prop_assert_eq!(txn.get(key(*k + 1000)).unwrap(), None);
                }
            }
        }
        prop_assert_eq!(collect(txn.iter().unwrap()), model.clone().into_iter().collect::<Vec<_>>());
        // Keys written by others after the snapshot were never returned to
        // the transaction (nor read: `Outside` reads a different key), but
        // the full scan just above covered them: any such key is a phantom
        // and the commit fails, applying nothing; without one it goes
        // through.
        let result = txn.commit();
        if outside.is_empty() {
            result.unwrap();
        } else {
            prop_assert!(is_conflict(&result), "{:?}", result);
            model = before;
        }
        model.extend(outside);
        let all: Vec<_> = db.iter().unwrap().collect::<quietkv::Result<_>>().unwrap();
        prop_assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    }
}

#[test]
fn a_plain_write_to_a_key_read_written_or_returned_by_an_iterator_conflicts() {
    let tmp = dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.put(b"read", b"1").unwrap();
    db.put(b"scanned", b"1").unwrap();

    // Read with `get`; the message names the key.
    let txn = db.transaction();
    assert_eq!(txn.get(b"read").unwrap(), Some(b"1".to_vec()));
    db.put(b"read", b"2").unwrap();
    let err = txn.commit().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("\"read\""), "{err}");

    // Read as absent, then created by someone else.
    let mut txn = db.transaction();
    assert_eq!(txn.get(b"absent").unwrap(), None);
    txn.put(b"other", b"x").unwrap();
    db.put(b"absent", b"now here").unwrap();
    assert!(is_conflict(&txn.commit()));

    // Only written (blind write), and written by someone else meanwhile.
    let mut txn = db.transaction();
    txn.put(b"blind", b"mine").unwrap();
    db.put(b"blind", b"theirs").unwrap();
    assert!(is_conflict(&txn.commit()));
    assert_eq!(db.get(b"blind").unwrap(), Some(b"theirs".to_vec()));

    // Returned by an iterator (walking backwards), then deleted by someone.
    let mut txn = db.transaction();
    let seen: Vec<_> = txn
        .prefix(b"scan")
        .unwrap()
        .rev()
        .collect::<quietkv::Result<_>>()
        .unwrap();
    assert_eq!(seen.len(), 1);
    txn.put(b"other", b"x").unwrap();
    db.delete(b"scanned").unwrap();
    assert!(is_conflict(&txn.commit()));

    // A read-only transaction is checked too.
    let txn = db.transaction();
    txn.get(b"read").unwrap();
    db.put(b"read", b"3").unwrap();
    assert!(is_conflict(&txn.commit()));

    // Writes to keys it neither read nor wrote, outside the ranges it
    // scanned, do not conflict (inside them they do: see
    // tests/transaction_ranges.rs).
    let mut txn = db.transaction();
    assert_eq!(collect(txn.range(&b"s"[..]..&b"t"[..]).unwrap()).len(), 0);
    txn.put(b"mine", b"1").unwrap();
    db.put(b"unrelated", b"1").unwrap();
    db.put(b"t-just-past-the-range", b"1").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get(b"mine").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"other").unwrap(), None, "no failed commit applied");
}

#[test]
fn write_skew_on_keys_both_read_is_refused() {
    let tmp = dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.put(b"x", b"1").unwrap();
    db.put(b"y", b"1").unwrap();
    // Invariant: at least one of x and y stays 1. Each transaction checks
    // it and sets one of them to 0.
    let mut t1 = db.transaction();
    let mut t2 = db.transaction();
    for (t, mine) in [(&mut t1, &b"x"[..]), (&mut t2, &b"y"[..])] {
        let ones = [&b"x"[..], b"y"]
            .iter()
            .filter(|k| t.get(k).unwrap() == Some(b"1".to_vec()))
            .count();
        assert_eq!(ones, 2);
        t.put(mine, b"0").unwrap();
    }
    t1.commit().unwrap();
    let err = t2.commit().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("\"x\""), "{err}");
    assert_eq!(db.get(b"x").unwrap(), Some(b"0".to_vec()));
    assert_eq!(db.get(b"y").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn a_failed_commit_applies_nothing() {
    let tmp = dir();
    let db = Db::open(tmp.path(), small()).unwrap();
    for i in 0..100 {
        db.put(key(i), b"before").unwrap();
    }
    let mut txn = db.transaction();
    for i in 0..100 {
        txn.get(key(i)).unwrap();
        if i % 3 == 0 {
            txn.delete(key(i)).unwrap();
        } else {
            txn.put(key(i), b"txn").unwrap();
        }
    }
    for i in 100..150 {
        txn.put(key(i), b"txn").unwrap();
    }
    // The conflicting write comes last in key order: nothing before it
    // may have been applied either.
    db.put(key(149), b"other").unwrap();
    assert!(is_conflict(&txn.commit()));
    for i in 0..100 {
        assert_eq!(db.get(key(i)).unwrap(), Some(b"before".to_vec()), "key {i}");
    }
    for i in 100..149 {
        assert_eq!(db.get(key(i)).unwrap(), None, "key {i}");
    }
    assert_eq!(db.get(key(149)).unwrap(), Some(b"other".to_vec()));
}

#[test]
fn conflicts_are_found_when_the_newer_version_is_in_a_table() {
    let tmp = dir();
    let db = Db::open(tmp.path(), small()).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"1").unwrap();
    db.put(b"c", b"1").unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();

    // Old versions in tables are no conflict.
    let mut txn = db.transaction();
    assert_eq!(txn.get(b"a").unwrap(), Some(b"1".to_vec()));
    txn.put(b"a", b"2").unwrap();
    txn.commit().unwrap();

    // A newer put and a newer delete, both flushed and compacted away from
    // the memtable while the transactions wait.
    let mut t_put = db.transaction();
    t_put.get(b"b").unwrap();
    t_put.put(b"x", b"1").unwrap();
    let mut t_del = db.transaction();
    t_del.get(b"c").unwrap();
    t_del.put(b"y", b"1").unwrap();
    db.put(b"b", b"2").unwrap();
    db.delete(b"c").unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();
    assert_eq!(db.stats().levels[0].files, 0, "everything left L0");
    assert!(is_conflict(&t_put.commit()));
    assert!(is_conflict(&t_del.commit()));
    assert_eq!(db.get(b"x").unwrap(), None);
    assert_eq!(db.get(b"y").unwrap(), None);

    // And a commit across a flush goes through when nobody else wrote.
    let mut txn = db.transaction();
    txn.get(b"b").unwrap();
    txn.put(b"b", b"3").unwrap();
    for i in 0..2000 {
        db.put(key(i), [7u8; 100]).unwrap();
    }
    db.flush().unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"3".to_vec()));
}

#[test]
fn a_range_delete_over_a_key_read_conflicts_in_the_memtable_and_in_a_table() {
    let tmp = dir();
    let db = Db::open(tmp.path(), small()).unwrap();
    for k in [b"a", b"m", b"z"] {
        db.put(k, b"1").unwrap();
    }
    for flushed in [false, true] {
        let mut reader = db.transaction();
        reader.get(b"m").unwrap();
        reader.put(b"out", b"1").unwrap();
        let mut outside = db.transaction();
        outside.get(b"z").unwrap();
        outside.put(b"z", b"2").unwrap();
        db.delete_range(&b"b"[..]..&b"n"[..]).unwrap();
        if flushed {
            db.flush().unwrap();
            db.compact_all().unwrap();
        }
        // The range covers "m": the reader's snapshot is stale.
        assert!(is_conflict(&reader.commit()), "flushed: {flushed}");
        assert_eq!(db.get(b"out").unwrap(), None);
        // "z" is past the range: no conflict.
        outside.commit().unwrap();
        db.put(b"m", b"1").unwrap();
    }
}

fn read_u64(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |b| u64::from_le_bytes(b.as_slice().try_into().unwrap()))
}

#[test]
fn concurrent_read_modify_write_transactions_lose_no_update() {
    const THREADS: u64 = 8;
    const COMMITS: u64 = 150;
    const COUNTERS: u32 = 3;
    let tmp = dir();
    let db = Arc::new(Db::open(tmp.path(), small()).unwrap());
    let conflicts = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, conflicts) = (db.clone(), conflicts.clone());
            std::thread::spawn(move || {
                let mut done = 0;
                while done < COMMITS {
                    // Read every counter (so all of them are in the read
                    // set), bump one.
                    let mut txn = db.transaction();
                    let which = ((t + done) % COUNTERS as u64) as u32;
                    let mut values = Vec::new();
                    for c in 0..COUNTERS {
                        values.push(read_u64(txn.get(key(c)).unwrap()));
                    }
                    txn.put(key(which), (values[which as usize] + 1).to_le_bytes())
                        .unwrap();
                    match txn.commit() {
                        Ok(()) => done += 1,
                        Err(e) if e.kind() == ErrorKind::Conflict => {
                            conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let total: u64 = (0..COUNTERS)
        .map(|c| read_u64(db.get(key(c)).unwrap()))
        .sum();
    assert_eq!(total, THREADS * COMMITS);
    eprintln!("{} conflicts retried", conflicts.load(Ordering::Relaxed));
}

#[test]
fn compare_and_swap_compares_the_value_and_reports_what_it_found() {
    let tmp = dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    // Absent expected: create.
    db.compare_and_swap(b"k", None, Some(b"1".as_slice()))
        .unwrap()
        .unwrap();
    let miss = db
        .compare_and_swap(b"k", None, Some(b"2".as_slice()))
        .unwrap()
        .unwrap_err();
    assert_eq!(miss.current, Some(b"1".to_vec()));
    let miss = db
        .compare_and_swap(b"k", Some(b"0".as_slice()), Some(b"2".as_slice()))
        .unwrap()
        .unwrap_err();
    assert_eq!(miss.current, Some(b"1".to_vec()));
    assert_eq!(db.get(b"k").unwrap(), Some(b"1".to_vec()));
    // Swap, then delete.
    db.compare_and_swap(b"k", Some(b"1".as_slice()), Some(b"2".as_slice()))
        .unwrap()
        .unwrap();
    db.compare_and_swap(b"k", Some(b"2".as_slice()), None)
        .unwrap()
        .unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    let miss = db
        .compare_and_swap(b"k", Some(b"2".as_slice()), None)
        .unwrap()
        .unwrap_err();
    assert_eq!(miss.current, None);
    // Bad input is an error of the store, not a mismatch.
    let long = vec![0u8; quietkv::MAX_KEY_LEN + 1];
    assert_eq!(
        db.compare_and_swap(&long, None, None).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn compare_and_swap_and_fetch_update_counters_lose_no_update_under_threads() {
    const THREADS: u64 = 8;
    const ROUNDS: u64 = 200;
    let tmp = dir();
    let db = Arc::new(Db::open(tmp.path(), small()).unwrap());
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..ROUNDS {
                    // A CAS loop on one counter...
                    let mut current = db.get(b"cas").unwrap();
                    loop {
                        let next = (read_u64(current.clone()) + 1).to_le_bytes();
                        match db
                            .compare_and_swap(b"cas", current.as_deref(), Some(next.as_slice()))
                            .unwrap()
                        {
                            Ok(()) => break,
                            Err(miss) => current = miss.current,
                        }
                    }
                    // ...fetch_update on another, and plain puts beside
                    // them that must not disturb either.
                    db.fetch_update(b"fetch", |v| {
                        Some((read_u64(v.map(<[u8]>::to_vec)) + 1).to_le_bytes().to_vec())
                    })
                    .unwrap();
                    db.put(format!("noise{t}-{i}"), [1u8; 64]).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(read_u64(db.get(b"cas").unwrap()), THREADS * ROUNDS);
    assert_eq!(read_u64(db.get(b"fetch").unwrap()), THREADS * ROUNDS);
}

#[test]
fn a_committed_transaction_survives_a_crash_and_an_uncommitted_one_leaves_nothing() {
    let root = dir();
    let db_dir = root.path().join("db");
    let layer = FaultLayer::new(&db_dir).unwrap();
    let mut opts = Options::default();
    opts.fault_layer = Some(layer.clone());
    let db = Db::open(&db_dir, opts).unwrap();
    db.put(b"base", b"1").unwrap();

    let mut synced = db.transaction();
    synced.put(b"synced-a", b"1").unwrap();
    synced.put(b"synced-b", b"1").unwrap();
    synced.delete(b"base").unwrap();
    synced.commit_with(WriteOptions { sync: true }).unwrap();

    let mut unsynced = db.transaction();
    unsynced.put(b"unsynced", b"1").unwrap();
    unsynced.commit().unwrap();

    let mut open_txn = db.transaction();
    open_txn.put(b"uncommitted", b"1").unwrap();
    open_txn.get(b"synced-a").unwrap();

    // A power cut keeps what was synced; a process crash keeps what was
    // handed to the kernel too. Neither has the uncommitted transaction.
    for (policy, unsynced_survives) in [
        (CutPolicy::DropUnsynced, false),
        (CutPolicy::KeepUnsynced, true),
    ] {
        let image = root.path().join(format!("{policy:?}"));
        layer.power_cut_image(&image, policy).unwrap();
        let after = Db::open(&image, Options::default()).unwrap();
        assert_eq!(after.get(b"synced-a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(after.get(b"synced-b").unwrap(), Some(b"1".to_vec()));
        assert_eq!(after.get(b"base").unwrap(), None);
        assert_eq!(
            after.get(b"unsynced").unwrap().is_some(),
            unsynced_survives,
            "{policy:?}"
        );
        assert_eq!(after.get(b"uncommitted").unwrap(), None);
        after.close().unwrap();
    }
    drop(open_txn);
    db.close().unwrap();
    let db = Db::open(&db_dir, Options::default()).unwrap();
    assert_eq!(db.get(b"uncommitted").unwrap(), None);
    assert_eq!(db.get(b"unsynced").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn commits_on_a_closed_or_read_only_database_are_refused_with_their_reason() {
    let tmp = dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.put(b"k", b"1").unwrap();
    let mut txn = db.transaction();
    txn.put(b"k", b"2").unwrap();
    db.close().unwrap();
    // The transaction outlives the handle, as a snapshot does: it still
    // reads, but cannot commit.
    assert_eq!(txn.get(b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(txn.commit().unwrap_err().kind(), ErrorKind::Closed);

    let ro = Db::open_read_only(tmp.path(), Options::default()).unwrap();
    let reader = ro.transaction();
    assert_eq!(reader.get(b"k").unwrap(), Some(b"1".to_vec()));
    reader.commit().unwrap(); // only read: nothing can have changed
    let mut writer = ro.transaction();
    writer.put(b"k", b"3").unwrap();
    assert_eq!(writer.commit().unwrap_err().kind(), ErrorKind::ReadOnly);
}
