//! Stalls of the disk under the benchmark: stretches of time in which the
//! device held requests and completed none of them.
//!
//! On a virtual machine the disk is the host's. When the host's own
//! storage stalls (its cache writing back, another guest's I/O), requests
//! this machine has already handed to the device wait tens or hundreds of
//! milliseconds, whatever the engine asked of it. CPU steal does not show
//! it, and the mean device latency hardly moves: a few waits of 300 ms
//! among a hundred thousand of 0.2 ms. A busy device still completes a
//! request every few milliseconds; a device that completes nothing while
//! requests are outstanding is not doing the benchmark's work. So a thread
//! polls `/sys/block/DEV/stat` every [`POLL_INTERVAL`] and measures those
//! stretches: requests in flight at both ends, no completion between.
//!
//! Requests the guest holds back itself (in its I/O scheduler, in the
//! write-back throttle) are not in flight at the device, so an engine that
//! floods the queue mostly makes the device busy, not stalled; but what
//! the device legitimately takes long over does count: the kernel writing
//! back a flood of dirty pages hands the device tens of 4 MiB requests at
//! once, and this machine's disk then completed nothing for 20-156 ms and
//! everything at the end, 32-260 MiB in one poll: 1.4-3.0 GiB/s over the
//! stall, as fast as it ever writes. Such a stall is the run's own work,
//! not the host's. So each stall is also measured by what its own queue
//! explains: its length less the time the device needs, at
//! [`DRAIN_MIB_PER_S`], to complete the data that completed when it
//! ended. What is left ([`DeviceStalls::longest_held_ms`]) is the time
//! the device sat on requests it could have finished, which is what
//! `crate::disturbance` holds a run to.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::metrics::{parse_block_stat, BlockStat};

/// How often the watch reads the device's counters: the shortest stall it
/// can see. One read of the stat file costs a few microseconds.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The rate at which a stall's own queue is taken to drain, MiB/s: below
/// the slowest this machine's disk was seen to drain a queue of large
/// writes (1.4 GiB/s over the 36 stalls of the kernel's write-back of
/// 2 GiB in `docs/results/2026-11-27-device-stalls/drain`, as in two
/// earlier runs of the same probe), so a stall the
/// device's own work explains is excused entirely, and one on a slower
/// disk is excused less, never more.
pub const DRAIN_MIB_PER_S: f64 = 1024.0;

/// What the watch has seen so far, as each sample records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStalls {
    /// Milliseconds of stall so far: the finished stalls and the one going
    /// on.
    pub stalled_ms: f64,
    /// The longest stall that ended since the previous sample, or the one
    /// going on if it is longer.
    pub longest_ms: f64,
    /// Readings of the device's counters so far.
    pub polls: u64,
    /// The longest part of a stall that ended since the previous sample
    /// which its own queue does not explain: its length less the time to
    /// drain, at [`DRAIN_MIB_PER_S`], what completed when it ended.
    #[serde(default)]
    pub longest_held_ms: f64,
    /// How long the stall going on at this sample has lasted (0 if none):
    /// what it will have moved is not known yet.
    #[serde(default)]
    pub ongoing_ms: f64,
}

/// Stall bookkeeping over successive readings of one device.
#[derive(Debug, Default)]
pub struct StallTracker {
    /// The previous reading: time (ms), completions, requests in flight,
    /// sectors moved.
    last: Option<(f64, u64, u64, u64)>,
    /// The stall going on: when it was first seen stuck, and the last
    /// reading that still found it stuck.
    stuck: Option<(f64, f64)>,
    finished_ms: f64,
    longest_since_sample: f64,
    longest_held_since_sample: f64,
    polls: u64,
}

/// Sectors (512 bytes) the device has read and written.
fn sectors(s: &BlockStat) -> u64 {
    s.read_sectors.wrapping_add(s.write_sectors)
}

