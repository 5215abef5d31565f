//! What an engine says about its own work since it opened: background
//! bytes and seconds, stalls, caches, per-level compaction work, where its
//! time for gets went. Experiments read two snapshots and report the
//! difference over a phase.

use serde::{Deserialize, Serialize};

/// Hits and misses of a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HitsMisses {
    pub hits: u64,
    pub misses: u64,
}

impl HitsMisses {
    /// The counts since `earlier`.
    pub fn since(&self, earlier: &HitsMisses) -> HitsMisses {
        HitsMisses {
            hits: self.hits.saturating_sub(earlier.hits),
            misses: self.misses.saturating_sub(earlier.misses),
        }
    }
}

/// Where user gets spent their time inside the engine, from the engine's
/// own histograms where it keeps them. Beside the bench's service time it
/// tells a read's wait in the engine from its wait in file reads (page
/// cache or device), and both from time outside the engine (the reader
/// thread waiting for a CPU).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GetTimes {
    /// Gets, and their time inside the engine summed, in microseconds.
    pub gets: u64,
    pub get_us: u64,
    /// File reads the gets issued, and their time summed.
    pub file_reads: u64,
    pub file_read_us: u64,
    /// 99th percentiles since the engine opened: a histogram's percentile
    /// cannot be taken per phase from two snapshots, the sums can.
    pub get_p99_us_since_open: f64,
    pub file_read_p99_us_since_open: f64,
}

impl GetTimes {
    /// `(name, value)` of the phase from `earlier` to `self`: mean time
    /// per get in the engine, file reads per get, mean time per file read,
    /// and the share of the gets' time spent in file reads; then the
    /// percentiles since open. Empty when no get ran.
    pub fn phase_figures(&self, earlier: &GetTimes) -> Vec<(&'static str, f64)> {
        let gets = self.gets.saturating_sub(earlier.gets);
        if gets == 0 {
            return Vec::new();
        }
        let get_us = self.get_us.saturating_sub(earlier.get_us) as f64;
        let reads = self.file_reads.saturating_sub(earlier.file_reads);
        let read_us = self.file_read_us.saturating_sub(earlier.file_read_us) as f64;
        let mut v = vec![
            ("engine_get_mean_us", get_us / gets as f64),
            ("engine_file_reads_per_get", reads as f64 / gets as f64),
        ];
        if reads > 0 {
            v.push(("engine_file_read_mean_us", read_us / reads as f64));
        }
        if get_us > 0.0 {
            v.push(("engine_get_time_in_file_reads", read_us / get_us));
        }
        v.push(("engine_get_p99_us_since_open", self.get_p99_us_since_open));
        v.push((
            "engine_file_read_p99_us_since_open",
            self.file_read_p99_us_since_open,
        ));
        v
    }
}

/// An engine's background counters since it was opened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Bytes compaction read from and wrote to its files.
    pub compaction_read_bytes: u64,
    pub compaction_write_bytes: u64,
    /// Bytes flushes wrote (memtables to tables).
    pub flush_write_bytes: u64,
    /// Seconds compaction and flush were busy.
    pub compaction_seconds: f64,
    pub flush_seconds: f64,
    /// Compactions finished, and running now.
    pub compactions: u64,
    pub compactions_running: u64,
    /// Bytes of user writes (keys and values).
    pub user_write_bytes: u64,
    /// Seconds user writes waited for background work, where the engine
    /// counts it (`None` is not zero: fjall does not say).
    pub write_stall_seconds: Option<f64>,
    /// Bytes of compaction output read back to warm the page cache.
    pub warmed_bytes: u64,
    /// Whether user reads found their blocks in the page cache, where the
    /// engine can tell.
    pub user_read_page_cache: Option<HitsMisses>,
    /// The engine's own block cache, where it has one.
    pub block_cache: Option<HitsMisses>,
    /// CPU seconds the engine's threads spent in compaction and flush, where
    /// the engine measures it (kernel writeback done by other threads is not
    /// in it).
    pub background_cpu_seconds: Option<f64>,
    /// Tables user reads had to open themselves (index and filter read in
    /// the read's time), where the engine counts it.
    pub table_opens_by_reads: Option<u64>,
    /// Compaction work by output level (index = level), where the engine
    /// reports it: where the write amplification comes from.
    pub compaction_into_levels: Option<Vec<LevelWork>>,
    /// User gets' time inside the engine, where the engine measures it.
    pub get_times: Option<GetTimes>,
    /// Slices of full compactions installed, and the most bytes one wrote
    /// beside its inputs (the extra disk space at its peak), where the
    /// engine counts them.
    #[serde(default)]
    pub full_compaction_slices: Option<u64>,
    #[serde(default)]
    pub full_compaction_peak_extra_bytes: Option<u64>,
    /// What the engine says its memory holds now, where it says: beside
    /// the process's resident memory it tells the engine's own share from
    /// the allocator's.
    #[serde(default)]
    pub memory: Option<EngineMemory>,
    /// Tables in level 0 now (every keyspace's), where the engine says:
    /// flushed data no compaction has merged yet, which a later
    /// compaction will rewrite. After a write phase's catch-up it tells
    /// work done within the phase from work an engine left for later.
    #[serde(default)]
    pub l0_tables: Option<u64>,
}

