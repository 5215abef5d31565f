//! A fourth node joins a three-node cluster empty, after the leader
//! snapshotted and purged its log: the log no longer holds what the new
//! node lacks, so it can only catch up by installing the leader's
//! snapshot. It becomes a voter and holds the same keys and values.

mod common;

use common::Cluster;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_node_catches_up_through_a_snapshot() {
    let mut cluster = Cluster::start(3).await;
    for i in 0..60 {
        cluster
            .put(&format!("key-{i:03}"), &format!("value-{i}"))
            .await;
    }
    let leader = cluster.leader(None).await;

    let snapshot = cluster.admin(leader, "/snapshot", json!({})).await;
    let snapshot_index = snapshot["snapshot"]["index"].as_u64().unwrap();
    assert!(
        snapshot_index >= 60,
        "the snapshot covers the writes: {snapshot}"
    );
    cluster.admin(leader, "/purge", json!({})).await;
    cluster
        .wait_metrics(leader, "purged its log up to the snapshot", |m| {
            m["purged"]["index"].as_u64() >= Some(snapshot_index)
        })
        .await;

    cluster.start_node(4);
    let addr4 = cluster.addr(4).to_string();
    cluster
        .admin(leader, "/add-learner", json!({ "id": 4, "addr": addr4 }))
        .await;
    cluster
        .admin(
            leader,
            "/change-membership",
            json!({ "members": [1, 2, 3, 4] }),
        )
        .await;

    // Node 4 never builds a snapshot of its own (`--snapshot-every 0`, and
    // nobody asked it to): a snapshot in its metrics is one it installed.
    cluster
        .wait_metrics(4, "installed the leader's snapshot", |m| {
            m["snapshot"]["index"].as_u64() >= Some(snapshot_index)
        })
        .await;
    // It came in pieces, each logged by node 4's snapshot route: the
    // first 256 bytes, one past them, and a last one. (openraft may start a
    // snapshot over when the membership changes meanwhile, so the pieces
    // are not counted.)
    let log = std::fs::read_to_string(&cluster.nodes[&4].log).unwrap();
    let chunks: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("quietkv_raftkv::rpc: received snapshot chunk"))
        .collect();
    for piece in ["offset=0 ", "offset=256 ", "last=true"] {
        assert!(
            chunks.iter().any(|c| c.contains(piece)),
            "the snapshot came in pieces, one with {piece:?}: {chunks:#?}"
        );
    }

    // It learns it is a voter once it applies the membership change.
    for id in 1..=4 {
        cluster
            .wait_metrics(id, "has node 4 among the voters", |m| {
                let configs = m["membership_config"]["membership"]["configs"].as_array();
                configs
                    .and_then(|c| c.last())
                    .and_then(|voters| voters.as_array())
                    .is_some_and(|voters| voters.contains(&json!(4)))
            })
            .await;
    }

    // Writes after the join reach node 4 through the log.
    for i in 60..80 {
        cluster
            .put(&format!("key-{i:03}"), &format!("value-{i}"))
            .await;
    }
    let state = cluster.converged().await;
    assert_eq!(state.len(), 80);
    for i in 0..80 {
        assert_eq!(state[&format!("key-{i:03}")], format!("value-{i}"));
    }
    let (applied, _) = cluster.entries(4).await;
    assert!(applied > snapshot_index);
}
