//! The parent side of E5: the source database (one, quietkv's), a
//! section per load (each closed-loop thread count, then the open loop),
//! each section's campaign (every mode in a worker in its cgroup, from a
//! fresh copy of the source after sync + drop caches), the device's
//! ceiling after each round of a closed-loop section, the report, and the
//! seed's targets judged from the medians.
//!
//! E5 keeps every run: it does not apply the disturbance rule of the
//! engine experiments, so its figures stay comparable with its earlier
//! reports.

use std::path::PathBuf;
use std::time::Instant;

use super::ceiling::{self, Ceiling};
use super::worker::{block_cache_bytes, mode_config, E5Params, Load, MODES, WARMUP_THREADS};
use crate::args::BenchArgs;
use crate::campaign::{self, Eta, Filed, Judge};
use crate::engines::{BenchEngine, EngineMode, QuietkvConfig, QuietkvEngine};
use crate::experiments::modes::check_modes;
use crate::experiments::setup::{loadavg, machine, out_dir, timestamp, Scratch};
use crate::report::{self, write_outputs_and_verdict, ExperimentReport, ModeReport, Report};
use crate::result::{CommonParams, SectionRuns};
use crate::runner::{Runner, RunnerOptions};
use crate::scale::{e5_threads, mib, parse_size, preset, Overrides, Scale, MIB, VALUE_SIZE};
use crate::source;

/// The median of a metric of a mode in a section.
fn median(e: &ExperimentReport, mode: &str, key: &str) -> Option<f64> {
    let m = e.modes.iter().find(|m| m.name == mode)?;
    m.stats().get(key).map(|s| s.median)
}

/// The longest the device's ceiling is measured per closed-loop section
/// (it runs no longer than a measured phase).
const CEILING_SECONDS: f64 = 20.0;

/// The ceilings a closed-loop section measured, one per round.
#[derive(Default)]
struct RoundCeilings {
    /// The direct mode's mean device read when the first was measured.
    mean_read: Option<Option<f64>>,
    measured: Vec<Ceiling>,
    first_error: Option<String>,
}

impl RoundCeilings {
    fn push(&mut self, c: Result<Ceiling, String>) {
        match c {
            Ok(c) => self.measured.push(c),
            Err(e) => {
                self.first_error.get_or_insert(e);
            }
        }
    }

    /// The rounds' ceiling, or why there is none.
    fn combined(self) -> Result<Ceiling, String> {
        ceiling::combine(&self.measured).ok_or_else(|| {
            self.first_error
                .unwrap_or_else(|| "no round of the section was counted".into())
        })
    }
}

/// Bytes per device read in `mode`'s runs (medians), if it read at all.
fn mean_device_read(reports: &[ModeReport], mode: &str) -> Option<f64> {
    let stats = reports.iter().find(|m| m.name == mode)?.stats();
    let mib_s = stats.get("device.r_mib_s")?.median;
    let per_s = stats.get("device.r_per_s")?.median;
    (per_s > 0.0).then(|| mib_s * MIB as f64 / per_s)
}

/// The section's ceiling, as the report's params hold it.
fn section_ceiling(e: &ExperimentReport) -> Option<Ceiling> {
    serde_json::from_value(e.params.get("device_ceiling")?.clone()).ok()
}

