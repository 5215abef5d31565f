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
//! can be handed: one variant per built engine (quietkv always; RocksDB and
//! fjall behind their Cargo features `rocksdb` and `fjall`).

#[cfg(feature = "fjall")]
pub mod fjall;
pub mod quietkv;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod rocksdb_stats;
pub mod thread_io;

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

#[cfg(feature = "fjall")]
pub use self::fjall::{FjallConfig, FjallEngine};
pub use self::quietkv::{QuietkvConfig, QuietkvEngine};
#[cfg(feature = "rocksdb")]
pub use self::rocksdb::{RocksDbConfig, RocksDbEngine};

/// Every engine the bench knows, built or not, with the Cargo feature that
/// builds it (`None`: always built).
pub const ALL_ENGINES: [(&str, Option<&str>); 3] = [
    ("quietkv", None),
    ("rocksdb", Some("rocksdb")),
    ("fjall", Some("fjall")),
];

/// The engines this binary was built with.
pub fn built_engines() -> Vec<&'static str> {
    // Mutable only when a peer is built.
    #[allow(unused_mut)]
    let mut v = vec![QuietkvEngine::NAME];
    #[cfg(feature = "rocksdb")]
    v.push(RocksDbEngine::NAME);
    #[cfg(feature = "fjall")]
    v.push(FjallEngine::NAME);
    v
}

/// How to build the peers this binary lacks, for messages and reports;
/// `None` when every engine is built.
pub fn how_to_build_peers() -> Option<String> {
    let built = built_engines();
    let missing: Vec<&str> = ALL_ENGINES
        .iter()
        .filter(|(n, _)| !built.contains(n))
        .filter_map(|(_, f)| *f)
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "this binary runs quietkv alone; to bench the peers too, build with `cargo build --release -p quietkv-cli --features {}` (RocksDB's C++ build takes ~25 minutes on two cores and needs libclang)",
            missing.join(",")
        )
    })
}

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
    /// Input bytes of one slice of a full compaction (quietkv's
    /// `max_compaction_bytes`, RocksDB's option of the same name, which
    /// cuts `CompactRange` into installs of that size): both engines
    /// install a full compaction in slices of the same size.
    pub max_compaction_bytes: u64,
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
    /// Whether the file at `rel` (a path relative to the database
    /// directory) is never written again once complete, so a run's copy
    /// of a source may hard-link it instead of copying it.
    fn immutable_file(rel: &str) -> bool {
        rel.ends_with(".sst")
    }
    /// How the engine is set up for the bench beside its configuration,
    /// for the report's header (what it was tuned like, what it lacks).
    fn setup_note() -> String {
        String::new()
    }
    /// Returns when no flush or compaction is running or due.
    fn wait_idle(&self) -> Result<(), String>;
    fn counters(&self) -> Counters;
    fn close(self) -> Result<(), String>;
}

/// A configuration of one of the built engines: what the parent hands the
/// worker process, and what names a column of the report.
// A run holds a handful of these, made once: the size difference between
// variants costs nothing worth an indirection at every use.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "engine", rename_all = "snake_case")]
pub enum EngineMode {
    Quietkv(QuietkvConfig),
    #[cfg(feature = "rocksdb")]
    #[serde(rename = "rocksdb")]
    RocksDb(RocksDbConfig),
    #[cfg(feature = "fjall")]
    Fjall(FjallConfig),
}

/// Calls `$f::<Engine>($config, args...)` for the engine of `$mode`.
macro_rules! dispatch {
    ($mode:expr, |$c:ident : $e:ident| $body:expr) => {
        match $mode {
            $crate::engines::EngineMode::Quietkv($c) => {
                #[allow(dead_code)]
                type $e = $crate::engines::QuietkvEngine;
                $body
            }
            #[cfg(feature = "rocksdb")]
            $crate::engines::EngineMode::RocksDb($c) => {
                #[allow(dead_code)]
                type $e = $crate::engines::RocksDbEngine;
                $body
            }
            #[cfg(feature = "fjall")]
            $crate::engines::EngineMode::Fjall($c) => {
                #[allow(dead_code)]
                type $e = $crate::engines::FjallEngine;
                $body
            }
        }
    };
}
pub(crate) use dispatch;

