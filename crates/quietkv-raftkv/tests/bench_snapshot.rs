//! `quietkv-raftkv bench-snapshot --quick` end to end, at a tiny scale: it
//! fills a source, runs both modes with the leader in a memory cgroup and
//! a joiner receiving the full snapshot, and writes a report that holds
//! both modes with plausible figures, the snapshot held to the leader's
//! send budget, and what the machine did in each phase. Needs root
//! (cgroups, drop_caches).

use std::process::Command;
use std::time::{Duration, Instant};

/// Generous: the machine running the tests may be busy.
const LIMIT: Duration = Duration::from_secs(600);

/// The leader's snapshot send budget: slow enough that the quick
/// snapshot (about 8 MiB) takes seconds, where unpaced it takes less than
/// one on loopback.
const BUDGET_MIB_PER_SEC: u64 = 4;

fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn the_quick_harness_reports_both_modes() {
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run this test, but it is not root"
        );
        eprintln!("skipping: bench-snapshot needs root for its memory cgroup");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    let mut child = Command::new(env!("CARGO_BIN_EXE_quietkv-raftkv"))
        .args(["bench-snapshot", "--quick", "--dir"])
        .arg(tmp.path().join("work"))
        .arg("--out")
        .arg(&out)
        .args(["--send-mib-per-sec", &BUDGET_MIB_PER_SEC.to_string()])
        // A smoke test on a machine that may be busy: a disturbed run is
        // noted, not run again.
        .arg("--keep-disturbed")
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bench-snapshot --quick did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "bench-snapshot --quick: {status}");

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    let modes: Vec<&str> = runs.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["buffered", "backup"], "{report:#}");
    for run in runs {
        let mode = run["mode"].as_str().unwrap();
        for phase in ["baseline", "stream"] {
            let reads = &run[phase]["reads"];
            assert!(
                reads["done"].as_u64().unwrap() > 0,
                "{mode} {phase}: {run:#}"
            );
            assert_eq!(reads["errors"].as_u64(), Some(0), "{mode} {phase}: {run:#}");
            let p50 = reads["latency"]["p50"].as_f64().unwrap();
            let p999 = reads["latency"]["p999"].as_f64().unwrap();
            assert!(p50 > 0.0 && p50 <= p999, "{mode} {phase}: {run:#}");
            assert!(run[phase]["psi_some_ms"].as_f64().unwrap() >= 0.0);
            // The host's steal and other processes' CPU were read.
            let host = &run[phase]["host"];
            assert!(host["steal_ms_per_s"].as_f64().unwrap() >= 0.0, "{run:#}");
            assert!(
                host["other_cpu_ms_per_s"].as_f64().unwrap() >= 0.0,
                "{run:#}"
            );
        }
        assert!(run["disturbed"].is_array(), "{run:#}");
        // The quick database is about 8 MiB of values.
        let bytes = run["snapshot_bytes"].as_u64().unwrap();
        assert!(bytes > 4 << 20 && bytes < 64 << 20, "{mode}: {bytes} bytes");
        // The first chunk goes at once; every byte after it is paid for
        // at the budget's rate before it is sent.
        let chunk = report["setup"]["chunk_bytes"].as_u64().unwrap();
        let paid = bytes.saturating_sub(chunk) as f64 / (BUDGET_MIB_PER_SEC << 20) as f64;
        let secs = run["snapshot_secs"].as_f64().unwrap();
        assert!(
            secs >= paid,
            "{mode}: {bytes} bytes in {secs} s, faster than {BUDGET_MIB_PER_SEC} MiB/s"
        );
        assert!(
            run["leader_transfer_read_bytes"].as_u64().unwrap() >= bytes,
            "the leader read the snapshot through its transfer file: {run:#}"
        );
    }
    assert_eq!(runs[0]["transfer_mode"], "buffered");
    for mode in ["buffered", "backup"] {
        let summary = &report["summary"][mode];
        assert!(
            summary["stream read p99.9 (us)"]["median"]
                .as_f64()
                .unwrap()
                > 0.0,
            "{mode}: {summary:#}"
        );
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| metric | buffered | backup |"), "{md}");
    assert!(
        md.contains("counts among the results here, as asked"),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "held to {BUDGET_MIB_PER_SEC} MiB/s by the leader's send budget"
        )),
        "{md}"
    );
    // Nothing of the runs is left: no node directories, no cgroups.
    let left: Vec<_> = std::fs::read_dir(tmp.path().join("work"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("run-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
