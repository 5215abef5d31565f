//! A thread that samples kernel and process metrics once a second (plus at
//! every phase boundary), and the per-phase deltas and rates computed from
//! those samples.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cpu::{read_cpuacct, read_system_cpu, CpuSource, CpuTimes, SystemCpuTicks};
use crate::device_stall::{phase_stalls, DeviceStalls, DeviceWatch};
use crate::metrics::{
    clock_ticks_per_sec, device_rates, read_block_stat, read_memory_stat, read_psi, read_self_cpu,
    read_vmstat, BlockStat, DeviceRates, MemoryStat, ProcCpu, ProcIo, Psi, Vmstat,
};

/// Engine (or experiment) counters sampled alongside the kernel's.
pub type ExtraFn = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Where the sampler reads from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SamplerConfig {
    /// The memory cgroup of the measured process (its `memory.stat`).
    pub memcg_dir: Option<PathBuf>,
    /// A `memory.pressure` file; `/proc/pressure/memory` when `None`.
    pub psi_file: Option<PathBuf>,
    /// Disk name under `/sys/block`.
    pub block_device: Option<String>,
    /// A cpuacct cgroup holding only the measured process: its raw CPU
    /// times replace the rescaled ones of `/proc/self/stat` (see `cpu`).
    #[serde(default)]
    pub cpuacct_dir: Option<PathBuf>,
    /// Sampling interval in ms (default 1000).
    pub interval_ms: u64,
}

/// One reading of everything.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the sampler started.
    pub t_s: f64,
    /// The phase that was running when the sample was taken (a boundary
    /// sample carries the phase that starts there).
    pub phase: String,
    pub vmstat: Vmstat,
    pub memcg: Option<MemoryStat>,
    pub psi: Option<Psi>,
    pub block: Option<BlockStat>,
    /// `/proc/self/stat`'s times, rescaled by the kernel.
    pub cpu: Option<ProcCpu>,
    /// The measured process's raw times, when it has a cpuacct cgroup.
    #[serde(default)]
    pub cpuacct: Option<CpuTimes>,
    /// The whole machine's CPU time by kind.
    #[serde(default)]
    pub system_cpu: Option<SystemCpuTicks>,
    #[serde(default)]
    pub io: Option<ProcIo>,
    /// The host's steal of this machine's CPUs so far (clock ticks).
    #[serde(default)]
    pub steal_ticks: Option<u64>,
    /// CPU ticks every other user process on the machine used so far (not
    /// the measured process, not the benchmark that started it; see
    /// `metrics::read_other_processes_cpu_ticks`).
    #[serde(default)]
    pub other_cpu_ticks: Option<u64>,
    /// The device's stalls so far (see `device_stall`), when its counters
    /// can be read.
    #[serde(default)]
    pub device_stalls: Option<DeviceStalls>,
    #[serde(default)]
    pub extra: serde_json::Value,
}

struct Shared {
    samples: Vec<Sample>,
    phase: String,
    stop: bool,
}

