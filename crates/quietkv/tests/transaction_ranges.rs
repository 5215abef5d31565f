//! Range conflicts of optimistic transactions: a write since the snapshot
//! of any key in the part of a range a transaction's iterator covered (a
//! phantom insert, a delete, a range delete over it) makes its commit fail,
//! also once the write is in a table; a write beyond where an iterator
//! stopped, or in another keyspace, does not. Checked against a model of
//! what each iterator covered, and by threads that each keep a prefix at
//! no more than N keys (write skew through a phantom).

mod common;
use common::{dir, small};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use proptest::prelude::*;
use quietkv::{Db, ErrorKind, KeyspaceOptions, Options, TxnIter};

fn is_conflict(r: &quietkv::Result<()>) -> bool {
    matches!(r, Err(e) if e.kind() == ErrorKind::Conflict)
}

fn keys(it: TxnIter<'_>) -> Vec<Vec<u8>> {
    it.map(|r| r.unwrap().0).collect()
}

fn open_with(keys: &[&[u8]]) -> (tempfile::TempDir, Db) {
    let tmp = dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    for k in keys {
        db.put(k, b"1").unwrap();
    }
    (tmp, db)
}

#[test]
fn a_key_inserted_into_a_scanned_range_conflicts_forward_backward_and_by_prefix() {
    let (_tmp, db) = open_with(&[b"a", b"c", b"e", b"p:1", b"p:3", b"q"]);

    // A range read to its end; the insert lands between keys it returned.
    let mut txn = db.transaction();
    assert_eq!(keys(txn.range(&b"b"[..]..&b"f"[..]).unwrap()).len(), 2);
    txn.put(b"mine", b"1").unwrap();
    db.put(b"d", b"phantom").unwrap();
    let err = txn.commit().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("key \"d\""), "{err}");
    assert!(err.to_string().contains("[\"b\", \"f\")"), "{err}");
    assert_eq!(db.get(b"mine").unwrap(), None, "nothing applied");

    // The same backwards, the insert before the first key it returned
    // but inside the range.
    let txn = db.transaction();
    let back: Vec<_> = txn
        .range(&b"b"[..]..&b"f"[..])
        .unwrap()
        .rev()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(back, vec![b"e".to_vec(), b"d".to_vec(), b"c".to_vec()]);
    db.put(b"bb", b"phantom").unwrap();
    assert!(is_conflict(&txn.commit()));

    // A prefix scan: an insert with the prefix conflicts (the count the
    // transaction made is stale) ...
    let mut txn = db.transaction();
    assert_eq!(txn.prefix(b"p:").unwrap().count(), 2);
    txn.put(b"p:2", b"mine").unwrap();
    db.put(b"p:9", b"theirs").unwrap();
    assert!(is_conflict(&txn.commit()));
    // ... one just past the prefix does not.
    let mut txn = db.transaction();
    assert_eq!(txn.prefix(b"p:").unwrap().count(), 3);
    txn.put(b"p:4", b"mine").unwrap();
    db.put(b"p;", b"theirs").unwrap();
    db.put(b"p", b"theirs").unwrap();
    txn.commit().unwrap();

    // An empty range read to its end covers it too.
    let txn = db.transaction();
    assert_eq!(txn.prefix(b"none:").unwrap().count(), 0);
    db.put(b"none:1", b"x").unwrap();
    assert!(is_conflict(&txn.commit()));

    // The whole keyspace, and an inclusive end.
    let txn = db.transaction();
    txn.iter().unwrap().for_each(drop);
    db.put(b"zzz", b"x").unwrap();
    assert!(is_conflict(&txn.commit()));
    let txn = db.transaction();
    assert_eq!(keys(txn.range(&b"q"[..]..=&b"r"[..]).unwrap()).len(), 1);
    db.put(b"r", b"x").unwrap();
    assert!(is_conflict(&txn.commit()));
    let txn = db.transaction();
    assert_eq!(keys(txn.range(&b"q"[..]..=&b"r"[..]).unwrap()).len(), 2);
    db.put(b"r\0", b"x").unwrap();
    txn.commit().unwrap();
}

