//! Checkpoints and backups of a live database: consistency while writers
//! run, hard links versus copies, incremental backups, restores that pass
//! `check_dir`, and the Backup I/O class's counters.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quietkv::{
    check_dir, restore, restore_point, verify_backup, BackupOptions, CheckpointOptions, Db,
    ErrorKind, IoClass, Options,
};

/// Small memtables and tables, so a short run has flushes, several
/// levels and compactions going on while copies are taken.
fn busy_options() -> Options {
    Options::default()
        .memtable_size(64 << 10)
        .target_file_size(64 << 10)
        .level_base_bytes(256 << 10)
        .l0_compaction_trigger(2)
}

fn key(writer: usize, i: u64) -> Vec<u8> {
    format!("w{writer}-{i:08}").into_bytes()
}

fn value(writer: usize, i: u64) -> Vec<u8> {
    let mut v = format!("v{writer}-{i}-").into_bytes();
    v.resize(40 + (i % 200) as usize, b'x');
    v
}

fn tables(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

/// The total size of the files `names` in `dir`.
fn bytes_of<'a>(dir: &Path, names: impl IntoIterator<Item = &'a String>) -> u64 {
    names
        .into_iter()
        .map(|n| std::fs::metadata(dir.join(n)).unwrap().len())
        .sum()
}

/// How many of writer `w`'s keys `db` holds, checking they are exactly
/// its first ones (each writer writes its keys in order, one put each).
fn prefix_len(db: &Db, w: usize) -> u64 {
    let mut n = 0;
    for item in db.prefix(format!("w{w}-")).unwrap() {
        let (k, v) = item.unwrap();
        assert_eq!(k, key(w, n), "writer {w}: keys are not a prefix");
        assert_eq!(v, value(w, n));
        n += 1;
    }
    n
}

#[test]
fn checkpoints_taken_while_writers_run_hold_exactly_the_acknowledged_writes() {
    const WRITERS: usize = 3;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("db");
    let db = Arc::new(Db::open(&src, busy_options()).unwrap());
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, started, acked, stop) =
                (db.clone(), started.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    started[w].store(i + 1, Ordering::SeqCst);
                    db.put(key(w, i), value(w, i)).unwrap();
                    i += 1;
                    acked[w].store(i, Ordering::SeqCst);
                }
            })
        })
        .collect();

    let mut checkpoints = Vec::new();
    for round in 0..4 {
        // Let the writers get ahead (and flushes and compactions start).
        let deadline = Instant::now() + Duration::from_secs(60);
        let want = (round + 1) * 1500;
        while acked.iter().map(|a| a.load(Ordering::SeqCst)).sum::<u64>() < want {
            assert!(Instant::now() < deadline, "writers made no progress");
            std::thread::sleep(Duration::from_millis(5));
        }
        let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        let out = tmp.path().join(format!("ck{round}"));
        let info = db.checkpoint(&out).unwrap();
        let after: Vec<u64> = started.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        checkpoints.push((out, info, before, after));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        db.stats().levels.iter().skip(1).any(|l| l.files > 0),
        "the run should have compacted into deeper levels"
    );

    for (out, info, before, after) in checkpoints {
        assert_eq!(info.dir, out);
        let report = check_dir(&out).unwrap();
        assert!(report.is_ok(), "{report:?}");
        assert!(!out.join("COPY-INCOMPLETE").exists());
        let ck = Db::open(&out, busy_options()).unwrap();
        let mut total = 0;
        for w in 0..WRITERS {
            let n = prefix_len(&ck, w);
            assert!(
                n >= before[w],
                "writer {w}: acknowledged {} before, checkpoint has {n}",
                before[w]
            );
            assert!(
                n <= after[w],
                "writer {w}: only {} started before it returned, checkpoint has {n}",
                after[w]
            );
            total += n;
        }
        // Every put takes one sequence number, from 1: the checkpoint holds
        // exactly the writes up to its sequence number.
        assert_eq!(total, info.sequence, "{}", out.display());
        // A checkpoint is a database of its own.
        ck.put(b"after", b"checkpoint").unwrap();
        ck.close().unwrap();
        let ck = Db::open(&out, busy_options()).unwrap();
        assert_eq!(ck.get(b"after").unwrap().unwrap(), b"checkpoint");
    }
    // The source still has everything.
    for w in 0..WRITERS {
        assert_eq!(prefix_len(&db, w), acked[w].load(Ordering::SeqCst));
    }
}

