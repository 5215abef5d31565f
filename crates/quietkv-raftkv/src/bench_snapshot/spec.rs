//! What the `bench-snapshot` parent and its leader process tell each
//! other: the leader's spec (one JSON line on its stdin), the commands
//! that follow it, and the lines the leader answers with on its stdout.

use std::path::PathBuf;

use quietkv_bench::loadgen::LatencySummary;
use serde::{Deserialize, Serialize};

use crate::snapshot_sender::SendPriority;

/// The name of the hidden subcommand the leader runs as.
pub const LEADER_SUBCOMMAND: &str = "bench-snapshot-leader";

/// Everything the leader process needs, handed over once it is inside its
/// cgroups.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaderSpec {
    /// The node directory: a copy of the filled source.
    pub dir: PathBuf,
    /// `backup` or `buffered` (see `quietkv_raft::SnapshotIo`).
    pub snapshot_io: String,
    /// Keys in the database (`key_name(0..keys)`).
    pub keys: u64,
    /// Keys the readers read, scattered over the key space.
    pub hot_keys: u64,
    /// Reads per second over all reader threads.
    pub rate: f64,
    pub readers: usize,
    /// openraft's snapshot chunk, bytes.
    pub chunk_bytes: u64,
    /// The node's snapshot send budget, MiB/s; 0 for none.
    #[serde(default)]
    pub send_mib_per_sec: u64,
    /// The CPU priority the leader sends the snapshot at.
    pub send_priority: SendPriority,
    pub seed: u64,
}

/// The key of index `k`, as the fill writes it.
pub fn key_name(k: u64) -> String {
    format!("k{k:010}")
}

/// The value the fill writes under key `k`: `bytes` ASCII characters
/// derived from `k`, so a read can be checked.
pub fn value_of(k: u64, bytes: usize) -> String {
    let stamp = format!("{k:016x}");
    stamp.chars().cycle().take(bytes).collect()
}

/// The `i`-th hot key of `keys`: spread over the whole key space, so the
/// hot set shares its tables and pages with cold keys.
pub fn hot_key(i: u64, keys: u64) -> u64 {
    quietkv_bench::keys::scatter(i, keys)
}

/// What the leader answers once it is ready for phases.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ready {
    pub addr: String,
    /// The access mode the snapshot is streamed in (`direct`, `dontcache`,
    /// `buffered`...), as the leader's probe resolved it.
    pub transfer_mode: String,
    /// Seconds spent reading every hot key once before the first phase.
    pub warm_secs: f64,
}

/// The reads of one phase, as the leader measured them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PhaseReads {
    pub phase: String,
    /// Scheduled-to-completion latency, microseconds.
    pub latency: LatencySummary,
    /// Issue-to-completion time, microseconds: the store's own share.
    #[serde(default)]
    pub service: LatencySummary,
    /// Scheduled-to-issue time, microseconds: how late the reader threads
    /// started each read (woken late, or busy with an earlier read).
    #[serde(default)]
    pub lateness: LatencySummary,
    /// Seconds the reader threads were runnable but waited for a CPU, all
    /// readers together (`None` where the kernel does not report it).
    #[serde(default)]
    pub reader_run_delay_s: Option<f64>,
    pub scheduled: u64,
    pub done: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed_s: f64,
    /// Bytes the leader's snapshot streaming read so far (all phases).
    pub transfer_read_bytes: u64,
}

/// One line of the leader's stdout.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaderLine {
    Ready(Ready),
    Phase(Box<PhaseReads>),
    Error(String),
}
