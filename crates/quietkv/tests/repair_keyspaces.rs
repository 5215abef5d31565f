//! `repair_dir` of a database with keyspaces: the default keyspace and
//! two others (one with its own table options), written with batches that
//! span keyspaces, with a third keyspace dropped. After a lost CURRENT, a
//! lost or damaged manifest, a damaged table block, or with writes only in
//! the WAL, every keyspace comes back under its name and options holding
//! exactly its keys (checked against a model per keyspace), and the
//! dropped keyspace's data does not come back.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use quietkv::{
    check_dir, repair_dir, Db, ErrorKind, KeyspaceOptions, Options, RepairOptions, RepairReport,
    WriteBatch, WriteOptions,
};

/// Small blocks and tables; no background compaction, so the tables a test
/// makes are the ones it damages.
fn opts() -> Options {
    Options::default()
        .memtable_size(1 << 20)
        .block_size(512)
        .target_file_size(8 << 10)
        .l0_compaction_trigger(50)
        .l0_slowdown_trigger(60)
        .l0_stop_trigger(70)
        .background_threads(1)
}

/// Keyspace "b"'s own table options.
fn b_opts() -> KeyspaceOptions {
    KeyspaceOptions::default()
        .block_size(1024)
        .bloom_bits_per_key(0)
}

fn repair(d: &Path) -> RepairReport {
    repair_dir(d, &RepairOptions { db: opts() }).unwrap()
}

/// What a keyspace should hold: key -> value (None = deleted).
type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// The model of every live keyspace, by name.
type Models = BTreeMap<&'static str, Model>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The database the tests repair, and what it should hold.
struct Built {
    models: Models,
    /// The tables keyspace "b" flushed (its only ones).
    b_tables: Vec<PathBuf>,
    /// Keys of the dropped keyspace "c" (none of them is written anywhere
    /// else).
    c_keys: Vec<Vec<u8>>,
}

fn ssts(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    v.sort();
    v
}

