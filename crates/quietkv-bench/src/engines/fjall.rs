//! fjall behind [`BenchEngine`] (Cargo feature `fjall`). It has no control
//! over the page cache, so it runs in one configuration, `buffered`.
//!
//! fjall keeps no byte counters of its flushes and compactions, so they
//! are counted from the threads that do them (see [`super::thread_io`]):
//! `compact_all` (`Keyspace::major_compact`) runs in the calling thread and
//! is counted there; background flushes and compactions run on the worker
//! threads (`fjall:worker`) this database started, whose reads and writes
//! (those of another fjall database in the process excluded) are counted as
//! compaction bytes, except for what an explicit `flush` waited for, which
//! is counted as flush bytes.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fjall::compaction::Leveled;
use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
    PinningPolicy,
};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions};
use serde::{Deserialize, Serialize};

use super::bench_engine::{Batch, BenchEngine, EngineConfig, Layout, ScanCount, Tuning};
use super::counters::Counters;
use super::page_cache::{CacheUse, Direction, PageCacheUse};
use super::quietkv::QuietkvEngine;
use super::thread_io::{this_thread, ThreadSet};

/// The name fjall gives its flush and compaction threads.
const WORKER_THREAD: &str = "fjall:worker";
/// The keyspace every bench database keeps its keys in.
const KEYSPACE: &str = "bench";

/// fjall's one configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FjallConfig {
    pub name: String,
}

impl FjallConfig {
    pub fn parse(name: &str) -> Result<FjallConfig, String> {
        match name.trim().to_ascii_lowercase().as_str() {
            "buffered" => Ok(FjallConfig {
                name: "buffered".into(),
            }),
            _ => Err(format!(
                "unknown fjall configuration '{name}' (fjall has no page-cache control: only buffered)"
            )),
        }
    }
}

impl EngineConfig for FjallConfig {
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&self, _dir: &Path) -> Result<(), String> {
        Ok(())
    }

    fn page_cache(&self, _dir: &Path) -> PageCacheUse {
        let buffered = || Direction {
            effect: CacheUse::Cached,
            label: "buffered".into(),
        };
        PageCacheUse {
            compaction_reads: buffered(),
            compaction_writes: buffered(),
            flush_writes: buffered(),
            user_reads: buffered(),
            also: Vec::new(),
            engine_defaults: true,
        }
    }
}

/// A fjall database under test: one keyspace.
pub struct FjallEngine {
    db: Database,
    ks: Keyspace,
    user_write_bytes: AtomicU64,
    /// Bytes read and written by `compact_all` in the calling thread.
    major_read: AtomicU64,
    major_write: AtomicU64,
    major_count: AtomicU64,
    major_micros: AtomicU64,
    /// Worker-thread writes while an explicit flush was waited for.
    flush_write: AtomicU64,
    flush_micros: AtomicU64,
    /// The worker threads this database started (not those of another
    /// fjall database in the process).
    workers: ThreadSet,
    /// L0 tables at which fjall compacts L0 into L1.
    l0_threshold: usize,
}

impl FjallEngine {
    /// Worker-thread (read, write) bytes so far, never decreasing.
    fn workers(&self) -> (u64, u64) {
        let io = self.workers.totals();
        (io.rchar, io.wchar)
    }

    fn idle_now(&self) -> bool {
        self.db.outstanding_flushes() == 0
            && self.db.active_compactions() == 0
            && self.ks.sealed_memtable_count() == 0
            && self.ks.l0_table_count() < self.l0_threshold
    }
}

fn err(what: &str, e: fjall::Error) -> String {
    format!("fjall: {what}: {e}")
}

impl BenchEngine for FjallEngine {
    type Config = FjallConfig;
    const NAME: &'static str = "fjall";
    const VERSION: &'static str = "fjall 3.1";

    /// quietkv's shape where fjall has the knob (table size, block size,
    /// bloom bits, no compression); fjall's L1 is `table size x L0
    /// threshold`, so the threshold is chosen to give quietkv's L1 size.
    fn bench_layout() -> Layout {
        QuietkvEngine::bench_layout()
    }

    /// lsm-tree's tables live in `keyspaces/<id>/tables/<id>` and are
    /// never rewritten (the version files beside them are small: copied).
    fn immutable_file(rel: &str) -> bool {
        rel.starts_with("keyspaces/") && rel.contains("/tables/")
    }

