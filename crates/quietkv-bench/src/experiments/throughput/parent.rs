//! The parent side of the throughput experiment: the configurations of
//! every engine of `--engines` (quietkv's set compaction alone), the
//! campaign (each configuration `--repeats` times in this process, no
//! cgroup: it measures the engine, not the cache), and the plain report
//! with the same-work rule applied to the full compaction.

use super::one_run::{run_one, Params};
use super::tables::{judge_compaction, markdown, same_work_lines};
use crate::args::BenchArgs;
use crate::campaign::{self, Eta, Filed};
use crate::engines::{dispatch, engine_count, how_to_build_peers, EngineMode, QuietkvConfig};
use crate::experiments::modes::{engine_modes, report_names};
use crate::experiments::setup::{machine, out_dir, Scratch};
use crate::report::write_plain_report;

/// `quietkv bench --experiment throughput`: the engine throughput
/// experiment (fill, random reads, compact_all per configuration, every
/// engine of --engines); no cgroup: it measures the engine, not the cache.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    // quietkv's configurations set compaction alone (the rest `auto`).
    let modes: Vec<EngineMode> =
        engine_modes(args, &["buffered", "direct"], &["buffered", "both-direct"])?
            .into_iter()
            .map(|m| match m {
                EngineMode::Quietkv(c) => {
                    QuietkvConfig::parse_compaction_only(&c.name).map(EngineMode::Quietkv)
                }
                #[allow(unreachable_patterns)]
                other => Ok(other),
            })
            .collect::<Result<_, _>>()?;
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let scratch = Scratch(base.join(format!("quietkv-throughput-scratch-{}", std::process::id())));
    let value_size = match args.value_size.as_deref() {
        None => 4096,
        Some([one]) => *one,
        Some(_) => return Err("throughput takes one --value-size".into()),
    };
    let params = Params {
        keys: args.keys.unwrap_or(1_000_000),
        value_size,
        reads: args.point_reads,
        modes: report_names(&modes),
        repeats: args.repeats,
        dir: scratch.0.clone(),
    };
    if params.keys == 0 || params.value_size < 8 || params.repeats == 0 {
        return Err("--keys and --repeats must be positive and --value-size at least 8".into());
    }
    if modes.is_empty() {
        return Err("no modes given".into());
    }
    let out = out_dir(args)?;
    std::fs::create_dir_all(&params.dir)
        .map_err(|e| format!("cannot create {}: {e}", params.dir.display()))?;
    let progress = |msg: &str| crate::progress_line!("[throughput] {msg}");
    // Interleaved (A B C, B C A, ...): the order rotates each round as in
    // the engine experiments. In this process, so the time left is not
    // estimated.
    let mut runs = Vec::new();
    let mut eta = Eta {
        seconds: 0.0,
        runs: modes.len() as u32 * params.repeats,
    };
    campaign::run(modes.len(), params.repeats, 0.0, &mut eta, |slot, _| {
        let mi = slot.mode;
        let name = &params.modes[mi];
        // The runs' repeats count from 0 in this report.
        let r = slot.repeat - 1;
        runs.push(dispatch!(&modes[mi], |c: E| {
            run_one::<E>(&params, c, name, r, &progress)
        })?);
        Ok(Filed::Counted)
    })?;
    let mach = machine(&scratch.0);
    let engines_line = match how_to_build_peers() {
        Some(how) if engine_count(&modes) == 1 => format!("\nEngines: quietkv ({how})\n"),
        _ => String::new(),
    };
    let header = format!(
        "# quietkv engine throughput\n\nMachine: {}\n{engines_line}",
        serde_json::to_string(&mach).unwrap_or_default()
    );
    let md = markdown(&params, &runs, &header);
    let same_work = same_work_lines(&judge_compaction(&params, &runs));
    let json = serde_json::json!({
        "machine": mach,
        "experiment": "throughput",
        "modes": params.modes.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>(),
        "runs": runs,
        "same_work": same_work,
    });
    write_plain_report(&out, &md, &json)
}
