//! The public API end to end on a real directory.

mod common;

use common::{dir, small};
use quietkv::{Db, ErrorKind, Options, WriteBatch, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-")
        .repeat(1 + (i % 7) as usize)
        .into_bytes()
}

#[test]
fn put_get_delete_and_reopen() {
    let d = dir();
    {
        let db = Db::open(d.path(), Options::default()).unwrap();
        db.put(b"a", b"1").unwrap();
        db.put(b"b", b"2").unwrap();
        db.delete(b"a").unwrap();
        assert_eq!(db.get(b"a").unwrap(), None);
        assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
        assert_eq!(db.get(b"c").unwrap(), None);
    }
    let db = Db::open(d.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    db.close().unwrap();
}

#[test]
fn many_writes_flush_compact_and_survive_reopen() {
    let d = dir();
    let n = 5000;
    {
        let db = Db::open(d.path(), small()).unwrap();
        for round in 0..3 {
            for i in 0..n {
                if round == 2 && i % 5 == 0 {
                    db.delete(key(i)).unwrap();
                } else {
                    db.put(key(i), value(i, round)).unwrap();
                }
            }
        }
        db.flush().unwrap();
        db.wait_idle().unwrap();
        let s = db.stats();
        assert!(s.flushes > 5, "{s:?}");
        assert_eq!(s.compaction.running, 0);
        assert_eq!(s.immutable_memtables, 0);
        assert!(
            s.levels[0].files < 2,
            "idle means L0 is below its trigger: {:?}",
            s.levels
        );
        for i in (0..n).step_by(37) {
            let want = if i % 5 == 0 { None } else { Some(value(i, 2)) };
            assert_eq!(db.get(key(i)).unwrap(), want, "key {i}");
        }
        db.compact_all().unwrap();
        let s = db.stats();
        assert!(s.compaction.count >= 1, "{s:?}");
        // Merging and writing megabytes of tables takes measurable CPU, and
        // no more than the compactions' own wall time per thread.
        assert!(s.compaction.cpu_seconds > 0.0, "{s:?}");
        assert!(
            s.compaction.cpu_seconds <= s.compaction.seconds + 0.01,
            "{s:?}"
        );
        assert!(s.flush_cpu_seconds > 0.0, "{s:?}");
        let nonempty: Vec<usize> = s
            .levels
            .iter()
            .enumerate()
            .filter(|(_, l)| l.files > 0)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            nonempty.len(),
            1,
            "after compact_all one level holds everything: {:?}",
            s.levels
        );
        let all: Vec<_> = db.iter().unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(all.len(), (n - n / 5) as usize);
    }
    let db = Db::open(d.path(), small()).unwrap();
    for i in 0..n {
        let want = if i % 5 == 0 { None } else { Some(value(i, 2)) };
        assert_eq!(db.get(key(i)).unwrap(), want, "key {i}");
    }
    let range: Vec<_> = db
        .range(key(10)..key(20))
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    let want: Vec<_> = (10..20).filter(|i| i % 5 != 0).map(key).collect();
    assert_eq!(range, want);
}

#[test]
fn batches_are_atomic_and_snapshots_are_stable() {
    let d = dir();
    let db = Db::open(d.path(), small()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"x", b"1").unwrap();
    b.put(b"y", b"1").unwrap();
    db.write(b, WriteOptions { sync: true }).unwrap();
    let snap = db.snapshot();
    let mut b = WriteBatch::new();
    b.put(b"x", b"2").unwrap();
    b.delete(b"y").unwrap();
    db.write(b, WriteOptions::default()).unwrap();
    for i in 0..3000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.compact_all().unwrap();
    assert_eq!(snap.get(b"x").unwrap(), Some(b"1".to_vec()));
    assert_eq!(snap.get(b"y").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"x").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"y").unwrap(), None);
    let at_snap: Vec<_> = snap.iter().unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(at_snap, vec![b"x".to_vec(), b"y".to_vec()]);
}

