//! The closed-loop load generator: N threads, each issuing its next read
//! as soon as the previous one completed, for a fixed time. It measures
//! throughput (how many reads the system completes when it is the
//! bottleneck, as the seed's 200+ client threads did); a read's latency is
//! its service time, since nothing is scheduled. Results come back as a
//! [`LoadResult`] so the phase is reported like an open-loop one
//! (scheduled = issued, lateness 0).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::loadgen::{
    new_histogram, new_second_histogram, thread_read_blocks, LoadResult, ReadResult, SplitMix64,
};

/// One read in this many is judged a hit or a miss by the thread's device
/// reads (when the read does not say itself).
const HIT_SAMPLE: u64 = 16;

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

/// One reader thread's numbers. Only the current second's histogram is
/// per thread; finished seconds are merged into the shared timeline, so a
/// thread holds two histograms however long the phase (memory counts: the
/// generator runs inside the memory cgroup under test).
struct Part {
    latency: Histogram<u64>,
    second: Histogram<u64>,
    second_idx: usize,
    done: u64,
    errors: u64,
    first_error: Option<String>,
    hits: u64,
    misses: u64,
}

impl Part {
    fn flush_second(&mut self, timeline: &Mutex<Vec<Histogram<u64>>>) {
        if self.second.is_empty() {
            return;
        }
        let mut t = timeline.lock().expect("timeline lock");
        let last = t.len() - 1;
        t[self.second_idx.min(last)]
            .add(&self.second)
            .expect("same bounds");
        drop(t);
        self.second.reset();
    }
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
    let timeline = Mutex::new(
        (0..seconds)
            .map(|_| new_second_histogram())
            .collect::<Vec<_>>(),
    );
    let timeline = &timeline;
    let start = Instant::now();
    let end = start + cfg.duration;
    let parts: Vec<Part> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                s.spawn(move || {
                    let mut p = Part {
                        latency: new_histogram(),
                        second: new_second_histogram(),
                        second_idx: 0,
                        done: 0,
                        errors: 0,
                        first_error: None,
                        hits: 0,
                        misses: 0,
                    };
                    let mut rng = SplitMix64::new(cfg.seed ^ (t + 1).wrapping_mul(0x2545_F491));
                    loop {
                        let issued = Instant::now();
                        if issued >= end || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let key = rng.below(keys);
                        // As in the open loop, a read that says nothing of
                        // its own hit is judged by the thread's device
                        // reads; here only one read in HIT_SAMPLE is, since
                        // the two getrusage calls would otherwise count in
                        // a closed loop's throughput. The ratio of the
                        // sampled reads estimates the whole's.
                        let sampled = (p.done + p.errors).is_multiple_of(HIT_SAMPLE);
                        let blocks_before = sampled.then(thread_read_blocks).flatten();
                        let issued = Instant::now();
                        let res = read(key);
                        let done = Instant::now();
                        let measured_hit = blocks_before
                            .zip(sampled.then(thread_read_blocks).flatten())
                            .map(|(a, b)| b == a);
                        match res {
                            Ok(hit) => {
                                let hit = hit.or(measured_hit);
                                let lat = micros(done - issued);
                                p.latency.saturating_record(lat);
                                let sec = (issued - start).as_secs() as usize;
                                if sec != p.second_idx {
                                    p.flush_second(timeline);
                                    p.second_idx = sec;
                                }
                                p.second.saturating_record(lat);
                                p.done += 1;
                                match hit {
                                    Some(true) => p.hits += 1,
                                    Some(false) => p.misses += 1,
                                    None => {}
                                }
                            }
                            Err(e) => {
                                p.errors += 1;
                                if p.first_error.is_none() {
                                    p.first_error = Some(e);
                                }
                            }
                        }
                    }
                    p.flush_second(timeline);
                    p
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("reader thread"))
            .collect()
    });
    let elapsed_s = start.elapsed().as_secs_f64();
    let mut latency = new_histogram();
    let mut out_parts = (0u64, 0u64, 0u64, 0u64, None);
    for p in parts {
        latency.add(&p.latency).expect("same bounds");
        out_parts.0 += p.done;
        out_parts.1 += p.errors;
        out_parts.2 += p.hits;
        out_parts.3 += p.misses;
        if out_parts.4.is_none() {
            out_parts.4 = p.first_error;
        }
    }
    let (done, errors, hits, misses, first_error) = out_parts;
    let per_second = std::mem::take(&mut *timeline.lock().expect("timeline lock"));
    LoadResult {
        service: latency.clone(),
        latency,
        // Nothing is scheduled: no lateness to record.
        lateness: new_histogram(),
        reader_run_delay_s: None,
        per_second,
        scheduled: done + errors,
        done,
        errors,
        first_error,
        hits,
        misses,
        elapsed_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadgen::cpus_shared;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_thread_reads_back_to_back_until_the_end() {
        let _cpus = cpus_shared();
        // Until the end of the phase: 300 ms of reads taking 10 ms each.
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
        // Each thread issues its reads one after the other, each at least
        // 10 ms, and none after the end: at most 30 each. A busy machine
        // only makes them fewer.
        assert!((1..=4 * 30).contains(&n), "{n} reads");
        assert_eq!(r.done + r.errors, n);
        assert_eq!(r.scheduled, n);
        assert!(r.latency.min() >= 10_000, "{}", r.latency.min());
        assert_eq!(r.service.len(), r.done);
        assert_eq!(r.per_second[0].len(), r.done);
        assert_eq!(r.per_second.len(), 1);
        // It runs to the end, and no further than the generous limit
        // here (the reads in progress at the end finish first).
        assert!((0.3..30.0).contains(&r.elapsed_s), "{}", r.elapsed_s);

        // Every thread, back to back: each of the four reads again and
        // again, and the phase ends only once each has done 10 reads
        // (stop is set then; the minute-long duration is a limit the
        // test fails at). Errors and hits do not end a thread's loop.
        let per_thread = std::sync::Mutex::new(HashMap::new());
        let stop = AtomicBool::new(false);
        let cfg = ClosedLoopConfig {
            duration: Duration::from_secs(60),
            ..cfg
        };
        let r = run_closed_loop(
            &cfg,
            |k| {
                std::thread::sleep(Duration::from_millis(1));
                let mut seen = per_thread.lock().unwrap();
                *seen.entry(std::thread::current().id()).or_insert(0u64) += 1;
                if seen.len() == 4 && seen.values().all(|&c| c >= 10) {
                    stop.store(true, Ordering::Relaxed);
                }
                if k == 3 {
                    Err("three".into())
                } else {
                    Ok(Some(k % 2 == 0))
                }
            },
            &stop,
        );
        assert!(
            r.elapsed_s < 30.0,
            "the threads did not all keep reading: {:?}",
            per_thread.lock().unwrap().values()
        );
        let seen = per_thread.into_inner().unwrap();
        assert_eq!(seen.len(), 4);
        assert_eq!(r.done + r.errors, seen.values().sum::<u64>());
        assert!(r.errors > 0 && r.first_error.as_deref() == Some("three"));
        assert!(r.hits > 0 && r.misses > 0);
    }

    #[test]
    fn each_second_of_the_timeline_gets_its_reads() {
        let _cpus = cpus_shared();
        // Reads are filed under the second they were issued in. The
        // second second is 600 ms long, so a busy machine cannot keep all
        // three readers from issuing one in it.
        let cfg = ClosedLoopConfig {
            threads: 3,
            duration: Duration::from_millis(1600),
            keys: 5,
            seed: 2,
        };
        let r = run_closed_loop(
            &cfg,
            |_| {
                std::thread::sleep(Duration::from_millis(2));
                Ok(None)
            },
            &AtomicBool::new(false),
        );
        assert_eq!(r.per_second.len(), 2);
        assert!(
            r.per_second.iter().all(|h| !h.is_empty()),
            "{:?}",
            r.per_second.iter().map(|h| h.len()).collect::<Vec<_>>()
        );
        assert_eq!(r.per_second.iter().map(|h| h.len()).sum::<u64>(), r.done);
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
        assert!(t.elapsed() < Duration::from_secs(30));
    }
}
