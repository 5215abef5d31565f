//! The seam every experiment drives an engine through: [`BenchEngine`]
//! (open a run's copy of a source database with a configuration, get, put,
//! write batches, flush, full compaction, wait until background work is
//! idle, read its [`Counters`], close) and each engine's configuration
//! type ([`EngineConfig`]: its own names and knobs).

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::counters::Counters;
use super::page_cache::PageCacheUse;

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
    /// How many keyspaces (column families) it spreads the keys over; 1
    /// for one key space.
    fn keyspaces(&self) -> usize {
        1
    }
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
    /// The workload's keys are [`crate::keys::key`]`(k)` for `k` below
    /// this: a configuration that spreads the keys over keyspaces by key
    /// range (quietkv's `+ks=N`) cuts these numbers into equal parts, so
    /// each keyspace gets about as many keys. `None`: the experiment does
    /// not say, and such a configuration is refused.
    pub key_span: Option<u64>,
    /// Ask the engine to count its user reads' page-cache hits where it
    /// can (quietkv's `attribute_cache_hits`): a statistic that costs a
    /// system call per read missing the block cache, so only experiments
    /// that report the engine's own count ask for it.
    pub count_page_cache_hits: bool,
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
            key_span: None,
            count_page_cache_hits: false,
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

/// What a full scan read: entries, and bytes of their keys and values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanCount {
    pub entries: u64,
    pub bytes: u64,
}

impl ScanCount {
    /// Counts one entry of a `key` and a `value`.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        self.entries += 1;
        self.bytes += (key.len() + value.len()) as u64;
    }
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
    /// The configuration the source database of runs of `config` is built
    /// with: [`BenchEngine::source_config`], with the keys spread over
    /// keyspaces as `config` spreads them, so that a run's copy holds each
    /// key where the run looks for it.
    fn source_config_for(config: &Self::Config) -> Self::Config {
        let _ = config;
        Self::source_config()
    }
    /// Opens the database in `dir` with `config`.
    fn open(dir: &Path, config: &Self::Config, tuning: &Tuning) -> Result<Self, String>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Writes every entry of `batch` atomically (fills, paced writers).
    fn put_batch(&self, batch: &Batch) -> Result<(), String>;
    /// Seeks to the first key at or after `from` and reads up to `n`
    /// entries from there in key order (db_bench's `seekrandom`, YCSB's
    /// scans); returns how many it read (fewer at the end of the keys).
    fn seek_scan(&self, from: &[u8], n: usize) -> Result<usize, String>;
    /// Reads every entry, in key order or (with `reverse`) from the last
    /// key backwards (db_bench's `readseq` and `readreverse`).
    fn scan_all(&self, reverse: bool) -> Result<ScanCount, String>;
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

/// Closes the run's database once every reader has let go of it; an
/// error if one still holds it.
pub fn close_shared<E: BenchEngine>(db: std::sync::Arc<E>) -> Result<(), String> {
    match std::sync::Arc::try_unwrap(db) {
        Ok(db) => db.close(),
        Err(_) => Err("database still shared at the end of the run".into()),
    }
}
/// Checks an engine's scans against a `BTreeMap` holding the same
/// writes: seeded random puts and overwrites over a flush (so that the
/// memtable and tables both hold keys), then `seek_scan` from present,
/// absent and out-of-range keys and both full scans.
#[cfg(test)]
pub(crate) fn check_scans_against_a_model<E: BenchEngine>(config: &E::Config) {
    use std::collections::BTreeMap;
    let dir = tempfile::tempdir().unwrap();
    let db = E::open(dir.path(), config, &Tuning::engine_defaults()).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..2 {
        for _ in 0..400 {
            let k = format!("k{:05}", next() % 1000).into_bytes();
            let v = format!("v{round}-{}", next() % 97).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        if round == 0 {
            db.flush().unwrap();
        }
    }
    for _ in 0..200 {
        let from = format!("k{:05}", next() % 1100).into_bytes();
        let n = (next() % 15) as usize;
        let want = model.range(from.clone()..).take(n).count();
        assert_eq!(db.seek_scan(&from, n).unwrap(), want, "from {from:?}, {n}");
    }
    assert_eq!(db.seek_scan(b"a", 5).unwrap(), 5.min(model.len()));
    assert_eq!(db.seek_scan(b"z", 5).unwrap(), 0);
    let bytes: u64 = model.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    let want = ScanCount {
        entries: model.len() as u64,
        bytes,
    };
    assert_eq!(db.scan_all(false).unwrap(), want);
    assert_eq!(db.scan_all(true).unwrap(), want);
    db.close().unwrap();
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
}
