//! Engine statistics: tree shape, compaction and flush work, write stalls,
//! caches, and quietio's per-class I/O counters.

use std::sync::atomic::Ordering::Relaxed;

use quietio::{ClassStats, EffectiveMode, IoClass};

use super::state::Inner;
use crate::block_cache::CacheStats;
use crate::error::Error;

/// One level of the tree.
#[derive(Debug, Clone, Default)]
pub struct LevelStats {
    /// Tables in the level.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
    /// Compaction into this level since open (the write amplification of
    /// each level, as RocksDB's per-level compaction table shows it).
    pub compaction_into: LevelCompactionStats,
}

/// Compactions whose output level is one level, since open. Input bytes
/// are the input tables' sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelCompactionStats {
    /// Merges that wrote into the level.
    pub merges: u64,
    /// Input bytes of those merges from shallower levels (RocksDB's `Rn`).
    pub read_from_above_bytes: u64,
    /// Input bytes of those merges from the level itself (`Rnp1`): what
    /// is rewritten to make room, the cost a picker tries to keep low.
    pub read_from_level_bytes: u64,
    /// Bytes those merges wrote.
    pub written_bytes: u64,
    /// Trivial moves into the level (no I/O).
    pub moves: u64,
    /// Bytes of tables moved in.
    pub moved_bytes: u64,
}

/// Compaction since open.
#[derive(Debug, Clone, Default)]
pub struct CompactionStats {
    /// Merge compactions completed (trivial moves are not counted).
    pub count: u64,
    /// Bytes of input tables read.
    pub bytes_read: u64,
    /// Bytes of output tables written.
    pub bytes_written: u64,
    /// Time spent in merge compactions.
    pub seconds: f64,
    /// CPU seconds (user + system) of the threads while they ran merge
    /// compactions. Kernel work done on their behalf in other threads
    /// (buffered writeback, io_uring workers) is not included.
    pub cpu_seconds: f64,
    /// Compactions running now.
    pub running: usize,
    /// Table handles compaction holds open right now (its own, not the
    /// table cache's).
    pub open_files: usize,
    /// Output data blocks put in the page cache or the block cache before
    /// install because their keys were hot in the inputs
    /// (`Options::warm_compaction_output`). These reads, like reading a new
    /// table's index and filter before its install, go through the user
    /// read class: they count in its I/O bytes, not in its hits or misses.
    pub warmed_blocks: u64,
    /// Bytes of those blocks.
    pub warmed_bytes: u64,
    /// Slices of manual compactions (`compact_all`, `compact_range`)
    /// installed; see `Options::max_compaction_bytes`.
    pub manual_slices: u64,
    /// The most bytes of new tables one slice wrote before its inputs could
    /// be deleted: the extra disk space a manual compaction needed at its
    /// peak (as long as no reader held the inputs).
    pub manual_peak_extra_bytes: u64,
}

/// Writes held back because compaction fell behind (L0 triggers).
#[derive(Debug, Clone, Default)]
pub struct WriteStallStats {
    /// Writes delayed at the slowdown trigger.
    pub slowdowns: u64,
    /// Writes stopped at the stop trigger until compaction caught up.
    pub stops: u64,
    /// Time writers spent delayed or stopped.
    pub stall_seconds: f64,
}

/// A database's counters since open and the shape of its tree, from
/// [`Db::stats`](crate::Db::stats).
#[derive(Debug, Clone)]
pub struct DbStats {
    /// Each level of the default keyspace, L0 first (another keyspace's
    /// levels and memtables are in its [`Keyspace::stats`](crate::Keyspace::stats));
    /// the work counters below (writes, flushes, compaction, stalls, I/O)
    /// cover every keyspace, as they share the threads and the files.
    pub levels: Vec<LevelStats>,
    /// The newest sequence number written.
    pub last_sequence: u64,
    /// Entries written (puts and deletes).
    pub writes: u64,
    /// Bytes of keys and values written.
    pub write_bytes: u64,
    /// WAL writes (groups) and the batches they carried: batches/groups is
    /// the group-commit factor.
    pub write_groups: u64,
    /// Batches written (see `write_groups`).
    pub write_batches: u64,
    /// Bytes in the default keyspace's active memtable.
    pub memtable_bytes: usize,
    /// The default keyspace's frozen memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Bytes in every keyspace's memtables, the active ones and the frozen
    /// ones waiting for their flush: what the write buffers hold of the
    /// process's memory now.
    pub all_memtables_bytes: u64,
    /// Memtables flushed to tables.
    pub flushes: u64,
    /// Bytes of tables flushes wrote.
    pub flush_bytes: u64,
    /// Time spent flushing.
    pub flush_seconds: f64,
    /// CPU seconds of the threads while they flushed (as for
    /// [`CompactionStats::cpu_seconds`]).
    pub flush_cpu_seconds: f64,
    /// Compaction counters.
    pub compaction: CompactionStats,
    /// Write stalls.
    pub stalls: WriteStallStats,
    /// The block cache of user reads.
    pub block_cache: CacheStats,
    /// Table readers open for user reads.
    pub open_tables: usize,
    /// Tables a user read or iterator had to open itself, reading the
    /// table's index and filter in its own time (since open). Flush and
    /// compaction open their outputs before installing them, so this
    /// counts the first read of each table that was there at open, and
    /// tables closed to stay within `Options::max_open_tables`.
    pub tables_opened_by_reads: u64,
    /// What each I/O class's access mode resolved to.
    pub io_modes: Vec<(IoClass, EffectiveMode)>,
    /// I/O counters per class.
    pub io: Vec<(IoClass, ClassStats)>,
    /// The failure that made the database refuse writes, if one did; its
    /// cause is kept (see [`Error::io_error_kind`](crate::Error::io_error_kind)).
    pub background_error: Option<Error>,
    /// Times the manifest was replaced by a fresh snapshot because it grew
    /// past `Options::max_manifest_size` (since open).
    pub manifest_rotations: u64,
    /// WAL switches that reused a kept WAL file instead of creating one
    /// (`Options::wal_recycle_count`; since open).
    pub wal_files_recycled: u64,
    /// WAL files kept for reuse now.
    pub wal_files_kept: usize,
    /// Times a compaction gave the CPU away to let waiting threads run
    /// (`Options::background_yield_micros`; flushes yield too, uncounted;
    /// since open).
    pub background_yields: u64,
    /// Tables that flushes and compactions wrote through the page cache
    /// although their class is `auto` and resolved to a mode that bypasses
    /// it, because the database was small (`Options::small_database_share`;
    /// since open).
    pub small_database_cached_tables: u64,
    /// Times a background thread handed the allocator's free memory back
    /// to the kernel after a job (`Options::release_heap_after_jobs`;
    /// since open).
    pub heap_trims: u64,
    /// Time those hand-backs took, in microseconds (since open).
    pub heap_trim_micros: u64,
}

