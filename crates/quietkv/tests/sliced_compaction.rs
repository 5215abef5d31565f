//! A full compaction in slices (`Options::max_compaction_bytes`): each
//! slice is installed and its inputs deleted before the next starts, so the
//! extra disk space is about one slice, readers move to the new tables
//! slice by slice and always see every key once, and a kill between slices
//! loses nothing.

#[path = "support/skip.rs"]
mod skip;

#[path = "common/small_fs.rs"]
mod small_fs;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quietkv::{Db, Options, WriteBatch, WriteOptions};
use small_fs::SmallFs;

const TABLE: u64 = 64 << 10;
const SLICE: u64 = 256 << 10;
const KEYS: u64 = 4000;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(generation: u64, i: u64) -> Vec<u8> {
    let mut v = format!("g{generation}-v{i}-").into_bytes();
    v.resize(1000, b'a' + (i % 26) as u8);
    v
}

/// Small tables and slices, so 4 MB of data is about 60 tables and 16
/// slices; small WAL segments, so a WAL switch does not allocate more than
/// the slices being measured.
fn options() -> Options {
    Options::default()
        .memtable_size(512 << 10)
        .target_file_size(TABLE)
        .max_compaction_bytes(SLICE)
        .level_base_bytes(1 << 20)
        .wal_segment_size(64 << 10)
}

/// Writes every key in order (each memtable flushes to a table of its own
/// key range) and compacts once, so the tree is a bottom level of
/// disjoint tables.
fn load(dir: &Path, generation: u64) -> Db {
    let db = Db::open(dir, options()).unwrap();
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(100) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(key(i), value(generation, i)).unwrap();
        }
        db.write(b, WriteOptions::default()).unwrap();
    }
    db.compact_all().unwrap();
    db
}

/// Bytes in use on the file system holding `dir` (files unlinked but
/// still open count: they still take space).
fn used_bytes(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: statvfs writes into the zeroed struct we own; the path is a
    // valid NUL-terminated string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    (s.f_blocks - s.f_bfree) * s.f_frsize
}

/// The extra space a full compaction of a database many slices large
/// takes, sampled every millisecond on a file system of its own, never
/// exceeds a slice plus one table (and a little for the manifest and the
/// WAL); the engine's own figure agrees.
#[test]
fn a_full_compaction_needs_about_one_slice_of_extra_space() {
    let Some(fs) = SmallFs::mount("64m") else {
        skip::skip("cannot mount a tmpfs here (not root?): no disk-space test");
        return;
    };
    let dir = fs.0.join("db");
    load(&dir, 1).close().unwrap();
    // Counters start at the open: the ones measured are this compaction's.
    let db = Db::open(&dir, options()).unwrap();
    let before = used_bytes(&fs.0);
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(before));
    let sampler = {
        let (stop, peak, root) = (stop.clone(), peak.clone(), fs.0.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(used_bytes(&root), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let slices_before = db.stats().compaction.manual_slices;
    db.compact_all().unwrap();
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let s = db.stats().compaction;
    let slices = s.manual_slices - slices_before;
    let extra = peak.load(Ordering::Relaxed).saturating_sub(before);
    let data = KEYS * 1000;
    assert!(slices >= 10, "{slices} slices for {data} bytes");
    let slack = 256 << 10; // manifest, WAL segment, directory
    assert!(
        extra <= SLICE + TABLE + slack,
        "a full compaction took {extra} extra bytes at its peak; a slice is {SLICE}"
    );
    assert!(
        s.manual_peak_extra_bytes <= SLICE + TABLE,
        "{}",
        s.manual_peak_extra_bytes
    );
    assert!(s.manual_peak_extra_bytes > 0);
    // Still every value.
    for i in (0..KEYS).step_by(97) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(1, i)));
    }
}

