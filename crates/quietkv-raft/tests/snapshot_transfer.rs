//! Streaming a snapshot the way openraft does (the leader seeks to the
//! end for the length, then to each chunk's offset and reads until the
//! chunk is full; the follower writes each chunk at its offset, seeking
//! when a chunk is sent again, and shuts the file down after the last),
//! through quietkv-raft's `SnapshotFile` on both sides: the file arrives
//! byte for byte, and in the Backup class's direct mode neither side's
//! file is left in the page cache, where buffered leaves both.

use std::collections::BTreeSet;
use std::io::SeekFrom;
use std::path::Path;

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload, LogId, Membership, RaftSnapshotBuilder};
use quietio::EffectiveMode;
use quietkv::Options;
use quietkv_raft::{Entry, Request, SnapshotIo, Store};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

/// Not a multiple of any block size, so chunks straddle blocks.
const CHUNK: usize = 64 * 1024 + 123;

fn entry(index: u64, payload: EntryPayload<quietkv_raft::TypeConfig>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload,
    }
}

/// A store whose state holds `keys` values of 4 KiB, flushed to tables.
async fn leader(dir: &Path, io: SnapshotIo, keys: u64) -> Store {
    let store = Store::open_with_snapshot_io(dir, Options::default(), io).unwrap();
    let mut sm = store.state_machine().unwrap();
    let members = BTreeSet::from([1u64]);
    let mut entries = vec![entry(
        1,
        EntryPayload::Membership(Membership::new(vec![members], None)),
    )];
    entries.extend((0..keys).map(|i| {
        entry(
            i + 2,
            EntryPayload::Normal(Request::Set {
                key: format!("key-{i:06}"),
                value: format!("{i:06}").repeat(4096 / 6),
            }),
        )
    }));
    sm.apply(entries).await.unwrap();
    store.state_db().flush().unwrap();
    store
}

fn temp_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect()
}

/// Streams the leader's snapshot into a new node; returns the leader's
/// snapshot file's residency after sending, the received file's before
/// it was installed, and the new node.
async fn stream(
    tmp: &Path,
    io: SnapshotIo,
) -> (quietio::Residency, quietio::Residency, Store, Store) {
    let leader = leader(&tmp.join("leader"), io, 1500).await;
    let mut sm = leader.state_machine().unwrap();
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let sent_path = leader.current_snapshot_path();
    // A cold start: building read the pack's label through the cache.
    quietio::evict_file(&sent_path).unwrap();
    let mut from = snapshot.snapshot;

    let node = Store::open_with_snapshot_io(tmp.join("node"), Options::default(), io).unwrap();
    let mut node_sm = node.state_machine().unwrap();
    let mut to = node_sm.begin_receiving_snapshot().await.unwrap();

    let end = from.seek(SeekFrom::End(0)).await.unwrap();
    assert!(end > 4 << 20, "a snapshot of {end} bytes");
    let mut offset = 0u64;
    let mut written = 0u64;
    let mut resent = false;
    while offset < end {
        from.seek(SeekFrom::Start(offset)).await.unwrap();
        let mut chunk = Vec::with_capacity(CHUNK);
        while chunk.len() < chunk.capacity() {
            if from.read_buf(&mut chunk).await.unwrap() == 0 {
                break;
            }
        }
        assert!(!chunk.is_empty(), "read nothing at {offset} of {end}");
        if written != offset {
            to.seek(SeekFrom::Start(offset)).await.unwrap();
        }
        to.write_all(&chunk).await.unwrap();
        written = offset + chunk.len() as u64;
        // Once, as after a lost reply: the same chunk sent again.
        if !resent && offset > 0 {
            resent = true;
            continue;
        }
        offset = written;
    }
    to.shutdown().await.unwrap();
    let sent = quietio::residency(&sent_path).unwrap();
    let receiving = temp_files(&node.dir().join("snapshots"));
    assert_eq!(receiving.len(), 1, "{receiving:?}");
    let received = quietio::residency(&receiving[0]).unwrap();
    node_sm.install_snapshot(&snapshot.meta, to).await.unwrap();

    let sent_bytes = std::fs::read(&sent_path).unwrap();
    let got_bytes = std::fs::read(node.current_snapshot_path()).unwrap();
    assert_eq!(got_bytes.len() as u64, end);
    assert!(sent_bytes == got_bytes, "the received file is the sent one");
    assert_eq!(node.entries().unwrap(), leader.entries().unwrap());
    assert!(leader.snapshot_transfer_stats().read_bytes >= end);
    assert!(node.snapshot_transfer_stats().write_bytes >= end);
    (sent, received, leader, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_backup_class_a_streamed_snapshot_arrives_whole_and_stays_out_of_the_page_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let probe = Store::open(tmp.path().join("probe")).unwrap();
    if probe.snapshot_transfer_mode() != EffectiveMode::Direct {
        // Only a file system without O_DIRECT (tmpfs) gets here; CI's has it.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run this test, but the Backup class is {} here",
            probe.snapshot_transfer_mode()
        );
        eprintln!("skipping: no direct I/O in the temporary directory");
        return;
    }
    let (sent, received, _, _) = stream(tmp.path(), SnapshotIo::Backup).await;
    assert_eq!(sent.cached, 0, "the leader's file after sending: {sent:?}");
    assert_eq!(
        received.cached, 0,
        "the follower's file as received: {received:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_a_streamed_snapshot_arrives_whole_through_the_page_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let (sent, received, leader, _) = stream(tmp.path(), SnapshotIo::Buffered).await;
    assert_eq!(leader.snapshot_transfer_mode(), EffectiveMode::Buffered);
    // Just read or written: on a busy machine a little may already be
    // reclaimed, most of it is there.
    assert!(
        sent.cached * 10 >= sent.total_pages * 9,
        "the leader's file after sending: {sent:?}"
    );
    assert!(
        received.cached * 10 >= received.total_pages * 9,
        "the follower's file as received: {received:?}"
    );
}
