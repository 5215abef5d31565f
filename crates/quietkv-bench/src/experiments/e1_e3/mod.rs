//! The engine experiments (docs/benchmark.md), run together and reported as one:
//!
//! - E1: fixed-rate reads over a hot set while one major compaction
//!   rewrites the whole database;
//! - E2: the same reads while one writer overwrites random keys at a fixed
//!   byte rate, driving flush and compaction;
//! - E3: E1 at hot-set sizes of about 1/30, 1/3 and 3x the page cache.
//!
//! [`worker`] is one run in the worker process, generic over the engine;
//! [`parent`] is the rest: presets, source databases, the sections'
//! campaigns with the disturbance rule, the report and the verdict.

pub mod parent;
pub mod worker;

pub use self::parent::run;
pub use self::worker::{worker, EngineParams};