/// An engine's own account of its memory at one moment, in bytes; `None`
/// where the engine does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineMemory {
    /// Bytes held in the block cache, and of those the ones in use (pinned
    /// by readers or by the configuration) that it cannot evict.
    pub block_cache_bytes: Option<u64>,
    pub block_cache_pinned_bytes: Option<u64>,
    /// Memtables, the active one and those waiting for their flush.
    pub memtable_bytes: Option<u64>,
    /// Open tables' readers outside the block cache (indexes and filters
    /// not charged to it).
    pub table_readers_bytes: Option<u64>,
}

impl EngineMemory {
    /// `(name, MiB)` of what the engine said, for a report's figures.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        [
            ("engine_block_cache_mib", self.block_cache_bytes),
            (
                "engine_block_cache_pinned_mib",
                self.block_cache_pinned_bytes,
            ),
            ("engine_memtables_mib", self.memtable_bytes),
            ("engine_table_readers_mib", self.table_readers_bytes),
        ]
        .into_iter()
        .filter_map(|(name, b)| Some((name, mib(b?))))
        .collect()
    }
}

/// Compaction work that ended in one level, since the engine opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelWork {
    /// Input bytes from shallower levels (RocksDB's `Rn`).
    pub read_from_above_bytes: u64,
    /// Input bytes from the output level itself (`Rnp1`), rewritten to make
    /// room.
    pub read_from_level_bytes: u64,
    pub written_bytes: u64,
    /// Bytes moved in without a rewrite.
    pub moved_bytes: u64,
}

/// Seconds writes stalled from `a` to `b`, where the engine counts them.
pub(crate) fn stall_delta(a: &Counters, b: &Counters) -> Option<f64> {
    Some(b.write_stall_seconds? - a.write_stall_seconds?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_times_give_the_phase_from_two_snapshots() {
        let a = GetTimes {
            gets: 100,
            get_us: 1_000,
            file_reads: 100,
            file_read_us: 500,
            ..GetTimes::default()
        };
        let b = GetTimes {
            gets: 300,
            get_us: 41_000,
            file_reads: 500,
            file_read_us: 30_500,
            get_p99_us_since_open: 900.0,
            file_read_p99_us_since_open: 800.0,
        };
        let f: std::collections::BTreeMap<_, _> = b.phase_figures(&a).into_iter().collect();
        assert_eq!(f["engine_get_mean_us"], 200.0);
        assert_eq!(f["engine_file_reads_per_get"], 2.0);
        assert_eq!(f["engine_file_read_mean_us"], 75.0);
        assert_eq!(f["engine_get_time_in_file_reads"], 0.75);
        assert_eq!(f["engine_get_p99_us_since_open"], 900.0);
        assert!(b.phase_figures(&b).is_empty(), "no gets, no figures");
    }

    /// Only what the engine said becomes a figure, in MiB.
    #[test]
    fn engine_memory_figures_are_what_the_engine_said() {
        let m = EngineMemory {
            block_cache_bytes: Some(512 << 20),
            memtable_bytes: Some(15 << 20),
            ..Default::default()
        };
        assert_eq!(
            m.figures(),
            vec![
                ("engine_block_cache_mib", 512.0),
                ("engine_memtables_mib", 15.0)
            ]
        );
        assert!(EngineMemory::default().figures().is_empty());
    }
}
