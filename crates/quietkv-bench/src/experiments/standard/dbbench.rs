//! db_bench's workloads over one engine's database: fills, overwrite,
//! random point reads (several reader threads), reads of absent keys,
//! seeks with a few nexts, full scans both ways, and reads while a paced
//! writer writes. Each checks what it reads (a wrong value or a missing
//! key fails the run) and returns its [`Phase`].

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::keygen::{absent, present, present_number, Rng};
use super::measure::{dir_bytes, Latencies, Probe};
use super::phase::Phase;
use crate::campaign::INTERRUPTED;
use crate::cgroup::interrupted;
use crate::engines::BenchEngine;
use crate::keys::{fill_value, is_value_of, permute, KEY_SIZE};

/// db_bench's `seekrandom --seek_nexts=10`: the key sought and ten more.
pub const SEEK_ENTRIES: usize = 11;

/// The writer's pace in readwhilewriting, in bytes of keys and values per
/// second (db_bench's `--benchmark_write_rate_limit`).
pub const PACED_WRITE_BYTES_S: f64 = 2.0 * (1 << 20) as f64;

/// The database the db_bench workloads run on.
#[derive(Debug, Clone)]
pub struct Shape {
    pub keys: u64,
    pub value_size: usize,
    /// How long each read phase runs.
    pub read_for: Duration,
    /// Seeds every generator: the same requests for every engine of a
    /// round.
    pub seed: u64,
}

impl Shape {
    fn entry_bytes(&self) -> u64 {
        (KEY_SIZE + self.value_size) as u64
    }
}

/// Ends a phase early with [`INTERRUPTED`] once Ctrl-C was pressed (a
/// full-scale phase runs for minutes).
pub fn check_interrupt(op: u64) -> Result<(), String> {
    if op.is_multiple_of(1024) && interrupted() {
        return Err(INTERRUPTED.into());
    }
    Ok(())
}

/// Flushes the memtable and waits for compaction to catch up: a write
/// phase's cost includes the work its writes caused, and the next phase
/// starts on a quiet tree.
pub fn settle<E: BenchEngine>(db: &E) -> Result<(), String> {
    db.flush()?;
    db.wait_idle()
}

/// fillseq (`random` false: keys in order) or fillrandom (every key once,
/// in a pseudo-random order, so that every key is present for the reads),
/// one put per operation; the space amplification after the catch-up.
pub fn fill<E: BenchEngine>(db: &E, dir: &Path, s: &Shape, random: bool) -> Result<Phase, String> {
    let name = if random { "fillrandom" } else { "fillseq" };
    let key_of = |j| if random { permute(j, s.keys) } else { j };
    let mut p = put_phase(db, s, name, 0, key_of)?;
    let user = s.keys * s.entry_bytes();
    p.space_amp = Some(dir_bytes(dir)? as f64 / user as f64);
    Ok(p)
}

/// overwrite: as many puts as keys, each to a uniformly random present key.
pub fn overwrite<E: BenchEngine>(db: &E, s: &Shape) -> Result<Phase, String> {
    let mut rng = Rng::new(s.seed ^ 0x0F);
    put_phase(db, s, "overwrite", 1, |_| rng.below(s.keys))
}

/// A write phase `name`: as many puts as keys, the `j`th to present key
/// `key_of(j)` with its value of write `round`, each timed; then the
/// catch-up ([`settle`]), counted in the phase's cost.
fn put_phase<E: BenchEngine>(
    db: &E,
    s: &Shape,
    name: &str,
    round: u64,
    mut key_of: impl FnMut(u64) -> u64,
) -> Result<Phase, String> {
    let probe = Probe::start();
    let mut lat = Latencies::new();
    let mut value = vec![0u8; s.value_size];
    let t = Instant::now();
    for j in 0..s.keys {
        check_interrupt(j)?;
        let i = key_of(j);
        fill_value(&mut value, present_number(i), round);
        let k = present(i);
        lat.time(|| db.put(&k, &value))
            .map_err(|e| format!("{name}: {e}"))?;
    }
    let secs = t.elapsed().as_secs_f64();
    settle(db).map_err(|e| format!("{name}: {e}"))?;
    let cost = probe.finish();
    let user = s.keys * s.entry_bytes();
    let mut p = Phase::new(name, s.keys, secs, Some(&lat), &cost, user);
    p.l0_tables_after = db.counters().l0_tables;
    Ok(p)
}

/// Runs `op` in `threads` threads, each as fast as it can for `dur`, each
/// operation timed; returns the operations, the seconds and the merged
/// latencies. `stop` is set when every thread is done.
fn closed_loop(
    threads: usize,
    dur: Duration,
    seed: u64,
    stop: &AtomicBool,
    op: &(dyn Fn(&mut Rng) -> Result<(), String> + Sync),
) -> Result<(u64, f64, Latencies), String> {
    let t = Instant::now();
    let results: Vec<Result<(u64, Latencies), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|tid| {
                scope.spawn(move || {
                    let mut rng = Rng::new(seed ^ ((tid as u64 + 1) << 32));
                    let mut lat = Latencies::new();
                    let mut ops = 0u64;
                    let end = Instant::now() + dur;
                    loop {
                        let start = Instant::now();
                        if start >= end {
                            break;
                        }
                        check_interrupt(ops)?;
                        op(&mut rng)?;
                        lat.record(start.elapsed());
                        ops += 1;
                    }
                    Ok((ops, lat))
                })
            })
            .collect();
        let r = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a reader thread panicked".into()))
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        r
    });
    let secs = t.elapsed().as_secs_f64();
    let mut all = Latencies::new();
    let mut ops = 0;
    for r in results {
        let (n, l) = r?;
        ops += n;
        all.merge(&l);
    }
    Ok((ops, secs, all))
}

