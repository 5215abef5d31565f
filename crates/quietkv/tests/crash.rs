//! Crash tests: a child process writes synced batches and is killed with
//! SIGKILL at a random moment; after reopening, the database must hold
//! exactly a prefix of what the child wrote, at least as long as what it
//! had been told was durable.

#[path = "common/child.rs"]
mod child;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use quietkv::{AccessMode, Db, IoClass, Options, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "QUIETKV_CRASH_CHILD_DIR";
const MODE_ENV: &str = "QUIETKV_CRASH_WAL_MODE";
const MAX_MANIFEST_ENV: &str = "QUIETKV_CRASH_MAX_MANIFEST";
/// `Options::wal_recycle_count` of the child (and of the reopen).
const RECYCLE_ENV: &str = "QUIETKV_CRASH_WAL_RECYCLE";
const BATCH: u64 = 10;

fn key(i: u64) -> Vec<u8> {
    format!("{i:010}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    // Varying sizes, some spanning several blocks.
    let n = 20 + (i * 7919 % 3000) as usize;
    let mut v = format!("v{i}-").into_bytes();
    v.resize(n, b'a' + (i % 26) as u8);
    v
}

/// With a manifest limit (the rotation variant), memtables are smaller so
/// each run makes many installs, and tables larger so the snapshot a
/// manifest starts with stays small: the manifest rotates every few
/// flushes.
fn options(wal_mode: AccessMode, max_manifest_size: Option<u64>, recycle: usize) -> Options {
    let rotating = max_manifest_size.is_some();
    Options::default()
        .wal_recycle_count(recycle)
        .memtable_size(if rotating { 32 << 10 } else { 256 << 10 })
        .level_base_bytes(if rotating { 4 << 20 } else { 1 << 20 })
        .target_file_size(if rotating { 1 << 20 } else { 256 << 10 })
        .l0_compaction_trigger(2)
        .max_manifest_size(max_manifest_size.unwrap_or(Options::default().max_manifest_size))
        .io_mode(IoClass::WalWrite, wal_mode)
}

fn mode_from_env() -> AccessMode {
    std::env::var(MODE_ENV)
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(AccessMode::Buffered)
}

fn recycle_from_env() -> usize {
    std::env::var(RECYCLE_ENV)
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

fn max_manifest_from_env() -> Option<u64> {
    std::env::var(MAX_MANIFEST_ENV)
        .ok()
        .and_then(|m| m.parse().ok())
}

/// The manifest files in `dir`, by number.
fn manifests(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with("MANIFEST-"))
        .collect();
    v.sort();
    v
}

fn current(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("CURRENT"))
        .unwrap()
        .trim_end()
        .to_string()
}

/// The child's side: write batches of consecutive keys forever, printing
/// the manifest it opened with, then the count after each synced batch is
/// acknowledged, and (in the rotation variant) the manifest CURRENT names
/// after each flush that moved it.
/// Not a test of its own (ignored, so it never passes by doing nothing):
/// the parent tests run it in a child process with `--ignored`.
#[test]
#[ignore = "the child process of the crash tests; run by them, not alone"]
fn crash_child_entry() {
    let dir = std::env::var(CHILD_ENV)
        .expect("crash_child_entry runs only as the crash tests' child process");
    let max_manifest = max_manifest_from_env();
    let rotating = max_manifest.is_some();
    let db = Db::open(
        &dir,
        options(mode_from_env(), max_manifest, recycle_from_env()),
    )
    .unwrap();
    let mut next = db.iter().unwrap().count() as u64;
    let stdout = std::io::stdout();
    let mut manifest = current(Path::new(&dir));
    {
        let mut out = stdout.lock();
        writeln!(out, "opened {manifest}").unwrap();
        out.flush().unwrap();
    }
    loop {
        let mut b = WriteBatch::new();
        for i in next..next + BATCH {
            b.put(key(i), value(i)).unwrap();
        }
        db.write(b, WriteOptions { sync: true }).unwrap();
        next += BATCH;
        // The rotation variant flushes every few batches: each flush is
        // two or more manifest edits, so the manifest rotates every few
        // flushes (more as the snapshot, which grows with the data, allows).
        let mut rotated = false;
        if rotating && (next / BATCH).is_multiple_of(3) {
            db.flush().unwrap();
            let now = current(Path::new(&dir));
            rotated = now != manifest;
            manifest = now;
        }
        let mut out = stdout.lock();
        writeln!(out, "acked {next}").unwrap();
        if rotated {
            writeln!(out, "rotated {manifest}").unwrap();
        }
        out.flush().unwrap();
    }
}

fn verify_prefix(
    dir: &Path,
    mode: AccessMode,
    max_manifest: Option<u64>,
    recycle: usize,
    acked: u64,
) -> u64 {
    let db = Db::open(dir, options(mode, max_manifest, recycle)).unwrap();
    let mut n = 0u64;
    for item in db.iter().unwrap() {
        let (k, v) = item.unwrap();
        assert_eq!(
            k,
            key(n),
            "the database must hold a prefix: key {n} missing or out of place"
        );
        assert_eq!(v, value(n), "value of key {n}");
        n += 1;
    }
    assert!(
        n >= acked,
        "acknowledged {acked} entries but only {n} survived"
    );
    assert_eq!(n % BATCH, 0, "a batch survived partly: {n} entries");
    db.close().unwrap();
    n
}

/// What the kills hit, for the rotation variant.
#[derive(Default, Debug)]
struct KillTally {
    /// Rounds whose kill waited for the child to report a rotation.
    waited_for_rotation: u32,
    /// Rounds in which CURRENT had moved past the manifest the child
    /// opened with: at least one rotation happened before the kill.
    rotated: u32,
    /// Kills that left more than one manifest: in the middle of a rotation
    /// (new manifest written, old not yet deleted) or of an open.
    two_manifests: u32,
    /// Of those, kills before CURRENT was switched to the newest manifest.
    before_switch: u32,
}

/// What the child prints.
enum ChildSays {
    /// The manifest CURRENT named when it opened the database.
    Opened(String),
    /// Entries written and acknowledged so far.
    Acked(u64),
    /// A flush moved CURRENT to another manifest.
    Rotated,
}

/// What the child said so far in one round.
struct Heard {
    opened: Option<String>,
    acked: u64,
    rotated: bool,
}

impl ChildSays {
    /// What a line of the child's output says, if it is one of its reports.
    fn parse(line: &str) -> Option<ChildSays> {
        if let Some(n) = line.strip_prefix("acked ") {
            Some(ChildSays::Acked(n.trim().parse::<u64>().unwrap()))
        } else if line.starts_with("rotated ") {
            Some(ChildSays::Rotated)
        } else {
            // The harness's "test ... " prefix shares this line.
            let (_, name) = line.split_once("opened ")?;
            Some(ChildSays::Opened(name.trim().to_string()))
        }
    }
}

impl Heard {
    /// Takes in a line of the child's output (other lines change nothing).
    fn hear(&mut self, line: &str) {
        match ChildSays::parse(line) {
            Some(ChildSays::Opened(name)) => self.opened = Some(name),
            Some(ChildSays::Acked(n)) => self.acked = n,
            Some(ChildSays::Rotated) => self.rotated = true,
            None => {}
        }
    }
}

/// What a round's random delay before the kill counts from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum KillAfter {
    /// The child's start: the kill may land while it opens the database.
    Start,
    /// Its first acknowledged batch, so that it has written something.
    FirstAck,
    /// Its first rotation of the manifest (the rotation variant).
    Rotation,
}

