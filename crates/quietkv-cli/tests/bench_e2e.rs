//! A tiny end-to-end `quietkv bench --experiment E0` run: checks the
//! report's structure (not its numbers) and that no cgroup directory or
//! scratch file is left behind.

mod common;

use std::process::Command;

#[test]
fn e0_tiny_run_writes_a_complete_report_and_cleans_up() {
    let dirs = common::bench_dirs();
    let (res, pid) = common::run_bench(
        &common::args(
            "--experiment E0 --modes buffered,direct --repeats 1 --duration 2 \
             --baseline 1 --warmup 0.5 --hot-mib 8 --bg-file-mib 64 --bg-read-rate 100 \
             --bg-write-rate 100 --read-rate 500 --memory-limit 128",
        ),
        &dirs.scratch,
        &dirs.out,
    );
    let stdout = String::from_utf8_lossy(&res.stdout);
    let stderr = String::from_utf8_lossy(&res.stderr);

    // Progress lines name mode, repeat and phase.
    assert!(stderr.contains("[E0 buffered 1/1]"), "{stderr}");
    assert!(stderr.contains("baseline"), "{stderr}");
    assert!(stderr.contains("ETA"), "{stderr}");
    // The terminal shows the table and where the report is.
    assert!(
        stdout.contains("| Metric | buffered | direct | direct vs buffered |"),
        "{stdout}"
    );
    assert!(stdout.contains("report.md"), "{stdout}");

    let md = common::report_md(&dirs.out);
    common::assert_report_has(
        &md,
        [
            "## E0",
            "Kernel",
            "Cgroup limit",
            "Hot set",
            "Repeats",
            "**p99 read latency**",
            "**p99.9 read latency**",
            "Reads scheduled",
            "Cache hit ratio",
            "**Dirty pages/s**",
            "Stall time",
            "Refaults/s",
            "w_await",
            "aqu-sz",
            "Background (compaction) throughput",
            "CPU user",
            "Reader lateness p99",
            "from a pool of 8 reader threads",
            "## Verdict",
        ],
    );

    let j = common::report_json(&dirs.out);
    assert!(j["machine"]["kernel"].is_string());
    assert!(j["verdict"].as_str().unwrap().len() > 20);
    let e = &j["experiments"][0];
    assert_eq!(e["id"], "E0");
    assert!(e["params"]["hot_bytes"].is_number());
    let modes = e["modes"].as_array().unwrap();
    assert_eq!(modes.len(), 2);
    assert_eq!(modes[0]["name"], "buffered");
    assert_eq!(modes[1]["name"], "direct");
    for m in modes {
        assert_eq!(m["runs"], 1);
        for k in [
            "p50", "p90", "p99", "p999", "p9999", "max", "mean", "stddev",
        ] {
            assert!(
                m["read_latency_us"][k].is_number(),
                "read_latency_us.{k}: {m}"
            );
        }
        assert!(m["reads"]["scheduled"].as_f64().unwrap() > 0.0);
        assert!(m["reads"]["done"].as_f64().unwrap() > 0.0);
        for k in ["p50", "p99", "p999"] {
            assert!(m["baseline_read_latency_us"][k].is_number());
        }
        for k in [
            "dirty_pages_per_s",
            "refaults_per_s",
            "compaction_mib_s",
            "compaction_seconds",
        ] {
            assert!(m[k].is_number(), "{k}");
        }
        // Present, possibly null where this machine cannot measure them.
        for k in [
            "cache_hit_ratio",
            "stall_us_per_s",
            "active_file_bytes",
            "inactive_file_bytes",
        ] {
            assert!(m.get(k).is_some(), "{k}");
        }
        for k in ["r_await_ms", "w_await_ms", "aqu_sz", "util_pct"] {
            assert!(m["device"].get(k).is_some(), "device.{k}");
        }
        assert!(m["cpu"].get("user_s").is_some() && m["cpu"].get("sys_s").is_some());
        assert!(m["reader_lateness_us"]["p99"].is_number(), "{m}");
        assert!(m["same_work"].is_boolean(), "{m}");
        assert!(!m["timeline"].as_array().unwrap().is_empty());
    }
    for png in ["e0-percentiles.png", "e0-p99-over-time.png"] {
        let b = std::fs::read(dirs.out.join(png)).unwrap();
        assert!(b.len() > 1000 && b.starts_with(b"\x89PNG"), "{png}");
    }

    // Nothing left behind: dirs.scratch files and cgroup directories.
    common::assert_nothing_left(&dirs.scratch);
    common::assert_no_cgroups_left(pid);
}

#[test]
fn unknown_experiment_and_mode_are_refused() {
    for (args, says) in [
        (["bench", "--experiment", "E9"], "E9"),
        (["bench", "--modes", "turbo"], "unknown mode"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_quietkv"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}"
        );
    }
}
