//! A tiny `quietkv bench --experiment E4` run on the scratch directory's
//! file system and on a loop-mounted xfs image: the report's structure (not
//! its numbers), and nothing left mounted, attached or on disk.

mod common;

#[path = "../../quietio/tests/support/skip.rs"]
mod skip;

#[test]
fn e4_tiny_run_reports_every_mode_and_removes_the_xfs_image() {
    if quietio::sys::effective_uid() != 0 {
        skip::skip("mounting an xfs image needs root");
        return;
    }
    if std::process::Command::new("mkfs.xfs")
        .arg("-V")
        .output()
        .is_err()
    {
        skip::skip("mkfs.xfs is missing (apt-get install xfsprogs)");
        return;
    }
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let scratch = tmp.path().join("scratch");
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&scratch).unwrap();
    let modes = [
        "ext4/buffered/per-write/none",
        "ext4/direct/periodic:10/lz4",
        "xfs/buffered/per-write/none",
        // The seed's case: the WAL written through a mapping on xfs.
        "xfs/mmap/group/lz4",
    ];
    let (res, pid) = common::run_bench(
        &[
            "--experiment",
            "E4",
            "--modes",
            &modes.join(","),
            "--duration",
            "1",
            "--writers",
            "3",
        ],
        &scratch,
        &out,
    );
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(stdout.contains("## E4: WAL modes"), "{stdout}");
    assert!(stdout.contains("xfs / ext4 writes/s"), "{stdout}");

    let j = common::report_json(&out);
    let e = &j["experiments"][0];
    assert_eq!(e["id"], "E4");
    assert_eq!(e["params"]["writers"], 3);
    assert_eq!(e["params"]["value_size"], 818);
    let ms = e["modes"].as_array().unwrap();
    assert_eq!(ms.len(), modes.len());
    for (m, name) in ms.iter().zip(modes) {
        assert_eq!(m["name"], name);
        let parts: Vec<&str> = name.split('/').collect();
        assert_eq!(m["wal_mode"], parts[1]);
        assert_eq!(m["sync"], parts[2]);
        assert_eq!(m["compression"], parts[3]);
        assert_eq!(m["runs"], 1);
        assert!(m["writes_per_s"]["median"].as_f64().unwrap() > 0.0, "{m}");
        let run = &m["repeats"][0];
        assert!(
            run["write_latency_us"]["p99"].as_f64().unwrap() > 0.0,
            "{run}"
        );
        for k in ["cpu_user_s", "cpu_sys_s", "writes", "seconds"] {
            assert!(run[k].is_number(), "{k}: {run}");
        }
        assert!(run["device"]["bytes_per_user_byte"].is_number(), "{run}");
    }
    assert_eq!(ms[2]["fs"], "xfs");
    assert_eq!(ms[2]["repeats"][0]["filesystem"], "xfs");
    // The one mode run on both file systems gets its ratio.
    let ratios = e["xfs_over_ext4"].as_array().unwrap();
    assert_eq!(ratios.len(), 1, "{ratios:?}");
    assert_eq!(ratios[0]["mode"], "buffered/per-write/none");
    assert!(ratios[0]["ratio"].as_f64().unwrap() > 0.0);

    // Nothing left: no mount, no loop device, no image, no scratch files.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!mounts.contains("e4-xfs"), "{mounts}");
    let loops = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&loops.stdout).contains(&*scratch.to_string_lossy()),
        "a loop device is left"
    );
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().flatten().collect();
    assert!(left.is_empty(), "scratch left behind: {left:?}");
    common::assert_no_cgroups_left(pid);
}