/// How long to wait for the child to get to the point a kill counts from:
/// far more than it takes, also on a busy machine.
const CHILD_PATIENCE: Duration = Duration::from_secs(60);

fn crash_loop(
    mode: AccessMode,
    rounds: u32,
    max_manifest: Option<u64>,
    recycle: usize,
) -> KillTally {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut seed: u64 = 0x9E37_79B9 ^ rounds as u64;
    let mut total = 0;
    let mut tally = KillTally::default();
    for round in 0..rounds {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Kills land at random times, counted from the child's start in
        // a third of the rounds, and else from a point the child reports,
        // so that some rounds surely kill a child that has written (and,
        // in the rotation variant, rotated): how long it takes to get
        // there depends on the machine. The rotation variant's runs are
        // longer: each flushes every few batches.
        let after = match (round % 3, max_manifest) {
            (0, _) => KillAfter::Start,
            (2, Some(_)) => KillAfter::Rotation,
            _ => KillAfter::FirstAck,
        };
        let run_for = match (after, max_manifest) {
            (KillAfter::Start, None) => Duration::from_millis(100 + seed % 600),
            (KillAfter::Start, Some(_)) => Duration::from_millis(500 + seed % 1500),
            (_, None) => Duration::from_millis(seed % 400),
            (_, Some(_)) => Duration::from_millis(seed % 1000),
        };
        let mut child = child::entry_command("crash_child_entry")
            .env(CHILD_ENV, d.path())
            .env(MODE_ENV, mode.name())
            .env(
                MAX_MANIFEST_ENV,
                max_manifest.map_or(String::new(), |m| m.to_string()),
            )
            .env(RECYCLE_ENV, recycle.to_string())
            .spawn()
            .unwrap();
        let (rx, reader) = child::stdout_lines(&mut child);
        let mut heard = Heard {
            opened: None,
            acked: total,
            rotated: false,
        };
        // Wait for the point the delay counts from.
        let waiting = Instant::now();
        let reached = loop {
            let there = match after {
                KillAfter::Start => true,
                KillAfter::FirstAck => heard.acked > total,
                KillAfter::Rotation => heard.rotated,
            };
            if there {
                break Ok(());
            }
            if waiting.elapsed() > CHILD_PATIENCE {
                break Err("did not get to");
            }
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(line) => heard.hear(&line),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break Err("ended before"),
            }
        };
        if let Err(what) = reached {
            // Not left running behind the failed test.
            let _ = child.kill();
            let _ = child.wait();
            panic!("{mode} round {round}: the child {what} {after:?}");
        }
        let start = Instant::now();
        while start.elapsed() < run_for {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(10)) {
                heard.hear(&line);
            }
        }
        // SIGKILL: no destructor, no flush, no clean shutdown.
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        while let Ok(line) = rx.try_recv() {
            heard.hear(&line);
        }
        let acked = heard.acked;
        if after == KillAfter::Rotation {
            tally.waited_for_rotation += 1;
        }
        let left = manifests(d.path());
        if let Some(opened) = heard.opened {
            if current(d.path()) != opened {
                tally.rotated += 1;
            }
        }
        if left.len() > 1 {
            tally.two_manifests += 1;
            if left.last() != Some(&current(d.path())) {
                tally.before_switch += 1;
            }
        }
        total = verify_prefix(d.path(), mode, max_manifest, recycle, acked);
        eprintln!("{mode} round {round}: acknowledged {acked}, survived {total}");
    }
    // Rounds that waited for an acknowledged batch leave at least that.
    assert!(total > 0, "the child never got to write anything");
    tally
}

