//! Manifest rotation: a long-lived database keeps one small manifest, and
//! a rotated manifest verifies WALs as strictly as the one it replaced.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use common::{copy_without_lock, dir, files_with};
use quietkv::{check_dir, Db, ErrorKind, Options, WriteBatch, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-").repeat(10).into_bytes()
}

/// Small memtables, tables and levels so a few thousand writes make many
/// flushes and compactions, and a manifest limit small enough to rotate
/// every few installs.
fn options(max_manifest_size: u64) -> Options {
    Options::default()
        .memtable_size(8 << 10)
        .level_base_bytes(32 << 10)
        .target_file_size(8 << 10)
        .l0_compaction_trigger(2)
        .max_manifest_size(max_manifest_size)
}

/// The manifest files in `dir` (not directories a test put in their way).
fn manifests(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("MANIFEST-")
        })
        .collect();
    v.sort();
    v
}

fn current(dir: &Path) -> String {
    fs::read_to_string(dir.join("CURRENT")).unwrap()
}

fn assert_matches_model(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter().unwrap().map(Result::unwrap).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "{what}: number of keys");
    assert!(got == want, "{what}: contents differ from the model");
}

/// One session of writes, deletes, flushes and compactions applied to the
/// database and the model alike.
/// One session's writes. Long enough that a session's unrotated manifest
/// (every flush's and compaction's edit since the open) is several times
/// what rotation keeps it to (twice a snapshot of the state), whatever
/// number of automatic compactions the machine's timing runs.
fn session(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, round: u32, x: &mut u64) {
    for step in 0..240u32 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        let mut b = WriteBatch::new();
        for j in 0..8 {
            let i = ((*x >> (j * 7)) % 2000) as u32;
            if (*x >> (j + 50)).is_multiple_of(5) {
                b.delete(key(i)).unwrap();
                model.remove(&key(i));
            } else {
                b.put(key(i), value(i, round)).unwrap();
                model.insert(key(i), value(i, round));
            }
        }
        db.write(
            b,
            WriteOptions {
                sync: step % 3 == 0,
            },
        )
        .unwrap();
        match step % 40 {
            13 => db.flush().unwrap(),
            39 => db
                .compact_range(Some(&key(((*x >> 20) % 1000) as u32)), None)
                .unwrap(),
            _ => {}
        }
    }
    db.wait_idle().unwrap();
}

/// What is wrong with the directory of a database with `live_tables`
/// tables of `live_bytes` bytes, after its work is done (nothing when it
/// is as it should be): exactly one manifest, the one CURRENT names, and
/// nothing but live tables, the WAL(s), the manifest, CURRENT and LOCK, so
/// that obsolete files do not pile up. `largest_manifest` is the largest
/// manifest seen before.
fn directory_problems(
    d: &Path,
    live_tables: usize,
    live_bytes: u64,
    largest_manifest: u64,
) -> Vec<String> {
    let mut problems = Vec::new();
    let m = manifests(d);
    if m.len() != 1 {
        problems.push(format!("manifests {m:?}"));
    } else if current(d).trim_end() != m[0].file_name().unwrap().to_str().unwrap() {
        problems.push(format!("CURRENT names {:?}, not {:?}", current(d), m[0]));
    }
    let largest_manifest = m
        .iter()
        .filter_map(|p| fs::metadata(p).ok())
        .map(|md| md.len())
        .fold(largest_manifest, u64::max);
    let tables = files_with(d, ".sst");
    if tables.len() > live_tables + 2 {
        problems.push(format!(
            "{} table files for {live_tables} live tables",
            tables.len()
        ));
    }
    let wals = files_with(d, ".log");
    if wals.len() > 2 {
        problems.push(format!("WAL files {wals:?}"));
    }
    let entries = fs::read_dir(d).unwrap().count();
    if entries > tables.len() + 2 + 3 {
        problems.push(format!("{entries} directory entries"));
    }
    // A file deleted between the listing and its size counts nothing.
    let size = |p: &Path| fs::metadata(p).map_or(0, |md| md.len());
    let total: u64 = fs::read_dir(d)
        .unwrap()
        .map(|e| size(&e.unwrap().path()))
        .sum();
    let wal_bytes: u64 = wals.iter().map(|p| size(p)).sum();
    let table_bytes: u64 = tables.iter().map(|p| size(p)).sum();
    if table_bytes > live_bytes + 2 * (16 << 10) {
        problems.push(format!("{table_bytes} table bytes for {live_bytes} live"));
    }
    if total > table_bytes + wal_bytes + largest_manifest + 4096 {
        problems.push(format!("{total} bytes in the directory"));
    }
    problems
}

