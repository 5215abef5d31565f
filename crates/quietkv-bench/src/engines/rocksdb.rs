//! RocksDB behind [`BenchEngine`] (Cargo feature `rocksdb`), through the
//! `rust-rocksdb` crate, which bundles RocksDB 11.12 and sets
//! `use_direct_io_for_compaction_reads` (PR #14743) natively.
//!
//! Its configurations are the five of seed 004, named as in PR #14743; each
//! is a pair of RocksDB's own switches, not quietio's per-class modes:
//!
//! | name | direct compaction reads | direct flush + compaction writes | direct user reads |
//! |---|---|---|---|
//! | buffered | - | - | - |
//! | write-direct | - | yes | - |
//! | read-direct | yes | - | - |
//! | both-direct | yes | yes | - |
//! | all-direct | yes (implied) | yes | yes, with a block cache of the share of the memory limit quietkv's direct user reads get, index and filter blocks cached and pinned, the cache filled at flush |
//! | seed-all-direct | yes (implied) | yes | yes, as the seed's recipe ran it: a 4 MiB block cache (`--cache_size`), 4 background jobs |
//!
//! Every configuration is tuned as RocksDB's own tuning guide advises for
//! this workload, with the same resources quietkv gets (see
//! [`SETTINGS`], which the report prints with a reason each).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rust_rocksdb::statistics::{Histogram, Ticker};
use rust_rocksdb::{
    BlockBasedOptions, BottommostLevelCompaction, Cache, CompactOptions, DBCompressionType,
    Options, RateLimiterMode, WaitForCompactOptions, WriteBatch, DB,
};
use serde::{Deserialize, Serialize};

use super::bench_engine::{Batch, BenchEngine, EngineConfig, Layout, ScanCount, Tuning};
use super::counters::{Counters, EngineMemory, GetTimes, HitsMisses};
use super::page_cache::{CacheUse, Direction, PageCacheUse};
use super::quietkv::QuietkvEngine;
use super::rocksdb_stats::parse_level_compaction_stats;

/// The block cache of `seed-all-direct`: the seed's `db_bench
/// --cache_size=4194304`.
pub const SEED_BLOCK_CACHE: usize = 4 << 20;

/// The block cache's share of the memory limit where user reads are
/// direct, unless the configuration says another (`+cache=F`): half, the
/// share quietkv's direct user reads get. It fits when the cache is not
/// also filled at every flush (see [`RocksDbConfig::prepopulate`]): at a
/// 400 MiB hot set under a writer the process held 823-827 MiB in a 1 GiB
/// cgroup, and served 75% of reads from memory where a third of the limit
/// served 48%. With the flush fill the same cache grew the process past the
/// limit, since the allocator kept what the fill evicted.
pub const DIRECT_READS_CACHE_SHARE: f64 = 0.5;

/// The seed's `--max_background_jobs`.
pub const SEED_BACKGROUND_JOBS: i32 = 4;

pub use super::rocksdb_names::CONFIG_NAMES;

/// Every setting the benchmark gives RocksDB beyond the tree's shape, with
/// why: from RocksDB's tuning guide, set to what quietkv has where both
/// have the knob.
pub const SETTINGS: [(&str, &str); 10] = [
    ("bytes_per_sync = 1 MiB", "the tuning guide's advice, so write-back starts as SST files grow instead of in one burst at their sync (quietkv starts write-back every MiB)"),
    ("wal_bytes_per_sync = 1 MiB", "the same for the WAL"),
    ("max_background_jobs = compaction threads + 1", "one flush thread beside the compaction threads, as quietkv has (1 + 1 in E1/E2)"),
    ("max_subcompactions = 1", "one thread per compaction, as quietkv's"),
    ("compaction_readahead_size = 2 MiB", "quietkv's compaction readahead; RocksDB needs it for direct compaction reads"),
    ("writable_file_max_buffer_size = 2 MiB", "quietkv's direct write buffer (RocksDB writes one buffer at a time; quietkv keeps up to 4 in flight)"),
    ("max_compaction_bytes = 25 x target file size", "RocksDB's default, set explicitly: CompactRange installs in slices of this size, and quietkv's full compaction uses the same size"),
    ("advise_random_on_open = true", "RocksDB's default for point reads"),
    ("all-direct: block cache = half the memory limit (+cache=F sets another share), index and filter blocks cached and pinned, not filled at flush (+prepopulate=1 sets prepopulate_block_cache = kFlushOnly)", "user reads bypass the page cache, so the block cache gets the share quietkv's direct user reads get; pinned metadata is the guide's advice for direct reads; filling the cache at flush, its advice where reads go to fresh data, evicted the hot set here (15% of reads from the cache at a third of the limit) and grew the process past a 1 GiB limit at half"),
    ("seed-all-direct: block cache 4 MiB, max_background_jobs = 4", "the seed's own db_bench recipe, kept so both readings are on the table"),
];

