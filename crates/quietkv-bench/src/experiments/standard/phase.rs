//! One workload's figures in one run ([`Phase`], report.json's `phases`)
//! and how they are made from what was counted.

use serde::{Deserialize, Serialize};

use super::measure::{Cost, Latencies};

/// The figures of one workload in one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Phase {
    /// db_bench's or YCSB's name (`fillrandom`, `readrandom-8`, `ycsb-a`).
    pub workload: String,
    /// Operations done (entries read, for the full scans).
    pub ops: u64,
    /// Seconds of the operations alone (not the flush and catch-up a
    /// write phase waits for after them).
    pub seconds: f64,
    pub ops_s: f64,
    /// Per-operation latency; `None` for the full scans, whose one
    /// operation is the whole scan.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    /// Process CPU (every thread) over the phase, per operation.
    pub cpu_us_per_op: Option<f64>,
    /// Bytes of keys and values the workload wrote.
    pub user_write_bytes: u64,
    /// Bytes the process wrote to the device over the phase (flush and
    /// catch-up included, for write phases).
    pub device_write_bytes: Option<u64>,
    /// Bytes read from the device over the phase, per operation: what the
    /// operations missed in every cache (the engine's and the page cache).
    pub device_read_bytes_per_op: Option<f64>,
    /// Page cache held by the process's memory cgroup at the phase's end:
    /// under a memory limit, what the engine's own memory left for it.
    pub page_cache_bytes: Option<u64>,
    /// `device_write_bytes / user_write_bytes`, for the phases that write.
    pub write_amp: Option<f64>,
    /// The database's bytes on disk over its live user bytes, after a
    /// fill and its catch-up.
    pub space_amp: Option<f64>,
    /// Peak resident set size of the process during the workload (`VmHWM`
    /// reset at its start).
    pub peak_rss_bytes: Option<u64>,
    /// That peak less the resident set size at the workload's start: the
    /// memory the workload added.
    pub rss_growth_bytes: Option<u64>,
    /// Reads done alongside a writer (readwhilewriting: the writes; the
    /// figures above are the reads').
    pub side_writes: Option<u64>,
    /// The machine's CPU steal during the phase, ms per second.
    pub steal_ms_per_s: Option<f64>,
    /// Tables left in level 0 after a write phase's catch-up, where the
    /// engine says: flushed data it left for a later compaction, whose
    /// device bytes then fall outside this phase's write amplification.
    pub l0_tables_after: Option<u64>,
}

impl Phase {
    /// The figures of `ops` operations that took `op_seconds`, with the
    /// phase's `cost` (from the start of the operations to the end of any
    /// catch-up) and, if timed one by one, their `latencies`.
    pub fn new(
        workload: &str,
        ops: u64,
        op_seconds: f64,
        latencies: Option<&Latencies>,
        cost: &Cost,
        user_write_bytes: u64,
    ) -> Phase {
        let q = |x: f64| latencies.and_then(|l| l.quantile_us(x));
        let writes = user_write_bytes > 0;
        Phase {
            workload: workload.to_string(),
            ops,
            seconds: op_seconds,
            ops_s: if op_seconds > 0.0 {
                ops as f64 / op_seconds
            } else {
                0.0
            },
            p50_us: q(0.5),
            p99_us: q(0.99),
            p999_us: q(0.999),
            cpu_us_per_op: cost
                .cpu_seconds
                .filter(|_| ops > 0)
                .map(|s| s * 1e6 / ops as f64),
            user_write_bytes,
            device_write_bytes: cost.device_write_bytes,
            device_read_bytes_per_op: cost
                .device_read_bytes
                .filter(|_| ops > 0)
                .map(|b| b as f64 / ops as f64),
            page_cache_bytes: cost.page_cache_bytes,
            write_amp: cost
                .device_write_bytes
                .filter(|_| writes)
                .map(|d| d as f64 / user_write_bytes as f64),
            space_amp: None,
            peak_rss_bytes: cost.peak_rss_bytes,
            rss_growth_bytes: match (cost.peak_rss_bytes, cost.start_rss_bytes) {
                (Some(p), Some(s)) => Some(p.saturating_sub(s)),
                _ => None,
            },
            side_writes: None,
            steal_ms_per_s: cost.steal_ms_per_s,
            l0_tables_after: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_come_from_the_counts() {
        let mut l = Latencies::new();
        l.record(std::time::Duration::from_micros(10));
        let cost = Cost {
            seconds: 3.0,
            cpu_seconds: Some(2.0),
            device_write_bytes: Some(3000),
            device_read_bytes: Some(8000),
            page_cache_bytes: Some(5 << 20),
            peak_rss_bytes: Some(3 << 20),
            start_rss_bytes: Some(1 << 20),
            steal_ms_per_s: Some(12.0),
        };
        let p = Phase::new("overwrite", 1000, 2.0, Some(&l), &cost, 1000);
        assert_eq!(p.ops_s, 500.0);
        assert_eq!(p.cpu_us_per_op, Some(2000.0));
        assert_eq!(p.write_amp, Some(3.0));
        assert_eq!(p.device_read_bytes_per_op, Some(8.0));
        assert_eq!(p.page_cache_bytes, Some(5 << 20));
        assert_eq!(p.rss_growth_bytes, Some(2 << 20));
        assert_eq!(p.steal_ms_per_s, Some(12.0));
        assert!(p.p99_us.unwrap() >= 9.9);
        // A read phase has no write amplification, a scan no latency.
        let r = Phase::new("readseq", 1000, 1.0, None, &cost, 0);
        assert_eq!((r.write_amp, r.p50_us), (None, None));
    }
}
