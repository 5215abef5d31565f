//! Tiny end-to-end runs of `quietkv bench --experiment standard`: quietkv
//! alone, and quietkv beside fjall when the `fjall` feature is built. They
//! check the report's structure (every workload's section, every figure
//! present and positive where it must be, the ratio columns), not speed.

mod common;

use std::path::Path;

// Every workload a run reports, in order: the benchmark's own list, so that
// a workload added there is checked here too.
use quietkv_bench::experiments::standard::WORKLOADS;

/// Workloads that write (write amplification reported).
const WRITERS: [&str; 9] = [
    "fillseq",
    "fillrandom",
    "overwrite",
    "ycsb-load",
    "ycsb-a",
    "ycsb-b",
    "ycsb-f",
    "ycsb-d",
    "ycsb-e",
];

fn tiny_standard(
    engines: &str,
    extra: &[&str],
    dir: &Path,
    out: &Path,
) -> (String, serde_json::Value) {
    let mut args = vec![
        "--experiment",
        "standard",
        "--engines",
        engines,
        "--keys",
        "3000",
        "--value-size",
        "100,400",
        "--duration",
        "0.2",
    ];
    args.extend_from_slice(extra);
    let (_, pid) = common::run_bench(&args, dir, out);
    // The memory cgroups of the runs are gone.
    common::assert_no_cgroups_left(pid);
    let md = common::report_md(out);
    let j = common::report_json(out);
    // Each run ran in a process of its own, none in the bench's.
    let mut pids: Vec<u64> = j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["process_id"].as_u64().unwrap())
        .collect();
    assert!(!pids.contains(&u64::from(pid)), "{pids:?}");
    let runs = pids.len();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), runs, "a process ran two runs");
    (md, j)
}

/// The checks every engine's report passes, for the modes `modes`.
fn check(md: &str, j: &serde_json::Value, modes: &[&str]) {
    assert_eq!(j["experiment"], "standard");
    common::assert_report_has(
        md,
        [
            "# quietkv standard workloads (db_bench, YCSB)",
            "## 100-byte values, 3000 keys",
            "## 400-byte values, 3000 keys",
            "YCSB",
            "memtable (write buffer) 64 MiB and block cache 32 MiB",
            "WAL on, no sync per write",
            "CLOCK_PROCESS_CPUTIME_ID",
            "VmHWM",
        ],
    );
    let header = format!("| figure | {} |", modes.join(" | "));
    assert!(md.contains(&header), "{header}:\n{md}");
    for w in WORKLOADS {
        assert!(
            md.contains(&format!("### {w}\n")),
            "no section for {w}:\n{md}"
        );
    }
    let sections = j["sections"].as_array().unwrap();
    assert_eq!(sections.len(), 2);
    // YCSB runs once, in the first value size's section.
    assert!(sections[0]["ycsb_records"].as_u64().unwrap() >= 100);
    assert_eq!(sections[1]["ycsb_records"], 0);
    for (si, s) in sections.iter().enumerate() {
        let ws = s["workloads"].as_array().unwrap();
        let names: Vec<&str> = ws.iter().map(|w| w["workload"].as_str().unwrap()).collect();
        let want: Vec<&str> = if si == 0 {
            WORKLOADS.to_vec()
        } else {
            WORKLOADS[..11].to_vec()
        };
        assert_eq!(names, want);
        for w in ws {
            let name = w["workload"].as_str().unwrap();
            for m in modes {
                let f = &w["figures"][m];
                let pos = |k: &str| {
                    let v = f[k]["median"].as_f64();
                    assert!(v.is_some_and(|v| v > 0.0), "{name} {m} {k}: {f}");
                };
                pos("ops_s");
                pos("cpu_us_per_op");
                if name.starts_with("readseq") || name.starts_with("readreverse") {
                    assert!(f["p50_us"].is_null(), "{name}: {f}");
                } else {
                    pos("p50_us");
                    pos("p99_us");
                    pos("p999_us");
                }
                if WRITERS.contains(&name) {
                    // The device may not have been written yet at this
                    // size (dirty pages), but the figure is there.
                    assert!(f["write_amp"]["median"].is_number(), "{name} {m}: {f}");
                } else {
                    assert!(f["write_amp"].is_null(), "{name} {m}: {f}");
                }
                if ["fillseq", "fillrandom", "ycsb-load"].contains(&name) {
                    pos("space_amp");
                }
                if name == "readwhilewriting" {
                    pos("side_writes");
                }
                pos("peak_rss_mib");
                // Device reads may be none at this size (all cached), but
                // the figure is there; so is the cgroup's page cache.
                assert!(
                    f["device_read_kib_per_op"]["median"].is_number(),
                    "{name} {m}: {f}"
                );
                assert!(f["page_cache_mib"]["median"].is_number(), "{name} {m}: {f}");
                assert!(f["rss_growth_mib"]["median"].is_number(), "{name} {m}: {f}");
            }
        }
    }
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * modes.len());
}

#[test]
fn standard_tiny_run_reports_every_workload_for_quietkv() {
    let dirs = common::bench_dirs();
    // In a memory cgroup, as the full scale runs.
    let (md, j) = tiny_standard(
        "quietkv",
        &["--memory-limit", "256"],
        &dirs.scratch,
        &dirs.out,
    );
    check(&md, &j, &["auto"]);
    assert!(md.contains("each run in a 256 MiB memory cgroup"), "{md}");
    assert_eq!(j["sections"][0]["memory_limit_bytes"], 256u64 << 20);
    // One engine: no ratio columns.
    assert!(md.contains("| figure | auto |\n"), "{md}");
    common::assert_nothing_left(&dirs.scratch);
}

/// quietkv with its keys spread over four keyspaces by key range runs
/// every workload (each read checked against what was written, scans and
/// seeks going on from one keyspace into the next) beside the default
/// keyspace alone, and the report says what each keyspace got.
#[test]
fn standard_tiny_run_spreads_quietkv_over_four_keyspaces() {
    let dirs = common::bench_dirs();
    let (md, j) = tiny_standard(
        "quietkv",
        &["--modes", "auto,auto+ks=4"],
        &dirs.scratch,
        &dirs.out,
    );
    check(&md, &j, &["auto", "auto+ks=4"]);
    assert!(md.contains("| figure | auto | auto+ks=4 |\n"), "{md}");
    assert!(
        md.contains("ks=4: 16 MiB each, 64 MiB in all"),
        "the settings say what each keyspace gets:\n{md}"
    );
    common::assert_nothing_left(&dirs.scratch);
}

#[cfg(feature = "fjall")]
#[test]
fn standard_tiny_run_compares_quietkv_with_fjall() {
    let dirs = common::bench_dirs();
    let (md, j) = tiny_standard("quietkv,fjall", &[], &dirs.scratch, &dirs.out);
    assert!(md.contains("no memory limit"), "{md}");
    check(&md, &j, &["quietkv:auto", "fjall:buffered"]);
    assert!(
        md.contains("| figure | quietkv:auto | fjall:buffered | quietkv:auto / fjall:buffered |"),
        "{md}"
    );
    assert!(
        md.contains("fjall (fjall 3.1): no page-cache control"),
        "{md}"
    );
}
