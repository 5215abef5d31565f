//! The parent side of E4: the configurations from `--modes` (or the
//! default grid, without xfs where it cannot be mounted), the xfs image,
//! the campaign (each configuration `--repeats` times in this process, no
//! memory cgroup: it measures the write path, not the page cache), and the
//! plain report.

use std::path::Path;

use super::config::{default_modes, Fs, WalConfig};
use super::one_run::{run_one, Params, Run};
use super::tables::{json, markdown};
use super::xfs::XfsMount;
use crate::args::BenchArgs;
use crate::campaign::{self, Eta, Filed};
use crate::engines::{BenchEngine, QuietkvConfig, QuietkvEngine};
use crate::experiments::setup::{machine, out_dir, Scratch};
use crate::report::write_plain_report;

/// `quietkv bench --experiment E4`: the write path per WAL mode, sync
/// policy and compression, on the scratch directory's file system and on a
/// loop-mounted xfs image.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    let full = match args.scale.as_str() {
        "quick" => false,
        "full" => true,
        other => return Err(format!("unknown --scale '{other}' (quick or full)")),
    };
    let xfs_missing = XfsMount::unavailable_reason();
    let names = args
        .modes
        .clone()
        .unwrap_or_else(|| default_modes(xfs_missing.is_none()));
    let modes: Vec<WalConfig> = names
        .iter()
        .map(|m| WalConfig::parse(m))
        .collect::<Result<_, _>>()?;
    if let (Some(why), true) = (&xfs_missing, modes.iter().any(|m| m.fs == Fs::Xfs)) {
        return Err(format!("E4 xfs modes cannot run here: {why}"));
    }
    if args.writers == 0 || args.record_size == 0 || args.repeats == 0 {
        return Err("--writers, --record-size and --repeats must be positive".into());
    }
    let ratio = args.value_compression_ratio;
    if !(ratio > 0.0 && ratio <= 1.0) {
        return Err(format!(
            "--value-compression-ratio must be in (0, 1], not {ratio}"
        ));
    }
    let params = Params {
        writers: args.writers,
        value_size: args.record_size,
        value_compression_ratio: ratio,
        key_space: 10_000_000,
        writes: args
            .writes
            .unwrap_or(if full { 2_000_000 } else { u64::MAX }),
        duration: std::time::Duration::from_secs_f64(
            args.duration
                .unwrap_or(if full { 900.0 } else { 30.0 })
                .max(0.1),
        ),
        repeats: args.repeats,
        memtable_bytes: (args.memtable_mib as usize) << 20,
        xfs_image_bytes: 16 << 30,
    };
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let scratch = Scratch(base.join(format!("quietkv-e4-scratch-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| format!("cannot create {}: {e}", scratch.0.display()))?;
    let out = out_dir(args)?;
    let progress = |msg: &str| crate::progress_line!("[E4] {msg}");
    if let Some(why) = &xfs_missing {
        if args.modes.is_none() {
            progress(&format!("xfs skipped: {why}"));
        }
    }
    let runs = run_modes::<QuietkvEngine>(&params, &modes, &scratch.0, &progress)?;
    let mach = machine(&scratch.0);
    let header = format!(
        "# quietkv E4: commit-log modes\n\nMachine: {}\n",
        serde_json::to_string(&mach).unwrap_or_default()
    );
    let md = markdown(&params, &modes, &runs, &header);
    let json = serde_json::json!({
        "machine": mach,
        "experiments": [json(&params, &modes, &runs)],
    });
    write_plain_report(&out, &md, &json)
}

/// Every configuration `repeats` times, the order rotated each round so no
/// configuration always runs first (a fresh file system, a cold host cache).
pub fn run_modes<E: BenchEngine<Config = QuietkvConfig>>(
    p: &Params,
    modes: &[WalConfig],
    scratch: &Path,
    progress: &dyn Fn(&str),
) -> Result<Vec<Run>, String> {
    let xfs = if modes.iter().any(|m| m.fs == Fs::Xfs) {
        progress(&format!(
            "making a {} MiB xfs image in {}",
            p.xfs_image_bytes >> 20,
            scratch.display()
        ));
        Some(XfsMount::create(scratch, p.xfs_image_bytes)?)
    } else {
        None
    };
    let mut runs = Vec::new();
    // In this process, so the time left is not estimated.
    let mut eta = Eta {
        seconds: 0.0,
        runs: modes.len() as u32 * p.repeats,
    };
    campaign::run(modes.len(), p.repeats, 0.0, &mut eta, |slot, _| {
        let (m, repeat) = (&modes[slot.mode], slot.repeat);
        let base = match m.fs {
            Fs::Native => scratch.to_path_buf(),
            Fs::Xfs => xfs.as_ref().expect("made above").dir().to_path_buf(),
        };
        progress(&format!(
            "{} {repeat}/{}: {} writers",
            m.name, p.repeats, p.writers
        ));
        if m.fs == Fs::Xfs {
            // Before the run, outside its measured time, when the
            // earlier runs' deletes have had time to settle. Without it
            // the image only grows, which costs disk space, not results.
            if let Err(e) = xfs.as_ref().expect("made above").trim() {
                progress(&format!("cannot trim the xfs image: {e}"));
            }
        }
        let r = run_one::<E>(m, &base, p, repeat)?;
        progress(&format!(
            "{} {repeat}/{}: {:.0} writes/s, p99 {:.0} us, on {}",
            m.name, p.repeats, r.writes_per_s, r.write_latency_us.p99, r.filesystem
        ));
        runs.push(r);
        Ok(Filed::Counted)
    })?;
    Ok(runs)
}