impl EngineMode {
    /// Parses `engine:config`, or a bare config name as quietkv's.
    pub fn parse(name: &str) -> Result<EngineMode, String> {
        let (engine, config) = match name.trim().split_once(':') {
            Some((e, c)) => (e.trim().to_ascii_lowercase(), c),
            None => (QuietkvEngine::NAME.to_string(), name),
        };
        match engine.as_str() {
            QuietkvEngine::NAME => Ok(EngineMode::Quietkv(QuietkvConfig::parse(config)?)),
            #[cfg(feature = "rocksdb")]
            RocksDbEngine::NAME => Ok(EngineMode::RocksDb(RocksDbConfig::parse(config)?)),
            #[cfg(feature = "fjall")]
            FjallEngine::NAME => Ok(EngineMode::Fjall(FjallConfig::parse(config)?)),
            other => Err(not_built(other, name)),
        }
    }

    /// The default configurations of `engine` in an experiment: quietkv's
    /// `quietkv_default`, RocksDB's `rocksdb_default`, fjall's one.
    pub fn defaults_of(
        engine: &str,
        quietkv_default: &[&str],
        rocksdb_default: &[&str],
    ) -> Result<Vec<EngineMode>, String> {
        let names: Vec<String> = match engine {
            QuietkvEngine::NAME => quietkv_default.iter().map(|c| c.to_string()).collect(),
            #[cfg(feature = "rocksdb")]
            RocksDbEngine::NAME => rocksdb_default.iter().map(|c| c.to_string()).collect(),
            #[cfg(feature = "fjall")]
            FjallEngine::NAME => vec!["buffered".into()],
            other => {
                let _ = rocksdb_default;
                return Err(not_built(other, other));
            }
        };
        names
            .iter()
            .map(|c| EngineMode::parse(&format!("{engine}:{c}")))
            .collect()
    }

    pub fn engine(&self) -> &'static str {
        dispatch!(self, |_c: E| E::NAME)
    }

    pub fn config_name(&self) -> &str {
        dispatch!(self, |c: E| c.name())
    }

    /// The engine's name and version with its [`BenchEngine::setup_note`].
    pub fn engine_text(&self) -> String {
        dispatch!(self, |_c: E| {
            let note = E::setup_note();
            if note.is_empty() {
                format!("{} ({})", E::NAME, E::VERSION)
            } else {
                format!("{} ({}): {note}", E::NAME, E::VERSION)
            }
        })
    }

    /// See [`BenchEngine::immutable_file`].
    pub fn immutable_file(&self, rel: &str) -> bool {
        dispatch!(self, |_c: E| E::immutable_file(rel))
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
        dispatch!(self, |c: E| c.check(dir))
    }

    pub fn page_cache(&self, dir: &Path) -> PageCacheUse {
        dispatch!(self, |c: E| c.page_cache(dir))
    }

    /// The configuration reads compaction output back into the page cache
    /// (its counter is reported even when it stayed at zero).
    pub fn warms_output(&self) -> bool {
        match self {
            EngineMode::Quietkv(c) => c.warm_output,
            #[allow(unreachable_patterns)]
            _ => false,
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
        dispatch!(self, |_c: E| prepare::<E>(
            base, db_bytes, value_size, reuse, progress
        ))
    }

    /// The configuration alone, as the report's parameters list it (with
    /// its engine when that is not quietkv).
    pub fn config_json(&self) -> serde_json::Value {
        let mut v = dispatch!(self, |c: E| serde_json::to_value(c).unwrap_or_default());
        if self.engine() != QuietkvEngine::NAME {
            v["engine"] = serde_json::json!(self.engine());
        }
        v
    }
}

fn not_built(engine: &str, mode: &str) -> String {
    let built = built_engines().join(", ");
    match ALL_ENGINES.iter().find(|(n, _)| *n == engine) {
        Some((_, Some(feature))) => format!(
            "engine '{engine}' (in '{mode}') is not built into this binary (built: {built}); build with `--features {feature}`"
        ),
        _ => format!("unknown engine '{engine}' in mode '{mode}' (built engines: {built})"),
    }
}

/// The report header's line on the engines of a run: each one's version
/// and setup, or quietkv alone and how to build the peers.
pub fn engines_text(modes: &[EngineMode]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut parts = Vec::new();
    for m in modes {
        if !seen.contains(&m.engine()) {
            seen.push(m.engine());
            parts.push(m.engine_text());
        }
    }
    let mut out = parts.join("; ");
    if seen == [QuietkvEngine::NAME] {
        if let Some(how) = how_to_build_peers() {
            out.push_str(&format!("; {how}"));
        }
    }
    out
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
