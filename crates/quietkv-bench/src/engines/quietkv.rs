//! quietkv behind [`BenchEngine`]: its configurations are quietio's access
//! modes per I/O class (docs/benchmark.md, "Modes").

use std::path::Path;

use quietkv::{
    AccessMode, CompactionPriority, Db, DbStats, IoClass, Options, WriteBatch, WriteOptions,
};
use serde::{Deserialize, Serialize};

use super::bench_engine::{Batch, BenchEngine, EngineConfig, Layout, ScanCount, Tuning};
use super::counters::{Counters, EngineMemory, HitsMisses, LevelWork};
use super::page_cache::{CacheUse, Direction, PageCacheUse};
use super::quietkv_spread::{KeyParts, Spread};

fn buffered() -> String {
    "buffered".into()
}

/// A named quietkv configuration: the access mode of each I/O class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuietkvConfig {
    pub name: String,
    pub user_read: String,
    pub compaction_read: String,
    pub compaction_write: String,
    pub flush_write: String,
    /// The WAL and the manifest.
    #[serde(default = "buffered")]
    pub wal_write: String,
    /// `Options::warm_compaction_output` (see [`QuietkvConfig::parse`]).
    #[serde(default)]
    pub warm_output: bool,
    /// `Options::wal_sync` (`none`, `group`, `per-write`, `periodic:MS`);
    /// `None` keeps the engine's default.
    #[serde(default)]
    pub wal_sync: Option<String>,
    /// `Options::wal_compression` (`none`, `lz4`, `zstd`).
    #[serde(default)]
    pub wal_compression: Option<String>,
    /// `Options::wal_recycle_count`; `None` keeps the engine's default.
    #[serde(default)]
    pub wal_recycle_count: Option<usize>,
    /// Engine knobs a mode name can override (`+depth=8`, ...), for
    /// measuring what they do; empty keeps the engine's defaults.
    #[serde(default)]
    pub knobs: QuietkvKnobs,
}

/// Options a mode name may set after its base mode: `+depth=N`
/// (`io_depth`), `+wbuf=KiB` (`direct_write_buffer_size`), `+ra=KiB`
/// (`compaction_readahead_size`), `+nice=N` (`background_nice`),
/// `+yield=US` (`background_yield_micros`, 0 = never), `+pick=min` or
/// `+pick=rr` (`compaction_priority`: least overlap, round robin),
/// `+l0=S/T` (`l0_slowdown_trigger` S, `l0_stop_trigger` T), `+wb=KiB`
/// (`writeback_chunk_size`, 0 = off), `+slice=MiB`
/// (`max_compaction_bytes`: a full compaction's slices), `+bgdepth=N`
/// (`background_io_depth`), `+warmauto=0|1` (`warm_automatic_compactions`),
/// `+warmwin=KiB` (`warm_window_bytes`),
/// `+flush=buffered|direct|auto` (the FlushWrite class's mode),
/// `+ks=N` (the keys spread over N keyspaces by key range: the default
/// keyspace and N - 1 named ones, each with a memtable of 1/N of the run's
/// memtable budget, so that the memtables hold as much in all as with one
/// keyspace; see [`super::quietkv_spread`]; 1, the default, is the default
/// keyspace alone, exactly as without the knob),
/// `+small=PCT` (`small_database_share` in percent; 0 = `auto` always
/// writes tables past the page cache), `+hits=0|1`
/// (`attribute_cache_hits`: whether user reads count page-cache hits),
/// `+trim=0|1` (`release_heap_after_jobs`: whether the allocator's free
/// memory goes back to the kernel after each background job), `+align=0|1`
/// (`align_blocks`: whether data blocks end on page boundaries).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuietkvKnobs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_depth: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_write_kib: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readahead_kib: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_nice: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_yield_micros: Option<u64>,
    /// `min` or `rr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_priority: Option<String>,
    /// `writeback_chunk_size` in KiB, as `+wb=KiB` (0 = off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writeback_kib: Option<u64>,
    /// `l0_slowdown_trigger` and `l0_stop_trigger`, as `+l0=S/T`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l0_stall_triggers: Option<(usize, usize)>,
    /// `max_compaction_bytes` in MiB, as `+slice=MiB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_mib: Option<u64>,
    /// `background_io_depth`, as `+bgdepth=N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_io_depth: Option<usize>,
    /// `warm_automatic_compactions`, as `+warmauto=0|1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_automatic: Option<bool>,
    /// `warm_window_bytes` in KiB, as `+warmwin=KiB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_window_kib: Option<u64>,
    /// The FlushWrite class's mode, as `+flush=buffered|direct|auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_mode: Option<String>,
    /// Keyspaces the keys are spread over, as `+ks=N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyspaces: Option<usize>,
    /// `small_database_share` in percent, as `+small=PCT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small_database_percent: Option<u8>,
    /// `attribute_cache_hits`, as `+hits=0|1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute_cache_hits: Option<bool>,
    /// `release_heap_after_jobs`, as `+trim=0|1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_heap: Option<bool>,
    /// `align_blocks`, as `+align=0|1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub align_blocks: Option<bool>,
}

/// The most keyspaces `+ks=N` spreads the keys over.
pub const MAX_SPREAD_KEYSPACES: usize = 64;

fn compaction_priority(name: &str) -> Option<CompactionPriority> {
    match name {
        "min" => Some(CompactionPriority::MinOverlappingRatio),
        "rr" => Some(CompactionPriority::RoundRobin),
        _ => None,
    }
}

