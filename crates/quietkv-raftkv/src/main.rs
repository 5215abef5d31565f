//! `quietkv-raftkv`: a replicated key-value service over HTTP on
//! quietkv-raft. `quietkv-raftkv --id N --addr HOST:PORT --dir DIR` runs
//! one node; `quietkv-raftkv cluster --nodes 3 --dir DIR` starts a local
//! cluster of node processes; `quietkv-raftkv bench-snapshot --dir DIR`
//! measures what sending a snapshot costs a leader's reads.

mod admin;
mod app;
mod bench_snapshot;
mod child;
mod cluster;
mod error;
mod kv;
mod network;
mod node;
mod routes;
mod rpc;
mod snapshot_sender;
mod snapshot_wire;

use std::process::ExitCode;
use std::str::FromStr;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "quietkv-raftkv",
    about = "A replicated key-value service over HTTP: one process per raft node, quietkv underneath",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Commands>,
    #[command(flatten)]
    node: Option<node::NodeArgs>,
}

#[derive(Subcommand, Debug)]
enum Commands {
    /// Start a cluster of node processes on 127.0.0.1 and initialize it;
    /// Ctrl-C stops it.
    Cluster(cluster::ClusterArgs),
    /// Measure a leader's read latency, refaults and memory stalls while it
    /// streams a full snapshot to a joining node, with the snapshot file
    /// buffered or in the Backup I/O class (needs root: memory cgroup).
    // Boxed: its many options would make every command as large.
    BenchSnapshot(Box<bench_snapshot::BenchSnapshotArgs>),
    /// The leader process of bench-snapshot (started by it).
    #[command(name = "bench-snapshot-leader", hide = true)]
    BenchSnapshotLeader,
}

/// The log level from `QUIETKV_RAFTKV_LOG` (error, warn, info, debug,
/// trace; default info). Logs go to stderr.
fn init_logging() -> Result<(), String> {
    let level = match std::env::var("QUIETKV_RAFTKV_LOG") {
        Ok(text) => tracing_subscriber::filter::LevelFilter::from_str(&text).map_err(|_| {
            format!("QUIETKV_RAFTKV_LOG={text:?}: use error, warn, info, debug or trace")
        })?,
        Err(_) => tracing_subscriber::filter::LevelFilter::INFO,
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(level)
        .init();
    Ok(())
}

/// Makes the C allocator hand every large buffer straight back to the
/// system when it is freed.
///
/// Sending a snapshot allocates and frees several buffers of a chunk's
/// size (4 MiB by default) for every chunk, on whichever runtime or
/// blocking-pool thread happens to run that step. glibc serves such a
/// buffer with its own mapping at first, but after the first one is freed
/// it raises its threshold and carves later ones out of its per-thread
/// heaps, which keep the freed space: a leader streaming a 2 GB snapshot
/// grew by more than 250 MB of such idle heap space, enough to get it
/// killed in a 256 MiB memory limit. A fixed threshold keeps buffers of a
/// megabyte and more in their own mappings, returned on free; the cost is
/// one mapping per large buffer, small next to a chunk's network and disk
/// time.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_large_buffers_on_free() {
    const LARGE: libc::c_int = 1 << 20;
    // SAFETY: mallopt only changes allocator settings; it is called before
    // any other thread exists.
    // A refusal leaves glibc's default, which works, only with more memory.
    let _ = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_buffers_on_free() {}

fn main() -> ExitCode {
    return_large_buffers_on_free();
    let cli = Cli::parse();
    if let Err(e) = init_logging() {
        eprintln!("quietkv-raftkv: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("quietkv-raftkv: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match (cli.command, cli.node) {
            (Some(Commands::Cluster(args)), _) => cluster::run(args).await,
            (Some(Commands::BenchSnapshot(args)), _) => bench_snapshot::run(*args).await,
            (Some(Commands::BenchSnapshotLeader), _) => bench_snapshot::leader::run().await,
            (None, Some(args)) => node::run(args).await,
            (None, None) => {
                Err("give --id, --addr and --dir to run a node, or `cluster` (see --help)".into())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quietkv-raftkv: {e}");
            ExitCode::FAILURE
        }
    }
}
