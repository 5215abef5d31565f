//! Tiny end-to-end runs of the engine experiments (E1, then E2 reusing E1's
//! source database): the report's structure (not its numbers), source
//! reuse, and that no scratch directory, source or cgroup is left behind.

mod common;

use std::path::Path;
use std::process::Output;

/// A bench run at tiny sizes.
fn bench(args: &[&str], dir: &Path, out: &Path) -> (Output, u32) {
    let tiny =
        common::args("--db-size 16M --warmup 0.3 --baseline 1 --read-rate 400 --memory-limit 128");
    let all: Vec<&str> = args.iter().chain(&tiny).copied().collect();
    common::run_bench(&all, dir, out)
}

fn check_report(out: &Path, id: &str, modes: &[&str], extra_rows: &[&str]) -> serde_json::Value {
    let md = common::report_md(out);
    common::assert_report_has(
        &md,
        [
            format!("## {id}"),
            "Cgroup limit".into(),
            "Database".into(),
            "Hot set".into(),
            "Background work".into(),
            "Phases".into(),
            "**p99 read latency**".into(),
            "Baseline p99".into(),
            "Cache hit ratio".into(),
            "Background (compaction) throughput".into(),
            "Background seconds".into(),
            "CPU user".into(),
            "Reader lateness p99".into(),
            "from a pool of 8 reader threads".into(),
            format!("| Metric | {} |", modes.join(" | ")),
            "## Verdict".into(),
        ],
    );
    common::assert_report_has(&md, extra_rows);
    let j = common::report_json(out);
    assert!(j["verdict"].as_str().unwrap().len() > 20);
    let e = &j["experiments"][0];
    assert_eq!(e["id"], id);
    assert!(e["params"]["hot_keys"].as_u64().unwrap() > 0);
    let ms = e["modes"].as_array().unwrap();
    assert_eq!(ms.len(), modes.len());
    for (m, name) in ms.iter().zip(modes) {
        assert_eq!(m["name"], *name);
        assert_eq!(m["runs"], 1);
        for k in ["p50", "p99", "p999", "max"] {
            assert!(m["read_latency_us"][k].is_number(), "{k}: {m}");
        }
        assert!(m["reads"]["done"].as_f64().unwrap() > 0.0);
        assert!(m["baseline_read_latency_us"]["p99"].is_number());
        assert!(m["compaction_seconds"].as_f64().unwrap() > 0.0);
        // The background work really happened: bytes moved.
        assert!(m["compaction_mib_s"].as_f64().unwrap() > 0.0, "{m}");
        assert!(m["same_work"].is_boolean());
        assert!(m["reader_lateness_us"]["p99"].is_number(), "{m}");
        // The engine measures its background threads' CPU: moving bytes
        // costs some.
        assert!(
            m["extra"]["background_cpu_s"].as_f64().unwrap() > 0.0,
            "{m}"
        );
    }
    for png in ["percentiles", "p99-over-time"] {
        let p = out.join(format!("{}-{png}.png", id.to_lowercase()));
        let b = std::fs::read(&p).unwrap();
        assert!(b.starts_with(b"\x89PNG"), "{}", p.display());
    }
    j
}

