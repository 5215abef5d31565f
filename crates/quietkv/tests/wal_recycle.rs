//! WAL recycling (`Options::wal_recycle_count`): a WAL whose data is in
//! tables is kept and reused by a later WAL switch (renamed, overwritten
//! from offset 0), and replay never takes the old records that follow the
//! new life's last one. Checked against a model after crashes (a copy of
//! the directory while the database is open: what a process crash leaves,
//! the page cache included) in every WAL write mode, with and without
//! compression. Power cuts of recycled WALs: `power_cut.rs` (its
//! `*-recycle` mode sets).

mod common;

#[path = "common/wal_modes.rs"]
mod wal_modes;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::dir;
use quietkv::{AccessMode, Compression, Db, IoClass, Options, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The WAL write modes this directory supports.
fn wal_modes() -> Vec<AccessMode> {
    wal_modes::supported_wal_modes(dir().path(), true)
}

fn options(mode: AccessMode, compression: Compression, keep: usize) -> Options {
    Options::default()
        .io_mode(IoClass::WalWrite, mode)
        .wal_compression(compression)
        .wal_recycle_count(keep)
        .wal_segment_size(16 << 10)
        .memtable_size(1 << 20)
        .direct_write_buffer_size(8192)
}

fn wal_files(d: &Path) -> Vec<(u64, PathBuf)> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| {
            let n = p.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            (n, p)
        })
        .collect();
    v.sort();
    v
}

/// What a process crash leaves: every file as the page cache has it.
/// A crash is an instant; a file-by-file copy is not, so background work
/// first goes idle (otherwise a compaction finishing mid-copy leaves a
/// manifest naming a table the copy listed too early to see). The live
/// memtable and its WAL are untouched by that wait.
fn crash_copy(db: &Db, from: &Path, to: &Path) {
    db.wait_idle().unwrap();
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
}

fn check_against(db: &Db, model: &Model, what: &str) {
    let got: Model = db
        .iter()
        .unwrap()
        .map(|r| r.unwrap())
        .collect::<Vec<_>>()
        .into_iter()
        .collect();
    let extra: Vec<_> = got
        .iter()
        .filter(|(k, v)| model.get(*k) != Some(*v))
        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
        .take(5)
        .collect();
    let lost: Vec<_> = model
        .keys()
        .filter(|k| !got.contains_key(*k))
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .take(5)
        .collect();
    assert!(
        extra.is_empty() && lost.is_empty(),
        "{what}: stale or wrong {extra:?}, lost {lost:?}"
    );
}

