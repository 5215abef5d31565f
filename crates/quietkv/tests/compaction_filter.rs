//! The user's compaction filter and the ready-made expiry (TTL) filter:
//! what compaction keeps, removes and changes, what snapshots still see,
//! and reads that hide expired entries before compaction removes them.

mod common;
use common::dir;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use quietkv::ttl::{self, ExpiryFilter};
use quietkv::{CompactionFilter, Db, FilterDecision, Options};

/// Removes `drop:` keys, upper-cases `up:` values, records what it saw.
#[derive(Debug, Default)]
struct Rules {
    offered: Mutex<Vec<Vec<u8>>>,
}

impl CompactionFilter for Rules {
    fn filter(&self, key: &[u8], value: &[u8]) -> FilterDecision {
        self.offered.lock().unwrap().push(key.to_vec());
        if key.starts_with(b"drop:") {
            FilterDecision::Remove
        } else if key.starts_with(b"up:") {
            FilterDecision::ChangeValue(value.to_ascii_uppercase())
        } else {
            FilterDecision::Keep
        }
    }
}

fn open_with(d: &tempfile::TempDir, filter: Arc<dyn CompactionFilter>) -> Db {
    Db::open(d.path(), Options::default().compaction_filter(Some(filter))).unwrap()
}

#[test]
fn compaction_keeps_removes_and_changes_what_the_filter_says() {
    let d = dir();
    let rules = Arc::new(Rules::default());
    let db = open_with(&d, rules.clone());
    for i in 0..200u32 {
        db.put(format!("drop:{i:03}"), b"gone soon").unwrap();
        db.put(format!("up:{i:03}"), b"shout").unwrap();
        db.put(format!("keep:{i:03}"), b"as is").unwrap();
    }
    // Nothing is filtered before compaction rewrites the keys (this filter
    // hides nothing from reads).
    assert_eq!(db.get("drop:007").unwrap(), Some(b"gone soon".to_vec()));
    db.compact_all().unwrap();
    assert_eq!(db.get("drop:007").unwrap(), None);
    assert_eq!(db.get("up:007").unwrap(), Some(b"SHOUT".to_vec()));
    assert_eq!(db.get("keep:007").unwrap(), Some(b"as is".to_vec()));
    assert_eq!(db.prefix("drop:").unwrap().count(), 0);
    assert_eq!(db.prefix("up:").unwrap().rev().count(), 200);
    assert_eq!(
        db.approximate_len(),
        400,
        "removed keys leave nothing behind"
    );
    assert_eq!(rules.offered.lock().unwrap().len(), 600);
    // The changed values persist.
    drop(db);
    let db = open_with(&d, Arc::new(Rules::default()));
    assert_eq!(db.get("up:199").unwrap(), Some(b"SHOUT".to_vec()));
}

#[test]
fn entries_a_snapshot_sees_are_never_offered() {
    let d = dir();
    let rules = Arc::new(Rules::default());
    let db = open_with(&d, rules.clone());
    db.put("drop:old", b"seen by the snapshot").unwrap();
    let snap = db.snapshot();
    db.put("drop:new", b"after the snapshot").unwrap();
    db.compact_all().unwrap();
    assert_eq!(
        *rules.offered.lock().unwrap(),
        vec![b"drop:new".to_vec()],
        "only the entry no snapshot sees"
    );
    assert_eq!(
        snap.get("drop:old").unwrap(),
        Some(b"seen by the snapshot".to_vec())
    );
    assert_eq!(
        db.get("drop:old").unwrap(),
        Some(b"seen by the snapshot".to_vec())
    );
    assert_eq!(db.get("drop:new").unwrap(), None);
    drop(snap);
    db.put("keep:x", b"more").unwrap();
    db.compact_all().unwrap();
    assert_eq!(
        db.get("drop:old").unwrap(),
        None,
        "offered once no snapshot needs it"
    );
}

#[test]
fn a_removed_newest_value_hides_older_ones_a_snapshot_keeps() {
    let d = dir();
    let db = open_with(&d, Arc::new(Rules::default()));
    db.put("drop:k", b"v1").unwrap();
    let snap = db.snapshot();
    db.put("drop:k", b"v2").unwrap();
    db.compact_all().unwrap();
    // v2 was removed (a delete in its place), v1 stays for the snapshot and
    // must not come back for current readers.
    assert_eq!(db.get("drop:k").unwrap(), None);
    assert_eq!(db.range("drop:".."drop;").unwrap().count(), 0);
    assert_eq!(snap.get("drop:k").unwrap(), Some(b"v1".to_vec()));
}

#[test]
fn expired_entries_are_hidden_at_once_and_removed_by_compaction() {
    let d = dir();
    let start = 1_900_000_000u64;
    let now = Arc::new(AtomicU64::new(start));
    let clock = {
        let now = now.clone();
        Arc::new(move || UNIX_EPOCH + Duration::from_secs(now.load(Ordering::Relaxed)))
    };
    let filter = ExpiryFilter::in_value().with_clock(clock);
    let db = open_with(&d, Arc::new(filter));
    let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
    for i in 0..100u32 {
        // Even keys expire at start + 10, odd ones at start + 1000.
        let expires = if i % 2 == 0 { start + 10 } else { start + 1000 };
        db.put(
            format!("s:{i:03}"),
            ttl::with_expiry(format!("v{i}"), at(expires)),
        )
        .unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.prefix("s:").unwrap().count(), 100);
    now.store(start + 10, Ordering::Relaxed);
    assert_eq!(db.get("s:000").unwrap(), None);
    let v = db.get("s:001").unwrap().unwrap();
    assert_eq!(ttl::payload(&v), Some(&b"v1"[..]));
    let forward: Vec<_> = db.prefix("s:").unwrap().map(|r| r.unwrap().0).collect();
    let mut backward: Vec<_> = db
        .prefix("s:")
        .unwrap()
        .rev()
        .map(|r| r.unwrap().0)
        .collect();
    backward.reverse();
    assert_eq!(forward.len(), 50);
    assert_eq!(forward, backward);
    assert!(
        forward.iter().all(|k| k.last().unwrap() % 2 == 1),
        "odd keys only"
    );
    // An older, unexpired version does not come back when the newest one
    // expires: the key reads as absent.
    db.put("s:001", ttl::with_expiry(b"newer", at(start + 20)))
        .unwrap();
    now.store(start + 20, Ordering::Relaxed);
    assert_eq!(db.get("s:001").unwrap(), None);
    assert_eq!(db.range("s:001"..="s:001").unwrap().count(), 0);
    assert_eq!(db.range("s:001"..="s:001").unwrap().rev().count(), 0);
    // Compaction removes what expired.
    db.compact_all().unwrap();
    assert_eq!(db.approximate_len(), 49);
    now.store(start + 1000, Ordering::Relaxed);
    db.compact_all().unwrap();
    assert_eq!(db.approximate_len(), 0);
}
