//! E4 (seed 001, Cassandra's commit log): a write-only load of many
//! closed-loop writers, per WAL access mode, sync policy and compression,
//! on ext4 and on a loop-mounted xfs image made and removed by the bench.
//! It measures the engine's write path, not the page cache, so it runs in
//! this process without a memory cgroup.
//!
//! - [`config`]: the configurations and the default grid;
//! - [`xfs`]: the loop-mounted xfs image;
//! - [`one_run`]: one run;
//! - [`tables`]: the report's table and JSON;
//! - [`parent`]: `--experiment E4`: the campaign and the report.

pub mod config;
pub mod one_run;
pub mod parent;
pub mod tables;
pub mod xfs;

pub use self::config::{default_modes, Fs, WalConfig};
pub use self::one_run::{run_one, DeviceFigures, Params, Run};
pub use self::parent::{run, run_modes};
pub use self::tables::{json, markdown, xfs_ratios};
pub use self::xfs::XfsMount;