impl QuietkvKnobs {
    /// Parses one `key=value` suffix into these knobs.
    fn set(&mut self, token: &str) -> Result<(), String> {
        let (key, value) = token
            .split_once('=')
            .ok_or_else(|| format!("'{token}' is not a knob (expected key=value)"))?;
        let number = |what: &str| -> Result<i64, String> {
            value
                .parse::<i64>()
                .map_err(|_| format!("{what} must be a whole number, got '{value}'"))
        };
        let positive = |what: &str| -> Result<usize, String> {
            match number(what)? {
                n if n > 0 => Ok(n as usize),
                n => Err(format!("{what} must be positive, got {n}")),
            }
        };
        match key {
            "depth" => self.io_depth = Some(positive("depth")?),
            "wbuf" => self.direct_write_kib = Some(positive("wbuf (KiB)")?),
            "ra" => self.readahead_kib = Some(positive("ra (KiB)")?),
            "nice" => match number("nice")? {
                n @ -20..=19 => self.background_nice = Some(n as i32),
                n => return Err(format!("nice must be between -20 and 19, got {n}")),
            },
            "yield" => match number("yield (us)")? {
                n @ 0..=1_000_000 => self.background_yield_micros = Some(n as u64),
                n => return Err(format!("yield must be 0..=1000000 us, got {n}")),
            },
            "pick" => match compaction_priority(value) {
                Some(_) => self.compaction_priority = Some(value.to_string()),
                None => {
                    return Err(format!(
                        "pick must be min (least overlap) or rr (round robin), got '{value}'"
                    ))
                }
            },
            "slice" => self.slice_mib = Some(positive("slice (MiB)")? as u64),
            "bgdepth" => self.background_io_depth = Some(positive("bgdepth")?),
            "warmwin" => match number("warmwin (KiB)")? {
                n @ 4..=4_194_304 => self.warm_window_kib = Some(n as u64),
                n => return Err(format!("warmwin must be 4..=4194304 KiB, got {n}")),
            },
            "ks" => match positive("ks")? {
                n @ 1..=MAX_SPREAD_KEYSPACES => self.keyspaces = Some(n),
                n => {
                    return Err(format!(
                        "ks must be 1 to {MAX_SPREAD_KEYSPACES} keyspaces, got {n}"
                    ))
                }
            },
            "hits" => match value {
                "0" => self.attribute_cache_hits = Some(false),
                "1" => self.attribute_cache_hits = Some(true),
                _ => return Err(format!("hits must be 0 or 1, got '{value}'")),
            },
            "trim" => match value {
                "0" => self.release_heap = Some(false),
                "1" => self.release_heap = Some(true),
                _ => return Err(format!("trim must be 0 or 1, got '{value}'")),
            },
            "align" => match value {
                "0" => self.align_blocks = Some(false),
                "1" => self.align_blocks = Some(true),
                _ => return Err(format!("align must be 0 or 1, got '{value}'")),
            },
            "warmauto" => match value {
                "0" => self.warm_automatic = Some(false),
                "1" => self.warm_automatic = Some(true),
                _ => return Err(format!("warmauto must be 0 or 1, got '{value}'")),
            },
            "flush" => match value {
                "buffered" | "direct" | "auto" => self.flush_mode = Some(value.to_string()),
                _ => {
                    return Err(format!(
                        "flush must be buffered, direct or auto, got '{value}'"
                    ))
                }
            },
            "small" => match number("small (percent)")? {
                n @ 0..=90 => self.small_database_percent = Some(n as u8),
                n => return Err(format!("small must be 0..=90 percent, got {n}")),
            },
            "wb" => match number("wb (KiB)")? {
                n @ 0..=1_048_576 => self.writeback_kib = Some(n as u64),
                n => return Err(format!("wb must be 0..=1048576 KiB, got {n}")),
            },
            "l0" => {
                let pair = value
                    .split_once('/')
                    .and_then(|(s, t)| Some((s.parse::<usize>().ok()?, t.parse::<usize>().ok()?)));
                let compaction = Options::default().l0_compaction_trigger;
                match pair {
                    Some((s, t)) if compaction <= s && s <= t => {
                        self.l0_stall_triggers = Some((s, t))
                    }
                    _ => {
                        return Err(format!(
                            "l0 must be SLOWDOWN/STOP L0 tables with {compaction} <= SLOWDOWN <= STOP, got '{value}'"
                        ))
                    }
                }
            }
            other => {
                return Err(format!(
                    "unknown knob '{other}' (expected depth, wbuf, ra, nice, yield, pick, l0, wb, slice, bgdepth, warmauto, warmwin, flush, small, hits, trim, align or ks)"
                ))
            }
        }
        Ok(())
    }

    fn apply(&self, o: &mut Options) {
        if let Some(d) = self.io_depth {
            o.io_depth = d;
        }
        if let Some(k) = self.direct_write_kib {
            o.direct_write_buffer_size = k << 10;
        }
        if let Some(k) = self.readahead_kib {
            o.compaction_readahead_size = k << 10;
        }
        if let Some(n) = self.background_nice {
            o.background_nice = n;
        }
        if let Some(n) = self.background_yield_micros {
            o.background_yield_micros = n;
        }
        if let Some(p) = self
            .compaction_priority
            .as_deref()
            .and_then(compaction_priority)
        {
            o.compaction_priority = p;
        }
        if let Some(k) = self.writeback_kib {
            o.writeback_chunk_size = k << 10;
        }
        if let Some((slowdown, stop)) = self.l0_stall_triggers {
            o.l0_slowdown_trigger = slowdown;
            o.l0_stop_trigger = stop;
        }
        if let Some(m) = self.slice_mib {
            o.max_compaction_bytes = m << 20;
        }
        if let Some(d) = self.background_io_depth {
            o.background_io_depth = d;
        }
        if let Some(w) = self.warm_automatic {
            o.warm_automatic_compactions = w;
        }
        if let Some(k) = self.warm_window_kib {
            o.warm_window_bytes = k << 10;
        }
        if let Some(p) = self.small_database_percent {
            o.small_database_share = f64::from(p) / 100.0;
        }
        if let Some(h) = self.attribute_cache_hits {
            o.attribute_cache_hits = h;
        }
        if let Some(t) = self.release_heap {
            o.release_heap_after_jobs = t;
        }
        if let Some(a) = self.align_blocks {
            o.align_blocks = a;
        }
    }