/// The part of a stall of `len_ms` that the `moved_bytes` completed at
/// its end do not explain: the time left once the device has drained
/// them at [`DRAIN_MIB_PER_S`].
pub fn held_ms(len_ms: f64, moved_bytes: u64) -> f64 {
    let drain_ms = moved_bytes as f64 / (1024.0 * 1024.0) / DRAIN_MIB_PER_S * 1000.0;
    (len_ms - drain_ms).max(0.0)
}

/// Requests of every kind the device has completed.
fn completions(s: &BlockStat) -> u64 {
    s.read_ios
        .wrapping_add(s.write_ios)
        .wrapping_add(s.discard_ios)
        .wrapping_add(s.flush_ios)
}

impl StallTracker {
    /// One reading at `t_ms` (any clock, increasing).
    pub fn observe(&mut self, t_ms: f64, stat: &BlockStat) {
        self.polls += 1;
        let done = completions(stat);
        let moved = sectors(stat);
        if let Some((t0, done0, in_flight0, moved0)) = self.last {
            // A request in flight at both readings with no completion
            // between was outstanding the whole time: any completion,
            // of it or another, would have moved the counter.
            if in_flight0 > 0 && stat.in_flight > 0 && done == done0 {
                let since = self.stuck.map_or(t0, |(s, _)| s);
                self.stuck = Some((since, t_ms));
            } else if let Some((since, until)) = self.stuck.take() {
                // It ended somewhere after `until`; count what was seen.
                let len = until - since;
                self.finished_ms += len;
                self.longest_since_sample = self.longest_since_sample.max(len);
                // Sectors are counted as requests complete: what moved
                // between the last stuck reading and this one is what the
                // stall was holding.
                let held = held_ms(len, moved.wrapping_sub(moved0) * 512);
                self.longest_held_since_sample = self.longest_held_since_sample.max(held);
            }
        }
        self.last = Some((t_ms, done, stat.in_flight, moved));
    }

    /// The figures for a sample; starts the next sample's longest stall.
    pub fn sample(&mut self) -> DeviceStalls {
        let ongoing = self.stuck.map_or(0.0, |(since, until)| until - since);
        let s = DeviceStalls {
            stalled_ms: self.finished_ms + ongoing,
            longest_ms: self.longest_since_sample.max(ongoing),
            polls: self.polls,
            longest_held_ms: self.longest_held_since_sample,
            ongoing_ms: ongoing,
        };
        self.longest_since_sample = 0.0;
        self.longest_held_since_sample = 0.0;
        s
    }
}

/// A phase's stall figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseStalls {
    /// The longest stall, ms.
    pub longest_ms: f64,
    /// The longest part of a stall its own queue does not explain, ms.
    pub longest_held_ms: f64,
    /// Milliseconds per second the device was stalled.
    pub stalled_ms_per_s: f64,
}

/// A phase's figures from its first sample and the `later` ones: the
/// longest stall among `later` (each one's longest since the sample
/// before; the first's belongs to the phase before), and the stalled
/// milliseconds per second between the first and the last. A stall going
/// on at a sample within the phase is judged when it ends, in a later
/// sample; one still going on at the phase's last sample counts as held
/// for all it has lasted, since what it will move is not known.
pub fn phase_stalls(first: &DeviceStalls, later: &[DeviceStalls], secs: f64) -> PhaseStalls {
    let last = later.last().unwrap_or(first);
    let longest = later.iter().map(|s| s.longest_ms).fold(0.0, f64::max);
    let held = later.iter().map(|s| s.longest_held_ms).fold(0.0, f64::max);
    let unfinished = later.last().map_or(0.0, |s| s.ongoing_ms);
    PhaseStalls {
        longest_ms: longest,
        longest_held_ms: held.max(unfinished),
        stalled_ms_per_s: (last.stalled_ms - first.stalled_ms).max(0.0) / secs.max(1e-9),
    }
}

