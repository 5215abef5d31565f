//! The report's own tests, on one fixed report: the Markdown tables and
//! lines, `report.json`'s keys, the ratio texts, and the verdict drawn
//! from a section's figures.

use serde_json::json;

use super::json::render_json;
use super::markdown::render_markdown;
use super::model::{stat_of, ExperimentReport, Machine, ModeReport, Report};
use super::table::{compare, Cmp};
use crate::loadgen::LatencySummary;
use crate::metrics::DeviceRates;
use crate::result::{BackgroundWork, PhaseResult, RunResult};
use crate::sampler::PhaseMetrics;

fn run(mode: &str, repeat: u32, p99: f64, dirty: f64, bg_mib: u64) -> RunResult {
    let lat = LatencySummary {
        count: 1000,
        p50: 100.0,
        p90: 200.0,
        p99,
        p999: p99 * 10.0,
        p9999: p99 * 20.0,
        max: p99 * 30.0,
        mean: 150.0,
        stddev: 50.0,
    };
    RunResult {
        mode: mode.into(),
        repeat,
        measured: PhaseResult {
            latency: lat.clone(),
            service: lat.clone(),
            scheduled: 1000,
            done: 1000,
            cache_hit_ratio: Some(0.5),
            kernel: PhaseMetrics {
                seconds: 10.0,
                dirty_pages_per_s: dirty,
                stall_us_per_s: Some(1000.0),
                active_file_bytes: Some((100u64 << 20) as f64),
                inactive_file_bytes: Some((50u64 << 20) as f64),
                device: Some(DeviceRates {
                    r_await_ms: 0.5,
                    w_await_ms: 9.0,
                    aqu_sz: 12.0,
                    util_pct: 99.0,
                    ..Default::default()
                }),
                cpu_user_s: Some(1.0),
                cpu_sys_s: Some(2.0),
                ..Default::default()
            },
            ..Default::default()
        },
        baseline: Some(PhaseResult {
            latency: lat,
            ..Default::default()
        }),
        background: BackgroundWork {
            read_bytes: bg_mib << 20,
            write_bytes: 0,
            seconds: 1.0,
        },
        ..Default::default()
    }
}

fn fixed() -> Report {
    Report {
        machine: Machine {
            hostname: "h".into(),
            kernel: "6.18".into(),
            cpus: 2,
            memory_bytes: 24 << 30,
            filesystem: "ext4".into(),
            device: Some("vda".into()),
            dir: "/x".into(),
        },
        experiments: vec![ExperimentReport {
            id: "E0".into(),
            title: "no-engine reference".into(),
            params: json!({"hot_bytes": 1}),
            header: vec![("cgroup limit".into(), "256 MiB".into())],
            notes: vec!["no PSI cgroup: system-wide".into()],
            modes: vec![
                ModeReport {
                    runs: vec![
                        run("buffered", 1, 16200.0, 42862.0, 400),
                        run("buffered", 2, 15000.0, 40000.0, 400),
                    ],
                    ..ModeReport::new("buffered", None, 0)
                },
                ModeReport {
                    runs: vec![
                        run("direct", 1, 1900.0, 1038.0, 400),
                        run("direct", 2, 1900.0, 1038.0, 400),
                    ],
                    ..ModeReport::new("direct", None, 0)
                },
                ModeReport {
                    runs: vec![run("dontcache", 1, 1800.0, 874.0, 100)],
                    ..ModeReport::new("dontcache", None, 0)
                },
            ],
        }],
    }
}

#[test]
fn verdict_reads_one_e3_section_larger_than_the_cache_from_its_figures() {
    let mut r = fixed();
    let e = &mut r.experiments[0];
    e.id = "E3-hot3072MiB".into();
    e.params =
        json!({"experiment": "E3", "hot_bytes": 3u64 << 30, "memory_limit_bytes": 1u64 << 30});
    e.modes.truncate(2);
    let v = super::verdict::verdict(&r.experiments);
    assert!(
        v.contains("at a 3.0 GiB hot set (3.00x the cgroup limit)"),
        "{v}"
    );
    assert!(
        v.contains("It still helped with a hot set larger than the page cache"),
        "{v}"
    );
    // And the other way round: no gain there.
    for run in &mut r.experiments[0].modes[1].runs {
        run.measured.latency.p99 = 15_600.0;
    }
    let v = super::verdict::verdict(&r.experiments);
    assert!(
        v.contains("Once the hot set outgrows the page cache it stops helping"),
        "{v}"
    );
}

