//! `Options::warm_compaction_output`: after a compaction with direct I/O,
//! the keys that were hot before it are still hot - in the page cache for
//! buffered user reads, in the block cache for direct user reads - while the
//! cold rest of the output stays out of the cache.

mod common;

#[path = "support/skip.rs"]
mod skip;

use std::fs;
use std::path::PathBuf;

use common::tables;

use quietkv::{AccessMode, Db, EffectiveMode, IoClass, Options};

const KEYS: u64 = 20_000; // x 4 KiB values = about 80 MiB
const HOT: u64 = 1_000; // the first 4 MiB of keys
const VALUE: usize = 4096;

fn key(k: u64) -> Vec<u8> {
    format!("{k:016}").into_bytes()
}

fn cached_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| quietio::residency(f).unwrap().cached * 4096)
        .sum()
}

/// User reads counted as page-cache hits or misses.
fn user_reads_attributed(db: &Db) -> u64 {
    db.stats()
        .io
        .iter()
        .find(|(c, _)| *c == IoClass::UserRead)
        .map_or(0, |(_, s)| s.cache_hits + s.cache_misses)
}

/// Reads the HOT hot keys: every `stride`-th key from 0.
fn read_hot(db: &Db, stride: u64) {
    for k in (0..HOT).map(|i| i * stride) {
        assert!(db.get(key(k)).unwrap().is_some(), "key {k} missing");
    }
}

struct Outcome {
    /// Bytes of the new tables in the page cache right after the compaction.
    page_cached_after: u64,
    /// Bytes of the new tables.
    output_bytes: u64,
    /// Block-cache misses of reading the hot keys again.
    block_misses_after: u64,
    warmed_blocks: u64,
    warmed_bytes: u64,
}

