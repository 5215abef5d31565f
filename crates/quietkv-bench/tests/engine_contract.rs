//! The contract every engine behind `BenchEngine` keeps, checked against
//! each built engine (quietkv today): what the experiments rely on when
//! they fill, read, flush, compact and read the counters.

#[path = "../../quietio/tests/support/skip.rs"]
mod skip;

use std::path::Path;

use quietkv_bench::engines::{
    Batch, BenchEngine, CacheUse, EngineConfig, QuietkvConfig, QuietkvEngine, Tuning,
};
use quietkv_bench::keys::{fill_value, is_value_of, key};

const VALUE: usize = 1000;

/// Small memtable and tables, so that a few hundred keys make several
/// tables and a full compaction has work to do.
fn tuning<E: BenchEngine>(create: bool) -> Tuning {
    let mut layout = E::bench_layout();
    layout.target_file_size = 64 << 10;
    Tuning {
        create,
        layout: Some(layout),
        block_cache_bytes: Some(1 << 20),
        memtable_bytes: Some(64 << 10),
        background_threads: Some(1),
        background_rate_limit_mib: 0,
    }
}

fn scratch(name: &str) -> tempfile::TempDir {
    // Under target/: a real filesystem (O_DIRECT works there), not tmpfs.
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).unwrap();
    tempfile::Builder::new()
        .prefix(name)
        .tempdir_in(base)
        .unwrap()
}

fn fill<E: BenchEngine>(db: &E, keys: std::ops::Range<u64>, version: u64) {
    let mut value = vec![0u8; VALUE];
    let mut batch = Batch::new();
    let ks: Vec<u64> = keys.collect();
    for chunk in ks.chunks(16) {
        batch.clear();
        for &k in chunk {
            fill_value(&mut value, k, version);
            batch.put(&key(k), &value);
        }
        db.put_batch(&batch).unwrap();
    }
}

fn version_of<E: BenchEngine>(db: &E, k: u64) -> Option<u64> {
    let v = db.get(&key(k)).unwrap()?;
    assert!(is_value_of(&v, k, VALUE), "key {k}: a value of another key");
    Some(u64::from_le_bytes(v[8..16].try_into().unwrap()))
}

/// put/get/flush/full compaction/counters/close/reopen with `config`.
fn contract<E: BenchEngine>(config: &E::Config) {
    let dir = scratch(&format!("contract-{}-{}", E::NAME, config.name()));
    let path = dir.path().join("db");
    assert!(
        E::open(&path, config, &tuning::<E>(false)).is_err(),
        "{}: opening a missing database without create must fail",
        E::NAME
    );
    let db = E::open(&path, config, &tuning::<E>(true)).unwrap();
    assert_eq!(db.get(&key(1)).unwrap(), None);

    // Single puts and batches are read back.
    let mut v = vec![0u8; VALUE];
    fill_value(&mut v, 1, 7);
    db.put(&key(1), &v).unwrap();
    assert_eq!(version_of(&db, 1), Some(7));
    let start = db.counters();
    fill(&db, 0..400, 1);
    assert_eq!(version_of(&db, 1), Some(1), "a later batch overwrites");
    assert_eq!(version_of(&db, 399), Some(1));
    assert_eq!(db.get(&key(400)).unwrap(), None);

    // Flush moves the flush counters; the user-write bytes count the keys
    // and values written.
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let flushed = db.counters();
    assert!(
        flushed.flush_write_bytes > start.flush_write_bytes,
        "{}: flush bytes did not move: {flushed:?}",
        E::NAME
    );
    assert!(flushed.user_write_bytes >= start.user_write_bytes + 400 * VALUE as u64);

    // Overwrite half, then a full compaction rewrites everything: its read
    // and write counters move and every key keeps its newest value.
    fill(&db, 0..200, 2);
    db.flush().unwrap();
    let before = db.counters();
    db.compact_all().unwrap();
    db.wait_idle().unwrap();
    let after = db.counters();
    assert!(
        after.compaction_read_bytes > before.compaction_read_bytes,
        "{}: compaction read bytes did not move: {before:?} -> {after:?}",
        E::NAME
    );
    assert!(
        after.compaction_write_bytes > before.compaction_write_bytes,
        "{}: compaction write bytes did not move",
        E::NAME
    );
    assert!(after.compactions > before.compactions);
    assert!(after.compaction_seconds >= before.compaction_seconds);
    assert_eq!(after.compactions_running, 0, "idle after wait_idle");
    for k in [0, 1, 199] {
        assert_eq!(version_of(&db, k), Some(2), "key {k}");
    }
    for k in [200, 399] {
        assert_eq!(version_of(&db, k), Some(1), "key {k}");
    }
    // Reads of the new tables' blocks (not yet in the block cache) reach
    // the files, and an engine that counts page-cache hits counts them.
    let read = db.counters();
    if let (Some(r), Some(a)) = (read.user_read_page_cache, after.user_read_page_cache) {
        assert!(r.hits + r.misses > a.hits + a.misses, "reads are counted");
    }
    if let (Some(r), Some(a)) = (read.block_cache, after.block_cache) {
        assert!(r.misses > a.misses, "block cache misses are counted");
    }

    // Close, then a run's open (create off) finds everything.
    db.close().unwrap();
    let db = E::open(&path, config, &tuning::<E>(false)).unwrap();
    assert_eq!(version_of(&db, 0), Some(2));
    assert_eq!(version_of(&db, 399), Some(1));
    assert_eq!(db.get(&key(400)).unwrap(), None);
    db.close().unwrap();
}

/// Sources are built with a configuration that keeps the page cache in
/// every direction, so no engine's source build depends on a probe.
fn source_config_keeps_the_cache<E: BenchEngine>() {
    let dir = scratch("source-config");
    let config = E::source_config();
    config.check(dir.path()).unwrap();
    let u = config.page_cache(dir.path());
    for d in [
        &u.compaction_reads,
        &u.compaction_writes,
        &u.flush_writes,
        &u.user_reads,
    ] {
        assert_eq!(d.effect, CacheUse::Cached, "{}: {u:?}", E::NAME);
    }
}

#[test]
fn quietkv_keeps_the_contract_with_its_source_configuration() {
    source_config_keeps_the_cache::<QuietkvEngine>();
    contract::<QuietkvEngine>(&QuietkvEngine::source_config());
}

#[test]
fn quietkv_keeps_the_contract_in_its_default_configuration() {
    contract::<QuietkvEngine>(&QuietkvConfig::parse("auto").unwrap());
}

#[test]
fn quietkv_keeps_the_contract_with_direct_background_io() {
    let config = QuietkvConfig::parse("both-direct").unwrap();
    let dir = scratch("direct-probe");
    if let Err(why) = config.check(dir.path()) {
        // Not every filesystem takes O_DIRECT; the check says why.
        skip::skip(&format!("no O_DIRECT: {why}"));
        return;
    }
    contract::<QuietkvEngine>(&config);
}

#[test]
fn quietkv_throughput_configs_keep_the_contract_on_engine_defaults() {
    let config = QuietkvConfig::parse_compaction_only("buffered").unwrap();
    let dir = scratch("defaults");
    let path = dir.path().join("db");
    let db = QuietkvEngine::open(&path, &config, &Tuning::engine_defaults()).unwrap();
    fill(&db, 0..50, 1);
    db.flush().unwrap();
    assert!(db.counters().flush_write_bytes > 0);
    assert_eq!(version_of(&db, 49), Some(1));
    db.close().unwrap();
}
