//! CPU time that the kernel does not rescale.
//!
//! A process's user and system time in `/proc/PID/stat` and `getrusage` are
//! not the tick counts the scheduler accumulated: the kernel scales them so
//! that they add up to the precise runtime, and clamps each so it never
//! decreases (`cputime_adjust`). After a phase with a high share of system
//! time, a later phase with a lower share can show no system time at all:
//! E5's open-loop runs reported 0.0 s after a CPU-heavy warm-up. A
//! difference of two such readings is not the phase's CPU time.
//!
//! Two sources are raw: the v1 cpuacct controller's `cpuacct.usage_user`
//! and `cpuacct.usage_sys` (nanoseconds, for the processes in one cgroup;
//! see [`crate::cgroup::CpuacctCgroup`]) and the `cpu` line of `/proc/stat`
//! (ticks, whole machine, so it includes kswapd and write-back workers).
//! The benchmark records both; [`crate::process_cpu::ProcessCpu`] measures
//! its own process.
//!
//! Raw is not the same as exact: both raw splits are tick samples. Each
//! timer tick (4 ms at HZ=250) charges a whole tick to whatever the CPU is
//! doing at that instant, and an idle CPU takes no ticks. That is unbiased
//! for a busy or irregular load, but a load that runs in short bursts on a
//! fixed period that divides the tick's (E5's open loop: 2,000 reads/s is
//! one read every 500 us, eight per tick) is sampled at the same point of
//! its cycle every time, and its user/system split can read as anything
//! from zero to a whole CPU. `cpuacct.usage` (the scheduler's own runtime,
//! in ns) has no such error, so it is recorded as [`CpuTimes::run_s`] and a
//! split that disagrees with it is flagged (`sampler::cpu_notes`).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// User and system CPU seconds of a set of processes so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// Tick-sampled user time.
    pub user_s: f64,
    /// Tick-sampled system time.
    pub sys_s: f64,
    /// Time on a CPU as the scheduler measured it (exact, not sampled).
    #[serde(default)]
    pub run_s: f64,
}

impl CpuTimes {
    /// CPU time from `earlier` to `self`; a counter that went backwards (it
    /// cannot, for the raw sources) counts as zero.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            run_s: (self.run_s - earlier.run_s).max(0.0),
        }
    }
}

/// Where a [`CpuTimes`] came from, as named in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuSource {
    /// `cpuacct.usage_user` / `cpuacct.usage_sys` of a cgroup holding only
    /// the measured process: raw.
    Cpuacct,
    /// `/proc/PID/stat` or `getrusage`: rescaled by the kernel, so per-phase
    /// differences can be wrong (a phase's system time can read as 0).
    ProcStatRescaled,
}

impl CpuSource {
    /// One line for a report saying where the CPU columns came from, given
    /// every run's source.
    pub fn describe(sources: &[CpuSource]) -> &'static str {
        if sources.is_empty() {
            ""
        } else if sources.iter().all(|s| *s == CpuSource::Cpuacct) {
            "CPU columns: the run's own cpuacct cgroup (cpuacct.usage_user / usage_sys), raw tick counts."
        } else {
            "CPU columns: some runs had no cpuacct cgroup (not root, or no v1 cpuacct hierarchy) and read getrusage, which the kernel rescales over the whole process: their user/system split can be wrong."
        }
    }
}

/// Parses three cpuacct files, `usage_user`, `usage_sys` and `usage`
/// (nanoseconds).
pub fn parse_cpuacct(usage_user: &str, usage_sys: &str, usage: &str) -> Option<CpuTimes> {
    let ns = |s: &str| s.trim().parse::<u64>().ok().map(|n| n as f64 / 1e9);
    Some(CpuTimes {
        user_s: ns(usage_user)?,
        sys_s: ns(usage_sys)?,
        run_s: ns(usage)?,
    })
}

/// The raw CPU times of the cpuacct cgroup directory `dir`.
pub fn read_cpuacct(dir: &Path) -> Option<CpuTimes> {
    parse_cpuacct(
        &std::fs::read_to_string(dir.join("cpuacct.usage_user")).ok()?,
        &std::fs::read_to_string(dir.join("cpuacct.usage_sys")).ok()?,
        &std::fs::read_to_string(dir.join("cpuacct.usage")).ok()?,
    )
}

/// The whole machine's CPU time by kind, from the `cpu` line of
/// `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemCpuTicks {
    /// user + nice.
    pub user: u64,
    /// system + irq + softirq: all time in the kernel, whichever task or
    /// interrupt it served.
    pub sys: u64,
    pub iowait: u64,
    pub idle: u64,
}

/// Parses the `cpu` line of `/proc/stat`.
pub fn parse_system_cpu(proc_stat: &str) -> Option<SystemCpuTicks> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq [steal guest guest_nice]
    if f.len() < 7 {
        return None;
    }
    Some(SystemCpuTicks {
        user: f[0] + f[1],
        sys: f[2] + f[5] + f[6],
        iowait: f[4],
        idle: f[3],
    })
}

/// [`parse_system_cpu`] of this machine's `/proc/stat`.
pub fn read_system_cpu() -> Option<SystemCpuTicks> {
    parse_system_cpu(&std::fs::read_to_string("/proc/stat").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuacct_and_proc_stat() {
        let t = parse_cpuacct("1500000000\n", "250000000\n", "1750000000\n").unwrap();
        assert_eq!(
            t,
            CpuTimes {
                user_s: 1.5,
                sys_s: 0.25,
                run_s: 1.75
            }
        );
        assert_eq!(parse_cpuacct("x", "1", "1"), None);
        assert_eq!(parse_cpuacct("1", "1", ""), None);
        let stat = "cpu  2255 34 2290 22625563 6290 127 456 171 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(
            parse_system_cpu(stat).unwrap(),
            SystemCpuTicks {
                user: 2289,
                sys: 2873,
                iowait: 6290,
                idle: 22625563
            }
        );
        assert_eq!(parse_system_cpu("cpu  1 2 3\n"), None);
        assert_eq!(parse_system_cpu("cpu0 1 2 3 4 5 6 7\n"), None);
        let later = CpuTimes {
            user_s: 2.0,
            sys_s: 0.1,
            run_s: 2.25,
        };
        assert_eq!(
            later.since(&t),
            CpuTimes {
                user_s: 0.5,
                sys_s: 0.0,
                run_s: 0.5
            }
        );
    }
}