    /// What the report should say these knobs change.
    fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(d) = self.io_depth {
            v.push(format!("io_depth {d}"));
        }
        if let Some(k) = self.direct_write_kib {
            v.push(format!("direct_write_buffer_size {k} KiB"));
        }
        if let Some(k) = self.readahead_kib {
            v.push(format!("compaction_readahead_size {k} KiB"));
        }
        if let Some(n) = self.background_nice {
            v.push(format!("background_nice {n}"));
        }
        if let Some(n) = self.background_yield_micros {
            v.push(format!("background_yield_micros {n}"));
        }
        if let Some(p) = self
            .compaction_priority
            .as_deref()
            .and_then(compaction_priority)
        {
            v.push(format!("compaction_priority {p:?}"));
        }
        if let Some(k) = self.writeback_kib {
            v.push(format!("writeback_chunk_size {k} KiB"));
        }
        if let Some((slowdown, stop)) = self.l0_stall_triggers {
            v.push(format!("L0 slowdown at {slowdown} tables, stop at {stop}"));
        }
        if let Some(m) = self.slice_mib {
            v.push(format!("max_compaction_bytes {m} MiB"));
        }
        if let Some(d) = self.background_io_depth {
            v.push(format!("background_io_depth {d}"));
        }
        if let Some(k) = self.warm_window_kib {
            v.push(format!("warm_window_bytes {k} KiB"));
        }
        if let Some(p) = self.small_database_percent {
            v.push(format!("small_database_share {p}%"));
        }
        if let Some(w) = self.warm_automatic {
            v.push(format!(
                "warm_automatic_compactions {}",
                if w { "on" } else { "off" }
            ));
        }
        if let Some(h) = self.attribute_cache_hits {
            v.push(format!(
                "attribute_cache_hits {}",
                if h { "on" } else { "off" }
            ));
        }
        if let Some(t) = self.release_heap {
            v.push(format!(
                "release_heap_after_jobs {}",
                if t { "on" } else { "off" }
            ));
        }
        if let Some(a) = self.align_blocks {
            v.push(format!("align_blocks {}", if a { "on" } else { "off" }));
        }
        let n = self.spread_keyspaces();
        if n > 1 {
            v.push(format!(
                "{n} keyspaces by key range (the default + {}), each with a memtable of 1/{n} of the run's memtable budget",
                n - 1
            ));
        }
        v
    }

    /// Keyspaces the keys are spread over (1: the default keyspace alone).
    pub fn spread_keyspaces(&self) -> usize {
        self.keyspaces.unwrap_or(1)
    }
}

impl QuietkvConfig {
    /// `buffered`, `direct` (= `both-direct`), `dontcache`, `fadvise`,
    /// `write-direct`, `read-direct`, `both-direct`, `all-direct`, and
    /// `auto`: the engine's own defaults (every class `Auto`: compaction
    /// and flush direct where the probe allows, WAL and user reads buffered),
    /// what a user gets without configuring anything.
    /// Warming of compaction output is the engine's default in `auto`
    /// (on) and off in the named configurations; a `+warm` or `+nowarm`
    /// suffix (`both-direct+warm`, `auto+nowarm`) says otherwise.
    /// `+key=value` suffixes set [`QuietkvKnobs`]
    /// (`both-direct+depth=8+wbuf=2048`).
    pub fn parse(name: &str) -> Result<QuietkvConfig, String> {
        let n = name.trim().to_ascii_lowercase();
        let mut parts = n.split('+');
        let base = parts.next().unwrap_or_default();
        let mut warm = None;
        let mut knobs = QuietkvKnobs::default();
        for token in parts {
            match token {
                "warm" => warm = Some(true),
                "nowarm" => warm = Some(false),
                t => knobs.set(t).map_err(|e| format!("mode '{name}': {e}"))?,
            }
        }
        let warm_output =
            warm.unwrap_or(base == "auto" && Options::default().warm_compaction_output);
        let (u, r, w, f) = match base {
            "buffered" => ("buffered", "buffered", "buffered", "buffered"),
            "direct" | "both-direct" => ("buffered", "direct", "direct", "direct"),
            "dontcache" => ("buffered", "dontcache", "dontcache", "dontcache"),
            "fadvise" => ("buffered", "fadvise", "fadvise", "fadvise"),
            "write-direct" => ("buffered", "buffered", "direct", "direct"),
            "read-direct" => ("buffered", "direct", "buffered", "buffered"),
            "all-direct" => ("direct", "direct", "direct", "direct"),
            "auto" => ("auto", "auto", "auto", "auto"),
            _ => {
                return Err(format!(
                    "unknown mode '{name}' (expected buffered, direct, dontcache, fadvise, write-direct, read-direct, both-direct, all-direct or auto, optionally with +warm, +nowarm and +key=value knobs)"
                ))
            }
        };
        // `+flush=MODE` replaces the base mode's choice for flushes.
        let f = knobs.flush_mode.clone().unwrap_or_else(|| f.to_string());
        Ok(QuietkvConfig {
            name: n.clone(),
            user_read: u.into(),
            compaction_read: r.into(),
            compaction_write: w.into(),
            flush_write: f,
            wal_write: if base == "auto" { "auto" } else { "buffered" }.into(),
            warm_output,
            wal_sync: None,
            wal_compression: None,
            wal_recycle_count: None,
            knobs,
        })
    }

    /// The throughput experiment's configurations: `mode` for compaction
    /// reads and writes, every other class left to the engine (`auto`).
    pub fn compaction_only(mode: AccessMode) -> QuietkvConfig {
        QuietkvConfig {
            name: mode.name().to_string(),
            user_read: "auto".into(),
            compaction_read: mode.name().into(),
            compaction_write: mode.name().into(),
            flush_write: "auto".into(),
            wal_write: "auto".into(),
            warm_output: false,
            wal_sync: None,
            wal_compression: None,
            wal_recycle_count: None,
            knobs: QuietkvKnobs::default(),
        }
    }

    /// A write-ahead-log configuration (experiment E4): the WAL (and
    /// manifest) in `mode`, with a sync policy and record compression;
    /// every other class left to the engine.
    pub fn wal(
        name: &str,
        mode: AccessMode,
        sync: &str,
        compression: &str,
    ) -> Result<QuietkvConfig, String> {
        sync.parse::<quietkv::WalSync>()
            .map_err(|e| e.to_string())?;
        parse_compression(compression)?;
        Ok(QuietkvConfig {
            name: name.to_string(),
            user_read: "auto".into(),
            compaction_read: "auto".into(),
            compaction_write: "auto".into(),
            flush_write: "auto".into(),
            wal_write: mode.name().into(),
            warm_output: false,
            wal_sync: Some(sync.to_string()),
            wal_compression: Some(compression.to_string()),
            wal_recycle_count: None,
            knobs: QuietkvKnobs::default(),
        })
    }

    /// [`QuietkvConfig::compaction_only`] of an access mode's name
    /// (`buffered`, `direct`, `dontcache`, `fadvise`, `auto`).
    /// `+key=value` suffixes set [`QuietkvKnobs`] as in [`QuietkvConfig::parse`].
    pub fn parse_compaction_only(name: &str) -> Result<QuietkvConfig, String> {
        let n = name.trim().to_ascii_lowercase();
        let mut parts = n.split('+');
        let base = parts.next().unwrap_or_default();
        let mut c = base
            .parse::<AccessMode>()
            .map(QuietkvConfig::compaction_only)
            .map_err(|e| e.to_string())?;
        for token in parts {
            c.knobs
                .set(token)
                .map_err(|e| format!("mode '{name}': {e}"))?;
        }
        c.name = n;
        Ok(c)
    }

