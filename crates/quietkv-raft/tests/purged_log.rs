//! A node that snapshotted and purged its whole log finds its log state
//! at open without reading the purged entries: they stay in the log's
//! tables, range-deleted, until compaction drops them, and reading them
//! all back made a node with a large purged log take minutes to start.

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, EntryPayload};
use quietkv_raft::{Entry, LogId, Request, Store};

const ENTRIES: u64 = 3_000;

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn set(index: u64) -> Entry {
    Entry {
        log_id: log_id(1, index),
        payload: EntryPayload::Normal(Request::Set {
            key: format!("key-{index:05}"),
            // About a KiB per entry: the log spans hundreds of blocks.
            value: format!("{index:0>1024}"),
        }),
    }
}

/// Block lookups (hits and misses) the log database's cache has served.
fn block_lookups(store: &Store) -> u64 {
    let cache = store.log_db().stats().block_cache;
    cache.hits + cache.misses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fully_purged_log_is_not_read_back_to_find_its_state() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = Store::open(tmp.path()).unwrap();
        let mut log = store.log_store();
        log.blocking_append((1..=ENTRIES).map(set)).await.unwrap();
        log.purge(log_id(1, ENTRIES)).await.unwrap();
        // The entries and the range delete over them in tables, as on a
        // node whose memtable was flushed since.
        store.log_db().flush().unwrap();
        assert!(
            store.log_db().stats().levels.iter().any(|l| l.files > 0),
            "the log is in tables"
        );
    }

    let store = Store::open(tmp.path()).unwrap();
    let mut log = store.log_store();
    let before = block_lookups(&store);
    let state = log.get_log_state().await.unwrap();
    let lookups = block_lookups(&store) - before;
    assert_eq!(state.last_purged_log_id, Some(log_id(1, ENTRIES)));
    assert_eq!(state.last_log_id, Some(log_id(1, ENTRIES)));
    // The purged entries fill hundreds of blocks; finding that none is
    // left takes a few lookups at most.
    assert!(
        lookups < 16,
        "{lookups} block lookups to find the state of a purged log"
    );

    // The log goes on after the purged entries.
    log.blocking_append([set(ENTRIES + 1)]).await.unwrap();
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(log_id(1, ENTRIES + 1)));
}
