//! The closed-loop load generator: N threads, each issuing its next read
//! as soon as the previous one completed, for a fixed time. It measures
//! throughput (how many reads the system completes when it is the
//! bottleneck, as the seed's 200+ client threads did); a read's latency is
//! its service time, since nothing is scheduled. Results come back as a
//! [`LoadResult`] so the phase is reported like an open-loop one
//! (scheduled = issued, lateness 0).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::loadgen::{new_histogram, LoadResult, ReadResult, SplitMix64};

#[derive(Debug, Clone)]
pub struct ClosedLoopConfig {
    pub threads: usize,
    pub duration: Duration,
    /// Keys are drawn uniformly from `[0, keys)`, each thread its own stream.
    pub keys: u64,
    pub seed: u64,
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

/// Runs `threads` readers back to back until `duration` has passed or
/// `stop` is set.
pub fn run_closed_loop<F>(cfg: &ClosedLoopConfig, read: F, stop: &AtomicBool) -> LoadResult
where
    F: Fn(u64) -> ReadResult + Sync,
{
    let threads = cfg.threads.max(1);
    let seconds = cfg.duration.as_secs_f64().ceil().max(1.0) as usize;
    let keys = cfg.keys.max(1);
    let read = &read;
    let start = Instant::now();
    let end = start + cfg.duration;
    let parts: Vec<LoadResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                s.spawn(move || {
                    let mut r = empty(seconds);
                    let mut rng = SplitMix64::new(cfg.seed ^ (t + 1).wrapping_mul(0x2545_F491));
                    loop {
                        let issued = Instant::now();
                        if issued >= end || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let res = read(rng.below(keys));
                        let done = Instant::now();
                        r.scheduled += 1;
                        match res {
                            Ok(hit) => {
                                let lat = micros(done - issued);
                                r.latency.saturating_record(lat);
                                r.service.saturating_record(lat);
                                r.lateness.saturating_record(0);
                                let sec = (issued - start).as_secs() as usize;
                                if let Some(h) = r.per_second.get_mut(sec.min(seconds - 1)) {
                                    h.saturating_record(lat);
                                }
                                r.done += 1;
                                match hit {
                                    Some(true) => r.hits += 1,
                                    Some(false) => r.misses += 1,
                                    None => {}
                                }
                            }
                            Err(e) => {
                                r.errors += 1;
                                if r.first_error.is_none() {
                                    r.first_error = Some(e);
                                }
                            }
                        }
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("reader thread"))
            .collect()
    });
    let mut out = empty(seconds);
    out.elapsed_s = start.elapsed().as_secs_f64();
    for p in parts {
        out.latency.add(&p.latency).expect("same bounds");
        out.service.add(&p.service).expect("same bounds");
        out.lateness.add(&p.lateness).expect("same bounds");
        for (a, b) in out.per_second.iter_mut().zip(&p.per_second) {
            a.add(b).expect("same bounds");
        }
        out.scheduled += p.scheduled;
        out.done += p.done;
        out.errors += p.errors;
        out.hits += p.hits;
        out.misses += p.misses;
        if out.first_error.is_none() {
            out.first_error = p.first_error;
        }
    }
    out
}

fn empty(seconds: usize) -> LoadResult {
    LoadResult {
        latency: new_histogram(),
        service: new_histogram(),
        lateness: new_histogram(),
        reader_run_delay_s: None,
        per_second: (0..seconds).map(|_| new_histogram()).collect(),
        scheduled: 0,
        done: 0,
        errors: 0,
        first_error: None,
        hits: 0,
        misses: 0,
        elapsed_s: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_thread_reads_back_to_back_until_the_end() {
        let calls = AtomicU64::new(0);
        let cfg = ClosedLoopConfig {
            threads: 4,
            duration: Duration::from_millis(300),
            keys: 10,
            seed: 1,
        };
        let r = run_closed_loop(
            &cfg,
            |k| {
                assert!(k < 10);
                calls.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
                if k == 3 {
                    Err("three".into())
                } else {
                    Ok(Some(k % 2 == 0))
                }
            },
            &AtomicBool::new(false),
        );
        let n = calls.load(Ordering::Relaxed);
        // 4 threads x ~30 reads of 10 ms each.
        assert!((80..=130).contains(&n), "{n} reads");
        assert_eq!(r.done + r.errors, n);
        assert_eq!(r.scheduled, n);
        assert!(r.errors > 0 && r.first_error.as_deref() == Some("three"));
        assert!(r.hits > 0 && r.misses > 0);
        assert!(r.latency.min() >= 10_000, "{}", r.latency.min());
        assert!((0.29..1.0).contains(&r.elapsed_s), "{}", r.elapsed_s);
        assert_eq!(r.per_second.len(), 1);
    }

    #[test]
    fn stop_ends_it_early() {
        let stop = AtomicBool::new(true);
        let cfg = ClosedLoopConfig {
            threads: 2,
            duration: Duration::from_secs(60),
            keys: 1,
            seed: 0,
        };
        let t = Instant::now();
        let r = run_closed_loop(&cfg, |_| Ok(None), &stop);
        assert_eq!(r.done, 0);
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
