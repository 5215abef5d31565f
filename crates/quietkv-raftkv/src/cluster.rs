//! `quietkv-raftkv cluster`: starts a cluster of node processes on
//! 127.0.0.1 for trying the service out. It spawns one node per id (free
//! ports, recorded in `<dir>/cluster.json` so a second run on the same
//! directory restarts the same cluster), initializes a new cluster, prints
//! where the nodes are, and stays in the foreground until Ctrl-C, when it
//! stops its nodes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use quietkv_raft::NodeId;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::signal::unix::{signal, SignalKind};

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    /// How many nodes (ids 1..=N).
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// Each node's storage goes in `<dir>/node-<id>`, its log in
    /// `<dir>/node-<id>.log`.
    #[arg(long)]
    pub dir: PathBuf,
}

/// Generous for a busy machine: a node opens its storage and starts raft
/// before it prints its address; an election takes a few timeouts.
const START_WAIT: Duration = Duration::from_secs(60);

#[derive(Serialize, Deserialize)]
struct Layout {
    nodes: BTreeMap<NodeId, String>,
}

struct Node {
    id: NodeId,
    child: Child,
}

pub async fn run(args: ClusterArgs) -> Result<(), String> {
    if !(1..=99).contains(&args.nodes) {
        return Err(format!("--nodes {}: give 1 to 99 nodes", args.nodes));
    }
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| format!("creating {}: {e}", args.dir.display()))?;
    let layout_path = args.dir.join("cluster.json");
    let known = read_layout(&layout_path)?;
    if let Some(known) = &known {
        if known.nodes.len() as u64 != args.nodes {
            return Err(format!(
                "{} holds a cluster of {} nodes: use --nodes {} or another --dir",
                args.dir.display(),
                known.nodes.len(),
                known.nodes.len()
            ));
        }
    }

    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let mut nodes = Vec::new();
    let mut addrs = BTreeMap::new();
    for id in 1..=args.nodes {
        let addr = known
            .as_ref()
            .and_then(|k| k.nodes.get(&id).cloned())
            .unwrap_or_else(|| "127.0.0.1:0".to_string());
        // On failure part way, the nodes already started are stopped when
        // `nodes` is dropped (`kill_on_drop`).
        let (child, addr) = start_node(&exe, &args.dir, id, &addr).await?;
        nodes.push(Node { id, child });
        addrs.insert(id, addr);
    }

    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("building the HTTP client: {e}"))?;
    if known.is_none() {
        let layout = Layout {
            nodes: addrs.clone(),
        };
        let json = serde_json::to_string_pretty(&layout).map_err(|e| e.to_string())?;
        std::fs::write(&layout_path, json)
            .map_err(|e| format!("writing {}: {e}", layout_path.display()))?;
        let first = &addrs[&1];
        let response = client
            .post(format!("http://{first}/init"))
            .json(&serde_json::json!({ "members": addrs }))
            .send()
            .await
            .map_err(|e| format!("initializing the cluster through {first}: {e}"))?;
        if !response.status().is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(format!("initializing the cluster through {first}: {body}"));
        }
    }
    let leader = wait_for_leader(&client, &addrs[&1]).await?;

    println!(
        "quietkv-raftkv cluster of {} nodes, leader node {leader}:",
        args.nodes
    );
    for (id, addr) in &addrs {
        println!(
            "  node {id}: http://{addr}  (log: {})",
            log_path(&args.dir, *id).display()
        );
    }
    let any = &addrs[&1];
    println!("try:");
    println!("  curl -L -X PUT --data-binary hello http://{any}/kv/greeting");
    println!("  curl -L http://{any}/kv/greeting");
    println!("  curl http://{any}/metrics");
    println!(
        "Ctrl-C stops the cluster; the same command restarts it from {}",
        args.dir.display()
    );

    let ended = wait_for_stop(&mut nodes).await;
    stop_all(&mut nodes).await;
    ended
}

fn log_path(dir: &Path, id: NodeId) -> PathBuf {
    dir.join(format!("node-{id}.log"))
}

fn read_layout(path: &Path) -> Result<Option<Layout>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{} is not a cluster layout: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

/// Spawns node `id` and waits for the address it listens on.
async fn start_node(
    exe: &Path,
    dir: &Path,
    id: NodeId,
    addr: &str,
) -> Result<(Child, String), String> {
    let log = log_path(dir, id);
    let mut command = crate::child::own_command(exe, &log)?;
    let mut child = command
        .arg("--id")
        .arg(id.to_string())
        .arg("--addr")
        .arg(addr)
        .arg("--dir")
        .arg(dir.join(format!("node-{id}")))
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting node {id}: {e}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or("the node's stdout was not captured")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(START_WAIT, lines.next_line())
        .await
        .map_err(|_| {
            format!(
                "node {id} did not start within {START_WAIT:?}: see {}",
                log.display()
            )
        })?
        .map_err(|e| format!("reading node {id}'s output: {e}"))?;
    let Some(addr) = first
        .as_deref()
        .and_then(|l| l.strip_prefix("listening on "))
    else {
        return Err(format!("node {id} did not start: see {}", log.display()));
    };
    let addr = addr.to_string();
    // Keep reading what the node prints, so it never writes to a closed pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, addr))
}

async fn wait_for_leader(client: &reqwest::Client, addr: &str) -> Result<NodeId, String> {
    let deadline = tokio::time::Instant::now() + START_WAIT;
    loop {
        let metrics: Option<serde_json::Value> =
            match client.get(format!("http://{addr}/metrics")).send().await {
                Ok(r) => r.json().await.ok(),
                Err(_) => None,
            };
        if let Some(leader) = metrics.as_ref().and_then(|m| m["current_leader"].as_u64()) {
            return Ok(leader);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "no leader elected within {START_WAIT:?}: see the nodes' logs"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits for Ctrl-C or SIGTERM (a clean stop), or for a node to exit on
/// its own (an error: the cluster is no longer what was printed).
async fn wait_for_stop(nodes: &mut [Node]) -> Result<(), String> {
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| format!("listening for SIGTERM: {e}"))?;
    let exited = async {
        loop {
            for node in nodes.iter_mut() {
                match node.child.try_wait() {
                    Ok(None) => {}
                    Ok(Some(status)) => return format!("node {} exited ({status})", node.id),
                    Err(e) => return format!("waiting for node {}: {e}", node.id),
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        _ = term.recv() => Ok(()),
        why = exited => Err(format!("{why}; stopped the others")),
    }
}

/// Asks every node to stop (SIGTERM: each shuts raft down and exits), and
/// kills any still running after a grace period.
async fn stop_all(nodes: &mut [Node]) {
    for node in nodes.iter() {
        if let Some(pid) = node.child.id() {
            // SAFETY: kill(2) only sends a signal; it touches no memory of
            // this process. The pid is our own child's, not yet reaped (we
            // hold its `Child`), so it cannot name another process.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
    }
    for node in nodes.iter_mut() {
        match tokio::time::timeout(Duration::from_secs(10), node.child.wait()).await {
            Ok(Ok(status)) => println!("node {} stopped ({status})", node.id),
            _ => {
                let _ = node.child.kill().await;
                println!("node {} did not stop within 10 s: killed", node.id);
            }
        }
    }
}
