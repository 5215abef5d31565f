//! The WAL in mmap mode end to end: files are allocated a segment at a time
//! and grow when full, a clean close leaves them at their true length, a
//! database written in mmap mode replays in every other mode and the other
//! way round (compressed records too), what a power cut leaves of a mapped
//! WAL (allocated zeros after the last record) replays, and mmap is
//! refused for every class that writes files except the WAL.

mod common;

#[path = "support/skip.rs"]
mod skip;

use std::path::Path;
use std::sync::Arc;

use common::dir;
use quietio::fault::{CutPolicy, FaultLayer};
use quietkv::{AccessMode, Compression, Db, ErrorKind, IoClass, Options, WriteBatch, WriteOptions};

const SEGMENT: u64 = 16 << 10;

fn opts(wal: AccessMode) -> Options {
    Options::default()
        .io_mode(IoClass::WalWrite, wal)
        .wal_segment_size(SEGMENT)
}

fn mmap_supported(d: &std::path::Path) -> bool {
    let env = quietio::IoEnv::open(d, quietio::IoOptions::default()).unwrap();
    if env.capabilities().fallocate.supported {
        return true;
    }
    skip::skip("fallocate unsupported here: no mmap WAL");
    false
}

fn key(run: usize, i: usize) -> Vec<u8> {
    format!("r{run}-k{i:05}").into_bytes()
}

fn value(run: usize, i: usize) -> Vec<u8> {
    format!("value of {run}/{i} ").repeat(8).into_bytes()
}

fn write_run(db: &Db, run: usize, n: usize) {
    for i in 0..n {
        let mut b = WriteBatch::new();
        b.put(key(run, i), value(run, i)).unwrap();
        db.write(b, WriteOptions { sync: i % 10 == 9 }).unwrap();
    }
}

fn assert_runs(db: &Db, runs: &[(usize, usize)], what: &str) {
    for &(run, n) in runs {
        for i in 0..n {
            assert_eq!(
                db.get(key(run, i)).unwrap(),
                Some(value(run, i)),
                "{what}: run {run} key {i}"
            );
        }
    }
}

fn wal_files(d: &std::path::Path) -> Vec<(String, u64)> {
    let mut v: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_mapped_wal_is_allocated_by_segments_and_cut_to_its_length_on_close() {
    let d = dir();
    if !mmap_supported(d.path()) {
        return;
    }
    let db = Db::open(d.path(), opts(AccessMode::Mmap)).unwrap();
    assert_eq!(db.io_mode(IoClass::WalWrite), quietkv::EffectiveMode::Mmap);
    let live = wal_files(d.path());
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].1, SEGMENT, "allocated before any record");
    // ~200 B a write, 200 writes: several segments' worth in one WAL (the
    // default memtable holds it all).
    write_run(&db, 0, 200);
    let live = wal_files(d.path());
    assert_eq!(live.len(), 1);
    assert!(
        live[0].1 > SEGMENT && live[0].1.is_multiple_of(SEGMENT),
        "grown by whole segments: {live:?}"
    );
    db.close().unwrap();
    let closed = wal_files(d.path());
    assert!(
        !closed[0].1.is_multiple_of(SEGMENT),
        "cut to its true length at close: {closed:?}"
    );
    let db = Db::open(d.path(), opts(AccessMode::Mmap)).unwrap();
    assert_runs(&db, &[(0, 200)], "mmap reopened in mmap");
}

#[test]
fn mmap_and_every_other_wal_mode_replay_each_other() {
    let d = dir();
    if !mmap_supported(d.path()) {
        return;
    }
    let env = quietio::IoEnv::open(d.path(), quietio::IoOptions::default()).unwrap();
    let mut others = vec![AccessMode::Buffered, AccessMode::Fadvise];
    if env.capabilities().direct_unusable_reason(true).is_none() {
        others.push(AccessMode::Direct);
    }
    if env.capabilities().dontcache.supported {
        others.push(AccessMode::DontCache);
    }
    for other in others {
        for compression in [Compression::None, Compression::Zstd] {
            let d = dir();
            let mut runs = Vec::new();
            // mmap, other, mmap, other: each open replays what the
            // previous one left in its WAL (no flush: all of it is WAL).
            for (run, mode) in [AccessMode::Mmap, other, AccessMode::Mmap, other]
                .into_iter()
                .enumerate()
            {
                let db = Db::open(d.path(), opts(mode).wal_compression(compression)).unwrap();
                assert_runs(
                    &db,
                    &runs,
                    &format!("{mode} after {runs:?} ({compression:?})"),
                );
                write_run(&db, run, 60);
                runs.push((run, 60));
                db.close().unwrap();
            }
        }
    }
}

