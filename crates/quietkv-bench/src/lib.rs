//! `quietkv bench`: the page-cache benchmark of docs/benchmark.md, as a library;
//! the `quietkv` command's `bench` and `bench-worker` are a thin front on
//! [`run`] and [`worker_main`]. The worker process re-executes the binary
//! as `<exe> bench-worker`: a front must route that hidden subcommand to
//! [`worker_main`].
//!
//! The modules, from the bottom up (each uses only those above it in this
//! list):
//!
//! - [`process`]: the bench's own process: the interrupt flag, timer
//!   slack, CPU time and clock tick; [`progress`]: the terminal's log
//!   lines and the status line redrawn while a run goes on.
//! - [`metrics`], [`cpu`]: parsers of /proc and /sys text, device lookup,
//!   iostat math; CPU times the kernel does not rescale.
//! - [`cgroup`]: the memory, PSI and cpuacct cgroups a run is measured in,
//!   and the interrupt flag that lets everything clean up on Ctrl-C;
//!   [`process_cpu`]: this process's own CPU time from a cgroup of its own.
//! - [`loadgen`], [`closed_loop`]: open-loop readers (a pool on one
//!   schedule) and closed-loop readers, with HdrHistograms; [`keys`]: the
//!   keys and values every engine stores.
//! - [`sampler`]: per-second samples of the kernel's figures and per-phase
//!   deltas and rates.
//! - [`engines`]: the [`engines::BenchEngine`] trait every experiment
//!   drives an engine through, each engine's configuration type and what it
//!   does to the page cache.
//! - [`source`]: each engine's source database, built once and copied for
//!   every run; [`scale`]: the `--scale` presets.
//! - [`result`]: what a run is asked to do and what it returns, shared by
//!   every experiment.
//! - [`runner`]: one run in a worker process inside its cgroups (both sides
//!   of the exchange).
//! - [`report`]: the data model, the tables, the verdict and the peers'
//!   view, report.md, report.json and the plots.
//! - [`disturbance`]: whether the machine disturbed a run;
//!   [`quiet_host`]: waiting for the host to stop taking the CPUs before
//!   a run.
//! - [`campaign`]: the run-and-repeat loop every experiment runs its modes
//!   in (interleaved, rotated each round, rerun when disturbed).
//! - [`args`]: the options of `quietkv bench` ([`BenchArgs`]).
//! - [`experiments`]: one folder per experiment (E0, E1-E3, E4, E5,
//!   throughput, standard) and the registry that maps an id to its parent
//!   side and its worker function; [`run`] and [`worker_main`] are there.
//!
//! Adding an engine: implement [`engines::BenchEngine`] and its
//! [`engines::EngineConfig`], add a variant to [`engines::EngineMode`]; the
//! compiler then points at every dispatch (worker, source, E0). Adding an
//! experiment: see [`experiments`].

pub mod args;
pub mod campaign;
pub mod cgroup;
pub mod closed_loop;
pub mod cpu;
pub mod device_stall;
pub mod disturbance;
pub mod engines;
pub mod experiments;
pub mod keys;
pub mod loadgen;
pub mod metrics;
pub mod process;
pub mod process_cpu;
pub mod progress;
pub mod quiet_host;
pub mod report;
pub mod result;
pub mod runner;
pub mod sampler;
pub mod scale;
pub mod source;

pub use self::args::BenchArgs;
pub use self::experiments::{run, worker_main, DEFAULT_EXPERIMENTS};
pub use self::report::{write_outputs, write_outputs_with_verdict};
