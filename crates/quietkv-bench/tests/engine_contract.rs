//! The contract every engine behind `BenchEngine` keeps, checked against
//! each built engine (quietkv always; RocksDB and fjall with the features
//! `rocksdb` and `fjall`): what the experiments rely on when they fill,
//! read, flush, compact, copy a source and read the counters.

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
        // The keys the tests write: 0..400.
        key_span: Some(400),
        // As E1-E3 ask: the contract checks that reads are counted.
        count_page_cache_hits: true,
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

    // The user-write bytes count the keys and values written.
    db.flush().unwrap();
    db.wait_idle().unwrap();
    assert!(db.counters().user_write_bytes >= start.user_write_bytes + 400 * VALUE as u64);

    // An explicit flush of a memtable that holds something moves the flush
    // counters. The memtable is given one write after a flush emptied it:
    // with a 64 KiB memtable an engine may have sealed the fill's last
    // memtable in the background (fjall does, and counts that flush as
    // compaction work), leaving an explicit flush right after the fill
    // nothing to write.
    fill_value(&mut v, 0, 1);
    db.put(&key(0), &v).unwrap();
    let unflushed = db.counters();
    // An engine that accounts its memory counts that write in its
    // memtables, and the tables it holds open in their readers.
    if let Some(m) = unflushed.memory {
        if let Some(b) = m.memtable_bytes {
            assert!(b >= VALUE as u64, "{}: memtables {b} bytes", E::NAME);
        }
        if let Some(b) = m.table_readers_bytes {
            assert!(b > 0, "{}: no bytes in the open tables' readers", E::NAME);
        }
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let flushed = db.counters();
    assert!(
        flushed.flush_write_bytes > unflushed.flush_write_bytes,
        "{}: flush bytes did not move: {unflushed:?} -> {flushed:?}",
        E::NAME
    );

    // Overwrite half, then a full compaction rewrites everything: its read
    // and write counters move and every key keeps its newest value.
    fill(&db, 0..200, 2);
    db.flush().unwrap();
    // Memtables the fill sealed may still be flushing in the background
    // (fjall flushes them on its own workers): a table one of them adds
    // after the full compaction picked its inputs would stay in L0.
    db.wait_idle().unwrap();
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
    // An engine that reports its work by level reports the levels it
    // compacted into (RocksDB's table is in 0.1 GB steps: rows, no bytes,
    // at this size).
    if let Some(levels) = &after.compaction_into_levels {
        assert!(levels.len() >= 2, "{}: {levels:?}", E::NAME);
    }
    assert!(after.compaction_seconds >= before.compaction_seconds);
    assert_eq!(after.compactions_running, 0, "idle after wait_idle");
    // A full compaction leaves nothing in level 0.
    if let Some(n) = after.l0_tables {
        assert_eq!(n, 0, "{}: L0 tables after a full compaction", E::NAME);
    }
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
    // An engine that times its gets counts them and the file reads they
    // issued, and the per-phase figures come out of two snapshots.
    if let (Some(r), Some(a)) = (read.get_times, after.get_times) {
        assert!(
            r.gets >= a.gets + 5,
            "{}: gets are counted: {a:?} -> {r:?}",
            E::NAME
        );
        assert!(
            r.file_reads > a.file_reads,
            "file reads of gets are counted"
        );
        let figures = r.phase_figures(&a);
        let per_get = figures
            .iter()
            .find(|(n, _)| *n == "engine_file_reads_per_get")
            .map(|(_, v)| *v);
        assert!(matches!(per_get, Some(v) if v > 0.0), "{figures:?}");
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

/// With `+ks=4` the keys go to four keyspaces by key range (the default
/// one and three named ones), each holding about a quarter of them, and
/// the contract holds across them (batches spanning keyspaces, flush and
/// full compaction of all, counters, close and reopen). A database cut
/// another way is refused rather than read from the wrong keyspaces.
#[test]
fn quietkv_keeps_the_contract_with_its_keys_over_four_keyspaces() {
    let config = QuietkvConfig::parse("auto+ks=4").unwrap();
    contract::<QuietkvEngine>(&config);
    let dir = scratch("spread");
    let path = dir.path().join("db");
    let db = QuietkvEngine::open(&path, &config, &tuning::<QuietkvEngine>(true)).unwrap();
    fill(&db, 0..400, 1);
    let names = db.db().keyspace_names();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(names[0], quietkv::DEFAULT_KEYSPACE);
    for name in &names {
        let ks = db
            .db()
            .keyspace(name, quietkv::KeyspaceOptions::default())
            .unwrap();
        let len = ks.approximate_len();
        assert!((90..=110).contains(&len), "{name}: {len} keys");
    }
    // The default keyspace holds the first part, the last one the end.
    assert!(db.db().get(key(0)).unwrap().is_some());
    assert!(db.db().get(key(399)).unwrap().is_none());
    assert_eq!(version_of(&db, 399), Some(1));
    db.close().unwrap();
    let two = QuietkvConfig::parse("auto+ks=2").unwrap();
    let e = QuietkvEngine::open(&path, &two, &tuning::<QuietkvEngine>(false))
        .err()
        .expect("a database cut in four is not read as two parts");
    assert!(e.contains("keyspaces are"), "{e}");
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

/// A database built, closed, and copied the way a run copies its source
/// (immutable files hard-linked, the rest copied) opens with create off
/// and holds every key; the source stays intact when the copy compacts.
fn a_copy_of_a_closed_database_opens_and_reads<E: BenchEngine>() {
    let dir = scratch(&format!("copy-{}", E::NAME));
    let src = dir.path().join("src");
    let config = E::source_config();
    let db = E::open(&src, &config, &tuning::<E>(true)).unwrap();
    fill(&db, 0..300, 3);
    db.flush().unwrap();
    db.compact_all().unwrap();
    db.wait_idle().unwrap();
    db.close().unwrap();
    let files = quietkv_bench::source::list_files(&src).unwrap();
    assert!(
        files.iter().any(|(f, _)| E::immutable_file(f)),
        "{}: no file of the database is taken for a table: {files:?}",
        E::NAME
    );
    let m = quietkv_bench::source::Manifest {
        spec: quietkv_bench::source::SourceSpec::new::<E>(1 << 20, VALUE),
        total_bytes: files.iter().map(|f| f.1).sum(),
        files,
        build_seconds: 0.0,
    };
    let run = dir.path().join("run");
    quietkv_bench::source::copy_to(&src, &m, &run, &|f| E::immutable_file(f)).unwrap();
    let db = E::open(&run, &config, &tuning::<E>(false)).unwrap();
    for k in [0, 150, 299] {
        assert_eq!(version_of(&db, k), Some(3), "{}: key {k}", E::NAME);
    }
    fill(&db, 0..100, 4);
    db.flush().unwrap();
    db.compact_all().unwrap();
    db.close().unwrap();
    assert_eq!(
        quietkv_bench::source::mismatch(&src, &m.spec),
        Some("no manifest (not built, or the build did not finish)".into()),
        "only the manifest is missing"
    );
    assert_eq!(quietkv_bench::source::list_files(&src).unwrap(), m.files);
}

#[test]
fn quietkv_copies_of_a_source_open_and_read() {
    a_copy_of_a_closed_database_opens_and_reads::<QuietkvEngine>();
}

#[cfg(feature = "rocksdb")]
mod rocksdb {
    use super::*;
    use quietkv_bench::engines::{RocksDbConfig, RocksDbEngine};

    #[test]
    fn rocksdb_keeps_the_contract_with_its_source_configuration() {
        source_config_keeps_the_cache::<RocksDbEngine>();
        contract::<RocksDbEngine>(&RocksDbEngine::source_config());
    }

    #[test]
    fn rocksdb_keeps_the_contract_in_every_direct_configuration() {
        for name in ["write-direct", "read-direct", "both-direct", "all-direct"] {
            let config = RocksDbConfig::parse(name).unwrap();
            let dir = scratch("rocksdb-direct-probe");
            if let Err(why) = config.check(dir.path()) {
                skip::skip(&format!("no O_DIRECT: {why}"));
                return;
            }
            contract::<RocksDbEngine>(&config);
        }
    }

    #[test]
    fn rocksdb_copies_of_a_source_open_and_read() {
        a_copy_of_a_closed_database_opens_and_reads::<RocksDbEngine>();
    }

    #[test]
    fn rocksdb_throttled_compaction_is_held_to_the_rate() {
        // 2 MiB/s over reads and writes: a full compaction of ~1.2 MiB
        // (read + written ~2.4 MiB) cannot finish in well under a second.
        let dir = scratch("rocksdb-throttle");
        let path = dir.path().join("db");
        let config = RocksDbEngine::source_config();
        let db = RocksDbEngine::open(&path, &config, &tuning::<RocksDbEngine>(true)).unwrap();
        fill(&db, 0..1200, 1);
        db.flush().unwrap();
        db.wait_idle().unwrap();
        db.close().unwrap();
        let mut t = tuning::<RocksDbEngine>(false);
        t.background_rate_limit_mib = 2;
        let db = RocksDbEngine::open(&path, &config, &t).unwrap();
        let before = db.counters();
        let start = std::time::Instant::now();
        db.compact_all().unwrap();
        let secs = start.elapsed().as_secs_f64();
        let after = db.counters();
        let moved = (after.compaction_read_bytes - before.compaction_read_bytes)
            + (after.compaction_write_bytes - before.compaction_write_bytes);
        assert!(moved > 2 << 20, "moved {moved}");
        assert!(
            secs >= 0.5 * moved as f64 / (2u64 << 20) as f64,
            "{moved} bytes in {secs:.2} s at 2 MiB/s"
        );
        db.close().unwrap();
    }
}

#[cfg(feature = "fjall")]
mod fjall {
    use super::*;
    use quietkv_bench::engines::FjallEngine;

    #[test]
    fn fjall_keeps_the_contract_with_its_configuration() {
        source_config_keeps_the_cache::<FjallEngine>();
        contract::<FjallEngine>(&FjallEngine::source_config());
    }

    #[test]
    fn fjall_copies_of_a_source_open_and_read() {
        a_copy_of_a_closed_database_opens_and_reads::<FjallEngine>();
    }
}
