//! E5 (seed 002, CASSANDRA-14466): 100% random point reads over a database
//! eight times the memory limit, with user reads `buffered` (the page cache
//! is their cache), `direct` (O_DIRECT, the engine's block cache sized from
//! the cgroup limit is their only cache) or `mmap` (tables mapped, reads
//! copy from the mapping; the page cache again), under a closed loop (how
//! much the machine serves) and an open loop (latency at the same offered
//! load).
//!
//! - [`worker`]: the modes' configurations and one run in the worker
//!   process;
//! - [`parent`]: `--experiment E5`: the campaign per load, the report and
//!   the seed's targets judged from it;
//! - [`ceiling`]: what the device gives the same number of synchronous
//!   O_DIRECT readers of the same tables, the bound a direct get cannot
//!   beat.

pub mod ceiling;
pub mod parent;
pub mod worker;

pub use self::parent::{judge_section, run};
pub use self::worker::{block_cache_bytes, mode_config, worker, E5Params, Load, MODES};
