//! Holds the snapshots a node sends to a bytes-per-second budget, as
//! TiKV's `snap-io-max-bytes-per-sec` and RocksDB's backup rate limit do.
//!
//! A snapshot stream to a joining node competes with the node's own
//! readers for the CPUs (reading the file, copying each chunk into the
//! socket) even when its I/O leaves the page cache alone; at full speed it
//! can hold a reader up for a chunk's copy many times a second. A budget
//! spreads the same bytes over a longer time, so fewer reads meet a chunk
//! in flight. Every stream of the node shares one budget.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A shared budget of bytes per second; [`wait`](Pacer::wait) returns when
/// the next chunk may go.
#[derive(Debug)]
pub struct Pacer {
    bytes_per_sec: u64,
    /// The instant the budget is spent up to: the next chunk may start
    /// then, or now if that has passed.
    spent_until: Mutex<Option<Instant>>,
}

impl Pacer {
    /// A budget of `bytes_per_sec`, which must be positive.
    pub fn new(bytes_per_sec: u64) -> Pacer {
        assert!(bytes_per_sec > 0, "a pacer needs a positive rate");
        Pacer {
            bytes_per_sec,
            spent_until: Mutex::new(None),
        }
    }

    /// When a chunk of `bytes` asked for at `now` may start, and books its
    /// share of the budget. A chunk never waits for itself: the first one
    /// goes at once, and each one after it waits out the time the one
    /// before it was worth, so the average rate stays at the budget with
    /// at most one chunk's burst. Time the stream spent idle is not saved
    /// up for later.
    pub fn book(&self, now: Instant, bytes: u64) -> Instant {
        let cost = Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec as f64);
        let mut spent = self
            .spent_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let start = match *spent {
            Some(until) if until > now => until,
            _ => now,
        };
        *spent = Some(start + cost);
        start
    }

    /// Waits until a chunk of `bytes` may go.
    pub async fn wait(&self, bytes: u64) {
        let start = self.book(Instant::now(), bytes);
        tokio::time::sleep_until(start.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn chunks_are_spaced_by_what_the_one_before_was_worth() {
        let pacer = Pacer::new(4 * MIB);
        let t0 = Instant::now();
        // Four 1 MiB chunks asked for at once: 0, 0.25, 0.5, 0.75 s.
        let starts: Vec<Duration> = (0..4).map(|_| pacer.book(t0, MIB) - t0).collect();
        let ms: Vec<u128> = starts.iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, vec![0, 250, 500, 750]);
    }

    #[test]
    fn idle_time_is_not_saved_up() {
        let pacer = Pacer::new(MIB);
        let t0 = Instant::now();
        assert_eq!(pacer.book(t0, MIB), t0);
        // Asked for 10 s later, long after the first was paid for: at once,
        // and the one after it still waits a second.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(pacer.book(later, MIB), later);
        assert_eq!(pacer.book(later, MIB), later + Duration::from_secs(1));
    }

    #[test]
    fn a_chunk_asked_for_inside_the_budget_waits_for_it() {
        let pacer = Pacer::new(2 * MIB);
        let t0 = Instant::now();
        pacer.book(t0, 2 * MIB); // worth 1 s
        let asked = t0 + Duration::from_millis(300);
        assert_eq!(pacer.book(asked, MIB), t0 + Duration::from_secs(1));
    }

    #[tokio::test]
    async fn waiting_holds_a_stream_to_its_rate() {
        // 5 chunks of 64 KiB at 640 KiB/s: the fifth may not start before
        // 0.4 s (a lower bound only, so a busy machine cannot fail it).
        let pacer = Pacer::new(640 << 10);
        let t0 = Instant::now();
        for _ in 0..5 {
            pacer.wait(64 << 10).await;
        }
        assert!(t0.elapsed() >= Duration::from_millis(400));
    }
}