#[test]
fn concurrent_writers_share_groups() {
    let d = dir();
    let db = std::sync::Arc::new(Db::open(d.path(), small()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..500u32 {
                    let k = t * 1000 + i;
                    db.write(
                        {
                            let mut b = WriteBatch::new();
                            b.put(key(k), value(k, 0)).unwrap();
                            b
                        },
                        WriteOptions { sync: i % 50 == 0 },
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for t in 0..4 {
        for i in 0..500 {
            assert_eq!(
                db.get(key(t * 1000 + i)).unwrap(),
                Some(value(t * 1000 + i, 0))
            );
        }
    }
    let s = db.stats();
    assert_eq!(s.write_batches, 2000);
    assert!(s.write_groups <= 2000);
}

#[test]
fn second_open_is_refused_with_busy() {
    let d = dir();
    let _db = Db::open(d.path(), Options::default()).unwrap();
    let e = Db::open(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy);
    // This process holds it: the error says so (not "another process").
    assert!(
        e.to_string()
            .contains("already open for writing in this process"),
        "{e}"
    );
    let e = Db::open_read_only(d.path(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy);
    assert!(e.to_string().contains("in this process"), "{e}");
}

#[test]
fn invalid_options_are_rejected_before_touching_disk() {
    let d = dir();
    let p = d.path().join("db");
    let e = Db::open(&p, Options::default().l0_stop_trigger(1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(!p.exists());
    let e = Db::open(&p, Options::default().create_if_missing(false)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn background_rate_limit_throttles_compaction_only() {
    let run = |limit_mib: u64| {
        let d = dir();
        // Two overlapping L0 tables of over 128 KiB each, merged by the
        // manual compaction (L0 compactions are kept out of the way).
        let opts = small()
            .memtable_size(4 << 20)
            .l0_compaction_trigger(1000)
            .l0_slowdown_trigger(1000)
            .l0_stop_trigger(1000)
            .background_rate_limit_mib(limit_mib);
        let db = Db::open(d.path(), opts).unwrap();
        for round in [8, 9] {
            for i in 0..3000 {
                db.put(key(i), value(i, round)).unwrap();
            }
            db.flush().unwrap();
        }
        let tables: Vec<u64> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "sst"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .collect();
        assert!(
            tables.len() == 2 && tables.iter().all(|&len| len > 128 << 10),
            "tables of {tables:?} bytes"
        );
        db.compact_all().unwrap();
        assert_eq!(db.get(key(7)).unwrap(), Some(value(7, 9)));
        let io = db.stats().io;
        let throttled =
            |c: quietkv::IoClass| io.iter().find(|(k, _)| *k == c).unwrap().1.throttle_nanos;
        (
            throttled(quietkv::IoClass::CompactionWrite)
                + throttled(quietkv::IoClass::CompactionRead),
            throttled(quietkv::IoClass::FlushWrite) + throttled(quietkv::IoClass::WalWrite),
        )
    };
    // 1 MiB/s lets at most 100 ms worth (~102 KiB) of unused budget pile
    // up, and the compaction reads each input table whole in one request
    // (the readahead is larger than the table): a request of more than
    // that has to wait, however slowly the compaction runs on a busy
    // machine.
    let (compaction, foreground) = run(1);
    assert!(compaction > 0, "a 1 MiB/s limit must make compaction wait");
    assert_eq!(foreground, 0, "flush and WAL are never throttled");
    assert_eq!(run(0), (0, 0), "0 means unthrottled");
}

#[test]
fn background_threads_get_the_configured_priority() {
    let d = dir();
    let opts = small()
        .background_nice(7)
        .background_io_priority(Some(quietkv::IoPriority::BestEffort(6)));
    let db = Db::open(d.path(), opts).unwrap();
    db.put(b"k", b"v").unwrap();
    // Other tests' databases run in this process too, with threads of the
    // same names: look for any thread of the name at the wanted nice. A
    // thread sets its own priority when it starts, which on a busy machine
    // can take a while: keep looking for up to a minute.
    let thread_at = |name: &str, wanted: i32| {
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_secs(60) {
            for task in std::fs::read_dir("/proc/self/task").unwrap() {
                let task = task.unwrap().path();
                let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
                if comm.trim() != name {
                    continue;
                }
                let Ok(stat) = std::fs::read_to_string(task.join("stat")) else {
                    continue;
                };
                // Fields after the parenthesised name: state is field 3, nice field 19.
                let after = &stat[stat.rfind(')').unwrap() + 2..];
                let nice: i32 = after.split(' ').nth(16).unwrap().parse().unwrap();
                if nice == wanted {
                    return true;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    };
    assert!(
        thread_at("quietkv-bg-0", 7),
        "the compaction thread should run at nice 7"
    );
    // The writers' priority is whatever this process runs at (CI or a
    // developer may start the tests under `nice`).
    // SAFETY: getpriority reads the calling process's nice value.
    let own_nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    };
    assert!(
        thread_at("quietkv-flush", own_nice),
        "the flush thread keeps the writers' priority ({own_nice})"
    );
    drop(db);
}

/// Holds a compaction at its first table sync until released (or for a
/// minute at most, so that a failing test does not hang).
#[derive(Default)]
struct CompactionGate {
    state: std::sync::Mutex<(bool, bool)>,
    cv: std::sync::Condvar,
}

impl CompactionGate {
    /// Called before every sync: a compaction thread about to sync a
    /// table waits here until [`CompactionGate::release`].
    fn hold(&self, p: &quietio::fault::SyncPoint) {
        let compaction = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("quietkv-bg-"));
        if !compaction || !p.name.ends_with(".sst") {
            return;
        }
        let mut st = self.state.lock().unwrap();
        st.0 = true;
        self.cv.notify_all();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !st.1 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            st = self.cv.wait_timeout(st, left).unwrap().0;
        }
    }

    /// Waits until a compaction is held (a minute at most).
    fn wait_held(&self) -> bool {
        let st = self.state.lock().unwrap();
        let (st, _) = self
            .cv
            .wait_timeout_while(st, std::time::Duration::from_secs(60), |st| !st.0)
            .unwrap();
        st.0
    }

    fn release(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
}

/// Lets a held compaction go however the test ends.
struct ReleaseOnDrop<'a>(&'a CompactionGate);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

#[test]
fn a_flush_does_not_wait_for_a_running_compaction() {
    let d = dir();
    // The compaction is held at the sync of its first output table (the
    // fault layer calls a hook before every sync) until the flush is
    // done, so it is provably still running while the flush runs. L0
    // compactions are kept out of the way so only the manual one runs.
    let layer = quietio::fault::FaultLayer::new(d.path()).unwrap();
    let gate = std::sync::Arc::new(CompactionGate::default());
    {
        let gate = gate.clone();
        layer.set_sync_hook(Some(std::sync::Arc::new(
            move |_: &quietio::fault::FaultLayer, p: &quietio::fault::SyncPoint| gate.hold(p),
        )));
    }
    let mut opts = small()
        .l0_compaction_trigger(1000)
        .l0_slowdown_trigger(1000)
        .l0_stop_trigger(1000);
    opts.fault_layer = Some(layer.clone());
    let db = std::sync::Arc::new(Db::open(d.path(), opts).unwrap());
    let _release = ReleaseOnDrop(&gate);
    for i in 0..6000 {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.flush().unwrap();
    let compacting = {
        let db = db.clone();
        std::thread::spawn(move || db.compact_all())
    };
    assert!(gate.wait_held(), "the compaction did not start");
    assert_eq!(db.stats().compaction.running, 1);
    let flushes = db.stats().flushes;
    for i in 0..500 {
        db.put(key(i), value(i, 2)).unwrap();
    }
    // The flush, on a thread of its own so that one stuck behind the
    // compaction fails the test instead of hanging it.
    let flushed = {
        let db = db.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(db.flush());
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
    };
    let flushed = flushed.expect("the flush waited for the held compaction");
    flushed.unwrap();
    assert!(db.stats().flushes > flushes);
    assert!(
        db.stats().compaction.running == 1 && !compacting.is_finished(),
        "the compaction is held until the flush is done"
    );
    gate.release();
    compacting.join().unwrap().unwrap();
    layer.set_sync_hook(None);
    assert_eq!(db.get(key(7)).unwrap(), Some(value(7, 2)));
    assert_eq!(db.get(key(5007)).unwrap(), Some(value(5007, 1)));
}

#[test]
fn db_and_its_iterators_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Db>();
    send_sync::<quietkv::Snapshot>();
    send::<quietkv::DbIter>();
}

/// Compaction gives the CPU away every `background_yield_micros` of
/// merging (so user threads are not kept waiting behind it, see
/// `Options::background_yield_micros`), and never with 0.
#[test]
fn compaction_yields_the_cpu_as_configured() {
    let run = |every_us: u64| {
        let d = dir();
        let db = Db::open(d.path(), small().background_yield_micros(every_us)).unwrap();
        for i in 0..4000u32 {
            db.put(format!("k{i:06}").as_bytes(), [b'v'; 1000]).unwrap();
        }
        let t = std::time::Instant::now();
        db.compact_all().unwrap();
        let took = t.elapsed();
        (db.stats().background_yields, took)
    };
    let (yields, took) = run(1);
    // ~4 MB merged: many clock checks, each past a 1 us interval.
    assert!(yields >= 10, "{yields} yields in {took:?}");
    assert_eq!(run(0).0, 0, "0 means never");
    // Entries the merge drops are work too: 4,000 keys written, flushed
    // and deleted (a flush keeps the tombstones, as tables below may hold
    // the keys), of which the full compaction writes out nothing.
    let d = dir();
    let db = Db::open(d.path(), small().background_yield_micros(1)).unwrap();
    for i in 0..4000u32 {
        db.put(
            format!("k{i:06}").as_bytes(),
            format!("{i:01000}").as_bytes(),
        )
        .unwrap();
    }
    db.flush().unwrap();
    for i in 0..4000u32 {
        db.delete(format!("k{i:06}").as_bytes()).unwrap();
    }
    db.put(b"the-key", b"kept").unwrap();
    let before = db.stats().background_yields;
    db.compact_all().unwrap();
    let yields = db.stats().background_yields - before;
    assert!(yields >= 10, "{yields} yields over 8,000 dropped entries");
    assert_eq!(db.get(b"the-key").unwrap().unwrap(), b"kept");
    assert!(db.iter().unwrap().count() == 1, "only the-key is left");
}

/// Flush and compaction open their outputs before installing them, so no
/// user read waits for a new table's index and filter; after a reopen the
/// first read of each table opens it, and is counted.
#[test]
fn new_tables_are_opened_before_reads_reach_them() {
    let d = dir();
    // Flushed tables first, with compaction held off (L0 only).
    let db = Db::open(d.path(), small().l0_compaction_trigger(8)).unwrap();
    for round in 0..3 {
        for i in 0..8000u32 {
            db.put(key(i), value(i, round)).unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_idle().unwrap();
    let l0 = db.stats().levels[0].files;
    assert!(l0 >= 3, "{l0} L0 tables");
    for i in 0..8000u32 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 2));
    }
    assert_eq!(db.stats().tables_opened_by_reads, 0, "after flushes");
    // Then compaction's outputs.
    db.compact_all().unwrap();
    db.wait_idle().unwrap();
    let tables: usize = db.stats().levels.iter().map(|l| l.files).sum();
    assert!(tables >= 4, "{tables} tables");
    for i in 0..8000u32 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 2));
    }
    assert_eq!(db.stats().tables_opened_by_reads, 0, "after compaction");
    db.close().unwrap();

    // Every table holds some of the keys read, so each is opened once.
    let db = Db::open(d.path(), small()).unwrap();
    for i in 0..8000u32 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 2));
    }
    assert_eq!(db.stats().tables_opened_by_reads as usize, tables);
}

/// The per-level compaction counters add up to the totals, and say where
/// the work went: L0 -> L1 merges read from above, deeper merges read from
/// the level they rewrite too, and a move into an empty range costs no I/O.
#[test]
fn compaction_work_is_counted_by_output_level() {
    let d = dir();
    let db = Db::open(d.path(), small()).unwrap();
    for round in 0..4 {
        for i in 0..4000 {
            db.put(key(i), value(i, round)).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let s = db.stats();
    let into: Vec<_> = s.levels.iter().map(|l| l.compaction_into).collect();
    assert_eq!(
        into.iter().map(|c| c.merges).sum::<u64>(),
        s.compaction.count,
        "every counted compaction is a merge into some level: {into:?}"
    );
    assert_eq!(
        into.iter().map(|c| c.written_bytes).sum::<u64>(),
        s.compaction.bytes_written
    );
    assert_eq!(into[0], Default::default(), "nothing compacts into L0");
    assert!(
        into[1].merges > 0 && into[1].read_from_above_bytes > 0,
        "{into:?}"
    );
    assert!(
        into[1].read_from_level_bytes > 0,
        "L1 is rewritten: {into:?}"
    );
    let deeper: u64 = into[2..].iter().map(|c| c.merges + c.moves).sum();
    assert!(deeper > 0, "the tree grew below L1: {into:?}");
    db.close().unwrap();
}

#[test]
fn a_full_compaction_leaves_nothing_for_the_automatic_picker() {
    let d = dir();
    // Everything stays in level 0 until the full compaction, which must
    // then write deep enough for the data to fit its level's target
    // (256 KiB per level 1 here): level 1 would be over it at once.
    let opts = small()
        .l0_compaction_trigger(1000)
        .l0_slowdown_trigger(2000)
        .l0_stop_trigger(3000);
    let db = Db::open(d.path(), opts).unwrap();
    for i in 0..20_000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let shape: Vec<usize> = db.stats().levels.iter().map(|l| l.files).collect();
    assert!(
        shape[0] > 1 && shape[1..].iter().all(|&n| n == 0),
        "{shape:?}"
    );
    db.compact_all().unwrap();
    let after = db.stats();
    db.wait_idle().unwrap();
    let idle = db.stats();
    assert_eq!(
        idle.compaction.count, after.compaction.count,
        "a compaction ran after the full one"
    );
    let levels: Vec<usize> = idle.levels.iter().map(|l| l.files).collect();
    assert_eq!(levels.iter().filter(|&&n| n > 0).count(), 1, "{levels:?}");
    assert_eq!(levels[1], 0, "over level 1's target: {levels:?}");
    assert_eq!(db.get(key(12_345)).unwrap(), Some(value(12_345, 0)));
}
