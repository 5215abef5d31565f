//! Tests of [`Value`]: its conversions and comparisons, and that a value
//! read in place keeps reading the right bytes after what it shares (a
//! memtable, a table block, the table file) is flushed, evicted or deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::Value;
use crate::{CompactionFilter, Db, FilterDecision, Options};

fn assert_send_sync_static<T: Send + Sync + 'static>() {}

#[test]
fn value_is_send_sync_static() {
    assert_send_sync_static::<Value>();
}

#[test]
fn conversions_and_comparisons_follow_the_bytes() {
    let v = Value::from(b"hello".to_vec());
    assert_eq!(v, b"hello");
    assert_eq!(v, *b"hello");
    assert_eq!(v, &b"hello"[..]);
    assert_eq!(v, b"hello"[..]);
    assert_eq!(v, b"hello".to_vec());
    assert_eq!(b"hello".to_vec(), v);
    assert_eq!(&b"hello"[..], v);
    assert_ne!(v, b"hellO");
    assert_eq!(v.len(), 5);
    assert_eq!(&v[1..3], b"el");
    assert_eq!(v.as_ref(), b"hello");
    assert_eq!(format!("{v:?}"), "b\"hello\"");
    assert_eq!(
        format!("{:?}", Value::from(&[0u8, b'a', 0xff][..])),
        "b\"\\x00a\\xff\""
    );
    let c = v.clone();
    assert_eq!(c, v);
    assert_eq!(c.as_ptr(), v.as_ptr(), "a clone shares the bytes");
    let (a, b) = (Value::from(b"a".to_vec()), Value::from(b"b".to_vec()));
    assert_eq!(a.cmp(&b), std::cmp::Ordering::Less);
    // Hashes as the bytes: a set of values is searchable by a slice (and
    // clippy's `mutable_key_type` has no reason to object to one).
    let set: std::collections::HashSet<Value> = [v.clone()].into_iter().collect();
    assert!(set.contains(&b"hello"[..]));

    // The only handle on its own buffer gives it back without a copy.
    let buf = b"owned".to_vec();
    let at = buf.as_ptr();
    let owned = Value::from(buf);
    assert_eq!(owned.pinned_bytes(), 5);
    let back: Vec<u8> = owned.into();
    assert_eq!(back.as_ptr(), at);
    // A shared one is copied, and the other handle keeps its bytes.
    let back = c.clone().into_vec();
    assert_eq!(back, b"hello");
    assert_ne!(back.as_ptr(), c.as_ptr());
    assert_eq!(c, b"hello");

    let empty = Value::default();
    assert!(empty.is_empty());
    assert_eq!(empty, b"");
    assert_eq!(empty.pinned_bytes(), 0);
    assert_eq!(Value::from(Vec::new()), Value::empty());
}

fn tables_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

#[test]
fn a_memtable_value_outlives_its_flush_and_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"first value").unwrap();
    db.put(b"other", b"x").unwrap();
    let v = db.get_pinned(b"k").unwrap().unwrap();
    assert!(v.is_in_memtable());
    assert!(v.pinned_bytes() >= b"first value".len());
    let from_get = db.get(b"k").unwrap().unwrap();
    assert_eq!(v, from_get);

    db.put(b"k", b"second").unwrap();
    db.delete_range(&b"a"[..]..&b"z"[..]).unwrap();
    db.flush().unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), vec![b'y'; 200]).unwrap();
    }
    db.compact_all().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    assert_eq!(v, b"first value");
    let moved = std::thread::spawn(move || v.to_vec()).join().unwrap();
    assert_eq!(moved, b"first value");
}

#[test]
fn a_table_value_outlives_its_table_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i:05}"), format!("value {i} ").repeat(10))
            .unwrap();
    }
    db.flush().unwrap();
    let old_tables = tables_in(dir.path());
    assert!(!old_tables.is_empty());
    let v = db.get_pinned(b"k00042").unwrap().unwrap();
    let want = "value 42 ".repeat(10).into_bytes();
    assert_eq!(v, want);
    assert!(!v.is_in_memtable());
    assert!(
        v.block_handles().is_some_and(|n| n >= 2),
        "the block is shared with the cache"
    );

    // Rewrite every key, so compaction drops the old table and deletes its
    // file (nothing else reads it), which also erases its blocks from the
    // cache.
    for i in 0..500u32 {
        db.put(format!("k{i:05}"), b"new").unwrap();
    }
    db.compact_all().unwrap();
    db.wait_idle().unwrap();
    let now = tables_in(dir.path());
    assert!(
        old_tables.is_disjoint(&now),
        "{old_tables:?} still in {now:?}"
    );
    assert_eq!(v.block_handles(), Some(1), "only the value holds the block");
    assert_eq!(v, want);
    assert_eq!(db.get(b"k00042").unwrap(), Some(b"new".to_vec()));
    drop(db);
    assert_eq!(v, want, "and after the database is closed");
}

