//! Iteration and miss cost: fills N keys (16-byte keys, 100-byte values),
//! compacts them into tables, then runs one read workload, so the paths
//! point_reads does not cover can be counted under callgrind
//! (`--toggle-collect=scans::read_phase` counts only the workload).
//!
//! Usage: `scans DIR (forward|reverse|seek|missing) [N] [M]`
//! (N defaults to 200,000; M, the seeks or misses, to 100,000; DIR must
//! be empty or absent). `forward` and `reverse` read every key in order;
//! `seek` positions M iterators at random keys and reads 10 entries from
//! each; `missing` asks for M absent keys, each between two present ones
//! (only the bloom filters can skip the tables).

use std::time::Instant;

use quietkv::{Db, Options};

fn key(i: u64) -> [u8; 16] {
    // Spread the keys over the key space so neighbours are not written in
    // order; the low half keeps them unique.
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// A key between `key(i)` and the next key in order: `key(i)` with a
/// byte appended.
fn absent(i: u64) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[..16].copy_from_slice(&key(i));
    k
}

fn value(i: u64) -> [u8; 100] {
    let mut v = [b'a'; 100];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// The measured part; returns a checksum of what was read so nothing can
/// be optimised away.
#[inline(never)]
fn read_phase(db: &Db, mode: &str, n: u64, m: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let mut sum = 0u64;
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    match mode {
        "forward" => {
            for item in db.iter()? {
                let (k, v) = item?;
                sum += (k[0] as u64) + v.len() as u64;
            }
        }
        "reverse" => {
            for item in db.iter()?.rev() {
                let (k, v) = item?;
                sum += (k[0] as u64) + v.len() as u64;
            }
        }
        "seek" => {
            for _ in 0..m {
                let from = key(next());
                for item in db.range(from.as_slice()..)?.take(10) {
                    let (k, v) = item?;
                    sum += (k[0] as u64) + v.len() as u64;
                }
            }
        }
        "missing" => {
            for _ in 0..m {
                if db.get(absent(next()))?.is_some() {
                    return Err("an absent key was found".into());
                }
                sum += 1;
            }
        }
        _ => return Err("mode is forward, reverse, seek or missing".into()),
    }
    Ok(sum)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: scans DIR (forward|reverse|seek|missing) [N] [M]";
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or(usage)?;
    let mode = args.next().ok_or(usage)?;
    let n: u64 = args.next().map_or(Ok(200_000), |s| s.parse())?;
    let m: u64 = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let db = Db::open(&dir, Options::default())?;
    for i in 0..n {
        db.put(key(i), value(i))?;
    }
    db.compact_all()?;
    let start = Instant::now();
    let sum = read_phase(&db, &mode, n, m)?;
    let secs = start.elapsed().as_secs_f64();
    println!("{mode} over {n} keys in {secs:.3} s, checksum {sum}");
    db.close()?;
    Ok(())
}
