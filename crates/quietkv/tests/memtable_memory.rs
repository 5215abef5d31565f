//! A flushed memtable's memory leaves the process: after many memtables
//! were filled and flushed, the resident set is back near where it began,
//! so under a memory limit it is page cache again. (One test in this file:
//! the resident set is the whole process's.)

mod common;

use quietkv::{Db, Options};

/// `VmRSS` of this process in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn flushed_memtables_give_their_memory_back() {
    const MEMTABLE: usize = 16 << 20;
    const WRITTEN: u64 = 256 << 20;
    let d = common::dir();
    let db = Db::open(
        d.path(),
        Options::default()
            .memtable_size(MEMTABLE)
            .block_cache_bytes(1 << 20),
    )
    .unwrap();
    let before = rss();
    let value = vec![7u8; 100];
    let mut peak = 0;
    for i in 0..WRITTEN / 116 {
        db.put(format!("{i:016}").as_bytes(), &value).unwrap();
        if i % 100_000 == 0 {
            peak = peak.max(rss());
        }
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let after = rss();
    eprintln!(
        "resident set: {} MiB before, peak {} MiB while writing, {} MiB after the flush",
        before >> 20,
        peak >> 20,
        after >> 20
    );
    // Sixteen memtables went through; what stays is the tables' indexes
    // and filters, the small first chunks and the allocator's own slack,
    // not the memtables' 16 MiB each.
    assert!(
        after < before + MEMTABLE as u64,
        "{} MiB still resident after the flush, {} MiB before the writes",
        after >> 20,
        before >> 20
    );
    db.close().unwrap();
}
