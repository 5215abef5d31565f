//! Files changed by hand and processes racing each other: what operators
//! do during an incident. Every file knows its database (a WAL, table or
//! manifest of another database is Corruption naming it, never replayed
//! or served), repair never destroys what it could not read and says what
//! a missing file means, and the lock holds when its file is removed.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{dir, files_with};
use quietio::fault::{Fault, FaultLayer, FaultPlan, OpKind};
use quietkv::{check_dir, repair_dir, Db, ErrorKind, Options, RepairOptions, WriteOptions};

fn number_of(p: &Path) -> u64 {
    let name = p.file_name().unwrap().to_str().unwrap();
    let digits: String = name.chars().filter(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// Every file of the directory (not `lost/`) with its bytes.
fn snapshot(d: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_str().unwrap().to_string(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A database of `who`'s values for keys `k000..k{n}`: one flushed table
/// (`tables` times, each overwriting the keys), then `in_wal` of the keys
/// written again and left in the WAL (closed cleanly, so the WAL is sealed
/// and replayed at the next open).
fn make_db(d: &Path, who: &str, tables: u32, in_wal: u32) {
    let db = Db::open(d, Options::default()).unwrap();
    for t in 0..tables {
        for i in 0..50 {
            db.put(
                format!("k{i:03}").as_bytes(),
                format!("{who}-{t}-{i}").as_bytes(),
            )
            .unwrap();
        }
        db.flush().unwrap();
    }
    for i in 0..in_wal {
        db.write(
            {
                let mut b = quietkv::WriteBatch::new();
                b.put(
                    format!("k{i:03}").as_bytes(),
                    format!("{who}-wal-{i}").as_bytes(),
                )
                .unwrap();
                b
            },
            WriteOptions { sync: true },
        )
        .unwrap();
    }
    db.close().unwrap();
}

/// The WAL holding the records a database left (the largest one).
fn wal_with_records(d: &Path) -> PathBuf {
    files_with(d, ".log")
        .into_iter()
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap()
}

fn get(db: &Db, i: u32) -> Option<String> {
    db.get(format!("k{i:03}").as_bytes())
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
}

/// No value anywhere in the database was written by `who`.
fn holds_nothing_of(d: &Path, who: &str) {
    let db = Db::open(d, Options::default()).unwrap();
    for item in db.iter().unwrap() {
        let (k, v) = item.unwrap();
        let v = String::from_utf8(v).unwrap();
        assert!(
            !v.starts_with(who),
            "{}: {v} came from the other database",
            String::from_utf8_lossy(&k)
        );
    }
    db.close().unwrap();
}

fn repair(d: &Path) -> quietkv::RepairReport {
    repair_dir(d, &RepairOptions::default()).unwrap()
}

#[test]
fn a_wal_of_another_database_under_a_newer_number_is_corruption_and_never_replayed() {
    let (a, b) = (dir(), dir());
    make_db(a.path(), "a", 1, 0);
    make_db(b.path(), "b", 0, 5);
    let foreign = wal_with_records(b.path());
    let newest = files_with(a.path(), "")
        .iter()
        .filter(|p| p.to_str().unwrap().ends_with(".log") || p.to_str().unwrap().ends_with(".sst"))
        .map(|p| number_of(p))
        .max()
        .unwrap();
    let slot = a.path().join(format!("{:06}.log", newest + 10));
    fs::copy(&foreign, &slot).unwrap();
    let e = Db::open(a.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(slot.as_path()), "{e}");
    assert!(e.to_string().contains("written by database"), "{e}");

    let r = check_dir(a.path()).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.file == slot && p.message.contains("written by database")),
        "{:?}",
        r.problems
    );

    let r = repair(a.path());
    assert!(r.lost_anything());
    assert_eq!(r.wals_dropped.len(), 1, "{r:?}");
    assert_eq!(r.wals_dropped[0].file, slot);
    assert!(r
        .moved_to_lost
        .iter()
        .any(|p| p.file_name() == slot.file_name()));
    holds_nothing_of(a.path(), "b-");
    let db = Db::open(a.path(), Options::default()).unwrap();
    assert_eq!(get(&db, 3).as_deref(), Some("a-0-3"));
}

#[test]
fn a_wal_without_identity_is_refused_where_every_wal_has_one() {
    let (a, b) = (dir(), dir());
    make_db(a.path(), "a", 1, 0);
    make_db(b.path(), "b", 0, 5);
    // b's WAL without its identity record: what an older version wrote.
    let data = fs::read(wal_with_records(b.path())).unwrap();
    let identity_record = 13 + 17;
    let slot = a.path().join("000099.log");
    fs::write(&slot, &data[identity_record..]).unwrap();
    let e = Db::open(a.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(slot.as_path()), "{e}");
    assert!(e.to_string().contains("identity record"), "{e}");
    let r = repair(a.path());
    assert_eq!(r.wals_dropped.len(), 1, "{r:?}");
    holds_nothing_of(a.path(), "b-");
}

#[test]
fn a_wal_copied_to_another_number_is_corruption() {
    let a = dir();
    make_db(a.path(), "a", 1, 5);
    let wal = wal_with_records(a.path());
    let slot = a.path().join(format!("{:06}.log", number_of(&wal) + 50));
    fs::copy(&wal, &slot).unwrap();
    let e = Db::open(a.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(slot.as_path()), "{e}");
    assert!(e.to_string().contains("copied or renamed"), "{e}");
}

#[test]
fn a_manifest_copied_to_another_number_is_corruption() {
    let a = dir();
    make_db(a.path(), "a", 1, 0);
    let current = fs::read_to_string(a.path().join("CURRENT")).unwrap();
    let manifest = a.path().join(current.trim());
    let n = number_of(&manifest);
    let renamed = format!("MANIFEST-{:06}", n + 40);
    fs::rename(&manifest, a.path().join(&renamed)).unwrap();
    fs::write(a.path().join("CURRENT"), format!("{renamed}\n")).unwrap();
    let e = Db::open(a.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("copied or renamed"), "{e}");
    assert!(!check_dir(a.path()).unwrap().is_ok());
}

/// Another database's table, WAL or manifest in each slot of this one:
/// never served, replayed or trusted, and `repair` keeps this database's
/// data and none of the other's.
#[test]
fn foreign_file_sweep() {
    let (src_a, src_b) = (dir(), dir());
    // Same shapes, so file numbers line up: 2 tables and a WAL each.
    make_db(src_a.path(), "a", 2, 5);
    make_db(src_b.path(), "b", 2, 5);
    let names_a: Vec<String> = snapshot(src_a.path()).into_keys().collect();
    let names_b: Vec<String> = snapshot(src_b.path()).into_keys().collect();
    assert_eq!(names_a, names_b, "test setup: the same file names");
    let slots: Vec<String> = names_a
        .into_iter()
        .filter(|n| n.ends_with(".sst") || n.ends_with(".log") || n.starts_with("MANIFEST-"))
        .collect();
    assert!(slots.len() >= 4, "{slots:?}");
    for slot in &slots {
        let work = dir();
        let d = work.path().join("db");
        copy_dir(src_a.path(), &d);
        fs::copy(src_b.path().join(slot), d.join(slot)).unwrap();

        // Open, then read everything: Corruption somewhere, never a
        // value of b's.
        match Db::open(&d, Options::default()) {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Corruption, "{slot}: {e}"),
            Ok(db) => {
                let mut failed = false;
                match db.iter() {
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::Corruption, "{slot}: {e}");
                        failed = true;
                    }
                    Ok(it) => {
                        for item in it {
                            match item {
                                Ok((_, v)) => {
                                    assert!(!v.starts_with(b"b-"), "{slot}: served b's value")
                                }
                                Err(e) => {
                                    assert_eq!(e.kind(), ErrorKind::Corruption, "{slot}: {e}");
                                    failed = true;
                                    break;
                                }
                            }
                        }
                    }
                }
                assert!(failed, "{slot}: a foreign file went unnoticed");
                drop(db);
            }
        }
        let r = check_dir(&d).unwrap();
        assert!(!r.is_ok(), "{slot}: check found nothing");

        let rep = repair(&d);
        // Another database's manifest loses nothing: repair passes over it
        // and merges this database's tables afresh.
        let passed_over = rep
            .manifest_notes
            .iter()
            .any(|n| n.contains("another database's manifest"));
        assert!(rep.lost_anything() || passed_over, "{slot}: {rep:?}");
        holds_nothing_of(&d, "b-");
        assert!(check_dir(&d).unwrap().is_ok(), "{slot}");
        // The foreign file is kept, not deleted.
        let lost: Vec<_> = fs::read_dir(d.join("lost"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let b_bytes = fs::read(src_b.path().join(slot)).unwrap();
        assert!(
            lost.iter().any(|p| fs::read(p).unwrap() == b_bytes),
            "{slot}: the foreign file is not in lost/"
        );
        // And a's values survive where a's files were intact: the first
        // key lives in every table and WAL of a's.
        let db = Db::open(&d, Options::default()).unwrap();
        let v = get(&db, 0);
        assert!(
            v.as_deref().is_some_and(|v| v.starts_with("a-")),
            "{slot}: {v:?}"
        );
    }
}

/// The manifest of another database in the slot CURRENT names: repair
/// passes over it (the tables say whose directory this is) and keeps
/// every value of this one.
#[test]
fn repair_passes_over_another_databases_manifest() {
    let (a, b) = (dir(), dir());
    make_db(a.path(), "a", 2, 5);
    make_db(b.path(), "b", 2, 5);
    let current = fs::read_to_string(a.path().join("CURRENT")).unwrap();
    let slot = current.trim().to_string();
    fs::copy(b.path().join(&slot), a.path().join(&slot)).unwrap();
    let r = repair(a.path());
    assert!(
        r.manifest_notes
            .iter()
            .any(|n| n.contains("another database's manifest")),
        "{:?}",
        r.manifest_notes
    );
    let db = Db::open(a.path(), Options::default()).unwrap();
    for i in 0..5 {
        assert_eq!(get(&db, i), Some(format!("a-wal-{i}")));
    }
    for i in 5..50 {
        assert_eq!(get(&db, i), Some(format!("a-1-{i}")));
    }
}

#[test]
fn a_live_wal_overwritten_by_another_databases_is_reported_lost() {
    let (a, b) = (dir(), dir());
    make_db(a.path(), "a", 1, 5);
    make_db(b.path(), "b", 0, 8);
    let ours = wal_with_records(a.path());
    let theirs = wal_with_records(b.path());
    fs::copy(&theirs, &ours).unwrap();
    let e = Db::open(a.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(ours.as_path()), "{e}");
    assert!(e.to_string().contains("written by database"), "{e}");
    assert!(!check_dir(a.path()).unwrap().is_ok());
    let r = repair(a.path());
    assert!(r.lost_anything());
    assert_eq!(r.wal_records_salvaged, 0, "{r:?}");
    assert_eq!(r.wal_records_in_tables, 0, "{r:?}");
    assert_eq!(r.wals_dropped.len(), 1, "{r:?}");
    assert_eq!(r.wals_missing.len(), 1, "{r:?}");
    assert_eq!(r.wals_missing[0].file, ours);
    assert!(
        r.wals_missing[0].reason.contains("not this database's"),
        "{}",
        r.wals_missing[0].reason
    );
    holds_nothing_of(a.path(), "b-");
    // What the tables held survives; the WAL's writes are gone, and the
    // report said so.
    let db = Db::open(a.path(), Options::default()).unwrap();
    assert_eq!(get(&db, 0).as_deref(), Some("a-0-0"));
}

/// A WAL whose identity record is damaged cannot be proven foreign, so its
/// records are salvaged; but records whose sequence numbers lie below the
/// kept tables' and that no table holds do not fit and are reported, not
/// explained away as "already in tables".
#[test]
fn wal_records_that_do_not_fit_the_tables_are_reported() {
    let (a, b) = (dir(), dir());
    make_db(a.path(), "a", 3, 0);
    make_db(b.path(), "b", 0, 5);
    let mut data = fs::read(wal_with_records(b.path())).unwrap();
    data[20] ^= 0x40; // inside the identity record's payload
    let slot = a.path().join("000099.log");
    fs::write(&slot, &data).unwrap();
    let r = repair(a.path());
    assert_eq!(r.wal_records_in_tables, 0, "{r:?}");
    assert_eq!(r.wal_records_salvaged, 0, "{r:?}");
    let not_fitting = r
        .wal_damage
        .iter()
        .filter(|d| d.reason.contains("does not fit"))
        .count();
    assert_eq!(not_fitting, 5, "{:?}", r.wal_damage);
    assert!(r.lost_anything());
    holds_nothing_of(a.path(), "b-");
}

/// A table the manifest names, removed by hand: repair says its keys are
/// lost and that the deletes it held may undo themselves, with counts, and
/// never reports that nothing was dropped.
#[test]
fn repair_after_a_missing_table_says_what_it_can_mean() {
    let d = dir();
    let db = Db::open(d.path(), Options::default()).unwrap();
    for i in 0..20 {
        db.put(format!("k{i:03}").as_bytes(), b"old").unwrap();
    }
    db.flush().unwrap();
    for i in 0..3 {
        db.delete(format!("k{i:03}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let tables = files_with(d.path(), ".sst");
    assert_eq!(tables.len(), 2);
    let (oldest, with_deletes) = (tables[0].clone(), tables[1].clone());

    for (gone, expect) in [
        (&with_deletes, "3 of them were deletes"),
        (&oldest, "its 20 entries"),
    ] {
        let work = dir();
        let w = work.path().join("db");
        copy_dir(d.path(), &w);
        let gone = w.join(gone.file_name().unwrap());
        fs::remove_file(&gone).unwrap();
        let r = repair(&w);
        assert!(r.lost_anything(), "{r:?}");
        assert_eq!(r.tables_missing.len(), 1, "{r:?}");
        assert_eq!(r.tables_missing[0].file, gone);
        let reason = &r.tables_missing[0].reason;
        assert!(reason.contains(expect), "{reason}");
        assert!(reason.contains("are lost"), "{reason}");
    }
}

/// Repair under an injected EACCES or EIO at every file it opens: it stops
/// with that I/O error; while it is still reading, the directory is left
/// exactly as it was; whatever it had changed, every original byte is in
/// the directory or in `lost/`, and a repair without faults afterwards
/// gives the same database as one that never failed.
#[test]
fn repair_under_an_io_error_at_every_open_destroys_nothing() {
    let src = dir();
    make_db(src.path(), "a", 3, 5);
    // Damage a table so repair has work to do: drop it.
    let t = files_with(src.path(), ".sst")[1].clone();
    let mut bytes = fs::read(&t).unwrap();
    bytes[40] ^= 0x10;
    fs::write(&t, bytes).unwrap();
    let original = snapshot(src.path());

    // A clean repair, counting its opens.
    let work = dir();
    let clean_dir = work.path().join("db");
    copy_dir(src.path(), &clean_dir);
    let layer = FaultLayer::new(&clean_dir).unwrap();
    let mut opts = RepairOptions::default();
    opts.db.fault_layer = Some(layer.clone());
    let clean = repair_dir(&clean_dir, &opts).unwrap();
    let opens = layer.counts().get(OpKind::Open);
    let expected: BTreeMap<_, _> = {
        let db = Db::open(&clean_dir, Options::default()).unwrap();
        db.iter().unwrap().map(Result::unwrap).collect()
    };
    assert!(opens > 5, "{opens}");
    assert!(clean.lost_anything(), "{clean:?}");
    // What the read phase opens: CURRENT, the manifest, every table twice
    // (structure and blocks), every WAL it may replay.
    let tables = files_with(src.path(), ".sst").len() as u64;
    let read_phase = 2 + 2 * tables + 1;

    for fault in [Fault::Eacces, Fault::Eio] {
        for index in 0..opens {
            let w = dir();
            let d = w.path().join("db");
            copy_dir(src.path(), &d);
            let layer: Arc<FaultLayer> = FaultLayer::new(&d).unwrap();
            layer.set_plan(Some(FaultPlan {
                kind: OpKind::Open,
                index,
                fault,
            }));
            let mut opts = RepairOptions::default();
            opts.db.fault_layer = Some(layer.clone());
            let e = repair_dir(&d, &opts).expect_err("an open failed, the repair must stop");
            assert_eq!(e.kind(), ErrorKind::Io, "{fault:?} at open {index}: {e}");
            assert!(e.file().is_some(), "{e}");
            assert_eq!(layer.fired().len(), 1);
            let after = snapshot(&d);
            if index < read_phase {
                let mut after_no_lock = after.clone();
                after_no_lock.remove("LOCK");
                let mut before = original.clone();
                before.remove("LOCK");
                assert_eq!(after_no_lock, before, "{fault:?} at open {index}: changed");
                assert!(!d.join("lost").exists(), "{fault:?} at open {index}");
            }
            // Every original byte is still somewhere.
            let lost: Vec<Vec<u8>> = fs::read_dir(d.join("lost"))
                .map(|rd| rd.map(|e| fs::read(e.unwrap().path()).unwrap()).collect())
                .unwrap_or_default();
            for (name, bytes) in &original {
                if name == "LOCK" {
                    continue;
                }
                assert!(
                    after.get(name) == Some(bytes) || lost.contains(bytes),
                    "{fault:?} at open {index}: {name} is gone"
                );
            }
            // Repair again without the fault: the same database.
            repair_dir(&d, &RepairOptions::default()).unwrap();
            let db = Db::open(&d, Options::default()).unwrap();
            let got: BTreeMap<_, _> = db.iter().unwrap().map(Result::unwrap).collect();
            assert_eq!(got, expected, "{fault:?} at open {index}");
        }
    }
}

#[test]
fn a_removed_lock_file_lets_no_second_writer_in() {
    let d = dir();
    let db = Db::open(d.path(), Options::default()).unwrap();
    db.put(b"k", b"first").unwrap();
    fs::remove_file(d.path().join("LOCK")).unwrap();
    let e = Db::open(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    let e = Db::open_read_only(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert_eq!(check_dir(d.path()).unwrap_err().kind(), ErrorKind::Busy);
    // The writer goes on, and takes its LOCK file again at the next
    // manifest write.
    db.put(b"k", b"second").unwrap();
    db.flush().unwrap();
    assert!(d.path().join("LOCK").exists());
    db.close().unwrap();
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"second".to_vec()));
}

#[test]
fn a_lock_file_another_process_took_stops_the_writes() {
    use std::os::fd::AsRawFd;
    let d = dir();
    let db = Db::open(d.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let lock = d.path().join("LOCK");
    fs::remove_file(&lock).unwrap();
    let other = fs::File::create(&lock).unwrap();
    assert!(quietio::sys::try_flock(other.as_raw_fd(), quietio::sys::LockKind::Exclusive).unwrap());
    let e = db.flush().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert!(e.to_string().contains("writes stop"), "{e}");
    let e = db.put(b"k2", b"v").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    // What was acknowledged is still there after the other holder leaves.
    drop(db);
    drop(other);
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// Many openers of a directory that holds no database yet: one creates
/// it, every other uses it or is told it is busy, never that it is damaged.
#[test]
fn concurrent_first_opens_create_one_database() {
    for round in 0..40 {
        let w = dir();
        let d = Arc::new(w.path().join("db"));
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let d = d.clone();
                std::thread::spawn(move || -> Result<bool, quietkv::Error> {
                    // As the command-line tool does: ask, then open.
                    let _ = Db::exists(&*d)?;
                    let db = match Db::open(&*d, Options::default()) {
                        Ok(db) => db,
                        Err(e) if e.kind() == ErrorKind::Busy => return Ok(false),
                        Err(e) => return Err(e),
                    };
                    db.put(format!("t{t}").as_bytes(), b"v")?;
                    db.close()?;
                    Ok(true)
                })
            })
            .collect();
        let mut wrote = Vec::new();
        for (t, h) in threads.into_iter().enumerate() {
            match h.join().unwrap() {
                Ok(true) => wrote.push(t),
                Ok(false) => {}
                Err(e) => panic!("round {round}, opener {t}: {e}"),
            }
        }
        assert!(!wrote.is_empty(), "round {round}");
        let db = Db::open(&*d, Options::default()).unwrap();
        for t in wrote {
            assert_eq!(
                db.get(format!("t{t}").as_bytes()).unwrap(),
                Some(b"v".to_vec())
            );
        }
    }
}