#[test]
fn tables_are_hard_linked_on_one_file_system_and_copied_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("db");
    let db = Db::open(&src, Options::default().memtable_size(64 << 10)).unwrap();
    for i in 0..3000u64 {
        db.put(key(0, i), value(0, i)).unwrap();
    }
    db.flush().unwrap();
    for i in 3000..3100u64 {
        db.put(key(0, i), value(0, i)).unwrap();
    }
    db.wait_idle().unwrap();

    let linked = tmp.path().join("linked");
    let info = db.checkpoint(&linked).unwrap();
    let source_tables = tables(&src);
    assert!(info.tables_linked > 0);
    assert_eq!(info.tables_copied, 0);
    assert_eq!(info.bytes_copied, 0);
    // The 100 writes after the flush were in the memtable.
    assert_eq!(info.tables_written, 1);
    for name in tables(&linked) {
        let c = std::fs::metadata(linked.join(&name)).unwrap();
        if source_tables.contains(&name) {
            let s = std::fs::metadata(src.join(&name)).unwrap();
            assert_eq!((c.dev(), c.ino()), (s.dev(), s.ino()), "{name}");
            assert!(c.nlink() >= 2);
        } else {
            assert_eq!(c.nlink(), 1, "{name} is the memtable's table");
        }
    }

    let before = db.stats().io;
    let copied = tmp.path().join("copied");
    let info = db
        .checkpoint_with(&copied, CheckpointOptions { link_tables: false })
        .unwrap();
    let after = db.stats().io;
    assert_eq!(info.tables_linked, 0);
    assert!(info.tables_copied > 0);
    let source_bytes = bytes_of(&src, tables(&src).intersection(&tables(&copied)));
    assert_eq!(info.bytes_copied, source_bytes);
    for name in tables(&copied) {
        let c = std::fs::metadata(copied.join(&name)).unwrap();
        assert_eq!(c.nlink(), 1, "{name} is a copy");
    }
    // The copy's bytes are counted under the Backup class, and no user
    // read served it.
    let class = |stats: &[(IoClass, quietkv::ClassStats)], c: IoClass| {
        stats.iter().find(|(k, _)| *k == c).unwrap().1
    };
    let read =
        class(&after, IoClass::Backup).read_bytes - class(&before, IoClass::Backup).read_bytes;
    let written =
        class(&after, IoClass::Backup).write_bytes - class(&before, IoClass::Backup).write_bytes;
    assert!(
        read >= info.bytes_copied,
        "read {read} of {}",
        info.bytes_copied
    );
    assert!(written >= info.bytes_copied + info.bytes_written);
    assert_eq!(
        class(&after, IoClass::UserRead).read_bytes,
        class(&before, IoClass::UserRead).read_bytes
    );
    assert!(db
        .stats()
        .io_modes
        .iter()
        .any(|(c, _)| *c == IoClass::Backup));

    for dir in [&linked, &copied] {
        assert!(check_dir(dir).unwrap().is_ok());
        let ck = Db::open(dir, Options::default()).unwrap();
        assert_eq!(prefix_len(&ck, 0), 3100);
    }
}

#[test]
fn a_checkpoint_goes_only_to_a_new_or_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    db.checkpoint(&empty).unwrap();
    let e = db.checkpoint(&empty).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("not empty"), "{e}");
    let e = db.checkpoint(tmp.path().join("db")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let ck = Db::open(&empty, Options::default()).unwrap();
    assert_eq!(ck.get(b"k").unwrap().unwrap(), b"v");
}