/// Keyspaces default, "a" (default options), "b" (`b_opts`), and "c",
/// dropped. Tables at several levels, batches across keyspaces with
/// overwrites, deletes and range deletes, and writes left in the WAL of
/// every keyspace.
///
/// `leave_dropped`: "c" is dropped with its data still in files (a WAL
/// record and a table, as a crash before its table was deleted leaves
/// them). Otherwise the database is reopened after the drop, which writes
/// everything the WAL held to tables and deletes c's data, so only the
/// writes after the reopen are in the WAL.
fn build(d: &Path, leave_dropped: bool) -> Built {
    let spare = tempfile::tempdir().unwrap();
    let mut models = Models::new();
    let mut db = Db::open(d, opts()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::default()).unwrap();
    let b = db.keyspace("b", b_opts()).unwrap();
    let c = db.keyspace("c", KeyspaceOptions::default()).unwrap();
    let (mut md, mut ma, mut mb) = (Model::new(), Model::new(), Model::new());
    // The same keys in every keyspace, with values naming the keyspace: a
    // key read from the wrong keyspace is seen.
    for i in 0..300 {
        let v = |ks: &str| format!("gen0-{ks}-{i}").repeat(3).into_bytes();
        db.put(key(i), v("d")).unwrap();
        md.insert(key(i), Some(v("d")));
        a.put(key(i), v("a")).unwrap();
        ma.insert(key(i), Some(v("a")));
        b.put(key(i), v("b")).unwrap();
        mb.insert(key(i), Some(v("b")));
    }
    let mut c_keys = Vec::new();
    for i in 0..100 {
        let k = format!("c-only{i:03}").into_bytes();
        c.put(&k, b"dropped").unwrap();
        c_keys.push(k);
    }
    db.flush().unwrap();
    db.compact_all().unwrap();
    a.flush().unwrap();
    a.compact_all().unwrap();
    // Batches across keyspaces: overwrites and deletes in all three.
    for i in (0..300).step_by(7) {
        let mut batch = WriteBatch::new();
        let v = format!("cross-{i}").into_bytes();
        batch.put(key(i), &v).unwrap();
        md.insert(key(i), Some(v.clone()));
        batch.put_in(&a, key(i + 1), &v).unwrap();
        ma.insert(key(i + 1), Some(v.clone()));
        batch.delete_in(&b, key(i + 2)).unwrap();
        mb.insert(key(i + 2), None);
        db.write(batch, WriteOptions::default()).unwrap();
    }
    b.delete_range(key(40)..key(50)).unwrap();
    for i in 40..50 {
        mb.insert(key(i), None);
    }
    let before = ssts(d);
    b.flush().unwrap();
    let b_tables: Vec<PathBuf> = ssts(d)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(b_tables.len(), 1, "b's flush wrote one table");
    db.flush().unwrap();

    // "c": a table and a WAL record, then the drop.
    let before = ssts(d);
    c.flush().unwrap();
    let c_tables: Vec<PathBuf> = ssts(d)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(c_tables.len(), 1);
    let c_copy = spare.path().join("c.sst");
    fs::copy(&c_tables[0], &c_copy).unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&c, b"c-only-wal", b"dropped").unwrap();
    batch.put(b"with-c", b"d").unwrap();
    md.insert(b"with-c".to_vec(), Some(b"d".to_vec()));
    db.write(batch, WriteOptions::default()).unwrap();
    c_keys.push(b"c-only-wal".to_vec());
    drop(c);
    db.drop_keyspace("c").unwrap();

    let (a, b) = if leave_dropped {
        (a, b)
    } else {
        drop((a, b));
        db.close().unwrap();
        db = Db::open(d, opts()).unwrap();
        (
            db.keyspace("a", KeyspaceOptions::default()).unwrap(),
            db.keyspace("b", b_opts()).unwrap(),
        )
    };
    // Left in the WAL: writes to every keyspace, across keyspaces too.
    for i in (0..300).step_by(11) {
        let mut batch = WriteBatch::new();
        let v = format!("wal-{i}").into_bytes();
        batch.put(key(i), &v).unwrap();
        md.insert(key(i), Some(v.clone()));
        batch.put_in(&a, key(i), &v).unwrap();
        ma.insert(key(i), Some(v.clone()));
        batch.put_in(&b, key(i + 3), &v).unwrap();
        mb.insert(key(i + 3), Some(v.clone()));
        db.write(batch, WriteOptions::default()).unwrap();
    }
    for ks in ["d", "a", "b"] {
        let k = format!("wal-only-{ks}").into_bytes();
        let v = ks.as_bytes().to_vec();
        match ks {
            "d" => {
                db.put(&k, &v).unwrap();
                md.insert(k, Some(v));
            }
            "a" => {
                a.put(&k, &v).unwrap();
                ma.insert(k, Some(v));
            }
            _ => {
                b.put(&k, &v).unwrap();
                mb.insert(k, Some(v));
            }
        }
    }
    a.delete(key(5)).unwrap();
    ma.insert(key(5), None);
    drop((a, b));
    db.close().unwrap();
    if leave_dropped && !c_tables[0].exists() {
        // As a crash before the dropped keyspace's table was deleted
        // leaves it.
        fs::copy(&c_copy, &c_tables[0]).unwrap();
    }
    models.insert("default", md);
    models.insert("a", ma);
    models.insert("b", mb);
    Built {
        models,
        b_tables,
        c_keys,
    }
}

fn contents(it: quietkv::DbIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.collect::<quietkv::Result<_>>().unwrap()
}