/// Builds a compacted database, evicts it, makes HOT keys hot (every
/// `stride`-th from 0) through `user_read`, rewrites everything with a
/// direct compaction, and counts the misses of reading the hot keys again.
fn run(
    warm: bool,
    user_read: AccessMode,
    block_cache_bytes: usize,
    stride: u64,
) -> Option<Outcome> {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = Options::default()
        .memtable_size(8 << 20)
        .target_file_size(8 << 20)
        .block_cache_bytes(block_cache_bytes)
        .warm_compaction_output(warm)
        .io_mode(IoClass::UserRead, user_read)
        .io_mode(IoClass::CompactionRead, AccessMode::Auto)
        .io_mode(IoClass::CompactionWrite, AccessMode::Auto)
        // As a database larger than memory: `auto` writes the output past
        // the page cache, which is what leaves something to warm.
        .small_database_share(0.0)
        // Counted, so the test can see that warming's reads are not.
        .attribute_cache_hits(true);
    let db = Db::open(d.path(), opts).unwrap();
    if db.io_mode(IoClass::CompactionRead) != EffectiveMode::Direct {
        skip::skip(&format!("no O_DIRECT under {}", d.path().display()));
        return None;
    }
    if user_read == AccessMode::Direct && db.io_mode(IoClass::UserRead) != EffectiveMode::Direct {
        skip::skip("no O_DIRECT user reads");
        return None;
    }
    let mut value = vec![0u8; VALUE];
    for i in 0..KEYS {
        let k = i * 7919 % KEYS;
        value[..8].copy_from_slice(&k.to_le_bytes());
        db.put(key(k), &value).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    // Nothing is hot yet: the first compaction must warm nothing. (The
    // fill's own compactions may have warmed a block or two: opening a
    // new table reads its index through the page cache, and the page it
    // shares with the last data block counts as hot.)
    let evict = || {
        for t in tables(d.path()) {
            quietio::evict_file(&t).unwrap();
        }
    };
    evict();
    let before = db.stats().compaction;
    db.compact_all().unwrap();
    let s0 = db.stats().compaction;
    let first = s0.warmed_blocks - before.warmed_blocks;
    eprintln!(
        "first compaction warmed {first} blocks {} KiB",
        (s0.warmed_bytes - before.warmed_bytes) >> 10
    );
    assert_eq!(first, 0);
    evict();
    read_hot(&db, stride);
    let inputs = tables(d.path());
    let attributed_before = user_reads_attributed(&db);
    if db.io_mode(IoClass::UserRead) == EffectiveMode::Buffered {
        assert!(attributed_before > 0, "the user's reads were counted");
    }
    db.compact_all().unwrap();
    let attributed = user_reads_attributed(&db) - attributed_before;
    let outputs: Vec<PathBuf> = tables(d.path())
        .into_iter()
        .filter(|t| !inputs.contains(t))
        .collect();
    // Warming's block reads, and opening each output before its install,
    // are the engine's reads, not the user's: not counted as hits or misses.
    assert_eq!(attributed, 0, "reads counted for {} outputs", outputs.len());
    let page_cached_after = cached_bytes(&outputs);
    let before = db.stats().block_cache.misses;
    read_hot(&db, stride);
    let block_misses_after = db.stats().block_cache.misses - before;
    let s = db.stats();
    assert_eq!(db.iter().unwrap().count() as u64, KEYS);
    eprintln!(
        "warm={warm} user_read={user_read} block_cache={block_cache_bytes}: new tables {} KiB cached; {block_misses_after} of {HOT} hot reads missed the block cache; warmed {} blocks, {} KiB",
        page_cached_after >> 10,
        s.compaction.warmed_blocks,
        s.compaction.warmed_bytes >> 10
    );
    Some(Outcome {
        page_cached_after,
        output_bytes: outputs.iter().map(|f| fs::metadata(f).unwrap().len()).sum(),
        block_misses_after,
        warmed_blocks: s.compaction.warmed_blocks,
        warmed_bytes: s.compaction.warmed_bytes,
    })
}

const HOT_BYTES: u64 = HOT * VALUE as u64;

/// Warming read back about the hot part of the output and not the rest.
fn warmed_only_the_hot_part(o: &Outcome) {
    assert!(o.warmed_blocks >= HOT * 9 / 10, "{}", o.warmed_blocks);
    assert!(
        o.warmed_bytes < 3 * HOT_BYTES,
        "warmed {} bytes for {HOT_BYTES} hot bytes",
        o.warmed_bytes
    );
}

#[test]
fn buffered_user_reads_find_hot_output_in_the_page_cache() {
    let (Some(cold), Some(warm)) = (
        run(false, AccessMode::Buffered, 0, 1),
        run(true, AccessMode::Buffered, 0, 1),
    ) else {
        return;
    };
    // Direct output is not cached without warming, except what opening
    // each output for reads (before its install) read: footer, properties,
    // filter and index, about 1% of a table of 4 KiB values...
    assert!(
        cold.page_cached_after < cold.output_bytes / 50,
        "{} of {} bytes",
        cold.page_cached_after,
        cold.output_bytes
    );
    assert_eq!(cold.warmed_blocks, 0);
    // ...and about the hot part of it with warming (the reads before the
    // compaction were in key order, so kernel readahead made a bit more
    // than the hot keys resident, and that counts as hot).
    assert!(
        (HOT_BYTES * 9 / 10..3 * HOT_BYTES).contains(&warm.page_cached_after),
        "{} bytes cached for {HOT_BYTES} hot bytes",
        warm.page_cached_after
    );
    warmed_only_the_hot_part(&warm);
}

#[test]
fn direct_user_reads_find_hot_output_in_the_block_cache() {
    let (Some(cold), Some(warm)) = (
        run(false, AccessMode::Direct, 16 << 20, 1),
        run(true, AccessMode::Direct, 16 << 20, 1),
    ) else {
        return;
    };
    // New tables are new block-cache keys: every hot read misses...
    assert!(
        cold.block_misses_after >= HOT * 9 / 10,
        "{}",
        cold.block_misses_after
    );
    assert_eq!(cold.warmed_blocks, 0);
    // ...unless warming put them there.
    assert!(
        warm.block_misses_after <= HOT / 20,
        "{}",
        warm.block_misses_after
    );
    // Direct user reads left nothing in the page cache to warm from.
    assert!(
        warm.page_cached_after < HOT_BYTES / 10,
        "{}",
        warm.page_cached_after
    );
    warmed_only_the_hot_part(&warm);
}

#[test]
fn scattered_hot_keys_warm_their_own_blocks_only() {
    // Every fourth key hot: each sits alone in its block (4 KiB values),
    // with cold keys in the blocks around it. The direct user reads' block
    // cache says exactly which blocks were hot.
    let Some(warm) = run(true, AccessMode::Direct, 16 << 20, 4) else {
        return;
    };
    assert!(
        warm.block_misses_after <= HOT / 20,
        "{}",
        warm.block_misses_after
    );
    // Once counted the block after each hot key too (a block was taken to
    // hold keys from the last key of the block before it): 2 x HOT.
    assert!(
        (HOT * 9 / 10..=HOT * 11 / 10).contains(&warm.warmed_blocks),
        "warmed {} blocks for {HOT} scattered hot keys",
        warm.warmed_blocks
    );
}

#[test]
fn scattered_hot_keys_warm_their_own_blocks_only_with_buffered_reads() {
    // The same through the page cache, which answers per page: each 4 KiB
    // value's block is a few bytes longer than a page, so a hot block's
    // last page is the first of the cold block after it. Residency alone
    // would warm both; the blocks user reads fetched say which was hot.
    let Some(warm) = run(true, AccessMode::Buffered, 0, 4) else {
        return;
    };
    assert!(
        (HOT * 9 / 10..=HOT * 11 / 10).contains(&warm.warmed_blocks),
        "warmed {} blocks for {HOT} scattered hot keys",
        warm.warmed_blocks
    );
}
