//! Data blocks aligned to pages, seen in the page cache: with
//! `align_blocks` (the default) a point read that misses the cache brings
//! in one page of the table; without it almost every 4 KiB block spans two
//! pages and a miss brings in both.

mod common;

use common::tables;
use quietkv::{AccessMode, Db, IoClass, Options};

const KEYS: u64 = 20_000;
const READS: u64 = 100;

/// Pages of the table files the page cache holds after `READS` point reads
/// of keys far apart, from a cold cache, per read.
fn pages_per_cold_read(align: bool) -> f64 {
    let d = common::dir();
    let opts = Options::default()
        .align_blocks(align)
        .io_mode(IoClass::UserRead, AccessMode::Buffered);
    let db = Db::open(d.path(), opts).unwrap();
    for i in 0..KEYS {
        let value = [(i % 251) as u8; 100];
        db.put(format!("{i:016}").as_bytes(), value).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let files = tables(d.path());
    assert_eq!(files.len(), 1, "{files:?}");
    // The table is open (its index and filter in memory); its pages go.
    quietio::evict_file(&files[0]).unwrap();
    assert_eq!(quietio::residency(&files[0]).unwrap().cached, 0);
    // About 30 entries a block: keys 197 apart are in different blocks,
    // and in different pages.
    for r in 0..READS {
        let k = r * 197;
        let got = db.get(format!("{k:016}").as_bytes()).unwrap().unwrap();
        assert_eq!(got, [(k % 251) as u8; 100]);
    }
    let cached = quietio::residency(&files[0]).unwrap().cached;
    cached as f64 / READS as f64
}

#[test]
fn a_cold_point_read_brings_in_one_page_when_blocks_are_aligned() {
    let aligned = pages_per_cold_read(true);
    let unaligned = pages_per_cold_read(false);
    eprintln!("pages per cold read: aligned {aligned:.2}, unaligned {unaligned:.2}");
    assert!(aligned <= 1.05, "aligned: {aligned:.2} pages per read");
    assert!(unaligned >= 1.7, "unaligned: {unaligned:.2} pages per read");
}
