//! One node: opens its storage, starts its `Raft`, serves the HTTP routes
//! until SIGINT or SIGTERM, then shuts raft down. The first line on stdout
//! is `listening on HOST:PORT`, so whoever started it with port 0 learns
//! the port chosen.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{Config, Raft, SnapshotPolicy};
use quietio::RateLimiter;
use quietkv::Options;
use quietkv_raft::{NodeId, SnapshotIo, Store, TypeConfig};
use tokio::signal::unix::{signal, SignalKind};

use crate::app::App;
use crate::network::Network;
use crate::routes;
use crate::snapshot_sender::{SendPriority, SnapshotSender};

/// The largest piece a snapshot is sent in unless `--snapshot-chunk-bytes`
/// says otherwise. Each piece is copied into and out of the sockets in one
/// go, and on a leader serving reads from the same CPUs those copies hold
/// the readers up: 512 KiB pieces gave the leader's reads half the p99 of
/// 4 MiB ones, for a stream half again as long.
pub const DEFAULT_SNAPSHOT_CHUNK_BYTES: u64 = 512 << 10;

#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    /// This node's id in the cluster (any number, unique in the cluster).
    #[arg(long)]
    pub id: NodeId,
    /// Where to serve HTTP, host:port. Port 0 picks a free one (printed on
    /// stdout); the address is what other nodes are told to reach this one
    /// at, so use the same one when restarting a node.
    #[arg(long)]
    pub addr: String,
    /// The node's storage directory (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// Build a snapshot every this many applied entries; 0 builds one only
    /// when asked (`POST /snapshot`).
    #[arg(long, default_value_t = 10_000)]
    pub snapshot_every: u64,
    /// The largest piece a snapshot is sent in, bytes (each piece one
    /// request, its bytes as they are): at most 8 MiB.
    #[arg(long, default_value_t = DEFAULT_SNAPSHOT_CHUNK_BYTES, value_parser = clap::value_parser!(u64).range(1..=8 << 20))]
    pub snapshot_chunk_bytes: u64,
    /// The most a node sends snapshots at, MiB per second over all the
    /// streams it sends (reading, copying and sending each chunk takes CPU
    /// the node's readers would otherwise have); 0 sends as fast as the
    /// chunks go. TiKV's `snap-io-max-bytes-per-sec` and RocksDB's backup
    /// rate limit do the same.
    #[arg(long, default_value_t = 0)]
    pub snapshot_send_mib_per_sec: u64,
    /// The CPU priority snapshots are sent at: `idle`, from a thread of
    /// their own that gives the CPU to the node's other work (reads,
    /// writes, raft) the moment it wants one, so a snapshot stream does
    /// not hold up the node's readers and slows down (it never stops
    /// entirely) while the node is busy; or `normal`, from the node's own
    /// threads, at the priority of its other work.
    #[arg(long, value_enum, default_value_t = SendPriority::Idle)]
    pub snapshot_send_priority: SendPriority,
    /// Leader heartbeat interval, milliseconds. openraft also gives each
    /// append-entries RPC this long, the follower's synced write included:
    /// too short for the disk, and replication keeps timing out.
    #[arg(long, default_value_t = 300)]
    pub heartbeat_ms: u64,
    /// A follower that hears no leader for a random time between this and
    /// twice this many milliseconds starts an election.
    #[arg(long, default_value_t = 1500)]
    pub election_timeout_ms: u64,
    /// How snapshot files are read when sent and written when received:
    /// `backup`, in quietkv's Backup I/O class (direct where the file
    /// system allows, so a snapshot streamed to another node does not push
    /// this node's hot data out of the page cache), or `buffered`, through
    /// the page cache.
    #[arg(long, default_value_t = SnapshotIo::Backup)]
    pub snapshot_io: SnapshotIo,
}

/// openraft gives each snapshot chunk this long, milliseconds, the wait
/// for the send budget included: openraft's 200 ms default is too short
/// for a chunk on a busy machine, and a timed-out chunk starts the snapshot
/// over.
const INSTALL_SNAPSHOT_TIMEOUT_MS: u64 = 10_000;

/// The longest a chunk may wait for the send budget: a fifth of its
/// timeout, so the send itself keeps the rest.
const LONGEST_BUDGET_WAIT: Duration = Duration::from_millis(INSTALL_SNAPSHOT_TIMEOUT_MS / 5);

/// The pacer for `--snapshot-send-mib-per-sec`, or `None` for no budget;
/// a budget so small that one chunk would wait out most of its timeout is
/// an error.
fn snapshot_pacer(args: &NodeArgs) -> Result<Option<Arc<RateLimiter>>, String> {
    if args.snapshot_send_mib_per_sec == 0 {
        return Ok(None);
    }
    let bytes_per_sec = args
        .snapshot_send_mib_per_sec
        .checked_mul(1 << 20)
        .ok_or_else(|| {
            format!(
                "--snapshot-send-mib-per-sec {} is too large",
                args.snapshot_send_mib_per_sec
            )
        })?;
    let wait = Duration::from_secs_f64(args.snapshot_chunk_bytes as f64 / bytes_per_sec as f64);
    if wait > LONGEST_BUDGET_WAIT {
        return Err(format!(
            "--snapshot-send-mib-per-sec {} with --snapshot-chunk-bytes {}: each chunk would wait {:.1} s for the budget, \
             more than the {:.0} s a chunk may wait (a fifth of the {:.0} s it has); raise the rate or lower the chunk size",
            args.snapshot_send_mib_per_sec,
            args.snapshot_chunk_bytes,
            wait.as_secs_f64(),
            LONGEST_BUDGET_WAIT.as_secs_f64(),
            INSTALL_SNAPSHOT_TIMEOUT_MS as f64 / 1000.0
        ));
    }
    Ok(Some(Arc::new(RateLimiter::new(bytes_per_sec))))
}