/// Every key has exactly the model's value, through `get` and a scan.
fn assert_model(
    name: &str,
    get: impl Fn(&[u8]) -> Option<Vec<u8>>,
    scan: Vec<(Vec<u8>, Vec<u8>)>,
    model: &Model,
) {
    for (k, v) in model {
        assert_eq!(
            get(k).as_ref(),
            v.as_ref(),
            "keyspace {name}: key {}",
            String::from_utf8_lossy(k)
        );
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
        .collect();
    assert!(
        scan == expected,
        "keyspace {name}: a scan differs from the model"
    );
}

/// The repaired database opens (twice), `check` finds nothing, it has
/// exactly the keyspaces `names` maps (model name -> name in the repaired
/// database) and `unchecked`, the first each with its options and exactly
/// its model's keys.
fn assert_repaired(d: &Path, models: &Models, names: &[(&str, &str)], unchecked: &[&str]) {
    let r = check_dir(d).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    for _ in 0..2 {
        let db = Db::open(d, opts()).unwrap();
        let mut expected: Vec<&str> = names.iter().map(|(_, n)| *n).collect();
        expected.extend_from_slice(unchecked);
        expected.sort_unstable();
        let mut found = db.keyspace_names();
        found.sort();
        assert_eq!(found, expected);
        for (model_name, name) in names {
            let model = &models[model_name];
            if *name == "default" {
                assert_model(
                    name,
                    |k| db.get(k).unwrap(),
                    contents(db.iter().unwrap()),
                    model,
                );
                continue;
            }
            // "b" keeps its own table options: opening it with another
            // block size is refused, with its own accepted.
            let ks_opts = if *name == "b" {
                let e = db
                    .keyspace(name, KeyspaceOptions::default().block_size(512))
                    .unwrap_err();
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
                b_opts()
            } else {
                KeyspaceOptions::default()
            };
            let ks = db.keyspace(name, ks_opts).unwrap();
            assert_model(
                name,
                |k| ks.get(k).unwrap(),
                contents(ks.iter().unwrap()),
                model,
            );
        }
        db.close().unwrap();
    }
}

fn names(r: &RepairReport) -> Vec<(u32, String, bool)> {
    r.keyspaces
        .iter()
        .map(|k| (k.id, k.name.clone(), k.adopted))
        .collect()
}

fn manifests(d: &Path) -> Vec<PathBuf> {
    fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
        })
        .collect()
}

const ALL: &[(&str, &str)] = &[("default", "default"), ("a", "a"), ("b", "b")];

/// (a) CURRENT lost: the newest manifest gives the catalogue; every
/// keyspace comes back with its name, options and keys.
#[test]
fn a_lost_current_keeps_every_keyspace() {
    let d = tempfile::tempdir().unwrap();
    let built = build(d.path(), false);
    fs::remove_file(d.path().join("CURRENT")).unwrap();
    let r = repair(d.path());
    assert!(r.manifest.is_some(), "{r:?}");
    assert_eq!(
        names(&r),
        [
            (0, "default".to_string(), false),
            (1, "a".to_string(), false),
            (2, "b".to_string(), false)
        ]
    );
    assert!(!r.lost_anything(), "{r:?}");
    assert_repaired(d.path(), &built.models, ALL, &[]);
}

/// (b) Every manifest lost: the tables record their keyspace and the WAL
/// records carry it, so each keyspace's data comes back on its own, in a
/// keyspace recreated as `recovered-<id>` (names and options were only in
/// the manifest), and the report says so.
#[test]
fn a_lost_manifest_brings_each_keyspace_back_adopted() {
    let d = tempfile::tempdir().unwrap();
    let built = build(d.path(), false);
    for m in manifests(d.path()) {
        fs::remove_file(m).unwrap();
    }
    let r = repair(d.path());
    assert!(r.manifest.is_none(), "{r:?}");
    assert_eq!(
        names(&r),
        [
            (0, "default".to_string(), false),
            (1, "recovered-1".to_string(), true),
            (2, "recovered-2".to_string(), true)
        ]
    );
    assert!(r.keyspaces.iter().all(|k| k.tables > 0), "{r:?}");
    assert!(r.lost_anything());
    assert!(
        r.manifest_notes
            .iter()
            .any(|n| n.contains("keyspace 2") && n.contains("recovered-2")),
        "{:?}",
        r.manifest_notes
    );
    // "b" lost its own table options with the manifest: it has the
    // repair's now.
    assert_repaired(
        d.path(),
        &built.models,
        &[
            ("default", "default"),
            ("a", "recovered-1"),
            ("b", "recovered-2"),
        ],
        &[],
    );
}

/// (b) A manifest cut short (a torn last edit): its usable prefix still
/// records every keyspace, so names and options come back.
#[test]
fn a_torn_manifest_keeps_the_catalogue_of_its_prefix() {
    let d = tempfile::tempdir().unwrap();
    let built = build(d.path(), false);
    let current = fs::read_to_string(d.path().join("CURRENT")).unwrap();
    let m = d.path().join(current.trim());
    let len = fs::metadata(&m).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&m)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let r = repair(d.path());
    assert!(r.manifest_damage.is_some(), "{r:?}");
    assert_eq!(
        names(&r),
        [
            (0, "default".to_string(), false),
            (1, "a".to_string(), false),
            (2, "b".to_string(), false)
        ]
    );
    assert_repaired(d.path(), &built.models, ALL, &[]);
}

