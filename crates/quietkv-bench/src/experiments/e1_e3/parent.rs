//! The parent side of E1, E2 and E3: presets, the source databases, the
//! sections' campaigns (each run on a fresh copy of its engine's source,
//! in a worker in its cgroup, disturbed runs set aside and run again) and
//! the report sections (the verdict is drawn in [`crate::report::verdict`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use super::worker::EngineParams;
use crate::args::BenchArgs;
use crate::campaign::{self, Eta, Judge};
use crate::engines::EngineMode;
use crate::experiments::modes::{
    check_modes, describe_modes, engine_modes, page_cache_by_name, report_names, ROCKSDB_MODES,
};
use crate::experiments::setup::{loadavg, machine, out_dir, readers_text, timestamp, Scratch};
use crate::quiet_host::{self, QuietWaits};
use crate::report::{self, write_outputs_with_verdict, ExperimentReport, ModeReport, Report};
use crate::result::{CommonParams, SectionRuns};
use crate::runner::{Runner, RunnerOptions};
use crate::scale::{mib, parse_size, preset, Overrides, Preset, Scale, MIB, VALUE_SIZE};
use crate::source::{self, Manifest};

/// `auto` is what a user gets without configuring anything; buffered is
/// what every other mode is measured against. The other modes are on
/// request (`--modes`).
pub(crate) const DEFAULT_MODES: [&str; 2] = ["buffered", "auto"];

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
            "reads over H hot keys while one writer overwrites random keys at a fixed byte rate"
        }
        _ => "E1 at hot-set sizes of about 1/30, 1/3 and 3x the page cache",
    }
}