/// A RocksDB configuration: its three direct-I/O switches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RocksDbConfig {
    pub name: String,
    /// `use_direct_io_for_compaction_reads` (RocksDB 11.5+).
    pub direct_compaction_reads: bool,
    /// `use_direct_io_for_flush_and_compaction` (writes only since 11.5).
    pub direct_flush_and_compaction_writes: bool,
    /// `use_direct_reads`: user reads and compaction reads.
    pub direct_reads: bool,
    /// The block cache's share of the memory limit with direct user reads
    /// (`+cache=F`); `None` is [`DIRECT_READS_CACHE_SHARE`].
    #[serde(default)]
    pub cache_share: Option<f64>,
    /// Fill the block cache with flushed tables' blocks
    /// (`prepopulate_block_cache = kFlushOnly`, `+prepopulate=1`): the
    /// guide's advice where reads go to what was just written. Off by
    /// default: the bench's readers read a hot set of old keys while the
    /// writer writes others, and the flushed blocks evicted the hot ones
    /// (15% of reads from the cache with it, 48% without, at a third of the
    /// limit). Reports written before the knob had it on.
    #[serde(default = "yes")]
    pub prepopulate: bool,
    /// `block_align` (`+align=1`): data blocks padded to end on page
    /// boundaries, as quietkv's `align_blocks`. Off by default, as in
    /// RocksDB.
    #[serde(default)]
    pub block_align: bool,
}

fn yes() -> bool {
    true
}

impl RocksDbConfig {
    /// `all-direct`, or with a block cache share of its own and filled at
    /// flush, `all-direct+cache=0.33+prepopulate=1` (configurations with
    /// direct user reads only).
    pub fn parse(name: &str) -> Result<RocksDbConfig, String> {
        let n = name.trim().to_ascii_lowercase();
        let mut parts = n.split('+');
        let base = parts.next().unwrap_or_default();
        let (r, w, u) = match base {
            "buffered" => (false, false, false),
            "write-direct" => (false, true, false),
            "read-direct" => (true, false, false),
            "both-direct" => (true, true, false),
            "all-direct" | "seed-all-direct" => (true, true, true),
            _ => {
                return Err(format!(
                    "unknown RocksDB configuration '{name}' (expected {})",
                    CONFIG_NAMES.join(", ")
                ))
            }
        };
        let mut cache_share = None;
        let mut prepopulate = false;
        let mut block_align = false;
        for token in parts {
            let (key, value) = token.split_once('=').unwrap_or((token, ""));
            if key == "align" {
                block_align = match value {
                    "0" => false,
                    "1" => true,
                    _ => {
                        return Err(format!(
                            "mode '{name}': align must be 0 or 1, got '{value}'"
                        ))
                    }
                };
                continue;
            }
            if !matches!(key, "cache" | "prepopulate") {
                return Err(format!(
                    "mode '{name}': unknown knob '{token}' (RocksDB takes +cache=F, +prepopulate=0|1 and +align=0|1)"
                ));
            }
            if !u || base == "seed-all-direct" {
                return Err(format!(
                    "mode '{name}': +{key} sets the block cache of direct user reads, which only all-direct has"
                ));
            }
            match (key, value.parse::<f64>()) {
                ("cache", Ok(f)) if f > 0.0 && f <= 0.9 => cache_share = Some(f),
                ("cache", _) => {
                    return Err(format!(
                        "mode '{name}': cache must be a share of the memory limit above 0 and at most 0.9, got '{value}'"
                    ))
                }
                (_, _) => match value {
                    "0" => prepopulate = false,
                    "1" => prepopulate = true,
                    _ => {
                        return Err(format!(
                            "mode '{name}': prepopulate must be 0 or 1, got '{value}'"
                        ))
                    }
                },
            }
        }
        Ok(RocksDbConfig {
            name: n.clone(),
            direct_compaction_reads: r,
            direct_flush_and_compaction_writes: w,
            direct_reads: u,
            cache_share,
            prepopulate,
            block_align,
        })
    }

