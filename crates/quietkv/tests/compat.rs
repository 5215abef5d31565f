//! On-disk compatibility: databases written by earlier versions (tables,
//! manifest and WAL as described in `docs/format.md`) are committed under
//! `tests/fixtures/`: `v1/` (table format version 1) and `v3/` (format
//! version 3: data blocks padded to page boundaries). Every later version
//! must open them, read every value in them and keep working on them.
//!
//! Fixtures are never regenerated: if this test fails, the change broke
//! reading files users already have. A new format gets a new fixture
//! directory beside these, and the old ones keep being tested.
//!
//! `write_fixture` (ignored) is the generator; see the fixture's README.md.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{files_with, listing};
use quietkv::{check_dir, Compression, Db, Options, WriteBatch, WriteOptions};

/// The committed fixture of format version `v` ("v1", "v3").
fn fixture(v: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(v)
}

/// The number of tables in L0, and in the one deeper level that has any
/// (where `compact_all` put the base); panics if several deeper levels do.
fn shape(db: &Db) -> (usize, usize) {
    let levels = db.stats().levels;
    let deeper: Vec<usize> = levels[1..]
        .iter()
        .map(|l| l.files)
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(deeper.len(), 1, "{levels:?}");
    (levels[0].files, deeper[0])
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// What the generator does after a phase's writes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum After {
    /// Compact everything into the last level.
    CompactAll,
    /// Flush the memtable to one L0 table.
    Flush,
    /// Close: the writes stay only in the (sealed) WAL.
    Close,
}

/// One open of the database: its table compression, its write batches
/// (each batch is written with `sync` as given) and what follows them.
struct Phase {
    compression: Compression,
    batches: Vec<(Vec<Op>, bool)>,
    after: After,
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// Compressible values of varying length (so lz4 and zstd blocks pay off).
fn value(i: u32, round: u32) -> Vec<u8> {
    format!("r{round}-v{i}|")
        .repeat(2 + (i % 13) as usize)
        .into_bytes()
}

/// The fixed write sequence the fixture was generated from.
fn script() -> Vec<Phase> {
    let singles = |ops: Vec<Op>| ops.into_iter().map(|op| (vec![op], false)).collect();
    // L6: 600 keys, uncompressed, cut into several tables.
    let base = Phase {
        compression: Compression::None,
        batches: singles((0..600).map(|i| Op::Put(key(i), value(i, 1))).collect()),
        after: After::CompactAll,
    };
    // First L0 table, lz4: overwrite every third key, delete some.
    let mut ops = Vec::new();
    for i in (0..600).step_by(3) {
        ops.push(Op::Put(key(i), value(i, 2)));
    }
    for i in (5..600).step_by(10) {
        ops.push(Op::Delete(key(i)));
    }
    let lz4 = Phase {
        compression: Compression::Lz4,
        batches: singles(ops),
        after: After::Flush,
    };
    // Second L0 table, zstd: new keys, overwrites and deletes.
    let mut ops = Vec::new();
    for i in 600..650 {
        ops.push(Op::Put(key(i), value(i, 3)));
    }
    for i in (0..650).step_by(7) {
        ops.push(Op::Put(key(i), value(i, 3)));
    }
    for i in (0..650).step_by(11) {
        ops.push(Op::Delete(key(i)));
    }
    let zstd = Phase {
        compression: Compression::Zstd,
        batches: singles(ops),
        after: After::Flush,
    };
    // Only in the WAL: multi-entry batches, synced and not, with deletes
    // of keys that live in tables and of a key written in the same batch.
    let mut batches = Vec::new();
    for b in 0..10u32 {
        let mut ops = Vec::new();
        for i in 0..5 {
            let n = 700 + b * 5 + i;
            ops.push(Op::Put(key(n), value(n, 4)));
        }
        ops.push(Op::Put(key(b * 13 + 1), value(b, 4)));
        ops.push(Op::Delete(key(b * 17 + 2)));
        batches.push((ops, b % 3 == 0));
    }
    batches.push((
        vec![
            Op::Put(key(900), value(900, 4)),
            Op::Delete(key(900)),
            Op::Delete(key(601)),
        ],
        true,
    ));
    batches.push((vec![Op::Put(key(902), value(902, 5))], false));
    let wal = Phase {
        compression: Compression::None,
        batches,
        after: After::Close,
    };
    vec![base, lz4, zstd, wal]
}

/// Every key the script ever wrote, with its final value (`None` = deleted).
fn expected() -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let mut model = BTreeMap::new();
    for phase in script() {
        for (ops, _) in phase.batches {
            for op in ops {
                match op {
                    Op::Put(k, v) => model.insert(k, Some(v)),
                    Op::Delete(k) => model.insert(k, None),
                };
            }
        }
    }
    model
}

