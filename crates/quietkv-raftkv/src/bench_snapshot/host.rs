//! What the machine did while a run measured: the host's CPU steal, other
//! processes' CPU and the disk's stalls, taken at each phase's start and
//! end and judged by the engine benchmark's rule for disturbed runs
//! (`quietkv_bench::disturbance`). On a shared virtual machine the host
//! can stop this machine's CPUs or its disk for a second at a time; the
//! leader's readers then fall behind whatever the snapshot does, and one
//! such run can move a mode's median by orders of magnitude.

use std::path::Path;
use std::time::Instant;

use quietkv_bench::device_stall::{phase_stalls, DeviceStalls, DeviceWatch};
use quietkv_bench::disturbance::HostSigns;
use quietkv_bench::metrics::{
    block_device_of, clock_ticks_per_sec, read_other_processes_cpu_ticks, read_steal_ticks,
};

/// Watches the disk under the bench directory (polled every 10 ms, for
/// stalls shorter than a phase) for the length of a run.
pub struct HostWatch {
    device: Option<DeviceWatch>,
}

/// The machine's counters at one instant.
#[derive(Debug, Clone, Copy)]
pub struct HostMark {
    at: Instant,
    steal_ticks: Option<u64>,
    other_cpu_ticks: Option<u64>,
    stalls: Option<DeviceStalls>,
}

impl HostWatch {
    /// Starts watching the disk `dir` is on; without one (tmpfs), only
    /// the CPU is judged.
    pub fn start(dir: &Path) -> HostWatch {
        HostWatch {
            device: block_device_of(dir).and_then(|d| DeviceWatch::start(&d)),
        }
    }

    /// The counters now. `ours`: the processes of the run (this one, the
    /// leader, the joiner once it runs), whose CPU is not another's.
    pub fn mark(&self, ours: &[u32]) -> HostMark {
        let mut skip = ours.to_vec();
        // Whoever started the bench (a shell, a script) waits for it.
        skip.push(std::os::unix::process::parent_id());
        HostMark {
            at: Instant::now(),
            steal_ticks: read_steal_ticks(),
            other_cpu_ticks: read_other_processes_cpu_ticks(&skip),
            stalls: self.device.as_ref().map(DeviceWatch::sample),
        }
    }
}

/// What the machine showed between `start` and `end`. Marks must be taken
/// in order from one watch: a device sample reports the longest stall
/// since the one before it.
pub fn signs(start: &HostMark, end: &HostMark) -> HostSigns {
    let secs = end.at.duration_since(start.at).as_secs_f64().max(1e-9);
    let per_sec = |a: Option<u64>, b: Option<u64>| {
        Some(b?.saturating_sub(a?) as f64 / clock_ticks_per_sec() * 1000.0 / secs)
    };
    let stalls = match (start.stalls, end.stalls) {
        (Some(a), Some(b)) => Some(phase_stalls(&a, &[b], secs)),
        _ => None,
    };
    HostSigns {
        steal_ms_per_s: per_sec(start.steal_ticks, end.steal_ticks),
        other_cpu_ms_per_s: per_sec(start.other_cpu_ticks, end.other_cpu_ticks),
        device_longest_stall_ms: stalls.map(|s| s.longest_ms),
        device_longest_held_ms: stalls.map(|s| s.longest_held_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietkv_bench::disturbance::Rule;

    /// Other processes' CPU over `ms` milliseconds, `ours` left out.
    fn other_cpu_over(watch: &HostWatch, ours: &[u32], ms: u64) -> HostSigns {
        let start = watch.mark(ours);
        std::thread::sleep(std::time::Duration::from_millis(ms));
        signs(&start, &watch.mark(ours))
    }

    #[test]
    fn a_busy_process_beside_the_run_disturbs_it_unless_it_is_the_runs_own() {
        let watch = HostWatch::start(Path::new("/"));
        let mut busy = std::process::Command::new("/bin/sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let me = std::process::id();
        let as_ours = other_cpu_over(&watch, &[me, busy.id()], 1500);
        let as_other = other_cpu_over(&watch, &[me], 1500);
        busy.kill().unwrap();
        busy.wait().unwrap();
        let (ours_ms, other_ms) = (
            as_ours.other_cpu_ms_per_s.unwrap(),
            as_other.other_cpu_ms_per_s.unwrap(),
        );
        assert!(
            other_ms > ours_ms + 300.0,
            "a spinning process counted {other_ms:.0} ms/s as another's, {ours_ms:.0} as ours"
        );
        let why = Rule::default().host_reasons("stream", &as_other);
        assert!(why.iter().any(|w| w.contains("other processes")), "{why:?}");
        assert!(as_other.steal_ms_per_s.is_some());
    }
}
