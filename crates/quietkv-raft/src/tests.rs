//! Unit tests that need the crate's internals: installing a snapshot cut
//! short after each of its steps, then the store closed and reopened as a
//! crash there would leave it; damaged snapshots; and which I/O class
//! building and installing a snapshot read and write in.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use openraft::{CommittedLeaderId, EntryPayload, Membership};
use quietio::{EffectiveMode, PositionalFile};
use quietkv::{ClassStats, IoClass};

use crate::build::build;
use crate::install::{install, InstallStep, Source};
use crate::shared::AppliedState;
use crate::state_machine::apply_entries;
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

/// Applies `entries` to a store's state machine.
fn apply(store: &Store, entries: Vec<Entry>) -> AppliedState {
    let mut applied = store.state_machine().unwrap().applied().clone();
    apply_entries(&store.state_db(), &mut applied, entries).unwrap();
    applied
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The names in a node directory that belong to the state machine's
/// generations (their directories, staged or not, and the pointer).
fn generation_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("sm-") || n.contains("SM-"))
        .collect();
    names.sort();
    names
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A store holding the new state (b=20, c=30, d=40 at term 2), and the
/// snapshot built from it.
fn new_state_snapshot(dir: &Path) -> (Store, SnapshotMeta, PositionalFile, AppliedState) {
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
    let (meta, file, _) = build(&store.shared).unwrap();
    assert_eq!(meta.last_log_id, Some(log_id(2, 4)));
    (store, meta, file, applied)
}

/// A store holding the old state (a=1, b=2 at term 1).
fn old_state(dir: &Path) -> (Store, AppliedState) {
    let store = Store::open(dir).unwrap();
    let applied = apply(
        &store,
        vec![
            membership(1, 1, &[1]),
            set(1, 2, "a", "1"),
            set(1, 3, "b", "2"),
        ],
    );
    (store, applied)
}

#[test]
fn an_install_cut_short_at_any_step_leaves_the_old_state_or_the_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (source, meta, _, new_applied) = new_state_snapshot(&tmp.path().join("source"));
    let old_pairs = pairs(&[("a", "1"), ("b", "2")]);
    let new_pairs = pairs(&[("b", "20"), ("c", "30"), ("d", "40")]);

    // `Err(())`: a crash in the middle of unpacking, which leaves quietkv's
    // staging directory with its incomplete-copy marker and part of a
    // table.
    let steps = [
        Err(()),
        Ok(Some(InstallStep::Unpacked)),
        Ok(Some(InstallStep::Switched)),
        Ok(Some(InstallStep::OldDeleted)),
        Ok(None),
    ];
    for (n, stop) in steps.into_iter().enumerate() {
        let dir = tmp.path().join(format!("node-{n}"));
        let (store, old_applied) = old_state(&dir);
        assert_eq!(store.entries().unwrap(), old_pairs);

        match stop {
            Ok(stop) => {
                let snapshots = &source.shared.snapshots;
                let file = snapshots.open_file(&snapshots.current_path()).unwrap();
                install(&store.shared, &meta, Source::Handle(file), stop).unwrap();
            }
            Err(()) => {
                let staged = dir.join(".sm-0000000001.quietkv-tmp");
                fs::create_dir(&staged).unwrap();
                fs::write(staged.join("COPY-INCOMPLETE"), b"").unwrap();
                fs::write(staged.join("000005.sst"), b"half a table").unwrap();
            }
        }
        // The crash: nothing after the step runs; the store is closed and
        // opened again.
        drop(store);
        let store = Store::open(&dir).unwrap();
        let sm = store.state_machine().unwrap();
        let switched = !matches!(stop, Err(()) | Ok(Some(InstallStep::Unpacked)));
        if switched {
            assert_eq!(store.entries().unwrap(), new_pairs, "{stop:?}");
            assert_eq!(sm.applied(), &new_applied, "{stop:?}");
        } else {
            assert_eq!(store.entries().unwrap(), old_pairs, "{stop:?}");
            assert_eq!(sm.applied(), &old_applied, "{stop:?}");
        }
        // Opening finished the job: one generation left, named by the
        // pointer, and nothing of the other.
        let generation = u64::from(switched);
        assert_eq!(store.state_db().generation(), generation, "{stop:?}");
        assert_eq!(
            generation_entries(&dir),
            ["SM-CURRENT".to_string(), format!("sm-{generation:010}")],
            "{stop:?}"
        );
        // Only a complete install publishes the received snapshot, and no
        // temporary file outlives the reopen.
        let current = store.shared.snapshots.current().unwrap().map(|(m, _)| m);
        assert_eq!(
            current,
            (stop == Ok(None)).then(|| meta.clone()),
            "{stop:?}"
        );
        let expected: &[&str] = if stop == Ok(None) {
            &["current.snap"]
        } else {
            &[]
        };
        assert_eq!(file_names(&dir.join("snapshots")), expected, "{stop:?}");
    }
}