/// Samples every `interval_ms` on its own thread until [`Sampler::stop`].
pub struct Sampler {
    cfg: SamplerConfig,
    start: Instant,
    extra: Option<ExtraFn>,
    /// Polls the device between samples, for stalls no sample would see.
    watch: Option<Arc<DeviceWatch>>,
    shared: Arc<(Mutex<Shared>, Condvar)>,
    /// Held while a sample is taken and stored, so samples stay in time
    /// order and carry the phase in force when they were taken.
    taking: Arc<Mutex<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn take(
    cfg: &SamplerConfig,
    start: Instant,
    phase: &str,
    extra: &Option<ExtraFn>,
    watch: Option<&DeviceWatch>,
) -> Sample {
    let psi = match &cfg.psi_file {
        Some(p) => read_psi(p),
        None => read_psi(&crate::metrics::system_psi_path()),
    };
    Sample {
        t_s: start.elapsed().as_secs_f64(),
        phase: phase.to_string(),
        vmstat: read_vmstat(),
        memcg: cfg.memcg_dir.as_deref().and_then(read_memory_stat),
        psi,
        block: cfg.block_device.as_deref().and_then(read_block_stat),
        cpu: read_self_cpu(),
        cpuacct: cfg.cpuacct_dir.as_deref().and_then(read_cpuacct),
        system_cpu: read_system_cpu(),
        io: crate::metrics::read_self_io(),
        steal_ticks: crate::metrics::read_steal_ticks(),
        other_cpu_ticks: crate::metrics::read_other_processes_cpu_ticks(&[
            std::process::id(),
            std::os::unix::process::parent_id(),
        ]),
        device_stalls: watch.map(DeviceWatch::sample),
        extra: extra
            .as_ref()
            .map(|f| f())
            .unwrap_or(serde_json::Value::Null),
    }
}

impl Sampler {
    pub fn start(mut cfg: SamplerConfig, phase: &str, extra: Option<ExtraFn>) -> Sampler {
        if cfg.interval_ms == 0 {
            cfg.interval_ms = 1000;
        }
        // A cgroup this process is not in would count nothing: then the
        // phases fall back to /proc/self/stat and say so (`cpu_source`).
        if let Some(dir) = &cfg.cpuacct_dir {
            if !crate::cgroup::lists_pid(dir, std::process::id()) {
                cfg.cpuacct_dir = None;
            }
        }
        let watch = cfg
            .block_device
            .as_deref()
            .and_then(DeviceWatch::start)
            .map(Arc::new);
        let start = Instant::now();
        let first = take(&cfg, start, phase, &extra, watch.as_deref());
        let shared = Arc::new((
            Mutex::new(Shared {
                samples: vec![first],
                phase: phase.to_string(),
                stop: false,
            }),
            Condvar::new(),
        ));
        let taking = Arc::new(Mutex::new(()));
        let thread = {
            let (cfg, shared, extra, taking, watch) = (
                cfg.clone(),
                shared.clone(),
                extra.clone(),
                taking.clone(),
                watch.clone(),
            );
            std::thread::Builder::new()
                .name("bench-sampler".into())
                .spawn(move || {
                    let interval = Duration::from_millis(cfg.interval_ms);
                    let mut next = start + interval;
                    loop {
                        let (lock, cv) = &*shared;
                        let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
                        loop {
                            if g.stop {
                                return;
                            }
                            let now = Instant::now();
                            if now >= next {
                                break;
                            }
                            g = cv
                                .wait_timeout(g, next - now)
                                .unwrap_or_else(|e| e.into_inner())
                                .0;
                        }
                        drop(g);
                        {
                            let _t = taking.lock().unwrap_or_else(|e| e.into_inner());
                            let phase =
                                lock.lock().unwrap_or_else(|e| e.into_inner()).phase.clone();
                            let s = take(&cfg, start, &phase, &extra, watch.as_deref());
                            lock.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .samples
                                .push(s);
                        }
                        next += interval;
                        let now = Instant::now();
                        while next < now {
                            next += interval;
                        }
                    }
                })
                .expect("spawn sampler thread")
        };
        Sampler {
            cfg,
            start,
            extra,
            watch,
            shared,
            taking,
            thread: Some(thread),
        }
    }

    /// Starts phase `phase` now: takes a boundary sample and returns its
    /// index (pass two of them to [`phase_metrics`]).
    pub fn mark(&self, phase: &str) -> usize {
        let _t = self.taking.lock().unwrap_or_else(|e| e.into_inner());
        let s = take(
            &self.cfg,
            self.start,
            phase,
            &self.extra,
            self.watch.as_deref(),
        );
        let mut g = self.shared.0.lock().unwrap_or_else(|e| e.into_inner());
        g.phase = phase.to_string();
        g.samples.push(s);
        g.samples.len() - 1
    }