    /// The seed's recipe (its cache size and background jobs).
    fn is_seed(&self) -> bool {
        self.name == "seed-all-direct"
    }

    /// The block cache's share of the memory limit with direct user reads.
    pub fn direct_cache_share(&self) -> f64 {
        self.cache_share.unwrap_or(DIRECT_READS_CACHE_SHARE)
    }

    /// RocksDB's own names of the switches this configuration turns on.
    fn switches(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.direct_compaction_reads && !self.direct_reads {
            v.push("use_direct_io_for_compaction_reads");
        }
        if self.direct_flush_and_compaction_writes {
            v.push("use_direct_io_for_flush_and_compaction");
        }
        if self.direct_reads {
            v.push("use_direct_reads");
        }
        v
    }
}

fn direction(direct: bool, switch: &str) -> Direction {
    if direct {
        Direction {
            effect: CacheUse::Bypassed,
            label: format!("direct ({switch})"),
        }
    } else {
        Direction {
            effect: CacheUse::Cached,
            label: "buffered".into(),
        }
    }
}

impl EngineConfig for RocksDbConfig {
    fn name(&self) -> &str {
        &self.name
    }

    /// RocksDB refuses to open with direct I/O where O_DIRECT fails; the
    /// same probe (a file opened with O_DIRECT in `dir`) says so first.
    fn check(&self, dir: &Path) -> Result<(), String> {
        if !(self.direct_compaction_reads
            || self.direct_flush_and_compaction_writes
            || self.direct_reads)
        {
            return Ok(());
        }
        let caps = quietio::probe(dir).map_err(|e| format!("rocksdb:{}: {e}", self.name))?;
        if !caps.direct.supported {
            return Err(format!(
                "rocksdb:{}: O_DIRECT does not work in {} ({}: {})",
                self.name,
                dir.display(),
                caps.filesystem,
                caps.direct.reason.as_deref().unwrap_or("refused")
            ));
        }
        Ok(())
    }

    fn page_cache(&self, _dir: &Path) -> PageCacheUse {
        let reads = self.direct_compaction_reads || self.direct_reads;
        PageCacheUse {
            compaction_reads: direction(
                reads,
                if self.direct_reads {
                    "use_direct_reads"
                } else {
                    "use_direct_io_for_compaction_reads"
                },
            ),
            compaction_writes: direction(
                self.direct_flush_and_compaction_writes,
                "use_direct_io_for_flush_and_compaction",
            ),
            flush_writes: direction(
                self.direct_flush_and_compaction_writes,
                "use_direct_io_for_flush_and_compaction",
            ),
            user_reads: direction(self.direct_reads, "use_direct_reads"),
            also: {
                let mut also = if self.is_seed() {
                    vec![format!(
                        "block cache {} MiB and {SEED_BACKGROUND_JOBS} background jobs (the seed's db_bench recipe)",
                        SEED_BLOCK_CACHE >> 20
                    )]
                } else if self.direct_reads {
                    vec![format!(
                        "block cache of {:.2} of the memory limit, index and filter blocks pinned, {}",
                        self.direct_cache_share(),
                        if self.prepopulate {
                            "filled at flush"
                        } else {
                            "not filled at flush"
                        }
                    )]
                } else {
                    Vec::new()
                };
                if self.block_align {
                    also.push("block_align (data blocks padded to page boundaries)".into());
                }
                also
            },
            engine_defaults: self.switches().is_empty() && !self.block_align,
        }
    }
}

