//! Runs one benchmark run in a worker process inside the memory cgroup.
//!
//! The parent re-executes its own binary as `quietkv bench-worker`, puts the
//! child's pid into a fresh memory cgroup (and a cgroup2 directory for PSI,
//! and a cpuacct cgroup for CPU times the kernel does not rescale) right
//! after spawning it, and only then writes the run's spec as one JSON
//! line to the child's stdin: the child blocks on that line, so none of its
//! work happens outside the cgroup. The child prints its `RunResult` as one
//! JSON line on stdout and progress on stderr. The parent never sits in the
//! limited cgroup; it removes the cgroups when the child is done, on error,
//! and on Ctrl-C.
//!
//! Both sides of that exchange are here: [`Runner`] in the parent, and
//! [`worker_main_with`] in the child, which is handed the experiments'
//! registry to find the function of a run's experiment.

use std::io::{BufRead, Read, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::cgroup::{cgroups_usable, interrupted, CpuacctCgroup, MemoryCgroup, PsiCgroup};
use crate::result::{RunResult, WorkerSpec};

/// The function that performs one run of an experiment inside the worker
/// process and returns its result as JSON (most experiments' is a
/// [`RunResult`]; see [`reply`]). `stop` is set when the run should end
/// early.
pub type WorkerFn = fn(&WorkerSpec, &AtomicBool) -> Result<serde_json::Value, String>;

/// A worker's result as the JSON its process prints for the parent.
pub fn reply<T: Serialize>(result: Result<T, String>) -> Result<serde_json::Value, String> {
    serde_json::to_value(result?).map_err(|e| format!("cannot encode the run's result: {e}"))
}

/// What the report says when process CPU times come from `/proc/PID/stat`.
const RESCALED_CPU: &str = "the worker's CPU times come from /proc/PID/stat, which the kernel rescales, so a phase's user/system split can be wrong (a phase can even show 0 s of system time); the system-wide columns from /proc/stat are raw";

/// Why a run gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The kernel's OOM killer ended the worker: the mode's memory outgrew
    /// the run's memory cgroup. The mode failed that run; the campaign can
    /// go on with the others.
    OutOfMemory(String),
    /// Anything else: the campaign cannot go on.
    Other(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::OutOfMemory(s) | RunError::Other(s) => f.write_str(s),
        }
    }
}

impl From<String> for RunError {
    fn from(s: String) -> RunError {
        RunError::Other(s)
    }
}

impl From<&str> for RunError {
    fn from(s: &str) -> RunError {
        RunError::Other(s.to_string())
    }
}

impl From<RunError> for String {
    fn from(e: RunError) -> String {
        e.to_string()
    }
}

/// The name of the hidden subcommand the worker runs as.
pub const WORKER_SUBCOMMAND: &str = "bench-worker";

/// `sync`, then drop clean page cache, dentries and inodes.
pub fn drop_page_cache() -> Result<(), String> {
    quietio::sys::sync_all();
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("cannot drop the page cache (/proc/sys/vm/drop_caches: {e})"))
}

#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Memory cgroup limit; `None` runs unconfined.
    pub memory_limit: Option<u64>,
    pub drop_caches: bool,
}

/// Runs workers one after another and remembers what could not be done.
pub struct Runner {
    opts: RunnerOptions,
    notes: Vec<String>,
    use_memcg: bool,
    use_psi: bool,
    use_cpuacct: bool,
    can_drop: bool,
}

impl Runner {
    /// Checks once what this machine allows (root, cgroups, PSI,
    /// drop_caches) and records what cannot be done.
    pub fn new(opts: RunnerOptions) -> Runner {
        let mut r = Runner {
            use_memcg: opts.memory_limit.is_some(),
            use_psi: true,
            use_cpuacct: true,
            can_drop: opts.drop_caches,
            opts,
            notes: Vec::new(),
        };
        if let Err(why) = cgroups_usable() {
            if r.use_memcg {
                r.note(format!(
                    "no memory cgroup ({why}): the worker ran unconfined, so its page cache was bounded only by the machine's memory, not the stated limit"
                ));
            }
            r.note(format!(
                "no PSI cgroup ({why}): stall time is system-wide /proc/pressure/memory"
            ));
            r.note(format!("no cpuacct cgroup ({why}): {RESCALED_CPU}"));
            r.use_memcg = false;
            r.use_psi = false;
            r.use_cpuacct = false;
        } else {
            if let Err(e) = CpuacctCgroup::create() {
                r.note(format!("no cpuacct cgroup ({e}): {RESCALED_CPU}"));
                r.use_cpuacct = false;
            }
            let mut memcg_has_psi = false;
            if r.use_memcg {
                match MemoryCgroup::create(r.opts.memory_limit.unwrap_or(1 << 30)) {
                    Ok(m) => memcg_has_psi = m.pressure_file().is_some(),
                    Err(e) => {
                        r.note(format!(
                            "no memory cgroup ({e}): the worker ran unconfined, so its page cache was bounded only by the machine's memory"
                        ));
                        r.use_memcg = false;
                    }
                }
            }
            if memcg_has_psi {
                // A v2 memory cgroup has memory.pressure itself.
                r.use_psi = false;
            } else if let Err(e) = PsiCgroup::create() {
                r.note(format!(
                    "no cgroup2 PSI directory ({e}): stall time is system-wide /proc/pressure/memory, which includes other processes"
                ));
                r.use_psi = false;
            }
        }
        if r.can_drop {
            if let Err(e) = std::fs::OpenOptions::new()
                .write(true)
                .open("/proc/sys/vm/drop_caches")
            {
                r.note(format!(
                    "cannot drop the page cache ({e}): modes did not start from a cold cache"
                ));
                r.can_drop = false;
            }
        }
        r
    }