#[test]
fn markdown_has_rows_columns_and_ratios() {
    let md = render_markdown(&fixed());
    assert!(md.contains("| Metric | buffered | direct | dontcache | direct vs buffered | dontcache vs buffered |"), "{md}");
    assert!(md.contains("| **p99 read latency** | 15.60 ms (15.00 ms..16.20 ms) | 1.90 ms (1.90 ms..1.90 ms) | 1.80 ms |"), "{md}");
    assert!(md.contains("8.2x lower"), "{md}");
    assert!(
        md.contains("| **Dirty pages/s** | 41,431 (40,000..42,862) |"),
        "{md}"
    );
    assert!(md.contains("40x reduction"), "{md}");
    assert!(md.contains("Cache hit ratio"));
    assert!(md.contains("w_await"));
    assert!(md.contains("Reads done"));
    assert!(md.contains("p99.9 service time"));
    assert!(md.contains("CPU user"));
    assert!(md.contains("- cgroup limit: 256 MiB"));
    assert!(md.contains("no PSI cgroup"));
    assert!(md.contains("**Not the same work:** dontcache"), "{md}");
}

#[test]
fn a_fixed_job_that_ran_slower_is_not_the_same_work_either() {
    // E1: every mode rewrites the same bytes, so a slower compaction
    // spread them thinner: it did less work per second.
    let mut r = fixed();
    r.experiments[0].params = json!({"experiment": "E1", "throttle_mib_s": 0});
    for run in &mut r.experiments[0].modes[2].runs {
        run.background = BackgroundWork {
            read_bytes: 400 << 20,
            write_bytes: 0,
            seconds: 4.0,
        };
    }
    let md = render_markdown(&r);
    assert!(
        md.contains("**Not the same work:** dontcache did 100 MiB/s"),
        "{md}"
    );
    assert!(md.contains("75% below buffered's 400 MiB/s"), "{md}");
    assert!(md.contains("--throttle 100"), "{md}");
    assert!(!md.contains("**Not the same work:** direct"), "{md}");
    let j = render_json(&r);
    let e = &j["experiments"][0];
    assert_eq!(e["modes"][1]["same_work"], true);
    assert_eq!(e["modes"][2]["same_work"], false);
    let short = &e["same_work_check"]["not_same_work"][0];
    assert_eq!(short["mode"], "dontcache");
    assert!(short["to_compare"]
        .as_str()
        .unwrap()
        .contains("--throttle 100"));
    assert_eq!(e["same_work_check"]["best_same_work"], "direct");
}

#[test]
fn reader_lateness_has_its_rows_and_a_warning_when_late() {
    let mut r = fixed();
    for (i, m) in r.experiments[0].modes.iter_mut().enumerate() {
        for run in &mut m.runs {
            run.measured.lateness = LatencySummary {
                count: 1000,
                p50: 3.0,
                p99: if i == 1 { 4_000.0 } else { 40.0 },
                max: 9_000.0,
                mean: if i == 1 { 300.0 } else { 5.0 },
                ..Default::default()
            };
            run.measured.reader_cpu_wait_us_per_read = (i == 1).then_some(250.0);
        }
    }
    let md = render_markdown(&r);
    assert!(
        md.contains(
            "| Reader lateness p99 | 40 us (40 us..40 us) | 4.00 ms (4.00 ms..4.00 ms) | 40 us |"
        ),
        "{md}"
    );
    assert!(
        md.contains("Reader lateness p50 (scheduled to issued)"),
        "{md}"
    );
    assert!(
        md.contains("**Readers fell behind:** direct: reader lateness p99 4.00 ms"),
        "{md}"
    );
    assert!(!md.contains("**Readers fell behind:** buffered"), "{md}");
    // Whether they waited for a CPU: the run-queue wait beside the
    // mean lateness.
    assert!(
        md.contains(
            "(the readers waited 250 us per read for a CPU against a mean lateness of 300 us)"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "| Reader CPU wait per read (run queue) | n/a | 250 us (250 us..250 us) | n/a |"
        ),
        "{md}"
    );
    let j = render_json(&r);
    assert_eq!(
        j["experiments"][0]["modes"][1]["reader_cpu_wait_us_per_read"],
        250.0
    );
    assert_eq!(
        j["experiments"][0]["modes"][1]["reader_lateness_us"]["p99"],
        4000.0
    );
}