/// FNV-1a over the expected contents: pins the script, so that editing it
/// (which would make the test disagree with the committed files, or worse,
/// agree after a regeneration) fails loudly here.
fn fingerprint(model: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (k, v) in model {
        eat(&(k.len() as u64).to_le_bytes());
        eat(k);
        match v {
            Some(v) => {
                eat(&[1]);
                eat(&(v.len() as u64).to_le_bytes());
                eat(v);
            }
            None => eat(&[0]),
        }
    }
    h
}

/// Options for the generator: only explicit flushes and compactions, small
/// tables so the last level has several.
fn generator_options(compression: Compression) -> Options {
    Options::default()
        .compression(compression)
        .target_file_size(16 << 10)
        .l0_compaction_trigger(8)
        .l0_slowdown_trigger(16)
        .l0_stop_trigger(24)
}

/// A private copy of the fixture: opening it writes (a new manifest, the
/// WAL replayed into a table), and the committed files must stay as they are.
fn copy_fixture(v: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut copied = 0;
    for entry in std::fs::read_dir(fixture(v)).expect("the fixture is committed") {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "README.md" {
            continue;
        }
        std::fs::copy(entry.path(), d.path().join(&name)).unwrap();
        copied += 1;
    }
    assert!(copied > 0, "the {v} fixture is empty");
    d
}

fn assert_contents(db: &Db, model: &BTreeMap<Vec<u8>, Option<Vec<u8>>>, when: &str) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            v.as_ref(),
            "{when}: key {}",
            String::from_utf8_lossy(k)
        );
    }
    let live: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())))
        .collect();
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db.iter().unwrap().map(Result::unwrap).collect();
    assert_eq!(scanned.len(), live.len(), "{when}: number of live keys");
    assert!(
        scanned == live,
        "{when}: a full scan differs from the model"
    );
}

/// The script and the model the committed fixture was written from.
#[test]
fn script_is_unchanged() {
    let model = expected();
    assert_eq!(model.len(), 702);
    assert_eq!(model.values().filter(|v| v.is_none()).count(), 115);
    assert_eq!(fingerprint(&model), 0xfe36_70ea_8892_ba99);
}

#[test]
fn fixture_v1_opens_reads_and_keeps_working() {
    opens_reads_and_keeps_working("v1");
}

/// The tables of the compacted base have padded blocks (format version 3);
/// the two L0 tables, compressed, have none (version 1).
#[test]
fn fixture_v3_opens_reads_and_keeps_working() {
    let versions: Vec<(String, u32)> = files_with(&fixture("v3"), ".sst")
        .iter()
        .map(|p| {
            let b = std::fs::read(p).unwrap();
            let v = u32::from_le_bytes(b[b.len() - 12..b.len() - 8].try_into().unwrap());
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect();
    assert_eq!(
        versions.iter().filter(|(_, v)| *v == 3).count(),
        3,
        "{versions:?}"
    );
    assert_eq!(
        versions.iter().filter(|(_, v)| *v == 1).count(),
        2,
        "{versions:?}"
    );
    opens_reads_and_keeps_working("v3");
}

fn opens_reads_and_keeps_working(v: &str) {
    let model = expected();
    let before = listing(&fixture(v));
    let d = copy_fixture(v);
    let dir = d.path();

    // The files themselves, before anything opens them: tables, and a WAL
    // holding the last phase's records.
    let report = check_dir(dir).unwrap();
    assert!(report.is_ok(), "fixture fails check: {:?}", report.problems);
    assert!(report.live_tables >= 4, "{report:?}");
    assert_eq!(report.wal_files, 1, "{report:?}");
    assert_eq!(report.wal_records, 12, "{report:?}");

    let db = Db::open(dir, Options::default()).unwrap();
    // Two L0 tables from the flushes, one from replaying the WAL; the
    // compacted base in several tables below.
    assert_eq!(shape(&db), (3, 3));
    assert_contents(&db, &model, "after open");

    // Keep working on it: write, flush, compact, reopen.
    let mut model = model;
    let mut batch = WriteBatch::new();
    for i in (0..1000).step_by(9) {
        let (k, v) = (key(i), value(i, 9));
        batch.put(&k, &v).unwrap();
        model.insert(k, Some(v));
    }
    batch.delete(key(3)).unwrap();
    model.insert(key(3), None);
    db.write(batch, WriteOptions { sync: true }).unwrap();
    db.flush().unwrap();
    db.delete(key(4)).unwrap();
    model.insert(key(4), None);
    db.compact_all().unwrap();
    assert_contents(&db, &model, "after writes and a full compaction");
    db.close().unwrap();

    let report = check_dir(dir).unwrap();
    assert!(report.is_ok(), "check after use: {:?}", report.problems);
    let db = Db::open(dir, Options::default()).unwrap();
    assert_contents(&db, &model, "after reopening");
    db.close().unwrap();

    assert_eq!(
        listing(&fixture(v)),
        before,
        "the committed fixture was modified"
    );
}

/// A v1 database gets keyspaces: its data stays the default keyspace's,
/// the new keyspaces and their data persist, and it still checks clean.
#[test]
fn fixture_v1_gets_keyspaces() {
    let model = expected();
    let d = copy_fixture("v1");
    let dir = d.path();
    let db = Db::open(dir, Options::default()).unwrap();
    assert_eq!(db.keyspace_names(), ["default"]);
    let events = db
        .keyspace("events", quietkv::KeyspaceOptions::default())
        .unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&events, key(1), b"e1").unwrap();
    batch.put(key(1), b"d1").unwrap();
    db.write(batch, WriteOptions { sync: true }).unwrap();
    events.flush().unwrap();
    events.put(key(2), b"e2").unwrap();
    let mut model = model;
    model.insert(key(1), Some(b"d1".to_vec()));
    assert_contents(&db, &model, "with a keyspace");
    drop(events);
    db.close().unwrap();

    let report = check_dir(dir).unwrap();
    assert!(
        report.is_ok(),
        "check with keyspaces: {:?}",
        report.problems
    );
    let db = Db::open(dir, Options::default()).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "events"]);
    let events = db
        .keyspace("events", quietkv::KeyspaceOptions::default())
        .unwrap();
    let got: Vec<_> = events.iter().unwrap().map(Result::unwrap).collect();
    assert_eq!(
        got,
        vec![(key(1), b"e1".to_vec()), (key(2), b"e2".to_vec())]
    );
    assert_contents(&db, &model, "after reopening with a keyspace");
}

