//! WAL compression end to end: records are smaller on disk, replay and
//! `check` read them, and the option may change between runs (old WALs,
//! compressed or not, still replay).

mod common;

use common::dir;
use quietkv::{check_dir, Compression, Db, Options, WriteBatch, WriteOptions};

fn with(c: Compression) -> Options {
    Options::default().wal_compression(c)
}

fn key(run: usize, i: usize) -> Vec<u8> {
    format!("run{run}-key{i:06}").into_bytes()
}

/// A compressible value, as most user values are (text, repeated fields).
fn value(run: usize, i: usize) -> Vec<u8> {
    format!("{{\"run\":{run},\"i\":{i},\"name\":\"user-{i}\",\"pad\":\"")
        .into_bytes()
        .into_iter()
        .chain(std::iter::repeat_n(b'x', 400))
        .collect()
}

/// Writes 300 keys in batches of 10, each batch synced.
fn write_run(db: &Db, run: usize) {
    for b in 0..30 {
        let mut batch = WriteBatch::new();
        for i in b * 10..b * 10 + 10 {
            batch.put(key(run, i), value(run, i)).unwrap();
        }
        db.write(batch, WriteOptions { sync: true }).unwrap();
    }
}

fn wal_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn compressed_wal_is_smaller_and_replays() {
    let mut sizes = Vec::new();
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let d = dir();
        {
            let db = Db::open(d.path(), with(c)).unwrap();
            write_run(&db, 0);
            // Dropped without a flush: the data is only in the WAL.
        }
        // Measured once closed: an open WAL is allocated ahead.
        sizes.push(wal_bytes(d.path()));
        let report = check_dir(d.path()).unwrap();
        assert!(report.is_ok(), "{c:?}: {:?}", report.problems);
        assert_eq!(report.wal_records, 30, "{c:?}");
        let db = Db::open(d.path(), Options::default()).unwrap();
        for i in 0..300 {
            assert_eq!(db.get(key(0, i)).unwrap(), Some(value(0, i)), "{c:?} {i}");
        }
    }
    let (plain, lz4, zstd) = (sizes[0], sizes[1], sizes[2]);
    assert!(lz4 * 3 < plain, "lz4 WAL {lz4} B vs plain {plain} B");
    assert!(zstd * 3 < plain, "zstd WAL {zstd} B vs plain {plain} B");
}

#[test]
fn compression_may_change_between_runs() {
    let d = dir();
    let runs = [
        Compression::Lz4,
        Compression::None,
        Compression::Zstd,
        Compression::Lz4,
    ];
    for (run, c) in runs.into_iter().enumerate() {
        let db = Db::open(d.path(), with(c)).unwrap();
        // Every earlier run's writes replayed, whatever wrote them.
        for earlier in 0..run {
            for i in (0..300).step_by(17) {
                assert_eq!(
                    db.get(key(earlier, i)).unwrap(),
                    Some(value(earlier, i)),
                    "run {run} ({c:?}) lost run {earlier} key {i}"
                );
            }
        }
        write_run(&db, run);
        // Closing seals the WAL, it does not flush the memtable: the next
        // run replays this run's WAL under its own setting.
        db.close().unwrap();
    }
    let db = Db::open(d.path(), Options::default()).unwrap();
    for run in 0..runs.len() {
        for i in 0..300 {
            assert_eq!(db.get(key(run, i)).unwrap(), Some(value(run, i)));
        }
    }
}
