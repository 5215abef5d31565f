//! Table identity: a table file that is not the one the manifest names (an
//! older table copied over a newer one, a table from another database) is
//! Corruption naming the file, never a source of stale values.

use std::fs;
use std::path::{Path, PathBuf};

use crate::{check_dir, Db, Error, ErrorKind, Options};

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Fixed-size keys and values, so tables with the same key set and
/// sequence numbers of the same varint width have identical sizes.
fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(generation: u32, i: u32) -> Vec<u8> {
    format!("gen{generation:03}-value-{i:06}-")
        .repeat(4)
        .into_bytes()
}

fn tables(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    v.sort();
    v
}

const KEYS: u32 = 50;

/// Writes `generations` L0 tables, each holding keys `0..keys` with the
/// generation's values (all sequence numbers stay below 128 for up to two
/// generations of 50 keys, so their varints have the same width).
fn make_db(d: &Path, generations: u32, keys: u32) -> Vec<PathBuf> {
    let db = Db::open(d, Options::default()).unwrap();
    for g in 0..generations {
        for i in 0..keys {
            db.put(key(i), value(g, i)).unwrap();
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    tables(d)
}

fn assert_identity_error(e: &Error, table: &Path, expect: &str) {
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(table), "{e}");
    assert!(e.to_string().contains(expect), "{e}");
}

fn first_error(db: &Db) -> Error {
    match db.iter() {
        Err(e) => e,
        Ok(mut it) => it
            .find_map(|r| r.err())
            .expect("the scan must fail, not serve the stale table"),
    }
}

#[test]
fn same_size_copy_of_an_older_table_is_corruption() {
    let d = dir();
    let t = make_db(d.path(), 2, KEYS);
    assert_eq!(t.len(), 2, "{t:?}");
    let (older, newer) = (&t[0], &t[1]);
    let size = fs::metadata(newer).unwrap().len();
    assert_eq!(fs::metadata(older).unwrap().len(), size, "test setup");
    fs::copy(older, newer).unwrap();

    let db = Db::open(d.path(), Options::default()).unwrap();
    let e = db.get(key(7)).unwrap_err();
    assert_identity_error(&e, newer, "manifest");
    let older_name = older.file_stem().unwrap().to_str().unwrap();
    assert!(e.to_string().contains(older_name), "{e}");
    assert_identity_error(&first_error(&db), newer, "manifest");
    // Compaction reads its inputs through its own handles: checked too
    // (the error arrives wrapped as the database's background error).
    let e = db.compact_all().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains(&newer.display().to_string()), "{e}");
    assert!(e.to_string().contains(older_name), "{e}");
    // Both tables are still there: nothing was installed over them.
    assert_eq!(tables(d.path()).len(), 2);
    drop(db);

    let r = check_dir(d.path()).unwrap();
    assert!(!r.is_ok());
    assert!(
        r.problems
            .iter()
            .any(|p| &p.file == newer && p.message.contains(older_name)),
        "{:?}",
        r.problems
    );
}

#[test]
fn different_size_copy_is_corruption_for_get_and_scan() {
    let d = dir();
    let db = Db::open(d.path(), Options::default()).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(0, i)).unwrap();
    }
    db.flush().unwrap();
    for i in 0..KEYS / 2 {
        db.put(key(i), value(1, i)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let t = tables(d.path());
    assert_eq!(t.len(), 2);
    let (older, newer) = (&t[0], &t[1]);
    let newer_size = fs::metadata(newer).unwrap().len();
    assert_ne!(fs::metadata(older).unwrap().len(), newer_size);
    fs::copy(older, newer).unwrap();

    let db = Db::open(d.path(), Options::default()).unwrap();
    let e = db.get(key(3)).unwrap_err();
    assert_identity_error(&e, newer, &newer_size.to_string());
    assert_identity_error(&first_error(&db), newer, &newer_size.to_string());
    drop(db);
    assert!(!check_dir(d.path()).unwrap().is_ok());
}

#[test]
fn table_from_another_database_is_caught_by_the_database_id() {
    let a = dir();
    let b = dir();
    // Same history, same numbers and sizes; only the values (and the
    // database ids) differ.
    let ta = make_db(a.path(), 1, KEYS);
    let db = Db::open(b.path(), Options::default()).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(9, i)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let tb = tables(b.path());
    assert_eq!(ta.len(), 1);
    assert_eq!(
        ta[0].file_name(),
        tb[0].file_name(),
        "test setup: same number"
    );
    assert_eq!(
        fs::metadata(&ta[0]).unwrap().len(),
        fs::metadata(&tb[0]).unwrap().len(),
        "test setup: same size"
    );
    fs::copy(&ta[0], &tb[0]).unwrap();

    let db = Db::open(b.path(), Options::default()).unwrap();
    let e = db.get(key(0)).unwrap_err();
    assert_identity_error(&e, &tb[0], "database");
    drop(db);
    let r = check_dir(b.path()).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.file == tb[0] && p.message.contains("database")),
        "{:?}",
        r.problems
    );
}

