//! `repair_dir`: a database that recovery refuses (a damaged WAL record, a
//! damaged or lost manifest, a lost CURRENT, a damaged table block) is
//! turned into one that opens, keeps every intact write with the newest
//! value winning, and reports what was dropped.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::record_log::LogReader;
use crate::repair::{repair_dir, RepairOptions, RepairReport};
use crate::version::VersionEdit;
use crate::{check_dir, Db, ErrorKind, Options, WriteBatch, WriteOptions};

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Small blocks and tables; no background compaction, so the tables a test
/// makes are the ones it damages.
fn opts() -> Options {
    Options {
        memtable_size: 1 << 20,
        block_size: 512,
        target_file_size: 8 << 10,
        l0_compaction_trigger: 50,
        l0_slowdown_trigger: 60,
        l0_stop_trigger: 70,
        ..Options::default()
    }
}

fn repair(d: &Path) -> RepairReport {
    repair_dir(d, &RepairOptions { db: opts() }).unwrap()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// What the database should hold: key -> value (None = deleted).
type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

fn put(db: &Db, model: &mut Model, k: Vec<u8>, v: Vec<u8>) {
    db.put(&k, &v).unwrap();
    model.insert(k, Some(v));
}

/// Several generations of overwrites and deletes spread over tables at
/// several levels (a full compaction, then newer level-0 tables), plus
/// writes left in the WAL. Closed cleanly.
fn make_db(d: &Path) -> Model {
    let db = Db::open(d, opts()).unwrap();
    let mut model = Model::new();
    for i in 0..400 {
        put(
            &db,
            &mut model,
            key(i),
            format!("gen0-{i}").repeat(8).into_bytes(),
        );
    }
    db.flush().unwrap();
    db.compact_all().unwrap();
    for i in (0..400).step_by(3) {
        put(&db, &mut model, key(i), format!("gen1-{i}").into_bytes());
    }
    db.flush().unwrap();
    for i in (0..400).step_by(7) {
        db.delete(key(i)).unwrap();
        model.insert(key(i), None);
    }
    for i in (1..400).step_by(5) {
        put(&db, &mut model, key(i), format!("gen2-{i}").into_bytes());
    }
    // Range tombstones: one in a table, one only in the WAL.
    db.delete_range(key(100)..key(130)).unwrap();
    for i in 100..130 {
        model.insert(key(i), None);
    }
    db.flush().unwrap();
    db.delete_range(key(300)..key(305)).unwrap();
    for i in 300..305 {
        model.insert(key(i), None);
    }
    for i in (0..400).step_by(11) {
        put(&db, &mut model, key(i), format!("wal-{i}").into_bytes());
    }
    db.close().unwrap();
    model
}

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().unwrap().collect::<crate::Result<_>>().unwrap()
}

/// Every key has exactly the model's value, through `get` and a scan.
fn assert_model(db: &Db, model: &Model) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            v.as_ref(),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
        .collect();
    assert_eq!(contents(db), expected);
}

