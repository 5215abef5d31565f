//! The WAL sync policies: how many syncs each one costs, that grouping
//! follows the policy, that the periodic thread syncs on its own and stops
//! with the database, and that every policy keeps every write across a
//! reopen. (What a power cut keeps under each policy is the crash layer's
//! job; a process crash is covered by `crash.rs`.)

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::dir;
use quietkv::{Db, IoClass, Options, WalSync, WriteOptions};

fn with(policy: WalSync) -> Options {
    Options::default().wal_sync(policy)
}

/// Syncs of the WAL class so far, and WAL groups and writes.
fn wal_syncs(db: &Db) -> u64 {
    let s = db.stats();
    s.io.iter()
        .find(|(c, _)| *c == IoClass::WalWrite)
        .map(|(_, c)| c.sync_ops)
        .unwrap()
}

fn key(t: usize, i: usize) -> Vec<u8> {
    format!("t{t}-k{i:05}").into_bytes()
}

/// `threads` writers doing `per` unsynced puts each, at once.
fn concurrent_puts(db: &Arc<Db>, threads: usize, per: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..per {
                    db.put(key(t, i), b"v").unwrap();
                }
            });
        }
    });
}

#[test]
fn none_syncs_only_what_asks() {
    let d = dir();
    let db = Db::open(d.path(), with(WalSync::None)).unwrap();
    let base = wal_syncs(&db);
    for i in 0..50 {
        db.put(key(0, i), b"v").unwrap();
    }
    assert_eq!(wal_syncs(&db), base, "unsynced puts must not sync");
    let mut b = quietkv::WriteBatch::new();
    b.put(b"synced", b"1").unwrap();
    db.write(b, WriteOptions { sync: true }).unwrap();
    assert_eq!(wal_syncs(&db), base + 1);
}

/// Runs `threads` writers of `per_thread` puts each at once under
/// `policy`; returns the write groups and the WAL syncs they took.
fn concurrent_groups_and_syncs(policy: WalSync, threads: usize, per_thread: usize) -> (u64, u64) {
    let d = dir();
    let db = Arc::new(Db::open(d.path(), with(policy)).unwrap());
    let base = wal_syncs(&db);
    let groups0 = db.stats().write_groups;
    concurrent_puts(&db, threads, per_thread);
    let groups = db.stats().write_groups - groups0;
    (groups, wal_syncs(&db) - base)
}

#[test]
fn per_write_syncs_each_write_alone() {
    let (groups, syncs) = concurrent_groups_and_syncs(WalSync::PerWrite, 4, 50);
    assert_eq!(groups, 200, "no write may share a group");
    assert_eq!(syncs, 200, "one sync per write");
}

#[test]
fn group_syncs_every_group_and_shares_syncs() {
    let (groups, syncs) = concurrent_groups_and_syncs(WalSync::Group, 8, 100);
    assert_eq!(syncs, groups, "every group syncs once");
    assert!(groups <= 800);
    // Eight writers behind one sync at a time do get grouped; how much
    // depends on the disk, so only that it happened at all.
    assert!(
        groups < 800,
        "8 concurrent writers never shared a sync ({groups} groups)"
    );
}

#[test]
fn periodic_syncs_in_the_background_and_stops_with_the_database() {
    let d = dir();
    let interval = Duration::from_millis(20);
    let db = Db::open(d.path(), with(WalSync::Periodic(interval))).unwrap();
    let base = wal_syncs(&db);
    db.put(b"a", b"1").unwrap();
    // The put itself did not sync ...
    let after_put = wal_syncs(&db);
    assert!(after_put <= base + 1, "a periodic put synced by itself");
    // ... the thread does, soon (a minute is room for a busy machine).
    let deadline = Instant::now() + Duration::from_secs(60);
    while wal_syncs(&db) == base {
        assert!(
            Instant::now() < deadline,
            "no background sync within a minute"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // With nothing new written, the thread costs no syncs: over 25
    // intervals or more, at most the put and whatever the open left
    // unsynced get synced, one sync each, however late the thread runs.
    // A thread that synced every interval would sync about once per
    // interval.
    let since = Instant::now();
    while since.elapsed() < interval * 25 {
        std::thread::sleep(interval);
    }
    let syncs = wal_syncs(&db) - base;
    assert!(syncs <= 2, "{syncs} syncs with nothing new to sync");
    db.close().unwrap();
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    db.close().unwrap();
    // Close does not wait for the thread's next turn: with an hour
    // between syncs it still returns at once (the generous bound only
    // leaves room for a busy machine).
    let db = Db::open(d.path(), with(WalSync::Periodic(Duration::from_secs(3600)))).unwrap();
    db.put(b"b", b"2").unwrap();
    let t = Instant::now();
    db.close().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "close waited for the sync thread"
    );
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn every_policy_keeps_every_write_across_reopen() {
    for policy in [
        WalSync::None,
        WalSync::Group,
        WalSync::PerWrite,
        WalSync::Periodic(Duration::from_millis(5)),
    ] {
        let d = dir();
        {
            let db = Arc::new(Db::open(d.path(), with(policy)).unwrap());
            concurrent_puts(&db, 3, 40);
        }
        // Reopened with another policy: the WAL format does not depend on it.
        let db = Db::open(d.path(), with(WalSync::Group)).unwrap();
        for t in 0..3 {
            for i in 0..40 {
                assert_eq!(
                    db.get(key(t, i)).unwrap(),
                    Some(b"v".to_vec()),
                    "{policy}: t{t} k{i}"
                );
            }
        }
    }
}

#[test]
fn invalid_interval_is_refused_at_open() {
    let d = dir();
    let Err(err) = Db::open(d.path(), with(WalSync::Periodic(Duration::ZERO))) else {
        panic!("a zero interval must be refused");
    };
    assert_eq!(err.kind(), quietkv::ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("periodic interval"), "{err}");
}
