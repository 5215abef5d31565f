//! Bad bytes and bad luck: each damaged-file case gets a clear error that
//! names the file (and offset where it applies), and loses no
//! acknowledged write.

mod common;

#[path = "support/skip.rs"]
mod skip;

#[path = "common/small_fs.rs"]
mod small_fs;

use std::fs;
use std::path::{Path, PathBuf};

use common::{copy_without_lock, dir, files_with};
use quietkv::{Db, ErrorKind, Options, WriteOptions};
use small_fs::SmallFs;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-").repeat(20).into_bytes()
}

fn flip(path: &Path, offset: u64) {
    let mut data = fs::read(path).unwrap();
    data[offset as usize] ^= 0x55;
    fs::write(path, data).unwrap();
}

/// A database with `n` keys, all in one flushed table.
fn make_table_db(d: &Path, n: u32) {
    let db = Db::open(d, Options::default()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
}

#[test]
fn damaged_table_block_is_corruption_with_file_and_offset() {
    let d = dir();
    make_table_db(d.path(), 2000);
    let tables = files_with(d.path(), ".sst");
    assert_eq!(tables.len(), 1);
    // Damage a byte early in the file: inside the first data blocks.
    flip(&tables[0], 100);
    let db = Db::open(d.path(), Options::default()).unwrap();
    let e = db.get(key(0)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(tables[0].as_path()), "{e}");
    assert_eq!(e.offset(), Some(0), "{e}");
    // Keys in other blocks are still readable.
    assert_eq!(db.get(key(1999)).unwrap(), Some(value(1999)));
    // A scan reports the damage instead of skipping it: creating the
    // iterator already reads the first block.
    let e = match db.iter() {
        Err(e) => e,
        Ok(mut it) => it.next().unwrap().unwrap_err(),
    };
    assert_eq!(e.kind(), ErrorKind::Corruption);
}

#[test]
fn damaged_table_stops_compaction_and_keeps_the_inputs() {
    let d = dir();
    make_table_db(d.path(), 2000);
    let tables = files_with(d.path(), ".sst");
    flip(&tables[0], 100);
    let db = Db::open(d.path(), Options::default()).unwrap();
    let e = db.compact_all().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    drop(db);
    // Nothing was installed or deleted: the damaged input is still there,
    // and the undamaged keys are still readable after reopening.
    assert!(tables[0].exists());
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(key(1999)).unwrap(), Some(value(1999)));
}

#[test]
fn damaged_manifest_refuses_to_open() {
    let d = dir();
    make_table_db(d.path(), 100);
    // Damage the first record of a manifest that has a second record after
    // it (a bad last record alone would be a torn, never-installed edit).
    let db = Db::open(d.path(), Options::default()).unwrap();
    db.put(b"more", b"x").unwrap();
    db.flush().unwrap(); // appends a second edit to the current manifest
    db.close().unwrap();
    let manifest = files_with(d.path(), "")
        .into_iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    flip(&manifest, 12);
    let e = Db::open(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(manifest.as_path()), "{e}");
    assert_eq!(e.offset(), Some(0), "{e}");
}

#[test]
fn missing_table_refuses_to_open_and_names_it() {
    let d = dir();
    make_table_db(d.path(), 100);
    let table = files_with(d.path(), ".sst").pop().unwrap();
    fs::remove_file(&table).unwrap();
    let e = Db::open(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption);
    assert_eq!(e.file(), Some(table.as_path()));
    assert!(e.to_string().contains("missing"), "{e}");
}

/// Writes `n` keys (each its own synced WAL record) and leaves them in the
/// WAL only: the process "crashes" by leaking the database.
/// `n` writes, all synced but the last (so the WAL ends in a record, not a
/// sync mark), then a "crash": no close, so the WAL is not sealed.
fn wal_only_db(d: &Path, n: u32) -> PathBuf {
    let db = Db::open(d, Options::default()).unwrap();
    for i in 0..n {
        let mut b = quietkv::WriteBatch::new();
        b.put(key(i), value(i)).unwrap();
        db.write(b, WriteOptions { sync: i + 1 < n }).unwrap();
    }
    std::mem::forget(db); // no clean shutdown, no flush
    let wal = files_with(d, ".log").pop().unwrap();
    assert!(fs::metadata(&wal).unwrap().len() > 0);
    wal
}