#[test]
fn a_damaged_or_mislabelled_snapshot_is_refused_before_the_state_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let (_source, meta, file, _) = new_state_snapshot(&tmp.path().join("source"));
    let path = tmp.path().join("source/snapshots/current.snap");
    let good = fs::read(&path).unwrap();
    drop(file);

    let dir = tmp.path().join("node");
    let store = Store::open(&dir).unwrap();
    let before = apply(&store, vec![set(1, 1, "a", "1")]);
    let unchanged = |store: &Store| {
        assert_eq!(store.entries().unwrap(), pairs(&[("a", "1")]));
        assert_eq!(store.state_machine().unwrap().applied(), &before);
        assert_eq!(
            generation_entries(&dir),
            ["SM-CURRENT", "sm-0000000000"],
            "nothing of the refused snapshot is left"
        );
    };
    // A byte of a table's data, of the trailer, and a cut file.
    for damage in [good.len() / 2, good.len() - 3] {
        let mut bytes = good.clone();
        bytes[damage] ^= 1;
        let damaged = tmp.path().join("damaged.snap");
        fs::write(&damaged, &bytes).unwrap();
        let source = Source::Handle(store.shared.snapshots.open_file(&damaged).unwrap());
        let err = install(&store.shared, &meta, source, None).unwrap_err();
        assert!(err.to_string().contains("cannot unpack"), "{err}");
        unchanged(&store);
    }
    let cut = tmp.path().join("cut.snap");
    fs::write(&cut, &good[..good.len() - 100]).unwrap();
    let source = Source::Handle(store.shared.snapshots.open_file(&cut).unwrap());
    let err = install(&store.shared, &meta, source, None).unwrap_err();
    assert!(err.to_string().contains("cannot unpack"), "{err}");
    unchanged(&store);

    // A file for another snapshot than the one openraft describes.
    let other = SnapshotMeta {
        snapshot_id: "another".into(),
        ..meta.clone()
    };
    let source = Source::Handle(store.shared.snapshots.open_file(&path).unwrap());
    let err = install(&store.shared, &other, source, None).unwrap_err();
    assert!(err.to_string().contains("another"), "{err}");
    unchanged(&store);
}

fn class(io: &[(IoClass, ClassStats)], c: IoClass) -> ClassStats {
    io.iter().find(|(k, _)| *k == c).map(|(_, s)| *s).unwrap()
}

