//! What the multi-process tests share: node processes of the built
//! `quietkv-raftkv` binary on loopback (killed when the test ends, failed
//! or not), and an HTTP client for the nodes' API that finds the leader,
//! writes with retries, and compares the nodes' state machines.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

/// How long any one thing may take before the test fails: generous, for a
/// busy two-core machine, yet well inside the two minutes a test may run.
pub const WAIT: Duration = Duration::from_secs(45);

/// One node process. Dropping it kills the process (SIGKILL) and reaps it.
pub struct NodeProc {
    pub id: u64,
    pub addr: String,
    pub dir: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

impl NodeProc {
    /// Starts node `id` with its storage in `root/node-<id>` and its log
    /// in `root/node-<id>.log`, listening on `addr` (port 0: any free
    /// port), and waits for the address it listens on.
    pub fn start(root: &Path, id: u64, addr: &str) -> NodeProc {
        let dir = root.join(format!("node-{id}"));
        let log = root.join(format!("node-{id}.log"));
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_quietkv-raftkv"));
        // SAFETY: the closure runs in the child between fork and exec, where
        // only async-signal-safe calls are allowed: prctl(2) is one, and
        // nothing here allocates or takes a lock.
        unsafe {
            command.pre_exec(|| {
                // Dropping the node kills it; this covers the test process
                // itself being killed (a CI timeout): the kernel sends the
                // node SIGKILL when the test's thread, which spawned it,
                // ends.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command
            .args(["--id", &id.to_string(), "--addr", addr, "--dir"])
            .arg(&dir)
            // Snapshots only when a test asks: which node installed one
            // then says how it caught up.
            .args(["--snapshot-every", "0"])
            // Small pieces, so a snapshot crosses in several requests.
            .args(["--snapshot-chunk-bytes", "256"])
            .env("QUIETKV_RAFTKV_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut node = NodeProc {
            id,
            addr: String::new(),
            dir,
            log,
            child: Some(child),
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            // Drain the rest, so the node never writes to a closed pipe.
            for _ in lines {}
        });
        let first = match rx.recv_timeout(WAIT) {
            Ok(Some(Ok(line))) => line,
            other => panic!(
                "node {id} did not start ({other:?}); its log:\n{}",
                std::fs::read_to_string(&node.log).unwrap_or_default()
            ),
        };
        node.addr = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("node {id} printed {first:?}"))
            .to_string();
        node
    }

    /// SIGKILL: the process gets no chance to flush or shut down.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Node processes in one temporary directory, and a client for them.
pub struct Cluster {
    pub root: tempfile::TempDir,
    pub nodes: BTreeMap<u64, NodeProc>,
    pub client: reqwest::Client,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in self.nodes.values_mut() {
            node.kill();
        }
        // A failed test shows what each node logged last.
        if std::thread::panicking() {
            for node in self.nodes.values() {
                let log = std::fs::read_to_string(&node.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!(
                    "---- node {} log (last 40 lines, newest first) ----",
                    node.id
                );
                for line in tail {
                    eprintln!("{line}");
                }
            }
        }
    }
}

impl Cluster {
    /// Starts nodes `1..=n` and initializes them as one cluster.
    pub async fn start(n: u64) -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let nodes: BTreeMap<u64, NodeProc> = (1..=n)
            .map(|id| (id, NodeProc::start(root.path(), id, "127.0.0.1:0")))
            .collect();
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        let cluster = Cluster {
            root,
            nodes,
            client,
        };
        let members: BTreeMap<u64, String> = cluster
            .nodes
            .values()
            .map(|n| (n.id, n.addr.clone()))
            .collect();
        let response = cluster
            .client
            .post(format!("http://{}/init", cluster.addr(1)))
            .json(&serde_json::json!({ "members": members }))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "init: {}",
            response.text().await.unwrap()
        );
        cluster
    }

    pub fn addr(&self, id: u64) -> &str {
        &self.nodes[&id].addr
    }

    /// Adds node `id`, empty, to the processes (not to the cluster).
    pub fn start_node(&mut self, id: u64) {
        let node = NodeProc::start(self.root.path(), id, "127.0.0.1:0");
        self.nodes.insert(id, node);
    }

    /// Restarts a killed node from its directory, on its old address (the
    /// one the cluster's membership knows it by).
    pub fn restart(&mut self, id: u64) {
        let addr = self.nodes[&id].addr.clone();
        assert!(!self.nodes[&id].is_running(), "node {id} is running");
        let node = NodeProc::start(self.root.path(), id, &addr);
        self.nodes.insert(id, node);
    }

    pub fn running(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.is_running())
            .map(|n| n.id)
            .collect()
    }