#[test]
fn truncated_wal_drops_only_the_torn_record() {
    let d = dir();
    let wal = wal_only_db(d.path(), 50);
    // The live WAL is allocated ahead (zeros after its last record, which
    // ends in a value byte): cut 7 bytes off the last record itself.
    let data = fs::read(&wal).unwrap();
    let end = data.iter().rposition(|&b| b != 0).unwrap() as u64 + 1;
    fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(end - 7)
        .unwrap();
    // The forgotten Db still holds the lock in this process: release it by
    // copying the files to a fresh directory, as a restarted process would see them.
    let d2 = dir();
    for f in fs::read_dir(d.path()).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap() != "LOCK" {
            fs::copy(&f, d2.path().join(f.file_name().unwrap())).unwrap();
        }
    }
    let db = Db::open(d2.path(), Options::default()).unwrap();
    for i in 0..49 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    assert_eq!(
        db.get(key(49)).unwrap(),
        None,
        "the torn record was never whole (nor synced)"
    );
}

#[test]
fn damaged_wal_record_before_the_tail_is_corruption() {
    let d = dir();
    let wal = wal_only_db(d.path(), 50);
    let d2 = dir();
    for f in fs::read_dir(d.path()).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap() != "LOCK" {
            fs::copy(&f, d2.path().join(f.file_name().unwrap())).unwrap();
        }
    }
    let wal2 = d2.path().join(wal.file_name().unwrap());
    flip(&wal2, 40);
    let e = Db::open(d2.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(wal2.as_path()), "{e}");
    assert!(e.offset().is_some(), "{e}");
}

#[test]
fn full_disk_keeps_acknowledged_writes_and_reopens() {
    let Some(fs_) = SmallFs::mount("6m") else {
        skip::skip("cannot mount a tmpfs here (not root?): no full-disk test");
        return;
    };
    let opts = Options::default()
        .memtable_size(256 << 10)
        .target_file_size(256 << 10)
        .level_base_bytes(1 << 20)
        .l0_compaction_trigger(2);
    let mut acked = 0u32;
    let err = {
        let db = Db::open(&fs_.0, opts.clone()).unwrap();
        let mut err = None;
        for i in 0..100_000u32 {
            match db.put(key(i), value(i)) {
                Ok(()) => acked = i + 1,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        let err = err.expect("a 6 MiB file system must fill up");
        // Once failed, writes stay refused with a clear error, reads work.
        assert!(db.put(b"after", b"x").is_err());
        assert_eq!(db.get(key(0)).unwrap(), Some(value(0)));
        // The stored failure keeps its cause, not just its text.
        let stored = db.stats().background_error.expect("a stored failure");
        assert!(stored.is_no_space(), "{stored}");
        err
    };
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    // Matched by kind, not by text; and the text says each thing once.
    assert!(err.is_no_space(), "{err}");
    let text = err.to_string();
    assert!(!text.contains("I/O error: I/O error"), "{text}");
    assert!(!text.contains('\n'), "{text}");
    if let Some(f) = err.file() {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert_eq!(text.matches(name).count(), 1, "{text}");
    }
    // With room again, the database reopens with every acknowledged write.
    fs_.resize("256m");
    let db = Db::open(&fs_.0, opts).unwrap();
    for i in 0..acked {
        assert_eq!(
            db.get(key(i)).unwrap(),
            Some(value(i)),
            "acknowledged key {i} lost"
        );
    }
    db.close().unwrap();
}

#[test]
fn lost_current_is_refused_instead_of_starting_over() {
    let d = dir();
    make_table_db(d.path(), 100);
    fs::remove_file(d.path().join("CURRENT")).unwrap();
    let e = Db::open(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("CURRENT is missing"), "{e}");
    // Nothing was deleted.
    assert_eq!(files_with(d.path(), ".sst").len(), 1);
}

/// Opens `d` and checks the outcome is either a Corruption error naming a
/// file, or every one of the `n` acknowledged keys with its right value.
/// Returns whether it was an error.
fn corruption_or_all_present(d: &Path, n: u32, what: &str) -> bool {
    match Db::open(d, Options::default()) {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corruption, "{what}: {e}");
            assert!(e.file().is_some(), "{what}: {e}");
            true
        }
        Ok(db) => {
            for i in 0..n {
                assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "{what}: key {i}");
            }
            false
        }
    }
}