#[test]
fn intact_tables_still_read_and_check_ok() {
    let d = dir();
    make_db(d.path(), 2, KEYS);
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(1, 7)));
    db.compact_all().unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(1, 7)));
    assert_eq!(db.iter().unwrap().count(), KEYS as usize);
    db.close().unwrap();
    let r = check_dir(d.path()).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

/// Rewrites the manifest CURRENT names without its database id, as a
/// database created before ids existed has it.
fn strip_db_id_from_manifest(d: &Path) {
    use crate::record_log::{LogReader, LogWriter};
    use crate::version::VersionEdit;
    let name = fs::read_to_string(d.join("CURRENT")).unwrap();
    let path = d.join(name.trim());
    let data = fs::read(&path).unwrap();
    let mut reader = LogReader::new(&path, &data);
    let mut out = LogWriter::new(Vec::new());
    let mut had_id = false;
    while let Some(record) = reader.read_record().unwrap() {
        let mut edit = VersionEdit::decode(&record).unwrap();
        had_id |= edit.db_id.take().is_some();
        out.add_record(&edit.encode()).unwrap();
    }
    assert!(had_id, "a new manifest records the database id");
    fs::write(&path, out.into_inner()).unwrap();
}

#[test]
fn database_without_an_id_still_opens_reads_and_compacts() {
    let d = dir();
    make_db(d.path(), 2, KEYS);
    strip_db_id_from_manifest(d.path());
    // Its tables carry an id the manifest does not know: not compared.
    assert!(check_dir(d.path()).unwrap().is_ok());
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(1, 7)));
    db.compact_all().unwrap();
    db.put(key(7), value(2, 7)).unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(2, 7)));
    assert_eq!(db.iter().unwrap().count(), KEYS as usize);
    db.close().unwrap();
    // It is not given an id later either: the manifests keep none.
    let r = check_dir(d.path()).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

#[test]
fn manifest_mixing_two_database_ids_is_corruption() {
    use crate::record_log::{LogReader, LogWriter};
    use crate::version::VersionEdit;
    let d = dir();
    make_db(d.path(), 1, KEYS);
    let name = fs::read_to_string(d.path().join("CURRENT")).unwrap();
    let path = d.path().join(name.trim());
    let data = fs::read(&path).unwrap();
    let mut reader = LogReader::new(&path, &data);
    let mut out = LogWriter::new(Vec::new());
    let mut id = 0;
    while let Some(record) = reader.read_record().unwrap() {
        id = VersionEdit::decode(&record).unwrap().db_id.unwrap_or(id);
        out.add_record(&record).unwrap();
    }
    assert_ne!(id, 0);
    let foreign = VersionEdit {
        db_id: Some(id ^ 1),
        ..Default::default()
    };
    out.add_record(&foreign.encode()).unwrap();
    fs::write(&path, out.into_inner()).unwrap();

    let e = Db::open(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(path.as_path()), "{e}");
    assert!(e.to_string().contains("changes the database id"), "{e}");
    let r = check_dir(d.path()).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.file == path && p.message.contains("changes the database id")),
        "{:?}",
        r.problems
    );
}