/// A database in `dir/db` whose WAL is mapped and compressed with
/// `compression`, over a fault layer for power-cut images; `None` where a
/// mapped WAL cannot work.
fn mapped_db_under_faults(dir: &Path, compression: Compression) -> Option<(Arc<FaultLayer>, Db)> {
    if !mmap_supported(dir) {
        return None;
    }
    let db_dir = dir.join("db");
    let layer = FaultLayer::new(&db_dir).unwrap();
    let mut o = opts(AccessMode::Mmap).wal_compression(compression);
    o.fault_layer = Some(layer.clone());
    let db = Db::open(&db_dir, o).unwrap();
    Some((layer, db))
}

#[test]
fn a_power_cut_of_a_mapped_wal_replays_in_another_mode() {
    let d = dir();
    let Some((layer, db)) = mapped_db_under_faults(d.path(), Compression::Lz4) else {
        return;
    };
    write_run(&db, 0, 100);
    // Synced: writes 0..=99 (the last write of every ten syncs).
    let synced_img = d.path().join("drop");
    layer
        .power_cut_image(&synced_img, CutPolicy::DropUnsynced)
        .unwrap();
    write_run(&db, 1, 5);
    let kept_img = d.path().join("keep");
    layer
        .power_cut_image(&kept_img, CutPolicy::KeepUnsynced)
        .unwrap();
    drop(db);
    // The live WAL in the images still has its allocated zero tail.
    let (_, wal_len) = wal_files(&synced_img).pop().unwrap();
    assert!(wal_len.is_multiple_of(SEGMENT), "{wal_len}");

    let db = Db::open(&synced_img, opts(AccessMode::Buffered)).unwrap();
    assert_runs(&db, &[(0, 100)], "synced image");
    assert_eq!(db.get(key(1, 0)).unwrap(), None);
    drop(db);
    let db = Db::open(&kept_img, opts(AccessMode::Buffered)).unwrap();
    assert_runs(&db, &[(0, 100), (1, 5)], "kept image");
}

#[test]
fn mmap_is_refused_for_classes_that_write_files_other_than_the_wal() {
    let d = dir();
    for class in [
        IoClass::FlushWrite,
        IoClass::CompactionWrite,
        IoClass::Manifest,
    ] {
        let Err(e) = Db::open(
            d.path(),
            Options::default().io_mode(class, AccessMode::Mmap),
        ) else {
            panic!("{class}: mmap accepted");
        };
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{class}: {e}");
        assert!(e.to_string().contains("only for the WAL"), "{class}: {e}");
    }
    let Err(e) = Db::open(d.path(), Options::default().wal_segment_size(5000)) else {
        panic!("an odd segment size was accepted");
    };
    assert!(e.to_string().contains("wal_segment_size"), "{e}");
}

#[test]
fn torn_and_damaged_records_of_a_crashed_compressed_mapped_wal() {
    let d = dir();
    let Some((layer, db)) = mapped_db_under_faults(d.path(), Compression::Zstd) else {
        return;
    };
    // Every write synced: each record is followed by a sync mark.
    for i in 0..40 {
        let mut b = WriteBatch::new();
        b.put(key(0, i), value(0, i)).unwrap();
        db.write(b, WriteOptions { sync: true }).unwrap();
    }
    let img = d.path().join("img");
    layer
        .power_cut_image(&img, CutPolicy::KeepUnsynced)
        .unwrap();
    drop(db);
    let (name, _) = wal_files(&img).pop().unwrap();
    let wal = std::fs::read(img.join(&name)).unwrap();
    let end = wal.iter().rposition(|&b| b != 0).unwrap() + 1;
    let copy = |tag: &str, data: &[u8]| {
        let to = d.path().join(tag);
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(&img).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
        std::fs::write(to.join(&name), data).unwrap();
        to
    };
    // A byte of a synced record in the middle: corruption naming the WAL,
    // never a silently shorter log.
    let mut damaged = wal.clone();
    damaged[end / 2] ^= 0x40;
    let Err(e) = Db::open(copy("damaged", &damaged), opts(AccessMode::Buffered)) else {
        panic!("a damaged synced record was read past");
    };
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains(&name), "{e}");
    // The last mark torn off, zeros after it as the allocation leaves
    // them: the records before it all replay.
    let mut torn = wal.clone();
    torn[end - 3..end].fill(0);
    let db = Db::open(copy("torn", &torn), opts(AccessMode::Mmap)).unwrap();
    assert_runs(&db, &[(0, 40)], "torn sync mark");
}