/// How much of the device's ceiling `mode` used, by its device reads (a
/// get its block cache serves reads nothing), and the system CPU it spent
/// per device read against the ceiling's readers' (within 1.5x is the
/// target: the rest of a direct get's kernel time is the engine's).
fn against_ceiling(e: &ExperimentReport, mode: &str, c: &Ceiling, sampled_fairly: bool) -> String {
    let ceiling = format!(
        "the device's ceiling: {:.0} reads/s for {} synchronous readers of {} B",
        c.reads_per_s, c.threads, c.read_bytes
    );
    let device_reads = median(e, mode, "device.r_per_s").unwrap_or(0.0);
    if device_reads < 1.0 {
        return format!("no device reads (its cache served them), against {ceiling}");
    }
    let mut text = format!(
        "{device_reads:.0} device reads/s, {:.2}x {ceiling}",
        device_reads / c.reads_per_s.max(1e-9)
    );
    let seconds = e.params.get("duration_s").and_then(|v| v.as_f64());
    let per_read = median(e, mode, "cpu.sys_s")
        .zip(seconds)
        .filter(|&(_, secs)| sampled_fairly && secs > 0.0)
        .map(|(sys, secs)| sys * 1e6 / (device_reads * secs));
    if let Some(us) = per_read {
        let ratio = us / c.sys_us_per_read.max(1e-9);
        text.push_str(&format!(
            "; system CPU per device read {us:.1} us, {ratio:.2}x the ceiling's {:.1} us (at most 1.5x: {})",
            c.sys_us_per_read,
            if ratio <= 1.5 { "met" } else { "not met" }
        ));
    }
    text
}

/// Whether any run of `mode` has a tick-sampled CPU split that strays from
/// its exact runtime (see `cpu`).
fn split_aliased(e: &ExperimentReport, mode: &str) -> bool {
    e.modes.iter().filter(|m| m.name == mode).any(|m| {
        m.runs.iter().any(|r| {
            let k = &r.measured.kernel;
            match (k.cpu_user_s, k.cpu_sys_s, k.cpu_run_s) {
                (Some(u), Some(s), Some(run)) => crate::sampler::split_strays(u + s, run),
                _ => false,
            }
        })
    })
}

/// The seed's targets, judged from the measured medians of a closed-loop
/// section: direct >= 1.3x buffered's reads/s, system CPU >= 50% lower, p99
/// not worse. One line per non-buffered mode.
pub fn judge_section(e: &ExperimentReport) -> Vec<String> {
    let mut out = Vec::new();
    for mode in ["direct", "mmap"] {
        let get = |m: &str, k: &str| median(e, m, k);
        let (Some(ob), Some(om)) = (get("buffered", "ops_per_s"), get(mode, "ops_per_s")) else {
            continue;
        };
        let mut parts = vec![format!(
            "{mode}: {:.2}x the reads/s of buffered ({om:.0} vs {ob:.0})",
            om / ob.max(1e-9)
        )];
        let sampled_fairly = !["buffered", mode].iter().any(|m| split_aliased(e, m));
        let sys = get("buffered", "cpu.sys_s")
            .zip(get(mode, "cpu.sys_s"))
            .filter(|_| sampled_fairly);
        if let Some((sb, sm)) = sys {
            parts.push(format!(
                "system CPU {sm:.1} s vs {sb:.1} s ({:+.0}%)",
                (sm - sb) / sb.max(1e-9) * 100.0
            ));
        } else if let Some((rb, rm)) = get("buffered", "cpu.run_s").zip(get(mode, "cpu.run_s")) {
            parts.push(format!(
                "system CPU not measurable (tick samples in step with the load; see the run notes), exact CPU time {rm:.1} s vs {rb:.1} s"
            ));
        }
        let p99 = get("buffered", "read_latency_us.p99").zip(get(mode, "read_latency_us.p99"));
        if let Some((pb, pm)) = p99 {
            parts.push(format!("p99 {pm:.0} us vs {pb:.0} us"));
        }
        if let Some(c) = section_ceiling(e).filter(|_| mode == "direct") {
            parts.push(against_ceiling(e, mode, &c, sampled_fairly));
        }
        if mode == "direct" {
            let met = om >= 1.3 * ob
                && sys.is_some_and(|(sb, sm)| sm <= 0.5 * sb)
                && p99.is_some_and(|(pb, pm)| pm <= pb);
            parts.push(if met {
                "the seed's target (>= 1.3x reads/s, >= 50% less system CPU, p99 not worse) is met".into()
            } else {
                "the seed's target (>= 1.3x reads/s, >= 50% less system CPU, p99 not worse) is not met".into()
            });
        }
        out.push(parts.join("; "));
    }
    out
}