/// Runs the engine experiments `exps` (E1, E2, E3).
pub fn run(args: &BenchArgs, exps: &[String]) -> Result<(), String> {
    let scale = Scale::parse(&args.scale)?;
    let modes = engine_modes(args, &DEFAULT_MODES, &ROCKSDB_MODES)?;
    let names = report_names(&modes);
    if modes.is_empty() {
        return Err("no modes given".into());
    }
    let own_write_rates = mode_write_rates(args, &names, exps)?;
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
        after_s: args.after,
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
    let modes_text = describe_modes(&scratch.0, &modes);
    let engines_text = crate::engines::engines_text(&modes);
    let page_cache = page_cache_by_name(&scratch.0, &modes);
    let out = out_dir(args)?;
    let mach = machine(&scratch.0);
    let block_device = crate::metrics::block_device_of(&scratch.0);
    let progress = |m: &str| crate::progress_line!("quietkv bench: {m}");

    // Every source database first (the slow part), reused across
    // experiments of the same size.
    let mut sources = Sources {
        dirs: Vec::new(),
        keep: args.keep_source,
    };
    // One per engine, size and keyspace count: each engine's tree from the
    // same keys and values in the same order (spread over keyspaces as the
    // mode spreads them, so a run finds each key where it looks).
    let source_of = |mode: &EngineMode, db_bytes: u64| (mode.engine(), mode.keyspaces(), db_bytes);
    let mut built: BTreeMap<(&str, usize, u64), (PathBuf, Manifest, bool)> = BTreeMap::new();
    for (_, p) in &plans {
        for mode in &modes {
            if built.contains_key(&source_of(mode, p.db_bytes)) {
                continue;
            }
            let reuse = args.reuse_source && !args.rebuild_source;
            let (dir, m, reused) =
                source::prepare_source(mode, &base, p.db_bytes, VALUE_SIZE, reuse, &progress)?;
            sources.dirs.push(dir.clone());
            built.insert(source_of(mode, p.db_bytes), (dir, m, reused));
        }
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
    let mut eta = Eta {
        seconds: sections
            .iter()
            .map(|s| per_run(s) * (modes.len() as u32 * args.repeats) as f64)
            .sum(),
        runs: sections.len() as u32 * modes.len() as u32 * args.repeats,
    };
    let load_start = loadavg();
    let mut experiments = Vec::new();
    let run_db = scratch.0.join("db");
    for s in &sections {
        // The section's figures name the first engine's source; each run
        // copies its own engine's.
        let (_, manifest, reused) = &built[&source_of(&modes[0], s.preset.db_bytes)];
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
            hot_layout: crate::keys::HotLayout::parse(&args.hot_layout)?,
            throttle_mib: s.throttle,
            block_cache_bytes: (args.block_cache_mib * MIB) as usize,
            memtable_bytes: (args.memtable_mib.max(1) * MIB) as usize,
            write_bytes_per_s: (s.preset.write_rate_mib * MIB as f64) as u64,
            min_phase_s: args.min_phase,
            after_s: s.preset.after_s(s.throttle),
        };
        let mut reports: Vec<ModeReport> = names
            .iter()
            .map(|n| ModeReport::new(n.clone(), page_cache.get(n).cloned(), args.repeats))
            .collect();
        // A run the machine disturbed is set aside and the mode runs
        // again, while the section has reruns left.
        let mut judge = Judge::rule(args.keep_disturbed, args.max_reruns);
        let runs = SectionRuns::new(&s.exp, args.repeats, &common, &params, &block_device)?;
        let mut waits = QuietWaits::default();
        campaign::run(
            modes.len(),
            args.repeats,
            per_run(s),
            &mut eta,
            |slot, eta| {
                let mi = slot.mode;
                let mode = &modes[mi];
                let t = Instant::now();
                let (src_dir, src_manifest, _) = &built[&source_of(mode, s.preset.db_bytes)];
                source::copy_to(src_dir, src_manifest, &run_db, &|f| mode.immutable_file(f))?;
                let mut spec = runs.spec(mode, &names[mi], slot.repeat, &run_db);
                if s.exp == "E2" {
                    if let Some(rate) = own_write_rates.get(&names[mi]) {
                        spec.params["write_bytes_per_s"] =
                            serde_json::json!((rate * MIB as f64) as u64);
                    }
                }
                let tag = slot.tag(&s.id, &names[mi]);
                crate::progress_line!(
                    "{tag} copied the source in {:.1} s; cold cache, warm-up, baseline, measured ({})",
                    t.elapsed().as_secs_f64(),
                    eta.text()
                );
                if args.wait_quiet_s > 0 {
                    // After the copy, so that the run starts right after
                    // the check that found the host quiet.
                    let w = quiet_host::wait_for_quiet_host(
                        crate::disturbance::MAX_STEAL_MS_PER_S,
                        args.wait_quiet_s as f64,
                    );
                    crate::progress_line!("{tag} {}", w.text());
                    waits.add(&w);
                    if crate::cgroup::interrupted() {
                        let _ = std::fs::remove_dir_all(&run_db);
                        return Err(campaign::INTERRUPTED.into());
                    }
                }
                let outcome = campaign::in_worker(&mut runner, spec, tag.clone(), eta);
                let _ = std::fs::remove_dir_all(&run_db);
                if let Ok(r) = &outcome {
                    crate::progress_line!(
                        "{tag} done: {} for {:.1} s",
                        r.summary(),
                        r.background.seconds
                    );
                }
                judge.file_outcome(&mut reports[mi], outcome, slot.repeat, &tag)
            },
        )?;
        let mut header = section_header(
            s.exp.as_str(),
            &s.preset,
            s.hot,
            s.throttle,
            &common,
            args,
            manifest,
            *reused,
            &modes_text,
            &engines_text,
            &runner,
            &own_write_rates,
        );
        if args.wait_quiet_s > 0 {
            header.push(("Quiet host".into(), waits.text(args.wait_quiet_s)));
        }
        let sources_here = modes
            .iter()
            .map(|m| source_of(m, s.preset.db_bytes))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if sources_here > 1 {
            // Each engine's own source (and one per spread over keyspaces):
            // the same keys and values in the same order, each fully
            // compacted by its engine.
            let mut seen = Vec::new();
            let mut per = Vec::new();
            for m in &modes {
                let key = source_of(m, s.preset.db_bytes);
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
                let (dir, sm, reused) = &built[&key];
                let name = match m.keyspaces() {
                    1 => m.engine().to_string(),
                    n => format!("{} over {n} keyspaces", m.engine()),
                };
                per.push(format!(
                    "{}: {} in {} files ({}, {})",
                    name,
                    mib(sm.total_bytes),
                    sm.files.len(),
                    dir.display(),
                    if *reused {
                        "reused: manifest matched"
                    } else {
                        "built for this run"
                    }
                ));
            }
            header.push((
                "Sources".into(),
                format!(
                    "one per engine (and per spread over keyspaces), built from the same {} keys x {} B values in the same order and fully compacted: {}",
                    manifest.spec.keys,
                    manifest.spec.value_size,
                    per.join("; ")
                ),
            ));
        }
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
                "hot_layout": args.hot_layout,
                "hot_bytes": s.hot * VALUE_SIZE as u64,
                "throttle_mib_s": s.throttle,
                "write_rate_mib_s": if s.exp == "E2" { Some(s.preset.write_rate_mib) } else { None },
                "mode_write_rate_mib_s": if s.exp == "E2" { Some(&own_write_rates) } else { None },
                "read_rate": common.read_rate,
                "reader_threads": common.reader_threads,
                "warmup_s": common.warmup_s,
                "baseline_s": common.baseline_s,
                "duration_s": common.duration_s,
                "after_s": s.preset.after_s(s.throttle),
                "memory_limit_bytes": common.memory_limit_bytes,
                "block_cache_bytes": params.block_cache_bytes,
                "memtable_bytes": params.memtable_bytes,
                "repeats": args.repeats,
                "modes": modes.iter().map(EngineMode::config_json).collect::<Vec<_>>(),
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
    let verdict = write_outputs_with_verdict(
        &report,
        &out,
        &format!(
            "Load average (1 min) at start / end: {load_start} / {}.",
            loadavg()
        ),
    )?;
    for e in &report.experiments {
        println!("\n## {}: {}\n", e.id, e.title);
        println!("{}", report::section_tables(e));
        for line in report::not_same_work_lines(e) {
            println!("Not the same work: {line}");
        }
        for line in report::readers_behind(e) {
            println!("Readers fell behind: {line}");
        }
        for line in report::disturbed_lines(e) {
            println!("Disturbed runs: {line}");
        }
        for line in report::failed_lines(e) {
            println!("Failed runs: {line}");
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
    modes: &str,
    engines: &str,
    runner: &Runner,
    own_write_rates: &BTreeMap<String, f64>,
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
                "{hot} keys = {}{}, {}; every hot key read once, then {} s of reads on schedule, before measuring",
                mib(hot_b),
                match common.memory_limit_bytes {
                    Some(l) => format!(" ({:.2}x the cgroup limit)", hot_b as f64 / l as f64),
                    None => String::new(),
                },
                if args.hot_layout == "contiguous" {
                    format!("keys [0, {hot}) (--hot-layout contiguous)")
                } else {
                    "a fixed pseudo-random set spread over the whole key space, the same for every engine (--hot-layout scattered)".to_string()
                },
                common.warmup_s
            ),
        ),
        (
            "User reads".into(),
            format!(
                "{}; gets uniform over the hot set; engine block cache {} MiB (small, so reads depend on the page cache); quietkv counts its user reads' page-cache hits for the engine_page_cache_hit_ratio row (attribute_cache_hits, off by default: one cachestat call per read that misses its block cache)",
                readers_text(common), args.block_cache_mib
            ),
        ),
    ];
    if exp == "E2" {
        h.push((
            "Background work".into(),
            format!(
                "one writer overwriting random keys over [0, {}) at {} MiB/s{} (paced, batches of 16), driving flush (memtable {} MiB) and compaction (1 background thread{}); background throughput = compaction read + compaction write + flush bytes over the phase",
                m.spec.keys,
                p.write_rate_mib,
                own_rates_text(own_write_rates),
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
                "one compact_all (major compaction: reads and rewrites the whole database, installed in slices of {} MiB of input, max_compaction_bytes, as RocksDB's CompactRange installs its own), 1 background thread, {}; background throughput = (compaction bytes read + written) / compaction wall time, so every mode does the same bytes and the row compares speed",
                <crate::engines::QuietkvEngine as crate::engines::BenchEngine>::bench_layout().max_compaction_bytes >> 20,
                if throttle > 0 { format!("throttled to {throttle} MiB/s (reads and writes both count)") } else { "unthrottled".into() }
            ),
        ));
        h.push((
            "Phases".into(),
            format!(
                "warm-up {} s, baseline {} s (no background work), measured = during (from the start of compact_all to its end: at least {} s, at most {} s; requests scheduled before the end are still served) then after ({:.0} s of reads after its last install, when reads meet the new tables); the table's main rows are the whole window, its during and after rows each part",
                common.warmup_s, common.baseline_s, args.min_phase, common.duration_s, p.after_s(throttle)
            ),
        ));
    }
    h.push((
        "Repeats".into(),
        if args.repeats == 1 {
            "1 (a single run is a smoke test, not a result)".into()
        } else {
            format!(
                "{} per mode, interleaved, the order rotated each round so every mode runs in every slot; cells show median (min..max)",
                args.repeats
            )
        },
    ));
    h.push(("Modes".into(), modes.to_string()));
    h.push(("Engines".into(), engines.to_string()));
    h.push(("Finished".into(), timestamp() + " UTC"));
    h
}