/// Runs the workload over `sessions` reopens; returns the rotations counted
/// and the largest manifest seen at the end of a session.
fn long_run(d: &Path, max_manifest_size: u64, sessions: u32) -> (u64, u64) {
    let mut model = BTreeMap::new();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut rotations = 0;
    let mut largest_manifest = 0;
    for round in 0..sessions {
        let db = Db::open(d, options(max_manifest_size)).unwrap();
        assert_matches_model(&db, &model, &format!("reopen {round}"));
        session(&db, &mut model, round, &mut x);
        let stats = db.stats();
        rotations += stats.manifest_rotations;
        let live_tables: usize = stats.levels.iter().map(|l| l.files).sum();
        let live_bytes: u64 = stats.levels.iter().map(|l| l.bytes).sum();

        // Obsolete files (old manifests, tables, WALs) are deleted by the
        // background threads after the work that made them obsolete
        // returns: wait for the directory to settle (a minute is far more
        // than that takes, also on a busy machine), then check it.
        let started = std::time::Instant::now();
        let mut problems = directory_problems(d, live_tables, live_bytes, largest_manifest);
        while !problems.is_empty() && started.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::sleep(std::time::Duration::from_millis(10));
            problems = directory_problems(d, live_tables, live_bytes, largest_manifest);
        }
        assert!(problems.is_empty(), "session {round}: {problems:?}");
        let m = manifests(d);
        largest_manifest = largest_manifest.max(fs::metadata(&m[0]).unwrap().len());
        db.close().unwrap();

        let report = check_dir(d).unwrap();
        assert!(
            report.is_ok(),
            "session {round}: check found {:?}",
            report.problems
        );
    }
    let db = Db::open(d, options(max_manifest_size)).unwrap();
    assert_matches_model(&db, &model, "final reopen");
    db.close().unwrap();
    (rotations, largest_manifest)
}

#[test]
fn manifest_rotates_under_many_flushes_and_compactions_and_the_directory_stays_bounded() {
    let d = dir();
    let (rotations, largest) = long_run(d.path(), 1024, 6);
    assert!(rotations >= 6, "only {rotations} rotations");
    // The same workload without rotation: each session's manifest grows
    // far past the bound the rotating run keeps to.
    let control = dir();
    let (none, unrotated) = long_run(control.path(), 1 << 40, 6);
    assert_eq!(none, 0);
    assert!(
        largest * 3 < unrotated,
        "rotating run's manifest reached {largest} bytes, the unrotated one {unrotated}"
    );
}

/// Writes and flushes until the database's manifest was just rotated at
/// runtime and holds nothing but its snapshot, then returns a copy of the
/// directory taken at that moment (every file synced, as after a crash),
/// with the number of keys written (all present in the copy).
fn image_right_after_a_rotation(src: &Path) -> (tempfile::TempDir, u32) {
    let db = Db::open(src, options(1024)).unwrap();
    let opened_with = current(src);
    for round in 0..400u32 {
        let mut b = WriteBatch::new();
        for i in round * 10..round * 10 + 10 {
            b.put(key(i), value(i, 0)).unwrap();
        }
        db.write(b, WriteOptions { sync: true }).unwrap();
        if round % 4 != 3 {
            continue;
        }
        db.flush().unwrap();
        db.wait_idle().unwrap();
        if current(src) == opened_with {
            continue;
        }
        let copy = dir();
        copy_without_lock(src, copy.path());
        // A manifest holding one edit is a rotation's snapshot alone.
        let report = check_dir(copy.path()).unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
        if report.manifest_edits == 1 {
            assert!(db.stats().manifest_rotations > 0);
            return (copy, round * 10 + 10);
        }
    }
    panic!("no image with a freshly rotated manifest in 400 rounds");
}

