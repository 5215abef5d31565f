//! Crash tests: a child process writes synced batches and is killed with
//! SIGKILL at a random moment; after reopening, the database must hold
//! exactly a prefix of what the child wrote, at least as long as what it
//! had been told was durable.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quietkv::{AccessMode, Db, IoClass, Options, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "QUIETKV_CRASH_CHILD_DIR";
const MODE_ENV: &str = "QUIETKV_CRASH_WAL_MODE";
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

fn options(wal_mode: AccessMode) -> Options {
    Options {
        memtable_size: 256 << 10,
        level_base_bytes: 1 << 20,
        target_file_size: 256 << 10,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
    .io_mode(IoClass::WalWrite, wal_mode)
}

fn mode_from_env() -> AccessMode {
    std::env::var(MODE_ENV)
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(AccessMode::Buffered)
}

/// The child's side: write batches of consecutive keys forever, printing
/// the count after each synced batch is acknowledged.
#[test]
fn crash_child_entry() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // only meaningful when spawned by the parent test
    };
    let db = Db::open(&dir, options(mode_from_env())).unwrap();
    let mut next = db.iter().unwrap().count() as u64;
    let stdout = std::io::stdout();
    loop {
        let mut b = WriteBatch::new();
        for i in next..next + BATCH {
            b.put(&key(i), &value(i)).unwrap();
        }
        db.write(b, WriteOptions { sync: true }).unwrap();
        next += BATCH;
        let mut out = stdout.lock();
        writeln!(out, "acked {next}").unwrap();
        out.flush().unwrap();
    }
}

fn verify_prefix(dir: &Path, mode: AccessMode, acked: u64) -> u64 {
    let db = Db::open(dir, options(mode)).unwrap();
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

fn crash_loop(mode: AccessMode, rounds: u32) {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut seed: u64 = 0x9E37_79B9 ^ rounds as u64;
    let mut total = 0;
    for round in 0..rounds {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let run_for = Duration::from_millis(100 + seed % 600);
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_entry",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_ENV, d.path())
            .env(MODE_ENV, mode.name())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("acked ") {
                    let _ = tx.send(n.trim().parse::<u64>().unwrap());
                }
            }
        });
        let start = Instant::now();
        let mut acked = total;
        while start.elapsed() < run_for {
            if let Ok(n) = rx.recv_timeout(Duration::from_millis(10)) {
                acked = n;
            }
        }
        // SIGKILL: no destructor, no flush, no clean shutdown.
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        while let Ok(n) = rx.try_recv() {
            acked = n;
        }
        total = verify_prefix(d.path(), mode, acked);
        eprintln!("{mode} round {round}: acknowledged {acked}, survived {total}");
    }
    assert!(total > 0, "the child never got to write anything");
}

#[test]
fn killed_writer_leaves_an_acknowledged_prefix_buffered_wal() {
    crash_loop(AccessMode::Buffered, 6);
}

#[test]
fn killed_writer_leaves_an_acknowledged_prefix_direct_wal() {
    crash_loop(AccessMode::Direct, 4);
}