/// (c) A damaged block of a table of "b": only that block's keys are lost,
/// and only from "b".
#[test]
fn a_damaged_block_loses_only_its_keys_in_its_keyspace() {
    let d = tempfile::tempdir().unwrap();
    let built = build(d.path(), false);
    let sst = &built.b_tables[0];
    let mut data = fs::read(sst).unwrap();
    data[1500] ^= 0x20;
    fs::write(sst, data).unwrap();
    let r = repair(d.path());
    assert_eq!(r.tables_salvaged.len(), 1, "{r:?}");
    let s = &r.tables_salvaged[0];
    assert_eq!((s.keyspace, s.blocks_lost), (2, 1), "{s:?}");
    assert!(s.entries_lost > 0, "{s:?}");

    // The other keyspaces are whole.
    let mut models = built.models.clone();
    let mb = models.remove("b").unwrap();
    assert_repaired(
        d.path(),
        &models,
        &[("default", "default"), ("a", "a")],
        &["b"],
    );
    // "b": every key has its value or is gone, and the gone ones are at
    // most the block's entries.
    let db = Db::open(d.path(), opts()).unwrap();
    let b = db.keyspace("b", b_opts()).unwrap();
    let mut gone = 0;
    for (k, v) in &mb {
        match b.get(k).unwrap() {
            Some(found) => assert_eq!(Some(&found), v.as_ref()),
            None if v.is_some() => gone += 1,
            None => {}
        }
    }
    assert!(gone > 0 && gone <= s.entries_lost, "{gone} gone, {s:?}");
}

/// (d) Writes only in the WAL, in every keyspace and in batches across
/// them, go into their own keyspaces' new tables.
#[test]
fn unflushed_writes_of_every_keyspace_go_to_their_keyspace() {
    let d = tempfile::tempdir().unwrap();
    let built = build(d.path(), false);
    let r = repair(d.path());
    assert!(r.wal_records_salvaged > 0, "{r:?}");
    // One new table per keyspace the WAL wrote.
    assert_eq!(r.wal_tables.len(), 3, "{r:?}");
    assert!(!r.lost_anything(), "{r:?}");
    assert_repaired(d.path(), &built.models, ALL, &[]);
}

/// (e) The dropped keyspace's table (left by a crash before it was
/// deleted) and WAL record are not brought back, and said so.
#[test]
fn a_dropped_keyspace_stays_dropped() {
    let d = tempfile::tempdir().unwrap();
    let built = build(d.path(), true);
    fs::remove_file(d.path().join("CURRENT")).unwrap();
    let r = repair(d.path());
    assert_eq!(
        names(&r),
        [
            (0, "default".to_string(), false),
            (1, "a".to_string(), false),
            (2, "b".to_string(), false)
        ]
    );
    let dropped: Vec<_> = r
        .tables_dropped
        .iter()
        .filter(|t| t.reason.contains("keyspace 3") && t.reason.contains("dropped"))
        .collect();
    assert_eq!(dropped.len(), 1, "{:?}", r.tables_dropped);
    assert!(d
        .path()
        .join("lost")
        .join(dropped[0].file.file_name().unwrap())
        .exists());
    assert!(r.wal_entries_of_dropped_keyspaces > 0, "{r:?}");
    assert_repaired(d.path(), &built.models, ALL, &[]);
    // No key of "c" is anywhere.
    let db = Db::open(d.path(), opts()).unwrap();
    for name in ["a", "b"] {
        let o = if name == "b" {
            b_opts()
        } else {
            KeyspaceOptions::default()
        };
        let ks = db.keyspace(name, o).unwrap();
        for k in &built.c_keys {
            assert_eq!(ks.get(k).unwrap(), None);
        }
    }
    for k in &built.c_keys {
        assert_eq!(db.get(k).unwrap(), None);
    }
}
