//! What the standard workloads measure around a phase, from the kernel's
//! view of this process: CPU time (the scheduler's exact runtime of every
//! thread, the engine's background threads included), bytes written to
//! the device, peak memory, the database's bytes on disk; and per-operation
//! latency histograms. And what the machine did meanwhile (CPU steal,
//! other processes' CPU, the disk stalling), for judging whether a phase
//! measured the engine or the machine.

use crate::device_stall::{phase_stalls, DeviceStalls, DeviceWatch};
use crate::disturbance::HostSigns;
use crate::process::status_bytes;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// CPU time of the whole process in nanoseconds: every thread's runtime as
/// the scheduler counted it, threads that ended included
/// (`CLOCK_PROCESS_CPUTIME_ID`). Exact, not tick-sampled like getrusage.
pub fn process_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// `write_bytes` of `/proc/self/io`: bytes this process (every thread,
/// ended ones included) caused to be written to a block device, counted
/// when pages are dirtied or written direct.
pub fn device_write_bytes() -> Option<u64> {
    parse_io_field(
        &std::fs::read_to_string("/proc/self/io").ok()?,
        "write_bytes",
    )
}

/// `read_bytes` of `/proc/self/io`: bytes this process (every thread,
/// ended ones included) had read from a block device, page-cache misses,
/// readahead and O_DIRECT reads alike; page-cache hits add nothing.
pub fn device_read_bytes() -> Option<u64> {
    parse_io_field(
        &std::fs::read_to_string("/proc/self/io").ok()?,
        "read_bytes",
    )
}

/// The value of `field` in `/proc/PID/io`'s text.
pub(crate) fn parse_io_field(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// Bytes of page cache charged to this process's memory cgroup now (with
/// a memory limit, the file pages the database can keep cached there);
/// `None` where the cgroup's statistics cannot be read.
pub fn cgroup_page_cache_bytes() -> Option<u64> {
    let stat = std::fs::read_to_string(crate::cgroup::own_memory_stat_file()?).ok()?;
    Some(crate::metrics::parse_memory_stat(&stat).file)
}

/// Resets the process's peak resident set size (`VmHWM`) to its current
/// size, so the next reading is the peak since now. False where the kernel
/// refuses.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `VmHWM` of `/proc/self/status` in bytes: the peak resident set size.
pub fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// `VmRSS` of `/proc/self/status` in bytes: the resident set size now.
pub fn rss_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// Bytes the files under `dir` take on disk (allocated blocks, so sparse
/// or preallocated files count what they hold).
pub fn dir_bytes(dir: &Path) -> Result<u64, String> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for e in rd {
        let e = e.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let md = match e.metadata() {
            Ok(m) => m,
            // A file the engine removed meanwhile holds nothing.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(format!("cannot stat {}: {err}", e.path().display())),
        };
        if md.is_dir() {
            total += dir_bytes(&e.path())?;
        } else {
            total += md.blocks() * 512;
        }
    }
    Ok(total)
}

/// Per-operation latencies in nanoseconds.
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies::new()
    }
}

impl Latencies {
    pub fn new() -> Latencies {
        // 1 ns to an hour at 3 significant digits; longer saturates.
        Latencies(
            Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds"),
        )
    }

    pub fn record(&mut self, d: Duration) {
        self.0.saturating_record(d.as_nanos().max(1) as u64);
    }

    /// Times `f` and records it.
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.record(t.elapsed());
        out
    }

    pub fn merge(&mut self, other: &Latencies) {
        // Same bounds on both sides: adding cannot fail on range.
        let _ = self.0.add(&other.0);
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The `q` quantile in microseconds; `None` with no operation.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        (!self.0.is_empty()).then(|| self.0.value_at_quantile(q) as f64 / 1000.0)
    }
}

/// The poller of the disk the databases are on, for the whole process
/// (one run per process; phases never overlap).
static DEVICE_WATCH: OnceLock<Option<DeviceWatch>> = OnceLock::new();

