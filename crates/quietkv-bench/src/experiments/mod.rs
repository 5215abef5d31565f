//! The experiments, one folder each, and their registry: which experiment
//! an id names, how the parent runs it, and which function its worker
//! process runs.
//!
//! - [`e0`]: the no-engine reference (quietio files in the access modes of
//!   quietkv's configuration of the same name: no engine to seam);
//! - [`e1_e3`]: the engine experiments E1, E2 and E3, generic over the
//!   engine, run together;
//! - [`e4`]: the write path per WAL mode, in this process;
//! - [`e5`]: direct user reads against the page cache;
//! - [`throughput`]: fill, cold reads and a full compaction per
//!   configuration, generic over the engine, in this process;
//! - [`standard`]: db_bench's workloads and YCSB's A-F on every engine
//!   configuration (ops/s, latency percentiles, CPU per operation, write
//!   and space amplification, peak memory, device reads), each run in a
//!   worker process of its own;
//! - [`modes`] and [`setup`]: what the experiments' parent sides share
//!   (the modes a run compares; the scratch and output directories, the
//!   machine, the clock).
//!
//! Adding an experiment: write a worker function
//! `fn(&WorkerSpec, &AtomicBool) -> Result<RunResult, String>` that opens
//! the engine of `spec.mode` in `spec.dir` through
//! [`crate::engines::BenchEngine`], starts a [`crate::sampler::Sampler`]
//! with `spec.sampler` (plus an `ExtraFn` for engine counters), marks
//! phases, drives reads with [`crate::loadgen::run_open_loop`], and fills
//! a [`crate::result::RunResult`] (see [`e0::worker`]); prepare its files
//! in the parent (like [`e0::prepare`]), run its modes with
//! [`crate::campaign::run`] and [`crate::campaign::in_worker`], and build a
//! [`crate::report::ExperimentReport`] from the runs; then add it to
//! [`EXPERIMENTS`] (its worker wrapped in [`runner::reply`]). Runner,
//! cgroups, report and plots need no change.

pub mod e0;
pub mod e1_e3;
pub mod e4;
pub mod e5;
pub mod modes;
pub mod setup;
pub mod standard;
pub mod throughput;

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use crate::args::BenchArgs;
use crate::cgroup::install_interrupt_handler;
use crate::result::WorkerSpec;
use crate::runner::{self, WorkerFn};

/// What `quietkv bench` runs without `--experiment`: E1 at quick scale,
/// `auto` against buffered, 3 interleaved runs each, in about five
/// minutes (with reruns of disturbed runs, well under ten); E2 and the
/// other modes on request.
pub const DEFAULT_EXPERIMENTS: &str = "E1";

/// How the parent runs an experiment.
#[derive(Debug, Clone, Copy)]
pub enum Parent {
    /// Alone: `--experiment` names it and nothing else.
    Alone(fn(&BenchArgs) -> Result<(), String>),
    /// With the other engine experiments `--experiment` names beside it
    /// (E1, E2, E3): their sections share the source databases and one
    /// report ([`e1_e3::run`]).
    EngineSuite,
}

/// One experiment of the registry.
#[derive(Debug, Clone, Copy)]
pub struct Experiment {
    /// As `--experiment` names it, upper-cased (`E1`, `THROUGHPUT`); also
    /// the experiment of a [`crate::result::WorkerSpec`].
    pub id: &'static str,
    pub parent: Parent,
    /// What the worker process runs for one run; `None` where the runs
    /// stay in the bench's own process (E4, throughput).
    pub worker: Option<WorkerFn>,
}

/// Every experiment the bench has.
pub static EXPERIMENTS: [Experiment; 8] = [
    Experiment {
        id: "E0",
        parent: Parent::Alone(e0::run),
        worker: Some(e0_worker),
    },
    Experiment {
        id: "E1",
        parent: Parent::EngineSuite,
        worker: Some(engine_suite_worker),
    },
    Experiment {
        id: "E2",
        parent: Parent::EngineSuite,
        worker: Some(engine_suite_worker),
    },
    Experiment {
        id: "E3",
        parent: Parent::EngineSuite,
        worker: Some(engine_suite_worker),
    },
    Experiment {
        id: "E4",
        parent: Parent::Alone(e4::run),
        worker: None,
    },
    Experiment {
        id: "E5",
        parent: Parent::Alone(e5::run),
        worker: Some(e5_worker),
    },
    Experiment {
        id: "THROUGHPUT",
        parent: Parent::Alone(throughput::run),
        worker: None,
    },
    Experiment {
        id: "STANDARD",
        parent: Parent::Alone(standard::run),
        worker: Some(standard_worker),
    },
];