    /// The requested access mode of `class` in this configuration.
    pub fn access(&self, class: IoClass) -> AccessMode {
        let s = match class {
            IoClass::UserRead => &self.user_read,
            IoClass::CompactionRead => &self.compaction_read,
            IoClass::CompactionWrite => &self.compaction_write,
            IoClass::FlushWrite => &self.flush_write,
            IoClass::WalWrite | IoClass::Manifest => &self.wal_write,
            // The benchmark takes no checkpoints; a copy would be
            // background work like compaction output, so it follows it.
            IoClass::Backup => &self.compaction_write,
        };
        match s.parse().unwrap_or(AccessMode::Buffered) {
            // Only the WAL can be written through a mapping; the manifest
            // that shares its setting is then written buffered.
            AccessMode::Mmap if class == IoClass::Manifest => AccessMode::Buffered,
            m => m,
        }
    }

    /// [`EngineConfig::page_cache`] with `resolve` saying what a class left
    /// to `auto` becomes (from the directory's probe).
    pub fn page_cache_with(
        &self,
        resolve: &dyn Fn(IoClass, AccessMode) -> Option<quietio::EffectiveMode>,
    ) -> PageCacheUse {
        let direction = |class: IoClass| {
            let requested = self.access(class);
            let effective = resolve(class, requested);
            let effect = match effective {
                Some(e) => effect_of(e),
                None => match requested {
                    AccessMode::Buffered | AccessMode::Mmap => CacheUse::Cached,
                    AccessMode::Direct => CacheUse::Bypassed,
                    AccessMode::DontCache | AccessMode::Fadvise => CacheUse::DroppedAfterUse,
                    _ => CacheUse::Unknown,
                },
            };
            let small_share = self
                .knobs
                .small_database_percent
                .map_or(Options::default().small_database_share, |p| {
                    f64::from(p) / 100.0
                });
            let writes_tables = matches!(class, IoClass::CompactionWrite | IoClass::FlushWrite);
            let label = match (requested, effective) {
                (AccessMode::Auto, Some(e))
                    if writes_tables
                        && small_share > 0.0
                        && !matches!(e, quietio::EffectiveMode::Buffered) =>
                {
                    format!(
                        "auto ({} here; buffered while the tables fit in {:.0}% of the memory)",
                        e.name(),
                        small_share * 100.0
                    )
                }
                (AccessMode::Auto, Some(e)) => format!("auto ({} here)", e.name()),
                _ => requested.name().to_string(),
            };
            Direction { effect, label }
        };
        PageCacheUse {
            compaction_reads: direction(IoClass::CompactionRead),
            compaction_writes: direction(IoClass::CompactionWrite),
            flush_writes: direction(IoClass::FlushWrite),
            user_reads: direction(IoClass::UserRead),
            also: {
                let mut also = self.knobs.describe();
                let default_warm = Options::default().warm_compaction_output;
                if self.warm_output {
                    also.insert(0, "warm_compaction_output on".into());
                } else if self.compaction_read == "auto" && default_warm {
                    also.insert(0, "warm_compaction_output off".into());
                }
                also
            },
            engine_defaults: self.compaction_read == "auto"
                && self.warm_output == Options::default().warm_compaction_output,
        }
    }

    fn options(&self) -> Options {
        let mut o = Options::default();
        for c in IoClass::ALL {
            o = o.io_mode(c, self.access(c));
        }
        o.warm_compaction_output = self.warm_output;
        self.knobs.apply(&mut o);
        if let Some(p) = self.wal_sync.as_deref().and_then(|s| s.parse().ok()) {
            o.wal_sync = p;
        }
        if let Some(c) = self
            .wal_compression
            .as_deref()
            .and_then(|s| parse_compression(s).ok())
        {
            o.wal_compression = c;
        }
        if let Some(n) = self.wal_recycle_count {
            o.wal_recycle_count = n;
        }
        o
    }
}

fn parse_compression(name: &str) -> Result<quietkv::Compression, String> {
    match name {
        "none" => Ok(quietkv::Compression::None),
        "lz4" => Ok(quietkv::Compression::Lz4),
        "zstd" => Ok(quietkv::Compression::Zstd),
        other => Err(format!("unknown compression '{other}' (none, lz4 or zstd)")),
    }
}

fn effect_of(m: quietio::EffectiveMode) -> CacheUse {
    use quietio::EffectiveMode as E;
    match m {
        E::Buffered | E::Mmap => CacheUse::Cached,
        E::Direct => CacheUse::Bypassed,
        E::DontCache | E::Fadvise => CacheUse::DroppedAfterUse,
    }
}

impl EngineConfig for QuietkvConfig {
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&self, dir: &Path) -> Result<(), String> {
        let env =
            quietio::IoEnv::open(dir, quietio::IoOptions::default()).map_err(|e| e.to_string())?;
        for class in [
            IoClass::UserRead,
            IoClass::CompactionRead,
            IoClass::CompactionWrite,
            IoClass::FlushWrite,
            IoClass::WalWrite,
            IoClass::Backup,
        ] {
            env.resolve_explicit(class, self.access(class))
                .map_err(|e| format!("mode {}: {e}", self.name))?;
        }
        Ok(())
    }

    fn page_cache(&self, dir: &Path) -> PageCacheUse {
        let env = quietio::IoEnv::open(dir, quietio::IoOptions::default()).ok();
        self.page_cache_with(&|c, m| env.as_ref()?.resolve_explicit(c, m).ok())
    }

    fn keyspaces(&self) -> usize {
        self.knobs.spread_keyspaces()
    }
}

/// A quietkv database under test.
pub struct QuietkvEngine {
    db: Db,
    /// `+ks=N` with N > 1: the keyspaces the keys are spread over. `None`
    /// (N = 1): every call goes to the default keyspace through `Db`'s own
    /// methods, as before keyspaces were measured.
    spread: Option<Spread>,
}

