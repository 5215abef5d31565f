//! The parent side of E1, E2 and E3: presets, the source database, the
//! interleaved runs (copy, sync, drop caches, worker in its cgroup), the
//! report sections, and the verdict.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use super::cgroup::interrupted;
use super::engine::EngineParams;
use super::report::{self, ExperimentReport, ModeReport, Report};
use super::result::{CommonParams, ModeSpec, WorkerSpec};
use super::runner::{Runner, RunnerOptions};
use super::sampler::SamplerConfig;
use super::scale::{parse_size, preset, Overrides, Preset, Scale, MIB, VALUE_SIZE};
use super::source::{self, Manifest, SourceSpec};
use super::{
    check_modes, fmt_secs, loadavg, machine, timestamp, write_outputs, BenchArgs, Scratch,
};

const DEFAULT_MODES: [&str; 4] = ["buffered", "write-direct", "both-direct", "dontcache"];

/// Removes the source databases built or reused by this run unless
/// `--keep-source`, however the benchmark ends.
struct Sources {
    dirs: Vec<PathBuf>,
    keep: bool,
}

impl Drop for Sources {
    fn drop(&mut self) {
        if !self.keep {
            for d in &self.dirs {
                let _ = std::fs::remove_dir_all(d);
                let _ = std::fs::remove_dir_all(d.with_extension("building"));
            }
        }
    }
}

fn title(exp: &str) -> &'static str {
    match exp {
        "E1" => "reads over a hot set while one major compaction rewrites the whole database",
        "E2" => {
            "reads over keys [0, H) while one writer overwrites random keys at a fixed byte rate"
        }
        _ => "E1 at hot-set sizes of about 1/30, 1/3 and 3x the page cache",
    }
}

fn mib(b: u64) -> String {
    let m = b as f64 / MIB as f64;
    if m >= 1024.0 {
        format!("{:.1} GiB", m / 1024.0)
    } else {
        format!("{m:.0} MiB")
    }
}