fn e0_worker(spec: &WorkerSpec, stop: &AtomicBool) -> Result<serde_json::Value, String> {
    runner::reply(e0::worker(spec, stop))
}

fn engine_suite_worker(spec: &WorkerSpec, stop: &AtomicBool) -> Result<serde_json::Value, String> {
    runner::reply(e1_e3::worker(spec, stop))
}

fn e5_worker(spec: &WorkerSpec, stop: &AtomicBool) -> Result<serde_json::Value, String> {
    runner::reply(e5::worker(spec, stop))
}

fn standard_worker(spec: &WorkerSpec, stop: &AtomicBool) -> Result<serde_json::Value, String> {
    runner::reply(standard::worker(spec, stop))
}

/// The experiment of `id` (upper-case), if there is one.
pub fn find(id: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.id == id)
}

/// The worker function of the experiment of `id`.
pub fn worker_fn(id: &str) -> Option<WorkerFn> {
    find(id)?.worker
}

/// The hidden `bench-worker` subcommand (see [`runner::worker_main_with`]):
/// a front routes it here.
pub fn worker_main() -> ExitCode {
    runner::worker_main_with(worker_fn)
}

/// `quietkv bench`: the experiments of `--experiment` (default
/// [`DEFAULT_EXPERIMENTS`]).
pub fn run(args: BenchArgs) -> Result<(), String> {
    install_interrupt_handler();
    let list = args
        .experiment
        .clone()
        .unwrap_or_else(|| DEFAULT_EXPERIMENTS.into());
    let exps: Vec<String> = list
        .split(',')
        .map(|e| e.trim().to_ascii_uppercase())
        .filter(|e| !e.is_empty())
        .collect();
    // Before anything runs, and before an E0 named beside other
    // experiments is refused for that.
    if exps.iter().any(|e| e == "E0")
        && args
            .engines
            .iter()
            .flatten()
            .any(|e| !e.trim().eq_ignore_ascii_case("quietkv"))
    {
        return Err("E0 has no engine: --engines other than quietkv do not apply".into());
    }
    e1_e3::parent::mode_write_rate_applies(&args, &exps)?;
    if let [id] = exps.as_slice() {
        if let Some(Experiment {
            parent: Parent::Alone(run),
            ..
        }) = find(id)
        {
            return run(&args);
        }
    }
    if let Some(bad) = exps.iter().find(|e| {
        !matches!(
            find(e),
            Some(Experiment {
                parent: Parent::EngineSuite,
                ..
            })
        )
    }) {
        return Err(format!(
            "unknown or not yet implemented experiment '{bad}' (available: E1, E2, E3, E0, E4, E5, throughput, standard; E0, E4, E5, throughput and standard run alone)"
        ));
    }
    e1_e3::run(&args, &exps)
}

#[cfg(test)]
mod tests {
    use super::modes::{engine_modes, report_names, ROCKSDB_MODES};
    use super::*;
    use crate::args::tests::args;

    /// The README's main command, `quietkv bench` with no flags: E1 at
    /// quick scale, auto against buffered, 3 runs each, disturbed runs
    /// rerun up to 3 times.
    #[test]
    fn the_main_command_compares_auto_with_buffered_three_times() {
        let a = args(&[]);
        assert_eq!(a.experiment, None);
        assert_eq!(DEFAULT_EXPERIMENTS, "E1");
        assert_eq!(a.scale, "quick");
        assert_eq!(a.repeats, 3);
        assert_eq!(a.max_reruns, 3);
        let modes = engine_modes(&a, &e1_e3::parent::DEFAULT_MODES, &ROCKSDB_MODES).unwrap();
        assert_eq!(report_names(&modes), ["buffered", "auto"]);
    }

    #[test]
    fn the_registry_knows_which_experiments_run_in_a_worker() {
        for id in ["E0", "E1", "E2", "E3", "E5", "STANDARD"] {
            assert!(worker_fn(id).is_some(), "{id}");
        }
        for id in ["E4", "THROUGHPUT", "E9", "e1"] {
            assert!(worker_fn(id).is_none(), "{id}");
        }
        assert!(matches!(find("E2").unwrap().parent, Parent::EngineSuite));
        assert!(matches!(find("E5").unwrap().parent, Parent::Alone(_)));
        assert!(matches!(find("STANDARD").unwrap().parent, Parent::Alone(_)));
    }
}