#[test]
fn json_has_the_documented_keys() {
    let j = render_json(&fixed());
    let e = &j["experiments"][0];
    assert_eq!(e["id"], "E0");
    assert_eq!(j["machine"]["kernel"], "6.18");
    let m = &e["modes"][0];
    assert_eq!(m["name"], "buffered");
    assert_eq!(m["runs"], 2);
    for k in [
        "p50", "p90", "p99", "p999", "p9999", "max", "mean", "stddev",
    ] {
        assert!(m["read_latency_us"][k].is_number(), "{k}");
    }
    assert_eq!(m["read_latency_us"]["p99"], 15600.0);
    assert_eq!(
        m["range"]["read_latency_us"]["p99"],
        json!([15000.0, 16200.0])
    );
    assert_eq!(m["reads"]["scheduled"], 1000.0);
    assert_eq!(m["reads"]["done"], 1000.0);
    for k in ["p50", "p99", "p999"] {
        assert!(m["baseline_read_latency_us"][k].is_number());
    }
    for k in [
        "cache_hit_ratio",
        "dirty_pages_per_s",
        "stall_us_per_s",
        "refaults_per_s",
        "active_file_bytes",
        "inactive_file_bytes",
        "compaction_mib_s",
        "compaction_seconds",
    ] {
        assert!(m[k].is_number(), "{k}");
    }
    for k in ["r_await_ms", "w_await_ms", "aqu_sz", "util_pct"] {
        assert!(m["device"][k].is_number(), "{k}");
    }
    assert_eq!(m["cpu"]["user_s"], 1.0);
    assert_eq!(m["cpu"]["sys_s"], 2.0);
    assert_eq!(e["modes"][2]["same_work"], false);
}

#[test]
fn ratio_texts() {
    assert_eq!(compare(16.2, 1.9, Cmp::Lower), "8.5x lower");
    assert_eq!(compare(100.0, 200.0, Cmp::Lower), "2.0x higher");
    assert_eq!(compare(42862.0, 1038.0, Cmp::Reduction), "41x reduction");
    assert_eq!(compare(11.9, 1.52, Cmp::Shallower), "7.8x shallower");
    assert_eq!(compare(31599.0, 21534.0, Cmp::Percent), "-32%");
    assert_eq!(compare(0.161, 0.176, Cmp::Points), "+1.5 pp");
    assert_eq!(compare(1.0, 1.01, Cmp::Lower), "~same");
    assert_eq!(compare(5.0, 0.0, Cmp::Reduction), "to 0 (reduction)");
    assert_eq!(stat_of(vec![3.0, 1.0, 2.0, 10.0]).unwrap().median, 2.5);
}

/// A mode whose worker outgrew the memory limit in every run still has
/// its column, and the report says what became of its runs.
#[test]
fn a_mode_whose_runs_all_failed_is_reported_with_why() {
    let mut r = fixed();
    let e = &mut r.experiments[0];
    e.modes[2].runs.clear();
    e.modes[2].asked = 1;
    e.modes[2].failed.push(super::FailedRun {
        repeat: 1,
        why: "dontcache worker was killed by the kernel's OOM killer".into(),
    });
    let md = render_markdown(&r);
    assert!(
        md.contains("**Failed runs:** dontcache: 1 run(s) failed (run 1: dontcache worker was killed by the kernel's OOM killer); 0 clean of 1 asked, too few to rank"),
        "{md}"
    );
    let j = super::render_json(&r);
    let modes = &j["experiments"][0]["modes"];
    let failed = modes
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "dontcache")
        .unwrap();
    assert_eq!(failed["failed_runs"][0]["repeat"], 1, "{failed}");
    assert_eq!(failed["clean_runs"], 0, "{failed}");
}
