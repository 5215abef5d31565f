//! The parent side of E0: the hot file and the background streams'
//! input files prepared once, the campaign (every mode in a worker in its
//! cgroup, from a cold cache), the report with its verdict.
//!
//! E0 keeps every run: it does not apply the disturbance rule of the
//! engine experiments, so its figures stay comparable with its earlier
//! reports.

use std::time::Instant;

use super::worker::{prepare, E0Params};
use crate::args::BenchArgs;
use crate::campaign::{self, Eta, Judge};
use crate::engines::EngineMode;
use crate::experiments::modes::{
    check_modes, describe_modes, page_cache_by_name, parse_modes, report_names,
};
use crate::experiments::setup::{loadavg, machine, out_dir, readers_text, timestamp, Scratch};
use crate::report::{
    self, verdict, write_outputs_with_verdict, ExperimentReport, ModeReport, Report,
};
use crate::result::{CommonParams, SectionRuns};
use crate::runner::{Runner, RunnerOptions};

/// The modes E0 compares unless `--modes` names others.
const DEFAULT_MODES: [&str; 3] = ["buffered", "direct", "dontcache"];

/// `quietkv bench --experiment E0`.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    let mut args = args.clone();
    args.modes
        .get_or_insert_with(|| DEFAULT_MODES.map(String::from).to_vec());
    let experiment = "E0".to_string();
    let duration = args.duration.unwrap_or(60.0);
    let read_rate = args.read_rate.unwrap_or(2000.0);
    let memory_limit_mib = args.memory_limit_mib.unwrap_or(256);
    let warmup = args.warmup.unwrap_or(5.0);
    let modes = parse_modes(args.modes.as_deref().unwrap_or_default())?;
    if modes.iter().any(|m| !matches!(m, EngineMode::Quietkv(_))) {
        return Err(
            "E0 has no engine: its modes are quietio's access modes (quietkv's configurations)"
                .into(),
        );
    }
    let names = report_names(&modes);
    if modes.is_empty() {
        return Err("no modes given".into());
    }
    if args.repeats == 0 || duration <= 0.0 || read_rate <= 0.0 {
        return Err("--repeats, --duration and --read-rate must be positive".into());
    }
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let scratch_dir = base.join(format!("quietkv-bench-scratch-{}", std::process::id()));
    std::fs::create_dir_all(&scratch_dir)
        .map_err(|e| format!("cannot create {}: {e}", scratch_dir.display()))?;
    let scratch = Scratch(scratch_dir.canonicalize().unwrap_or(scratch_dir));
    check_modes(&scratch.0, &modes)?;
    let out = out_dir(&args)?;

    let mach = machine(&scratch.0);
    let load_start = loadavg();
    let limit = (memory_limit_mib > 0).then_some(memory_limit_mib << 20);
    let mut runner = Runner::new(RunnerOptions {
        memory_limit: limit,
        drop_caches: !args.no_drop_caches,
    });
    let baseline = args.baseline.unwrap_or((duration / 3.0).clamp(1.0, 20.0));
    let common = CommonParams {
        read_rate,
        reader_threads: args.readers.max(1),
        warmup_s: warmup.max(0.0),
        baseline_s: baseline.max(0.0),
        duration_s: duration,
        memory_limit_bytes: runner.memory_limit(),
    };
    let p = E0Params {
        hot_bytes: args.hot_mib << 20,
        bg_file_bytes: args.bg_file_mib << 20,
        bg_read_files: args.bg_read_files,
        bg_read_rate: args.bg_read_rate << 20,
        bg_write_rate: args.bg_write_rate << 20,
        block_size: 4096,
    };
    let t_prep = Instant::now();
    crate::progress_line!(
        "quietkv bench: {experiment}: preparing {} MiB hot file and {} x {} MiB background files in {}",
        args.hot_mib,
        args.bg_read_files,
        args.bg_file_mib,
        scratch.0.display()
    );
    prepare(&scratch.0, &p)?;
    crate::progress_line!(
        "quietkv bench: prepared in {:.1} s",
        t_prep.elapsed().as_secs_f64()
    );

    let params = serde_json::json!({
        "experiment": "E0",
        "hot_bytes": p.hot_bytes,
        "bg_file_bytes": p.bg_file_bytes,
        "bg_read_files": p.bg_read_files,
        "bg_read_bytes_per_s": p.bg_read_rate,
        "bg_write_bytes_per_s": p.bg_write_rate,
        "block_size": p.block_size,
        "read_rate": common.read_rate,
        "reader_threads": common.reader_threads,
        "warmup_s": common.warmup_s,
        "baseline_s": common.baseline_s,
        "duration_s": common.duration_s,
        "memory_limit_bytes": common.memory_limit_bytes,
        "repeats": args.repeats,
        "modes": modes.iter().map(EngineMode::config_json).collect::<Vec<_>>(),
    });
    let per_run = common.warmup_s + common.baseline_s + common.duration_s + 3.0;
    let total_runs = modes.len() as u32 * args.repeats;
    let page_cache = page_cache_by_name(&scratch.0, &modes);
    let mut reports: Vec<ModeReport> = names
        .iter()
        .map(|n| ModeReport::new(n.clone(), page_cache.get(n).cloned(), 0))
        .collect();
    let block_device = crate::metrics::block_device_of(&scratch.0);
    let mut eta = Eta {
        seconds: per_run * total_runs as f64,
        runs: total_runs,
    };
    // Each round starts with another mode, as E1-E3 do: a slot's own
    // effect (a warmer host cache, a later write-back) then falls on
    // every mode alike.
    let mut judge = Judge::KeepEvery;
    let runs = SectionRuns::new(&experiment, args.repeats, &common, &p, &block_device)?;
    campaign::run(modes.len(), args.repeats, per_run, &mut eta, |slot, eta| {
        let mi = slot.mode;
        let spec = runs.spec(&modes[mi], &names[mi], slot.repeat, &scratch.0);
        // `[E0 buffered 1/3]`, as `spec.label()` writes it.
        let tag = slot.tag(&experiment, &names[mi]);
        crate::progress_line!(
            "{tag} starting: cold cache, then warmup {} s, baseline {} s, measured {} s ({})",
            common.warmup_s,
            common.baseline_s,
            common.duration_s,
            eta.text()
        );
        let outcome = campaign::in_worker(&mut runner, spec, tag.clone(), eta);
        if let Ok(r) = &outcome {
            crate::progress_line!("{tag} done: {}", r.summary());
        }
        judge.file_outcome(&mut reports[mi], outcome, slot.repeat, &tag)
    })?;

    let mut header = vec![
        (
            "Cgroup limit".to_string(),
            match runner.memory_limit() {
                Some(l) => format!("{} MiB (memory cgroup of the worker process)", l >> 20),
                None => "none".into(),
            },
        ),
        ("Hot set".into(), format!("{} MiB file, {} B random reads ({} blocks), buffered, pre-warmed", args.hot_mib, p.block_size, (p.hot_bytes / p.block_size).max(1))),
        (
            "User reads".into(),
            format!("{}, uniform keys", readers_text(&common)),
        ),
        (
            "Background work".into(),
            format!(
                "sequential read of {} x {} MiB files at {} + sequential write of {} MiB files at {}, in the mode under test (compaction read / write classes)",
                p.bg_read_files,
                args.bg_file_mib,
                rate_text(args.bg_read_rate),
                args.bg_file_mib,
                rate_text(args.bg_write_rate)
            ),
        ),
        (
            "Phases".into(),
            format!(
                "sync + drop caches, warm-up {} s, baseline {} s (no background work), measured {} s (background work)",
                common.warmup_s, common.baseline_s, common.duration_s
            ),
        ),
        (
            "Repeats".into(),
            if args.repeats == 1 {
                "1 (a single run is a smoke test, not a result)".into()
            } else {
                format!("{} per mode, interleaved; cells show median (min..max)", args.repeats)
            },
        ),
        ("Modes".into(), describe_modes(&scratch.0, &modes)),
    ];
    header.push((
        "Load average (1 min) at start / end".into(),
        format!(
            "{load_start} / {} (other processes compete for the CPUs: the baseline tail shows how much)",
            loadavg()
        ),
    ));
    header.push(("Finished".into(), timestamp() + " UTC"));
    let exp = ExperimentReport {
        id: experiment.clone(),
        title: "no-engine reference (hot-file reads beside sequential background streams)".into(),
        params,
        header,
        notes: runner.notes().to_vec(),
        modes: reports,
    };
    let report = Report {
        machine: mach,
        experiments: vec![exp],
    };
    let verdict = write_outputs_with_verdict(
        &report,
        &out,
        "E0 has no engine: it shows what the kernel allows, the ceiling of the engine experiments.",
    )?;
    println!("{}", report::markdown_table(&report.experiments[0]));
    let j = verdict::judge(&verdict::figures_of(&report.experiments[0]));
    for m in j.not_same_work() {
        if let Some(line) = verdict::not_same_work_line(&j, m) {
            println!("Not the same work: {line}");
        }
    }
    for line in report::readers_behind(&report.experiments[0]) {
        println!("Readers fell behind: {line}");
    }
    for n in runner.notes() {
        println!("note: {n}");
    }
    println!("\nVerdict: {verdict}\n");
    println!("report: {}", out.join("report.md").display());
    println!("json:   {}", out.join("report.json").display());
    Ok(())
}

/// "full speed" for an unthrottled stream, else its rate.
fn rate_text(mib_s: u64) -> String {
    if mib_s == 0 {
        "full speed".into()
    } else {
        format!("{mib_s} MiB/s")
    }
}
