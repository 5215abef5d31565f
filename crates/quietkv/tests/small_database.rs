//! With flush and compaction left at `auto`, a database small next to the
//! memory the process may use writes its new tables through the page cache
//! (the reads after the writes find them there), and one past
//! `Options::small_database_share` writes them past it. Measured with the
//! kernel's page-cache residency of the table files.

mod common;
#[path = "support/skip.rs"]
mod skip;

use std::path::Path;

use common::{cached_fraction, new_tables, tables};

use quietkv::{Db, EffectiveMode, IoClass, Options};

const VALUE: usize = 1024;

/// A directory where `auto` resolves flush and compaction writes to a mode
/// that bypasses the page cache, or `None` after a skip.
fn dir() -> Option<tempfile::TempDir> {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let caps = quietio::probe(d.path()).unwrap();
    if !caps.direct.supported && !caps.dontcache.supported {
        skip::skip(&format!(
            "neither O_DIRECT nor RWF_DONTCACHE in {}",
            d.path().display()
        ));
        return None;
    }
    Some(d)
}

fn opts() -> Options {
    Options::default()
        .memtable_size(4 << 20)
        .target_file_size(4 << 20)
}

/// Writes `mib` MiB of 1 KiB values in a scattered order, in flushes of
/// about 4 MiB, and waits until the background work is done.
fn fill(db: &Db, mib: u64) {
    let keys = (mib << 20) / VALUE as u64;
    let mut value = vec![7u8; VALUE];
    for i in 0..keys {
        let k = i * 7919 % keys;
        value[..8].copy_from_slice(&k.to_le_bytes());
        db.put(format!("{k:016}"), &value).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
}

fn evict_all(path: &Path) {
    for t in tables(path) {
        quietio::evict_file(&t).unwrap();
    }
}

#[test]
fn a_small_database_writes_its_tables_through_the_page_cache() {
    let Some(d) = dir() else { return };
    let db = Db::open(d.path(), opts()).unwrap();
    assert_ne!(db.io_mode(IoClass::FlushWrite), EffectiveMode::Buffered);
    fill(&db, 24);
    let flushed = tables(d.path());
    assert!(flushed.len() >= 4, "{} tables", flushed.len());
    let after_flush = cached_fraction(&flushed);
    assert!(
        after_flush > 0.9,
        "a small database's flushed tables are {after_flush} cached"
    );
    let cached_tables = db.stats().small_database_cached_tables;
    assert!(cached_tables >= flushed.len() as u64);

    // The full compaction's outputs too, and there is nothing to warm.
    evict_all(d.path());
    db.compact_all().unwrap();
    let outputs = new_tables(d.path(), &flushed);
    assert!(!outputs.is_empty());
    let after_compaction = cached_fraction(&outputs);
    assert!(
        after_compaction > 0.9,
        "a small database's compaction output is {after_compaction} cached"
    );
    let s = db.stats();
    assert!(s.small_database_cached_tables >= cached_tables + outputs.len() as u64);
    assert_eq!(s.compaction.warmed_blocks, 0);
}

#[test]
fn with_no_small_database_share_auto_writes_tables_past_the_page_cache() {
    let Some(d) = dir() else { return };
    let db = Db::open(d.path(), opts().small_database_share(0.0)).unwrap();
    fill(&db, 24);
    let flushed = tables(d.path());
    let fraction = cached_fraction(&flushed);
    // Only the index and filter blocks a new table's reader loads are
    // cached (through the buffered user read class).
    assert!(
        fraction < 0.1,
        "tables written past the cache are {fraction} cached"
    );
    db.compact_all().unwrap();
    let outputs = new_tables(d.path(), &flushed);
    assert!(!outputs.is_empty());
    let fraction = cached_fraction(&outputs);
    assert!(
        fraction < 0.1,
        "compaction output written past the cache is {fraction} cached"
    );
    assert_eq!(db.stats().small_database_cached_tables, 0);
}

#[test]
fn a_database_growing_past_the_share_switches_to_writing_past_the_cache() {
    let Some(d) = dir() else { return };
    // A share of the usable memory that 10 MiB of tables fills.
    let usable = quietio::usable_memory().expect("the machine's memory is known");
    let share = (10u64 << 20) as f64 / usable as f64;
    let db = Db::open(d.path(), opts().small_database_share(share)).unwrap();
    fill(&db, 32);
    let s = db.stats();
    let all = tables(d.path());
    assert!(
        s.small_database_cached_tables >= 1,
        "the first flushes of an empty database are cached"
    );
    assert!(
        s.small_database_cached_tables < s.flushes + s.compaction.count,
        "every table was cached: {} of {} flushes and {} compactions",
        s.small_database_cached_tables,
        s.flushes,
        s.compaction.count
    );
    // The newest tables were written when the database was past 10 MiB.
    let newest = all.iter().max().unwrap();
    let fraction = cached_fraction(std::slice::from_ref(newest));
    assert!(
        fraction < 0.1,
        "the newest table {} is {fraction} cached",
        newest.display()
    );
}