/// One checked point read of present key `i`.
fn read_present<E: BenchEngine>(db: &E, s: &Shape, i: u64) -> Result<(), String> {
    match db.get(&present(i))? {
        Some(v) if is_value_of(&v, present_number(i), s.value_size) => Ok(()),
        Some(v) => Err(format!(
            "key {} read back a value of {} bytes that is not its own",
            present_number(i),
            v.len()
        )),
        None => Err(format!("key {} is missing", present_number(i))),
    }
}

/// A read phase of `threads` closed-loop threads running `op`.
fn read_phase(
    name: &str,
    threads: usize,
    s: &Shape,
    op: &(dyn Fn(&mut Rng) -> Result<(), String> + Sync),
) -> Result<Phase, String> {
    let probe = Probe::start();
    let stop = AtomicBool::new(false);
    let (ops, secs, lat) =
        closed_loop(threads, s.read_for, s.seed, &stop, op).map_err(|e| format!("{name}: {e}"))?;
    let cost = probe.finish();
    Ok(Phase::new(name, ops, secs, Some(&lat), &cost, 0))
}

/// readrandom with `threads` reader threads: uniformly random present keys.
pub fn read_random<E: BenchEngine>(db: &E, s: &Shape, threads: usize) -> Result<Phase, String> {
    read_phase(&format!("readrandom-{threads}"), threads, s, &|rng| {
        read_present(db, s, rng.below(s.keys))
    })
}

/// readmissing: keys that fall between present ones; any found fails.
pub fn read_missing<E: BenchEngine>(db: &E, s: &Shape) -> Result<Phase, String> {
    read_phase("readmissing", 1, s, &|rng| {
        let i = rng.below(s.keys);
        match db.get(&absent(i))? {
            None => Ok(()),
            Some(_) => Err(format!("absent key {} was found", 2 * i + 1)),
        }
    })
}

/// seekrandom: a seek to a random present key and the next ten entries.
pub fn seek_random<E: BenchEngine>(db: &E, s: &Shape) -> Result<Phase, String> {
    read_phase("seekrandom", 1, s, &|rng| {
        let i = rng.below(s.keys);
        let want = (SEEK_ENTRIES as u64).min(s.keys - i) as usize;
        match db.seek_scan(&present(i), SEEK_ENTRIES)? {
            n if n == want => Ok(()),
            n => Err(format!(
                "a seek to key {} read {n} entries, not {want}",
                present_number(i)
            )),
        }
    })
}

/// readseq or readreverse: one full scan, which must see every key once;
/// its operations are the entries read.
pub fn scan<E: BenchEngine>(db: &E, s: &Shape, reverse: bool) -> Result<Phase, String> {
    let name = if reverse { "readreverse" } else { "readseq" };
    let probe = Probe::start();
    let t = Instant::now();
    let c = db.scan_all(reverse).map_err(|e| format!("{name}: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    let cost = probe.finish();
    if c.entries != s.keys || c.bytes != s.keys * s.entry_bytes() {
        return Err(format!(
            "{name} read {} entries ({} bytes), not the {} keys ({} bytes) written",
            c.entries,
            c.bytes,
            s.keys,
            s.keys * s.entry_bytes()
        ));
    }
    Ok(Phase::new(name, c.entries, secs, None, &cost, 0))
}

/// readwhilewriting: one reader at full speed (random present keys) while
/// one writer overwrites random keys at [`PACED_WRITE_BYTES_S`]; the
/// figures are the reads', the writes are counted beside them.
pub fn read_while_writing<E: BenchEngine>(db: &E, s: &Shape) -> Result<Phase, String> {
    let stop = AtomicBool::new(false);
    let probe = Probe::start();
    let per_s = PACED_WRITE_BYTES_S / s.entry_bytes() as f64;
    let (reads, writes) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| -> Result<u64, String> {
            let mut rng = Rng::new(s.seed ^ 0xA5A5);
            let mut value = vec![0u8; s.value_size];
            let start = Instant::now();
            let mut done = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let due = start + Duration::from_secs_f64(done as f64 / per_s);
                let now = Instant::now();
                if due > now {
                    // Short sleeps: the writer notices the end of the reads.
                    std::thread::sleep((due - now).min(Duration::from_millis(10)));
                    continue;
                }
                let i = rng.below(s.keys);
                fill_value(&mut value, present_number(i), 2);
                db.put(&present(i), &value)?;
                done += 1;
            }
            Ok(done)
        });
        let reads = closed_loop(1, s.read_for, s.seed, &stop, &|rng| {
            read_present(db, s, rng.below(s.keys))
        });
        stop.store(true, Ordering::Relaxed);
        let writes = writer
            .join()
            .unwrap_or_else(|_| Err("the writer thread panicked".into()));
        (reads, writes)
    });
    let (ops, secs, lat) = reads.map_err(|e| format!("readwhilewriting: {e}"))?;
    let writes = writes.map_err(|e| format!("readwhilewriting (writer): {e}"))?;
    let cost = probe.finish();
    let mut p = Phase::new("readwhilewriting", ops, secs, Some(&lat), &cost, 0);
    p.side_writes = Some(writes);
    Ok(p)
}