#[test]
fn building_and_installing_a_snapshot_moves_table_bytes_in_the_backup_class_only() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("source")).unwrap();
    let value = "v".repeat(200);
    let mut entries = vec![membership(1, 1, &[1])];
    entries.extend((2..3000).map(|i| set(1, i, &format!("key-{i:05}"), &value)));
    apply(&store, entries);
    // Most of the state in tables, the rest still in the memtable.
    store.state_db().flush().unwrap();
    apply(&store, vec![set(1, 3000, "late", "1")]);
    let state = store.state_db();
    let tables: u64 = fs::read_dir(state.dir())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(tables > 300_000, "the state is in tables: {tables} bytes");
    let user_before = class(&state.stats().io, IoClass::UserRead);

    let (meta, file, built) = build(&store.shared).unwrap();
    assert!(built.checkpoint.tables_linked >= 1, "{built:?}");
    assert_eq!(built.checkpoint.tables_copied, 0, "{built:?}");
    let pack = &built.pack;
    assert!(pack.file_bytes >= tables, "{pack:?}");
    let backup = class(&pack.io, IoClass::Backup);
    assert!(backup.read_bytes >= pack.file_bytes, "{pack:?}");
    assert!(backup.write_bytes >= pack.bytes, "{pack:?}");
    for c in IoClass::ALL.iter().filter(|c| **c != IoClass::Backup) {
        assert_eq!(
            class(&pack.io, *c),
            ClassStats::default(),
            "{c:?}: {pack:?}"
        );
    }
    // The state database read nothing for its users: the checkpoint
    // linked its tables and wrote the memtable in the Backup class.
    let user_after = class(&state.stats().io, IoClass::UserRead);
    assert_eq!(user_after.read_bytes, user_before.read_bytes);
    assert!(class(&state.stats().io, IoClass::Backup).write_bytes > 0);

    // The follower: the file arrives in a receive file, as openraft
    // writes it, and is unpacked from there without a copy.
    let node = Store::open(tmp.path().join("node")).unwrap();
    let (temp, mut received) = node.shared.snapshots.create_temp("receive").unwrap();
    let mut piece = vec![0u8; 100_000];
    let mut at = 0;
    loop {
        let n = file.read_at(at, &mut piece).unwrap();
        if n == 0 {
            break;
        }
        received.write_at(at, &piece[..n]).unwrap();
        at += n as u64;
    }
    received.sync().unwrap();
    assert_eq!(at, pack.bytes);
    let received_path = temp.path().to_path_buf();
    let cached = quietio::residency(&received_path).unwrap();
    if node.snapshot_transfer_mode() == EffectiveMode::Direct {
        assert_eq!(
            cached.cached, 0,
            "written around the page cache: {cached:?}"
        );
    }
    let (applied, installed) =
        install(&node.shared, &meta, Source::Received(temp, received), None).unwrap();
    assert_eq!(applied.last_applied, Some(log_id(1, 3000)));
    assert_eq!(installed.copied, 0);
    let unpack = &installed.unpack;
    assert_eq!(unpack.file_bytes, pack.file_bytes);
    let backup = class(&unpack.io, IoClass::Backup);
    assert!(backup.read_bytes >= pack.bytes, "{unpack:?}");
    assert!(backup.write_bytes >= pack.file_bytes, "{unpack:?}");
    for c in IoClass::ALL.iter().filter(|c| **c != IoClass::Backup) {
        assert_eq!(
            class(&unpack.io, *c),
            ClassStats::default(),
            "{c:?}: {unpack:?}"
        );
    }
    assert_eq!(node.entries().unwrap(), store.entries().unwrap());
    assert_eq!(node.state_db().generation(), 1);
    assert_eq!(file_names(&node.dir().join("snapshots")), ["current.snap"]);
    // Whatever of the received file was in the page cache was dropped
    // from it once synced; the file is now the current snapshot.
    let current = node.dir().join("snapshots/current.snap");
    let left = quietio::residency(&current).unwrap();
    assert_eq!(left.cached, 0, "{left:?}");
}

#[test]
fn a_replaced_state_stays_readable_while_held_and_is_deleted_after() {
    let tmp = tempfile::tempdir().unwrap();
    let (_source, meta, file, _) = new_state_snapshot(&tmp.path().join("source"));
    let (store, _) = old_state(&tmp.path().join("node"));
    let held = store.state_db();
    install(&store.shared, &meta, Source::Handle(file), None).unwrap();
    assert_eq!(store.state_db().generation(), 1);
    // A reader that took the old state before the switch (a snapshot
    // being built) still reads it whole.
    assert_eq!(
        crate::state_machine::read_value(&held, "a").unwrap(),
        Some("1".into())
    );
    let old_dir = held.dir().to_path_buf();
    assert!(old_dir.exists());
    drop(held);
    assert!(
        !old_dir.exists(),
        "the last holder deletes the replaced state"
    );
}
