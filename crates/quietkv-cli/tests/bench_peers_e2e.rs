//! Tiny end-to-end runs with every engine (`--features rocksdb,fjall`):
//! E1 with quietkv, RocksDB's six configurations and fjall in one report,
//! and the throughput experiment with the peers. Checks the report's
//! structure (names, tables, ratio views, verdict, sources), not its
//! numbers, so the peer code cannot rot.

mod common;

#[test]
fn e1_tiny_run_with_every_engine_names_modes_by_engine_and_compares_them() {
    let dirs = common::bench_dirs();
    let (res, pid) = common::run_bench(
        &common::args(
            "--experiment E1 --engines quietkv,rocksdb,fjall --modes buffered,auto \
             --db-size 16M --warmup 0.3 --baseline 1 --duration 5 --after 1 \
             --read-rate 400 --memory-limit 128",
        ),
        &dirs.scratch,
        &dirs.out,
    );
    let stderr = String::from_utf8_lossy(&res.stderr);
    let stdout = String::from_utf8_lossy(&res.stdout);
    // Every engine builds its own source from the same keys.
    assert_eq!(stderr.matches("source: building").count(), 3, "{stderr}");
    assert!(stderr.contains("[E1 rocksdb:both-direct 1/1]"), "{stderr}");
    assert!(stderr.contains("[E1 fjall:buffered 1/1]"), "{stderr}");
    // Interleaved across engines: quietkv's, RocksDB's and fjall's first
    // configurations run before quietkv's second.
    let at = |s: &str| stderr.find(s).unwrap_or_else(|| panic!("{s}: {stderr}"));
    assert!(at("[E1 fjall:buffered 1/1]") < at("[E1 quietkv:auto 1/1]"));
    assert!(stdout.contains("Verdict:"), "{stdout}");

    let names = [
        "quietkv:buffered",
        "rocksdb:buffered",
        "fjall:buffered",
        "quietkv:auto",
        "rocksdb:write-direct",
        "rocksdb:read-direct",
        "rocksdb:both-direct",
        "rocksdb:all-direct",
        "rocksdb:seed-all-direct",
    ];
    let md = common::report_md(&dirs.out);
    common::assert_report_has(
        &md,
        [
            format!("| Metric | {} |", names.join(" | ")),
            "Against the same engine's buffered configuration".to_string(),
            "| quietkv:auto vs quietkv:buffered |".into(),
            "rocksdb:both-direct vs rocksdb:buffered".into(),
            "- Engines: quietkv (".into(),
            "rocksdb (rust-rocksdb 0.54 / RocksDB 11.12): the tree as quietkv's".into(),
            // Every tuned setting, with its reason, in the report header.
            "bytes_per_sync = 1 MiB (the tuning guide's advice".into(),
            "seed-all-direct: block cache 4 MiB, max_background_jobs = 4".into(),
            "fjall (fjall 3.1): no page-cache control".into(),
            "2 worker threads".into(),
            "- Sources: one per engine".into(),
            "rocksdb:read-direct = compaction read direct (use_direct_io_for_compaction_reads)"
                .into(),
            "## Verdict".into(),
            "Against the peers:".into(),
        ],
    );
    // The second view exists when some RocksDB configuration did
    // buffered's work (always, as buffered itself counts).
    assert!(
        md.contains("Against the best RocksDB configuration (rocksdb:"),
        "{md}"
    );

    let j = common::report_json(&dirs.out);
    let e = &j["experiments"][0];
    let got: Vec<&str> = e["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, names);
    for m in e["modes"].as_array().unwrap() {
        assert!(m["read_latency_us"]["p99"].is_number(), "{m}");
        // Every engine's background bytes were counted.
        assert!(m["compaction_mib_s"].as_f64().unwrap() > 0.0, "{m}");
        assert!(m["same_work"].is_boolean());
        // The same three phases and the same hit measurement for every engine.
        for phase in ["during", "after"] {
            assert!(
                m[phase]["read_latency_us"]["p99"].is_number(),
                "{phase}: {m}"
            );
        }
        assert!(m["cache_hit_ratio"].is_number(), "{m}");
    }
    // The peers' settings are in report.json too.
    let header = e["header"].to_string();
    assert!(header.contains("bytes_per_sync = 1 MiB"), "{header}");
    assert!(header.contains("prepopulate_block_cache"), "{header}");
    let peers = &e["peers"];
    assert_eq!(
        peers["engines"],
        serde_json::json!(["quietkv", "rocksdb", "fjall"])
    );
    assert!(peers["best_rocksdb"]
        .as_str()
        .unwrap()
        .starts_with("rocksdb:"));
    assert_eq!(peers["same_work_check"].as_array().unwrap().len(), 3);
    let cmps = peers["comparisons"].as_array().unwrap();
    assert!(
        cmps.iter()
            .any(|c| c["quietkv"] == "quietkv:auto" && c["peer"] == "fjall:buffered"),
        "{cmps:?}"
    );
    assert!(j["verdict"]
        .as_str()
        .unwrap()
        .contains("Against the peers:"));
    common::assert_no_cgroups_left(pid);
    common::assert_nothing_left(&dirs.scratch);
}

#[test]
fn throughput_tiny_run_runs_the_peers_too() {
    let dirs = common::bench_dirs();
    let _ = common::run_bench(
        &common::args(
            "--experiment throughput --engines quietkv,rocksdb,fjall --keys 3000 \
             --value-size 1024 --point-reads 200",
        ),
        &dirs.scratch,
        &dirs.out,
    );
    let md = common::report_md(&dirs.out);
    assert!(
        md.contains("| metric | quietkv:buffered | rocksdb:buffered | fjall:buffered | quietkv:direct | rocksdb:both-direct |"),
        "{md}"
    );
    for row in [
        "fill MiB/s",
        "random read ops/s (cold cache)",
        "compact_all seconds",
        "compact_all MiB/s written",
        "CPU user s",
    ] {
        assert!(md.contains(row), "{row}: {md}");
    }
    let j = common::report_json(&dirs.out);
    assert_eq!(j["runs"].as_array().unwrap().len(), 5);
    assert_eq!(j["modes"][1]["name"], "rocksdb:buffered");
    for r in j["runs"].as_array().unwrap() {
        assert!(r["fill_mib_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["compact_written_mib"].as_f64().unwrap() > 0.0, "{r}");
    }
}