/// A RocksDB database under test. The `Options` are kept: RocksDB's
/// statistics object hangs off them.
pub struct RocksDbEngine {
    db: DB,
    options: Options,
    /// Bytes of keys and values written (puts and batches).
    user_write_bytes: AtomicU64,
}

impl RocksDbEngine {
    fn property(&self, name: &str) -> u64 {
        self.db.property_int_value(name).ok().flatten().unwrap_or(0)
    }

    fn ticker(&self, t: Ticker) -> u64 {
        self.options.get_ticker_count(t)
    }

    /// `rocksdb.db.get.micros` (a whole `Get`) and
    /// `rocksdb.read.block.get.micros` (each block a `Get` read from its
    /// file on a block-cache miss: page cache or device),
    /// both kept at the default statistics level.
    fn get_times(&self) -> GetTimes {
        let get = self.options.get_histogram_data(Histogram::DbGet);
        let read = self
            .options
            .get_histogram_data(Histogram::ReadBlockGetMicros);
        GetTimes {
            gets: get.count(),
            get_us: get.sum(),
            file_reads: read.count(),
            file_read_us: read.sum(),
            get_p99_us_since_open: get.p99(),
            file_read_p99_us_since_open: read.p99(),
        }
    }
}

fn err(what: &str, dir: &Path, e: rust_rocksdb::Error) -> String {
    format!("rocksdb: {what} in {}: {e}", dir.display())
}

impl BenchEngine for RocksDbEngine {
    type Config = RocksDbConfig;
    const NAME: &'static str = "rocksdb";
    /// The bundled RocksDB (the crate's version tag says which).
    const VERSION: &'static str = "rust-rocksdb 0.54 / RocksDB 11.12";

    /// quietkv's shape, so the trees compare: 32 MiB tables, L1 256 MiB,
    /// 4 KiB blocks, 10 bloom bits per key, no compression.
    fn bench_layout() -> Layout {
        QuietkvEngine::bench_layout()
    }

    fn setup_note() -> String {
        let q = quietkv::Options::default();
        let l = Self::bench_layout();
        let settings: Vec<String> = SETTINGS
            .iter()
            .map(|(what, why)| format!("{what} ({why})"))
            .collect();
        format!(
            "the tree as quietkv's: memtable as quietkv's, L1 {} MiB x {} (static level sizes), {} MiB target files, {} KiB blocks, no compression, {} bloom bits per key, block cache as quietkv's where user reads are buffered, throttled sections through its rate limiter over reads and writes; tuned as its guide advises: {}; compaction and flush bytes from its statistics",
            l.level_base_bytes >> 20,
            q.level_multiplier,
            l.target_file_size >> 20,
            l.block_size >> 10,
            l.bloom_bits_per_key,
            settings.join("; ")
        )
    }

    fn source_config() -> RocksDbConfig {
        RocksDbConfig::parse("buffered").expect("a known configuration")
    }