/// Readers running across slice installs (point reads and full scans, one
/// of them started before the compaction) see every key exactly once with
/// its newest value, while a writer overwrites keys meanwhile.
#[test]
fn reads_across_slice_installs_see_every_key_once() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = Arc::new(load(tmp.path(), 1));
    let early = db.iter().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let scans = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (db, stop, scans) = (db.clone(), stop.clone(), scans.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || n == 0 {
                    if t == 0 {
                        let mut expect = 0u64;
                        for item in db.iter().unwrap() {
                            let (k, v) = item.unwrap();
                            assert_eq!(k, key(expect), "a key missing or seen twice");
                            // generation 1, or 2 once the writer got to it
                            assert!(v == value(1, expect) || v == value(2, expect));
                            expect += 1;
                        }
                        assert_eq!(expect, KEYS);
                        scans.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let i = n * 7919 % KEYS;
                        let v = db.get(key(i)).unwrap().expect("every key is there");
                        assert!(v == value(1, i) || v == value(2, i));
                    }
                    n += 1;
                }
            })
        })
        .collect();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in (0..KEYS).step_by(3) {
                db.put(key(i), value(2, i)).unwrap();
            }
        })
    };
    let slices_before = db.stats().compaction.manual_slices;
    db.compact_all().unwrap();
    writer.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(db.stats().compaction.manual_slices - slices_before >= 2);
    assert!(scans.load(Ordering::Relaxed) >= 1);
    // The iterator made before the compaction reads the state it was made
    // from, whatever was installed and deleted since.
    let seen: Vec<_> = early.map(Result::unwrap).collect();
    assert_eq!(seen.len() as u64, KEYS);
    for (i, (k, v)) in seen.iter().enumerate() {
        assert_eq!(k, &key(i as u64));
        assert_eq!(v, &value(1, i as u64));
    }
    let model: BTreeMap<Vec<u8>, Vec<u8>> = (0..KEYS)
        .map(|i| (key(i), value(if i % 3 == 0 { 2 } else { 1 }, i)))
        .collect();
    let got: BTreeMap<_, _> = db.iter().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, model);
}

const CHILD_ENV: &str = "QUIETKV_SLICED_CHILD_DIR";

/// The child: loads the database (generation 1) and says so, then runs full
/// compactions in slices, one after another, until it is killed.
#[test]
fn child_compacts_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return; // only as a child of the test below
    };
    let db = load(Path::new(&dir), 1);
    println!("loaded");
    loop {
        db.compact_all().unwrap();
        println!("compacted {}", db.stats().compaction.manual_slices);
    }
}

/// SIGKILL at random moments of a sliced full compaction: every reopen
/// finds every key with its value, and a later full compaction finishes.
#[test]
fn a_kill_between_slices_loses_nothing() {
    let exe = std::env::current_exe().unwrap();
    let mut kills = 0;
    for round in 0..8u64 {
        let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let mut child = Command::new(&exe)
            .args(["--exact", "child_compacts_until_killed", "--nocapture"])
            .env(CHILD_ENV, tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Kill once the data is in, at a moment that moves every round:
        // after the round-th slice report, or a few ms into a compaction.
        let started = Instant::now();
        let mut compacted = 0;
        for line in lines.by_ref() {
            let line = line.unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "child too slow"
            );
            if line == "loaded" {
                if round % 2 == 0 {
                    std::thread::sleep(Duration::from_millis(round * 7));
                    break;
                }
            } else if line.starts_with("compacted") {
                compacted += 1;
                if compacted >= round / 2 {
                    std::thread::sleep(Duration::from_millis(round * 3));
                    break;
                }
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
        let db = Db::open(tmp.path(), options()).unwrap();
        let mut n = 0;
        for item in db.iter().unwrap() {
            let (k, v) = item.unwrap();
            assert_eq!(k, key(n), "round {round}");
            assert_eq!(v, value(1, n), "round {round}");
            n += 1;
        }
        assert_eq!(n, KEYS, "round {round}");
        db.compact_all().unwrap();
        assert_eq!(db.get(key(KEYS - 1)).unwrap(), Some(value(1, KEYS - 1)));
        db.close().unwrap();
    }
    assert_eq!(kills, 8);
}