impl QuietkvEngine {
    /// The open database, for the tests of this seam.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

fn class(s: &DbStats, c: IoClass) -> quietio::ClassStats {
    s.io.iter()
        .find(|(k, _)| *k == c)
        .map(|(_, v)| *v)
        .unwrap_or_default()
}

fn err(e: quietkv::Error) -> String {
    e.to_string()
}

impl BenchEngine for QuietkvEngine {
    type Config = QuietkvConfig;
    const NAME: &'static str = "quietkv";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    /// 32 MiB tables and no compression (values are incompressible filler);
    /// the rest as the engine's defaults.
    fn bench_layout() -> Layout {
        let o = Options::default();
        let target_file_size = 32 << 20;
        Layout {
            block_size: o.block_size,
            target_file_size,
            level_base_bytes: o.level_base_bytes,
            bloom_bits_per_key: o.bloom_bits_per_key,
            compression: "none".into(),
            // RocksDB's default ratio, 25 target files: 800 MiB.
            max_compaction_bytes: 25 * target_file_size,
        }
    }

    fn source_config() -> QuietkvConfig {
        QuietkvConfig::parse("buffered").expect("a known mode")
    }

    fn source_config_for(config: &QuietkvConfig) -> QuietkvConfig {
        match config.knobs.spread_keyspaces() {
            1 => Self::source_config(),
            n => QuietkvConfig::parse(&format!("buffered+ks={n}")).expect("a known mode"),
        }
    }

    fn open(dir: &Path, config: &QuietkvConfig, tuning: &Tuning) -> Result<Self, String> {
        let mut o = config.options();
        if let Some(l) = &tuning.layout {
            o.block_size = l.block_size;
            o.target_file_size = l.target_file_size;
            o.level_base_bytes = l.level_base_bytes;
            o.bloom_bits_per_key = l.bloom_bits_per_key;
            if config.knobs.slice_mib.is_none() && l.max_compaction_bytes > 0 {
                o.max_compaction_bytes = l.max_compaction_bytes;
            }
            o.compression = match l.compression.as_str() {
                "none" => quietkv::Compression::None,
                other => return Err(format!("quietkv: unsupported compression '{other}'")),
            };
        }
        o.create_if_missing = tuning.create;
        if let Some(n) = tuning.background_threads {
            o.background_threads = n;
        }
        o.background_rate_limit_mib = tuning.background_rate_limit_mib;
        if let Some(b) = tuning.block_cache_bytes {
            o.block_cache_bytes = b;
        }
        if let Some(m) = tuning.memtable_bytes {
            o.memtable_size = m.max(4096);
        }
        let keyspaces = config.knobs.spread_keyspaces();
        // Checked before the database is opened (or created).
        let parts = if keyspaces > 1 {
            let span = tuning.key_span.ok_or_else(|| {
                format!(
                    "mode {}: this experiment does not say over which key numbers its keys lie, so it cannot spread them over {keyspaces} keyspaces",
                    config.name
                )
            })?;
            // A memtable per keyspace: N of them hold as much as one did.
            o.memtable_size = (o.memtable_size / keyspaces).max(4096);
            Some(KeyParts::new(keyspaces, span).map_err(|e| format!("mode {}: {e}", config.name))?)
        } else {
            None
        };
        // User reads count page-cache hits where the experiment reports
        // them, unless the mode says otherwise (`+hits=0|1`).
        o.attribute_cache_hits = config
            .knobs
            .attribute_cache_hits
            .unwrap_or(tuning.count_page_cache_hits);
        let db = Db::open(dir, o)
            .map_err(|e| format!("cannot open the database in {}: {e}", dir.display()))?;
        let spread = match parts {
            Some(parts) => Some(
                Spread::open(&db, parts, tuning.create)
                    .map_err(|e| format!("database in {}: {e}", dir.display()))?,
            ),
            None => None,
        };
        Ok(QuietkvEngine { db, spread })
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        if let Some(s) = &self.spread {
            return s.get(key);
        }
        self.db.get(key).map_err(err)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        if let Some(s) = &self.spread {
            return s.put(key, value);
        }
        self.db.put(key, value).map_err(err)
    }

    fn put_batch(&self, batch: &Batch) -> Result<(), String> {
        if let Some(s) = &self.spread {
            return s.put_batch(&self.db, batch);
        }
        let mut b = WriteBatch::new();
        for (k, v) in batch.iter() {
            b.put(k, v).map_err(err)?;
        }
        self.db
            .write(b, WriteOptions::default())
            .map_err(|e| format!("write failed: {e}"))
    }

    /// A range iterator from `from`, read with borrowed entries (no copy
    /// per entry, as a user who only looks at the bytes would read them).
    fn seek_scan(&self, from: &[u8], n: usize) -> Result<usize, String> {
        if let Some(s) = &self.spread {
            return s.seek_scan(from, n);
        }
        super::quietkv_spread::read_up_to(&mut self.db.range(from..).map_err(err)?, n)
    }

    fn scan_all(&self, reverse: bool) -> Result<ScanCount, String> {
        if let Some(s) = &self.spread {
            return s.scan_all(reverse);
        }
        let mut c = ScanCount::default();
        super::quietkv_spread::scan_into(&mut self.db.iter().map_err(err)?, reverse, &mut c)
            .map_err(|e| format!("full scan: {e}"))?;
        Ok(c)
    }

    fn flush(&self) -> Result<(), String> {
        if let Some(s) = &self.spread {
            return s.flush();
        }
        self.db.flush().map_err(err)
    }

    fn compact_all(&self) -> Result<(), String> {
        if let Some(s) = &self.spread {
            return s.compact_all();
        }
        self.db.compact_all().map_err(err)
    }

    fn wait_idle(&self) -> Result<(), String> {
        self.db.wait_idle().map_err(err)
    }