    fn setup_note() -> String {
        let l = Self::bench_layout();
        format!(
            "no page-cache control (buffered only); tuned like quietkv where fjall has the knob: memtable as quietkv's, {} MiB target tables (its major compaction writes 64 MB tables regardless), L1 {} MiB (L0 threshold x table size), {} KiB blocks, no compression, {} bloom bits per key, 2 worker threads (quietkv's compaction thread and its flush thread), index and filter blocks of every level pinned (quietkv keeps them in memory), block cache as quietkv's; no rate limiter (a throttled section runs fjall unthrottled) and no readahead knob; compaction and flush bytes counted from its threads' read/write system calls (it keeps no byte counters)",
            l.target_file_size >> 20,
            l.level_base_bytes >> 20,
            l.block_size >> 10,
            l.bloom_bits_per_key
        )
    }

    fn source_config() -> FjallConfig {
        FjallConfig::parse("buffered").expect("the one configuration")
    }

    /// The block cache sized as quietkv's (the tuning's), worker threads
    /// for quietkv's background threads plus its flush thread, index and
    /// filter blocks pinned at every level, the memtable size; fjall
    /// has no rate limiter (a throttled run is not throttled for fjall:
    /// the report's same-work rule shows it) and no readahead knob.
    fn open(dir: &Path, _config: &FjallConfig, tuning: &Tuning) -> Result<Self, String> {
        let has_files = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false);
        if !tuning.create && !has_files {
            return Err(format!(
                "fjall: no database in {} (and create is off)",
                dir.display()
            ));
        }
        let q = quietkv::Options::default();
        let layout = tuning
            .layout
            .clone()
            .unwrap_or_else(FjallEngine::bench_layout);
        if layout.compression != "none" {
            return Err(format!(
                "fjall: unsupported compression '{}'",
                layout.compression
            ));
        }
        let l0_threshold = (layout.level_base_bytes / layout.target_file_size.max(1)).clamp(2, 255);
        let mut b = Database::builder(dir).cache_size(
            tuning
                .block_cache_bytes
                .unwrap_or(q.block_cache_bytes)
                .max(1) as u64,
        );
        // Its workers flush and compact: one per quietkv background thread
        // and one for quietkv's flush thread.
        let threads = tuning
            .background_threads
            .unwrap_or(q.background_threads)
            .max(1);
        b = b.worker_threads(threads + 1);
        let (db, workers) = ThreadSet::started_by(WORKER_THREAD, || b.open());
        let db = db.map_err(|e| err(&format!("cannot open {}", dir.display()), e))?;
        let memtable = tuning.memtable_bytes.unwrap_or(q.memtable_size).max(4096) as u64;
        let ks = db
            .keyspace(KEYSPACE, || {
                KeyspaceCreateOptions::default()
                    .max_memtable_size(memtable)
                    .data_block_size_policy(BlockSizePolicy::all(layout.block_size as u32))
                    .data_block_compression_policy(CompressionPolicy::all(CompressionType::None))
                    .index_block_compression_policy(CompressionPolicy::all(CompressionType::None))
                    .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                        BloomConstructionPolicy::BitsPerKey(layout.bloom_bits_per_key as f32),
                    )))
                    // Every level's index and filter blocks stay in memory,
                    // as quietkv keeps them (fjall pins L0/L1 by default).
                    .index_block_pinning_policy(PinningPolicy::all(true))
                    .filter_block_pinning_policy(PinningPolicy::all(true))
                    .compaction_strategy(Arc::new(
                        Leveled::default()
                            .with_table_target_size(layout.target_file_size)
                            .with_l0_threshold(l0_threshold as u8)
                            .with_level_ratio_policy(vec![q.level_multiplier as f32]),
                    ))
            })
            .map_err(|e| err("cannot open the keyspace", e))?;
        Ok(FjallEngine {
            db,
            ks,
            user_write_bytes: AtomicU64::new(0),
            major_read: AtomicU64::new(0),
            major_write: AtomicU64::new(0),
            major_count: AtomicU64::new(0),
            major_micros: AtomicU64::new(0),
            flush_write: AtomicU64::new(0),
            flush_micros: AtomicU64::new(0),
            workers,
            l0_threshold: l0_threshold as usize,
        })
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.ks
            .get(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| err("get", e))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.ks.insert(key, value).map_err(|e| err("insert", e))?;
        self.user_write_bytes
            .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// One write batch, its journal handed to the OS before it returns
    /// without a sync (the other engines' promise: it survives a crash of
    /// the process, not of the machine). A batch's default durability
    /// would leave it in fjall's journal buffer, which a crash loses;
    /// single inserts flush that buffer by default.
    fn put_batch(&self, batch: &Batch) -> Result<(), String> {
        let mut b = self.db.batch().durability(Some(fjall::PersistMode::Buffer));
        let mut bytes = 0;
        for (k, v) in batch.iter() {
            b.insert(&self.ks, k, v);
            bytes += k.len() + v.len();
        }
        b.commit().map_err(|e| err("write batch", e))?;
        self.user_write_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(())
    }

    fn seek_scan(&self, from: &[u8], n: usize) -> Result<usize, String> {
        let mut read = 0;
        for guard in self.ks.range(from..).take(n) {
            guard.into_inner().map_err(|e| err("scan from a key", e))?;
            read += 1;
        }
        Ok(read)
    }

    fn scan_all(&self, reverse: bool) -> Result<ScanCount, String> {
        let mut c = ScanCount::default();
        let mut it = self.ks.iter();
        loop {
            let guard = if reverse { it.next_back() } else { it.next() };
            let Some(guard) = guard else {
                return Ok(c);
            };
            let (k, v) = guard.into_inner().map_err(|e| err("full scan", e))?;
            c.add(&k, &v);
        }
    }

    fn flush(&self) -> Result<(), String> {
        let t = Instant::now();
        let (_, w0) = self.workers();
        self.ks
            .rotate_memtable_and_wait()
            .map_err(|e| err("flush", e))?;
        let (_, w1) = self.workers();
        self.flush_write.fetch_add(w1 - w0, Ordering::Relaxed);
        self.flush_micros
            .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// `Keyspace::major_compact`: every table rewritten into the last
    /// level (in 64 MB tables: fjall's major compaction fixes that size).
    fn compact_all(&self) -> Result<(), String> {
        let t = Instant::now();
        let a = this_thread().unwrap_or_default();
        let res = self
            .ks
            .major_compact()
            .map_err(|e| err("major compaction", e));
        let b = this_thread().unwrap_or_default();
        self.major_read
            .fetch_add(b.rchar.saturating_sub(a.rchar), Ordering::Relaxed);
        self.major_write
            .fetch_add(b.wchar.saturating_sub(a.wchar), Ordering::Relaxed);
        self.major_count.fetch_add(1, Ordering::Relaxed);
        self.major_micros
            .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        res
    }

    /// fjall has no wait call: polls until no flush is queued, no
    /// compaction runs, no sealed memtable waits and L0 is below its
    /// compaction threshold, three times in a row.
    fn wait_idle(&self) -> Result<(), String> {
        let mut quiet = 0;
        while quiet < 3 {
            if self.idle_now() {
                quiet += 1;
            } else {
                quiet = 0;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn counters(&self) -> Counters {
        let (wr, ww) = self.workers();
        let flush = self.flush_write.load(Ordering::Relaxed);
        Counters {
            compaction_read_bytes: self.major_read.load(Ordering::Relaxed) + wr,
            compaction_write_bytes: self.major_write.load(Ordering::Relaxed)
                + ww.saturating_sub(flush),
            flush_write_bytes: flush,
            compaction_seconds: self.db.time_compacting().as_secs_f64()
                + self.major_micros.load(Ordering::Relaxed) as f64 / 1e6,
            flush_seconds: self.flush_micros.load(Ordering::Relaxed) as f64 / 1e6,
            compactions: self.db.compactions_completed() as u64
                + self.major_count.load(Ordering::Relaxed),
            compactions_running: self.db.active_compactions() as u64,
            user_write_bytes: self.user_write_bytes.load(Ordering::Relaxed),
            // fjall does not report write stalls or cache hits.
            write_stall_seconds: None,
            warmed_bytes: 0,
            user_read_page_cache: None,
            block_cache: None,
            // Its threads' CPU is not measured.
            background_cpu_seconds: None,
            table_opens_by_reads: None,
            compaction_into_levels: None,
            get_times: None,
            l0_tables: Some(self.ks.l0_table_count() as u64),
            ..Default::default()
        }
    }

    /// Flushes the memtable (so a copy opens without replaying the
    /// journal), then drops the handles: fjall stops its workers on drop.
    fn close(self) -> Result<(), String> {
        self.ks
            .rotate_memtable_and_wait()
            .map_err(|e| err("flush at close", e))?;
        self.db
            .persist(fjall::PersistMode::SyncAll)
            .map_err(|e| err("persist at close", e))?;
        drop(self.ks);
        drop(self.db);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_read_what_a_model_holds() {
        crate::engines::bench_engine::check_scans_against_a_model::<FjallEngine>(
            &FjallConfig::parse("buffered").unwrap(),
        );
    }

    #[test]
    fn fjall_runs_buffered_only() {
        let c = FjallConfig::parse(" Buffered ").unwrap();
        assert_eq!(c.name, "buffered");
        assert!(FjallConfig::parse("both-direct")
            .unwrap_err()
            .contains("only buffered"));
        let u = c.page_cache(Path::new("/"));
        assert_eq!(u.compaction_reads.effect, CacheUse::Cached);
        assert_eq!(u.user_reads.effect, CacheUse::Cached);
        assert!(u.engine_defaults);
    }
}
