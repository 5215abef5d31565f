//! The seam between the benchmark and the engines it measures.
//!
//! Every experiment drives an engine only through [`BenchEngine`]: open a
//! run's copy of a source database with a configuration, get, put (one key
//! or a [`Batch`] for fills), flush, full compaction, wait until background
//! work is idle, read the background [`Counters`], close. Each engine has
//! its own configuration type ([`EngineConfig`]: its own names and knobs),
//! which says in shared terms what it does to the page cache
//! ([`PageCacheUse`]); the report and the verdict use that description, not
//! any engine's own option types.
//!
//! [`EngineMode`] is the closed set of configurations the worker process
//! can be handed: one variant per built engine (quietkv today; RocksDB and
//! fjall behind their Cargo features later).

pub mod quietkv;

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use self::quietkv::{QuietkvConfig, QuietkvEngine};

/// What a configuration does to the page cache in one direction of I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheUse {
    /// Through the page cache, which keeps the pages.
    Cached,
    /// Around the page cache (O_DIRECT).
    Bypassed,
    /// Through the page cache, whose pages are dropped after use
    /// (RWF_DONTCACHE, fadvise DONTNEED).
    DroppedAfterUse,
    /// Left to the engine, which could not say what it picks here.
    Unknown,
}

/// One direction: the shared effect and the engine's own word for it
/// (`direct`, `dontcache`, `auto (direct here)`), which the report prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Direction {
    pub effect: CacheUse,
    pub label: String,
}

/// What one configuration does to the page cache, per direction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCacheUse {
    pub compaction_reads: Direction,
    pub compaction_writes: Direction,
    pub flush_writes: Direction,
    pub user_reads: Direction,
    /// Further switches of the configuration that touch the cache, in the
    /// engine's words (`warm_compaction_output on`).
    pub also: Vec<String>,
    /// The configuration is the engine's defaults: nothing to configure.
    pub engine_defaults: bool,
}

impl PageCacheUse {
    /// `compaction read direct / compaction+flush write direct / user read
    /// buffered` (writes split when compaction and flush differ).
    pub fn describe(&self) -> String {
        let (cw, fw) = (&self.compaction_writes.label, &self.flush_writes.label);
        let writes = if cw == fw {
            format!("compaction+flush write {cw}")
        } else {
            format!("compaction write {cw} / flush write {fw}")
        };
        format!(
            "compaction read {} / {writes} / user read {}",
            self.compaction_reads.label, self.user_reads.label
        )
    }

    /// How to set this configuration up, for the verdict's recommendation.
    pub fn how_to_configure(&self) -> String {
        if self.engine_defaults {
            return "the engine's defaults: nothing to configure".into();
        }
        let also: String = self.also.iter().map(|a| format!("; {a}")).collect();
        format!(
            "compaction reads {}, compaction writes {}, flush writes {}; user reads stay {}{also}",
            self.compaction_reads.label,
            self.compaction_writes.label,
            self.flush_writes.label,
            self.user_reads.label
        )
    }
}

/// An engine's configuration: its own names and knobs.
pub trait EngineConfig:
    Clone + std::fmt::Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync
{
    /// The configuration's name within its engine (`auto`, `both-direct`).
    fn name(&self) -> &str;
    /// Fails if the configuration cannot work in `dir` (say, O_DIRECT
    /// refused by the filesystem), before any run starts.
    fn check(&self, dir: &Path) -> Result<(), String>;
    /// What it does to the page cache in `dir` (choices the engine makes
    /// from a probe of the directory are resolved there).
    fn page_cache(&self, dir: &Path) -> PageCacheUse;
}

/// The shape of the tree on disk; part of a source database's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub block_size: usize,
    pub target_file_size: u64,
    pub level_base_bytes: u64,
    pub bloom_bits_per_key: usize,
    /// `none`: values are incompressible filler anyway.
    pub compression: String,
}

/// The knobs every engine is opened with, beside its configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuning {
    /// Create the database if it is missing (fills), or insist it exists
    /// (a run's copy of a source).
    pub create: bool,
    /// The tree's shape; `None` keeps the engine's own defaults.
    pub layout: Option<Layout>,
    /// `None` keeps the engine's default.
    pub block_cache_bytes: Option<usize>,
    pub memtable_bytes: Option<usize>,
    pub background_threads: Option<usize>,
    /// Background (compaction) I/O limit in MiB/s; 0 = unthrottled.
    pub background_rate_limit_mib: u64,
}

