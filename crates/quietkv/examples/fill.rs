//! A db_bench-like fill: N puts of 16-byte random keys and 100-byte
//! random printable values through `Db::put`, one put per write, WAL on
//! without sync, 64 MiB memtable. Prints puts/s and CPU (user+sys) per put
//! so write-path changes can be timed and profiled on the same workload.
//!
//! Usage: `fill DIR [N]` (N defaults to 1,000,000; DIR must not exist yet
//! or be empty).

use std::time::Instant;

use quietkv::{Db, Options};

/// A small xorshift generator: the fill needs cheap, repeatable keys and
/// values, not statistical quality.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain integers, for which all-zero bytes are valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0, "getrusage failed");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: fill DIR [N]")?;
    let n: u64 = match args.next() {
        Some(s) => s.parse().map_err(|e| format!("bad N {s:?}: {e}"))?,
        None => 1_000_000,
    };
    let opts = Options::default().memtable_size(64 << 20);
    let db = Db::open(&dir, opts)?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // Values are slices of one random printable buffer, as db_bench does.
    let pool: Vec<u8> = (0..1 << 20)
        .map(|_| b' ' + (rng.next() % 95) as u8)
        .collect();
    let mut key = [0u8; 16];
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    for _ in 0..n {
        // Sixteen decimal digits, written without allocating so the
        // profile shows the engine's allocations only.
        let mut k = rng.next();
        for b in key.iter_mut().rev() {
            *b = b'0' + (k % 10) as u8;
            k /= 10;
        }
        let off = (rng.next() % (pool.len() as u64 - 100)) as usize;
        db.put(key, &pool[off..off + 100])?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "{n} puts in {secs:.2} s: {:.0} puts/s, {:.2} us CPU per put",
        n as f64 / secs,
        cpu * 1e6 / n as f64
    );
    Ok(())
}