    /// Stops the thread and returns every sample in time order.
    pub fn stop(mut self) -> Vec<Sample> {
        self.halt();
        let g = self.shared.0.lock().unwrap_or_else(|e| e.into_inner());
        g.samples.clone()
    }

    fn halt(&mut self) {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        self.shared.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Kernel metrics of one phase: rates from the deltas between its first and
/// last sample, cache sizes averaged over the samples in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseMetrics {
    pub seconds: f64,
    pub dirty_pages_per_s: f64,
    pub written_pages_per_s: f64,
    pub pgscan_file_per_s: f64,
    pub pgsteal_file_per_s: f64,
    /// From the memory cgroup when there is one, else system-wide.
    pub refaults_per_s: f64,
    pub stall_us_per_s: Option<f64>,
    pub active_file_bytes: Option<f64>,
    pub inactive_file_bytes: Option<f64>,
    pub device: Option<DeviceRates>,
    /// The measured process's CPU time in the phase.
    pub cpu_user_s: Option<f64>,
    pub cpu_sys_s: Option<f64>,
    /// The measured process's time on a CPU, exact (the scheduler's, not
    /// tick samples): what `cpu_user_s + cpu_sys_s` estimates.
    #[serde(default)]
    pub cpu_run_s: Option<f64>,
    /// Where `cpu_user_s` and `cpu_sys_s` came from.
    #[serde(default)]
    pub cpu_source: Option<CpuSource>,
    /// The whole machine's CPU time in the phase (`/proc/stat`, raw): the
    /// process's plus kswapd's, write-back's and interrupts'.
    #[serde(default)]
    pub system_cpu_user_s: Option<f64>,
    #[serde(default)]
    pub system_cpu_sys_s: Option<f64>,
    #[serde(default)]
    pub system_iowait_s: Option<f64>,
    /// Milliseconds per second the host took this machine's CPUs for
    /// something else, summed over CPUs (see `metrics::parse_steal_ticks`).
    #[serde(default)]
    pub steal_ms_per_s: Option<f64>,
    /// Milliseconds per second of CPU that other processes on the machine
    /// used (summed over CPUs): work beside the benchmark's own.
    #[serde(default)]
    pub other_cpu_ms_per_s: Option<f64>,
    /// The longest time in the phase the device held requests and
    /// completed none, ms (see `device_stall`).
    #[serde(default)]
    pub device_longest_stall_ms: Option<f64>,
    /// The longest part of such a stall that the data completed at its
    /// end does not explain, ms (see `device_stall::held_ms`): the device
    /// sitting on work it could have finished.
    #[serde(default)]
    pub device_longest_held_ms: Option<f64>,
    /// Milliseconds per second the device spent so stalled.
    #[serde(default)]
    pub device_stalled_ms_per_s: Option<f64>,
}

/// Run notes on a phase's CPU figures: when the worker was handed a
/// cpuacct cgroup (`cfg`, as the runner set it) but its CPU did not come
/// from there, and when the tick-sampled user + system time strays from
/// the exact runtime (a load in step with the tick; see `cpu`).
pub fn cpu_notes(cfg: &SamplerConfig, phase: &PhaseMetrics) -> Vec<String> {
    let mut notes = Vec::new();
    if cfg.cpuacct_dir.is_some() && phase.cpu_source != Some(CpuSource::Cpuacct) {
        notes.push(
            "the worker was not in its cpuacct cgroup: CPU times come from /proc/self/stat, which the kernel rescales".to_string(),
        );
    }
    if let (Some(u), Some(s), Some(run)) = (phase.cpu_user_s, phase.cpu_sys_s, phase.cpu_run_s) {
        if split_strays(u + s, run) {
            notes.push(format!(
                "CPU user + system by tick samples is {:.2} s but the process ran {run:.2} s on a CPU: the load ran in step with the kernel's tick, so this run's user/system split (and the machine's) is not usable; its exact CPU time is the {run:.2} s",
                u + s
            ));
        }
    }
    notes
}

/// Whether `ticks` seconds of sampled CPU time are too far from the exact
/// `run` seconds to trust (beyond a quarter, once there is enough to judge).
pub fn split_strays(ticks: f64, run: f64) -> bool {
    run.max(ticks) >= 0.5 && (ticks - run).abs() > 0.25 * run.max(ticks)
}

/// Metrics of the phase from `samples[from]` to `samples[to]`.
pub fn phase_metrics(samples: &[Sample], from: usize, to: usize) -> PhaseMetrics {
    let (a, b) = (&samples[from], &samples[to]);
    let secs = (b.t_s - a.t_s).max(1e-9);
    let rate = |x: u64, y: u64| y.saturating_sub(x) as f64 / secs;
    let refaults = match (&a.memcg, &b.memcg) {
        (Some(x), Some(y)) => rate(x.workingset_refault_file, y.workingset_refault_file),
        _ => rate(
            a.vmstat.workingset_refault_file,
            b.vmstat.workingset_refault_file,
        ),
    };
    let inside = &samples[from..=to];
    let mean = |f: &dyn Fn(&MemoryStat) -> u64| -> Option<f64> {
        let v: Vec<f64> = inside
            .iter()
            .filter_map(|s| s.memcg.as_ref().map(|m| f(m) as f64))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let tck = clock_ticks_per_sec();
    let (cpu, source) = match (&a.cpuacct, &b.cpuacct, &a.cpu, &b.cpu) {
        (Some(x), Some(y), _, _) => (Some(y.since(x)), CpuSource::Cpuacct),
        (_, _, Some(x), Some(y)) => {
            let user_s = y.utime_ticks.saturating_sub(x.utime_ticks) as f64 / tck;
            let sys_s = y.stime_ticks.saturating_sub(x.stime_ticks) as f64 / tck;
            (
                Some(CpuTimes {
                    user_s,
                    sys_s,
                    // The rescaled pair adds up to the runtime.
                    run_s: user_s + sys_s,
                }),
                CpuSource::ProcStatRescaled,
            )
        }
        _ => (None, CpuSource::ProcStatRescaled),
    };
    let stalls = a.device_stalls.map(|first| {
        let later: Vec<DeviceStalls> = samples[from + 1..=to]
            .iter()
            .filter_map(|s| s.device_stalls)
            .collect();
        phase_stalls(&first, &later, secs)
    });
    let system = |f: &dyn Fn(&SystemCpuTicks) -> u64| match (&a.system_cpu, &b.system_cpu) {
        (Some(x), Some(y)) => Some(f(y).saturating_sub(f(x)) as f64 / tck),
        _ => None,
    };
    PhaseMetrics {
        seconds: secs,
        dirty_pages_per_s: rate(a.vmstat.nr_dirtied, b.vmstat.nr_dirtied),
        written_pages_per_s: rate(a.vmstat.nr_written, b.vmstat.nr_written),
        pgscan_file_per_s: rate(a.vmstat.pgscan_file, b.vmstat.pgscan_file),
        pgsteal_file_per_s: rate(a.vmstat.pgsteal_file, b.vmstat.pgsteal_file),
        refaults_per_s: refaults,
        stall_us_per_s: match (&a.psi, &b.psi) {
            (Some(x), Some(y)) => Some(rate(x.some_total_us, y.some_total_us)),
            _ => None,
        },
        active_file_bytes: mean(&|m| m.active_file),
        inactive_file_bytes: mean(&|m| m.inactive_file),
        device: match (&a.block, &b.block) {
            (Some(x), Some(y)) => Some(device_rates(x, y, secs)),
            _ => None,
        },
        cpu_user_s: cpu.map(|c| c.user_s),
        cpu_sys_s: cpu.map(|c| c.sys_s),
        cpu_run_s: cpu.map(|c| c.run_s),
        cpu_source: cpu.map(|_| source),
        system_cpu_user_s: system(&|t| t.user),
        system_cpu_sys_s: system(&|t| t.sys),
        system_iowait_s: system(&|t| t.iowait),
        steal_ms_per_s: match (a.steal_ticks, b.steal_ticks) {
            (Some(x), Some(y)) => Some(y.saturating_sub(x) as f64 / tck * 1000.0 / secs),
            _ => None,
        },
        other_cpu_ms_per_s: match (a.other_cpu_ticks, b.other_cpu_ticks) {
            (Some(x), Some(y)) => Some(y.saturating_sub(x) as f64 / tck * 1000.0 / secs),
            _ => None,
        },
        device_longest_stall_ms: stalls.map(|s| s.longest_ms),
        device_longest_held_ms: stalls.map(|s| s.longest_held_ms),
        device_stalled_ms_per_s: stalls.map(|s| s.stalled_ms_per_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, dirtied: u64, refault: u64, psi: u64, active: u64) -> Sample {
        Sample {
            t_s: t,
            phase: "p".into(),
            vmstat: Vmstat {
                nr_dirtied: dirtied,
                ..Default::default()
            },
            memcg: Some(MemoryStat {
                workingset_refault_file: refault,
                active_file: active,
                ..Default::default()
            }),
            psi: Some(Psi {
                some_total_us: psi,
                full_total_us: 0,
            }),
            block: None,
            cpu: None,
            cpuacct: None,
            system_cpu: None,
            io: None,
            steal_ticks: Some(dirtied / 10),
            other_cpu_ticks: Some(dirtied / 5),
            device_stalls: None,
            extra: serde_json::Value::Null,
        }
    }

    #[test]
    fn phase_rates_from_deltas() {
        let s = vec![
            sample(0.0, 100, 10, 0, 100),
            sample(1.0, 150, 20, 500, 200),
            sample(2.0, 300, 50, 2000, 300),
        ];
        let m = phase_metrics(&s, 0, 2);
        assert_eq!(m.seconds, 2.0);
        assert_eq!(m.dirty_pages_per_s, 100.0);
        assert_eq!(m.refaults_per_s, 20.0);
        assert_eq!(m.stall_us_per_s, Some(1000.0));
        // 20 ticks of steal over 2 s.
        let ms = 20.0 / clock_ticks_per_sec() * 1000.0 / 2.0;
        assert_eq!(m.steal_ms_per_s, Some(ms));
        assert_eq!(m.other_cpu_ms_per_s, Some(2.0 * ms));
        assert_eq!(m.active_file_bytes, Some(200.0));
        assert!(m.device.is_none());
    }

    /// The raw cgroup times win over the rescaled `/proc/self/stat` ones,
    /// which are used only without a cgroup; the machine's times are
    /// differences of `/proc/stat` ticks.
    #[test]
    fn phase_cpu_prefers_the_raw_counters() {
        let tck = clock_ticks_per_sec();
        let with = |t: f64, stime: u64, raw: Option<(f64, f64)>, sys_ticks: u64| Sample {
            cpu: Some(ProcCpu {
                utime_ticks: 0,
                stime_ticks: stime,
            }),
            cpuacct: raw.map(|(user_s, sys_s)| CpuTimes {
                user_s,
                sys_s,
                run_s: user_s + sys_s,
            }),
            system_cpu: Some(SystemCpuTicks {
                sys: sys_ticks,
                ..Default::default()
            }),
            ..sample(t, 0, 0, 0, 0)
        };
        // The rescaled counter stood still over a phase the raw one saw
        // spend 3 s in the kernel: what E5's open loop hit.
        let s = vec![
            with(0.0, 500, Some((1.0, 2.0)), 0),
            with(10.0, 500, Some((1.5, 5.0)), 4 * tck as u64),
        ];
        let m = phase_metrics(&s, 0, 1);
        assert_eq!(m.cpu_source, Some(CpuSource::Cpuacct));
        assert_eq!((m.cpu_user_s, m.cpu_sys_s), (Some(0.5), Some(3.0)));
        assert_eq!(m.cpu_run_s, Some(3.5));
        let cfg = SamplerConfig {
            cpuacct_dir: Some("/x".into()),
            ..Default::default()
        };
        assert!(cpu_notes(&cfg, &m).is_empty());
        // Aliased: ticks saw a whole CPU where the process ran 2 s.
        let aliased = PhaseMetrics {
            cpu_user_s: Some(58.3),
            cpu_sys_s: Some(1.3),
            cpu_run_s: Some(2.0),
            ..m.clone()
        };
        let notes = cpu_notes(&cfg, &aliased);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("in step with the kernel's tick"),
            "{notes:?}"
        );
        assert!(!split_strays(0.3, 0.1), "too little to judge");
        assert!(split_strays(0.05, 2.0));
        assert!(!split_strays(10.0, 11.0));
        assert_eq!(m.system_cpu_sys_s, Some(4.0));
        let s = vec![
            with(0.0, 500, None, 0),
            with(10.0, 500 + tck as u64, None, 0),
        ];
        let m = phase_metrics(&s, 0, 1);
        assert_eq!(m.cpu_source, Some(CpuSource::ProcStatRescaled));
        assert_eq!(m.cpu_sys_s, Some(1.0));
        assert_eq!(cpu_notes(&cfg, &m).len(), 1, "not in its cgroup");
        let m = phase_metrics(&[sample(0.0, 0, 0, 0, 0), sample(1.0, 0, 0, 0, 0)], 0, 1);
        assert_eq!((m.cpu_sys_s, m.cpu_source), (None, None));
    }

    #[test]
    fn sampler_marks_and_samples() {
        let _cpus = crate::loadgen::cpus_shared();
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let c = calls.clone();
        let extra: ExtraFn = Arc::new(
            move || serde_json::json!({"n": c.fetch_add(1, std::sync::atomic::Ordering::SeqCst)}),
        );
        // Every sample calls `extra` once: waiting for its count to grow
        // waits for the sampling thread, however late it runs, instead of
        // guessing how many samples a fixed sleep gets.
        let taken = || calls.load(std::sync::atomic::Ordering::SeqCst);
        let wait_for = |n: u64| {
            let t = std::time::Instant::now();
            while taken() < n {
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "only {} samples in a minute",
                    taken()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        let s = Sampler::start(
            SamplerConfig {
                interval_ms: 20,
                ..Default::default()
            },
            "warmup",
            Some(extra),
        );
        // The first sample, then two of the thread's.
        wait_for(3);
        let i = s.mark("measured");
        // Two more of the thread's in the measured phase. (A sample being
        // taken when the count goes up is stored before the mark.)
        wait_for(taken() + 2);
        let j = s.mark("end");
        let samples = s.stop();
        assert!(samples.len() >= 7, "{}", samples.len());
        assert!(i >= 3 && j >= i + 3, "marks at {i} and {j}");
        assert!(samples[..i].iter().all(|x| x.phase == "warmup"));
        assert_eq!(samples[i].phase, "measured");
        assert!(samples[i + 1..j].iter().all(|x| x.phase == "measured"));
        assert_eq!(samples[j].phase, "end");
        assert!(samples.windows(2).all(|w| w[0].t_s <= w[1].t_s));
        assert!(samples[j].extra["n"].as_u64().unwrap() > 0);
        let m = phase_metrics(&samples, i, j);
        // The phase runs from one mark to the other.
        assert!(samples[j].t_s > samples[i].t_s);
        assert!((m.seconds - (samples[j].t_s - samples[i].t_s)).abs() < 1e-9);
        assert!(m.cpu_user_s.is_some());
    }
}