impl Tuning {
    /// The engine's defaults, creating the database.
    pub fn engine_defaults() -> Tuning {
        Tuning {
            create: true,
            layout: None,
            block_cache_bytes: None,
            memtable_bytes: None,
            background_threads: None,
            background_rate_limit_mib: 0,
        }
    }
}

/// Keys and values of one write batch, in one reusable buffer.
#[derive(Debug, Default)]
pub struct Batch {
    data: Vec<u8>,
    /// (key end, value end) offsets into `data`.
    ends: Vec<(usize, usize)>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.data.extend_from_slice(key);
        let k = self.data.len();
        self.data.extend_from_slice(value);
        self.ends.push((k, self.data.len()));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The entries in the order they were put.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut start = 0;
        self.ends.iter().map(move |&(k, v)| {
            let e = (&self.data[start..k], &self.data[k..v]);
            start = v;
            e
        })
    }
}

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
    /// Seconds user writes waited for background work.
    pub write_stall_seconds: f64,
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
}

/// An engine under test.
pub trait BenchEngine: Sized + Send + Sync {
    type Config: EngineConfig;
    /// `quietkv`; the prefix of report names when several engines run.
    const NAME: &'static str;
    /// The engine's version, part of a source database's identity.
    const VERSION: &'static str;

    /// The tree's shape of every source database and run of this engine.
    fn bench_layout() -> Layout;
    /// The configuration source databases are built with (the page cache
    /// kept, the engine's plainest I/O).
    fn source_config() -> Self::Config;
    /// Opens the database in `dir` with `config`.
    fn open(dir: &Path, config: &Self::Config, tuning: &Tuning) -> Result<Self, String>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Writes every entry of `batch` atomically (fills, paced writers).
    fn put_batch(&self, batch: &Batch) -> Result<(), String>;
    /// Writes the memtable out to a table.
    fn flush(&self) -> Result<(), String>;
    /// Rewrites the whole database into its bottom level; returns when done.
    fn compact_all(&self) -> Result<(), String>;
    /// Returns when no flush or compaction is running or due.
    fn wait_idle(&self) -> Result<(), String>;
    fn counters(&self) -> Counters;
    fn close(self) -> Result<(), String>;
}

/// A configuration of one of the built engines: what the parent hands the
/// worker process, and what names a column of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "engine", rename_all = "snake_case")]
pub enum EngineMode {
    Quietkv(QuietkvConfig),
}

impl EngineMode {
    /// Parses `engine:config`, or a bare config name as quietkv's.
    pub fn parse(name: &str) -> Result<EngineMode, String> {
        let (engine, config) = match name.trim().split_once(':') {
            Some((e, c)) => (e.trim().to_ascii_lowercase(), c),
            None => (QuietkvEngine::NAME.to_string(), name),
        };
        match engine.as_str() {
            QuietkvEngine::NAME => Ok(EngineMode::Quietkv(QuietkvConfig::parse(config)?)),
            other => Err(format!(
                "unknown engine '{other}' in mode '{name}' (built engines: {})",
                QuietkvEngine::NAME
            )),
        }
    }

