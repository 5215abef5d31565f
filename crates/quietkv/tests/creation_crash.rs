//! Crash test of database creation: a child process creates a database
//! and writes one synced key; it is killed with SIGKILL 0-10 ms after it
//! starts opening, usually before CURRENT exists, or at a random time up
//! to a little after it acknowledged the key, or while it is held (by the
//! fault layer's sync hook) with its first manifest written and no
//! CURRENT yet. Every directory must then open (the cut-short creation is
//! finished), and hold the key if the child had acknowledged it.

#[path = "common/child.rs"]
mod child;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use quietkv::{check_dir, Db, Options, WriteOptions};

const CHILD_ENV: &str = "QUIETKV_CREATION_CHILD_DIR";
/// Set: the child stops in the middle of the creation and waits there.
const HOLD_ENV: &str = "QUIETKV_CREATION_CHILD_HOLD";
const CHILD_TEST: &str = "creation_child_entry";
const ROUNDS: u64 = 30;

/// The child's side, run by the parent test only (hence ignored): say it
/// is about to open, create the database, write one synced key, say so,
/// then wait to be killed. With [`HOLD_ENV`] set, the creation stops at
/// the first sync after a manifest exists and before CURRENT does, says
/// "half-created" and waits there to be killed.
#[test]
#[ignore = "the child process of killed_creation_always_reopens"]
fn creation_child_entry() {
    let dir = std::env::var(CHILD_ENV).expect("run by killed_creation_always_reopens only");
    let mut out = std::io::stdout();
    writeln!(out, "opening").unwrap();
    out.flush().unwrap();
    let mut opts = Options::default();
    if std::env::var_os(HOLD_ENV).is_some() {
        let layer = quietio::fault::FaultLayer::new(Path::new(&dir)).unwrap();
        let at = std::path::PathBuf::from(&dir);
        layer.set_sync_hook(Some(std::sync::Arc::new(
            move |_: &quietio::fault::FaultLayer, _: &quietio::fault::SyncPoint| {
                let names: Vec<String> = std::fs::read_dir(&at)
                    .unwrap()
                    .filter_map(|e| e.unwrap().file_name().into_string().ok())
                    .collect();
                let manifest = names.iter().any(|n| n.starts_with("MANIFEST-"));
                if manifest && !names.iter().any(|n| n == "CURRENT") {
                    let mut out = std::io::stdout();
                    writeln!(out, "half-created").unwrap();
                    out.flush().unwrap();
                    std::thread::sleep(Duration::from_secs(60));
                }
            },
        )));
        opts.fault_layer = Some(layer);
    }
    let db = Db::open(&dir, opts).unwrap();
    db.write(
        {
            let mut b = quietkv::WriteBatch::new();
            b.put(b"first", b"put").unwrap();
            b
        },
        WriteOptions { sync: true },
    )
    .unwrap();
    writeln!(out, "acked").unwrap();
    out.flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

/// When [`run_child`] kills the child.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// This long after it says it is opening.
    After(Duration),
    /// Once it has acknowledged the put.
    AfterAck,
    /// While it is held with its creation cut in half.
    HalfCreated,
}

/// Runs the child on `dir` and kills it as `kill` says; returns whether it
/// acknowledged the put and how long after "opening" that was.
fn run_child(dir: &Path, kill: Kill) -> Option<Duration> {
    let mut cmd = child::entry_command(CHILD_TEST);
    cmd.env(CHILD_ENV, dir);
    if let Kill::HalfCreated = kill {
        cmd.env(HOLD_ENV, "1");
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The test harness may print the test's name on the same line first.
    let opening = lines
        .by_ref()
        .map_while(|l| l.ok())
        .any(|l| l.ends_with("opening"));
    let started = Instant::now();
    let mut acked = None;
    let reached = opening
        && match kill {
            Kill::After(delay) => {
                std::thread::sleep(delay);
                true
            }
            Kill::AfterAck => {
                let got = lines
                    .by_ref()
                    .map_while(|l| l.ok())
                    .any(|l| l.ends_with("acked"));
                acked = got.then(|| started.elapsed());
                got
            }
            Kill::HalfCreated => lines
                .by_ref()
                .map_while(|l| l.ok())
                .any(|l| l.ends_with("half-created")),
        };
    // SIGKILL: no destructor, no flush, no clean shutdown.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(opening, "the child did not start");
    assert!(reached, "the child never got to where {kill:?} kills it");
    // What the child printed before it died, "acked" if it got that far.
    acked.or_else(|| {
        let acked = lines.map_while(|l| l.ok()).any(|l| l.ends_with("acked"));
        acked.then(|| started.elapsed())
    })
}

/// What a kill left in a directory.
#[derive(Debug, Default)]
struct Outcomes {
    /// No database file yet (the directory or the I/O probe only).
    nothing: u32,
    /// Database files but no CURRENT: the creation was cut short.
    half_created: u32,
    created: u32,
    acked: u32,
}

#[test]
fn killed_creation_always_reopens() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Even rounds kill within the first 10 ms (where the creation is);
    // odd ones anywhere up to a little after the put is acknowledged,
    // however long that takes here (syncs vary).
    let full =
        run_child(&root.path().join("calibrate"), Kill::AfterAck).expect("an unkilled child acks");
    let window = (full + full / 4).max(Duration::from_millis(10));
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut seen = Outcomes::default();
    let mut held = 0;
    for round in 0..ROUNDS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let range = if round % 2 == 0 {
            Duration::from_millis(10)
        } else {
            window
        };
        let delay = Duration::from_micros(seed % range.as_micros() as u64);
        // Where a kill at a random time lands depends on the machine's
        // speed; every fifth round kills a creation surely cut in half.
        let kill = if round % 5 == 4 {
            held += 1;
            Kill::HalfCreated
        } else {
            Kill::After(delay)
        };
        let dir = root.path().join(format!("db{round}"));
        let acked = run_child(&dir, kill).is_some();
        // The child owns `dir`: everything in it is a database file.
        let db_files = std::fs::read_dir(&dir).map(|r| r.count()).unwrap_or(0);
        match (db_files, dir.join("CURRENT").exists(), acked) {
            (0, _, _) => seen.nothing += 1,
            (_, false, _) => seen.half_created += 1,
            (_, true, false) => seen.created += 1,
            (_, true, true) => seen.acked += 1,
        }
        let db = Db::open(&dir, Options::default())
            .unwrap_or_else(|e| panic!("round {round} (killed {kill:?}): {e}"));
        let got = db.get(b"first").unwrap();
        if acked {
            assert_eq!(
                got.as_deref(),
                Some(&b"put"[..]),
                "round {round}: acked put lost"
            );
        } else {
            assert!(
                matches!(got.as_deref(), None | Some(b"put")),
                "round {round}"
            );
        }
        db.close().unwrap();
        let r = check_dir(&dir).unwrap();
        assert!(r.is_ok(), "round {round}: {:?}", r.problems);
    }
    eprintln!(
        "{ROUNDS} kills within 10 ms or {window:?} of opening or half-created (an unkilled child acked after {full:?}): {seen:?}"
    );
    // The held rounds at least left database files but no CURRENT.
    assert!(
        seen.half_created >= held,
        "only {} kills landed between the first database file and CURRENT, {held} of them held there: {seen:?}",
        seen.half_created
    );
}