pub(crate) fn collect(inner: &Inner) -> DbStats {
    let c = &inner.counters;
    let st = inner.state.lock();
    let levels = (0..crate::version::NUM_LEVELS)
        .map(|l| {
            let into = &c.into_level[l];
            LevelStats {
                files: st.default_tree().version.num_files(l),
                bytes: st.default_tree().version.level_bytes(l),
                compaction_into: LevelCompactionStats {
                    merges: into.merges.load(Relaxed),
                    read_from_above_bytes: into.read_from_above.load(Relaxed),
                    read_from_level_bytes: into.read_from_level.load(Relaxed),
                    written_bytes: into.written.load(Relaxed),
                    moves: into.moves.load(Relaxed),
                    moved_bytes: into.moved.load(Relaxed),
                },
            }
        })
        .collect();
    DbStats {
        levels,
        last_sequence: inner.visible_seq.load(std::sync::atomic::Ordering::Acquire),
        writes: c.writes.load(Relaxed),
        write_bytes: c.write_bytes.load(Relaxed),
        write_groups: c.write_groups.load(Relaxed),
        write_batches: c.write_batches.load(Relaxed),
        memtable_bytes: st.default_tree().mem.approximate_bytes(),
        immutable_memtables: st.default_tree().imms.len(),
        all_memtables_bytes: st
            .trees
            .iter()
            .flat_map(|t| std::iter::once(&t.mem).chain(t.imms.iter().map(|i| &i.mem)))
            .map(|m| m.approximate_bytes() as u64)
            .sum(),
        flushes: c.flushes.load(Relaxed),
        flush_bytes: c.flush_bytes.load(Relaxed),
        flush_seconds: c.flush_micros.load(Relaxed) as f64 / 1e6,
        flush_cpu_seconds: c.flush_cpu_micros.load(Relaxed) as f64 / 1e6,
        compaction: CompactionStats {
            count: c.compactions.load(Relaxed),
            bytes_read: c.compaction_read.load(Relaxed),
            bytes_written: c.compaction_written.load(Relaxed),
            seconds: c.compaction_micros.load(Relaxed) as f64 / 1e6,
            cpu_seconds: c.compaction_cpu_micros.load(Relaxed) as f64 / 1e6,
            running: st.compactions_running,
            open_files: inner.compaction_open_files.load(Relaxed),
            warmed_blocks: c.warmed_blocks.load(Relaxed),
            warmed_bytes: c.warmed_bytes.load(Relaxed),
            manual_slices: c.manual_slices.load(Relaxed),
            manual_peak_extra_bytes: c.manual_peak_slice_bytes.load(Relaxed),
        },
        stalls: WriteStallStats {
            slowdowns: c.slowdowns.load(Relaxed),
            stops: c.stops.load(Relaxed),
            stall_seconds: c.stall_micros.load(Relaxed) as f64 / 1e6,
        },
        block_cache: inner.table_cache.block_cache().stats(),
        open_tables: inner.table_cache.open_count(),
        tables_opened_by_reads: inner.table_cache.opened_by_reads(),
        io_modes: IoClass::ALL
            .iter()
            .map(|c| (*c, inner.env.mode(*c)))
            .collect(),
        io: inner.env.stats().snapshot(),
        background_error: st.bg_error.clone(),
        manifest_rotations: c.manifest_rotations.load(Relaxed),
        wal_files_recycled: c.wal_files_recycled.load(Relaxed),
        wal_files_kept: st.wal_pool.len(),
        background_yields: c.background_yields.load(Relaxed),
        small_database_cached_tables: c.small_database_cached_tables.load(Relaxed),
        heap_trims: c.heap_trims.load(Relaxed),
        heap_trim_micros: c.heap_trim_micros.load(Relaxed),
    }
}
