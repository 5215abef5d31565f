//! The engine's running counters (writes, stalls, flushes, compactions),
//! bumped by the code that does the work and read by `stats`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct Counters {
    pub(super) writes: AtomicU64,
    pub(super) write_bytes: AtomicU64,
    pub(super) write_groups: AtomicU64,
    pub(super) write_batches: AtomicU64,
    pub(super) slowdowns: AtomicU64,
    pub(super) stops: AtomicU64,
    pub(super) stall_micros: AtomicU64,
    pub(super) flushes: AtomicU64,
    pub(super) flush_bytes: AtomicU64,
    pub(super) flush_micros: AtomicU64,
    pub(super) flush_cpu_micros: AtomicU64,
    pub(super) compactions: AtomicU64,
    pub(super) compaction_read: AtomicU64,
    pub(super) compaction_written: AtomicU64,
    pub(super) compaction_micros: AtomicU64,
    pub(super) compaction_cpu_micros: AtomicU64,
    pub(super) warmed_blocks: AtomicU64,
    pub(super) warmed_bytes: AtomicU64,
    pub(super) manual_slices: AtomicU64,
    pub(super) manual_peak_slice_bytes: AtomicU64,
    pub(super) manifest_rotations: AtomicU64,
    pub(super) wal_files_recycled: AtomicU64,
    pub(super) background_yields: AtomicU64,
    pub(super) small_database_cached_tables: AtomicU64,
    pub(super) heap_trims: AtomicU64,
    pub(super) heap_trim_micros: AtomicU64,
    /// Compaction work by output level.
    pub(super) into_level: [IntoLevel; crate::version::NUM_LEVELS],
}

/// Compaction work that ended in one level.
#[derive(Default)]
pub(super) struct IntoLevel {
    pub(super) merges: AtomicU64,
    pub(super) read_from_above: AtomicU64,
    pub(super) read_from_level: AtomicU64,
    pub(super) written: AtomicU64,
    pub(super) moves: AtomicU64,
    pub(super) moved: AtomicU64,
}

impl Counters {
    pub(crate) fn record_write(&self, entries: u64, bytes: u64, batches: u64) {
        self.writes.fetch_add(entries, Relaxed);
        self.write_bytes.fetch_add(bytes, Relaxed);
        self.write_groups.fetch_add(1, Relaxed);
        self.write_batches.fetch_add(batches, Relaxed);
    }

    pub(crate) fn record_stall(&self, stop: bool, took: Duration) {
        if stop {
            self.stops.fetch_add(1, Relaxed);
        } else {
            self.slowdowns.fetch_add(1, Relaxed);
        }
        self.stall_micros
            .fetch_add(took.as_micros() as u64, Relaxed);
    }

    pub(crate) fn record_flush(&self, bytes: u64, took: Duration, cpu: Duration) {
        self.flushes.fetch_add(1, Relaxed);
        self.flush_cpu_micros
            .fetch_add(cpu.as_micros() as u64, Relaxed);
        self.flush_bytes.fetch_add(bytes, Relaxed);
        self.flush_micros
            .fetch_add(took.as_micros() as u64, Relaxed);
    }

    pub(crate) fn record_warming(&self, blocks: u64, bytes: u64) {
        self.warmed_blocks.fetch_add(blocks, Relaxed);
        self.warmed_bytes.fetch_add(bytes, Relaxed);
    }

    pub(crate) fn record_small_database_cached_table(&self) {
        self.small_database_cached_tables.fetch_add(1, Relaxed);
    }

    /// The allocator was asked to release free memory after a job; it
    /// took `micros`.
    pub(crate) fn record_heap_trim(&self, micros: u64) {
        self.heap_trims.fetch_add(1, Relaxed);
        self.heap_trim_micros.fetch_add(micros, Relaxed);
    }

    pub(crate) fn record_wal_recycled(&self) {
        self.wal_files_recycled.fetch_add(1, Relaxed);
    }

    pub(crate) fn record_background_yields(&self, n: u64) {
        self.background_yields.fetch_add(n, Relaxed);
    }

    pub(crate) fn record_manifest_rotation(&self) {
        self.manifest_rotations.fetch_add(1, Relaxed);
    }

    /// A merge into `output_level` that read `from_above` bytes of input
    /// tables from shallower levels and `from_level` bytes from the output
    /// level itself (table sizes), and wrote `written` bytes.
    pub(crate) fn record_merge_into(
        &self,
        output_level: usize,
        from_above: u64,
        from_level: u64,
        written: u64,
    ) {
        let l = &self.into_level[output_level];
        l.merges.fetch_add(1, Relaxed);
        l.read_from_above.fetch_add(from_above, Relaxed);
        l.read_from_level.fetch_add(from_level, Relaxed);
        l.written.fetch_add(written, Relaxed);
    }

    /// A slice of a manual compaction installed, having written `bytes`
    /// of new tables beside its inputs.
    pub(crate) fn record_manual_slice(&self, bytes: u64) {
        self.manual_slices.fetch_add(1, Relaxed);
        self.manual_peak_slice_bytes.fetch_max(bytes, Relaxed);
    }

    /// A trivial move of `bytes` of tables into `output_level`.
    pub(crate) fn record_move_into(&self, output_level: usize, bytes: u64) {
        let l = &self.into_level[output_level];
        l.moves.fetch_add(1, Relaxed);
        l.moved.fetch_add(bytes, Relaxed);
    }

    pub(crate) fn record_compaction(&self, read: u64, written: u64, took: Duration, cpu: Duration) {
        self.compactions.fetch_add(1, Relaxed);
        self.compaction_cpu_micros
            .fetch_add(cpu.as_micros() as u64, Relaxed);
        self.compaction_read.fetch_add(read, Relaxed);
        self.compaction_written.fetch_add(written, Relaxed);
        self.compaction_micros
            .fetch_add(took.as_micros() as u64, Relaxed);
    }
}