/// Starts watching the disk that holds `dir` for stalls (once per process;
/// later calls keep the first watch). Without it phases report no stall
/// figures.
pub fn watch_device_of(dir: &Path) {
    DEVICE_WATCH
        .get_or_init(|| crate::metrics::block_device_of(dir).and_then(|d| DeviceWatch::start(&d)));
}

fn device_sample() -> Option<DeviceStalls> {
    DEVICE_WATCH.get()?.as_ref().map(DeviceWatch::sample)
}

/// Every user process's CPU ticks but this one's and its parent's (the
/// bench that started this worker, or the test harness).
fn other_processes_cpu_ticks() -> Option<u64> {
    crate::metrics::read_other_processes_cpu_ticks(&[
        std::process::id(),
        std::os::unix::process::parent_id(),
    ])
}

/// `ticks` of CPU over `secs`, in ms per second.
fn ticks_ms_per_s(ticks: u64, secs: f64) -> Option<f64> {
    let hz = crate::process::clock_ticks_per_sec()?;
    (hz > 0).then(|| ticks as f64 * 1000.0 / hz as f64 / secs.max(1e-9))
}

/// The kernel's counters at a phase's start.
pub struct Probe {
    start: Instant,
    cpu_ns: Option<u64>,
    written: Option<u64>,
    read: Option<u64>,
    peak_reset: bool,
    rss: Option<u64>,
    steal_ticks: Option<u64>,
    other_cpu_ticks: Option<u64>,
    device: Option<DeviceStalls>,
}

/// What a phase cost, from [`Probe::finish`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    pub seconds: f64,
    pub cpu_seconds: Option<f64>,
    pub device_write_bytes: Option<u64>,
    /// Bytes the process read from the device over the phase.
    pub device_read_bytes: Option<u64>,
    /// Page cache charged to the process's memory cgroup at the phase's
    /// end.
    pub page_cache_bytes: Option<u64>,
    /// Peak resident set size since the probe started; `None` where the
    /// peak could not be reset.
    pub peak_rss_bytes: Option<u64>,
    /// Resident set size when the probe started (what earlier runs left
    /// in the allocator included): the peak less this is what the phase
    /// added.
    pub start_rss_bytes: Option<u64>,
    /// What the machine did over the phase: CPU steal (a phase with much
    /// of it ran on a slower machine than its peers' phases), other
    /// processes' CPU, and the disk's stalls (none without a device
    /// watch: [`watch_device_of`]).
    pub host: HostSigns,
}

impl Probe {
    pub fn start() -> Probe {
        let peak_reset = reset_peak_rss();
        Probe {
            start: Instant::now(),
            cpu_ns: process_cpu_ns(),
            written: device_write_bytes(),
            read: device_read_bytes(),
            peak_reset,
            rss: rss_bytes(),
            steal_ticks: crate::metrics::read_steal_ticks(),
            other_cpu_ticks: other_processes_cpu_ticks(),
            // Also ends the watch's previous stretch: the stalls reported
            // at the finish are this phase's.
            device: device_sample(),
        }
    }