    /// Compaction and flush bytes as quietio's I/O classes counted them
    /// (what went through the files, whatever the mode). quietkv keeps
    /// every one of these counters per database, whichever keyspace did
    /// the work, so with `+ks=N` they are already the sum over the
    /// keyspaces.
    fn counters(&self) -> Counters {
        let s = self.db.stats();
        let u = class(&s, IoClass::UserRead);
        Counters {
            compaction_read_bytes: class(&s, IoClass::CompactionRead).read_bytes,
            compaction_write_bytes: class(&s, IoClass::CompactionWrite).write_bytes,
            flush_write_bytes: class(&s, IoClass::FlushWrite).write_bytes,
            compaction_seconds: s.compaction.seconds,
            flush_seconds: s.flush_seconds,
            compactions: s.compaction.count,
            compactions_running: s.compaction.running as u64,
            user_write_bytes: s.write_bytes,
            write_stall_seconds: Some(s.stalls.stall_seconds),
            warmed_bytes: s.compaction.warmed_bytes,
            user_read_page_cache: Some(HitsMisses {
                hits: u.cache_hits,
                misses: u.cache_misses,
            }),
            block_cache: Some(HitsMisses {
                hits: s.block_cache.hits,
                misses: s.block_cache.misses,
            }),
            background_cpu_seconds: Some(s.compaction.cpu_seconds + s.flush_cpu_seconds),
            table_opens_by_reads: Some(s.tables_opened_by_reads),
            compaction_into_levels: Some(
                s.levels
                    .iter()
                    .map(|l| {
                        let c = &l.compaction_into;
                        LevelWork {
                            read_from_above_bytes: c.read_from_above_bytes,
                            read_from_level_bytes: c.read_from_level_bytes,
                            written_bytes: c.written_bytes,
                            moved_bytes: c.moved_bytes,
                        }
                    })
                    .collect(),
            ),
            get_times: None,
            full_compaction_slices: Some(s.compaction.manual_slices),
            full_compaction_peak_extra_bytes: Some(s.compaction.manual_peak_extra_bytes),
            // The open tables' indexes and filters are reserved against
            // the block cache's budget, so the cache knows their bytes;
            // without a cache nothing counts them.
            memory: Some(EngineMemory {
                block_cache_bytes: Some(s.block_cache.usage),
                block_cache_pinned_bytes: None,
                memtable_bytes: Some(s.all_memtables_bytes),
                table_readers_bytes: (s.block_cache.capacity > 0).then_some(s.block_cache.pinned),
            }),
            l0_tables: match &self.spread {
                Some(sp) => sp.l0_tables().ok(),
                None => Some(s.levels[0].files as u64),
            },
        }
    }