/// How long to wait for what a background thread does after a flush
/// returns: far longer than it takes, also on a busy machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until the database keeps `n` WAL files for reuse (obsolete-file
/// deletion runs after a flush returns).
fn wait_kept(db: &Db, n: usize) {
    let t = Instant::now();
    while db.stats().wal_files_kept < n {
        assert!(t.elapsed() < PATIENCE, "no WAL was kept");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until at most `n` WAL files are left in `dir` (obsolete ones
/// are deleted after a flush returns); fails naming them if more stay.
fn wait_wal_files_at_most(dir: &Path, n: usize, what: &str) {
    let t = Instant::now();
    while wal_files(dir).len() > n {
        assert!(t.elapsed() < PATIENCE, "{what}: {:?}", wal_files(dir));
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Long and short WAL lives in turn (so a reused file often held more
/// than its new life writes, and old records follow the new ones), keys
/// overwritten and deleted between lives, full compactions that drop the
/// deleted keys' old versions (so a replayed old record would bring a
/// deleted key back, visibly). After some lives, and in the middle of
/// others, a crash copy must open to exactly the model.
#[test]
fn recycled_wals_never_replay_stale_writes_and_lose_none() {
    let lives = [300usize, 12, 220, 3, 180, 40, 260, 1, 90, 150, 7];
    for mode in wal_modes() {
        for compression in [Compression::None, Compression::Lz4] {
            let what = format!("{mode}/{compression:?}");
            let d = dir();
            let opts = options(mode, compression, 2);
            let db = Db::open(d.path(), opts.clone()).unwrap();
            let mut model = Model::new();
            let mut w = 0usize;
            for (life, &n) in lives.iter().enumerate() {
                for i in 0..n {
                    let k = format!("k{:03}", (i * 7 + life * 13) % 97).into_bytes();
                    let mut b = WriteBatch::new();
                    if (i + life) % 5 == 4 {
                        b.delete(&k).unwrap();
                        model.remove(&k);
                    } else {
                        // Compressible, and unique per write.
                        let v = format!("life{life}-w{w}-").repeat(8).into_bytes();
                        b.put(&k, &v).unwrap();
                        model.insert(k, v);
                    }
                    w += 1;
                    db.write(b, WriteOptions { sync: i % 17 == 0 }).unwrap();
                    if life % 3 == 1 && i == n / 2 {
                        let c = dir();
                        crash_copy(&db, d.path(), c.path());
                        let again = Db::open(c.path(), opts.clone()).unwrap();
                        check_against(&again, &model, &format!("{what} life {life} mid"));
                    }
                }
                if life % 4 == 3 {
                    db.compact_all().unwrap();
                } else {
                    db.flush().unwrap();
                }
                if life > 0 {
                    // The next switch has a file to take.
                    wait_kept(&db, 1);
                }
                let c = dir();
                crash_copy(&db, d.path(), c.path());
                let again = Db::open(c.path(), opts.clone()).unwrap();
                check_against(&again, &model, &format!("{what} after life {life}"));
            }
            let stats = db.stats();
            assert!(
                stats.wal_files_recycled >= lives.len() as u64 - 2,
                "{what}: only {} WAL switches reused a file",
                stats.wal_files_recycled
            );
            // Kept files are bounded: two kept and the live one (once the
            // last flush's obsolete WAL, if the pool was full, is deleted).
            wait_wal_files_at_most(d.path(), 3, &format!("{what}: kept files are bounded"));
            db.close().unwrap();
            // A clean reopen, with recycling on and off.
            for keep in [2, 0] {
                let db = Db::open(d.path(), options(mode, compression, keep)).unwrap();
                check_against(&db, &model, &format!("{what} reopened, keep {keep}"));
                db.close().unwrap();
            }
        }
    }
}

/// The feature cannot silently turn off: the WAL a switch starts is the
/// kept file itself (same inode), and only up to the limit is kept.
#[test]
fn a_switch_reuses_the_kept_file_itself() {
    for mode in wal_modes() {
        let d = dir();
        let db = Db::open(d.path(), options(mode, Compression::None, 1)).unwrap();
        let put = |i: usize| {
            let mut b = WriteBatch::new();
            b.put(format!("k{i}").as_bytes(), [b'v'; 500]).unwrap();
            db.write(b, WriteOptions::default()).unwrap();
        };
        for i in 0..50 {
            put(i);
        }
        db.flush().unwrap();
        wait_kept(&db, 1);
        // The first WAL is kept, the second is live.
        let wals = wal_files(d.path());
        assert_eq!(wals.len(), 2, "{mode}: {wals:?}");
        let kept_ino = std::fs::metadata(&wals[0].1).unwrap().ino();
        let kept_len = std::fs::metadata(&wals[0].1).unwrap().len();
        assert!(
            kept_len > 50 * 500,
            "{mode}: the kept file holds its records"
        );
        put(1000);
        db.flush().unwrap();
        let stats = db.stats();
        assert_eq!(stats.wal_files_recycled, 1, "{mode}");
        let wals = wal_files(d.path());
        let live = wals.last().unwrap();
        assert_eq!(
            std::fs::metadata(&live.1).unwrap().ino(),
            kept_ino,
            "{mode}: the new WAL is the kept file, renamed"
        );
        // Many more switches: never more than the limit kept.
        for r in 0..6 {
            put(2000 + r);
            wait_kept(&db, 1);
            db.flush().unwrap();
        }
        wait_kept(&db, 1);
        assert_eq!(db.stats().wal_files_kept, 1, "{mode}");
        // The others are deleted (right after each flush returns).
        wait_wal_files_at_most(d.path(), 2, &format!("{mode}"));
        assert_eq!(
            db.stats().wal_files_recycled,
            7,
            "{mode}: every switch reused it"
        );
        db.close().unwrap();
        // Kept files do not outlive the process: the next open deletes
        // obsolete WALs as always.
        let db = Db::open(d.path(), options(mode, Compression::None, 0)).unwrap();
        assert_eq!(wal_files(d.path()).len(), 1, "{mode}");
        assert!(db.get(b"k1000").unwrap().is_some());
        drop(db);
    }
}

/// With recycling off nothing is kept: obsolete WALs are deleted.
#[test]
fn recycling_off_keeps_nothing() {
    let d = dir();
    let db = Db::open(
        d.path(),
        options(AccessMode::Buffered, Compression::None, 0),
    )
    .unwrap();
    for r in 0..4 {
        let mut b = WriteBatch::new();
        b.put(format!("k{r}").as_bytes(), b"v").unwrap();
        db.write(b, WriteOptions::default()).unwrap();
        db.flush().unwrap();
    }
    db.wait_idle().unwrap();
    let stats = db.stats();
    assert_eq!((stats.wal_files_recycled, stats.wal_files_kept), (0, 0));
    // Obsolete WALs are deleted after each flush returns, not before.
    wait_wal_files_at_most(d.path(), 1, "recycling off");
    assert_eq!(db.stats().wal_files_kept, 0);
}

/// WALs of either format replay whatever the option says now: a crash
/// with recyclable WALs opened with recycling off, and the other way.
#[test]
fn either_record_format_replays_with_recycling_on_or_off() {
    for (write_keep, read_keep) in [(2, 0), (0, 2)] {
        let d = dir();
        let db = Db::open(
            d.path(),
            options(AccessMode::Buffered, Compression::None, write_keep),
        )
        .unwrap();
        let mut model = Model::new();
        for i in 0..200 {
            let k = format!("k{}", i % 40).into_bytes();
            let v = format!("v{i}").into_bytes();
            let mut b = WriteBatch::new();
            b.put(&k, &v).unwrap();
            model.insert(k, v);
            db.write(b, WriteOptions::default()).unwrap();
            if i % 50 == 49 {
                db.flush().unwrap();
            }
        }
        let c = dir();
        crash_copy(&db, d.path(), c.path());
        drop(db);
        let again = Db::open(
            c.path(),
            options(AccessMode::Buffered, Compression::None, read_keep),
        )
        .unwrap();
        check_against(&again, &model, &format!("{write_keep} -> {read_keep}"));
    }
}

/// The point of recycling: a kept WAL keeps its blocks (it is not cut to
/// its true length when it is closed), so when a later life reuses it,
/// steady writes neither extend the file nor allocate: its size is the
/// one segment it was allocated at the end of every life, kept or live.
#[test]
fn a_reused_wal_keeps_its_size_and_blocks_across_lives() {
    const SEGMENT: u64 = 1 << 20;
    for mode in wal_modes() {
        let d = dir();
        let opts = options(mode, Compression::None, 1).wal_segment_size(SEGMENT);
        let db = Db::open(d.path(), opts).unwrap();
        // Inode -> (size, blocks) when last seen.
        let mut seen: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut checked = 0;
        for life in 0..8 {
            for i in 0..300 {
                let mut b = WriteBatch::new();
                b.put(format!("k{i}").as_bytes(), [b'v'; 1000]).unwrap();
                db.write(b, WriteOptions::default()).unwrap();
            }
            for (_, p) in wal_files(d.path()) {
                let m = std::fs::metadata(&p).unwrap();
                let now = (m.len(), m.blocks());
                // Never cut, never grown; every block of the segment
                // allocated, and nothing more but (with many extents) a
                // block or two of the file system's extent tree.
                assert_eq!(now.0, SEGMENT, "{mode} life {life}: {}", p.display());
                let data_blocks = SEGMENT / 512;
                assert!(
                    (data_blocks..=data_blocks + 16).contains(&now.1),
                    "{mode} life {life}: {} blocks of 512 bytes in {}",
                    now.1,
                    p.display()
                );
                if seen.insert(m.ino(), now).is_some() {
                    checked += 1;
                }
            }
            if life > 0 {
                wait_kept(&db, 1);
            }
            db.flush().unwrap();
        }
        assert_eq!(db.stats().wal_files_recycled, 7, "{mode}");
        assert!(
            checked >= 6,
            "{mode}: a reused file seen again {checked} times"
        );
        assert!(
            seen.len() <= 3,
            "{mode}: {} WAL files over 8 lives",
            seen.len()
        );
    }
}