/// A v1 database (written before keyspaces and before tables recorded
/// one) repairs as before: CURRENT lost, the manifest places its tables in
/// the default keyspace, the WAL is replayed into it, nothing is adopted
/// or dropped, and it reads the same.
#[test]
fn fixture_v1_repairs_into_the_default_keyspace() {
    let model = expected();
    let d = copy_fixture("v1");
    let dir = d.path();
    std::fs::remove_file(dir.join("CURRENT")).unwrap();
    let r = quietkv::repair_dir(dir, &quietkv::RepairOptions::default()).unwrap();
    assert!(r.manifest.is_some(), "{r:?}");
    assert!(!r.lost_anything(), "{r:?}");
    assert_eq!(r.keyspaces.len(), 1, "{r:?}");
    assert_eq!(
        (r.keyspaces[0].id, r.keyspaces[0].name.as_str()),
        (0, "default")
    );
    assert!(r.tables_kept.len() >= 4 && r.tables_kept.iter().all(|t| t.keyspace == 0));
    assert_eq!(r.wal_records_salvaged, 12, "{r:?}");
    let report = check_dir(dir).unwrap();
    assert!(report.is_ok(), "check after repair: {:?}", report.problems);
    let db = Db::open(dir, Options::default()).unwrap();
    assert_eq!(db.keyspace_names(), ["default"]);
    assert_contents(&db, &model, "after repair");
}

/// Writes the fixture; run once per format version, never to refresh one:
///
/// ```text
/// QUIETKV_FIXTURE_OUT=/tmp/v1 cargo test -p quietkv --test compat -- --ignored write_fixture
/// ```
///
/// It refuses to write into a directory that already holds files.
#[test]
#[ignore = "generator: writes a new fixture directory"]
fn write_fixture() {
    let out = PathBuf::from(std::env::var("QUIETKV_FIXTURE_OUT").expect("set QUIETKV_FIXTURE_OUT"));
    if out.exists() {
        assert!(
            std::fs::read_dir(&out).unwrap().next().is_none(),
            "{} is not empty: fixtures are never regenerated",
            out.display()
        );
    }
    for phase in script() {
        let db = Db::open(&out, generator_options(phase.compression)).unwrap();
        for (ops, sync) in phase.batches {
            let mut batch = WriteBatch::new();
            for op in ops {
                match op {
                    Op::Put(k, v) => batch.put(&k, &v).unwrap(),
                    Op::Delete(k) => batch.delete(&k).unwrap(),
                }
            }
            db.write(batch, WriteOptions { sync }).unwrap();
        }
        match phase.after {
            After::CompactAll => db.compact_all().unwrap(),
            After::Flush => db.flush().unwrap(),
            After::Close => {}
        }
        db.close().unwrap();
    }
    let db = Db::open_read_only(&out, Options::default()).unwrap();
    assert_eq!(shape(&db), (2, 3));
    assert_contents(&db, &expected(), "generated");
    drop(db);
    let report = check_dir(&out).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    println!("{report:#?}");
}