#[test]
fn a_rotated_manifest_still_requires_the_live_wal() {
    let src = dir();
    let (image, n) = image_right_after_a_rotation(src.path());
    // Untouched, the image opens with every key.
    let check = dir();
    copy_without_lock(image.path(), check.path());
    let db = Db::open(check.path(), options(1024)).unwrap();
    for i in 0..n {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)), "key {i}");
    }
    db.close().unwrap();
    // Without its live WAL (empty, right after a flush) it must not open
    // as if nothing were lost.
    let live = files_with(image.path(), ".log").pop().unwrap();
    fs::remove_file(&live).unwrap();
    let e = Db::open(image.path(), options(1024)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.file(), Some(live.as_path()), "{e}");
}

/// Opens `d` and checks the outcome is either a Corruption error naming a
/// file, or every one of `keys` with its value. Returns whether it was an
/// error.
fn corruption_or_all_present(d: &Path, keys: &[u32], what: &str) -> bool {
    match Db::open(d, options(1 << 30)) {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corruption, "{what}: {e}");
            assert!(e.file().is_some(), "{what}: {e}");
            true
        }
        Ok(db) => {
            for &i in keys {
                assert_eq!(
                    db.get(key(i)).unwrap(),
                    Some(value(i, 0)),
                    "{what}: key {i}"
                );
            }
            false
        }
    }
}

/// The manifest CURRENT names and its size now.
fn current_manifest_size(dir: &Path) -> u64 {
    fs::metadata(dir.join(current(dir).trim_end()))
        .unwrap()
        .len()
}

/// A clean close seals the live WAL with one manifest edit; when that edit
/// tips the manifest over its limit, the rotated manifest's snapshot is the
/// only record of the seal. Truncating or deleting the sealed WAL must
/// still be detected.
///
/// To make the close tip it, flushes overwrite the same few keys (so the
/// tree, and the snapshot, stay small and the limit is exactly 1 KiB) until
/// the manifest is less than one close edit (at least a 13-byte record
/// header and 7 bytes of payload) short of the limit.
#[test]
fn a_wal_sealed_into_a_rotated_manifest_is_still_verified() {
    let src = dir();
    let db = Db::open(src.path(), options(1024)).unwrap();
    let mut positioned = false;
    for _ in 0..500 {
        let mut b = WriteBatch::new();
        for i in 0..20 {
            b.put(key(i), value(i, 0)).unwrap();
        }
        db.write(b, WriteOptions { sync: true }).unwrap();
        db.flush().unwrap();
        db.wait_idle().unwrap();
        let size = current_manifest_size(src.path());
        if (1024 - 19..=1024).contains(&size) {
            positioned = true;
            break;
        }
    }
    assert!(
        positioned,
        "the manifest never got within 19 bytes of 1 KiB"
    );
    // Unflushed writes of new keys, in the live WAL only.
    for round in 0..4u32 {
        let mut b = WriteBatch::new();
        for i in 1000 + round * 5..1000 + round * 5 + 5 {
            b.put(key(i), value(i, 0)).unwrap();
        }
        db.write(b, WriteOptions { sync: true }).unwrap();
    }
    let keys: Vec<u32> = (0..20).chain(1000..1020).collect();
    let before = current(src.path());
    db.close().unwrap();
    assert_ne!(current(src.path()), before, "the close did not rotate");
    let report = check_dir(src.path()).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.manifest_edits, 1, "the close rotated");
    let wal = files_with(src.path(), ".log").pop().unwrap();
    let image = fs::read(&wal).unwrap();
    assert!(!image.is_empty());
    let name = wal.file_name().unwrap().to_owned();
    for cut in [0, image.len() / 2, image.len() - 1] {
        let d = dir();
        copy_without_lock(src.path(), d.path());
        fs::write(d.path().join(&name), &image[..cut]).unwrap();
        assert!(
            corruption_or_all_present(d.path(), &keys, &format!("cut at {cut}")),
            "a sealed WAL cut at {cut} opened"
        );
    }
    let d = dir();
    copy_without_lock(src.path(), d.path());
    fs::remove_file(d.path().join(&name)).unwrap();
    assert!(corruption_or_all_present(d.path(), &keys, "deleted WAL"));
    assert!(!corruption_or_all_present(src.path(), &keys, "untouched"));
}

