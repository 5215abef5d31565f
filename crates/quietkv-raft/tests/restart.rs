//! A node's storage survives a restart: after closing and reopening, the
//! vote, the log (with its truncation and purge), the committed id, the
//! applied index and membership, the data and the current snapshot are all
//! as they were.

use std::collections::BTreeSet;

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, Membership, RaftSnapshotBuilder, Vote};
use quietkv_raft::{Entry, LogId, Request, Response, Store};

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

fn delete(term: u64, index: u64, key: &str) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(Request::Delete { key: key.into() }),
    }
}

fn membership(term: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Membership(Membership::new(vec![BTreeSet::from([1, 2, 3])], None)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vote_log_applied_state_data_and_snapshot_come_back_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let entries = vec![
        membership(1, 1),
        set(1, 2, "x", "1"),
        set(1, 3, "y", "2"),
        set(1, 4, "x", "3"),
        delete(1, 5, "y"),
        set(1, 6, "z", "4"),
    ];
    let vote = Vote::new_committed(2, 1);
    let snapshot_meta;
    {
        let store = Store::open(tmp.path()).unwrap();
        let mut log = store.log_store();
        let mut sm = store.state_machine().unwrap();
        log.save_vote(&vote).await.unwrap();
        log.blocking_append(entries.clone()).await.unwrap();
        // Entries 7 and 8 of a deposed leader, then cut off again.
        log.blocking_append([set(1, 7, "w", "lost"), set(1, 8, "w", "lost")])
            .await
            .unwrap();
        log.truncate(log_id(1, 7)).await.unwrap();
        log.save_committed(Some(log_id(1, 6))).await.unwrap();

        let responses = sm.apply(entries[..4].to_vec()).await.unwrap();
        let previous: Vec<_> = responses.into_iter().map(|r| r.previous).collect();
        assert_eq!(previous, [None, None, None, Some("1".to_string())]);
        snapshot_meta = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap()
            .meta;
        assert_eq!(snapshot_meta.last_log_id, Some(log_id(1, 4)));
        // Apply the rest in a second call, then purge what the snapshot
        // holds.
        let responses = sm.apply(entries[4..].to_vec()).await.unwrap();
        assert_eq!(
            responses,
            [
                Response {
                    previous: Some("2".into())
                },
                Response { previous: None }
            ]
        );
        log.purge(log_id(1, 3)).await.unwrap();
        drop((log, sm));
        drop(store);
    }

    let store = Store::open(tmp.path()).unwrap();
    let mut log = store.log_store();
    let mut sm = store.state_machine().unwrap();
    assert_eq!(log.read_vote().await.unwrap(), Some(vote));
    assert_eq!(log.read_committed().await.unwrap(), Some(log_id(1, 6)));
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 3)));
    assert_eq!(state.last_log_id, Some(log_id(1, 6)));
    let kept = log.try_get_log_entries(0..100).await.unwrap();
    assert_eq!(kept, entries[3..].to_vec());

    let (applied, members) = sm.applied_state().await.unwrap();
    assert_eq!(applied, Some(log_id(1, 6)));
    assert_eq!(members.log_id(), &Some(log_id(1, 1)));
    assert_eq!(
        store.entries().unwrap(),
        [
            ("x".to_string(), "3".to_string()),
            ("z".to_string(), "4".to_string())
        ]
    );
    assert_eq!(store.get("y").unwrap(), None);
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snapshot_meta);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_log_entry_is_an_error_naming_its_key_and_index() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let mut log = store.log_store();
    log.blocking_append([set(1, 1, "a", "1"), set(1, 2, "b", "2")])
        .await
        .unwrap();
    // Damage entry 2 in place, through the database underneath.
    let mut key = quietkv_raft::keys::LOG_PREFIX.to_vec();
    key.extend_from_slice(&2u64.to_be_bytes());
    store.log_db().put(&key, b"{\"garbage").unwrap();
    let err = log.try_get_log_entries(0..3).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("\\x00raft/log/"), "{text}");
    assert!(text.contains("LogIndex(2)"), "{text}");
    assert!(log.get_log_state().await.is_err());

    // An entry stored under another index than its own.
    store
        .log_db()
        .put(&key, serde_json::to_vec(&set(1, 9, "c", "3")).unwrap())
        .unwrap();
    let text = log.try_get_log_entries(2..3).await.unwrap_err().to_string();
    assert!(text.contains("says it is index 9"), "{text}");
}