#[test]
fn e1_then_e2_tiny_runs_reuse_the_source_and_clean_up() {
    let dirs = common::bench_dirs();

    // E1, keeping the source it builds.
    let out1 = dirs.tmp.path().join("out1");
    let (res, pid) = bench(
        &common::args(
            "--experiment E1 --modes buffered,both-direct,auto --duration 5 --after 1 \
             --keep-source",
        ),
        &dirs.scratch,
        &out1,
    );
    let stderr = String::from_utf8_lossy(&res.stderr);
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(stderr.contains("source: building"), "{stderr}");
    assert!(stderr.contains("[E1 buffered 1/1]"), "{stderr}");
    assert!(stderr.contains("compact_all"), "{stderr}");
    assert!(stdout.contains("Verdict:"), "{stdout}");
    let j = check_report(
        &out1,
        "E1",
        &["buffered", "both-direct", "auto"],
        &[
            "compaction_wall_s",
            "background_cpu_s_per_gib",
            // The engine's defaults, and what they resolved to here.
            "auto = compaction read auto (",
            // The window goes on after the last install, reported apart.
            "p99 during the compaction",
            "p99 after its last install",
            "a fixed pseudo-random set spread over the whole key space",
        ],
    );
    for m in j["experiments"][0]["modes"].as_array().unwrap() {
        for phase in ["during", "after"] {
            assert!(
                m[phase]["read_latency_us"]["p99"].is_number(),
                "{phase}: {m}"
            );
            assert!(
                m[phase]["reads"]["done"].as_f64().unwrap() > 0.0,
                "{phase}: {m}"
            );
        }
        let whole = m["reads"]["done"].as_f64().unwrap();
        let parts = m["during"]["reads"]["done"].as_f64().unwrap()
            + m["after"]["reads"]["done"].as_f64().unwrap();
        assert_eq!(whole, parts, "the whole window is during + after: {m}");
    }
    assert!(stderr.contains("[E1 auto 1/1]"), "{stderr}");
    let same_work = &j["experiments"][0]["same_work_check"];
    assert_eq!(same_work["reference"], "buffered");
    assert!(same_work["not_same_work"].is_array());
    assert_eq!(j["experiments"][0]["params"]["source_reused"], false);
    common::assert_no_cgroups_left(pid);
    let sources: Vec<_> = std::fs::read_dir(&dirs.scratch)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(sources.len(), 1, "{sources:?}");
    assert!(sources[0].starts_with("source-"), "{sources:?}");
    assert!(dirs
        .scratch
        .join(&sources[0])
        .join("bench-source.json")
        .exists());

    // E2 on the same database size: reuses it (no rebuild), then removes it.
    let out2 = dirs.tmp.path().join("out2");
    let (res, pid) = bench(
        &common::args(
            "--experiment E2 --modes buffered,dontcache --duration 2 --hot-keys 500 \
             --write-rate 8 --memtable-mib 1",
        ),
        &dirs.scratch,
        &out2,
    );
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(stderr.contains("source: reusing"), "{stderr}");
    assert!(!stderr.contains("source: building"), "{stderr}");
    let j = check_report(
        &out2,
        "E2",
        &["buffered", "dontcache"],
        &["write_mib_s", "flush_mib"],
    );
    assert_eq!(j["experiments"][0]["params"]["source_reused"], true);
    common::assert_no_cgroups_left(pid);
    common::assert_nothing_left(&dirs.scratch);
}

/// E2 with quietkv's keys spread over four keyspaces beside the default
/// keyspace alone: each gets a source of its own (the spread one built
/// with the same four keyspaces: the warm-up reads every hot key once and
/// a key not found fails the run), the paced writer's batches span
/// keyspaces, and both report their work.
#[test]
fn e2_tiny_run_spreads_quietkv_over_four_keyspaces_from_a_source_of_its_own() {
    let dirs = common::bench_dirs();
    let (res, pid) = bench(
        &common::args(
            "--experiment E2 --modes auto,auto+ks=4 --duration 2 --hot-keys 500 \
             --write-rate 8 --memtable-mib 1",
        ),
        &dirs.scratch,
        &dirs.out,
    );
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert_eq!(
        stderr.matches("source: building").count(),
        2,
        "one source per keyspace count: {stderr}"
    );
    check_report(
        &dirs.out,
        "E2",
        &["auto", "auto+ks=4"],
        &["quietkv over 4 keyspaces: ", "write_mib_s"],
    );
    common::assert_no_cgroups_left(pid);
    common::assert_nothing_left(&dirs.scratch);
}

#[test]
fn e3_tiny_run_has_one_section_per_hot_set_and_says_where_it_stops_helping() {
    let dirs = common::bench_dirs();
    // E3's hot sets follow the cgroup limit (128 MiB here: about 4, 43 and,
    // capped at the 16 MiB database, 16 MiB).
    let (res, pid) = bench(
        &common::args("--experiment E3 --modes buffered,both-direct --duration 3"),
        &dirs.scratch,
        &dirs.out,
    );
    let stdout = String::from_utf8_lossy(&res.stdout);
    let md = common::report_md(&dirs.out);
    let sections = md.matches("## E3-hot").count();
    assert_eq!(sections, 3, "one section per hot-set size:\n{md}");
    assert!(
        stdout.contains("In E3:"),
        "the verdict walks the hot-set sizes: {stdout}"
    );
    let j = common::report_json(&dirs.out);
    assert_eq!(j["experiments"].as_array().unwrap().len(), 3);
    common::assert_no_cgroups_left(pid);
}