#[test]
fn killed_writer_leaves_an_acknowledged_prefix_buffered_wal() {
    crash_loop(AccessMode::Buffered, 6, None, 0);
}

#[test]
fn killed_writer_leaves_an_acknowledged_prefix_direct_wal() {
    crash_loop(AccessMode::Direct, 4, None, 0);
}

/// The smallest manifest limit: the manifest rotates every few installs,
/// so kills land before, during and after rotations. Every reopen must
/// still find an acknowledged prefix.
#[test]
fn killed_writer_during_constant_manifest_rotation_leaves_an_acknowledged_prefix() {
    let tally = crash_loop(AccessMode::Buffered, 20, Some(1024), 0);
    eprintln!("rotation crash test: {tally:?}");
    // A witness that kills landed in runs that rotated: at least in every
    // round whose kill waited for the child to report a rotation (more
    // where a kill at a random time came late enough).
    assert!(tally.waited_for_rotation >= 6, "{tally:?}");
    assert!(
        tally.rotated >= tally.waited_for_rotation,
        "rotation happened before the kill in only {} of 20 rounds",
        tally.rotated
    );
}

/// WAL recycling: the rotation variant flushes every few batches, so its
/// WAL switches reuse kept files (some of which held more than the new
/// life writes) and kills land in the middle of reused WALs. Every reopen
/// must find an acknowledged prefix: nothing lost, no reused WAL refused.
/// (Keys here are never overwritten, so a replayed old record would not
/// show; `wal_recycle.rs` and `power_cut.rs` check that.)
#[test]
fn killed_writer_with_recycled_wals_leaves_an_acknowledged_prefix() {
    crash_loop(AccessMode::Buffered, 6, Some(1024), 2);
    crash_loop(AccessMode::Direct, 4, Some(1024), 2);
}