    pub fn finish(&self) -> Cost {
        let cpu = process_cpu_ns();
        let written = device_write_bytes();
        let secs = self.start.elapsed().as_secs_f64();
        let stalls = match (&self.device, device_sample()) {
            (Some(first), Some(last)) => Some(phase_stalls(first, &[last], secs)),
            _ => None,
        };
        Cost {
            seconds: secs,
            cpu_seconds: match (self.cpu_ns, cpu) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9),
                _ => None,
            },
            device_write_bytes: match (self.written, written) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            },
            device_read_bytes: match (self.read, device_read_bytes()) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            },
            page_cache_bytes: cgroup_page_cache_bytes(),
            peak_rss_bytes: if self.peak_reset {
                peak_rss_bytes()
            } else {
                None
            },
            start_rss_bytes: self.rss,
            host: HostSigns {
                steal_ms_per_s: match (self.steal_ticks, crate::metrics::read_steal_ticks()) {
                    (Some(a), Some(b)) => ticks_ms_per_s(b.saturating_sub(a), secs),
                    _ => None,
                },
                other_cpu_ms_per_s: match (self.other_cpu_ticks, other_processes_cpu_ticks()) {
                    (Some(a), Some(b)) => ticks_ms_per_s(b.saturating_sub(a), secs),
                    _ => None,
                },
                device_longest_stall_ms: stalls.map(|s| s.longest_ms),
                device_longest_held_ms: stalls.map(|s| s.longest_held_ms),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::status_kib;

    #[test]
    fn proc_files_parse() {
        let io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_io_field(io, "write_bytes"), Some(8192));
        assert_eq!(parse_io_field(io, "read_bytes"), Some(4096));
        // A field whose name only begins another's is not it.
        assert_eq!(parse_io_field(io, "write"), None);
        assert_eq!(parse_io_field("rchar: 1\n", "write_bytes"), None);
        let status = "Name:\tx\nVmPeak:\t  100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n";
        assert_eq!(status_kib(status, "VmHWM:"), Some(2048 * 1024));
        assert_eq!(status_kib(status, "VmRSS:"), Some(1024 * 1024));
        assert_eq!(status_kib("VmHWM:\tlots kB\n", "VmHWM:"), None);
    }

    #[test]
    fn a_probe_counts_this_process_cpu_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let p = Probe::start();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        std::fs::write(dir.path().join("f"), vec![7u8; 1 << 20]).unwrap();
        let c = p.finish();
        assert!(c.seconds > 0.0);
        assert!(c.cpu_seconds.unwrap() > 0.0, "{c:?}");
        // The megabyte is on disk (allocated) whether or not written back.
        assert!(dir_bytes(dir.path()).unwrap() >= 1 << 20);
        assert!(c.device_write_bytes.is_some(), "/proc/self/io is readable");
        // This kernel lets a process reset its own peak: the peak is then
        // at least what was resident at the start.
        assert!(
            c.peak_rss_bytes.unwrap() >= c.start_rss_bytes.unwrap() / 2,
            "{c:?}"
        );
    }

    /// A file read after its pages left the page cache counts as device
    /// reads; read again, cached, it adds nothing.
    #[test]
    fn a_probe_counts_the_device_reads_of_page_cache_misses() {
        use std::io::Read;
        use std::os::unix::io::AsRawFd;
        // Beside the sources, on the machine's disk (/tmp may be tmpfs,
        // which never reads a device).
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 4 << 20]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        f.sync_all().unwrap();
        // SAFETY: plain syscall on a descriptor we own.
        let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(r, 0);
        let read_all = || {
            let mut v = Vec::new();
            std::fs::File::open(&path)
                .unwrap()
                .read_to_end(&mut v)
                .unwrap();
            assert_eq!(v.len(), 4 << 20);
        };
        let p = Probe::start();
        read_all();
        let cold = p.finish();
        assert!(cold.device_read_bytes.unwrap() >= 4 << 20, "{cold:?}");
        // The pages just read are charged to this process's cgroup.
        assert!(cold.page_cache_bytes.unwrap() >= 4 << 20, "{cold:?}");
        let p = Probe::start();
        read_all();
        let warm = p.finish();
        assert!(warm.device_read_bytes.unwrap() < 1 << 20, "{warm:?}");
    }

    #[test]
    fn latencies_give_quantiles_in_microseconds() {
        let mut l = Latencies::new();
        assert_eq!(l.quantile_us(0.5), None);
        for us in 1..=100u64 {
            l.record(Duration::from_micros(us));
        }
        let mut other = Latencies::new();
        other.record(Duration::from_millis(10));
        l.merge(&other);
        assert_eq!(l.count(), 101);
        let p50 = l.quantile_us(0.5).unwrap();
        assert!((50.0..=52.0).contains(&p50), "{p50}");
        assert!(l.quantile_us(1.0).unwrap() >= 9_990.0);
    }
}