#[test]
fn a_directory_an_unfinished_copy_left_is_refused_by_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".ck.quietkv-tmp");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("COPY-INCOMPLETE"), b"").unwrap();
    for e in [
        Db::open(&dir, Options::default()).unwrap_err(),
        Db::open_read_only(&dir, Options::default()).unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("never finished"), "{e}");
    }
    assert!(
        !dir.join("CURRENT").exists(),
        "no database was created in it"
    );
}

#[test]
fn backups_copy_only_new_tables_and_restore_to_databases_that_pass_check() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("db");
    let bk = tmp.path().join("backups");
    // No compaction: the test knows which tables each backup finds.
    let opts = Options::default()
        .memtable_size(64 << 10)
        .l0_compaction_trigger(1000)
        .l0_slowdown_trigger(1000)
        .l0_stop_trigger(1000);
    let db = Db::open(&src, opts.clone()).unwrap();
    for i in 0..2000u64 {
        db.put(key(0, i), value(0, i)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let first_tables = tables(&src);
    let first = db.backup(&bk).unwrap();
    assert_eq!(first.point, 1);
    assert_eq!(first.tables_copied as usize, first_tables.len());
    assert_eq!(first.tables_reused, 0);
    assert_eq!(first.bytes_copied, bytes_of(&src, &first_tables));
    assert_eq!(first.tables_written, 0, "everything was flushed");

    for i in 2000..3000u64 {
        db.put(key(0, i), value(0, i)).unwrap();
    }
    db.flush().unwrap();
    db.put(b"in-memtable", b"only").unwrap();
    db.wait_idle().unwrap();
    let second_tables = tables(&src);
    let new: Vec<_> = second_tables.difference(&first_tables).collect();
    assert!(!new.is_empty());
    let second = db.backup(&bk).unwrap();
    assert_eq!(second.point, 2);
    assert_eq!(second.tables_copied as usize, new.len());
    assert_eq!(second.tables_reused as usize, first_tables.len());
    assert_eq!(second.bytes_copied, bytes_of(&src, new.iter().copied()));
    assert_eq!(second.tables_written, 1, "the memtable's write");

    let points = verify_backup(&bk).unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1].sequence, second.sequence);

    let latest = tmp.path().join("restored");
    let info = restore(&bk, &latest).unwrap();
    assert_eq!((info.point, info.sequence), (2, second.sequence));
    let report = check_dir(&latest).unwrap();
    assert!(report.is_ok(), "{report:?}");
    let r = Db::open(&latest, opts.clone()).unwrap();
    assert_eq!(prefix_len(&r, 0), 3000);
    assert_eq!(r.get(b"in-memtable").unwrap().unwrap(), b"only");
    drop(r);

    let older = tmp.path().join("older");
    restore_point(&bk, 1, &older).unwrap();
    assert!(check_dir(&older).unwrap().is_ok());
    let r = Db::open(&older, opts.clone()).unwrap();
    assert_eq!(prefix_len(&r, 0), 2000);
    assert_eq!(r.get(b"in-memtable").unwrap(), None);
    drop(r);

    // Keeping one point deletes the other and the tables only it needed.
    db.put(b"third", b"point").unwrap();
    let third = db
        .backup_with(&bk, BackupOptions { keep_points: 1 })
        .unwrap();
    assert_eq!((third.point, third.points_removed), (3, 2));
    assert_eq!(third.tables_copied, 0);
    assert_eq!(verify_backup(&bk).unwrap().len(), 1);
    let e = restore_point(&bk, 1, tmp.path().join("gone")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let r3 = tmp.path().join("r3");
    restore(&bk, &r3).unwrap();
    assert!(check_dir(&r3).unwrap().is_ok());
    assert_eq!(
        Db::open(&r3, opts).unwrap().get(b"third").unwrap().unwrap(),
        b"point"
    );
}