    fn note(&mut self, s: String) {
        if !self.notes.contains(&s) {
            self.notes.push(s);
        }
    }

    /// What could not be done on this machine, for the report header.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn memory_limit(&self) -> Option<u64> {
        self.opts.memory_limit.filter(|_| self.use_memcg)
    }

    /// One run: drop caches, start the worker, confine it, hand it the spec,
    /// collect its result, remove the cgroups.
    pub fn run(&mut self, spec: WorkerSpec) -> Result<RunResult, RunError> {
        self.run_as(spec)
    }

    /// [`Runner::run`] for an experiment whose worker returns `T`.
    pub fn run_as<T: DeserializeOwned>(&mut self, mut spec: WorkerSpec) -> Result<T, RunError> {
        if interrupted() {
            return Err(RunError::Other("interrupted".into()));
        }
        if self.can_drop {
            if let Err(e) = drop_page_cache() {
                self.note(e);
            }
        }
        let mut memcg = match (self.use_memcg, self.opts.memory_limit) {
            (true, Some(limit)) => Some(MemoryCgroup::create(limit)?),
            _ => None,
        };
        let mut psi = if self.use_psi {
            Some(PsiCgroup::create()?)
        } else {
            None
        };
        let mut cpuacct = if self.use_cpuacct {
            Some(CpuacctCgroup::create()?)
        } else {
            None
        };
        let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
        let mut child = Command::new(exe)
            .arg(WORKER_SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the benchmark worker: {e}"))?;
        let pid = child.id();
        let placed = (|| -> Result<(), String> {
            if let Some(m) = memcg.as_mut() {
                m.add_pid(pid)?;
                spec.sampler.memcg_dir = Some(m.dir().to_path_buf());
                spec.common.memory_limit_bytes = Some(m.limit_bytes());
                if let Some(p) = m.pressure_file() {
                    spec.sampler.psi_file = Some(p);
                }
            }
            if let Some(p) = psi.as_mut() {
                p.add_pid(pid)?;
                spec.sampler.psi_file = Some(p.pressure_file());
            }
            if let Some(c) = cpuacct.as_mut() {
                c.add_pid(pid)?;
                spec.sampler.cpuacct_dir = Some(c.dir().to_path_buf());
            }
            let line = serde_json::to_string(&spec).map_err(|e| e.to_string())? + "\n";
            let mut stdin = child.stdin.take().ok_or("worker has no stdin")?;
            stdin
                .write_all(line.as_bytes())
                .map_err(|e| format!("cannot hand the spec to the worker: {e}"))?;
            Ok(())
        })();
        if let Err(e) = placed {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e.into());
        }
        let mut stdout = child.stdout.take().ok_or("worker has no stdout")?;
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        let status = loop {
            if interrupted() {
                let _ = child.kill();
                let _ = child.wait();
                let _ = reader.join();
                return Err(RunError::Other("interrupted".into()));
            }
            match child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) => {
                    crate::progress::tick();
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => return Err(format!("waiting for the worker: {e}").into()),
            }
        };
        crate::progress::end_run();
        let out = reader.join().unwrap_or_default();
        // Read before the cgroup goes: a worker the kernel killed for
        // going over the run's memory limit has no result to say so.
        let oom = memcg
            .as_ref()
            .and_then(|m| Some((m.oom_kills()?, m.limit_bytes())))
            .filter(|&(kills, _)| kills > 0);
        drop(memcg.take());
        drop(psi.take());
        drop(cpuacct.take());
        let last = out
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let v: serde_json::Value = serde_json::from_str(last).map_err(|_| match oom {
            Some((_, limit)) => RunError::OutOfMemory(format!(
                "{} worker was killed by the kernel's OOM killer ({status}): the mode's memory outgrew the run's {} MiB memory cgroup",
                spec.label(),
                limit >> 20
            )),
            None => RunError::Other(format!(
                "{} worker exited with {status} without a result",
                spec.label()
            )),
        })?;
        if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            return Err(format!("{} {e}", spec.label()).into());
        }
        serde_json::from_value(v)
            .map_err(|e| format!("{} unreadable worker result: {e}", spec.label()).into())
    }
}

/// The hidden `bench-worker` subcommand: read one spec line, run it with
/// the worker function `worker_fn` finds for its experiment (the
/// experiments' registry), print one result line.
pub fn worker_main_with(worker_fn: fn(&str) -> Option<WorkerFn>) -> ExitCode {
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() || line.trim().is_empty() {
        eprintln!(
            "quietkv bench-worker: no spec on stdin (this command is started by `quietkv bench`)"
        );
        return ExitCode::from(2);
    }
    let reply = |v: serde_json::Value| {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{v}");
        let _ = o.flush();
    };
    let spec: WorkerSpec = match serde_json::from_str(&line) {
        Ok(s) => s,
        Err(e) => {
            reply(serde_json::json!({"error": format!("bad spec: {e}")}));
            return ExitCode::from(2);
        }
    };
    let Some(f) = worker_fn(&spec.experiment) else {
        reply(serde_json::json!({"error": format!("unknown experiment {}", spec.experiment)}));
        return ExitCode::from(2);
    };
    let stop = AtomicBool::new(false);
    match f(&spec, &stop) {
        Ok(v) => {
            reply(v);
            ExitCode::SUCCESS
        }
        Err(e) => {
            reply(serde_json::json!({ "error": e }));
            ExitCode::from(1)
        }
    }
}