/// Whether a write of `written` by someone else, after `scan` ran in a new
/// transaction, makes its commit conflict. The key is put back as it was
/// after, so the next scan sees the same keys.
fn conflicts_after(db: &Db, scan: impl Fn(&quietkv::Transaction), written: &[u8]) -> bool {
    let before = db.get(written).unwrap();
    let mut txn = db.transaction();
    scan(&txn);
    txn.put(b"marker", b"1").unwrap();
    db.put(written, b"theirs").unwrap();
    let conflict = is_conflict(&txn.commit());
    match before {
        Some(v) => db.put(written, v).unwrap(),
        None => db.delete(written).unwrap(),
    }
    db.delete(b"marker").unwrap();
    conflict
}

#[test]
fn an_iterator_dropped_early_covers_only_what_it_returned() {
    let (_tmp, db) = open_with(&[b"k1", b"k3", b"k5", b"k7", b"k9"]);

    // Forward, stopped after k3: up to k3 is covered, past it is not.
    let forward = |txn: &quietkv::Transaction| {
        let mut it = txn.range(&b"k0"[..]..).unwrap();
        assert_eq!(it.next().unwrap().unwrap().0, b"k1");
        assert_eq!(it.next().unwrap().unwrap().0, b"k3");
    };
    assert!(!conflicts_after(&db, forward, b"k4"));
    assert!(
        !conflicts_after(&db, forward, b"k3\0"),
        "right after the last key returned"
    );
    assert!(conflicts_after(&db, forward, b"k2"));
    assert!(
        conflicts_after(&db, forward, b"k3"),
        "the last key returned"
    );
    assert!(
        conflicts_after(&db, forward, b"k0"),
        "the range's first key"
    );
    assert!(!conflicts_after(&db, forward, b"k"), "before the range");

    // Backward, stopped after k7: from k7 on is covered.
    let backward = |txn: &quietkv::Transaction| {
        let mut it = txn.range(..&b"k99"[..]).unwrap();
        assert_eq!(it.next_back().unwrap().unwrap().0, b"k9");
        assert_eq!(it.next_back().unwrap().unwrap().0, b"k7");
    };
    assert!(!conflicts_after(&db, backward, b"k6"));
    assert!(
        !conflicts_after(&db, backward, b"k99"),
        "the range's (excluded) end"
    );
    assert!(conflicts_after(&db, backward, b"k8"));
    assert!(
        conflicts_after(&db, backward, b"k7"),
        "the last key returned"
    );
    assert!(conflicts_after(&db, backward, b"k989"));

    // From both ends, stopped before they met: the middle is not covered.
    let both_ends = |txn: &quietkv::Transaction| {
        let mut it = txn.range(&b"k0"[..]..=&b"k99"[..]).unwrap();
        assert_eq!(it.next().unwrap().unwrap().0, b"k1");
        assert_eq!(it.next_back().unwrap().unwrap().0, b"k9");
    };
    assert!(!conflicts_after(&db, both_ends, b"k5a"));
    assert!(!conflicts_after(&db, both_ends, b"k1a"));
    assert!(conflicts_after(&db, both_ends, b"k0a"));
    assert!(conflicts_after(&db, both_ends, b"k90"));
    assert!(conflicts_after(&db, both_ends, b"k99"), "an inclusive end");

    // Meeting in the middle covers the whole range.
    let met = |txn: &quietkv::Transaction| {
        let mut it = txn.range(&b"k0"[..]..&b"k6"[..]).unwrap();
        assert_eq!(it.next().unwrap().unwrap().0, b"k1");
        assert_eq!(it.next_back().unwrap().unwrap().0, b"k5");
        assert_eq!(it.next().unwrap().unwrap().0, b"k3");
        assert!(it.next_back().is_none());
    };
    assert!(conflicts_after(&db, met, b"k4"));
    assert!(conflicts_after(&db, met, b"k2"));
    assert!(!conflicts_after(&db, met, b"k6"));

    // An iterator made and never advanced covers nothing.
    let unused = |txn: &quietkv::Transaction| drop(txn.iter().unwrap());
    assert!(!conflicts_after(&db, unused, b"k2"));
}