    pub fn engine(&self) -> &'static str {
        match self {
            EngineMode::Quietkv(_) => QuietkvEngine::NAME,
        }
    }

    pub fn config_name(&self) -> &str {
        match self {
            EngineMode::Quietkv(c) => c.name(),
        }
    }

    /// The name in the report: the configuration's own when one engine
    /// runs (the README's results stay comparable), else `engine:config`.
    pub fn report_name(&self, engines: usize) -> String {
        if engines > 1 {
            format!("{}:{}", self.engine(), self.config_name())
        } else {
            self.config_name().to_string()
        }
    }

    pub fn check(&self, dir: &Path) -> Result<(), String> {
        match self {
            EngineMode::Quietkv(c) => c.check(dir),
        }
    }

    pub fn page_cache(&self, dir: &Path) -> PageCacheUse {
        match self {
            EngineMode::Quietkv(c) => c.page_cache(dir),
        }
    }

    /// The configuration reads compaction output back into the page cache
    /// (its counter is reported even when it stayed at zero).
    pub fn warms_output(&self) -> bool {
        match self {
            EngineMode::Quietkv(c) => c.warm_output,
        }
    }

    /// Finds or builds this engine's source database of about `db_bytes`
    /// of `value_size` values in `base` (see [`crate::source::prepare`]).
    pub fn prepare_source(
        &self,
        base: &Path,
        db_bytes: u64,
        value_size: usize,
        reuse: bool,
        progress: &dyn Fn(&str),
    ) -> Result<(std::path::PathBuf, crate::source::Manifest, bool), String> {
        fn prepare<E: BenchEngine>(
            base: &Path,
            db_bytes: u64,
            value_size: usize,
            reuse: bool,
            progress: &dyn Fn(&str),
        ) -> Result<(std::path::PathBuf, crate::source::Manifest, bool), String> {
            let spec = crate::source::SourceSpec::new::<E>(db_bytes, value_size);
            crate::source::prepare::<E>(base, &spec, &E::source_config(), reuse, progress)
        }
        match self {
            EngineMode::Quietkv(_) => {
                prepare::<QuietkvEngine>(base, db_bytes, value_size, reuse, progress)
            }
        }
    }

    /// The configuration alone, as the report's parameters list it.
    pub fn config_json(&self) -> serde_json::Value {
        match self {
            EngineMode::Quietkv(c) => serde_json::to_value(c).unwrap_or_default(),
        }
    }
}

/// How many engines `modes` span.
pub fn engine_count(modes: &[EngineMode]) -> usize {
    let mut names: Vec<&str> = modes.iter().map(|m| m.engine()).collect();
    names.sort();
    names.dedup();
    names.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_gives_back_its_entries_in_order() {
        let mut b = Batch::new();
        b.put(b"k1", b"value one");
        b.put(b"", b"");
        b.put(b"key3", b"v3");
        let v: Vec<(&[u8], &[u8])> = b.iter().collect();
        assert_eq!(
            v,
            vec![
                (&b"k1"[..], &b"value one"[..]),
                (&b""[..], &b""[..]),
                (&b"key3"[..], &b"v3"[..])
            ]
        );
        assert_eq!(b.len(), 3);
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.iter().count(), 0);
    }

    #[test]
    fn report_names_carry_the_engine_only_beside_another_engine() {
        let m = EngineMode::parse("both-direct").unwrap();
        assert_eq!(m, EngineMode::parse("quietkv:both-direct").unwrap());
        assert_eq!(m.report_name(1), "both-direct");
        assert_eq!(m.report_name(2), "quietkv:both-direct");
        assert_eq!(engine_count(&[m.clone(), m]), 1);
        assert!(EngineMode::parse("leveldb:buffered")
            .unwrap_err()
            .contains("unknown engine 'leveldb'"));
    }

    #[test]
    fn the_description_splits_writes_only_when_they_differ() {
        let d = |effect, label: &str| Direction {
            effect,
            label: label.into(),
        };
        let mut u = PageCacheUse {
            compaction_reads: d(CacheUse::Bypassed, "direct"),
            compaction_writes: d(CacheUse::Bypassed, "direct"),
            flush_writes: d(CacheUse::Bypassed, "direct"),
            user_reads: d(CacheUse::Cached, "buffered"),
            also: vec!["warm_compaction_output on".into()],
            engine_defaults: false,
        };
        assert_eq!(
            u.describe(),
            "compaction read direct / compaction+flush write direct / user read buffered"
        );
        assert_eq!(
            u.how_to_configure(),
            "compaction reads direct, compaction writes direct, flush writes direct; user reads stay buffered; warm_compaction_output on"
        );
        u.flush_writes = d(CacheUse::Cached, "buffered");
        assert_eq!(
            u.describe(),
            "compaction read direct / compaction write direct / flush write buffered / user read buffered"
        );
        u.engine_defaults = true;
        assert_eq!(
            u.how_to_configure(),
            "the engine's defaults: nothing to configure"
        );
    }
}
