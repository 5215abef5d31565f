//! Per-class I/O counters: bytes, operations, time, and page-cache
//! hits/misses where the read path can tell.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::class::IoClass;

#[derive(Debug, Default)]
struct ClassCounters {
    read_bytes: AtomicU64,
    read_ops: AtomicU64,
    read_nanos: AtomicU64,
    write_bytes: AtomicU64,
    write_ops: AtomicU64,
    write_nanos: AtomicU64,
    sync_ops: AtomicU64,
    sync_nanos: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    throttle_nanos: AtomicU64,
}

/// A snapshot of one class's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Bytes read: what each chunk load of a [`SeqReader`](crate::SeqReader)
    /// and each positional read of a [`RandomReader`](crate::RandomReader)
    /// returned (mmap reads included).
    pub read_bytes: u64,
    /// Read operations: one per chunk a sequential reader loads, one per
    /// positional read.
    pub read_ops: u64,
    /// Time spent in those reads, in nanoseconds; with io_uring read-ahead,
    /// from submission to completion, so reads in flight together overlap.
    pub read_nanos: u64,
    /// Bytes handed to the kernel by writers, including the zero padding of
    /// a direct file's partial last block (rewritten when the file grows).
    pub write_bytes: u64,
    /// Write operations: one per buffer handed to the kernel (a full
    /// buffer, a flush, a padded tail).
    pub write_ops: u64,
    /// Time spent in those writes, in nanoseconds; with io_uring
    /// write-behind, from submission to completion, so writes in flight
    /// together overlap.
    pub write_nanos: u64,
    /// `fdatasync` calls of writers.
    pub sync_ops: u64,
    /// Time spent in those calls, in nanoseconds.
    pub sync_nanos: u64,
    /// Buffered positional reads found entirely in the page cache
    /// (`cachestat` over the range, or `RWF_NOWAIT` succeeding); counted
    /// only with [`IoOptions::attribute_cache_hits`](crate::IoOptions::attribute_cache_hits).
    pub cache_hits: u64,
    /// Buffered positional reads that had to go to the device, at least
    /// in part.
    pub cache_misses: u64,
    /// Time spent waiting on the background rate limiter.
    pub throttle_nanos: u64,
}

/// Counters for every class; shared by all files of one `IoEnv`.
#[derive(Debug, Default)]
pub struct IoStats {
    classes: [ClassCounters; IoClass::COUNT],
}

impl IoStats {
    /// Every counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    fn c(&self, class: IoClass) -> &ClassCounters {
        &self.classes[class.index()]
    }

    pub(crate) fn record_read(&self, class: IoClass, bytes: usize, took: Duration) {
        let c = self.c(class);
        c.read_bytes.fetch_add(bytes as u64, Relaxed);
        c.read_ops.fetch_add(1, Relaxed);
        c.read_nanos.fetch_add(took.as_nanos() as u64, Relaxed);
    }

    pub(crate) fn record_write(&self, class: IoClass, bytes: usize, took: Duration) {
        let c = self.c(class);
        c.write_bytes.fetch_add(bytes as u64, Relaxed);
        c.write_ops.fetch_add(1, Relaxed);
        c.write_nanos.fetch_add(took.as_nanos() as u64, Relaxed);
    }

    pub(crate) fn record_sync(&self, class: IoClass, took: Duration) {
        let c = self.c(class);
        c.sync_ops.fetch_add(1, Relaxed);
        c.sync_nanos.fetch_add(took.as_nanos() as u64, Relaxed);
    }

    pub(crate) fn record_hit(&self, class: IoClass, hit: bool) {
        let c = self.c(class);
        if hit {
            c.cache_hits.fetch_add(1, Relaxed);
        } else {
            c.cache_misses.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn record_throttle(&self, class: IoClass, took: Duration) {
        self.c(class)
            .throttle_nanos
            .fetch_add(took.as_nanos() as u64, Relaxed);
    }

    /// The counters of `class` now. Each is read on its own, so a snapshot
    /// taken while I/O runs may count one operation's bytes but not yet its
    /// time.
    pub fn class(&self, class: IoClass) -> ClassStats {
        let c = self.c(class);
        ClassStats {
            read_bytes: c.read_bytes.load(Relaxed),
            read_ops: c.read_ops.load(Relaxed),
            read_nanos: c.read_nanos.load(Relaxed),
            write_bytes: c.write_bytes.load(Relaxed),
            write_ops: c.write_ops.load(Relaxed),
            write_nanos: c.write_nanos.load(Relaxed),
            sync_ops: c.sync_ops.load(Relaxed),
            sync_nanos: c.sync_nanos.load(Relaxed),
            cache_hits: c.cache_hits.load(Relaxed),
            cache_misses: c.cache_misses.load(Relaxed),
            throttle_nanos: c.throttle_nanos.load(Relaxed),
        }
    }

    /// Every class with its counters, in `IoClass::ALL` order.
    pub fn snapshot(&self) -> Vec<(IoClass, ClassStats)> {
        IoClass::ALL.iter().map(|c| (*c, self.class(*c))).collect()
    }
}