fn config(args: &NodeArgs) -> Result<Config, String> {
    let snapshot_policy = match args.snapshot_every {
        0 => SnapshotPolicy::Never,
        n => SnapshotPolicy::LogsSinceLast(n),
    };
    Config {
        cluster_name: "quietkv-raftkv".into(),
        heartbeat_interval: args.heartbeat_ms,
        election_timeout_min: args.election_timeout_ms,
        election_timeout_max: args.election_timeout_ms * 2,
        snapshot_policy,
        snapshot_max_chunk_size: args.snapshot_chunk_bytes,
        install_snapshot_timeout: INSTALL_SNAPSHOT_TIMEOUT_MS,
        ..Default::default()
    }
    .validate()
    .map_err(|e| format!("bad raft settings: {e}"))
}

/// The client one node calls the others with.
fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        // Nodes talk over addresses they name themselves; a proxy from the
        // environment would stand in the way.
        .no_proxy()
        .connect_timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| format!("building the HTTP client: {e}"))
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn stop_signal() {
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            eprintln!("cannot listen for SIGTERM ({e}); stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// A node whose storage is open and whose `Raft` runs, not yet serving
/// HTTP.
pub struct Started {
    pub listener: tokio::net::TcpListener,
    pub addr: String,
    pub store: Store,
    pub raft: Raft<TypeConfig>,
}

/// Listens on `args.addr`, opens the storage and starts raft.
pub async fn start(args: &NodeArgs) -> Result<Started, String> {
    let config = Arc::new(config(args)?);
    let pacer = snapshot_pacer(args)?;
    // Listen first: a mistyped address then fails before a storage
    // directory is created for it.
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .map_err(|e| {
            format!(
                "listening on {}: {e} (give host:port, e.g. 127.0.0.1:7001)",
                args.addr
            )
        })?;
    let store = Store::open_with_snapshot_io(&args.dir, Options::default(), args.snapshot_io)
        .map_err(|e| format!("opening the storage in {}: {e}", args.dir.display()))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the address listened on: {e}"))?
        .to_string();
    let client = http_client()?;
    let snapshot_sender = match args.snapshot_send_priority {
        SendPriority::Idle => Some(SnapshotSender::start(http_client()?)?),
        SendPriority::Normal => None,
    };
    let state_machine = store
        .state_machine()
        .map_err(|e| format!("loading the state machine: {e}"))?;
    let raft = Raft::new(
        args.id,
        config,
        Network::new(client, pacer, snapshot_sender),
        store.log_store(),
        state_machine,
    )
    .await
    .map_err(|e| format!("starting raft: {e}"))?;
    Ok(Started {
        listener,
        addr,
        store,
        raft,
    })
}

pub async fn run(args: NodeArgs) -> Result<(), String> {
    let Started {
        listener,
        addr,
        store,
        raft,
    } = start(&args).await?;
    println!("listening on {addr}");
    // Whoever reads the line may wait for it before doing anything else.
    let _ = std::io::stdout().flush();
    tracing::info!(id = args.id, %addr, dir = %args.dir.display(), "node started");

    let app = Arc::new(App {
        id: args.id,
        addr,
        raft: raft.clone(),
        store,
    });
    let served = axum::serve(listener, routes::router(app))
        .with_graceful_shutdown(stop_signal())
        .await;
    let stopped = raft.shutdown().await;
    served.map_err(|e| format!("serving HTTP: {e}"))?;
    stopped.map_err(|e| format!("stopping raft: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(chunk: u64, mib_per_sec: u64) -> NodeArgs {
        NodeArgs {
            id: 1,
            addr: "127.0.0.1:0".into(),
            dir: PathBuf::from("unused"),
            snapshot_every: 0,
            snapshot_chunk_bytes: chunk,
            snapshot_send_mib_per_sec: mib_per_sec,
            snapshot_send_priority: SendPriority::Normal,
            heartbeat_ms: 300,
            election_timeout_ms: 1500,
            snapshot_io: SnapshotIo::Backup,
        }
    }

    #[test]
    fn no_budget_sends_unpaced() {
        assert!(snapshot_pacer(&args(512 << 10, 0)).unwrap().is_none());
    }

    #[test]
    fn a_budget_a_chunk_can_wait_for_is_taken() {
        // 512 KiB at 1 MiB/s: each chunk waits half a second at most.
        assert!(snapshot_pacer(&args(512 << 10, 1)).unwrap().is_some());
        assert!(snapshot_pacer(&args(8 << 20, 4)).unwrap().is_some());
    }

    #[test]
    fn a_budget_that_would_time_chunks_out_is_refused() {
        // 8 MiB at 1 MiB/s: 8 s of a chunk's 10 s spent waiting.
        let err = snapshot_pacer(&args(8 << 20, 1)).unwrap_err();
        assert!(err.contains("--snapshot-send-mib-per-sec 1"), "{err}");
        assert!(err.contains("wait 8.0 s"), "{err}");
        assert!(err.contains("more than the 2 s a chunk may wait"), "{err}");
        assert!(snapshot_pacer(&args(512 << 10, u64::MAX)).is_err());
    }
}
