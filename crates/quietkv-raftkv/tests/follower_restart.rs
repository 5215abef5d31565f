//! A follower killed with SIGKILL misses writes the other two commit;
//! restarted from its disk, it catches up through the log (the leader
//! neither snapshotted nor purged anything) to the same keys and values.
//! Also: the client API's answers to bad input, to a missing key, and on a
//! follower.

mod common;

use common::Cluster;
use reqwest::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_follower_catches_up_through_the_log() {
    let mut cluster = Cluster::start(3).await;
    for i in 0..20 {
        cluster
            .put(&format!("a{i:03}"), &format!("before-{i}"))
            .await;
    }
    let leader = cluster.leader(None).await;
    let follower = *cluster.running().iter().find(|&&id| id != leader).unwrap();
    let applied_before = cluster.entries(follower).await.0;
    cluster.nodes.get_mut(&follower).unwrap().kill();

    for i in 0..40 {
        cluster
            .put(&format!("b{i:03}"), &format!("while-down-{i}"))
            .await;
    }
    // Overwrites and deletes too, so catching up is more than appending.
    for i in 0..10 {
        cluster
            .put(&format!("a{i:03}"), &format!("changed-{i}"))
            .await;
    }
    let response = cluster
        .client
        .delete(format!("http://{}/kv/a019", cluster.addr(leader)))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    cluster.restart(follower);
    let state = cluster.converged().await;
    assert_eq!(state.len(), 59);
    assert_eq!(state["a000"], "changed-0");
    assert_eq!(state["a015"], "before-15");
    assert_eq!(state["b039"], "while-down-39");
    assert!(!state.contains_key("a019"));

    // Through the log: no snapshot was built or installed anywhere.
    let m = cluster.metrics(follower).await.unwrap();
    assert!(
        m["snapshot"].is_null(),
        "the follower installed no snapshot: {m}"
    );
    let lm = cluster.metrics(leader).await.unwrap();
    assert!(lm["purged"].is_null(), "the leader purged nothing: {lm}");
    assert!(m["last_applied"]["index"].as_u64().unwrap() > applied_before);

    check_client_api(&cluster, leader, follower).await;
}

/// The client API's answers: a read of a missing key, bad input, and a
/// follower that sends the client to the leader.
async fn check_client_api(cluster: &Cluster, leader: u64, follower: u64) {
    let client = &cluster.client;
    let at = |id: u64, path: &str| format!("http://{}{path}", cluster.addr(id));

    let response = client.get(at(leader, "/kv/a001")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "changed-1");

    let response = client
        .get(at(leader, "/kv/nothing-here"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);

    let response = client
        .put(at(leader, "/kv/binary"))
        .body(vec![0xff, 0xfe])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("not UTF-8"));

    let response = client
        .put(at(leader, "/kv/"))
        .body("v")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(response.text().await.unwrap().contains("/kv/{key}"));

    let response = client
        .post(at(leader, "/change-membership"))
        .header("content-type", "application/json")
        .body("{\"members\": \"all\"}")
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());

    // A follower redirects a linearizable read to the leader (and a
    // client that follows redirects gets the value).
    let no_redirects = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = no_redirects
        .get(at(follower, "/kv/a001"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TEMPORARY_REDIRECT);
    let location = response.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(location, at(leader, "/kv/a001"));
    let response = client.get(at(follower, "/kv/a001")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "changed-1");
}
