//! A three-node cluster takes writes while its leader is killed with
//! SIGKILL: a new leader is elected, writes go on, no acknowledged write
//! is lost, and once the killed node restarts from its disk every node
//! holds the same keys and values: as served, and on disk once all are
//! killed.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{put_once, Cluster, WAIT};
use tokio::time::Instant;

/// Writes `k<i> = v<i>` for i = 0, 1, ... until told to stop, each through
/// the nodes in turn until one acknowledges it, and records what was
/// acknowledged.
async fn writer(
    client: reqwest::Client,
    addrs: Vec<String>,
    acked: Arc<Mutex<BTreeMap<String, String>>>,
    stop: Arc<AtomicBool>,
) {
    let mut attempt = 0usize;
    for i in 0u64.. {
        let (key, value) = (format!("k{i:05}"), format!("v{i}"));
        let deadline = Instant::now() + WAIT;
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let addr = &addrs[attempt % addrs.len()];
            match put_once(&client, addr, &key, &value).await {
                Ok(()) => {
                    acked.lock().unwrap().insert(key.clone(), value.clone());
                    break;
                }
                Err(e) => {
                    // Through the node that failed, the next attempt goes
                    // to another one (the killed leader refuses connections).
                    attempt += 1;
                    assert!(
                        Instant::now() < deadline,
                        "{key} not acknowledged within {WAIT:?}: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

async fn wait_acked(acked: &Mutex<BTreeMap<String, String>>, at_least: usize) {
    let deadline = Instant::now() + WAIT;
    while acked.lock().unwrap().len() < at_least {
        assert!(
            Instant::now() < deadline,
            "fewer than {at_least} writes acknowledged within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_leader_loses_no_acknowledged_write() {
    let mut cluster = Cluster::start(3).await;
    let old_leader = cluster.leader(None).await;

    let acked = Arc::new(Mutex::new(BTreeMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let addrs = cluster.nodes.values().map(|n| n.addr.clone()).collect();
    let writing = tokio::spawn(writer(
        cluster.client.clone(),
        addrs,
        acked.clone(),
        stop.clone(),
    ));

    // Kill the leader while writes are going on.
    wait_acked(&acked, 40).await;
    cluster.nodes.get_mut(&old_leader).unwrap().kill();
    let killed_at = acked.lock().unwrap().len();

    let new_leader = cluster.leader(Some(old_leader)).await;
    assert_ne!(new_leader, old_leader);
    // The cluster goes on taking writes under the new leader.
    wait_acked(&acked, killed_at + 40).await;
    stop.store(true, Ordering::Relaxed);
    writing.await.unwrap();

    // The two survivors agree, and hold every acknowledged write.
    let acked = acked.lock().unwrap().clone();
    let state = cluster.converged().await;
    for (key, value) in &acked {
        assert_eq!(state.get(key), Some(value), "acknowledged write {key} lost");
    }
    // Nothing else: every key is one the writer sent, with its value (a
    // write in flight when the leader died may or may not have committed).
    for (key, value) in &state {
        let i: u64 = key[1..].parse().unwrap();
        assert_eq!(value, &format!("v{i}"), "key {key}");
    }

    // The killed leader, restarted from its disk, converges too.
    cluster.restart(old_leader);
    let after = cluster.converged().await;
    assert_eq!(after, state);
    assert_eq!(cluster.running().len(), 3);

    // What each node holds on disk, read with quietkv-raft itself after
    // every process was killed: the same keys and values.
    let ids: Vec<u64> = cluster.running();
    for id in &ids {
        cluster.nodes.get_mut(id).unwrap().kill();
    }
    for id in &ids {
        let store = quietkv_raft::Store::open(&cluster.nodes[id].dir).unwrap();
        let on_disk: BTreeMap<String, String> = store.entries().unwrap().into_iter().collect();
        assert_eq!(on_disk, state, "node {id}'s storage");
    }
}