/// `--mode-write-rate`: each named mode's own E2 write rate in MiB/s. A
/// name that is not one of the run's modes, a rate that is not a positive
/// number, or the option without E2 is an error rather than a rate quietly
/// ignored.
fn mode_write_rates(
    args: &BenchArgs,
    names: &[String],
    exps: &[String],
) -> Result<BTreeMap<String, f64>, String> {
    let mut rates = BTreeMap::new();
    mode_write_rate_applies(args, exps)?;
    let Some(given) = &args.mode_write_rate else {
        return Ok(rates);
    };
    for item in given.iter().filter(|i| !i.trim().is_empty()) {
        let (name, rate) = item
            .rsplit_once('=')
            .ok_or_else(|| format!("--mode-write-rate '{item}': expected NAME=MIBS"))?;
        let name = name.trim();
        if !names.iter().any(|n| n == name) {
            return Err(format!(
                "--mode-write-rate '{item}': no mode named '{name}' in this run (its modes: {})",
                names.join(", ")
            ));
        }
        let rate: f64 = rate.trim().parse().map_err(|_| {
            format!("--mode-write-rate '{item}': '{rate}' is not a number of MiB/s")
        })?;
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!(
                "--mode-write-rate '{item}': the rate must be positive MiB/s"
            ));
        }
        if rates.insert(name.to_string(), rate).is_some() {
            return Err(format!("--mode-write-rate names '{name}' twice"));
        }
    }
    Ok(rates)
}

