//! The key-value commands end to end, through the built binary.

mod common;
#[path = "../../quietio/tests/support/file_states.rs"]
mod file_states;
#[path = "../../quietio/tests/support/ro_mount.rs"]
mod ro_mount;

use common::files;
use file_states::file_states;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn qkv(db: &Path, args: &[&str]) -> Output {
    qkv_in(db, args, None)
}

fn qkv_in(db: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quietkv"));
    cmd.arg("--db").arg(db).args(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects success; returns stdout.
fn ok(db: &Path, args: &[&str]) -> String {
    let o = qkv(db, args);
    assert!(
        o.status.success(),
        "{args:?}: {:?}\n{}{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

fn lines(n: u32) -> String {
    (0..n).map(|i| format!("key{i:05}\tvalue {i}\n")).collect()
}

/// A fresh directory and the path of a database not yet created in it.
fn new_db() -> (tempfile::TempDir, PathBuf) {
    let d = tmp();
    let db = d.path().join("db");
    (d, db)
}

/// A database holding `lines(n)`, loaded from a file.
fn loaded_db(n: u32) -> (tempfile::TempDir, PathBuf) {
    let (d, db) = new_db();
    let input = d.path().join("input.tsv");
    fs::write(&input, lines(n)).unwrap();
    ok(&db, &["load", input.to_str().unwrap()]);
    (d, db)
}

/// Something done to a database's files between two commands.
type Damage = fn(&Path);

fn flip(path: &Path, offset: u64) {
    let mut data = fs::read(path).unwrap();
    data[offset as usize] ^= 0x20;
    fs::write(path, data).unwrap();
}

#[test]
fn put_get_delete_scan_round_trip() {
    let (_d, db) = new_db();
    for (k, v) in [("b", "2"), ("a", "1"), ("d", "4"), ("c", "3 with spaces")] {
        ok(&db, &["put", k, v]);
    }
    assert_eq!(ok(&db, &["get", "c"]), "3 with spaces\n");
    ok(&db, &["put", "a", "1b"]);
    assert_eq!(ok(&db, &["get", "a"]), "1b\n");
    assert_eq!(ok(&db, &["scan"]), "a\t1b\nb\t2\nc\t3 with spaces\nd\t4\n");
    assert_eq!(
        ok(&db, &["scan", "--from", "b", "--to", "d"]),
        "b\t2\nc\t3 with spaces\n"
    );
    assert_eq!(ok(&db, &["scan", "--from", "b", "--limit", "1"]), "b\t2\n");
    assert_eq!(ok(&db, &["scan", "--to", "a"]), "");
    ok(&db, &["delete", "b"]);
    ok(&db, &["delete", "never-existed"]);
    assert_eq!(
        ok(&db, &["scan", "--limit", "2"]),
        "a\t1b\nc\t3 with spaces\n"
    );

    let o = qkv(&db, &["get", "b"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "quietkv: not found: b\n");
    assert_eq!(stdout(&o), "");

    ok(&db, &["flush"]);
    ok(&db, &["compact"]);
    assert_eq!(ok(&db, &["scan"]), "a\t1b\nc\t3 with spaces\nd\t4\n");

    ok(&db, &["delete-range", "b", "d"]);
    assert_eq!(ok(&db, &["scan"]), "a\t1b\nd\t4\n");
    let o = qkv(&db, &["delete-range", "z", "a"]);
    assert_eq!(o.status.code(), Some(1), "a reversed range is a user error");
    ok(&db, &["compact"]);
    assert_eq!(ok(&db, &["scan"]), "a\t1b\nd\t4\n");
}

#[test]
fn user_errors_exit_1_with_one_line() {
    let d = tmp();
    let missing = d.path().join("missing");
    for args in [
        &["get", "a"][..],
        &["scan"],
        &["stats"],
        &["check"],
        &["repair"],
        &["flush"],
    ] {
        let o = qkv(&missing, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert!(err.starts_with("quietkv: "), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    assert!(
        !missing.exists(),
        "read commands must not create the database"
    );

    // Bad arguments and a missing --db.
    let db = d.path().join("db");
    ok(&db, &["put", "k", "v"]);
    for args in [&["scan", "--limit", "x"][..], &["bogus"], &["put", "k"]] {
        let o = qkv(&db, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("quietkv: "));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .args(["get", "k"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--db"), "{}", stderr(&o));
}

#[test]
fn load_from_file_and_stdin() {
    let (d, db) = new_db();
    let input = d.path().join("input.tsv");
    fs::write(&input, lines(2500)).unwrap();

    // From a file, without --sync: no acked lines.
    let out = ok(&db, &["load", input.to_str().unwrap()]);
    assert_eq!(out, "loaded 2500 entries\n");
    assert_eq!(ok(&db, &["get", "key02499"]), "value 2499\n");

    // From stdin with --sync: one acked line per batch, then the count.
    let more: String = (0..2300)
        .map(|i| format!("more{i:05}\tv\tith tab {i}\n"))
        .collect();
    let o = qkv_in(&db, &["load", "--sync"], Some(more.as_bytes()));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "acked 1000\nacked 2000\nacked 2300\nloaded 2300 entries\n"
    );
    // The value is everything after the first TAB.
    assert_eq!(ok(&db, &["get", "more00007"]), "v\tith tab 7\n");

    // `-` is stdin too; --batch sets the batch size; a last line without a
    // newline still counts.
    let o = qkv_in(
        &db,
        &["load", "-", "--sync", "--batch", "2"],
        Some(b"x\t1\ny\t2\nz\t3"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "acked 2\nacked 3\nloaded 3 entries\n");
    let o = qkv_in(&db, &["load"], Some(b"z\t4\n"));
    assert_eq!(stdout(&o), "loaded 1 entries\n");
    assert_eq!(ok(&db, &["get", "z"]), "4\n");

    let all = ok(&db, &["scan"]);
    assert_eq!(all.lines().count(), 2500 + 2300 + 3);
}

/// Checks a `load --sync` of `a`, `b`, a bad third line and `c`: it failed
/// with one error line naming line 3, and the two lines before it were
/// written and acknowledged. Returns the error.
fn assert_load_stopped_at_line_3(o: &Output, db: &Path) -> String {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("line 3"), "{err}");
    assert_eq!(stdout(o), "acked 2\n");
    assert_eq!(ok(db, &["scan"]), "a\t1\nb\t2\n");
    err
}

#[test]
fn load_line_without_tab_is_a_user_error() {
    let (d, db) = new_db();
    let input = d.path().join("bad.tsv");
    fs::write(&input, "a\t1\nb\t2\nno tab here\nc\t3\n").unwrap();
    let o = qkv(&db, &["load", "--sync", input.to_str().unwrap()]);
    let err = assert_load_stopped_at_line_3(&o, &db);
    assert!(err.starts_with("quietkv: "), "{err}");

    let o = qkv_in(&db, &["load"], Some(b"\n"));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("stdin line 1"), "{}", stderr(&o));
}

#[test]
fn stats_human_and_json() {
    let (_d, db) = loaded_db(3000);
    ok(&db, &["compact"]);

    let human = ok(&db, &["stats"]);
    for needle in [
        "L0",
        "L6",
        "flushes",
        "compactions",
        "stalls",
        "block cache",
        "UserRead",
        "WalWrite",
    ] {
        assert!(human.contains(needle), "{needle} missing from\n{human}");
    }

    let json = ok(&db, &["stats", "--json"]);
    assert_eq!(json.trim().lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 7);
    let files: u64 = levels.iter().map(|l| l["files"].as_u64().unwrap()).sum();
    let bytes: u64 = levels.iter().map(|l| l["bytes"].as_u64().unwrap()).sum();
    assert!(files >= 1 && bytes > 0, "{json}");
    assert_eq!(v["last_sequence"].as_u64(), Some(3000));
    assert!(v["compaction"]["bytes_read"].is_u64());
    assert!(v["stalls"]["stops"].is_u64());
    assert!(v["block_cache"]["hits"].is_u64());
    assert!(v["io"]["CompactionRead"]["mode"].is_string());
    assert!(v["io"]["UserRead"]["read_bytes"].is_u64());
}

#[test]
fn check_healthy_database() {
    let (_d, db) = loaded_db(3000);
    ok(&db, &["flush"]);
    let o = qkv_in(
        &db,
        &["load", "--batch", "1"],
        Some(b"w1\t1\nw2\t2\nw3\t3\n"),
    );
    assert!(o.status.success());

    let out = ok(&db, &["check"]);
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("ok: 1 tables, "), "{out}");
    assert!(last.ends_with(", 3 WAL records checked"), "{out}");
    let blocks: u64 = last
        .split(", ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(blocks > 5, "{out}");
}

#[test]
fn check_finds_a_flipped_table_byte() {
    let (_d, db) = loaded_db(3000);
    ok(&db, &["flush"]);
    let sst = files(&db, "sst");
    assert_eq!(sst.len(), 1);
    // Inside the second 4 KiB data block.
    flip(&sst[0], 5000);

    let o = qkv(&db, &["check"]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    let line = out.lines().find(|l| l.starts_with("DAMAGED ")).unwrap();
    let prefix = format!("DAMAGED {} offset ", sst[0].display());
    assert!(line.starts_with(&prefix), "{line}");
    let offset: u64 = line[prefix.len()..]
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(offset > 0 && offset <= 5000, "{line}");
    assert!(!out.contains("ok:"), "{out}");

    // The database itself now fails reads of that block, without a panic.
    let o = qkv(&db, &["scan"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("quietkv: corruption"),
        "{}",
        stderr(&o)
    );
}

/// Loads five equal-sized records (one line per batch; closed, so they
/// stay in the WAL) and flips a byte in the middle one; returns the WAL.
fn damaged_middle_wal_record(db: &Path) -> PathBuf {
    let input: String = (0..5).map(|i| format!("wal{i}\tvalue{i}\n")).collect();
    let o = qkv_in(db, &["load", "--batch", "1"], Some(input.as_bytes()));
    assert!(o.status.success());
    let wal = files(db, "log")
        .into_iter()
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap();
    let len = fs::metadata(&wal).unwrap().len();
    flip(&wal, len / 2);
    wal
}

#[test]
fn check_finds_a_damaged_middle_wal_record() {
    let (_d, db) = new_db();
    let wal = damaged_middle_wal_record(&db);

    let o = qkv(&db, &["check"]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    let prefix = format!("DAMAGED {} offset ", wal.display());
    assert!(out.lines().any(|l| l.starts_with(&prefix)), "{out}");
}

/// `repair` turns a database that refuses to open (a damaged mid-WAL
/// record) into one that opens, naming what it dropped.
#[test]
fn repair_salvages_around_a_damaged_wal_record() {
    let (_d, db) = new_db();
    let wal = damaged_middle_wal_record(&db);
    assert_eq!(qkv(&db, &["get", "wal0"]).status.code(), Some(2));

    let out = ok(&db, &["repair"]);
    let prefix = format!("DROPPED {} offset ", wal.display());
    assert!(out.lines().any(|l| l.starts_with(&prefix)), "{out}");
    assert!(out.contains("wal: 4 records salvaged"), "{out}");
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("repaired: "), "{out}");
    assert!(
        last.ends_with("some data was dropped or is missing, see above)"),
        "{out}"
    );
    assert!(db.join("lost").join(wal.file_name().unwrap()).exists());

    ok(&db, &["check"]);
    let found = (0..5)
        .filter(|i| qkv(&db, &["get", &format!("wal{i}")]).status.success())
        .count();
    assert_eq!(found, 4);
    assert_eq!(ok(&db, &["get", "wal0"]), "value0\n");
}

/// `repair` of a database with keyspaces that lost every manifest: each
/// keyspace's data comes back in its own keyspace, listed, the ones whose
/// name was lost as `ADOPTED`.
#[test]
fn repair_keeps_keyspaces_apart() {
    let (_d, db) = new_db();
    {
        let d = quietkv::Db::open(&db, quietkv::Options::default()).unwrap();
        let a = d
            .keyspace("a", quietkv::KeyspaceOptions::default())
            .unwrap();
        d.put(b"k", b"default").unwrap();
        a.put(b"k", b"in a").unwrap();
        a.flush().unwrap();
        a.put(b"wal", b"in a").unwrap();
        drop(a);
        d.close().unwrap();
    }
    // With its manifest, the keyspace keeps its name.
    fs::remove_file(db.join("CURRENT")).unwrap();
    let out = ok(&db, &["repair"]);
    assert!(out.contains("\nkeyspace 1 \"a\": 2 tables\n"), "{out}");
    assert!(out.ends_with("nothing was dropped)\n"), "{out}");
    // Without any, it is adopted under a name that says so.
    for e in fs::read_dir(&db).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("MANIFEST-")
        {
            fs::remove_file(p).unwrap();
        }
    }
    let out = ok(&db, &["repair"]);
    assert!(
        out.contains("\nADOPTED keyspace 1 \"recovered-1\": 1 tables\n"),
        "{out}"
    );
    assert_eq!(ok(&db, &["get", "k"]), "default\n");
    let d = quietkv::Db::open(&db, quietkv::Options::default()).unwrap();
    let a = d
        .keyspace("recovered-1", quietkv::KeyspaceOptions::default())
        .unwrap();
    assert_eq!(a.get(b"k").unwrap(), Some(b"in a".to_vec()));
    assert_eq!(a.get(b"wal").unwrap(), Some(b"in a".to_vec()));
    assert_eq!(d.get(b"wal").unwrap(), None);
}

#[test]
fn check_refuses_a_database_in_use_unless_forced() {
    let (_d, db) = new_db();
    ok(&db, &["put", "a", "1"]);
    let open = quietkv::Db::open(&db, quietkv::Options::default()).unwrap();
    let o = qkv(&db, &["check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("in use"), "{}", stderr(&o));
    let o = qkv(&db, &["check", "--force"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("warning"));
    // The other commands report Busy as a user error.
    let o = qkv(&db, &["get", "a"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    drop(open);
    ok(&db, &["check"]);
}

#[test]
fn writes_refuse_a_database_that_lost_current() {
    let (_d, db) = new_db();
    ok(&db, &["put", "a", "1"]);
    ok(&db, &["flush"]);
    fs::remove_file(db.join("CURRENT")).unwrap();
    // Damage (exit 2) for writes and reads alike, naming the manifest that
    // CURRENT can be restored from.
    let manifest = fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("MANIFEST-"))
        .max()
        .unwrap();
    for args in [&["put", "b", "2"][..], &["get", "a"]] {
        let o = qkv(&db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("CURRENT is missing"), "{err}");
        assert!(err.contains(&manifest), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(files(&db, "sst").len(), 1, "the table must survive");
    // check reports it as damage.
    let o = qkv(&db, &["check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("CURRENT is missing"), "{}", stdout(&o));
    assert!(stdout(&o).contains(&manifest), "{}", stdout(&o));
}

#[test]
fn check_and_get_catch_an_older_table_copied_over_a_newer_one() {
    let (_d, db) = new_db();
    // Two tables of identical size: same keys, same-length values.
    for generation in ["a", "b"] {
        let input: String = (0..50)
            .map(|i| format!("key{i:05}\tvalue-{generation}-{i:05}\n"))
            .collect();
        let o = qkv_in(&db, &["load"], Some(input.as_bytes()));
        assert!(o.status.success(), "{}", stderr(&o));
        ok(&db, &["flush"]);
    }
    let t = files(&db, "sst");
    assert_eq!(t.len(), 2, "{t:?}");
    let size = fs::metadata(&t[1]).unwrap().len();
    assert_eq!(fs::metadata(&t[0]).unwrap().len(), size, "test setup");
    fs::copy(&t[0], &t[1]).unwrap();

    let o = qkv(&db, &["check"]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!("DAMAGED {}", t[1].display())),
        "{out}"
    );
    // A read serves an error, not the older value.
    let o = qkv(&db, &["get", "key00003"]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "");
    assert!(stderr(&o).contains("corruption"), "{}", stderr(&o));
}

#[test]
fn put_finishes_a_creation_that_was_cut_short() {
    let (_d, db) = new_db();
    // What a kill before CURRENT leaves: LOCK, an empty first manifest,
    // an empty WAL and the temporary CURRENT.
    fs::create_dir(&db).unwrap();
    for name in ["LOCK", "MANIFEST-000003", "000002.log", "CURRENT.3.tmp"] {
        fs::write(db.join(name), b"").unwrap();
    }
    // A read finds no database (and leaves the directory alone).
    let o = qkv(&db, &["get", "a"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no quietkv database"), "{}", stderr(&o));
    assert!(db.join("CURRENT.3.tmp").exists());
    let o = qkv(&db, &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // A write creates the database.
    ok(&db, &["put", "a", "1"]);
    assert_eq!(ok(&db, &["get", "a"]), "1\n");
    assert!(!db.join("CURRENT.3.tmp").exists());
    ok(&db, &["check"]);
}

/// Issue 11: `load --sync --batch 50` of 1,000 keys (all acked), then one
/// flipped byte in the WAL (byte 7 used to leave an empty database with
/// `check` at exit 0), a truncated or a deleted WAL: `check` and `get` must
/// report damage (exit 2), never answer from a database that lost writes.
#[test]
fn damaged_truncated_or_deleted_wal_is_reported_not_dropped() {
    let input = lines(1000);
    let cases: [(&str, Damage); 4] = [
        ("flip byte 7", |w| flip(w, 7)),
        ("flip in record 10", |w| {
            let len = fs::metadata(w).unwrap().len();
            flip(w, len / 2)
        }),
        ("truncate", |w| {
            let len = fs::metadata(w).unwrap().len();
            fs::OpenOptions::new()
                .write(true)
                .open(w)
                .unwrap()
                .set_len(len / 3)
                .unwrap()
        }),
        ("delete", |w| fs::remove_file(w).unwrap()),
    ];
    for (what, damage) in cases {
        let (_d, db) = new_db();
        let o = qkv_in(
            &db,
            &["load", "--sync", "--batch", "50"],
            Some(input.as_bytes()),
        );
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        assert_eq!(
            stdout(&o)
                .lines()
                .filter(|l| l.starts_with("acked"))
                .count(),
            20
        );
        let wal = files(&db, "log")
            .into_iter()
            .max_by_key(|p| fs::metadata(p).unwrap().len())
            .unwrap();
        damage(&wal);
        // Both the check and a read find the damage (exit 2).
        let finds_damage = |args: &[&str]| {
            let o = qkv(&db, args);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{what}: {}{}",
                stdout(&o),
                stderr(&o)
            );
            o
        };
        finds_damage(&["check"]);
        let o = finds_damage(&["get", "key00000"]);
        assert!(stderr(&o).contains("corruption"), "{what}: {}", stderr(&o));
    }
}

/// Issue 11: a deleted manifest, CURRENT naming a missing manifest and a
/// binary CURRENT are damage (exit 2, one line), not "I/O error" (exit 1).
#[test]
fn lost_or_garbled_manifest_state_is_damage() {
    let cases: [(&str, Damage); 3] = [
        ("manifest deleted", |db| {
            for m in fs::read_dir(db).unwrap() {
                let p = m.unwrap().path();
                if p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("MANIFEST-")
                {
                    fs::remove_file(p).unwrap();
                }
            }
        }),
        ("CURRENT names a missing manifest", |db| {
            fs::write(db.join("CURRENT"), "MANIFEST-999999\n").unwrap()
        }),
        ("binary CURRENT", |db| {
            fs::write(db.join("CURRENT"), [0xff, 0xfe, 0x00, 0x81]).unwrap()
        }),
    ];
    for (what, damage) in cases {
        let (_d, db) = new_db();
        ok(&db, &["put", "a", "1"]);
        ok(&db, &["flush"]);
        damage(&db);
        for args in [&["get", "a"][..], &["scan"], &["check"]] {
            let o = qkv(&db, args);
            assert_eq!(o.status.code(), Some(2), "{what} {args:?}: {}", stderr(&o));
            let err = stderr(&o);
            if args[0] != "check" {
                assert_eq!(err.lines().count(), 1, "{what}: {err}");
                assert!(err.starts_with("quietkv: corruption"), "{what}: {err}");
            }
        }
    }
}

/// Issue 11: a key over the size limit in `load` used to fail the whole
/// batch, silently dropping the lines before it; now they are written and
/// acked, and the error names the line.
#[test]
fn load_with_an_oversized_key_keeps_the_lines_before_it() {
    let (_d, db) = new_db();
    let big = "k".repeat(70_000);
    let input = format!("a\t1\nb\t2\n{big}\tv\nc\t3\n");
    let o = qkv_in(
        &db,
        &["load", "--sync", "--batch", "10"],
        Some(input.as_bytes()),
    );
    let err = assert_load_stopped_at_line_3(&o, &db);
    assert!(err.contains("2 entries before it were loaded"), "{err}");
}

/// Issue 11: reads go through `Db::open_read_only`, so they leave the
/// directory exactly as they found it and work on a read-only mount.
#[test]
fn reads_write_nothing_and_work_on_a_read_only_mount() {
    let (d, db) = new_db();
    let o = qkv_in(&db, &["load"], Some(lines(300).as_bytes()));
    assert!(o.status.success(), "{}", stderr(&o));
    ok(&db, &["flush"]);
    ok(&db, &["put", "walonly", "v"]);
    let before = file_states(&db);
    assert_eq!(ok(&db, &["get", "walonly"]), "v\n");
    assert_eq!(ok(&db, &["scan"]).lines().count(), 301);
    ok(&db, &["stats"]);
    assert_eq!(
        file_states(&db),
        before,
        "a read command changed the directory"
    );

    if quietio::sys::effective_uid() != 0 {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        return;
    }
    let ro = d.path().join("ro");
    fs::create_dir_all(&ro).unwrap();
    let _guard = ro_mount::RoBindMount::new(&db, &ro);
    assert_eq!(ok(&ro, &["get", "key00007"]), "value 7\n");
    assert_eq!(ok(&ro, &["scan", "--limit", "2"]).lines().count(), 2);
    let o = qkv(&ro, &["put", "x", "y"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

/// Runs a command that takes no --db and expects success; returns stdout.
fn ok_without_db(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

#[test]
fn checkpoint_backup_restore_and_verify_round_trip() {
    let d = tmp();
    let db = d.path().join("db");
    let load = qkv_in(
        &db,
        &["load", "--batch", "100"],
        Some(lines(3000).as_bytes()),
    );
    assert!(load.status.success(), "{}", stderr(&load));
    ok(&db, &["flush"]);
    ok(&db, &["put", "late", "in the memtable"]);

    let ck = d.path().join("ck");
    let out = ok(&db, &["checkpoint", ck.to_str().unwrap()]);
    assert!(out.starts_with("checkpoint "), "{out}");
    assert!(out.contains("tables linked"), "{out}");
    assert_eq!(ok(&ck, &["get", "key02999"]), "value 2999\n");
    assert_eq!(ok(&ck, &["get", "late"]), "in the memtable\n");
    assert!(ok(&ck, &["check"]).contains("ok"));
    // The target must be new or empty: exit 1, one line.
    let o = qkv(&db, &["checkpoint", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));

    let copied = d.path().join("copied");
    let out = ok(&db, &["checkpoint", "--copy", copied.to_str().unwrap()]);
    assert!(out.contains(" 0 tables linked"), "{out}");

    let bk = d.path().join("bk");
    let out = ok(&db, &["backup", bk.to_str().unwrap()]);
    assert!(out.starts_with("backup point 1 "), "{out}");
    let out = ok(&db, &["backup", bk.to_str().unwrap()]);
    assert!(
        out.contains(" 0 tables copied (0 bytes)"),
        "nothing new to copy: {out}"
    );
    let out = ok_without_db(&["verify-backup", bk.to_str().unwrap()]);
    assert!(out.contains("ok: 2 backup points verified"), "{out}");

    let restored = d.path().join("restored");
    let out = ok_without_db(&["restore", bk.to_str().unwrap(), restored.to_str().unwrap()]);
    assert!(out.starts_with("restored point 2 "), "{out}");
    assert_eq!(ok(&restored, &["get", "late"]), "in the memtable\n");
    assert!(ok(&restored, &["check"]).contains("ok"));

    // Damage in a stored table: verify and restore exit 2.
    let stored = files(&bk.join("tables"), "sst");
    flip(&stored[0], 20);
    let o = Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .args(["verify-backup", bk.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .args(["restore", bk.to_str().unwrap()])
        .arg(d.path().join("again"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("checksum"), "{}", stderr(&o));
    assert!(!d.path().join("again").exists());
}

#[test]
fn copies_to_relative_names_land_in_the_working_directory() {
    let d = tmp();
    ok(&d.path().join("db"), &["put", "k", "v"]);
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_quietkv"))
            .current_dir(d.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
    };
    run(&["--db", "db", "checkpoint", "ck"]);
    run(&["--db", "db", "backup", "bk"]);
    run(&["restore", "bk", "restored"]);
    for dir in ["ck", "restored"] {
        assert_eq!(ok(&d.path().join(dir), &["get", "k"]), "v\n", "{dir}");
    }
}
