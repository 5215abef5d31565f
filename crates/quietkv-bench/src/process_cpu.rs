//! The CPU time of this process, raw where it can be: the experiments
//! that run in the bench's own process (E4, throughput) measure a run by
//! moving the process into a cpuacct cgroup of its own for the run (see
//! [`crate::cpu`] for why the process's own times are not enough).

use crate::cgroup::{cgroups_usable, CpuacctCgroup};
use crate::cpu::{read_cpuacct, CpuSource, CpuTimes};

/// CPU time of this process, from a cpuacct cgroup it moves itself into
/// when it can (and out of, on drop), else from `getrusage`. One at a time
/// per process: a second `start` waits for the first to be dropped, since
/// a process can be in only one cpuacct cgroup.
pub struct ProcessCpu {
    // Dropped first: the process leaves the cgroup before the next
    // ProcessCpu may move it.
    cgroup: Option<CpuacctCgroup>,
    /// Why there is no cgroup, for the report.
    why_not: Option<String>,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl ProcessCpu {
    pub fn start() -> ProcessCpu {
        static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::process::id();
        let made = cgroups_usable()
            .and_then(|()| CpuacctCgroup::create())
            .and_then(|mut cg| cg.add_pid(me).map(|()| cg))
            .and_then(|cg| {
                if cg.holds(me) {
                    Ok(cg)
                } else {
                    Err(format!(
                        "this process did not stay in {}",
                        cg.dir().display()
                    ))
                }
            });
        let (cgroup, why_not) = match made {
            Ok(cg) => (Some(cg), None),
            Err(e) => (None, Some(e)),
        };
        ProcessCpu {
            cgroup,
            why_not,
            _turn: turn,
        }
    }

    /// CPU time so far (of this process since it joined the cgroup, or
    /// since it started).
    pub fn read(&self) -> CpuTimes {
        if let Some(t) = self.cgroup.as_ref().and_then(|c| read_cpuacct(c.dir())) {
            return t;
        }
        // Rescaled so that the two add up to the process's runtime.
        let (user_s, sys_s) = crate::process::process_cpu_seconds();
        CpuTimes {
            user_s,
            sys_s,
            run_s: user_s + sys_s,
        }
    }

    pub fn source(&self) -> CpuSource {
        match self.cgroup {
            Some(_) => CpuSource::Cpuacct,
            None => CpuSource::ProcStatRescaled,
        }
    }

    /// Why the raw source could not be used, if it could not.
    pub fn why_not_raw(&self) -> Option<&str> {
        self.why_not.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_reads_monotonic_times_and_says_its_source() {
        let cpu = ProcessCpu::start();
        if std::env::var_os("CI").is_some() {
            assert_eq!(
                cpu.source(),
                CpuSource::Cpuacct,
                "CI runs as root with v1 cpuacct: {:?}",
                cpu.why_not_raw()
            );
        }
        let a = cpu.read();
        // Work until the times grow: counted in ticks, they may stand still
        // for a while, longer when the machine is busy and this thread
        // waits for a CPU; a minute is far more than a tick.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        let mut b = cpu.read();
        while b.user_s + b.sys_s <= a.user_s + a.sys_s {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(60),
                "a minute of work counted no CPU time: {a:?} -> {b:?}"
            );
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            b = cpu.read();
        }
        assert!(b.user_s >= a.user_s && b.sys_s >= a.sys_s, "{a:?} -> {b:?}");
    }
}