/// `--mode-write-rate` sets E2's writer: refused in a run without E2, of
/// whatever experiment, before anything runs.
pub(crate) fn mode_write_rate_applies(args: &BenchArgs, exps: &[String]) -> Result<(), String> {
    if args.mode_write_rate.is_some() && !exps.iter().any(|e| e == "E2") {
        return Err("--mode-write-rate sets E2's writer; this run has no E2".into());
    }
    Ok(())
}

/// The header's words for the modes that write at a rate of their own.
fn own_rates_text(rates: &BTreeMap<String, f64>) -> String {
    if rates.is_empty() {
        return String::new();
    }
    let each: Vec<String> = rates
        .iter()
        .map(|(n, r)| format!("{n} at {r} MiB/s"))
        .collect();
    format!(
        " ({}, by --mode-write-rate: more user writes, so that its background bytes per second match the others')",
        each.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::tests::args;

    fn names() -> Vec<String> {
        vec!["quietkv:auto".into(), "rocksdb:all-direct".into()]
    }

    #[test]
    fn a_mode_write_rate_belongs_to_a_named_mode_of_an_e2_run() {
        let e2 = vec!["E2".to_string()];
        let a = args(&["--mode-write-rate", "quietkv:auto=19.5"]);
        let rates = mode_write_rates(&a, &names(), &e2).unwrap();
        assert_eq!(rates.len(), 1);
        assert_eq!(rates["quietkv:auto"], 19.5);
        assert!(own_rates_text(&rates).contains("quietkv:auto at 19.5 MiB/s"));
        assert!(mode_write_rates(&args(&[]), &names(), &e2)
            .unwrap()
            .is_empty());
        assert_eq!(own_rates_text(&BTreeMap::new()), "");
    }

    #[test]
    fn a_mode_write_rate_that_cannot_apply_is_an_error() {
        let e2 = vec!["E2".to_string()];
        let err = |cli: &[&str], exps: &[String]| mode_write_rates(&args(cli), &names(), exps);
        let unknown = err(&["--mode-write-rate", "quietkv:direct=19"], &e2).unwrap_err();
        assert!(
            unknown.contains("no mode named 'quietkv:direct'"),
            "{unknown}"
        );
        let no_e2 = err(&["--mode-write-rate", "quietkv:auto=19"], &["E1".into()]).unwrap_err();
        assert!(no_e2.contains("no E2"), "{no_e2}");
        for bad in [
            "quietkv:auto",
            "quietkv:auto=fast",
            "quietkv:auto=0",
            "quietkv:auto=-3",
        ] {
            assert!(err(&["--mode-write-rate", bad], &e2).is_err(), "{bad}");
        }
        let twice = err(
            &["--mode-write-rate", "quietkv:auto=19,quietkv:auto=20"],
            &e2,
        )
        .unwrap_err();
        assert!(twice.contains("twice"), "{twice}");
    }
}
