//! The leader's database, filled once through the service itself (a
//! one-node cluster, written with concurrent PUTs, snapshotted and its log
//! purged) and kept in `<dir>/source`; each run starts from a copy of it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::children::{bounded, NodeProcess};
use super::spec::{key_name, value_of};

/// What a filled source holds; a source whose record differs is filled
/// again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub keys: u64,
    pub value_bytes: usize,
    /// The snapshot file's size, bytes.
    pub snapshot_bytes: u64,
}

/// Writes in flight while filling.
const FILL_CONCURRENCY: u64 = 64;

/// The node directory of the source in `dir`.
pub fn node_dir(dir: &Path) -> PathBuf {
    dir.join("source").join("node")
}

fn record_path(dir: &Path) -> PathBuf {
    dir.join("source").join("source.json")
}

/// The source in `dir`, filled first unless it already holds `keys` values
/// of `value_bytes`.
pub async fn prepare(
    exe: &Path,
    dir: &Path,
    keys: u64,
    value_bytes: usize,
    client: &reqwest::Client,
) -> Result<SourceRecord, String> {
    if let Ok(text) = std::fs::read_to_string(record_path(dir)) {
        if let Ok(r) = serde_json::from_str::<SourceRecord>(&text) {
            if r.keys == keys && r.value_bytes == value_bytes && node_dir(dir).is_dir() {
                eprintln!(
                    "bench-snapshot: reusing the source in {}",
                    dir.join("source").display()
                );
                return Ok(r);
            }
        }
    }
    let source = dir.join("source");
    let _ = std::fs::remove_dir_all(&source);
    std::fs::create_dir_all(&source).map_err(|e| format!("creating {}: {e}", source.display()))?;
    let log = source.join("fill.log");
    let args: Vec<String> = [
        "--id",
        "1",
        "--addr",
        "127.0.0.1:0",
        "--snapshot-every",
        "0",
        "--heartbeat-ms",
        "100",
        "--election-timeout-ms",
        "500",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(["--dir".to_string(), node_dir(dir).display().to_string()])
    .collect();
    let node = NodeProcess::start(exe, &args, &log).await?;
    let filled = fill(&node.addr, keys, value_bytes, client).await;
    node.stop().await;
    filled?;
    let snapshot = node_dir(dir).join("snapshots").join("current.snap");
    let snapshot_bytes = std::fs::metadata(&snapshot)
        .map_err(|e| {
            format!(
                "the filled source has no snapshot {}: {e}",
                snapshot.display()
            )
        })?
        .len();
    let record = SourceRecord {
        keys,
        value_bytes,
        snapshot_bytes,
    };
    let text = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?;
    std::fs::write(record_path(dir), text)
        .map_err(|e| format!("writing the source record: {e}"))?;
    Ok(record)
}

async fn post(
    client: &reqwest::Client,
    url: String,
    body: serde_json::Value,
) -> Result<(), String> {
    let r = client
        .post(&url)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    if !r.status().is_success() {
        let status = r.status();
        let text = r.text().await.unwrap_or_default();
        return Err(format!("POST {url}: {status}: {text}"));
    }
    Ok(())
}

async fn fill(
    addr: &str,
    keys: u64,
    value_bytes: usize,
    client: &reqwest::Client,
) -> Result<(), String> {
    post(client, format!("http://{addr}/init"), serde_json::json!({})).await?;
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..FILL_CONCURRENCY.min(keys.max(1)) {
        let (next, client, addr) = (next.clone(), client.clone(), addr.to_string());
        writers.spawn(async move {
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= keys || quietkv_bench::cgroup::interrupted() {
                    return Ok::<(), String>(());
                }
                let url = format!("http://{addr}/kv/{}", key_name(k));
                put_with_retry(&client, &url, value_of(k, value_bytes)).await?;
                if k > 0 && k % 50_000 == 0 {
                    eprintln!("bench-snapshot: filled {k} of {keys} keys");
                }
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.map_err(|e| format!("a fill writer failed: {e}"))??;
    }
    if quietkv_bench::cgroup::interrupted() {
        return Err("filling the source: interrupted".into());
    }
    eprintln!(
        "bench-snapshot: filled {keys} keys in {:.1} s; snapshotting",
        started.elapsed().as_secs_f64()
    );
    bounded(
        "the source's snapshot",
        Duration::from_secs(3600),
        post(
            client,
            format!("http://{addr}/snapshot"),
            serde_json::json!({}),
        ),
    )
    .await??;
    post(
        client,
        format!("http://{addr}/purge"),
        serde_json::json!({}),
    )
    .await?;
    // Purging runs in the background; the log must be gone before the
    // node stops, or a run's leader would start by purging it.
    bounded("the source's log purge", Duration::from_secs(600), async {
        loop {
            let m: Option<serde_json::Value> =
                match client.get(format!("http://{addr}/metrics")).send().await {
                    Ok(r) => r.json().await.ok(),
                    Err(_) => None,
                };
            if let Some(m) = m {
                if m["purged"]["index"].as_u64().is_some()
                    && m["purged"]["index"] == m["snapshot"]["index"]
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
}

/// PUTs `value` at `url`, retrying a few times what a busy machine can
/// make fail (a timeout, a leader still starting).
async fn put_with_retry(client: &reqwest::Client, url: &str, value: String) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..5 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
        }
        match client.put(url).body(value.clone()).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => last = format!("{}: {}", r.status(), r.text().await.unwrap_or_default()),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!("PUT {url}: {last}"))
}

/// Makes `to` a copy of the source's node directory: files never written
/// in place (tables, snapshot files) hard-linked, the rest copied; then
/// every file of it synced and dropped from the page cache, so the run
/// starts cold, as a leader that has not read its database yet (without
/// dropping the whole machine's cache under other processes).
pub fn copy_node(dir: &Path, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(to);
    copy_tree(&node_dir(dir), to)?;
    evict_tree(to)
}

fn evict_tree(dir: &Path) -> Result<(), String> {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("reading {}: {e}", dir.display()))?;
        let path = entry.path();
        if entry
            .file_type()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .is_dir()
        {
            evict_tree(&path)?;
        } else {
            quietio::evict_file(&path).map_err(|e| format!("evicting {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("creating {}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("reading {}: {e}", from.display()))? {
        let entry = entry.map_err(|e| format!("reading {}: {e}", from.display()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", src.display()))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
            continue;
        }
        let name = entry.file_name().to_string_lossy().to_string();
        let immutable = name.ends_with(".sst") || name.ends_with(".snap");
        if immutable && std::fs::hard_link(&src, &dst).is_ok() {
            continue;
        }
        std::fs::copy(&src, &dst).map_err(|e| format!("copying {}: {e}", src.display()))?;
    }
    Ok(())
}
