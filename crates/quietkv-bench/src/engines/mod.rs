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
//!
//! Files, each using only those listed before it: [`page_cache`],
//! [`counters`], [`bench_engine`] (the trait), [`quietkv_spread`] (quietkv's
//! keys over several keyspaces), the engines ([`quietkv`],
//! `rocksdb` with [`rocksdb_names`] and [`rocksdb_stats`], `fjall` with
//! [`thread_io`]), then [`mode`]. This file only lists them and re-exports
//! their items.

pub mod bench_engine;
pub mod counters;
#[cfg(feature = "fjall")]
pub mod fjall;
pub mod mode;
pub mod page_cache;
pub mod quietkv;
pub mod quietkv_spread;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod rocksdb_names;
pub mod rocksdb_stats;
pub mod thread_io;

pub use self::bench_engine::{
    close_shared, Batch, BenchEngine, EngineConfig, Layout, ScanCount, Tuning,
};
pub(crate) use self::counters::stall_delta;
pub use self::counters::{Counters, GetTimes, HitsMisses, LevelWork};
#[cfg(feature = "fjall")]
pub use self::fjall::{FjallConfig, FjallEngine};
pub(crate) use self::mode::dispatch;
pub use self::mode::{
    built_engines, engine_count, engines_text, how_to_build_peers, EngineMode, ALL_ENGINES,
};
pub use self::page_cache::{CacheUse, Direction, PageCacheUse};
pub use self::quietkv::{QuietkvConfig, QuietkvEngine};
#[cfg(feature = "rocksdb")]
pub use self::rocksdb::{RocksDbConfig, RocksDbEngine};