fn files(d: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn manifest(d: &Path) -> PathBuf {
    d.join(fs::read_to_string(d.join("CURRENT")).unwrap().trim())
}

fn flip(path: &Path, offset: u64) {
    let mut data = fs::read(path).unwrap();
    data[offset as usize] ^= 0x20;
    fs::write(path, data).unwrap();
}

/// After repair: opens, `check` finds nothing, and it holds `model`.
fn assert_repaired(d: &Path, model: &Model) {
    let r = check_dir(d).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    let db = Db::open(d, opts()).unwrap();
    assert_model(&db, model);
    db.close().unwrap();
    // And it stays so across another open.
    let db = Db::open(d, opts()).unwrap();
    assert_model(&db, model);
}

#[test]
fn a_healthy_database_keeps_every_table_and_answers_the_same() {
    let d = dir();
    let model = make_db(d.path());
    let tables_before = files(d.path(), "sst");
    let before = {
        let db = Db::open(d.path(), opts()).unwrap();
        let c = contents(&db);
        db.close().unwrap();
        c
    };
    let tables_now = files(d.path(), "sst");
    let r = repair(d.path());
    assert!(!r.lost_anything(), "{r:?}");
    assert!(r.tables_dropped.is_empty() && r.tables_salvaged.is_empty());
    assert_eq!(r.tables_kept.len(), tables_now.len(), "{r:?}");
    assert!(r.tables_kept.iter().all(|t| t.level.is_some()), "{r:?}");
    assert!(tables_before.len() >= 3, "{tables_before:?}");
    assert!(r.db_id_recovered);
    // Every kept table is still in place.
    for t in &tables_now {
        assert!(t.exists(), "{}", t.display());
    }
    assert_repaired(d.path(), &model);
    let db = Db::open(d.path(), opts()).unwrap();
    assert_eq!(contents(&db), before);
}

#[test]
fn a_damaged_mid_wal_record_is_dropped_and_the_rest_salvaged() {
    let d = dir();
    let db = Db::open(d.path(), opts()).unwrap();
    let mut model = Model::new();
    for i in 0..20 {
        let mut b = WriteBatch::new();
        b.put(key(i), format!("value-{i}").as_bytes()).unwrap();
        db.write(b, WriteOptions { sync: true }).unwrap();
        model.insert(key(i), Some(format!("value-{i}").into_bytes()));
    }
    db.close().unwrap();
    let wal = files(d.path(), "log")
        .into_iter()
        .find(|p| fs::metadata(p).unwrap().len() > 0)
        .unwrap();
    // A payload byte of the middle record (not of a sync mark).
    let data = fs::read(&wal).unwrap();
    let mut reader = crate::record_log::LogReader::new(&wal, &data);
    let mut offsets = Vec::new();
    while reader.read_record().unwrap().is_some() {
        offsets.push(reader.last_record_offset());
    }
    assert_eq!(offsets.len(), 20);
    flip(&wal, offsets[10] + crate::record_log::HEADER_LEN as u64 + 2);
    let e = Db::open(d.path(), opts()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    let damaged_at = check_dir(d.path()).unwrap().problems[0].offset.unwrap();

    let r = repair(d.path());
    assert_eq!(r.wal_damage.len(), 1, "{r:?}");
    assert_eq!(r.wal_damage[0].file, wal);
    assert_eq!(r.wal_damage[0].offset, Some(damaged_at));
    assert_eq!(r.wal_records_salvaged, 19, "{r:?}");
    assert!(r.wal_records_after_damage > 0, "{r:?}");
    assert!(r.moved_to_lost.iter().any(|p| p.ends_with(format!(
        "lost/{}",
        wal.file_name().unwrap().to_str().unwrap()
    ))));

    // Exactly the damaged record's key is gone; every record before it
    // (and, resynchronised, after it) is there.
    let db = Db::open(d.path(), opts()).unwrap();
    let missing: Vec<u32> = (0..20)
        .filter(|&i| db.get(key(i)).unwrap().is_none())
        .collect();
    assert_eq!(missing.len(), 1, "{missing:?}");
    drop(db);
    model.insert(key(missing[0]), None);
    assert_repaired(d.path(), &model);
}

/// The manifest offsets of the edits that add tables, in order.
fn table_edits(manifest: &Path) -> Vec<u64> {
    let data = fs::read(manifest).unwrap();
    let mut reader = LogReader::new(manifest, &data);
    let mut found = Vec::new();
    while let Some(rec) = reader.read_record().unwrap() {
        if !VersionEdit::decode(&rec).unwrap().new_files.is_empty() {
            found.push(reader.last_record_offset());
        }
    }
    found
}

fn last_table_edit(manifest: &Path) -> u64 {
    *table_edits(manifest).last().unwrap()
}

/// Two flushes after the damage: both tables are newer than the usable
/// prefix names, so both are kept (merged into one sorted run), newest
/// values winning.
#[test]
fn tables_of_several_lost_flush_edits_are_kept() {
    let d = dir();
    let model = make_db(d.path());
    let m = manifest(d.path());
    let edits = table_edits(&m);
    let at = edits[edits.len() - 2];
    flip(&m, at + 20);
    assert!(Db::open(d.path(), opts()).is_err());

    let r = repair(d.path());
    assert_eq!(r.manifest_damage.as_ref().unwrap().offset, Some(at));
    assert_eq!(
        r.tables_kept.iter().filter(|t| t.level.is_none()).count(),
        2,
        "{r:?}"
    );
    assert!(!r.merged_into.is_empty(), "{r:?}");
    assert!(r.tables_dropped.is_empty(), "{r:?}");
    assert_repaired(d.path(), &model);
}

#[test]
fn a_damaged_last_manifest_edit_keeps_every_table() {
    let d = dir();
    let model = make_db(d.path());
    let m = manifest(d.path());
    let at = last_table_edit(&m);
    flip(&m, at + 20);
    let e = Db::open(d.path(), opts()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");

    let r = repair(d.path());
    let damage = r.manifest_damage.as_ref().expect("damage reported");
    assert_eq!(
        (damage.file.as_path(), damage.offset),
        (m.as_path(), Some(at))
    );
    assert_eq!(r.manifest.as_deref(), Some(m.as_path()));
    assert!(r.tables_dropped.is_empty(), "{r:?}");
    // The table the lost edit added is kept, at level 0.
    assert!(r.tables_kept.iter().any(|t| t.level == Some(0)), "{r:?}");
    assert!(d.path().join("lost").join(m.file_name().unwrap()).exists());
    assert_repaired(d.path(), &model);
}

/// The manifest offset of the first edit that deletes a table (a
/// compaction's).
fn first_compaction_edit(manifest: &Path) -> u64 {
    let data = fs::read(manifest).unwrap();
    let mut reader = LogReader::new(manifest, &data);
    while let Some(rec) = reader.read_record().unwrap() {
        if !VersionEdit::decode(&rec).unwrap().deleted_files.is_empty() {
            return reader.last_record_offset();
        }
    }
    panic!("no compaction edit");
}

/// The usable prefix names the compaction's input, which the compaction
/// deleted; its outputs are not named. Placing tables by that prefix would
/// lose the compacted data, so they are merged instead.
#[test]
fn a_damaged_compaction_edit_merges_instead_of_losing_its_outputs() {
    let d = dir();
    let model = make_db(d.path());
    let m = manifest(d.path());
    let at = first_compaction_edit(&m);
    flip(&m, at + 20);
    assert!(Db::open(d.path(), opts()).is_err());

    let r = repair(d.path());
    assert_eq!(r.manifest_damage.as_ref().unwrap().offset, Some(at));
    assert!(
        r.manifest_notes.iter().any(|n| n.contains("missing")),
        "{r:?}"
    );
    assert!(!r.merged_into.is_empty(), "{r:?}");
    assert!(r.tables_dropped.is_empty(), "{r:?}");
    assert_repaired(d.path(), &model);
}

#[test]
fn a_deleted_manifest_merges_the_tables_newest_value_first() {
    let d = dir();
    let model = make_db(d.path());
    for m in fs::read_dir(d.path()).unwrap() {
        let p = m.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("MANIFEST-")
        {
            fs::remove_file(p).unwrap();
        }
    }
    assert!(Db::open(d.path(), opts()).is_err());

    let r = repair(d.path());
    assert!(r.manifest.is_none(), "{r:?}");
    assert!(!r.merged_into.is_empty(), "{r:?}");
    assert!(r.tables_kept.len() >= 3, "{r:?}");
    assert!(r.tables_dropped.is_empty(), "{r:?}");
    assert!(r.db_id_recovered, "the id comes from the tables");
    assert_repaired(d.path(), &model);
}

#[test]
fn a_lost_current_uses_the_newest_manifest() {
    let d = dir();
    let model = make_db(d.path());
    fs::remove_file(d.path().join("CURRENT")).unwrap();
    assert!(Db::open(d.path(), opts()).is_err());

    let r = repair(d.path());
    assert!(r.manifest.is_some(), "{r:?}");
    assert!(r.manifest_damage.is_none(), "{r:?}");
    assert!(!r.lost_anything(), "{r:?}");
    assert_repaired(d.path(), &model);
}

#[test]
fn a_damaged_table_block_is_salvaged_around() {
    let d = dir();
    let mut model = Model::new();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        for i in 0..300 {
            put(
                &db,
                &mut model,
                key(i),
                format!("only-{i}").repeat(4).into_bytes(),
            );
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    let sst = files(d.path(), "sst").remove(0);
    flip(&sst, 2000);
    let r = repair(d.path());
    assert_eq!(r.tables_salvaged.len(), 1, "{r:?}");
    let s = &r.tables_salvaged[0];
    assert_eq!(s.blocks_lost, 1, "{s:?}");
    assert!(
        s.entries_lost > 0 && s.entries_kept + s.entries_lost == 300,
        "{s:?}"
    );
    assert!(s.reason.contains("offset"), "{s:?}");
    assert!(d
        .path()
        .join("lost")
        .join(sst.file_name().unwrap())
        .exists());

    // Every key is either its one value or gone; the gone ones are the
    // lost entries.
    let db = Db::open(d.path(), opts()).unwrap();
    let mut gone = 0;
    for (k, v) in &model {
        match db.get(k).unwrap() {
            Some(found) => assert_eq!(Some(&found), v.as_ref()),
            None => gone += 1,
        }
    }
    assert_eq!(gone, s.entries_lost);
    let n = contents(&db).len() as u64;
    assert_eq!(n, s.entries_kept);
    drop(db);
    assert!(check_dir(d.path()).unwrap().is_ok());
}

/// A table whose footer is gone cannot be located block by block: it is
/// dropped whole (kept in lost/), the rest of the tree stays readable.
#[test]
fn a_truncated_table_is_dropped_whole() {
    let d = dir();
    make_db(d.path());
    let newest = files(d.path(), "sst").pop().unwrap();
    let data = fs::read(&newest).unwrap();
    fs::write(&newest, &data[..data.len() - 30]).unwrap();
    let r = repair(d.path());
    assert_eq!(r.tables_dropped.len(), 1, "{r:?}");
    let dropped = &r.tables_dropped[0];
    assert_eq!(dropped.file, newest);
    assert_eq!(dropped.bytes, data.len() as u64 - 30);
    assert!(r.tables_salvaged.is_empty(), "{r:?}");
    assert_eq!(
        fs::read(d.path().join("lost").join(newest.file_name().unwrap())).unwrap(),
        &data[..data.len() - 30]
    );
    assert!(check_dir(d.path()).unwrap().is_ok());
    let db = Db::open(d.path(), opts()).unwrap();
    assert!(!contents(&db).is_empty());
}

#[test]
fn a_table_from_elsewhere_is_dropped() {
    let d = dir();
    let model = make_db(d.path());
    let other = dir();
    make_db(other.path());
    let stranger = files(other.path(), "sst").pop().unwrap();
    let name = "999990.sst";
    fs::copy(&stranger, d.path().join(name)).unwrap();
    let r = repair(d.path());
    assert_eq!(r.tables_dropped.len(), 1, "{r:?}");
    assert!(r.tables_dropped[0].file.ends_with(name));
    assert!(d.path().join("lost").join(name).exists());
    assert_repaired(d.path(), &model);
}

#[test]
fn repair_refuses_a_database_in_use() {
    let d = dir();
    make_db(d.path());
    let db = Db::open(d.path(), opts()).unwrap();
    let e = repair_dir(d.path(), &RepairOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert!(!d.path().join("lost").exists());
    drop(db);
    let e = repair_dir(dir().path(), &RepairOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}
