//! The block cache under the engine: many reader threads with O_DIRECT
//! user reads (the cache is their only cache) always get the right values
//! while a writer, flushes and compactions replace the tables under them;
//! a full scan does not flush the blocks point reads keep using.

#[path = "support/skip.rs"]
mod skip;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quietkv::{AccessMode, Db, EffectiveMode, IoClass, Options};

const KEYS: u64 = 4000;

fn key(k: u64) -> Vec<u8> {
    format!("key{k:08}").into_bytes()
}

/// `key || version || filler`, so a reader can tell whose value it got.
fn value(k: u64, version: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(300);
    v.extend_from_slice(&k.to_le_bytes());
    v.extend_from_slice(&version.to_le_bytes());
    let fill = (k ^ version.rotate_left(17)) as u8;
    v.resize(300, fill);
    v
}

fn decode(k: u64, v: &[u8]) -> u64 {
    assert_eq!(v.len(), 300, "key {k}: value of {} bytes", v.len());
    let got_k = u64::from_le_bytes(v[..8].try_into().unwrap());
    let version = u64::from_le_bytes(v[8..16].try_into().unwrap());
    assert_eq!(got_k, k, "key {k} returned the value of key {got_k}");
    assert_eq!(
        v,
        &value(k, version)[..],
        "key {k} v{version}: damaged value"
    );
    version
}

#[test]
fn many_direct_readers_always_see_the_right_values() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = Options::default()
        .memtable_size(256 << 10)
        .target_file_size(256 << 10)
        .level_base_bytes(1 << 20)
        // A cache far smaller than the data: constant eviction.
        .block_cache_bytes(256 << 10)
        .block_cache_limit_share(0.0)
        .io_mode(IoClass::UserRead, AccessMode::Direct);
    let db = match Db::open(d.path(), opts) {
        Ok(db) => Arc::new(db),
        Err(e) => {
            skip::skip(&format!("no O_DIRECT user reads here: {e}"));
            return;
        }
    };
    assert_eq!(db.io_mode(IoClass::UserRead), EffectiveMode::Direct);
    for k in 0..KEYS {
        db.put(key(k), value(k, 0)).unwrap();
    }
    db.flush().unwrap();
    // The model: the newest version of each key the writer has finished.
    let done: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    // Work done so far: rounds of 200 writes and a flush, and reads.
    let rounds = Arc::new(AtomicU64::new(0));
    let reads_so_far = Arc::new(AtomicU64::new(0));
    let writer = {
        let (db, done, stop, rounds) = (db.clone(), done.clone(), stop.clone(), rounds.clone());
        std::thread::spawn(move || {
            let mut version = 1;
            let mut rng = 0x9e37_79b9u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..200 {
                    rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let k = (rng >> 33) % KEYS;
                    db.put(key(k), value(k, version)).unwrap();
                    done[k as usize].store(version, Ordering::Release);
                    version += 1;
                }
                db.flush().unwrap();
                rounds.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let readers: Vec<_> = (0..16u64)
        .map(|t| {
            let (db, done, stop) = (db.clone(), done.clone(), stop.clone());
            let reads_so_far = reads_so_far.clone();
            std::thread::spawn(move || {
                let mut seen: HashMap<u64, u64> = HashMap::new();
                let mut rng = t + 1;
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let k = rng % KEYS;
                    let floor = done[k as usize].load(Ordering::Acquire);
                    let v = db.get(key(k)).unwrap().expect("every key exists");
                    let version = decode(k, &v);
                    // Never older than a write finished before the read
                    // began, never older than this thread saw before.
                    assert!(version >= floor, "key {k}: v{version} after v{floor}");
                    let last = seen.entry(k).or_insert(0);
                    assert!(version >= *last, "key {k}: v{version} after v{last}");
                    *last = version;
                    reads += 1;
                    reads_so_far.fetch_add(1, Ordering::Relaxed);
                }
                reads
            })
        })
        .collect();
    // Run until a fixed amount of work is done, however long that takes
    // on this machine: enough reads, and enough flushes (each of which,
    // with compactions, replaces tables under the readers) and evictions.
    // A minute is far more than it takes.
    let start = Instant::now();
    let enough = || {
        reads_so_far.load(Ordering::Relaxed) >= 50_000
            && rounds.load(Ordering::Relaxed) >= 100
            && db.stats().block_cache.evictions > 0
    };
    while !enough() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    db.wait_idle().unwrap();
    for k in 0..KEYS {
        let v = db.get(key(k)).unwrap().unwrap();
        assert_eq!(decode(k, &v), done[k as usize].load(Ordering::Relaxed));
    }
    let s = db.stats().block_cache;
    let flushes = rounds.load(Ordering::Relaxed);
    assert!(
        reads >= 50_000 && flushes >= 100,
        "only {reads} reads and {flushes} flushes in a minute"
    );
    assert!(s.hits > 0 && s.misses > 0 && s.evictions > 0, "{s:?}");
    // An explicit size is bytes of data blocks (pinned blocks not charged).
    assert!(s.usage <= s.capacity && s.pinned > 0, "{s:?}");
}

#[test]
fn a_scan_does_not_flush_the_point_reads_working_set() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = Options::default()
        // 4000 x 1 KiB values: about 4 MiB of blocks for a 1 MiB cache.
        .block_cache_bytes(1 << 20)
        .block_cache_limit_share(0.0);
    let db = Db::open(d.path(), opts).unwrap();
    let big = vec![7u8; 1024];
    for k in 0..KEYS {
        db.put(key(k), &big).unwrap();
    }
    db.compact_all().unwrap();
    let hot: Vec<u64> = (0..KEYS).step_by(40).collect(); // 100 keys
    for _ in 0..2 {
        for &k in &hot {
            assert!(db.get(key(k)).unwrap().is_some());
        }
    }
    let n = db.iter().unwrap().count();
    assert_eq!(n as u64, KEYS);
    let before = db.stats().block_cache;
    for &k in &hot {
        assert!(db.get(key(k)).unwrap().is_some());
    }
    let after = db.stats().block_cache;
    let misses = after.misses - before.misses;
    // With plain LRU every hot block would be gone after a scan of four
    // times the cache.
    assert_eq!(
        misses,
        0,
        "{misses} of {} hot reads missed after the scan",
        hot.len()
    );
    db.close().unwrap();
}

#[test]
fn default_share_sizes_the_cache_only_for_direct_reads_under_a_limit() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = Options::default().io_mode(IoClass::UserRead, AccessMode::Buffered);
    let db = Db::open(d.path(), opts).unwrap();
    // Buffered user reads: the page cache is their cache, so no share.
    assert_eq!(db.stats().block_cache.capacity, 32 << 20);
    db.close().unwrap();
    let opts = Options::default().io_mode(IoClass::UserRead, AccessMode::Direct);
    let Ok(db) = Db::open(d.path(), opts) else {
        skip::skip("no O_DIRECT user reads here");
        return;
    };
    let expected = match quietio::memory_limit() {
        Some(l) => (32u64 << 20).max(l.bytes / 2),
        None => 32 << 20,
    };
    assert_eq!(db.stats().block_cache.capacity, expected);
    db.close().unwrap();
}