    fn close(self) -> Result<(), String> {
        self.db.close().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_described_by_what_it_resolved_to() {
        // As on a filesystem where direct I/O works.
        let probe = |c: IoClass, m: AccessMode| {
            (m == AccessMode::Auto).then_some(
                if matches!(
                    c,
                    IoClass::CompactionRead | IoClass::CompactionWrite | IoClass::FlushWrite
                ) {
                    quietio::EffectiveMode::Direct
                } else {
                    quietio::EffectiveMode::Buffered
                },
            )
        };
        let auto = QuietkvConfig::parse("auto")
            .unwrap()
            .page_cache_with(&probe);
        assert_eq!(
            auto.describe(),
            "compaction read auto (direct here) / compaction+flush write auto (direct here; buffered while the tables fit in 25% of the memory) / user read auto (buffered here)"
        );
        let never_small = QuietkvConfig::parse("auto+small=0")
            .unwrap()
            .page_cache_with(&probe);
        assert_eq!(
            never_small.describe(),
            "compaction read auto (direct here) / compaction+flush write auto (direct here) / user read auto (buffered here)"
        );
        assert_eq!(auto.compaction_reads.effect, CacheUse::Bypassed);
        assert_eq!(auto.user_reads.effect, CacheUse::Cached);
        assert!(auto.engine_defaults);
        let wd = QuietkvConfig::parse("write-direct")
            .unwrap()
            .page_cache_with(&probe);
        assert_eq!(
            wd.describe(),
            "compaction read buffered / compaction+flush write direct / user read buffered"
        );
        assert_eq!(wd.compaction_writes.effect, CacheUse::Bypassed);
        assert_eq!(wd.compaction_reads.effect, CacheUse::Cached);
        let dc = QuietkvConfig::parse("dontcache")
            .unwrap()
            .page_cache_with(&|_, _| None);
        assert_eq!(dc.compaction_reads.effect, CacheUse::DroppedAfterUse);
        assert_eq!(
            QuietkvConfig::parse("auto")
                .unwrap()
                .page_cache_with(&|_, _| None)
                .compaction_reads
                .effect,
            CacheUse::Unknown
        );
    }

    #[test]
    fn modes_map_to_classes() {
        let m = QuietkvConfig::parse("write-direct").unwrap();
        assert_eq!(m.access(IoClass::CompactionWrite), AccessMode::Direct);
        assert_eq!(m.access(IoClass::CompactionRead), AccessMode::Buffered);
        assert_eq!(m.access(IoClass::UserRead), AccessMode::Buffered);
        let m = QuietkvConfig::parse("DontCache").unwrap();
        assert_eq!(m.name, "dontcache");
        assert_eq!(m.access(IoClass::CompactionRead), AccessMode::DontCache);
        assert_eq!(
            QuietkvConfig::parse("all-direct")
                .unwrap()
                .access(IoClass::UserRead),
            AccessMode::Direct
        );
        let m = QuietkvConfig::parse("both-direct+warm").unwrap();
        assert!(m.warm_output);
        assert_eq!(m.name, "both-direct+warm");
        assert_eq!(m.access(IoClass::CompactionWrite), AccessMode::Direct);
        assert!(!QuietkvConfig::parse("both-direct").unwrap().warm_output);
        // auto is what a user gets: the engine's default, which warms.
        assert!(QuietkvConfig::parse("auto").unwrap().warm_output);
        assert!(
            QuietkvConfig::parse("auto")
                .unwrap()
                .options()
                .warm_compaction_output
        );
        assert!(!QuietkvConfig::parse("auto+nowarm").unwrap().warm_output);
        assert!(
            !QuietkvConfig::parse("auto+nowarm")
                .unwrap()
                .options()
                .warm_compaction_output
        );
        assert!(QuietkvConfig::parse("turbo+warm").is_err());
        // auto: every class left to the engine, as `Options::default()`.
        let m = QuietkvConfig::parse("auto").unwrap();
        for c in IoClass::ALL {
            assert_eq!(m.access(c), AccessMode::Auto, "{c}");
        }
        assert_eq!(
            QuietkvConfig::parse("write-direct")
                .unwrap()
                .access(IoClass::WalWrite),
            AccessMode::Buffered
        );
        assert!(QuietkvConfig::parse("turbo")
            .unwrap_err()
            .contains("unknown mode"));
    }

    #[test]
    fn knob_suffixes_set_engine_options() {
        let m = QuietkvConfig::parse("both-direct+depth=8+wbuf=2048+warm+ra=4096+nice=10+yield=0")
            .unwrap();
        assert_eq!(
            m.name,
            "both-direct+depth=8+wbuf=2048+warm+ra=4096+nice=10+yield=0"
        );
        assert!(m.warm_output);
        let o = m.options();
        assert_eq!(o.io_depth, 8);
        assert_eq!(o.direct_write_buffer_size, 2 << 20);
        assert_eq!(o.compaction_readahead_size, 4 << 20);
        assert_eq!(o.background_nice, 10);
        assert_eq!(o.background_yield_micros, 0);
        let d = Options::default();
        let plain = QuietkvConfig::parse("both-direct").unwrap().options();
        assert_eq!(plain.io_depth, d.io_depth);
        assert_eq!(plain.direct_write_buffer_size, d.direct_write_buffer_size);
        assert_eq!(plain.background_nice, d.background_nice);
        assert_eq!(plain.compaction_priority, d.compaction_priority);
        let rr = QuietkvConfig::parse("auto+pick=rr").unwrap();
        assert_eq!(
            rr.options().compaction_priority,
            CompactionPriority::RoundRobin
        );
        let described = rr.page_cache_with(&|_, _| None).also;
        assert!(
            described
                .iter()
                .any(|a| a == "compaction_priority RoundRobin"),
            "{described:?}"
        );
        assert_eq!(
            QuietkvConfig::parse("auto+pick=min")
                .unwrap()
                .options()
                .compaction_priority,
            CompactionPriority::MinOverlappingRatio
        );
        let late = QuietkvConfig::parse("auto+l0=20/36").unwrap().options();
        assert_eq!((late.l0_slowdown_trigger, late.l0_stop_trigger), (20, 36));
        assert_eq!(plain.l0_slowdown_trigger, d.l0_slowdown_trigger);
        let ww = QuietkvConfig::parse("auto+warmwin=512").unwrap().options();
        assert_eq!(ww.warm_window_bytes, 512 << 10);
        assert_eq!(plain.warm_window_bytes, d.warm_window_bytes);
        assert!(QuietkvConfig::parse("auto+warmwin=2").is_err());
        let wb = QuietkvConfig::parse("auto+wb=0").unwrap().options();
        assert_eq!(wb.writeback_chunk_size, 0);
        assert_eq!(plain.writeback_chunk_size, d.writeback_chunk_size);
        let uncounted = QuietkvConfig::parse("auto+hits=0").unwrap();
        assert!(!uncounted.options().attribute_cache_hits);
        assert_eq!(uncounted.knobs.attribute_cache_hits, Some(false));
        assert!(
            QuietkvConfig::parse("auto+hits=1")
                .unwrap()
                .options()
                .attribute_cache_hits
        );
        assert_eq!(plain.attribute_cache_hits, d.attribute_cache_hits);
        let also = uncounted.page_cache_with(&|_, _| None).also;
        assert!(
            also.iter().any(|a| a == "attribute_cache_hits off"),
            "{also:?}"
        );
        let kept = QuietkvConfig::parse("auto+trim=0").unwrap();
        assert!(!kept.options().release_heap_after_jobs);
        assert!(d.release_heap_after_jobs);
        assert!(plain.release_heap_after_jobs);
        assert!(
            kept.page_cache_with(&|_, _| None)
                .also
                .iter()
                .any(|a| a == "release_heap_after_jobs off"),
            "{:?}",
            kept.page_cache_with(&|_, _| None).also
        );
        let unaligned = QuietkvConfig::parse("auto+align=0").unwrap();
        assert!(!unaligned.options().align_blocks);
        assert!(plain.align_blocks);
        assert!(unaligned
            .page_cache_with(&|_, _| None)
            .also
            .iter()
            .any(|a| a == "align_blocks off"));
        for bad in [
            "auto+align=2",
            "auto+hits=2",
            "auto+trim=yes",
            "auto+l0=20",
            "auto+wb=-1",
            "auto+l0=36/20",
            "auto+l0=1/2",
            "auto+l0=a/b",
            "auto+pick=oldest",
            "both-direct+depth=0",
            "both-direct+depth=x",
            "both-direct+nice=20",
            "both-direct+yield=-1",
            "both-direct+turbo=1",
            "both-direct+depth",
        ] {
            assert!(QuietkvConfig::parse(bad).is_err(), "{bad}");
        }
        let t = QuietkvConfig::parse_compaction_only("direct+depth=16").unwrap();
        assert_eq!(
            (t.name.as_str(), t.options().io_depth),
            ("direct+depth=16", 16)
        );
        assert!(QuietkvConfig::parse_compaction_only("direct+depth=-1").is_err());
        let described = m.page_cache_with(&|_, _| None).also;
        assert!(described.iter().any(|a| a == "io_depth 8"), "{described:?}");
    }

    #[test]
    fn ks_spreads_the_keys_and_one_keyspace_is_the_default() {
        let m = QuietkvConfig::parse("auto+ks=4").unwrap();
        assert_eq!(m.name, "auto+ks=4");
        assert_eq!(m.knobs.keyspaces, Some(4));
        assert_eq!(m.keyspaces(), 4);
        let also = m.page_cache_with(&|_, _| None).also;
        assert!(
            also.iter()
                .any(|a| a.starts_with("4 keyspaces by key range")),
            "{also:?}"
        );
        // The knob changes no engine option by itself (the memtable is
        // divided at open, where the run's budget is known).
        assert_eq!(
            format!("{:?}", m.options()),
            format!("{:?}", QuietkvConfig::parse("auto").unwrap().options())
        );
        let plain = QuietkvConfig::parse("auto").unwrap();
        assert_eq!((plain.knobs.keyspaces, plain.keyspaces()), (None, 1));
        assert_eq!(QuietkvConfig::parse("auto+ks=1").unwrap().keyspaces(), 1);
        for bad in ["auto+ks=0", "auto+ks=65", "auto+ks=x", "auto+ks=-2"] {
            assert!(QuietkvConfig::parse(bad).is_err(), "{bad}");
        }
        // A source for a spread run is spread the same way.
        let s = QuietkvEngine::source_config_for(&m);
        assert_eq!((s.name.as_str(), s.keyspaces()), ("buffered+ks=4", 4));
        assert_eq!(
            QuietkvEngine::source_config_for(&plain),
            QuietkvEngine::source_config()
        );
    }

    /// User reads are counted as page-cache hits or misses where the
    /// experiment asks for the count, and as the mode's `+hits=0|1` says
    /// over that.
    #[test]
    fn user_reads_are_counted_where_asked_and_as_the_hits_knob_says() {
        let dir = tempfile::tempdir().unwrap();
        let attributed = |name: &str, count: bool| {
            let config = QuietkvConfig::parse(name).unwrap();
            let tuning = Tuning {
                count_page_cache_hits: count,
                ..Tuning::engine_defaults()
            };
            let db = QuietkvEngine::open(
                &dir.path().join(format!("{name}-{count}")),
                &config,
                &tuning,
            )
            .unwrap();
            for k in 0..200u64 {
                db.put(&crate::keys::key(k), &[7u8; 100]).unwrap();
            }
            db.flush().unwrap();
            for k in 0..200u64 {
                assert!(db.get(&crate::keys::key(k)).unwrap().is_some(), "{k}");
            }
            let c = db.counters().user_read_page_cache.unwrap();
            c.hits + c.misses
        };
        assert!(attributed("buffered", true) > 0);
        assert_eq!(attributed("buffered+hits=0", true), 0);
        assert_eq!(attributed("buffered", false), 0);
        assert!(attributed("buffered+hits=1", false) > 0);
    }

    /// Keys written over four keyspaces (batches that straddle their
    /// bounds, part in tables and part in memtables) are each in the
    /// keyspace of their part, and seeks and full scans read as a model
    /// holding the same writes does, across the bounds.
    #[test]
    fn four_keyspaces_hold_their_parts_and_read_across_them() {
        use std::collections::BTreeMap;
        let dir = tempfile::tempdir().unwrap();
        let config = QuietkvConfig::parse("auto+ks=4").unwrap();
        let e = QuietkvEngine::open(
            &dir.path().join("nospan"),
            &config,
            &Tuning::engine_defaults(),
        )
        .err()
        .expect("no key span, no spread");
        assert!(e.contains("cannot spread them over 4 keyspaces"), "{e}");
        let tuning = Tuning {
            key_span: Some(1000),
            memtable_bytes: Some(64 << 10),
            ..Tuning::engine_defaults()
        };
        let db = QuietkvEngine::open(&dir.path().join("db"), &config, &tuning).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let numbers: Vec<u64> = (0..1000).step_by(3).collect();
        let mut batch = Batch::new();
        for round in 0..2 {
            for chunk in numbers.chunks(37) {
                batch.clear();
                for &k in chunk {
                    let v = format!("v{round}-{k}").into_bytes();
                    batch.put(&crate::keys::key(k), &v);
                    model.insert(crate::keys::key(k).to_vec(), v);
                }
                db.put_batch(&batch).unwrap();
            }
            if round == 0 {
                db.flush().unwrap();
            }
            db.put(&crate::keys::key(500), b"single").unwrap();
            model.insert(crate::keys::key(500).to_vec(), b"single".to_vec());
        }
        let parts = KeyParts::new(4, 1000).unwrap();
        let names = db.db().keyspace_names();
        assert_eq!(names, parts.keyspace_names());
        for (i, name) in names.iter().enumerate() {
            let ks = db
                .db()
                .keyspace(name, quietkv::KeyspaceOptions::default())
                .unwrap();
            let mut it = ks.iter().unwrap();
            let mut n = 0;
            while let Some(e) = it.next_ref() {
                let (k, _) = e.unwrap();
                assert_eq!(parts.part_of(k), i, "{k:?} in {name}");
                n += 1;
            }
            assert!((70..=100).contains(&n), "{name}: {n} keys");
        }
        let check = |db: &QuietkvEngine| {
            for (k, v) in &model {
                assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{k:?}");
            }
            assert_eq!(db.get(&crate::keys::key(1)).unwrap(), None);
            for from in (0..1010)
                .step_by(7)
                .chain([249, 250, 251, 499, 500, 749, 750])
            {
                let from = crate::keys::key(from);
                for n in [1, 11, 100, 400] {
                    let want = model.range(from.to_vec()..).take(n).count();
                    assert_eq!(db.seek_scan(&from, n).unwrap(), want, "{from:?}, {n}");
                }
            }
            let bytes: u64 = model.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
            let want = ScanCount {
                entries: model.len() as u64,
                bytes,
            };
            assert_eq!(db.scan_all(false).unwrap(), want);
            assert_eq!(db.scan_all(true).unwrap(), want);
        };
        check(&db);
        db.compact_all().unwrap();
        db.wait_idle().unwrap();
        check(&db);
        // Every keyspace was compacted into one bottom level of tables.
        for name in &names {
            let s = db
                .db()
                .keyspace(name, quietkv::KeyspaceOptions::default())
                .unwrap()
                .stats()
                .unwrap();
            let with_tables = s.levels.iter().filter(|l| l.files > 0).count();
            assert_eq!(with_tables, 1, "{name}: {:?}", s.levels);
        }
        db.close().unwrap();
    }

    #[test]
    fn scans_read_what_a_model_holds() {
        crate::engines::bench_engine::check_scans_against_a_model::<QuietkvEngine>(
            &QuietkvConfig::parse("auto").unwrap(),
        );
    }

    #[test]
    fn an_mmap_wal_leaves_the_manifest_buffered() {
        let c = QuietkvConfig::wal("e4", AccessMode::Mmap, "group", "none").unwrap();
        assert_eq!(c.access(IoClass::WalWrite), AccessMode::Mmap);
        assert_eq!(c.access(IoClass::Manifest), AccessMode::Buffered);
    }

    #[test]
    fn a_wal_config_sets_recycling_only_when_asked() {
        let mut c = QuietkvConfig::wal("e4", AccessMode::Buffered, "group", "none").unwrap();
        let default = Options::default().wal_recycle_count;
        assert_eq!(c.options().wal_recycle_count, default);
        c.wal_recycle_count = Some(default + 3);
        assert_eq!(c.options().wal_recycle_count, default + 3);
    }

    #[test]
    fn the_throughput_configs_set_compaction_alone() {
        let c = QuietkvConfig::parse_compaction_only("direct").unwrap();
        assert!(QuietkvConfig::parse_compaction_only("both-direct").is_err());
        assert_eq!(c.name, "direct");
        assert_eq!(c.access(IoClass::CompactionRead), AccessMode::Direct);
        assert_eq!(c.access(IoClass::CompactionWrite), AccessMode::Direct);
        for other in [IoClass::UserRead, IoClass::FlushWrite, IoClass::WalWrite] {
            assert_eq!(c.access(other), AccessMode::Auto, "{other}");
        }
    }

    #[test]
    fn the_bench_layout_is_the_one_sources_were_built_with() {
        // Source databases on disk are identified by these numbers: a
        // change rebuilds every kept source.
        let l = QuietkvEngine::bench_layout();
        assert_eq!(l.target_file_size, 32 << 20);
        assert_eq!(l.compression, "none");
        let d = Options::default();
        assert_eq!(
            (l.block_size, l.level_base_bytes, l.bloom_bits_per_key),
            (d.block_size, d.level_base_bytes, d.bloom_bits_per_key)
        );
    }
}