#[test]
fn a_table_value_outlives_the_eviction_of_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().block_cache_bytes(64 << 10);
    let db = Db::open(dir.path(), opts).unwrap();
    let value_of = |i: u32| format!("{i:08}").repeat(12).into_bytes();
    for i in 0..4000u32 {
        db.put(format!("k{i:05}"), value_of(i)).unwrap();
    }
    db.flush().unwrap();
    let v = db.get_pinned(b"k00007").unwrap().unwrap();
    assert_eq!(v.block_handles(), Some(2), "cached once, and the value");
    // Reading every other block pushes it out of the small cache.
    for i in (100..4000u32).step_by(10) {
        assert_eq!(
            db.get(format!("k{i:05}")).unwrap(),
            Some(value_of(i)),
            "key {i}"
        );
    }
    assert!(db.stats().block_cache.evictions > 0);
    assert_eq!(v.block_handles(), Some(1), "evicted from the cache");
    assert_eq!(v, value_of(7));
}

/// Hides values that start with `x`, as a TTL filter hides expired ones.
#[derive(Debug)]
struct HideX;

impl CompactionFilter for HideX {
    fn filter(&self, _key: &[u8], _value: &[u8]) -> FilterDecision {
        FilterDecision::Keep
    }
    fn hides(&self, _key: &[u8], value: &[u8]) -> bool {
        value.first() == Some(&b'x')
    }
}

#[test]
fn the_filters_hides_applies_to_pinned_reads_as_to_get() {
    let dir = tempfile::tempdir().unwrap();
    let filter: Arc<dyn CompactionFilter> = Arc::new(HideX);
    let db = Db::open(
        dir.path(),
        Options::default().compaction_filter(Some(filter)),
    )
    .unwrap();
    db.put(b"hidden", b"x marks it").unwrap();
    db.put(b"shown", b"plain").unwrap();
    for step in ["memtable", "table"] {
        assert_eq!(db.get_pinned(b"hidden").unwrap(), None, "{step}");
        assert_eq!(db.get(b"hidden").unwrap(), None, "{step}");
        assert_eq!(
            db.get_pinned(b"shown").unwrap().unwrap(),
            b"plain",
            "{step}"
        );
        let snap = db.snapshot();
        assert_eq!(snap.get_pinned(b"hidden").unwrap(), None, "{step}");
        db.flush().unwrap();
    }
}

#[test]
fn snapshots_and_transactions_read_pinned_values_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    let snap = db.snapshot();
    db.put(b"a", b"2").unwrap();
    db.flush().unwrap();
    assert_eq!(snap.get_pinned(b"a").unwrap().unwrap(), b"1");
    assert_eq!(snap.get(b"a").unwrap().unwrap(), b"1");

    let mut txn = db.transaction();
    assert_eq!(txn.get_pinned(b"a").unwrap().unwrap(), b"2");
    txn.put(b"a", b"3").unwrap();
    let own = txn.get_pinned(b"a").unwrap().unwrap();
    assert_eq!(own, b"3");
    assert_eq!(own.pinned_bytes(), 1, "its own write pins nothing else");
    txn.delete(b"a").unwrap();
    assert_eq!(txn.get_pinned(b"a").unwrap(), None);
    // The read joined the read set: a write since makes the commit fail.
    db.put(b"a", b"4").unwrap();
    assert_eq!(txn.commit().unwrap_err().kind(), crate::ErrorKind::Conflict);
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    DeleteRange(u8, u8),
    Flush,
    Compact,
    /// Reads a key with `get_pinned` and keeps the value to check later.
    Keep(u8),
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:02}").into_bytes()
}

fn value(k: u8, v: u8) -> Vec<u8> {
    // Some long enough to span a good part of a block.
    let len = 1 + (v as usize % 7) * 60;
    let mut out = format!("{k}:{v}:").into_bytes();
    out.resize(len.max(out.len()), v);
    out
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..20, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0u8..20).prop_map(Op::Delete),
        1 => (0u8..20, 0u8..6).prop_map(|(a, n)| Op::DeleteRange(a, a + n)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        3 => (0u8..20).prop_map(Op::Keep),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn pinned_reads_match_get_and_a_model(ops in prop::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut kept: Vec<(Value, Vec<u8>)> = Vec::new();
        for op in &ops {
            match *op {
                Op::Put(k, v) => {
                    db.put(key(k), value(k, v)).unwrap();
                    model.insert(key(k), value(k, v));
                }
                Op::Delete(k) => {
                    db.delete(key(k)).unwrap();
                    model.remove(&key(k));
                }
                Op::DeleteRange(a, b) => {
                    db.delete_range(key(a)..key(b)).unwrap();
                    model.retain(|k, _| !(key(a)..key(b)).contains(k));
                }
                Op::Flush => db.flush().unwrap(),
                Op::Compact => db.compact_all().unwrap(),
                Op::Keep(k) => {
                    let got = db.get_pinned(key(k)).unwrap();
                    prop_assert_eq!(got.as_ref().map(|v| v.to_vec()), model.get(&key(k)).cloned());
                    if let Some(v) = got {
                        let want = v.to_vec();
                        kept.push((v, want));
                    }
                }
            }
        }
        for k in 0..20u8 {
            let pinned = db.get_pinned(key(k)).unwrap();
            let copied = db.get(key(k)).unwrap();
            prop_assert_eq!(pinned.clone().map(Vec::from), copied.clone(), "key {}", k);
            prop_assert_eq!(copied, model.get(&key(k)).cloned(), "key {}", k);
        }
        // Every value kept along the way still reads as it did, whatever
        // was written, flushed or compacted since.
        for (v, want) in &kept {
            prop_assert_eq!(v, want);
        }
        drop(db);
        for (v, want) in &kept {
            prop_assert_eq!(v, want);
        }
    }
}