/// A thread polling one device's counters until dropped.
pub struct DeviceWatch {
    tracker: Arc<Mutex<StallTracker>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DeviceWatch {
    /// Watches `/sys/block/<device>/stat`; `None` if it cannot be read.
    pub fn start(device: &str) -> Option<DeviceWatch> {
        let path = PathBuf::from(format!("/sys/block/{device}/stat"));
        let read = move || {
            std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| parse_block_stat(&t))
        };
        let first = read()?;
        let start = Instant::now();
        let tracker = Arc::new(Mutex::new(StallTracker::default()));
        tracker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(0.0, &first);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (tracker, stop) = (tracker.clone(), stop.clone());
            std::thread::Builder::new()
                .name("bench-device-watch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(POLL_INTERVAL);
                        // The time is taken after the read: a reading the
                        // thread was late to take shortens no stall.
                        if let Some(stat) = read() {
                            let t = start.elapsed().as_secs_f64() * 1000.0;
                            tracker
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .observe(t, &stat);
                        }
                    }
                })
                .ok()?
        };
        Some(DeviceWatch {
            tracker,
            stop,
            thread: Some(thread),
        })
    }

    /// The figures for a sample now.
    pub fn sample(&self) -> DeviceStalls {
        self.tracker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sample()
    }
}

