//! The process that gets killed: worker threads write, read and check
//! their own keys against the expected state while a chaos thread flushes
//! and compacts, until SIGKILL.
//!
//! Thread `t` of `T` owns the keys `i` with `i % T == t`, so each key has
//! one writer and the expected state of a key changes only in its owner's
//! order: mark the new version pending, write it, mark it committed. A
//! read of an own key must return exactly the committed version.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use quietkv::{Db, WriteBatch, WriteOptions};

use super::config::{Rng, StressConfig};
use super::expected::{key, value, Expected};

/// Runs until killed. A broken expectation is written to `violations` (one
/// line each) and ends the process with exit code 3.
pub fn run(
    dir: &Path,
    state: &Path,
    config: &StressConfig,
    threads: usize,
    keys: u32,
    seed: u64,
) -> Result<(), String> {
    let expected = Arc::new(Expected::open(state, keys).map_err(|e| e.to_string())?);
    let db = Arc::new(Db::open(dir, config.options()).map_err(|e| e.to_string())?);
    let violations = dir.with_extension("violations");
    let mut handles = Vec::new();
    for t in 0..threads {
        let (db, expected, violations) = (db.clone(), expected.clone(), violations.clone());
        let seed = seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9);
        handles.push(std::thread::spawn(move || {
            if let Err(msg) = work(&db, &expected, t, threads, seed) {
                report(&violations, &msg);
                std::process::exit(3);
            }
        }));
    }
    let mut rng = Rng::new(seed ^ 0xC4A0);
    loop {
        std::thread::sleep(Duration::from_millis(20 + rng.below(200)));
        let r = match rng.below(4) {
            0 => db.flush(),
            1 => db.compact_all(),
            2 => {
                let a = rng.below(u64::from(keys)) as u32;
                db.compact_range(Some(&key(a)), Some(&key(a.saturating_add(keys / 8))))
            }
            _ => db.wait_idle(),
        };
        if let Err(e) = r {
            report(&violations, &format!("background operation failed: {e}"));
            std::process::exit(3);
        }
    }
}

fn report(path: &Path, msg: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("violations file");
    let _ = writeln!(f, "{msg}");
}

fn io(e: std::io::Error) -> String {
    format!("expected-state file: {e}")
}

/// One worker thread's loop.
fn work(db: &Db, exp: &Expected, t: usize, threads: usize, seed: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let own = |rng: &mut Rng| -> u32 {
        let n = (u64::from(exp.keys()) - t as u64).div_ceil(threads as u64);
        (rng.below(n) * threads as u64 + t as u64) as u32
    };
    loop {
        match rng.below(100) {
            // A write of one key or an atomic batch of several own keys.
            0..=59 => {
                let n = if rng.chance(25) { 2 + rng.below(6) } else { 1 };
                let mut ks: Vec<u32> = (0..n).map(|_| own(&mut rng)).collect();
                ks.sort_unstable();
                ks.dedup();
                let mut batch = WriteBatch::new();
                let mut next = Vec::with_capacity(ks.len());
                for &k in &ks {
                    let (committed, _) = exp.get(k).map_err(io)?;
                    let v = committed + 1;
                    exp.set(k, committed, v).map_err(io)?;
                    match value(k, v) {
                        Some(bytes) => batch.put(key(k), &bytes),
                        None => batch.delete(key(k)),
                    }
                    .map_err(|e| e.to_string())?;
                    next.push((k, v));
                }
                let sync = rng.chance(30);
                db.write(batch, WriteOptions { sync })
                    .map_err(|e| format!("write of {} keys failed: {e}", next.len()))?;
                for (k, v) in next {
                    exp.set(k, v, 0).map_err(io)?;
                }
            }
            // A read of an own key: exactly the committed version.
            60..=89 => {
                let k = own(&mut rng);
                let (committed, _) = exp.get(k).map_err(io)?;
                let got = db.get(key(k)).map_err(|e| format!("get failed: {e}"))?;
                if got != value(k, committed) {
                    return Err(format!(
                        "get k{k:08}: expected version {committed}, found {}",
                        describe(k, got.as_deref())
                    ));
                }
            }
            // A short scan at a snapshot: own keys in it are committed.
            _ => {
                let snap = db.snapshot();
                let from = own(&mut rng);
                let iter = snap
                    .range(key(from)..)
                    .map_err(|e| format!("scan failed: {e}"))?;
                for item in iter.take(20) {
                    let (k, v) = item.map_err(|e| format!("scan failed: {e}"))?;
                    let Some(i) = parse_key(&k) else {
                        return Err(format!("scan returned a foreign key {k:?}"));
                    };
                    if i as usize % threads != t {
                        continue;
                    }
                    let (committed, _) = exp.get(i).map_err(io)?;
                    if value(i, committed).as_deref() != Some(v.as_slice()) {
                        return Err(format!(
                            "scan k{i:08}: expected version {committed}, found {}",
                            describe(i, Some(&v))
                        ));
                    }
                }
            }
        }
        exp.add_ops(t, 1).map_err(io)?;
    }
}

pub fn parse_key(k: &[u8]) -> Option<u32> {
    std::str::from_utf8(k.strip_prefix(b"k")?)
        .ok()?
        .parse()
        .ok()
}

/// "absent" or "version N" (read from the value's header) or "garbage".
pub fn describe(i: u32, found: Option<&[u8]>) -> String {
    match found {
        None => "nothing".into(),
        Some(v) if v.len() >= 8 && v[..4] == i.to_le_bytes() => {
            let version = u32::from_le_bytes([v[4], v[5], v[6], v[7]]);
            if value(i, version).as_deref() == Some(v) {
                format!("version {version}")
            } else {
                format!("a damaged value claiming version {version}")
            }
        }
        Some(v) => format!("{} bytes that are no version of this key", v.len()),
    }
}