/// Runs the engine experiments `exps` (E1, E2, E3).
pub fn run(args: &BenchArgs, exps: &[String]) -> Result<(), String> {
    let scale = Scale::parse(&args.scale)?;
    let modes: Vec<ModeSpec> = match &args.modes {
        Some(m) => m.clone(),
        None => DEFAULT_MODES.map(String::from).to_vec(),
    }
    .iter()
    .filter(|m| !m.trim().is_empty())
    .map(|m| ModeSpec::parse(m))
    .collect::<Result<_, _>>()?;
    if modes.is_empty() {
        return Err("no modes given".into());
    }
    let overrides = Overrides {
        db_bytes: args.db_size.as_deref().map(parse_size).transpose()?,
        memory_limit_mib: args.memory_limit_mib,
        hot_keys: args.hot_keys.clone(),
        throttles: args.throttle.clone(),
        read_rate: args.read_rate,
        write_rate_mib: args.write_rate,
        duration_s: args.duration,
        warmup_s: args.warmup,
        baseline_s: args.baseline,
    };
    let mut plans: Vec<(String, Preset)> = Vec::new();
    for e in exps {
        let p = preset(e, scale)?.apply(e, &overrides);
        if args.repeats == 0 || p.duration_s <= 0.0 || p.read_rate <= 0.0 {
            return Err("--repeats, --duration and --read-rate must be positive".into());
        }
        if p.hot_keys.is_empty() || p.throttles.is_empty() {
            return Err("--hot-keys and --throttle need at least one value".into());
        }
        plans.push((e.clone(), p));
    }
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let base = base.canonicalize().unwrap_or(base);
    let scratch_dir = base.join(format!("quietkv-bench-scratch-{}", std::process::id()));
    std::fs::create_dir_all(&scratch_dir)
        .map_err(|e| format!("cannot create {}: {e}", scratch_dir.display()))?;
    let scratch = Scratch(scratch_dir);
    check_modes(&scratch.0, &modes)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(timestamp()));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mach = machine(&scratch.0);
    let block_device = super::metrics::block_device_of(&scratch.0);
    let progress = |m: &str| crate::progress_line!("quietkv bench: {m}");

    // Every source database first (the slow part), reused across
    // experiments of the same size.
    let mut sources = Sources {
        dirs: Vec::new(),
        keep: args.keep_source,
    };
    let mut built: BTreeMap<u64, (PathBuf, Manifest, bool)> = BTreeMap::new();
    for (_, p) in &plans {
        if built.contains_key(&p.db_bytes) {
            continue;
        }
        let spec = SourceSpec::new(p.db_bytes, VALUE_SIZE);
        let reuse = args.reuse_source && !args.rebuild_source;
        let (dir, m, reused) = source::prepare(&base, &spec, reuse, &progress)?;
        sources.dirs.push(dir.clone());
        built.insert(p.db_bytes, (dir, m, reused));
    }

    // Sections and their runs.
    struct Section {
        exp: String,
        id: String,
        preset: Preset,
        hot: u64,
        throttle: u64,
    }
    let mut sections = Vec::new();
    for (e, p) in &plans {
        for (id, hot, throttle) in p.sections(e) {
            sections.push(Section {
                exp: e.clone(),
                id,
                preset: p.clone(),
                hot,
                throttle,
            });
        }
    }
    let per_run = |s: &Section| {
        let copy = s.preset.db_bytes as f64 / (200.0 * MIB as f64);
        let phase = if s.exp == "E2" {
            s.preset.duration_s
        } else {
            (s.preset.db_bytes as f64 * 2.0 / (150.0 * MIB as f64)).min(s.preset.duration_s)
        };
        copy + s.preset.warmup_s + s.preset.baseline_s + phase + 3.0
    };
    let mut left: f64 = sections
        .iter()
        .map(|s| per_run(s) * (modes.len() as u32 * args.repeats) as f64)
        .sum();
    let mut runs_left = sections.len() as u32 * modes.len() as u32 * args.repeats;
    let load_start = loadavg();
    let mut experiments = Vec::new();
    let run_db = scratch.0.join("db");
    for s in &sections {
        let (src_dir, manifest, reused) = &built[&s.preset.db_bytes];
        let limit = (s.preset.memory_limit_mib > 0).then_some(s.preset.memory_limit_mib * MIB);
        let mut runner = Runner::new(RunnerOptions {
            memory_limit: limit,
            drop_caches: !args.no_drop_caches,
        });
        let common = CommonParams {
            read_rate: s.preset.read_rate,
            reader_threads: args.readers.max(1),
            warmup_s: s.preset.warmup_s.max(0.0),
            baseline_s: s.preset.baseline_s.max(0.0),
            duration_s: s.preset.duration_s,
            memory_limit_bytes: runner.memory_limit(),
        };
        let params = EngineParams {
            keys: manifest.spec.keys,
            value_size: manifest.spec.value_size,
            hot_keys: s.hot,
            throttle_mib: s.throttle,
            block_cache_bytes: (args.block_cache_mib * MIB) as usize,
            memtable_bytes: (args.memtable_mib.max(1) * MIB) as usize,
            write_bytes_per_s: (s.preset.write_rate_mib * MIB as f64) as u64,
            min_phase_s: args.min_phase,
        };
        let mut reports: Vec<ModeReport> = modes
            .iter()
            .map(|m| ModeReport {
                name: m.name.clone(),
                runs: Vec::new(),
            })
            .collect();
        for repeat in 1..=args.repeats {
            for (mi, mode) in modes.iter().enumerate() {
                if interrupted() {
                    return Err("interrupted; cgroups and scratch files removed".into());
                }
                let t = Instant::now();
                source::copy_to(src_dir, manifest, &run_db)?;
                let spec = WorkerSpec {
                    experiment: s.exp.clone(),
                    mode: mode.clone(),
                    repeat,
                    repeats: args.repeats,
                    dir: run_db.clone(),
                    common: common.clone(),
                    params: serde_json::to_value(&params).map_err(|e| e.to_string())?,
                    sampler: SamplerConfig {
                        block_device: block_device.clone(),
                        interval_ms: 1000,
                        ..Default::default()
                    },
                };
                crate::progress_line!(
                    "[{} {} {repeat}/{}] copied the source in {:.1} s; cold cache, warm-up, baseline, measured (ETA {} for {} runs left)",
                    s.id,
                    mode.name,
                    args.repeats,
                    t.elapsed().as_secs_f64(),
                    fmt_secs(left),
                    runs_left
                );
                super::progress::start_run(
                    format!("[{} {} {repeat}/{}]", s.id, mode.name, args.repeats),
                    left,
                );
                let r = runner.run(spec).map_err(|e| {
                    if interrupted() {
                        "interrupted; cgroups and scratch files removed".to_string()
                    } else {
                        e
                    }
                })?;
                let _ = std::fs::remove_dir_all(&run_db);
                crate::progress_line!(
                    "[{} {} {repeat}/{}] done: p99 {:.0} us, p99.9 {:.0} us, reads {}/{}, background {:.0} MiB/s for {:.1} s",
                    s.id,
                    mode.name,
                    args.repeats,
                    r.measured.latency.p99,
                    r.measured.latency.p999,
                    r.measured.done,
                    r.measured.scheduled,
                    r.background.mib_s(),
                    r.background.seconds
                );
                reports[mi].runs.push(r);
                left = (left - per_run(s)).max(0.0);
                runs_left -= 1;
            }
        }
        let header = section_header(
            s.exp.as_str(),
            &s.preset,
            s.hot,
            s.throttle,
            &common,
            args,
            manifest,
            *reused,
            &modes,
            &runner,
        );
        experiments.push(ExperimentReport {
            id: s.id.clone(),
            title: title(&s.exp).into(),
            params: serde_json::json!({
                "experiment": s.exp,
                "scale": scale,
                "db_bytes": manifest.total_bytes,
                "keys": manifest.spec.keys,
                "value_size": manifest.spec.value_size,
                "hot_keys": s.hot,
                "hot_bytes": s.hot * VALUE_SIZE as u64,
                "throttle_mib_s": s.throttle,
                "write_rate_mib_s": if s.exp == "E2" { Some(s.preset.write_rate_mib) } else { None },
                "read_rate": common.read_rate,
                "reader_threads": common.reader_threads,
                "warmup_s": common.warmup_s,
                "baseline_s": common.baseline_s,
                "duration_s": common.duration_s,
                "memory_limit_bytes": common.memory_limit_bytes,
                "block_cache_bytes": params.block_cache_bytes,
                "memtable_bytes": params.memtable_bytes,
                "repeats": args.repeats,
                "modes": modes,
                "source_reused": reused,
            }),
            header,
            notes: runner.notes().to_vec(),
            modes: reports,
        });
    }
    let report = Report {
        machine: mach,
        experiments,
    };
    write_outputs(&report, &out)?;
    let verdict = verdict(&report);
    let mut md = std::fs::read_to_string(out.join("report.md")).map_err(|e| e.to_string())?;
    md.push_str(&format!(
        "\n## Verdict\n\n{verdict}\n\nLoad average (1 min) at start / end: {load_start} / {}.\n",
        loadavg()
    ));
    std::fs::write(out.join("report.md"), md).map_err(|e| e.to_string())?;
    let mut j = report::render_json(&report);
    j["verdict"] = serde_json::json!(verdict);
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    for e in &report.experiments {
        println!("\n## {}: {}\n", e.id, e.title);
        println!("{}", report::markdown_table(e));
        for (name, rate, best) in report::short_of_work(e) {
            println!("Not the same work: {name} did {rate:.0} MiB/s of background work, more than 10% short of {best:.0} MiB/s.");
        }
    }
    let mut notes: Vec<&String> = report.experiments.iter().flat_map(|e| &e.notes).collect();
    notes.dedup();
    for n in notes {
        println!("note: {n}");
    }
    println!("\nVerdict: {verdict}\n");
    println!("report: {}", out.join("report.md").display());
    println!("json:   {}", out.join("report.json").display());
    if args.keep_source {
        for d in &sources.dirs {
            println!("source kept: {}", d.display());
        }
    }
    drop(sources);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn section_header(
    exp: &str,
    p: &Preset,
    hot: u64,
    throttle: u64,
    common: &CommonParams,
    args: &BenchArgs,
    m: &Manifest,
    reused: bool,
    modes: &[ModeSpec],
    runner: &Runner,
) -> Vec<(String, String)> {
    let hot_b = hot * VALUE_SIZE as u64;
    let mut h = vec![
        ("Scale".to_string(), args.scale.to_ascii_lowercase()),
        (
            "Cgroup limit".into(),
            match runner.memory_limit() {
                Some(l) => format!("{} (memory cgroup of the worker process)", mib(l)),
                None => "none".into(),
            },
        ),
        (
            "Database".into(),
            format!(
                "{} keys x {} B values, 16 B keys, no compression, {} on disk in {} files; fully compacted source ({}), each run starts from a fresh copy (tables hard-linked, the rest copied) after sync + drop caches",
                m.spec.keys,
                m.spec.value_size,
                mib(m.total_bytes),
                m.files.len(),
                if reused { "reused: manifest matched" } else { "built for this run" }
            ),
        ),
        (
            "Hot set".into(),
            format!(
                "keys [0, {hot}) = {}{}; every hot key read once, then {} s of reads on schedule, before measuring",
                mib(hot_b),
                match common.memory_limit_bytes {
                    Some(l) => format!(" ({:.2}x the cgroup limit)", hot_b as f64 / l as f64),
                    None => String::new(),
                },
                common.warmup_s
            ),
        ),
        (
            "User reads".into(),
            format!(
                "{} gets/s open loop over {} thread(s), uniform over the hot set; engine block cache {} MiB (small, so reads depend on the page cache)",
                common.read_rate, common.reader_threads, args.block_cache_mib
            ),
        ),
    ];
    if exp == "E2" {
        h.push((
            "Background work".into(),
            format!(
                "one writer overwriting random keys over [0, {}) at {} MiB/s (paced, batches of 16), driving flush (memtable {} MiB) and compaction (1 background thread{}); background throughput = compaction read + compaction write + flush bytes over the phase",
                m.spec.keys,
                p.write_rate_mib,
                args.memtable_mib,
                if throttle > 0 { format!(", throttled to {throttle} MiB/s") } else { String::new() }
            ),
        ));
        h.push((
            "Phases".into(),
            format!(
                "warm-up {} s, baseline {} s (no background work), measured {} s (writer running)",
                common.warmup_s, common.baseline_s, common.duration_s
            ),
        ));
    } else {
        h.push((
            "Background work".into(),
            format!(
                "one compact_all (major compaction: reads and rewrites the whole database), 1 background thread, {}; background throughput = (compaction bytes read + written) / compaction wall time, so every mode does the same bytes and the row compares speed",
                if throttle > 0 { format!("throttled to {throttle} MiB/s (reads and writes both count)") } else { "unthrottled".into() }
            ),
        ));
        h.push((
            "Phases".into(),
            format!(
                "warm-up {} s, baseline {} s (no background work), measured = from the start of compact_all to its end (at least {} s, at most {} s; requests scheduled before the end are still served)",
                common.warmup_s, common.baseline_s, args.min_phase, common.duration_s
            ),
        ));
    }
    h.push((
        "Repeats".into(),
        if args.repeats == 1 {
            "1 (a single run is a smoke test, not a result)".into()
        } else {
            format!(
                "{} per mode, interleaved; cells show median (min..max)",
                args.repeats
            )
        },
    ));
    h.push((
        "Modes".into(),
        modes
            .iter()
            .map(|m| {
                format!(
                    "{} = compaction read {} / compaction+flush write {} / user read {}",
                    m.name, m.compaction_read, m.compaction_write, m.user_read
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    ));
    h.push(("Finished".into(), timestamp() + " UTC"));
    h
}

/// Median of a metric of a mode.
fn med(e: &ExperimentReport, mode: &str, key: &str) -> Option<f64> {
    e.modes
        .iter()
        .find(|m| m.name == mode)?
        .stats()
        .get(key)
        .map(|s| s.median)
}

/// The best non-buffered mode of a section that did the same work: (mode,
/// p99 ratio buffered/mode, p99.9 ratio, background speed change in %).
fn best_mode(e: &ExperimentReport) -> Option<(String, f64, f64, f64)> {
    // E2: the background rate is the work, so a mode that fell short does
    // not compare. E1/E3: every mode rewrites the same bytes (checked
    // here); a slower compaction is a cost shown beside the gain.
    let short: Vec<String> = if e.params["experiment"] == "E2" {
        report::short_of_work(e).into_iter().map(|s| s.0).collect()
    } else {
        let bytes =
            |m: &str| Some(med(e, m, "compaction_read_mib")? + med(e, m, "compaction_write_mib")?);
        let b = bytes("buffered").unwrap_or(0.0);
        e.modes
            .iter()
            .filter(|m| bytes(&m.name).is_none_or(|x| (x - b).abs() > 0.1 * b))
            .map(|m| m.name.clone())
            .collect()
    };
    let b99 = med(e, "buffered", "read_latency_us.p99")?;
    let b999 = med(e, "buffered", "read_latency_us.p999")?;
    let bbg = med(e, "buffered", "compaction_mib_s").unwrap_or(0.0);
    e.modes
        .iter()
        .filter(|m| m.name != "buffered" && !short.contains(&m.name))
        .filter_map(|m| {
            let p99 = med(e, &m.name, "read_latency_us.p99")?;
            let p999 = med(e, &m.name, "read_latency_us.p999")?;
            let bg = med(e, &m.name, "compaction_mib_s").unwrap_or(0.0);
            let speed = if bbg > 0.0 {
                (bg - bbg) / bbg * 100.0
            } else {
                0.0
            };
            Some((
                m.name.clone(),
                b99 / p99.max(1.0),
                b999 / p999.max(1.0),
                speed,
            ))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

fn ratio_text(r: f64, what: &str) -> String {
    if r >= 1.05 {
        format!("{what} {r:.1}x lower")
    } else if r <= 0.95 {
        format!("{what} {:.1}x higher", 1.0 / r)
    } else {
        format!("{what} about the same")
    }
}

/// A short paragraph drawn from the figures: which mode the background
/// classes should use, what it bought, and when it stops helping.
pub fn verdict(r: &Report) -> String {
    let mut parts = Vec::new();
    let mut wins: BTreeMap<String, usize> = BTreeMap::new();
    let mut e3 = Vec::new();
    for e in &r.experiments {
        let Some((mode, r99, r999, speed)) = best_mode(e) else {
            parts.push(format!(
                "{}: no other mode did the same background work as buffered, so none compares.",
                e.id
            ));
            continue;
        };
        let hot = e.params["hot_bytes"].as_u64().unwrap_or(0);
        let limit = e.params["memory_limit_bytes"].as_u64();
        if e.params["experiment"] == "E3" {
            e3.push((hot, limit, mode.clone(), r99));
        }
        if r99 >= 1.2 {
            *wins.entry(mode.clone()).or_default() += 1;
        }
        parts.push(format!(
            "{}: best {} ({}, {}, background work {}{:.0}% {}).",
            e.id,
            mode,
            ratio_text(r99, "p99"),
            ratio_text(r999, "p99.9"),
            if speed >= 0.0 { "+" } else { "" },
            speed,
            if e.params["experiment"] == "E2" {
                "throughput"
            } else {
                "compaction speed"
            }
        ));
    }
    let mut out = String::new();
    match wins.iter().max_by_key(|(_, n)| **n) {
        Some((mode, n)) => {
            let m = ModeSpec::parse(mode).ok();
            out.push_str(&format!(
                "This machine should run background I/O as **{mode}**{} (it cut p99 by 1.2x or more in {n} of {} section(s)). ",
                m.map(|m| format!(
                    " (compaction reads {}, compaction and flush writes {}; user reads stay {}{})",
                    m.compaction_read,
                    m.compaction_write,
                    m.user_read,
                    if m.warm_output { "; warm_compaction_output on" } else { "" }
                ))
                .unwrap_or_default(),
                r.experiments.len()
            ));
        }
        None => out.push_str(
            "No mode cut p99 by 1.2x or more against buffered here, so the background classes may as well stay buffered on this machine at these sizes. ",
        ),
    }
    out.push_str(&parts.join(" "));
    let out = out.trim_end().to_string();
    let mut out = out;
    if !e3.is_empty() {
        e3.sort_by_key(|x| x.0);
        let share = |hot: u64, limit: Option<u64>| {
            limit
                .map(|l| format!(" ({:.2}x the cgroup limit)", hot as f64 / l as f64))
                .unwrap_or_default()
        };
        let sizes: Vec<String> = e3
            .iter()
            .map(|(hot, limit, mode, r99)| {
                format!(
                    "{} with {mode} at a {} hot set{}",
                    ratio_text(*r99, "p99"),
                    mib(*hot),
                    share(*hot, *limit)
                )
            })
            .collect();
        out.push_str(&format!(" In E3: {}.", sizes.join("; ")));
        // Where does it stop helping? Look at the hot sets larger than the cache.
        let over: Vec<_> = e3
            .iter()
            .filter(|(hot, limit, _, _)| limit.is_some_and(|l| *hot > l))
            .collect();
        match over.iter().find(|x| x.3 < 1.2) {
            Some((hot, limit, _, r99)) => out.push_str(&format!(
                " Once the hot set outgrows the page cache it stops helping: at {}{} {}.",
                mib(*hot),
                share(*hot, *limit),
                ratio_text(*r99, "p99")
            )),
            None if !over.is_empty() => {
                out.push_str(" It still helped with a hot set larger than the page cache.")
            }
            None => out.push_str(" No E3 hot set was larger than the page cache."),
        }
    } else {
        out.push_str(
            " Published measurements expect the gain to vanish once the hot set is larger than the page cache (run --experiment E3 to see whether it does here).",
        );
    }
    out
}
