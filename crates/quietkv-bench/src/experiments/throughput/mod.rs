//! The engine throughput experiment: fill N keys, random point reads, and
//! a full compaction, once per configuration of every engine, interleaved
//! and repeated. Figures for `docs/results/`; it measures the engine, not
//! the page cache, so it runs in this process without a cgroup.
//!
//! - [`one_run`]: one run;
//! - [`tables`]: the report's table and the same-work rule;
//! - [`parent`]: `--experiment throughput`: the campaign and the report.

pub mod one_run;
pub mod parent;
pub mod tables;

pub use self::one_run::{run_one, Params, Run};
pub use self::parent::run;
pub use self::tables::{judge_compaction, markdown, same_work_lines};