#[test]
fn deletes_and_range_deletes_inside_a_scanned_range_conflict() {
    let (_tmp, db) = open_with(&[b"b", b"d", b"x"]);
    let scanned = |db: &Db| {
        let mut txn = db.transaction();
        assert_eq!(keys(txn.range(&b"a"[..]..&b"m"[..]).unwrap()).len(), 2);
        // Past every range deleted below.
        txn.put(b"~mine", b"1").unwrap();
        txn
    };
    // A delete of a key the range never held still changes what a new
    // scan could see happened: it is a write inside the range.
    let txn = scanned(&db);
    db.delete(b"c").unwrap();
    assert!(is_conflict(&txn.commit()));

    // A range delete overlapping the scanned range, even one that deletes
    // none of the keys the transaction was returned.
    let txn = scanned(&db);
    db.delete_range(&b"e"[..]..&b"z"[..]).unwrap();
    let err = txn.commit().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(
        err.to_string().contains("range delete of [\"e\", \"z\")"),
        "{err}"
    );
    db.put(b"x", b"1").unwrap();

    // One that ends where the scanned range starts, or starts where it
    // ends, does not overlap it.
    let txn = scanned(&db);
    db.delete_range(&b"0"[..]..&b"a"[..]).unwrap();
    db.delete_range(&b"m"[..]..&b"n"[..]).unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get(b"~mine").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn range_conflicts_are_found_after_the_write_is_flushed_and_compacted() {
    let tmp = dir();
    let db = Db::open(tmp.path(), small()).unwrap();
    for i in 0..200u32 {
        db.put(format!("old{i:04}"), [1u8; 64]).unwrap();
    }
    db.put(b"s:1", b"1").unwrap();
    db.flush().unwrap();
    db.compact_all().unwrap();

    for write in ["put", "delete", "delete_range"] {
        let mut txn = db.transaction();
        assert_eq!(txn.prefix(b"s:").unwrap().count(), 1, "{write}");
        txn.put(b"marker", write).unwrap();
        match write {
            "put" => db.put(b"s:2", b"phantom").unwrap(),
            "delete" => db.delete(b"s:0").unwrap(),
            _ => db.delete_range(&b"s:5"[..]..&b"s:6"[..]).unwrap(),
        }
        // More writes elsewhere, so the newer tables hold old versions of
        // the range too, then everything out of the memtables.
        for i in 0..200u32 {
            db.put(format!("old{i:04}"), [2u8; 64]).unwrap();
        }
        db.flush().unwrap();
        db.compact_all().unwrap();
        assert_eq!(db.stats().levels[0].files, 0, "everything left L0");
        assert!(is_conflict(&txn.commit()), "{write}");
        assert_eq!(db.get(b"marker").unwrap(), None);
        // Back to one key with the prefix for the next round.
        db.delete(b"s:2").unwrap();
    }

    // Old versions of the range in tables rewritten since the snapshot,
    // and newer writes next to the range, are no conflict.
    let mut txn = db.transaction();
    assert_eq!(txn.prefix(b"s:").unwrap().count(), 1);
    assert_eq!(txn.prefix(b"old").unwrap().count(), 200);
    txn.put(b"marker", b"ok").unwrap();
    for i in 0..300u32 {
        db.put(format!("r:{i:04}"), [3u8; 64]).unwrap();
        db.put(format!("a:{i:04}"), [3u8; 64]).unwrap();
    }
    db.flush().unwrap();
    db.compact_all().unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get(b"marker").unwrap(), Some(b"ok".to_vec()));
}

#[test]
fn scans_conflict_per_keyspace_and_the_transactions_own_writes_do_not() {
    let tmp = dir();
    let db = Db::open(tmp.path(), small()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    let b = db.keyspace("b", KeyspaceOptions::default()).unwrap();
    a.put(b"u:1", b"1").unwrap();

    // A prefix scan of keyspace a; the same key inserted in b and in the
    // default keyspace is no conflict.
    let mut txn = db.transaction();
    assert_eq!(txn.prefix_in(&a, b"u:").unwrap().count(), 1);
    txn.put_in(&a, b"u:2", b"mine").unwrap();
    b.put(b"u:3", b"other keyspace").unwrap();
    db.put(b"u:3", b"default keyspace").unwrap();
    txn.commit().unwrap();

    // Inserted in a: a conflict naming the keyspace; in a table too.
    for flushed in [false, true] {
        let mut txn = db.transaction();
        assert!(keys(txn.range_in(&a, &b"u:"[..]..&b"u;"[..]).unwrap()).len() >= 2);
        txn.put_in(&b, b"marker", b"1").unwrap();
        a.put(format!("u:9{flushed}"), b"phantom").unwrap();
        if flushed {
            a.flush().unwrap();
            a.compact_all().unwrap();
        }
        let err = txn.commit().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
        assert!(err.to_string().contains("keyspace \"a\""), "{err}");
        assert_eq!(b.get(b"marker").unwrap(), None);
    }

    // The transaction's own writes inside a range it scanned, before and
    // after the scan, conflict with nothing.
    let mut txn = db.transaction();
    txn.put(b"v:1", b"mine").unwrap();
    assert_eq!(txn.prefix(b"v:").unwrap().count(), 1);
    txn.put(b"v:2", b"mine").unwrap();
    txn.delete(b"v:1").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get(b"v:2").unwrap(), Some(b"mine".to_vec()));
}