    /// Tuned like quietkv where RocksDB has the knob: memtable size, L1
    /// size and multiplier (10, static level sizes as quietkv's), target
    /// file size, block size, no compression, bloom bits, one background
    /// job, compaction readahead 2 MiB, direct write buffer 1 MiB, and the
    /// background rate limit counting reads and writes (quietkv's throttle
    /// counts both).
    fn open(dir: &Path, config: &RocksDbConfig, tuning: &Tuning) -> Result<Self, String> {
        let q = quietkv::Options::default();
        let mut o = Options::default();
        o.create_if_missing(tuning.create);
        o.set_use_direct_io_for_compaction_reads(config.direct_compaction_reads);
        o.set_use_direct_io_for_flush_and_compaction(config.direct_flush_and_compaction_writes);
        o.set_use_direct_reads(config.direct_reads);
        let mut t = BlockBasedOptions::default();
        if let Some(l) = &tuning.layout {
            if l.compression != "none" {
                return Err(format!(
                    "rocksdb: unsupported compression '{}'",
                    l.compression
                ));
            }
            o.set_target_file_size_base(l.target_file_size);
            o.set_max_bytes_for_level_base(l.level_base_bytes);
            if l.max_compaction_bytes > 0 {
                o.set_max_compaction_bytes(l.max_compaction_bytes);
            }
            t.set_block_size(l.block_size);
            t.set_bloom_filter(l.bloom_bits_per_key as f64, false);
        }
        // Needs uncompressed tables, which every layout here has.
        t.set_block_align(config.block_align);
        o.set_compression_type(DBCompressionType::None);
        o.set_bottommost_compression_type(DBCompressionType::None);
        o.set_max_bytes_for_level_multiplier(q.level_multiplier);
        o.set_level_compaction_dynamic_level_bytes(false);
        let given = tuning.block_cache_bytes.unwrap_or(q.block_cache_bytes);
        let cache_bytes = if config.is_seed() {
            SEED_BLOCK_CACHE
        } else if config.direct_reads {
            // A share of the memory limit (the cgroup the worker runs in),
            // at least the given.
            match quietio::memory_limit() {
                Some(l) => given.max((l.bytes as f64 * config.direct_cache_share()) as usize),
                None => given,
            }
        } else {
            given
        };
        if config.direct_reads && !config.is_seed() {
            t.set_cache_index_and_filter_blocks(true);
            t.set_pin_l0_filter_and_index_blocks_in_cache(true);
            t.set_pin_top_level_index_and_filter(true);
            if config.prepopulate {
                // kFlushOnly: blocks of new flushed tables go into the cache.
                t.set_prepopulate_block_cache(1);
            }
        }
        t.set_block_cache(&Cache::new_lru_cache(cache_bytes.max(1)));
        o.set_block_based_table_factory(&t);
        if let Some(m) = tuning.memtable_bytes {
            o.set_write_buffer_size(m.max(4096));
        }
        let threads = tuning
            .background_threads
            .unwrap_or(q.background_threads)
            .max(1);
        o.set_max_background_jobs(if config.is_seed() {
            SEED_BACKGROUND_JOBS
        } else {
            threads as i32 + 1
        });
        o.set_max_subcompactions(1);
        o.set_bytes_per_sync(1 << 20);
        o.set_wal_bytes_per_sync(1 << 20);
        o.set_advise_random_on_open(true);
        o.set_compaction_readahead_size(q.compaction_readahead_size);
        o.set_writable_file_max_buffer_size(q.direct_write_buffer_size as u64);
        if tuning.background_rate_limit_mib > 0 {
            o.set_ratelimiter_with_mode(
                (tuning.background_rate_limit_mib << 20) as i64,
                100_000,
                10,
                RateLimiterMode::KAllIo,
                false,
            );
        }
        o.enable_statistics();
        let db = DB::open(&o, dir).map_err(|e| err("cannot open the database", dir, e))?;
        Ok(RocksDbEngine {
            db,
            options: o,
            user_write_bytes: AtomicU64::new(0),
        })
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.db
            .get_pinned(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| format!("rocksdb: get: {e}"))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db
            .put(key, value)
            .map_err(|e| format!("rocksdb: put: {e}"))?;
        self.user_write_bytes
            .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// One write batch, WAL on, no sync (as quietkv's default writes).
    fn put_batch(&self, batch: &Batch) -> Result<(), String> {
        let mut b = WriteBatch::default();
        let mut bytes = 0;
        for (k, v) in batch.iter() {
            b.put(k, v);
            bytes += k.len() + v.len();
        }
        self.db
            .write(&b)
            .map_err(|e| format!("rocksdb: write failed: {e}"))?;
        self.user_write_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(())
    }

    /// A raw iterator with the default read options: seek, then `next`
    /// until `n` entries or the end; an iterator that stops early says
    /// why in its status.
    fn seek_scan(&self, from: &[u8], n: usize) -> Result<usize, String> {
        let mut it = self.db.raw_iterator();
        it.seek(from);
        let mut read = 0;
        while read < n && it.valid() {
            read += 1;
            it.next();
        }
        it.status()
            .map_err(|e| format!("rocksdb: scan from a key: {e}"))?;
        Ok(read)
    }

    fn scan_all(&self, reverse: bool) -> Result<ScanCount, String> {
        let mut it = self.db.raw_iterator();
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut c = ScanCount::default();
        while let Some((k, v)) = it.item() {
            c.add(k, v);
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status()
            .map_err(|e| format!("rocksdb: full scan: {e}"))?;
        Ok(c)
    }

    fn flush(&self) -> Result<(), String> {
        self.db.flush().map_err(|e| format!("rocksdb: flush: {e}"))
    }

    /// `CompactRange` over every key with the bottom level forced: the
    /// whole database is read and rewritten, as quietkv's `compact_all`.
    fn compact_all(&self) -> Result<(), String> {
        let mut c = CompactOptions::default();
        c.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        c.set_exclusive_manual_compaction(true);
        self.db.compact_range_opt(None::<&[u8]>, None::<&[u8]>, &c);
        Ok(())
    }

    fn wait_idle(&self) -> Result<(), String> {
        let mut w = WaitForCompactOptions::default();
        w.set_flush(true);
        self.db
            .wait_for_compact(&w)
            .map_err(|e| format!("rocksdb: waiting for compactions: {e}"))
    }

    /// Compaction and flush bytes from RocksDB's own statistics
    /// (`rocksdb.compact.read.bytes`, `rocksdb.compact.write.bytes`,
    /// `rocksdb.flush.write.bytes`), busy seconds from its compaction and
    /// flush time histograms.
    fn counters(&self) -> Counters {
        let compaction = self.options.get_histogram_data(Histogram::CompactionTime);
        let flush = self.options.get_histogram_data(Histogram::FlushTime);
        Counters {
            compaction_read_bytes: self.ticker(Ticker::CompactReadBytes),
            compaction_write_bytes: self.ticker(Ticker::CompactWriteBytes),
            flush_write_bytes: self.ticker(Ticker::FlushWriteBytes),
            compaction_seconds: compaction.sum() as f64 / 1e6,
            flush_seconds: flush.sum() as f64 / 1e6,
            compactions: compaction.count(),
            compactions_running: self.property("rocksdb.num-running-compactions"),
            user_write_bytes: self.user_write_bytes.load(Ordering::Relaxed),
            write_stall_seconds: Some(self.ticker(Ticker::StallMicros) as f64 / 1e6),
            warmed_bytes: 0,
            // RocksDB cannot tell whether a read found its block in the
            // page cache.
            user_read_page_cache: None,
            block_cache: Some(HitsMisses {
                hits: self.ticker(Ticker::BlockCacheHit),
                misses: self.ticker(Ticker::BlockCacheMiss),
            }),
            // Not read yet (its compaction CPU ticker is untested here).
            background_cpu_seconds: None,
            table_opens_by_reads: None,
            compaction_into_levels: self
                .db
                .property_value("rocksdb.cfstats")
                .ok()
                .flatten()
                .and_then(|t| parse_level_compaction_stats(&t)),
            get_times: Some(self.get_times()),
            memory: Some(EngineMemory {
                block_cache_bytes: Some(self.property("rocksdb.block-cache-usage")),
                block_cache_pinned_bytes: Some(self.property("rocksdb.block-cache-pinned-usage")),
                memtable_bytes: Some(self.property("rocksdb.cur-size-all-mem-tables")),
                table_readers_bytes: Some(self.property("rocksdb.estimate-table-readers-mem")),
            }),
            l0_tables: Some(self.property("rocksdb.num-files-at-level0")),
            ..Default::default()
        }
    }

    fn close(self) -> Result<(), String> {
        // Dropping the handle closes it; flush first so a reopened copy
        // replays no WAL (quietkv's close does the same).
        self.db
            .flush()
            .map_err(|e| format!("rocksdb: flush at close: {e}"))?;
        drop(self.db);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_the_switches_of_pr_14743() {
        let c = RocksDbConfig::parse("Read-Direct").unwrap();
        assert_eq!(c.name, "read-direct");
        assert_eq!(c.switches(), ["use_direct_io_for_compaction_reads"]);
        let c = RocksDbConfig::parse("write-direct").unwrap();
        assert_eq!(c.switches(), ["use_direct_io_for_flush_and_compaction"]);
        let c = RocksDbConfig::parse("both-direct").unwrap();
        assert_eq!(
            c.switches(),
            [
                "use_direct_io_for_compaction_reads",
                "use_direct_io_for_flush_and_compaction"
            ]
        );
        let c = RocksDbConfig::parse("all-direct").unwrap();
        assert_eq!(
            c.switches(),
            ["use_direct_io_for_flush_and_compaction", "use_direct_reads"]
        );
        assert!(RocksDbConfig::parse("buffered")
            .unwrap()
            .switches()
            .is_empty());
        assert!(RocksDbConfig::parse("auto")
            .unwrap_err()
            .contains("unknown RocksDB configuration"));
    }

    #[test]
    fn the_page_cache_description_follows_the_switches() {
        let dir = std::path::Path::new("/");
        let u = RocksDbConfig::parse("read-direct").unwrap().page_cache(dir);
        assert_eq!(u.compaction_reads.effect, CacheUse::Bypassed);
        assert_eq!(u.compaction_writes.effect, CacheUse::Cached);
        assert_eq!(u.user_reads.effect, CacheUse::Cached);
        assert_eq!(
            u.describe(),
            "compaction read direct (use_direct_io_for_compaction_reads) / compaction+flush write buffered / user read buffered"
        );
        let u = RocksDbConfig::parse("all-direct").unwrap().page_cache(dir);
        assert_eq!(u.user_reads.effect, CacheUse::Bypassed);
        assert_eq!(u.flush_writes.effect, CacheUse::Bypassed);
        assert!(
            u.also[0].contains("block cache of 0.50 of the memory limit")
                && u.also[0].ends_with("not filled at flush"),
            "{:?}",
            u.also
        );
        let c = RocksDbConfig::parse("all-direct+cache=0.5").unwrap();
        assert_eq!(
            (c.name.as_str(), c.direct_cache_share()),
            ("all-direct+cache=0.5", 0.5)
        );
        assert!(c.page_cache(dir).also[0].contains("0.50 of the memory limit"));
        assert!(!c.prepopulate);
        let c = RocksDbConfig::parse("all-direct+cache=0.33+prepopulate=1").unwrap();
        assert_eq!((c.direct_cache_share(), c.prepopulate), (0.33, true));
        assert!(c.page_cache(dir).also[0].ends_with("pinned, filled at flush"));
        let c = RocksDbConfig::parse("all-direct+cache=0.5+prepopulate=0").unwrap();
        assert_eq!((c.direct_cache_share(), c.prepopulate), (0.5, false));
        assert!(
            c.page_cache(dir).also[0].ends_with("pinned, not filled at flush"),
            "{:?}",
            c.page_cache(dir).also
        );
        assert_eq!(
            c.switches(),
            ["use_direct_io_for_flush_and_compaction", "use_direct_reads"]
        );
        for (bad, why) in [
            ("read-direct+cache=0.5", "only all-direct has"),
            ("seed-all-direct+cache=0.5", "only all-direct has"),
            ("all-direct+cache=0", "above 0 and at most 0.9"),
            ("all-direct+cache=1.5", "above 0 and at most 0.9"),
            ("all-direct+cache=lots", "above 0 and at most 0.9"),
            ("all-direct+depth=4", "unknown knob 'depth=4'"),
            ("read-direct+prepopulate=0", "only all-direct has"),
            ("all-direct+prepopulate=no", "prepopulate must be 0 or 1"),
            ("buffered+align=yes", "align must be 0 or 1"),
        ] {
            let e = RocksDbConfig::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let u = RocksDbConfig::parse("seed-all-direct")
            .unwrap()
            .page_cache(dir);
        assert!(u.also[0].contains("block cache 4 MiB"), "{:?}", u.also);
        assert!(
            RocksDbConfig::parse("buffered")
                .unwrap()
                .page_cache(dir)
                .engine_defaults
        );
        let aligned = RocksDbConfig::parse("buffered+align=1").unwrap();
        assert!(aligned.block_align);
        assert!(!RocksDbConfig::parse("buffered").unwrap().block_align);
        let u = aligned.page_cache(dir);
        assert!(!u.engine_defaults);
        assert_eq!(
            u.also,
            ["block_align (data blocks padded to page boundaries)"]
        );
    }
}