    /// Node `id`'s openraft metrics, or `None` if it does not answer.
    pub async fn metrics(&self, id: u64) -> Option<Value> {
        let response = self
            .client
            .get(format!("http://{}/metrics", self.addr(id)))
            .send()
            .await
            .ok()?;
        response.json().await.ok()
    }

    /// Waits until `check` holds for node `id`'s metrics; returns them.
    pub async fn wait_metrics(&self, id: u64, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(m) = self.metrics(id).await {
                if check(&m) {
                    return m;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {id}: {what}, not within {WAIT:?}: {m}"
                );
            } else {
                assert!(
                    Instant::now() < deadline,
                    "node {id}: {what}: it does not answer"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The leader, once a running node says it is the leader, is not
    /// `not` (a leader that was killed), and a majority of all the nodes
    /// (killed ones counted, as they are still members) name it leader. A
    /// node's word alone is not enough: a leader restarted from its disk
    /// may call itself leader of its old term until it hears of the new one.
    pub async fn leader(&self, not: Option<u64>) -> u64 {
        let deadline = Instant::now() + WAIT;
        loop {
            let mut views = BTreeMap::new();
            for id in self.running() {
                if let Some(m) = self.metrics(id).await {
                    views.insert(id, m);
                }
            }
            for (&id, m) in &views {
                if Some(id) == not || m["state"] != "Leader" || m["current_leader"] != id {
                    continue;
                }
                let followers = views.values().filter(|v| v["current_leader"] == id).count();
                if followers * 2 > self.nodes.len() {
                    return id;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no leader elected within {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Writes `key = value` and returns once a node acknowledged it
    /// (committed and applied). Tries the running nodes in turn, following
    /// redirects to the leader; a write that failed is retried, which is
    /// safe as setting a key to the same value twice changes nothing.
    pub async fn put(&self, key: &str, value: &str) {
        let deadline = Instant::now() + WAIT;
        let mut attempt = 0usize;
        loop {
            let running = self.running();
            let id = running[attempt % running.len()];
            attempt += 1;
            match put_once(&self.client, self.addr(id), key, value).await {
                Ok(()) => return,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "put {key}: not acknowledged within {WAIT:?}: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Node `id`'s state machine, key by key, and its last applied index.
    pub async fn entries(&self, id: u64) -> (u64, Vec<(String, String)>) {
        let body: Value = self
            .client
            .get(format!("http://{}/debug/entries", self.addr(id)))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let applied = body["last_applied"]["index"].as_u64().unwrap_or(0);
        let entries = serde_json::from_value(body["entries"].clone()).unwrap();
        (applied, entries)
    }

    /// Waits until every running node names the same leader and has
    /// applied everything in that leader's log, then checks that all hold
    /// the same keys and values (key by key) and returns them. Only for
    /// when no writes are under way.
    pub async fn converged(&self) -> BTreeMap<String, String> {
        let deadline = Instant::now() + WAIT;
        let leader = loop {
            let leader = self.leader(None).await;
            let last = self
                .metrics(leader)
                .await
                .and_then(|m| m["last_log_index"].as_u64());
            let mut caught_up = true;
            for id in self.running() {
                let m = self.metrics(id).await;
                let m = m.as_ref();
                caught_up &= m.is_some_and(|m| {
                    m["current_leader"] == leader && m["last_applied"]["index"].as_u64() >= last
                });
            }
            if caught_up && last.is_some() {
                break leader;
            }
            assert!(
                Instant::now() < deadline,
                "the nodes did not all apply node {leader}'s log within {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let (_, reference) = self.entries(leader).await;
        let reference: BTreeMap<String, String> = reference.into_iter().collect();
        for id in self.running() {
            let (_, entries) = self.entries(id).await;
            let entries: BTreeMap<String, String> = entries.into_iter().collect();
            for (key, value) in &reference {
                assert_eq!(entries.get(key), Some(value), "node {id}, key {key}");
            }
            for key in entries.keys() {
                assert!(
                    reference.contains_key(key),
                    "node {id} has {key}, the leader (node {leader}) does not"
                );
            }
        }
        reference
    }

    /// POSTs a JSON body to node `id`'s admin route and returns the answer,
    /// failing the test unless it succeeded.
    pub async fn admin(&self, id: u64, path: &str, body: Value) -> Value {
        let response = self
            .client
            .post(format!("http://{}{path}", self.addr(id)))
            .json(&body)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(
            status.is_success(),
            "POST {path} on node {id}: {status}: {text}"
        );
        serde_json::from_str(&text).unwrap()
    }
}

/// One attempt at writing `key = value` through the node at `addr`.
pub async fn put_once(
    client: &reqwest::Client,
    addr: &str,
    key: &str,
    value: &str,
) -> Result<(), String> {
    let response = client
        .put(format!("http://{addr}/kv/{key}"))
        .body(value.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!(
            "{status}: {}",
            response.text().await.unwrap_or_default()
        ))
    }
}