/// Threads keep each prefix at no more than `LIMIT` keys with "count the
/// keys with the prefix, insert one if there are fewer": without range
/// conflicts two transactions that both counted `LIMIT - 1` both insert.
/// Rounds are lined up with a barrier so every round's transactions all
/// scan before any commits, which makes the race certain, not lucky; a
/// thread whose commit conflicts tries again the next round.
#[test]
fn threads_counting_a_prefix_before_inserting_never_overfill_it() {
    const THREADS: usize = 8;
    const PREFIXES: usize = 2;
    const LIMIT: usize = 3;
    // Each round fills every prefix by one key, so LIMIT rounds fill them;
    // the rest check that full prefixes stay full and no more.
    const ROUNDS: usize = LIMIT + 3;
    let tmp = dir();
    let db = Arc::new(Db::open(tmp.path(), small()).unwrap());
    let barrier = Arc::new(Barrier::new(THREADS));
    let conflicts = Arc::new(AtomicU64::new(0));
    // The most keys a transaction counted under one prefix (asserted at the
    // end: a panic here would leave the other threads at the barrier).
    let most_seen = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, barrier) = (db.clone(), barrier.clone());
            let (conflicts, most_seen) = (conflicts.clone(), most_seen.clone());
            std::thread::spawn(move || {
                let prefix = format!("user{}:", t % PREFIXES);
                for round in 0..ROUNDS {
                    let mut txn = db.transaction();
                    let count = txn.prefix(&prefix).unwrap().count();
                    most_seen.fetch_max(count as u64, Ordering::Relaxed);
                    if count < LIMIT {
                        txn.put(format!("{prefix}session-{t}-{round}"), b"")
                            .unwrap();
                    }
                    barrier.wait();
                    match txn.commit() {
                        Ok(()) => {}
                        Err(e) if e.kind() == ErrorKind::Conflict => {
                            conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("{e}"),
                    }
                    barrier.wait();
                    // Now and then the sessions move to a table.
                    if t == 0 && round % 2 == 1 {
                        db.flush().unwrap();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert!(most_seen.load(Ordering::Relaxed) <= LIMIT as u64);
    for p in 0..PREFIXES {
        let prefix = format!("user{p}:");
        let n = db.prefix(&prefix).unwrap().count();
        assert_eq!(n, LIMIT, "{prefix}");
    }
    // Every round that filled a prefix refused the other inserters.
    let refused = conflicts.load(Ordering::Relaxed);
    let inserters_per_prefix = (THREADS / PREFIXES) as u64;
    assert!(
        refused >= (LIMIT * PREFIXES) as u64 * (inserters_per_prefix - 1),
        "{refused} conflicts"
    );
}

/// What one iteration in the model does.
#[derive(Debug, Clone)]
enum Step {
    Front,
    Back,
}

/// A scan of `[key(lo), key(hi))` taking the steps given, then dropped.
#[derive(Debug, Clone)]
struct ScanOp {
    lo: u8,
    hi: u8,
    steps: Vec<Step>,
}

/// A write by someone else after the transaction began.
#[derive(Debug, Clone)]
enum Other {
    Put(u8),
    Delete(u8),
    DeleteRange(u8, u8),
}

fn key(i: u8) -> Vec<u8> {
    format!("k{i:02}").into_bytes()
}

fn scan_op() -> impl Strategy<Value = ScanOp> {
    (
        0u8..40,
        0u8..40,
        proptest::collection::vec(prop_oneof![Just(Step::Front), Just(Step::Back)], 0..12),
    )
        .prop_map(|(lo, hi, steps)| ScanOp { lo, hi, steps })
}

fn other() -> impl Strategy<Value = Other> {
    prop_oneof![
        3 => (0u8..40).prop_map(Other::Put),
        2 => (0u8..40).prop_map(Other::Delete),
        1 => (0u8..40, 1u8..6).prop_map(|(a, n)| Other::DeleteRange(a, a.saturating_add(n))),
    ]
}

/// The half-open key ranges a scan covered, by the model: up to the last
/// key from the front, from the last key from the back, or all of it once
/// either end ran out.
fn model_covered(visible: &BTreeMap<Vec<u8>, Vec<u8>>, op: &ScanOp) -> Vec<(Vec<u8>, Vec<u8>)> {
    let (lo, hi) = (key(op.lo), key(op.hi));
    if lo >= hi {
        return Vec::new();
    }
    let mut left: std::collections::VecDeque<Vec<u8>> = visible
        .range(lo.clone()..hi.clone())
        .map(|(k, _)| k.clone())
        .collect();
    let (mut front, mut back) = (None, None);
    for step in &op.steps {
        let got = match step {
            Step::Front => left.pop_front(),
            Step::Back => left.pop_back(),
        };
        match (got, step) {
            (None, _) => return vec![(lo, hi)],
            (Some(k), Step::Front) => front = Some(k),
            (Some(k), Step::Back) => back = Some(k),
        }
    }
    let mut out = Vec::new();
    if let Some(k) = front {
        let mut through = k;
        through.push(0);
        out.push((lo.clone(), through));
    }
    if let Some(k) = back {
        out.push((k, hi));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever mix of scans a transaction ran and whatever others wrote
    /// since it began, its commit conflicts exactly when one of those
    /// writes (a put, a delete, a range delete) touches a part of a range
    /// an iterator covered, with the writes still in the memtable or moved
    /// into tables; and it applies its writes only when it does not.
    #[test]
    fn a_commit_conflicts_exactly_when_a_write_touches_a_covered_range(
        base in proptest::collection::btree_map(0u8..40, any::<u8>(), 0..25),
        scans in proptest::collection::vec(scan_op(), 1..4),
        others in proptest::collection::vec(other(), 0..4),
        flush_base in any::<bool>(),
        flush_after in 0u8..3,
    ) {
        let tmp = dir();
        let db = Db::open(tmp.path(), small()).unwrap();
        let visible: BTreeMap<Vec<u8>, Vec<u8>> =
            base.iter().map(|(k, v)| (key(*k), vec![*v])).collect();
        for (k, v) in &visible {
            db.put(k, v).unwrap();
        }
        if flush_base {
            db.flush().unwrap();
        }
        let mut txn = db.transaction();
        let mut covered = Vec::new();
        for op in &scans {
            covered.extend(model_covered(&visible, op));
            let (lo, hi) = (key(op.lo), key(op.hi));
            if lo >= hi {
                continue;
            }
            let mut it = txn.range(lo.as_slice()..hi.as_slice()).unwrap();
            for step in &op.steps {
                let got = match step {
                    Step::Front => it.next(),
                    Step::Back => it.next_back(),
                };
                if got.is_none() {
                    break;
                }
                got.unwrap().unwrap();
            }
        }
        // Its own write, past every key the others write.
        txn.put(b"marker", b"1").unwrap();
        let mut expect_conflict = false;
        let inside = |k: &[u8], covered: &[(Vec<u8>, Vec<u8>)]| {
            covered.iter().any(|(l, h)| l.as_slice() <= k && k < h.as_slice())
        };
        for o in &others {
            match o {
                Other::Put(k) => {
                    db.put(key(*k), b"theirs").unwrap();
                    expect_conflict |= inside(&key(*k), &covered);
                }
                Other::Delete(k) => {
                    db.delete(key(*k)).unwrap();
                    expect_conflict |= inside(&key(*k), &covered);
                }
                Other::DeleteRange(a, b) => {
                    let (a, b) = (key(*a), key(*b));
                    db.delete_range(a.as_slice()..b.as_slice()).unwrap();
                    expect_conflict |= covered
                        .iter()
                        .any(|(l, h)| a.as_slice() < h.as_slice() && l.as_slice() < b.as_slice());
                }
            }
        }
        if flush_after >= 1 {
            db.flush().unwrap();
        }
        if flush_after == 2 {
            db.compact_all().unwrap();
        }
        let result = txn.commit();
        prop_assert_eq!(
            is_conflict(&result),
            expect_conflict,
            "covered {:?}, others {:?}, result {:?}",
            covered,
            others,
            result
        );
        if !expect_conflict {
            result.unwrap();
        }
        prop_assert_eq!(db.get(b"marker").unwrap().is_some(), !expect_conflict);
    }
}
