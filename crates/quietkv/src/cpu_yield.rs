//! Background loops give the CPU away every so often.
//!
//! A compaction whose I/O goes through io_uring with O_DIRECT almost never
//! blocks: it runs on the CPU for as long as it has input. Linux's EEVDF
//! scheduler then protects it for a whole slice (`base_slice` 0.75 ms times
//! 1 + log2(CPUs): 1.5 ms on 2 CPUs) against user threads that wake up on
//! its CPU, whatever their nice values. Measured with readers of a hot set
//! running while a full compaction rewrites the database (`auto` modes,
//! 2 CPUs): the readers' requests were issued 1.5 ms late at p99, steadily,
//! while buffered compaction, which blocks in the page cache all the time,
//! left them on time. Lowering the compaction thread's nice value changed
//! nothing; a `sched_yield` at least every 50 us of merging brought the
//! readers' p99 lateness to a few microseconds at the same compaction
//! speed.
//!
//! `sched_yield` costs a system call of well under a microsecond when
//! nothing else wants the CPU, so the loops check the clock every
//! [`CHECK_BYTES`] of input (or [`CHECK_ENTRIES`] entries) and yield once
//! the interval has passed.

use std::time::{Duration, Instant};

/// Bytes of keys and values between looks at the clock.
const CHECK_BYTES: usize = 16 << 10;
/// Entries between looks at the clock, for small entries.
const CHECK_ENTRIES: u32 = 64;

/// Decides when a background loop yields the CPU: call
/// [`entry`](Self::entry) once per key-value passed, written or dropped.
pub(crate) struct CpuYield {
    every: Option<Duration>,
    last: Instant,
    bytes: usize,
    entries: u32,
    yields: u64,
}

impl CpuYield {
    /// Yields every `every_us` microseconds of work; 0 never yields.
    pub(crate) fn every_micros(every_us: u64) -> CpuYield {
        CpuYield {
            every: (every_us > 0).then(|| Duration::from_micros(every_us)),
            last: Instant::now(),
            bytes: 0,
            entries: 0,
            yields: 0,
        }
    }

    /// Counts one entry of `bytes`; yields if the interval has passed.
    /// Returns whether it yielded.
    #[inline]
    pub(crate) fn entry(&mut self, bytes: usize) -> bool {
        let Some(every) = self.every else {
            return false;
        };
        self.bytes += bytes;
        self.entries += 1;
        if self.bytes < CHECK_BYTES && self.entries < CHECK_ENTRIES {
            return false;
        }
        self.bytes = 0;
        self.entries = 0;
        let now = Instant::now();
        if now.duration_since(self.last) < every {
            return false;
        }
        std::thread::yield_now();
        self.yields += 1;
        self.last = Instant::now();
        true
    }

    /// How many times it yielded.
    pub(crate) fn yields(&self) -> u64 {
        self.yields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yields_only_once_the_interval_has_passed() {
        // Within the interval: many entries, no yield (a long interval, so
        // a preempted test thread cannot pass it).
        let mut slow = CpuYield::every_micros(1_000_000);
        for _ in 0..1000 {
            assert!(!slow.entry(100));
        }
        assert_eq!(slow.yields(), 0);
        let mut y = CpuYield::every_micros(1_000);
        std::thread::sleep(Duration::from_millis(3));
        // The clock is looked at only every CHECK_ENTRIES small entries.
        let yielded = (0..CHECK_ENTRIES).filter(|_| y.entry(1)).count();
        assert_eq!(yielded, 1);
        assert_eq!(y.yields(), 1);
        // Large entries: looked at on every one past CHECK_BYTES.
        std::thread::sleep(Duration::from_millis(3));
        assert!(y.entry(CHECK_BYTES));
        assert_eq!(y.yields(), 2);
    }

    #[test]
    fn zero_never_yields() {
        let mut y = CpuYield::every_micros(0);
        std::thread::sleep(Duration::from_millis(1));
        for _ in 0..10_000 {
            assert!(!y.entry(1 << 20));
        }
        assert_eq!(y.yields(), 0);
    }
}