/// Issue 11's defect: 1,000 keys written in synced batches of 50 and the
/// database closed; one flipped byte anywhere in the WAL (byte 7 used to
/// empty the database, a flip in record 10 lost 500 keys), a truncation or
/// a deleted WAL must be reported as corruption, never silently lose keys.
#[test]
fn no_flipped_byte_truncation_or_deletion_of_a_closed_wal_loses_acknowledged_writes() {
    let src = dir();
    {
        let db = Db::open(src.path(), Options::default()).unwrap();
        for batch in 0..20u32 {
            let mut b = quietkv::WriteBatch::new();
            for i in batch * 50..batch * 50 + 50 {
                b.put(key(i), value(i)).unwrap();
            }
            db.write(b, WriteOptions { sync: true }).unwrap();
        }
        db.close().unwrap();
    }
    let wal = files_with(src.path(), ".log").pop().unwrap();
    let name = wal.file_name().unwrap().to_owned();
    let image = fs::read(&wal).unwrap();
    let mut detected = 0;
    // Every header byte of the first two records and of the last, and a
    // stride through the rest.
    let record = image.len() / 20;
    let positions: Vec<usize> = (0..40)
        .chain(record * 10 - 20..record * 10 + 20)
        .chain(image.len() - 60..image.len())
        .chain((0..image.len()).step_by(397))
        .collect();
    for &pos in &positions {
        let d = dir();
        copy_without_lock(src.path(), d.path());
        let mut bytes = image.clone();
        bytes[pos] ^= 0x01;
        fs::write(d.path().join(&name), &bytes).unwrap();
        if corruption_or_all_present(d.path(), 1000, &format!("flip at {pos}")) {
            detected += 1;
        }
    }
    // A checksum covers every byte of a record: all flips are detected.
    assert_eq!(detected, positions.len());
    for cut in [0, 7, record * 10, image.len() - 1] {
        let d = dir();
        copy_without_lock(src.path(), d.path());
        fs::write(d.path().join(&name), &image[..cut]).unwrap();
        assert!(corruption_or_all_present(
            d.path(),
            1000,
            &format!("cut at {cut}")
        ));
    }
    let d = dir();
    copy_without_lock(src.path(), d.path());
    fs::remove_file(d.path().join(&name)).unwrap();
    assert!(corruption_or_all_present(d.path(), 1000, "deleted WAL"));
}

/// `image` (a WAL) with one bit flipped in the last copy of key `i`'s value.
fn damage_value_of(image: &[u8], i: u32) -> Vec<u8> {
    let needle = value(i);
    let at = image
        .windows(needle.len())
        .rposition(|w| w == needle.as_slice())
        .unwrap();
    let mut bytes = image.to_vec();
    bytes[at + 5] ^= 0x01;
    bytes
}

/// After a crash (no close, WAL unsealed), damage in the last record that
/// was synced is corruption: the sync mark written after it shows it was
/// acknowledged. Damage in a record that was never synced may drop it.
#[test]
fn damage_in_the_last_synced_record_after_a_crash_is_corruption() {
    let src = dir();
    let wal = wal_only_db(src.path(), 20); // 19 synced, the last not
    let image = fs::read(&wal).unwrap();
    let name = wal.file_name().unwrap().to_owned();
    // The last synced record (key 18), damaged.
    let d = dir();
    copy_without_lock(src.path(), d.path());
    fs::write(d.path().join(&name), damage_value_of(&image, 18)).unwrap();
    let e = Db::open(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(d.path().join(&name).as_path()), "{e}");

    // The unsynced last record (key 19), damaged: dropped as a torn tail,
    // everything synced is there.
    let d = dir();
    copy_without_lock(src.path(), d.path());
    fs::write(d.path().join(&name), damage_value_of(&image, 19)).unwrap();
    let db = Db::open(d.path(), Options::default()).unwrap();
    for i in 0..19 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    assert_eq!(db.get(key(19)).unwrap(), None);
}

/// A database closed and reopened many times, with flushes in between,
/// keeps opening: sealing and the live-WAL entries follow the WALs as they
/// are replaced.
#[test]
fn reopen_cycles_keep_wal_tracking_consistent() {
    let d = dir();
    for round in 0..6u32 {
        let db = Db::open(d.path(), Options::default()).unwrap();
        for i in round * 100..round * 100 + 100 {
            db.put(key(i), value(i)).unwrap();
        }
        if round % 2 == 1 {
            db.flush().unwrap();
        }
        db.close().unwrap();
        let r = quietkv::check_dir(d.path()).unwrap();
        assert!(r.is_ok(), "round {round}: {:?}", r.problems);
    }
    let db = Db::open(d.path(), Options::default()).unwrap();
    for i in 0..600 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}
