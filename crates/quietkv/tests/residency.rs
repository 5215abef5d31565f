//! What compaction leaves in the page cache, measured with cachestat: with
//! direct compaction I/O the new tables are (almost) absent from the cache;
//! with buffered compaction they are present.

mod common;
#[path = "support/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};

use common::{cached_fraction, new_tables, tables};

use quietkv::{AccessMode, Db, IoClass, Options};

const KEYS: u64 = 40_000; // x 4 KiB values = about 160 MiB
const VALUE: usize = 4096;

fn compact_and_measure(mode: AccessMode) -> f64 {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = Options::default()
        .memtable_size(16 << 20)
        .target_file_size(16 << 20)
        .io_mode(IoClass::CompactionRead, mode)
        .io_mode(IoClass::CompactionWrite, mode);
    let db = Db::open(d.path(), opts).unwrap();
    assert_eq!(db.io_mode(IoClass::CompactionWrite).name(), mode.name());
    let mut value = vec![0u8; VALUE];
    // A scattered key order (a permutation: 7919 is prime and does not
    // divide KEYS), so the compaction really merges.
    for i in 0..KEYS {
        let k = i * 7919 % KEYS;
        value[..8].copy_from_slice(&k.to_le_bytes());
        db.put(format!("{k:016}").as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let before: Vec<PathBuf> = tables(d.path());
    for t in &before {
        quietio::evict_file(t).unwrap();
    }
    db.compact_all().unwrap();
    // compact_all returns after the replaced tables are deleted.
    assert!(
        before.iter().all(|t| !t.exists()),
        "inputs of compact_all still on disk"
    );
    let after = new_tables(d.path(), &before);
    assert!(!after.is_empty());
    let fraction = cached_fraction(&after);
    assert_eq!(db.iter().unwrap().count() as u64, KEYS);
    let s = db.stats();
    eprintln!(
        "{mode}: compaction read {} MiB, wrote {} MiB in {:.2} s; new tables {:.1}% cached",
        s.compaction.bytes_read >> 20,
        s.compaction.bytes_written >> 20,
        s.compaction.seconds,
        fraction * 100.0
    );
    assert!(s.compaction.bytes_written > 100 << 20);
    fraction
}

#[test]
fn direct_compaction_leaves_new_tables_uncached_and_buffered_does_not() {
    let caps = quietio::probe(Path::new(env!("CARGO_TARGET_TMPDIR"))).unwrap();
    if !caps.direct.supported {
        skip::skip(&format!(
            "no O_DIRECT in {}: {:?}",
            caps.dir.display(),
            caps.direct.reason
        ));
        return;
    }
    let direct = compact_and_measure(AccessMode::Direct);
    assert!(
        direct < 0.05,
        "direct compaction left {direct} of its output cached"
    );
    let buffered = compact_and_measure(AccessMode::Buffered);
    assert!(
        buffered > 0.5,
        "buffered compaction left only {buffered} of its output cached"
    );
}
