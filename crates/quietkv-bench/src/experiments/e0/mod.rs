//! E0, the no-engine reference (docs/benchmark.md): buffered 4 KiB random reads
//! of a pre-warmed hot file at a fixed rate, beside a sequential read
//! stream and a sequential write stream of big files in the mode under
//! test, all in the same memory cgroup: the ceiling an engine can reach.
//!
//! - [`worker`]: its files (prepared once by the parent) and one run in the
//!   worker process;
//! - [`parent`]: `--experiment E0`: the campaign and the report.

pub mod parent;
pub mod worker;

pub use self::parent::run;
pub use self::worker::{prepare, worker, E0Params};