/// `quietkv bench --experiment E5`.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    let scale = Scale::parse(&args.scale)?;
    let overrides = Overrides {
        db_bytes: args.db_size.as_deref().map(parse_size).transpose()?,
        memory_limit_mib: args.memory_limit_mib,
        read_rate: args.read_rate,
        duration_s: args.duration,
        warmup_s: args.warmup,
        ..Default::default()
    };
    let pre = preset("E5", scale)?.apply("E5", &overrides);
    let names: Vec<String> = match &args.modes {
        Some(m) => m.iter().filter(|m| !m.trim().is_empty()).cloned().collect(),
        None => MODES.map(String::from).to_vec(),
    };
    let configs: Vec<QuietkvConfig> = names
        .iter()
        .map(|n| mode_config(n))
        .collect::<Result<_, _>>()?;
    if configs.is_empty() || args.repeats == 0 || pre.duration_s <= 0.0 || pre.read_rate <= 0.0 {
        return Err("E5 needs modes, and positive --repeats, --duration and --read-rate".into());
    }
    let threads = match &args.threads {
        Some(t) if !t.is_empty() => t.clone(),
        _ => e5_threads(scale),
    };
    if threads.contains(&0) {
        return Err("--threads must be positive".into());
    }
    let mut loads: Vec<Load> = threads
        .iter()
        .map(|&t| Load::Closed { threads: t })
        .collect();
    loads.push(Load::Open {
        rate: pre.read_rate,
        threads: args.readers.max(1),
    });

    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let base = base.canonicalize().unwrap_or(base);
    let scratch = Scratch(base.join(format!("quietkv-bench-scratch-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| format!("cannot create {}: {e}", scratch.0.display()))?;
    let modes: Vec<EngineMode> = configs.iter().cloned().map(EngineMode::Quietkv).collect();
    check_modes(&scratch.0, &modes)?;
    let out = out_dir(args)?;
    let mach = machine(&scratch.0);
    let block_device = crate::metrics::block_device_of(&scratch.0);
    let progress = |m: &str| crate::progress_line!("quietkv bench: {m}");

    let reuse = args.reuse_source && !args.rebuild_source;
    let (src_dir, manifest, reused) =
        source::prepare_source(&modes[0], &base, pre.db_bytes, VALUE_SIZE, reuse, &progress)?;
    let _source = SourceGuard {
        dir: src_dir.clone(),
        keep: args.keep_source,
    };
    let run_db = scratch.0.join("db");
    let limit = (pre.memory_limit_mib > 0).then_some(pre.memory_limit_mib * MIB);
    let load_start = loadavg();
    let per_run = pre.db_bytes as f64 / (400.0 * MIB as f64) + pre.warmup_s + pre.duration_s + 3.0;
    let total_runs = (loads.len() * modes.len()) as u32 * args.repeats;
    let mut eta = Eta {
        seconds: per_run * total_runs as f64,
        runs: total_runs,
    };
    let mut experiments = Vec::new();
    for load in &loads {
        let mut runner = Runner::new(RunnerOptions {
            memory_limit: limit,
            drop_caches: !args.no_drop_caches,
        });
        let common = CommonParams {
            read_rate: match load {
                Load::Open { rate, .. } => *rate,
                Load::Closed { .. } => 0.0,
            },
            reader_threads: match load {
                Load::Open { threads, .. } | Load::Closed { threads } => *threads,
            },
            warmup_s: pre.warmup_s.max(0.0),
            baseline_s: 0.0,
            duration_s: pre.duration_s,
            memory_limit_bytes: runner.memory_limit(),
        };
        let params = E5Params {
            keys: manifest.spec.keys,
            value_size: manifest.spec.value_size,
            load: *load,
            warmup_threads: WARMUP_THREADS,
        };
        let mut reports: Vec<ModeReport> = names
            .iter()
            .zip(&modes)
            .map(|(n, m)| {
                ModeReport::new(n.to_ascii_lowercase(), Some(m.page_cache(&scratch.0)), 0)
            })
            .collect();
        let mut judge = Judge::KeepEvery;
        let runs = SectionRuns::new("E5", args.repeats, &common, &params, &block_device)?;
        // The device's ceiling is measured after every round, so it drifts
        // with the host as the modes' runs do; its read size is fixed at
        // the first measurement.
        let mut ceilings = RoundCeilings::default();
        campaign::run(modes.len(), args.repeats, per_run, &mut eta, |slot, eta| {
            let mi = slot.mode;
            let t = Instant::now();
            source::copy_to(&src_dir, &manifest, &run_db, &QuietkvEngine::immutable_file)?;
            let spec = runs.spec(&modes[mi], &reports[mi].name, slot.repeat, &run_db);
            let tag = slot.tag(&load.id(), &spec.name);
            crate::progress_line!(
                "{tag} copied the source in {:.1} s ({})",
                t.elapsed().as_secs_f64(),
                eta.text()
            );
            // The status line names the experiment, the progress
            // lines the section.
            let status = spec.label();
            let outcome = campaign::in_worker(&mut runner, spec, status, eta);
            let _ = std::fs::remove_dir_all(&run_db);
            if let Ok(r) = &outcome {
                crate::progress_line!(
                    "{tag} done: {:.0} reads/s, p99 {:.0} us, system CPU {:.1} s",
                    r.extra.get("ops_per_s").copied().unwrap_or(0.0),
                    r.measured.latency.p99,
                    r.measured.kernel.cpu_sys_s.unwrap_or(f64::NAN)
                );
            }
            let filed = judge.file_outcome(&mut reports[mi], outcome, slot.repeat, &tag)?;
            let round_done = campaign::round_order(modes.len(), slot.repeat).last() == Some(mi);
            if let (Load::Closed { threads }, true, Filed::Counted) = (load, round_done, filed) {
                let seconds = pre.duration_s.min(CEILING_SECONDS);
                crate::progress_line!(
                    "[{} round {}/{}] the device's ceiling: {threads} synchronous O_DIRECT readers of the same tables, {seconds:.0} s",
                    load.id(),
                    slot.repeat,
                    slot.repeats
                );
                let mean_read = *ceilings
                    .mean_read
                    .get_or_insert_with(|| mean_device_read(&reports, "direct"));
                let c = ceiling::measure(
                    &src_dir,
                    &manifest.files,
                    *threads,
                    mean_read,
                    manifest.spec.value_size,
                    seconds,
                );
                if let Ok(c) = &c {
                    crate::progress_line!(
                        "[{} round {}/{}] the device's ceiling: {:.0} reads/s",
                        load.id(),
                        slot.repeat,
                        slot.repeats,
                        c.reads_per_s
                    );
                }
                ceilings.push(c);
            }
            Ok(filed)
        })?;
        let ceiling = match load {
            Load::Closed { .. } => Some(ceilings.combined()),
            Load::Open { .. } => None,
        };
        let mut header = header(
            args, scale, &pre, load, &manifest, reused, &runner, &common, &names,
        );
        if let Some(c) = &ceiling {
            let text = match c {
                Ok(c) => c.text(),
                Err(e) => format!("not measured: {e}"),
            };
            header.push(("Device ceiling".into(), text));
        }
        experiments.push(ExperimentReport {
            id: load.id(),
            title: "100% random point reads over a database larger than memory: buffered vs direct + block cache vs mmap user reads".into(),
            params: serde_json::json!({
                "experiment": "E5",
                "scale": scale,
                "db_bytes": manifest.total_bytes,
                "keys": manifest.spec.keys,
                "value_size": manifest.spec.value_size,
                "load": load,
                "warmup_s": common.warmup_s,
                "duration_s": common.duration_s,
                "memory_limit_bytes": common.memory_limit_bytes,
                "block_cache_bytes": names.iter().map(|n| (n.clone(), block_cache_bytes(n, common.memory_limit_bytes))).collect::<std::collections::BTreeMap<_, _>>(),
                "repeats": args.repeats,
                "modes": modes.iter().map(EngineMode::config_json).collect::<Vec<_>>(),
                "source_reused": reused,
                "device_ceiling": ceiling.as_ref().and_then(|c| c.as_ref().ok()),
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
    let mut verdict = String::new();
    for e in &report.experiments {
        for line in judge_section(e) {
            verdict.push_str(&format!("- {}: {line}\n", e.id));
        }
    }
    let scale_note = if scale == Scale::Quick {
        "Quick scale: the seed's targets are stated for the full scale (8 GiB in a 1 GiB cgroup, 3 repeats); these lines only say what this run measured."
    } else {
        "Full scale."
    };
    let tail = format!(
        "{scale_note}\n\nLoad average (1 min) at start / end: {load_start} / {}.",
        loadavg()
    );
    let verdict = verdict.trim_end();
    write_outputs_and_verdict(
        &report,
        &out,
        verdict,
        serde_json::json!(verdict.lines().collect::<Vec<_>>()),
        &tail,
    )?;
    for e in &report.experiments {
        println!("\n## {}\n", e.id);
        println!("{}", report::markdown_table(e));
    }
    println!("\n## Verdict\n\n{verdict}\n\n{tail}\n");
    println!("report: {}", out.join("report.md").display());
    println!("json:   {}", out.join("report.json").display());
    Ok(())
}

/// Removes the source database unless `--keep-source`.
struct SourceGuard {
    dir: PathBuf,
    keep: bool,
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_dir_all(self.dir.with_extension("building"));
        } else {
            println!("source kept: {}", self.dir.display());
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn header(
    args: &BenchArgs,
    scale: Scale,
    pre: &crate::scale::Preset,
    load: &Load,
    m: &crate::source::Manifest,
    reused: bool,
    runner: &Runner,
    common: &CommonParams,
    names: &[String],
) -> Vec<(String, String)> {
    let limit = runner.memory_limit();
    let caches: Vec<String> = names
        .iter()
        .map(|n| match block_cache_bytes(n, limit) {
            Some(b) => format!("{n} {}", mib(b as u64)),
            None => format!(
                "{n} the engine's own sizing (block_cache_limit_share 0.5 of the cgroup limit{}, index and filter charged to it)",
                limit.map(|l| format!(" = {}", mib(l / 2))).unwrap_or_default()
            ),
        })
        .collect();
    vec![
        (
            "Scale".to_string(),
            match scale {
                Scale::Quick => "quick (a smoke-sized run on a shared, noisy 2-core machine; not the seed's scale)".into(),
                Scale::Full => "full".into(),
            },
        ),
        (
            "Cgroup limit".into(),
            match limit {
                Some(l) => format!(
                    "{} (memory cgroup of the worker process); dataset : memory = {:.1} : 1",
                    mib(l),
                    m.total_bytes as f64 / l as f64
                ),
                None => "none".into(),
            },
        ),
        (
            "Database".into(),
            format!(
                "{} keys x {} B values, {} on disk in {} files, fully compacted ({}); each run starts from a fresh copy after sync + drop caches",
                m.spec.keys,
                m.spec.value_size,
                mib(m.total_bytes),
                m.files.len(),
                if reused { "source reused: manifest matched" } else { "source built for this run" }
            ),
        ),
        (
            "User reads".into(),
            format!(
                "{}; keys uniform over the whole database; every value checked",
                load.text()
            ),
        ),
        ("Block cache".into(), caches.join("; ")),
        (
            "Phases".into(),
            format!(
                "warm-up {} s (closed loop, {WARMUP_THREADS} threads), measured {} s; no writes, no compaction",
                common.warmup_s, pre.duration_s
            ),
        ),
        (
            "Repeats".into(),
            if args.repeats == 1 {
                "1 (a single run is a smoke test, not a result)".into()
            } else {
                format!(
                    "{} per mode, interleaved, the order rotated each round; cells show median (min..max)",
                    args.repeats
                )
            },
        ),
        (
            "Counters".into(),
            "cache hit ratio: reads that needed no device read, from the reader thread's own device reads (getrusage ru_inblock) around each get (one in 16 in the closed loop), the same for every mode (quietkv's own page-cache count is off: it would cost only the buffered reads a system call); mmap's faults in major_faults_per_read; CPU % = CPU seconds of the worker over the phase's wall time x CPUs".into(),
        ),
        ("Finished".into(), timestamp() + " UTC"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::DeviceRates;
    use crate::result::{PhaseResult, RunResult};
    use crate::sampler::PhaseMetrics;

    fn run(mode: &str, ops_per_s: f64, sys_s: f64, device_reads: f64) -> RunResult {
        let mut r = RunResult {
            mode: mode.into(),
            measured: PhaseResult {
                kernel: PhaseMetrics {
                    cpu_user_s: Some(20.0),
                    cpu_sys_s: Some(sys_s),
                    device: Some(DeviceRates {
                        r_per_s: device_reads,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        };
        r.measured.latency.p99 = 2000.0;
        r.extra.insert("ops_per_s".into(), ops_per_s);
        r
    }

    fn section(params: serde_json::Value) -> ExperimentReport {
        let mode = |name: &str, ops, sys, device_reads| ModeReport {
            runs: vec![run(name, ops, sys, device_reads)],
            ..ModeReport::new(name, None, 0)
        };
        ExperimentReport {
            id: "E5-closed32".into(),
            title: "t".into(),
            params,
            header: vec![],
            notes: vec![],
            modes: vec![
                mode("buffered", 48_000.0, 50.0, 46_000.0),
                mode("direct", 60_000.0, 28.0, 56_000.0),
            ],
        }
    }

    #[test]
    fn the_verdict_sets_direct_reads_against_the_devices_ceiling() {
        let ceiling = Ceiling {
            threads: 32,
            read_bytes: 4608,
            seconds: 20.0,
            reads: 1_280_000,
            reads_per_s: 64_000.0,
            each_reads_per_s: vec![64_000.0],
            mean_us: 500.0,
            sys_us_per_read: 8.0,
            user_us_per_read: 2.0,
        };
        let params = |c: &Ceiling| serde_json::json!({ "duration_s": 60.0, "device_ceiling": c });
        let with = judge_section(&section(params(&ceiling)));
        let direct = with.iter().find(|l| l.starts_with("direct:")).unwrap();
        assert!(direct.contains("1.25x the reads/s of buffered"), "{direct}");
        assert!(
            direct.contains(
                "56000 device reads/s, 0.88x the device's ceiling: 64000 reads/s for 32 synchronous readers of 4608 B"
            ),
            "{direct}"
        );
        assert!(
            direct.contains(
                "system CPU per device read 8.3 us, 1.04x the ceiling's 8.0 us (at most 1.5x: met)"
            ),
            "{direct}"
        );
        assert!(direct.ends_with("is not met"), "{direct}");

        // A kernel that spends twice the ceiling's CPU on each read misses it.
        let costly = Ceiling {
            sys_us_per_read: 4.0,
            ..ceiling.clone()
        };
        let lines = judge_section(&section(params(&costly)));
        assert!(
            lines[0].contains("2.08x the ceiling's 4.0 us (at most 1.5x: not met)"),
            "{lines:?}"
        );

        // Direct gets all served by the block cache read nothing from the
        // device: no share of the ceiling, no CPU per device read.
        let mut cached = section(params(&ceiling));
        cached.modes[1].runs[0].measured.kernel.device = Some(DeviceRates::default());
        let lines = judge_section(&cached);
        assert!(
            lines[0].contains("no device reads (its cache served them)"),
            "{lines:?}"
        );
        assert!(!lines[0].contains("per device read"), "{lines:?}");

        // Without a ceiling (the open loop, or no direct reads here) the
        // line says nothing of one.
        for params in [
            serde_json::json!({}),
            serde_json::json!({ "device_ceiling": null }),
        ] {
            let lines = judge_section(&section(params));
            assert!(lines.iter().all(|l| !l.contains("ceiling")), "{lines:?}");
        }
    }
}