impl Drop for DeviceWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(reads: u64, writes: u64, in_flight: u64) -> BlockStat {
        BlockStat {
            read_ios: reads,
            write_ios: writes,
            in_flight,
            ..Default::default()
        }
    }

    /// `stat` with `mib` MiB written so far.
    fn stat_mib(reads: u64, writes: u64, in_flight: u64, mib: u64) -> BlockStat {
        BlockStat {
            write_sectors: mib * 2048,
            ..stat(reads, writes, in_flight)
        }
    }

    #[test]
    fn a_request_held_with_no_completion_is_a_stall() {
        let mut t = StallTracker::default();
        t.observe(0.0, &stat(10, 5, 1));
        t.observe(10.0, &stat(11, 5, 2)); // progress
        t.observe(20.0, &stat(11, 5, 2)); // stuck since 10
        t.observe(30.0, &stat(11, 5, 3)); // still stuck (more queued)
        let going = t.sample();
        assert_eq!((going.stalled_ms, going.longest_ms), (20.0, 20.0));
        t.observe(40.0, &stat(11, 5, 1)); // still stuck: nothing completed
        t.observe(50.0, &stat(12, 5, 1)); // a read completed
        let done = t.sample();
        assert_eq!((done.stalled_ms, done.longest_ms), (30.0, 30.0));
        assert_eq!(done.polls, 6);
        // The next sample starts its longest afresh.
        t.observe(60.0, &stat(13, 6, 1));
        assert_eq!(t.sample().longest_ms, 0.0);
    }

    #[test]
    fn a_stall_its_own_queue_explains_is_not_held() {
        // The kernel's write-back: 30 requests of 4 MiB in flight, nothing
        // for 60 ms, then all of them at once (as measured here).
        let mut t = StallTracker::default();
        t.observe(0.0, &stat_mib(10, 5, 31, 1000));
        t.observe(10.0, &stat_mib(10, 5, 31, 1000));
        t.observe(60.0, &stat_mib(10, 5, 31, 1000));
        t.observe(70.0, &stat_mib(11, 35, 1, 1120));
        let s = t.sample();
        assert_eq!(s.longest_ms, 60.0);
        assert_eq!(s.longest_held_ms, 0.0, "120 MiB take 117 ms to drain");

        // The host: two reads and a 2 MiB write in flight, nothing for
        // 300 ms; the 2 MiB explain 2 ms of it.
        t.observe(80.0, &stat_mib(12, 35, 3, 1120));
        t.observe(380.0, &stat_mib(12, 35, 3, 1120));
        t.observe(390.0, &stat_mib(14, 36, 0, 1122));
        let s = t.sample();
        assert_eq!(s.longest_ms, 300.0);
        assert!((s.longest_held_ms - 298.05).abs() < 0.01, "{s:?}");
    }

    #[test]
    fn a_stall_is_judged_when_it_ends() {
        let mut t = StallTracker::default();
        t.observe(0.0, &stat(1, 1, 1));
        t.observe(10.0, &stat(1, 1, 1));
        t.observe(90.0, &stat(1, 1, 1));
        let going = t.sample();
        assert_eq!((going.ongoing_ms, going.longest_held_ms), (90.0, 0.0));
        t.observe(100.0, &stat(2, 1, 0));
        let done = t.sample();
        assert_eq!((done.ongoing_ms, done.longest_held_ms), (0.0, 90.0));
    }

    #[test]
    fn idle_and_busy_devices_do_not_stall() {
        let mut t = StallTracker::default();
        // Idle: nothing in flight, nothing completed.
        for i in 0..5 {
            t.observe(i as f64 * 10.0, &stat(7, 7, 0));
        }
        // Busy: requests in flight at every reading, completions between.
        for i in 0..5 {
            t.observe(50.0 + i as f64 * 10.0, &stat(100 + i, 50 + i, 32));
        }
        // In flight at one end only: the request came and went.
        t.observe(100.0, &stat(105, 55, 0));
        t.observe(110.0, &stat(105, 55, 4));
        let s = t.sample();
        assert_eq!((s.stalled_ms, s.longest_ms), (0.0, 0.0));
    }

    #[test]
    fn flushes_and_discards_are_completions_too() {
        let mut t = StallTracker::default();
        let with = |flushes: u64, discards: u64| BlockStat {
            flush_ios: flushes,
            discard_ios: discards,
            in_flight: 1,
            ..Default::default()
        };
        t.observe(0.0, &with(0, 0));
        t.observe(10.0, &with(1, 0));
        t.observe(20.0, &with(1, 1));
        assert_eq!(t.sample().stalled_ms, 0.0);
    }

    #[test]
    fn a_phase_takes_its_samples_longest_and_the_stalled_time_between() {
        let at = |stalled_ms: f64, longest_ms: f64| DeviceStalls {
            stalled_ms,
            longest_ms,
            longest_held_ms: longest_ms / 2.0,
            ..Default::default()
        };
        let p = phase_stalls(
            &at(100.0, 90.0),
            &[at(130.0, 30.0), at(180.0, 50.0), at(180.0, 0.0)],
            2.0,
        );
        // The first sample's longest belongs to the phase before.
        assert_eq!(
            (p.longest_ms, p.longest_held_ms, p.stalled_ms_per_s),
            (50.0, 25.0, 40.0)
        );
        let none = phase_stalls(&at(5.0, 5.0), &[], 1.0);
        assert_eq!((none.longest_ms, none.longest_held_ms), (0.0, 0.0));
    }

    #[test]
    fn a_stall_unfinished_when_the_phase_ends_counts_as_held() {
        let going = |ongoing_ms: f64| DeviceStalls {
            longest_ms: ongoing_ms,
            ongoing_ms,
            ..Default::default()
        };
        // Going on at a sample inside the phase: judged later.
        let inside = phase_stalls(&going(0.0), &[going(70.0), going(0.0)], 1.0);
        assert_eq!(inside.longest_held_ms, 0.0);
        // Going on at the phase's last sample: nothing will judge it.
        let at_end = phase_stalls(&going(0.0), &[going(0.0), going(70.0)], 1.0);
        assert_eq!(at_end.longest_held_ms, 70.0);
    }

    #[test]
    fn the_watch_reads_a_real_device() {
        // The benchmark's own source tree is on a disk, as its scratch
        // directories are.
        let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let Some(dev) = crate::metrics::block_device_of(here) else {
            panic!("{} has no block device under /sys/block", here.display())
        };
        let w = DeviceWatch::start(&dev).expect("its stat file reads");
        let t = Instant::now();
        while w.sample().polls < 3 {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the watch never polled"
            );
            std::thread::sleep(POLL_INTERVAL);
        }
    }
}
