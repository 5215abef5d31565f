//! Unit tests that need the crate's internals: installing a snapshot cut
//! short after each of its steps, then the database closed and reopened
//! as a crash there would leave it.

use std::collections::BTreeSet;
use std::path::Path;

use openraft::{CommittedLeaderId, EntryPayload, Membership};

use crate::keys;
use crate::state_machine::{apply_entries, build, install, AppliedState, InstallStep};
use crate::{Entry, LogId, Request, SnapshotMeta, Store};

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn set(term: u64, index: u64, key: &str, value: &str) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(Request::Set {
            key: key.into(),
            value: value.into(),
        }),
    }
}

fn membership(term: u64, index: u64, nodes: &[u64]) -> Entry {
    let set: BTreeSet<u64> = nodes.iter().copied().collect();
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Membership(Membership::new(vec![set], None)),
    }
}

/// Applies `entries` to a store's state machine (generation 0).
fn apply(store: &Store, entries: Vec<Entry>) -> AppliedState {
    let mut applied = store.state_machine().unwrap().applied().clone();
    apply_entries(&store.db, 0, &mut applied, entries).unwrap();
    applied
}

/// Every state machine key of the database, to check that only the
/// current generation is left.
fn sm_keys(store: &Store) -> Vec<Vec<u8>> {
    store
        .db
        .prefix(keys::SM_PREFIX)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A store holding the new state (b=20, c=30, d=40 at term 2), and the
/// snapshot built from it.
fn new_state_snapshot(dir: &Path) -> (Store, SnapshotMeta, std::fs::File, AppliedState) {
    let store = Store::open(dir).unwrap();
    let applied = apply(
        &store,
        vec![
            membership(1, 1, &[1, 2, 3]),
            set(2, 2, "b", "20"),
            set(2, 3, "c", "30"),
            set(2, 4, "d", "40"),
        ],
    );
    let (meta, file) = build(&store.db, &store.snapshots).unwrap();
    assert_eq!(meta.last_log_id, Some(log_id(2, 4)));
    (store, meta, file, applied)
}

#[test]
fn an_install_cut_short_at_any_step_leaves_the_old_state_or_the_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (_source, meta, file, new_applied) = new_state_snapshot(&tmp.path().join("source"));
    let old_pairs = pairs(&[("a", "1"), ("b", "2")]);
    let new_pairs = pairs(&[("b", "20"), ("c", "30"), ("d", "40")]);

    let steps = [
        Some(InstallStep::NewDataWritten),
        Some(InstallStep::Switched),
        Some(InstallStep::OldDeleted),
        None,
    ];
    for (n, stop) in steps.into_iter().enumerate() {
        let dir = tmp.path().join(format!("node-{n}"));
        let store = Store::open(&dir).unwrap();
        let old_applied = apply(
            &store,
            vec![
                membership(1, 1, &[1]),
                set(1, 2, "a", "1"),
                set(1, 3, "b", "2"),
            ],
        );
        assert_eq!(store.entries().unwrap(), old_pairs);

        let source = file.try_clone().unwrap();
        install(&store.db, &store.snapshots, 0, &meta, source, stop).unwrap();
        // The crash: nothing after the step runs; the database is closed
        // and opened again.
        drop(store);
        let store = Store::open(&dir).unwrap();
        let sm = store.state_machine().unwrap();
        let switched = stop != Some(InstallStep::NewDataWritten);
        if switched {
            assert_eq!(
                store.entries().unwrap(),
                new_pairs,
                "stopped after {stop:?}"
            );
            assert_eq!(sm.applied(), &new_applied, "stopped after {stop:?}");
        } else {
            assert_eq!(
                store.entries().unwrap(),
                old_pairs,
                "stopped after {stop:?}"
            );
            assert_eq!(sm.applied(), &old_applied, "stopped after {stop:?}");
        }
        // Opening finished the job: one generation left, nothing else.
        let generation = u64::from(switched);
        let keys = sm_keys(&store);
        assert_eq!(keys.len(), if switched { 4 } else { 3 }, "{stop:?}");
        for k in keys {
            assert!(
                k.starts_with(&keys::generation_prefix(generation)),
                "stopped after {stop:?}, key {} of another generation survived the reopen",
                k.escape_ascii()
            );
        }
        // Only a complete install publishes the received snapshot.
        let current = store.snapshots.current().unwrap().map(|(m, _)| m);
        assert_eq!(current, stop.is_none().then(|| meta.clone()), "{stop:?}");
    }
}

#[test]
fn a_damaged_snapshot_is_refused_before_the_state_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let (_source, meta, file, _) = new_state_snapshot(&tmp.path().join("source"));
    let path = tmp.path().join("source/snapshots/current.snap");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 1;
    let damaged = tmp.path().join("damaged.snap");
    std::fs::write(&damaged, &bytes).unwrap();
    drop(file);

    let store = Store::open(tmp.path().join("node")).unwrap();
    let before = apply(&store, vec![set(1, 1, "a", "1")]);
    let err = install(
        &store.db,
        &store.snapshots,
        0,
        &meta,
        std::fs::File::open(&damaged).unwrap(),
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("install-"), "{err}");
    assert_eq!(store.entries().unwrap(), pairs(&[("a", "1")]));
    assert_eq!(store.state_machine().unwrap().applied(), &before);
    assert_eq!(sm_keys(&store).len(), 2);

    // A file for another snapshot than the one openraft describes.
    let other = SnapshotMeta {
        snapshot_id: "another".into(),
        ..meta.clone()
    };
    let err = install(
        &store.db,
        &store.snapshots,
        0,
        &other,
        std::fs::File::open(&path).unwrap(),
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("another"), "{err}");
    assert_eq!(store.entries().unwrap(), pairs(&[("a", "1")]));
}
