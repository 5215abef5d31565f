//! An iterator that walks a table through the page cache reads ahead of
//! itself, forwards and backwards, while point reads bring in only the
//! pages they read (the table files are opened for random access, so the
//! kernel reads nothing ahead on its own). Measured with cachestat on the
//! table files, after evicting them.

mod common;

use std::path::PathBuf;

use common::tables;

use quietkv::{AccessMode, Db, EffectiveMode, IoClass, Options};

const KEYS: u64 = 16_000; // x 1,000-byte values: about 16 MiB in one table
const VALUE: usize = 1000;
/// Entries each scan takes: about 200 KB of keys and values, 50 blocks.
const TAKE: usize = 200;
/// The largest readahead window, in pages (256 KiB).
const MAX_WINDOW_PAGES: u64 = 64;

fn key(k: u64) -> Vec<u8> {
    format!("{k:016}").into_bytes()
}

fn cached_pages(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| quietio::residency(f).unwrap().cached)
        .sum()
}

fn evict(files: &[PathBuf]) {
    for f in files {
        quietio::evict_file(f).unwrap();
    }
    assert_eq!(cached_pages(files), 0);
}

/// A database of one table, reopened so that its block cache is empty and
/// its table is open (its index and filter read); user reads buffered.
fn one_table() -> (tempfile::TempDir, Db, Vec<PathBuf>) {
    let d = common::dir();
    let opts = || {
        Options::default()
            .target_file_size(64 << 20)
            .io_mode(IoClass::UserRead, AccessMode::Buffered)
    };
    let db = Db::open(d.path(), opts()).unwrap();
    let mut value = vec![0u8; VALUE];
    for i in 0..KEYS {
        // A scattered order, so the table is a compaction's output.
        let k = i * 7919 % KEYS;
        value[..8].copy_from_slice(&k.to_le_bytes());
        db.put(key(k), &value).unwrap();
    }
    db.compact_all().unwrap();
    db.close().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    assert_eq!(db.io_mode(IoClass::UserRead), EffectiveMode::Buffered);
    let files = tables(d.path());
    assert_eq!(files.len(), 1, "{files:?}");
    // Opens the table (metadata read and parsed) before the measuring.
    assert!(db.get(key(KEYS / 2)).unwrap().is_some());
    (d, db, files)
}

/// Pages the entries of one scan occupy: what it would read with no
/// readahead at all (plus the page a block shares with the next).
fn pages_of_a_scan() -> u64 {
    (TAKE as u64 * (16 + VALUE as u64)).div_ceil(4096) + 1
}

#[test]
fn a_scan_reads_ahead_of_itself_in_both_directions() {
    let (_d, db, files) = one_table();
    let used = pages_of_a_scan();

    evict(&files);
    let mut it = db.iter().unwrap();
    for i in 0..TAKE as u64 {
        let (k, _) = it.next().unwrap().unwrap();
        assert_eq!(k, key(i));
    }
    let forward = cached_pages(&files);

    evict(&files);
    let mut it = db.iter().unwrap().rev();
    for i in 0..TAKE as u64 {
        let (k, _) = it.next().unwrap().unwrap();
        assert_eq!(k, key(KEYS - 1 - i));
    }
    let backward = cached_pages(&files);

    eprintln!("{used} pages used; cached after the scan: forward {forward}, backward {backward}");
    for (dir, cached) in [("forward", forward), ("backward", backward)] {
        // More than the scan used: what lies ahead of it was asked for...
        assert!(
            cached >= used + 16,
            "{dir}: {cached} pages cached, the scan used {used}: nothing read ahead"
        );
        // ...but no more than the windows so far (not the whole table).
        assert!(
            cached <= used + 2 * MAX_WINDOW_PAGES,
            "{dir}: {cached} pages cached, the scan used {used}"
        );
    }
}

#[test]
fn point_reads_bring_in_their_own_pages_only() {
    let (_d, db, files) = one_table();
    evict(&files);
    // Groups of four point reads of neighbouring blocks (a block holds five
    // entries), 200 keys apart: the pages cached just before a miss are
    // what makes the kernel take it for part of a sequential stream and
    // read ahead, were the file not opened for random access.
    let groups = 50u64;
    for g in 0..groups {
        for b in 0..4 {
            let k = g * 200 + b * 5;
            assert!(db.get(key(k)).unwrap().is_some());
        }
    }
    let cached = cached_pages(&files);
    // Four blocks of up to 5 KiB span at most six pages.
    eprintln!("{cached} pages cached after {groups} groups of four point reads");
    assert!(
        cached <= 6 * groups,
        "{cached} pages cached after {groups} groups of four point reads"
    );
}