#[test]
fn a_damaged_backup_is_found_by_verify_and_refused_by_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), Options::default()).unwrap();
    for i in 0..500u64 {
        db.put(key(0, i), value(0, i)).unwrap();
    }
    db.flush().unwrap();
    let bk = tmp.path().join("bk");
    db.backup(&bk).unwrap();
    let stored = bk.join("tables");
    let name = tables(&stored).into_iter().next().unwrap();
    let path = stored.join(&name);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let e = verify_backup(&bk).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption);
    assert!(e.to_string().contains(&name), "{e}");
    let target = tmp.path().join("restored");
    let e = restore(&bk, &target).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption);
    assert!(!target.exists(), "a failed restore leaves nothing");
    assert!(!tmp.path().join(".restored.quietkv-tmp").exists());

    // A backup of another database is refused in the same directory.
    let other = Db::open(tmp.path().join("other"), Options::default()).unwrap();
    other.put(b"x", b"y").unwrap();
    let e = other.backup(&bk).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("another database"), "{e}");
}

/// A checkpoint onto another file system (`/dev/shm`, a tmpfs, where it
/// exists) cannot link: `link(2)` fails with EXDEV and every table is
/// copied. On a machine where that directory shares the source's file
/// system, the same checkpoint must link every table instead.
#[test]
fn a_checkpoint_onto_another_file_system_copies_what_it_cannot_link() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = tmp.path().join("db");
    let db = Db::open(&src, Options::default().memtable_size(64 << 10)).unwrap();
    for i in 0..2000u64 {
        db.put(key(0, i), value(0, i)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let shm = Path::new("/dev/shm");
    let other = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let out = other.path().join("ck");
    let info = db.checkpoint(&out).unwrap();
    let n = tables(&src).len() as u64;
    let across =
        std::fs::metadata(&src).unwrap().dev() != std::fs::metadata(other.path()).unwrap().dev();
    if across {
        assert_eq!((info.tables_linked, info.tables_copied), (0, n), "{info:?}");
        assert!(info.bytes_copied > 0);
    } else {
        assert_eq!((info.tables_linked, info.tables_copied), (n, 0), "{info:?}");
    }
    assert!(check_dir(&out).unwrap().is_ok());
    assert_eq!(
        prefix_len(&Db::open(&out, Options::default()).unwrap(), 0),
        2000
    );
}

#[test]
fn range_deletes_reach_the_copy_from_the_memtable_and_from_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), Options::default()).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}"), b"v").unwrap();
    }
    // One range delete flushed into a table, one only in the memtable, and
    // one newer than the checkpoint (taken by the second copy only).
    db.delete_range(&b"k010"[..]..&b"k020"[..]).unwrap();
    db.flush().unwrap();
    db.delete_range(&b"k050"[..]..&b"k060"[..]).unwrap();
    let first = tmp.path().join("first");
    db.checkpoint(&first).unwrap();
    db.delete_range(&b"k080"[..]..&b"k090"[..]).unwrap();
    let second = tmp.path().join("second");
    db.checkpoint_with(&second, CheckpointOptions { link_tables: false })
        .unwrap();

    let live = |dir: &Path| -> Vec<u32> {
        let ck = Db::open(dir, Options::default()).unwrap();
        let keys = ck
            .iter()
            .unwrap()
            .map(|kv| {
                let (k, _) = kv.unwrap();
                std::str::from_utf8(&k[1..]).unwrap().parse().unwrap()
            })
            .collect();
        ck.close().unwrap();
        assert!(check_dir(dir).unwrap().is_ok());
        keys
    };
    let expect = |gaps: &[std::ops::Range<u32>]| -> Vec<u32> {
        (0..100)
            .filter(|i| !gaps.iter().any(|g| g.contains(i)))
            .collect()
    };
    assert_eq!(live(&first), expect(&[10..20, 50..60]));
    assert_eq!(live(&second), expect(&[10..20, 50..60, 80..90]));
}
