//! A token-bucket rate limiter for background bytes, shared by every
//! background reader and writer of one database.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Limits bytes per second across threads. A rate of 0 means unlimited.
///
/// Requests may run the bucket into debt: a caller asking for more than is
/// available takes it and then sleeps until the debt would be repaid, so
/// large requests neither starve nor burst past the rate over time.
#[derive(Debug)]
pub struct RateLimiter {
    bytes_per_sec: AtomicU64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Tokens available (may be negative: debt).
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A limiter of `bytes_per_sec` bytes per second (0 = unlimited). The
    /// bucket starts empty, so the first request already waits its share.
    pub fn new(bytes_per_sec: u64) -> Self {
        RateLimiter {
            bytes_per_sec: AtomicU64::new(bytes_per_sec),
            state: Mutex::new(Bucket {
                tokens: 0.0,
                last: Instant::now(),
            }),
        }
    }

    /// The current rate in bytes per second; 0 means unlimited.
    pub fn bytes_per_sec(&self) -> u64 {
        self.bytes_per_sec.load(Ordering::Relaxed)
    }

    /// Changes the rate; takes effect for the next request.
    pub fn set_bytes_per_sec(&self, rate: u64) {
        self.bytes_per_sec.store(rate, Ordering::Relaxed);
    }

    /// Blocks until `bytes` may be transferred; returns the time waited.
    pub fn request(&self, bytes: u64) -> Duration {
        let wait = self.reserve(bytes);
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        wait
    }

    /// Takes `bytes` from the bucket without waiting and returns how long
    /// the caller must wait before transferring them: for a caller that
    /// cannot block its thread (an async task sleeps on its runtime's
    /// timer instead).
    pub fn reserve(&self, bytes: u64) -> Duration {
        let rate = self.bytes_per_sec();
        if rate == 0 || bytes == 0 {
            return Duration::ZERO;
        }
        let wait = {
            let mut b = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let elapsed = now.duration_since(b.last).as_secs_f64();
            b.last = now;
            // At most 100 ms worth of unused tokens accumulate, so an idle
            // period does not allow a long burst afterwards.
            let burst = rate as f64 / 10.0;
            b.tokens = (b.tokens + elapsed * rate as f64).min(burst);
            b.tokens -= bytes as f64;
            if b.tokens >= 0.0 {
                0.0
            } else {
                -b.tokens / rate as f64
            }
        };
        Duration::from_secs_f64(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserving_books_the_wait_without_taking_it() {
        // 10 MiB/s: 1 MiB reserved at once from an empty bucket costs up to
        // 0.1 s, and the next MiB, reserved before that time passed, waits
        // behind it: the debt adds up without anyone sleeping.
        let r = RateLimiter::new(10 << 20);
        let first = r.reserve(1 << 20);
        let second = r.reserve(1 << 20);
        assert!(first <= Duration::from_millis(100), "{first:?}");
        assert!(second > first, "{first:?} then {second:?}");
        assert!(second <= Duration::from_millis(200), "{second:?}");
    }

    #[test]
    fn unlimited_never_waits() {
        let r = RateLimiter::new(0);
        assert_eq!(r.request(1 << 30), Duration::ZERO);
    }

    #[test]
    fn debt_makes_callers_wait_in_proportion() {
        // 10 MiB/s; asking for 2 MiB from a bucket that started empty means
        // a wait of 0.2 s, less the tokens that came in since the limiter
        // was made: at most 100 ms worth, however late this thread got to
        // ask. The returned duration is the limiter's own arithmetic, not
        // a measurement, so a busy machine cannot move it out of range.
        let r = RateLimiter::new(10 << 20);
        let w = r.request(2 << 20);
        assert!(
            w >= Duration::from_millis(100) && w <= Duration::from_millis(200),
            "{w:?}"
        );
        // The first caller's sleep repaid its debt: a request of twice the
        // bytes waits for all of them, less at most 100 ms of tokens.
        let w = r.request(4 << 20);
        assert!(
            w >= Duration::from_millis(300) && w <= Duration::from_millis(400),
            "{w:?}"
        );
    }

    #[test]
    fn rate_can_be_changed() {
        let r = RateLimiter::new(1);
        r.set_bytes_per_sec(0);
        assert_eq!(r.request(1 << 20), Duration::ZERO);
    }
}
