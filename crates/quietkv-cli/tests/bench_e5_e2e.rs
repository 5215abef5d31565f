//! A tiny end-to-end `quietkv bench --experiment E5` run: the report's
//! structure (not its numbers), one section per closed-loop thread count
//! plus the open loop, the three user-read modes with their throughput and
//! CPU, and nothing left behind.

mod common;

#[test]
fn e5_tiny_run_reports_every_mode_and_load() {
    let dirs = common::bench_dirs();
    let (res, pid) = common::run_bench(
        &common::args(
            "--experiment E5 --db-size 24M --memory-limit 96 --threads 2,4 \
             --duration 1 --warmup 0.5 --read-rate 300",
        ),
        &dirs.scratch,
        &dirs.out,
    );
    let stdout = String::from_utf8_lossy(&res.stdout);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(stderr.contains("[E5 direct 1/1]"), "{stderr}");
    assert!(
        stdout.contains(
            "| Metric | buffered | direct | mmap | direct vs buffered | mmap vs buffered |"
        ),
        "{stdout}"
    );

    let md = common::report_md(&dirs.out);
    common::assert_report_has(
        &md,
        [
            "## E5-closed2",
            "## E5-closed4",
            "## E5-open",
            "Cgroup limit",
            "dataset : memory",
            "Block cache",
            "closed loop: 4 reader threads",
            "open loop at 300 gets/s",
            "**Throughput (reads/s)**",
            "**p99 read latency**",
            "Cache hit ratio",
            "block_cache_hit_ratio",
            "File pages scanned/s",
            "File pages reclaimed/s",
            "Refaults/s",
            "CPU system",
            "**CPU system, % of all CPUs**",
            "## Verdict",
            "E5-closed2: direct:",
            "Closed loop: latency is each read's service time",
            "Latency is measured from each read's scheduled time",
            "Machine CPU system (all processes, kswapd, interrupts)",
            "Device ceiling",
        ],
    );
    assert!(!md.contains("not in its cpuacct cgroup"), "{md}");

    let j = common::report_json(&dirs.out);
    let exps = j["experiments"].as_array().unwrap();
    let ids: Vec<&str> = exps.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["E5-closed2", "E5-closed4", "E5-open"]);
    assert!(!j["verdict"].as_array().unwrap().is_empty());
    if std::env::var_os("CI").is_some() {
        let verdict = j["verdict"].to_string();
        assert!(verdict.contains("the device's ceiling: "), "{verdict}");
    }
    for e in exps {
        assert!(e["params"]["db_bytes"].as_f64().unwrap() > 0.0);
        // What the device gives as many synchronous O_DIRECT readers as
        // the closed loop has, over the same tables (CI's disk takes
        // direct reads; elsewhere the header says why it could not).
        let ceiling = &e["params"]["device_ceiling"];
        if e["id"] == "E5-open" {
            assert!(ceiling.is_null(), "{ceiling}");
        } else if std::env::var_os("CI").is_some() {
            let threads = if e["id"] == "E5-closed2" { 2 } else { 4 };
            assert_eq!(ceiling["threads"], threads, "{ceiling}");
            assert!(ceiling["reads_per_s"].as_f64().unwrap() > 0.0, "{ceiling}");
            assert!(ceiling["sys_us_per_read"].is_number(), "{ceiling}");
            assert!(
                ceiling["read_bytes"].as_u64().unwrap() % 512 == 0,
                "{ceiling}"
            );
        }
        let modes = e["modes"].as_array().unwrap();
        let names: Vec<&str> = modes.iter().map(|m| m["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["buffered", "direct", "mmap"], "{}", e["id"]);
        if std::env::var_os("CI").is_some() {
            let notes = e["could_not_be_done"].to_string();
            assert!(!notes.contains("cpuacct"), "{notes}");
        }
        for m in modes {
            assert_eq!(m["runs"], 1);
            assert!(m["ops_per_s"].as_f64().unwrap() > 0.0, "{m}");
            assert!(m["cpu"]["user_s"].is_number(), "{m}");
            assert!(m["cpu"]["sys_s"].is_number(), "{m}");
            assert!(m["cpu"]["sys_pct"].is_number(), "{m}");
            // The worker's CPU comes from its own cpuacct cgroup in CI. Its
            // exact runtime is never zero for a run that read; the tick-
            // sampled split can be (a short or periodic load, see `cpu`),
            // but the process cannot have used much more than the machine.
            assert!(m["cpu"]["run_s"].as_f64().unwrap() > 0.0, "{m}");
            let own = m["cpu"]["user_s"].as_f64().unwrap() + m["cpu"]["sys_s"].as_f64().unwrap();
            let machine = m["system_cpu"]["user_s"].as_f64().unwrap()
                + m["system_cpu"]["sys_s"].as_f64().unwrap();
            assert!(own <= machine * 1.1 + 0.1, "{m}");
            assert!(m["read_latency_us"]["p99"].as_f64().unwrap() > 0.0);
            assert_eq!(m["reads"]["errors"].as_f64(), Some(0.0), "{m}");
            for k in ["pgscan_file_per_s", "pgsteal_file_per_s", "refaults_per_s"] {
                assert!(m[k].is_number(), "{k}: {m}");
            }
            assert!(m.get("cache_hit_ratio").is_some());
            assert!(m["extra"]["block_cache_mib"].as_f64().unwrap() > 0.0, "{m}");
        }
        // Every mode's reads are counted as served from memory or from the
        // device, by the reader threads' own device reads (the direct
        // mode's from its block cache).
        assert!(modes[0]["cache_hit_ratio"].is_number(), "{}", modes[0]);
        assert!(modes[1]["cache_hit_ratio"].is_number(), "{}", modes[1]);
        // The direct mode's block cache is sized by the engine from the
        // worker's cgroup limit (half of 96 MiB); the others keep 1/32.
        let direct_cache = modes[1]["extra"]["block_cache_mib"].as_f64().unwrap();
        assert_eq!(direct_cache, 48.0);
        assert_eq!(modes[0]["extra"]["block_cache_mib"].as_f64(), Some(3.0));
        assert!(modes[1]["extra"]["block_cache_hit_ratio"].is_number());
    }
    common::assert_nothing_left(&dirs.scratch);
    common::assert_no_cgroups_left(pid);
}
