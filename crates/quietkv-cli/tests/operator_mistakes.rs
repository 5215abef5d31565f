//! What operators do during an incident, through the command: several
//! processes at one new database, LOCK removed under a running writer,
//! `repair` of a database that lost a table or cannot read one, and the
//! messages a tmpfs or a full disk gives.

#[path = "../../quietio/tests/support/skip.rs"]
mod skip;

mod common;

use common::files;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn qkv(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Six processes `put` into a directory that holds no database yet, many
/// times over: each exits 0 or says the database is busy (exit 1), never
/// that it is damaged; every acknowledged key is there.
#[test]
fn six_processes_creating_one_database() {
    for round in 0..20 {
        let w = tmp();
        let d = w.path().join("db");
        let children: Vec<_> = (0..6)
            .map(|i| {
                Command::new(env!("CARGO_BIN_EXE_quietkv"))
                    .arg("--db")
                    .arg(&d)
                    .args(["put", &format!("p{i}"), "v"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut wrote = Vec::new();
        for (i, c) in children.into_iter().enumerate() {
            let o = c.wait_with_output().unwrap();
            match o.status.code() {
                Some(0) => wrote.push(i),
                Some(1) if text(&o.stderr).contains("in use") => {}
                other => panic!(
                    "round {round}, process {i}: exit {other:?}: {}",
                    text(&o.stderr)
                ),
            }
        }
        assert!(!wrote.is_empty(), "round {round}");
        for i in wrote {
            let o = qkv(&d, &["get", &format!("p{i}")]);
            assert_eq!(text(&o.stdout), "v\n", "round {round}: {}", text(&o.stderr));
        }
    }
}

/// LOCK removed while `load --sync` runs: a second process's `put` and
/// `compact` are refused as busy, and every acknowledged line stays.
#[test]
fn removing_lock_under_a_writer_lets_no_second_writer_in() {
    let w = tmp();
    let d = w.path().join("db");
    let mut load = Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .arg("--db")
        .arg(&d)
        .args(["load", "--sync", "--batch", "100"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = load.stdin.take().unwrap();
    let mut acks = BufReader::new(load.stdout.take().unwrap()).lines();
    let line = |i: u32| format!("key{i:06}\tvalue {i}\n");
    for i in 0..1000 {
        stdin.write_all(line(i).as_bytes()).unwrap();
    }
    stdin.flush().unwrap();
    // Wait until the writer has acknowledged what it was given.
    loop {
        let ack = acks.next().expect("load ended early").unwrap();
        if ack == "acked 1000" {
            break;
        }
    }
    fs::remove_file(d.join("LOCK")).unwrap();
    for args in [&["put", "intruder", "x"][..], &["compact"][..]] {
        let o = qkv(&d, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains("in use"), "{}", text(&o.stderr));
    }
    for i in 1000..30_000 {
        stdin.write_all(line(i).as_bytes()).unwrap();
    }
    drop(stdin);
    let rest: Vec<String> = acks.map(Result::unwrap).collect();
    let status = load.wait().unwrap();
    assert!(status.success(), "{status:?}: {:?}", rest.last());
    assert!(rest.iter().any(|l| l == "acked 30000"), "{:?}", rest.last());
    let o = qkv(&d, &["scan"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).lines().count(), 30_000);
    assert_eq!(qkv(&d, &["get", "intruder"]).status.code(), Some(1));
    assert!(qkv(&d, &["check"]).status.success());
}

#[test]
fn check_of_an_empty_directory_leaves_nothing_behind() {
    let w = tmp();
    let o = qkv(w.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(fs::read_dir(w.path()).unwrap().count(), 0);
}

/// tmpfs cannot do O_DIRECT; `auto` falling back to buffered there is what
/// the user asked for, so commands print no warning about it.
#[test]
fn tmpfs_commands_print_no_fallback_warning() {
    let Some(w) = skip::tmpfs_dir() else {
        return;
    };
    let d = w.path().join("db");
    for args in [&["put", "k", "v"][..], &["get", "k"][..], &["compact"][..]] {
        let o = qkv(&d, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stderr), "", "{args:?}");
    }
    // Asked for, it is said once per process.
    let o = Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .env("QUIETKV_LOG", "info")
        .arg("--db")
        .arg(&d)
        .args(["put", "k2", "v"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(err.matches("auto mode").count(), 1, "{err}");
}

/// A small ext4 file system, loop-mounted, removed however the test ends.
struct SmallExt4 {
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallExt4 {
    fn new() -> Option<SmallExt4> {
        let dir = tmp();
        let img = dir.path().join("fs.img");
        let mount = dir.path().join("mnt");
        fs::create_dir(&mount).unwrap();
        fs::File::create(&img).unwrap().set_len(16 << 20).unwrap();
        let run = |cmd: &str, args: &[&str]| {
            Command::new(cmd)
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !run("mkfs.ext4", &["-q", "-F", img.to_str().unwrap()]) {
            return None;
        }
        if !run(
            "mount",
            &["-o", "loop", img.to_str().unwrap(), mount.to_str().unwrap()],
        ) {
            return None;
        }
        Some(SmallExt4 { mount, _dir: dir })
    }
}

impl Drop for SmallExt4 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}

/// On a full disk the error says so, without first blaming O_DIRECT.
#[test]
fn a_full_disk_is_reported_as_a_full_disk() {
    let Some(small) = SmallExt4::new() else {
        skip::skip("cannot make and loop-mount an ext4 image here (mkfs.ext4, root)");
        return;
    };
    let d = small.mount.join("db");
    fs::create_dir(&d).unwrap();
    // Fill it.
    let mut filler = fs::File::create(small.mount.join("filler")).unwrap();
    let chunk = vec![7u8; 1 << 20];
    while filler.write_all(&chunk).is_ok() {}
    let _ = filler.sync_all();
    while filler.write_all(&chunk[..4096]).is_ok() {}
    let _ = filler.sync_all();
    let o = qkv(&d, &["put", "k", "v"]);
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("No space left") || err.contains("full"),
        "{err}"
    );
    assert!(!err.contains("O_DIRECT"), "{err}");
    assert!(!err.starts_with("warn"), "{err}");
}

/// `repair` of a database whose table was removed by hand says which keys
/// that loses and what it can bring back, never "nothing was dropped".
#[test]
fn repair_reports_a_missing_table() {
    let w = tmp();
    let d = w.path().join("db");
    // One table of 20 keys, then one holding the delete: two tables stay
    // under the level-0 compaction trigger, so no background compaction can
    // merge the delete away (with one table per key, one sometimes did).
    let input = w.path().join("keys.tsv");
    let lines: String = (0..20).map(|i| format!("k{i:02}\told\n")).collect();
    fs::write(&input, lines).unwrap();
    assert!(qkv(&d, &["load", input.to_str().unwrap()]).status.success());
    assert!(qkv(&d, &["flush"]).status.success());
    assert!(qkv(&d, &["delete", "k03"]).status.success());
    assert!(qkv(&d, &["flush"]).status.success());
    let tables = files(&d, "sst");
    assert_eq!(tables.len(), 2, "{tables:?}");
    // The newer of the two holds the delete.
    let newest = tables.last().unwrap();
    fs::remove_file(newest).unwrap();
    let o = qkv(&d, &["repair"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(out.contains("MISSING"), "{out}");
    assert!(out.contains("may reappear"), "{out}");
    assert!(!out.contains("nothing was dropped"), "{out}");
    assert!(out.contains("some data was dropped or is missing"), "{out}");
}

/// A table repair cannot read at all (here: a directory where the table
/// should be) is not damage: repair stops, says so and changes nothing.
#[test]
fn repair_stops_at_a_table_it_cannot_read() {
    let w = tmp();
    let d = w.path().join("db");
    for i in 0..20 {
        assert!(qkv(&d, &["put", &format!("k{i:02}"), "v"]).status.success());
    }
    assert!(qkv(&d, &["flush"]).status.success());
    let table = files(&d, "sst").pop().unwrap();
    let saved = w.path().join("saved.sst");
    fs::rename(&table, &saved).unwrap();
    fs::create_dir(&table).unwrap();
    let before: Vec<_> = fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let o = qkv(&d, &["repair"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(
        err.contains("repair stopped before changing anything"),
        "{err}"
    );
    assert!(
        err.contains(table.file_name().unwrap().to_str().unwrap()),
        "{err}"
    );
    let mut after: Vec<_> = fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut before = before;
    before.sort();
    after.sort();
    assert_eq!(before, after);
    // With the table back, the database is whole.
    fs::remove_dir(&table).unwrap();
    fs::rename(&saved, &table).unwrap();
    assert!(qkv(&d, &["check"]).status.success());
}
