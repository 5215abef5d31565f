//! The leader process of `bench-snapshot`: started by the parent, moved
//! into the memory cgroup, then handed its spec on stdin. It runs the
//! node (storage, raft, HTTP routes) and, in the same process, the
//! open-loop readers of the hot keys, one phase at a time as the parent
//! says (`start NAME SECONDS`, `end`, `quit` on stdin), answering each
//! with one JSON line on stdout. A phase's schedule ends after SECONDS at
//! the latest (the load generator keeps one histogram per second of it).

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quietkv_bench::loadgen::{run_open_loop_until, LatencySummary, LoadConfig, PhaseEnd};
use quietkv_raft::Store;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::spec::{hot_key, key_name, LeaderLine, LeaderSpec, PhaseReads, Ready};
use crate::app::App;
use crate::node::{start, NodeArgs, Started};
use crate::routes;

/// Generous for a busy machine: opening a large store and the first
/// election.
const LEADER_WAIT: Duration = Duration::from_secs(120);

fn say(line: &LeaderLine) {
    let text = serde_json::to_string(line).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// The leader process's main: any error is also reported on stdout, for
/// the parent.
pub async fn run() -> Result<(), String> {
    let result = serve().await;
    if let Err(e) = &result {
        say(&LeaderLine::Error(e.clone()));
    }
    result
}

async fn serve() -> Result<(), String> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let first = lines
        .next_line()
        .await
        .map_err(|e| format!("reading the spec: {e}"))?
        .ok_or("no spec on stdin: this subcommand is started by bench-snapshot")?;
    let spec: LeaderSpec =
        serde_json::from_str(&first).map_err(|e| format!("an unreadable spec: {e}"))?;
    let node_args = NodeArgs {
        id: 1,
        addr: "127.0.0.1:0".into(),
        dir: spec.dir.clone(),
        snapshot_every: 0,
        snapshot_chunk_bytes: spec.chunk_bytes,
        snapshot_send_mib_per_sec: spec.send_mib_per_sec,
        snapshot_send_priority: spec.send_priority,
        heartbeat_ms: 100,
        election_timeout_ms: 500,
        snapshot_io: spec.snapshot_io.parse()?,
    };
    let Started {
        listener,
        addr,
        store,
        raft,
    } = start(&node_args).await?;
    let app = Arc::new(App {
        id: 1,
        addr: addr.clone(),
        raft: raft.clone(),
        store: store.clone(),
    });
    let (stop_http, stopped) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn(async move {
        axum::serve(listener, routes::router(app))
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    raft.wait(Some(LEADER_WAIT))
        .current_leader(1, "the node leads its one-node cluster")
        .await
        .map_err(|e| format!("waiting to lead: {e}"))?;

    let hot: Arc<Vec<String>> = Arc::new(
        (0..spec.hot_keys.max(1))
            .map(|i| key_name(hot_key(i, spec.keys)))
            .collect(),
    );
    let warm = {
        let (store, hot) = (store.clone(), hot.clone());
        tokio::task::spawn_blocking(move || warm_up(&store, &hot))
            .await
            .map_err(|e| format!("warming up: {e}"))??
    };
    say(&LeaderLine::Ready(Ready {
        addr,
        transfer_mode: store.snapshot_transfer_mode().to_string(),
        warm_secs: warm,
    }));

    let mut phase: Option<(String, Arc<PhaseEnd>, std::thread::JoinHandle<PhaseReads>)> = None;
    let stop = Arc::new(AtomicBool::new(false));
    while let Some(line) = lines
        .next_line()
        .await
        .map_err(|e| format!("reading a command: {e}"))?
    {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("start ") {
            let (name, cap) = rest
                .split_once(' ')
                .and_then(|(n, c)| Some((n, c.parse::<f64>().ok()?)))
                .filter(|(_, c)| *c > 0.0 && c.is_finite())
                .ok_or_else(|| format!("{line:?}: use start NAME SECONDS"))?;
            if phase.is_some() {
                return Err(format!("start {name}: a phase is running already"));
            }
            let end = Arc::new(PhaseEnd::default());
            let cfg = LoadConfig {
                rate_per_s: spec.rate,
                threads: spec.readers,
                duration: Duration::from_secs_f64(cap),
                keys: hot.len() as u64,
                seed: spec.seed,
                grace: Duration::from_secs(30),
            };
            let (store, hot, end2, stop2) = (store.clone(), hot.clone(), end.clone(), stop.clone());
            let name2 = name.to_string();
            let thread = std::thread::spawn(move || {
                let read = |i: u64| -> Result<Option<bool>, String> {
                    let key = &hot[i as usize];
                    match store.get(key) {
                        Ok(Some(_)) => Ok(None),
                        Ok(None) => Err(format!("hot key {key} is missing")),
                        Err(e) => Err(format!("reading {key}: {e}")),
                    }
                };
                let r = run_open_loop_until(&cfg, read, &stop2, &end2);
                PhaseReads {
                    phase: name2,
                    latency: LatencySummary::of(&r.latency),
                    service: LatencySummary::of(&r.service),
                    lateness: LatencySummary::of(&r.lateness),
                    reader_run_delay_s: r.reader_run_delay_s,
                    scheduled: r.scheduled,
                    done: r.done,
                    errors: r.errors,
                    first_error: r.first_error,
                    elapsed_s: r.elapsed_s,
                    transfer_read_bytes: store.snapshot_transfer_stats().read_bytes,
                }
            });
            phase = Some((name.to_string(), end, thread));
        } else if line == "end" {
            let Some((name, end, thread)) = phase.take() else {
                return Err("end: no phase is running".into());
            };
            end.end_now();
            let reads = tokio::task::spawn_blocking(move || thread.join())
                .await
                .map_err(|e| format!("ending phase {name}: {e}"))?
                .map_err(|_| format!("the readers of phase {name} panicked"))?;
            say(&LeaderLine::Phase(Box::new(reads)));
        } else if line == "quit" {
            break;
        } else {
            return Err(format!(
                "unknown command {line:?}: use start NAME, end or quit"
            ));
        }
    }
    // Stdin closed (the parent is gone) or quit: stop the readers, then
    // the node.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Some((_, end, thread)) = phase.take() {
        end.end_now();
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
    let _ = stop_http.send(());
    let served = http.await;
    raft.shutdown()
        .await
        .map_err(|e| format!("stopping raft: {e}"))?;
    match served {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("serving HTTP: {e}")),
        Err(e) => Err(format!("serving HTTP: {e}")),
    }
}

/// Reads every hot key once, checking it is there; returns the seconds it
/// took.
fn warm_up(store: &Store, hot: &[String]) -> Result<f64, String> {
    let t = Instant::now();
    for key in hot {
        match store.get(key) {
            Ok(Some(_)) => {}
            Ok(None) => return Err(format!("hot key {key} is missing from the database")),
            Err(e) => return Err(format!("reading {key}: {e}")),
        }
    }
    Ok(t.elapsed().as_secs_f64())
}
