//! `quietkv doctor` on the real file systems of this machine.

use std::process::Command;

fn doctor(dir: &std::path::Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .arg("doctor")
        .arg(dir)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn json_has_the_documented_keys_and_an_honest_self_test() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (code, out, err) = doctor(d.path(), &["--json", "--size", "8"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for k in [
        "dir",
        "filesystem",
        "kernel",
        "direct",
        "dontcache",
        "auto",
        "selftest",
    ] {
        assert!(v.get(k).is_some(), "missing key {k}: {out}");
    }
    for k in ["supported", "reason", "mem_align", "offset_align"] {
        assert!(v["direct"].get(k).is_some(), "missing direct.{k}");
    }
    for c in [
        "UserRead",
        "CompactionRead",
        "CompactionWrite",
        "FlushWrite",
        "WalWrite",
        "Manifest",
    ] {
        assert!(v["auto"][c].is_string(), "missing auto.{c}");
    }
    let tests = v["selftest"].as_array().unwrap();
    assert!(!tests.is_empty());
    for t in tests {
        for k in [
            "mode",
            "write_mib_s",
            "read_mib_s",
            "resident_after_write",
            "resident_after_read",
        ] {
            assert!(t.get(k).is_some(), "selftest entry lacks {k}: {t}");
        }
        let mode = t["mode"].as_str().unwrap();
        let (w, r) = (
            t["resident_after_write"].as_f64().unwrap(),
            t["resident_after_read"].as_f64().unwrap(),
        );
        assert!((0.0..=1.0).contains(&w) && (0.0..=1.0).contains(&r));
        match mode {
            "direct" | "dontcache" => {
                assert!(w < 0.05 && r < 0.05, "{mode} left pages cached: {t}")
            }
            "buffered" => assert!(w > 0.9 && r > 0.9, "buffered should stay cached: {t}"),
            _ => {}
        }
    }
    if v["filesystem"] == "ext4" {
        assert_eq!(v["direct"]["supported"], true);
        assert_eq!(v["auto"]["CompactionWrite"], "direct");
    }
    // The engine of direct files and the device beside the modes.
    let engine = v["io"]["engine"].as_str().unwrap();
    assert!(engine == "uring" || engine == "sync", "{out}");
    let depth = v["io"]["depth"].as_u64().unwrap();
    assert_eq!(depth, if engine == "uring" { 4 } else { 1 }, "{out}");
    if v["direct"]["supported"] == true {
        let refs = v["device_reference"].as_array().unwrap();
        let depths: Vec<u64> = refs.iter().map(|r| r["depth"].as_u64().unwrap()).collect();
        let want: Vec<u64> = if depth > 1 { vec![1, depth] } else { vec![1] };
        assert_eq!(depths, want, "{out}");
        for r in refs {
            for k in ["write_mib_s", "read_mib_s"] {
                assert!(r[k].as_f64().unwrap() > 0.0, "device_reference {k}: {r}");
            }
        }
    }
    // A WAL self-test beside every mode's file self-test: synced appends,
    // timed one by one, leaving a file of exactly the bytes appended (a
    // direct WAL's padding is cut when it is finished).
    // The mmap WAL (no file self-test) comes last, where fallocate works.
    let wal = v["wal_selftest"].as_array().unwrap();
    let wal_modes: Vec<&str> = wal.iter().map(|w| w["mode"].as_str().unwrap()).collect();
    let mut file_modes: Vec<&str> = tests.iter().map(|t| t["mode"].as_str().unwrap()).collect();
    if v["fallocate"]["supported"] == true {
        file_modes.push("mmap");
    }
    assert_eq!(wal_modes, file_modes, "{out}");
    // Which WAL modes the directory takes, with the reason for those it
    // does not; mmap's depends on fallocate.
    let support = v["wal_modes"].as_array().unwrap();
    let names: Vec<&str> = support
        .iter()
        .map(|w| w["mode"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["buffered", "direct", "dontcache", "fadvise", "mmap"]
    );
    for w in support {
        assert_eq!(w["supported"] == true, w["reason"].is_null(), "{w}");
    }
    assert_eq!(
        support[4]["supported"], v["fallocate"]["supported"],
        "{out}"
    );
    assert_eq!(
        support[1]["supported"], v["direct"]["writes_supported"],
        "{out}"
    );
    for w in wal {
        assert_eq!(w["appends"], 200, "{w}");
        assert_eq!(w["record_bytes"], 1024, "{w}");
        assert!(w["syncs_per_s"].as_f64().unwrap() > 0.0, "{w}");
        let (p50, p99, max) = (
            w["p50_us"].as_f64().unwrap(),
            w["p99_us"].as_f64().unwrap(),
            w["max_us"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{w}");
        assert_eq!(w["file_bytes_per_record_byte"], 1.0, "{w}");
    }
    // The self-test cleans up after itself.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn forced_sync_engine_is_reported_with_one_request_in_flight() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (code, out, err) = doctor(
        d.path(),
        &[
            "--json",
            "--size",
            "2",
            "--io-engine",
            "sync",
            "--io-depth",
            "8",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["io"]["engine"], "sync");
    assert_eq!(v["io"]["depth"], 1);
    if v["direct"]["supported"] == true {
        let refs = v["device_reference"].as_array().unwrap();
        assert_eq!(refs.len(), 1, "{out}");
        assert_eq!(refs[0]["depth"], 1);
    }
    let (code, human, _) = doctor(d.path(), &["--size", "2", "--io-engine", "sync"]);
    assert_eq!(code, 0);
    assert!(
        human.contains("sync engine, 1 request in flight"),
        "{human}"
    );
    let (code, _, err) = doctor(d.path(), &["--io-depth", "0"]);
    assert_eq!(code, 1);
    assert!(err.contains("io_depth"), "{err}");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn tmpfs_is_explained_and_still_exits_zero() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let d = tempfile::tempdir_in(shm).unwrap();
    let (code, out, _) = doctor(d.path(), &["--json", "--size", "2"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["filesystem"], "tmpfs");
    assert_eq!(v["direct"]["supported"], false);
    assert!(v["direct"]["reason"].as_str().unwrap().contains("tmpfs"));
    assert_eq!(v["dontcache"]["supported"], false);
    assert!(v["dontcache"]["reason"].is_string());
    for c in ["CompactionRead", "CompactionWrite"] {
        assert_eq!(v["auto"][c], "buffered");
    }
    // No direct I/O, so nothing to measure the device with.
    assert_eq!(v["device_reference"].as_array().unwrap().len(), 0);
    let (code, human, _) = doctor(d.path(), &["--size", "2"]);
    assert_eq!(code, 0);
    assert!(human.contains("O_DIRECT        no:"), "{human}");
    assert!(human.contains("RWF_DONTCACHE   no:"), "{human}");
}

#[test]
fn bad_directory_is_a_one_line_error() {
    let (code, _, err) = doctor(std::path::Path::new("/nonexistent/dir"), &[]);
    assert_eq!(code, 1);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/dir"), "{err}");
}
