//! `quietkv stress` end to end: a few crash cycles pass with no violation,
//! and the tool does notice when the database and the expected state
//! disagree (so a run with zero violations means something).

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Output};

fn stress(dir: &Path, cycles: u64, seconds: f64) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .args(["stress", "--dir"])
        .arg(dir)
        .args(["--crash-cycles", &cycles.to_string()])
        .args(["--duration", &seconds.to_string()])
        .args(["--keys", "2000", "--threads", "3", "--seed", "7"])
        .output()
        .unwrap()
}

/// `name` in the summary line ("..., 3 cycles, ...") as a number.
fn figure(summary: &str, name: &str) -> u64 {
    let at = summary
        .find(name)
        .unwrap_or_else(|| panic!("{name} in {summary}"));
    summary[..at]
        .trim_end()
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The expected-state file's header, then one 8-byte slot per key whose
/// first 4 bytes are the key's committed version (little endian).
const HEADER: u64 = 64 * 8;

/// Keys of the expected state with an acknowledged (committed) write.
fn committed_keys(dir: &Path) -> u64 {
    let state = std::fs::File::open(dir.join("expected")).unwrap();
    let mut n = 0;
    for k in 0..2000u64 {
        let mut slot = [0u8; 8];
        state.read_exact_at(&mut slot, HEADER + k * 8).unwrap();
        if u32::from_le_bytes(slot[..4].try_into().unwrap()) > 0 {
            n += 1;
        }
    }
    n
}

#[test]
fn crash_cycles_pass_and_a_wrong_expectation_is_caught() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Each run kills its workers at random times within its few seconds,
    // so how much they write depends on the machine's speed. A run
    // continues the previous run's state: run again until more than 100
    // keys hold an acknowledged write (usually after the first run), so
    // that the tampering below has something to catch.
    let started = std::time::Instant::now();
    let mut acked = 0;
    loop {
        let o = stress(d.path(), 4, 3.0);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let summary = out.lines().next().unwrap();
        assert!(summary.starts_with("stress: "), "{summary}");
        assert_eq!(figure(summary, " cycles"), 4, "{summary}");
        assert_eq!(figure(summary, " violations"), 0, "{summary}");
        assert_eq!(figure(summary, " keys verified"), 4 * 2000, "{summary}");
        acked += figure(summary, " acknowledged writes");
        let keys = committed_keys(d.path());
        // Each key with a committed version had an acknowledged write.
        assert!(acked >= keys, "{acked} acknowledged writes for {keys} keys");
        if keys > 100 {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "only {keys} keys got an acknowledged write in two minutes of runs"
        );
    }

    // Claim one more acknowledged version of every written key than the
    // database has: the next restart must report it.
    let state = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(d.path().join("expected"))
        .unwrap();
    let header = HEADER;
    let mut tampered = 0;
    for k in 0..2000u64 {
        let mut slot = [0u8; 8];
        state.read_exact_at(&mut slot, header + k * 8).unwrap();
        let committed = u32::from_le_bytes(slot[..4].try_into().unwrap());
        if committed > 0 {
            slot[..4].copy_from_slice(&(committed + 1).to_le_bytes());
            state.write_all_at(&slot, header + k * 8).unwrap();
            tampered += 1;
        }
    }
    assert!(tampered > 100);
    let o = stress(d.path(), 1, 0.2);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        figure(out.lines().next().unwrap(), " violations") >= 1,
        "{out}"
    );
    assert!(out.contains("VIOLATION"), "{out}");
}
