//! Crash tests of checkpoints and backups: a child process writes synced
//! batches, takes a checkpoint and a backup after each, and is killed with
//! SIGKILL at a random moment. Afterwards the source database must open
//! with every acknowledged write; every checkpoint directory must be a
//! complete database holding a prefix of the writes, or a hidden leftover
//! that `Db::open` refuses (or, if the kill came between the last sync and
//! the rename, a complete one); the backup directory must verify and
//! restore to a database that passes `check_dir`.

#[path = "common/child.rs"]
mod child;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use quietkv::{
    check_dir, restore, verify_backup, Db, ErrorKind, Options, WriteBatch, WriteOptions,
};

const CHILD_ENV: &str = "QUIETKV_CHECKPOINT_CRASH_DIR";
const BATCH: u64 = 10;

fn options() -> Options {
    Options::default()
        .memtable_size(32 << 10)
        .target_file_size(64 << 10)
        .level_base_bytes(256 << 10)
        .l0_compaction_trigger(2)
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:010}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("v{i}-").into_bytes();
    v.resize(30 + (i * 7919 % 700) as usize, b'a' + (i % 26) as u8);
    v
}

/// How many keys `dir`'s database holds, checking they are exactly the
/// first ones with their values.
fn prefix_len(dir: &Path) -> u64 {
    let db = Db::open(dir, options()).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut n = 0;
    for item in db.iter().unwrap() {
        let (k, v) = item.unwrap();
        assert_eq!(k, key(n), "{}: not a prefix", dir.display());
        assert_eq!(v, value(n), "{}", dir.display());
        n += 1;
    }
    n
}

fn checkpoint_dir(root: &Path, n: u64) -> PathBuf {
    root.join(format!("ck{n}"))
}

/// Not a test of its own (ignored, so it never passes by doing nothing):
/// the crash test runs it in a child process with `--ignored`.
#[test]
#[ignore = "the child process of the checkpoint crash test; run by it, not alone"]
fn checkpoint_crash_child_entry() {
    let root = PathBuf::from(
        std::env::var(CHILD_ENV).expect("runs only as the checkpoint crash test's child process"),
    );
    let db = Db::open(root.join("db"), options()).unwrap();
    let mut next = db.iter().unwrap().count() as u64;
    let stdout = std::io::stdout();
    for round in 0u64.. {
        let mut b = WriteBatch::new();
        for i in next..next + BATCH {
            b.put(key(i), value(i)).unwrap();
        }
        db.write(b, WriteOptions { sync: true }).unwrap();
        next += BATCH;
        writeln!(stdout.lock(), "acked {next}").unwrap();
        let n = (0..).find(|&n| !checkpoint_dir(&root, n).exists()).unwrap();
        let info = db.checkpoint(checkpoint_dir(&root, n)).unwrap();
        writeln!(stdout.lock(), "checkpoint {n} {}", info.sequence).unwrap();
        if round % 2 == 0 {
            let info = db.backup(root.join("bk")).unwrap();
            writeln!(stdout.lock(), "backup {} {}", info.point, info.sequence).unwrap();
        }
        stdout.lock().flush().unwrap();
    }
}

#[test]
fn killed_during_checkpoints_and_backups_leaves_the_source_and_the_copies_whole() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("db")).unwrap();
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut acked = 0;
    let (mut leftovers_refused, mut checkpoints_checked) = (0, 0);
    for round in 0..8 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = child::entry_command("checkpoint_crash_child_entry")
            .env(CHILD_ENV, root)
            .spawn()
            .unwrap();
        let (rx, reader) = child::stdout_lines(&mut child);
        // Kill at a random moment once the child has written something:
        // how long that takes depends on the machine.
        let mut lines = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the child never acknowledged a write");
            let first_ack = line.contains("acked ");
            lines.push(line);
            if first_ack {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(seed % 300));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        lines.extend(rx.try_iter());

        let mut reported = std::collections::HashMap::new();
        for line in &lines {
            // The harness's "test ... " prefix may share the first line.
            if let Some(n) = line.split("acked ").nth(1) {
                acked = n.trim().parse().unwrap();
            } else if let Some(rest) = line.strip_prefix("checkpoint ") {
                let (n, seq) = rest.split_once(' ').unwrap();
                reported.insert(n.parse::<u64>().unwrap(), seq.parse::<u64>().unwrap());
            }
        }

        // The source: every acknowledged write, at most one batch more
        // (written but not yet reported), whole batches only.
        let have = prefix_len(&root.join("db"));
        assert!(
            have >= acked && have <= acked + BATCH && have.is_multiple_of(BATCH),
            "round {round}: source holds {have}, {acked} acknowledged"
        );

        for entry in std::fs::read_dir(root).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if let Some(n) = name.strip_prefix("ck") {
                let n: u64 = n.parse().unwrap();
                let report = check_dir(&path).unwrap();
                assert!(report.is_ok(), "{name}: {report:?}");
                let len = prefix_len(&path);
                assert!(
                    len <= have && len.is_multiple_of(BATCH),
                    "{name}: {len} keys"
                );
                if let Some(&seq) = reported.get(&n) {
                    assert_eq!(len, seq, "{name}");
                }
                checkpoints_checked += 1;
                std::fs::remove_dir_all(&path).unwrap();
            } else if name.starts_with(".ck") && name.ends_with(".quietkv-tmp") {
                if path.join("COPY-INCOMPLETE").exists() {
                    let e = Db::open(&path, options()).unwrap_err();
                    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{name}: {e}");
                    leftovers_refused += 1;
                } else if path.join("CURRENT").exists() {
                    // Killed after the last sync, before the rename.
                    assert!(check_dir(&path).unwrap().is_ok(), "{name}");
                } else {
                    // Killed between creating the directory and writing
                    // its marker: nothing of a database is in it yet.
                    let files: Vec<_> = std::fs::read_dir(&path)
                        .unwrap()
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .filter(|f| f != "LOCK")
                        .collect();
                    assert!(files.is_empty(), "{name}: {files:?}");
                }
                // Kept: the next checkpoint to that name removes it.
            }
        }

        if root.join("bk").join("points").exists() {
            if let Ok(points) = verify_backup(root.join("bk")) {
                let latest = points.last().unwrap();
                let out = root.join(format!("restored{round}"));
                let info = restore(root.join("bk"), &out).unwrap();
                assert_eq!(info.sequence, latest.sequence);
                assert!(check_dir(&out).unwrap().is_ok(), "round {round}");
                assert_eq!(prefix_len(&out), latest.sequence, "round {round}");
                std::fs::remove_dir_all(&out).unwrap();
            } else {
                // Only when no point finished yet.
                let e = verify_backup(root.join("bk")).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            }
        }
    }
    assert!(
        checkpoints_checked > 0,
        "no checkpoint finished in any round"
    );
    eprintln!(
        "{checkpoints_checked} checkpoints checked, {leftovers_refused} unfinished ones refused"
    );
}