/// The largest file number in use in `dir` (tables, WALs, manifests).
fn largest_file_number(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let digits = name
                .strip_prefix("MANIFEST-")
                .or_else(|| name.strip_suffix(".sst"))
                .or_else(|| name.strip_suffix(".log"))?
                .to_string();
            digits.parse::<u64>().ok()
        })
        .max()
        .unwrap()
}

/// Directories where the next `count` file numbers' `name(n)` would go, so
/// creating any of those files fails.
fn block_names(dir: &Path, name: impl Fn(u64) -> String, count: u64) -> Vec<PathBuf> {
    let from = largest_file_number(dir) + 1;
    (from..from + count)
        .map(|n| {
            let p = dir.join(name(n));
            fs::create_dir(&p).unwrap();
            p
        })
        .collect()
}

fn write_and_flush(db: &Db, from: u32, to: u32) -> quietkv::Result<()> {
    for i in from..to {
        db.put(key(i), value(i, 0))?;
        if i % 20 == 19 {
            db.flush()?;
        }
    }
    Ok(())
}

/// With the creation of `name(n)` failing for every upcoming file number
/// `n`, every rotation fails before CURRENT names the new manifest: the old
/// one stays in charge, writes, flushes and compactions go on, nothing is
/// refused, no new manifest is left behind, and the database reopens intact.
fn rotation_failing_before_the_switch(name: impl Fn(u64) -> String) {
    let d = dir();
    let db = Db::open(d.path(), options(1024)).unwrap();
    let opened_with = current(d.path());
    let blocked = block_names(d.path(), name, 3000);
    write_and_flush(&db, 0, 600).unwrap();
    db.wait_idle().unwrap();
    let stats = db.stats();
    assert_eq!(stats.manifest_rotations, 0);
    assert!(stats.flushes >= 20, "{} flushes", stats.flushes);
    assert_eq!(current(d.path()), opened_with);
    let m = manifests(d.path());
    assert_eq!(m.len(), 1, "{m:?}");
    // It kept growing past its limit, every rotation failing.
    assert!(fs::metadata(&m[0]).unwrap().len() > 1024);
    db.close().unwrap();
    for p in blocked {
        fs::remove_dir(p).unwrap();
    }
    let db = Db::open(d.path(), options(1024)).unwrap();
    for i in 0..600 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)), "key {i}");
    }
    db.close().unwrap();
}

#[test]
fn a_manifest_that_cannot_be_written_leaves_the_old_one_in_charge() {
    rotation_failing_before_the_switch(|n| format!("MANIFEST-{n:06}"));
}

/// CURRENT's temporary file cannot be created: the new manifest, already
/// written, is removed and the old one stays in charge.
#[test]
fn a_current_switch_that_never_renamed_leaves_the_old_manifest_in_charge() {
    rotation_failing_before_the_switch(|n| format!("CURRENT.{n}.tmp"));
}
