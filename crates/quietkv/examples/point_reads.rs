//! Point-read cost: fills N keys (16-byte keys, 100-byte values) and then
//! does M random gets, either left in the memtable or flushed and
//! compacted into tables, so the read path can be counted under callgrind
//! (`--toggle-collect=point_reads::read_phase` counts only the reads).
//!
//! Usage: `point_reads DIR (mem|table) (get|pinned) [N] [M]`
//! (N defaults to 200,000, M to 1,000,000; DIR must be empty or absent).
//! `get` reads with `Db::get` (a `Vec` per read), `pinned` with
//! `Db::get_pinned` (the bytes read in place).
//!
//! Counting the reads alone, for instance:
//! `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect=point_reads::read_phase point_reads /tmp/db mem get`

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

fn value(i: u64) -> [u8; 100] {
    let mut v = [b'a'; 100];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// The measured part: `m` random gets; returns a checksum of the bytes
/// read so nothing can be optimised away.
#[inline(never)]
fn read_phase(db: &Db, mode: &str, n: u64, m: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut sum = 0u64;
    for _ in 0..m {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = x % n;
        let got = match mode {
            "get" => db.get(key(i))?.map(|v| v[0] as u64 + v.len() as u64),
            "pinned" => pinned(db, i)?,
            _ => return Err("mode is get or pinned".into()),
        };
        sum += got.ok_or("a written key was not found")?;
    }
    Ok(sum)
}

fn pinned(db: &Db, i: u64) -> Result<Option<u64>, Box<dyn std::error::Error>> {
    Ok(db.get_pinned(key(i))?.map(|v| v[0] as u64 + v.len() as u64))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: point_reads DIR (mem|table) (get|pinned) [N] [M]";
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or(usage)?;
    let placement = args.next().ok_or(usage)?;
    let mode = args.next().ok_or(usage)?;
    let n: u64 = args.next().map_or(Ok(200_000), |s| s.parse())?;
    let m: u64 = args.next().map_or(Ok(1_000_000), |s| s.parse())?;
    let db = Db::open(&dir, Options::default())?;
    for i in 0..n {
        db.put(key(i), value(i))?;
    }
    match placement.as_str() {
        "mem" => {}
        "table" => db.compact_all()?,
        _ => return Err(usage.into()),
    }
    let start = Instant::now();
    let sum = read_phase(&db, &mode, n, m)?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{m} {mode} reads from {placement} in {secs:.3} s ({:.0} ns/read), checksum {sum}",
        secs * 1e9 / m as f64
    );
    db.close()?;
    Ok(())
}
