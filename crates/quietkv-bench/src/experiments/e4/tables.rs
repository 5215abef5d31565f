//! E4's report: the Markdown table (one row per configuration, median
//! (min..max) over repeats), the xfs/ext4 ratios, and `report.json`'s
//! experiment object.

use super::config::{Fs, WalConfig};
use super::one_run::{DeviceFigures, Params, Run};
use crate::cpu::CpuSource;
use crate::report::stat_of;

/// Median, min and max of `v` (zeros when it is empty).
fn median_min_max(v: Vec<f64>) -> (f64, f64, f64) {
    stat_of(v).map_or((0.0, 0.0, 0.0), |s| (s.median, s.min, s.max))
}

/// The report's table: one row per configuration, median (min..max) over
/// repeats, and the xfs/ext4 ratio of writes/s for each mode present on both.
pub fn markdown(p: &Params, modes: &[WalConfig], runs: &[Run], header: &str) -> String {
    let mut md = String::from(header);
    let limit = if p.writes == u64::MAX {
        format!("{:.0} s per run", p.duration.as_secs_f64())
    } else {
        format!(
            "{} writes per run (at most {:.0} s)",
            p.writes,
            p.duration.as_secs_f64()
        )
    };
    md.push_str(&format!(
        "\n## E4: WAL modes under a write-only load\n\n{} closed-loop writers, {} B values ({}), \
         {limit}, {} repeat(s), order rotated each round; median (min..max). Device \
         columns count the whole device under the database (for xfs the loop \
         device, exactly the benchmark's; for the native file system the disk, \
         with whatever else the machine wrote).\n\n",
        p.writers,
        p.value_size,
        if p.value_compression_ratio >= 1.0 {
            "random bytes, incompressible".to_string()
        } else {
            format!(
                "{:.0}% random, the rest repeating it",
                p.value_compression_ratio * 100.0
            )
        },
        p.repeats
    ));
    md.push_str("| Mode | FS | Writes/s | p50 us | p99 us | p99.9 us | max us | Device MiB/s | Device writes/s | Merges/s | aqu-sz | Device B / user B | CPU user s | CPU sys s |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let of = |m: &WalConfig| -> Vec<&Run> { runs.iter().filter(|r| r.mode == m.name).collect() };
    let cell = |v: Vec<f64>, digits: usize| {
        let (med, lo, hi) = median_min_max(v);
        format!("{med:.digits$} ({lo:.digits$}..{hi:.digits$})")
    };
    for m in modes {
        let rs = of(m);
        if rs.is_empty() {
            continue;
        }
        let dev = |f: fn(&DeviceFigures) -> f64| -> Vec<f64> {
            rs.iter().filter_map(|r| r.device.as_ref().map(f)).collect()
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            m.name,
            rs[0].filesystem,
            cell(rs.iter().map(|r| r.writes_per_s).collect(), 0),
            cell(rs.iter().map(|r| r.write_latency_us.p50).collect(), 0),
            cell(rs.iter().map(|r| r.write_latency_us.p99).collect(), 0),
            cell(rs.iter().map(|r| r.write_latency_us.p999).collect(), 0),
            cell(rs.iter().map(|r| r.write_latency_us.max).collect(), 0),
            cell(dev(|d| d.w_mib_s), 1),
            cell(dev(|d| d.w_per_s), 0),
            cell(dev(|d| d.w_merges_per_s), 0),
            cell(dev(|d| d.aqu_sz), 2),
            cell(dev(|d| d.bytes_per_user_byte), 2),
            cell(rs.iter().map(|r| r.cpu_user_s).collect(), 1),
            cell(rs.iter().map(|r| r.cpu_sys_s).collect(), 1),
        ));
    }
    let sources: Vec<CpuSource> = runs.iter().map(|r| r.cpu_source).collect();
    md.push_str(&format!("\n{}\n", CpuSource::describe(&sources)));
    let ratios = xfs_ratios(modes, runs);
    if !ratios.is_empty() {
        md.push_str("\nxfs / ext4 writes/s, per mode (median of each):\n\n");
        for (mode, r) in ratios {
            md.push_str(&format!("- {mode}: {r:.2}x\n"));
        }
    }
    md
}

/// For each MODE/SYNC/COMPRESSION present on both file systems, xfs's
/// median writes/s over the native file system's.
pub fn xfs_ratios(modes: &[WalConfig], runs: &[Run]) -> Vec<(String, f64)> {
    let med = |name: &str| {
        median_min_max(
            runs.iter()
                .filter(|r| r.mode == name)
                .map(|r| r.writes_per_s)
                .collect(),
        )
        .0
    };
    let mut out = Vec::new();
    for x in modes.iter().filter(|m| m.fs == Fs::Xfs) {
        let rest = x.rest();
        if let Some(n) = modes
            .iter()
            .find(|m| m.fs == Fs::Native && m.rest() == rest)
        {
            let base = med(&n.name);
            if base > 0.0 {
                out.push((rest, med(&x.name) / base));
            }
        }
    }
    out
}

/// report.json's experiment object: `modes[]` name their file system, WAL
/// mode, compression and sync policy beside the figures.
pub fn json(p: &Params, modes: &[WalConfig], runs: &[Run]) -> serde_json::Value {
    let modes_json: Vec<serde_json::Value> = modes
        .iter()
        .map(|m| {
            let rs: Vec<&Run> = runs.iter().filter(|r| r.mode == m.name).collect();
            let (med, lo, hi) = median_min_max(rs.iter().map(|r| r.writes_per_s).collect());
            serde_json::json!({
                "name": m.name,
                "fs": match m.fs { Fs::Native => rs.first().map_or("native".to_string(), |r| r.filesystem.clone()), Fs::Xfs => "xfs".into() },
                "wal_mode": m.wal_mode,
                "sync": m.sync,
                "compression": m.compression,
                "wal_recycle": m.recycle,
                "runs": rs.len(),
                "writes_per_s": {"median": med, "min": lo, "max": hi},
                "repeats": rs,
            })
        })
        .collect();
    serde_json::json!({
        "id": "E4",
        "params": {
            "writers": p.writers,
            "value_size": p.value_size,
            "value_compression_ratio": p.value_compression_ratio,
            "writes": p.writes,
            "duration_s": p.duration.as_secs_f64(),
            "repeats": p.repeats,
            "memtable_bytes": p.memtable_bytes,
        },
        "modes": modes_json,
        "xfs_over_ext4": xfs_ratios(modes, runs)
            .into_iter()
            .map(|(m, r)| serde_json::json!({"mode": m, "ratio": r}))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadgen::LatencySummary;

    #[test]
    fn xfs_ratio_pairs_the_same_mode_on_both_file_systems() {
        let modes: Vec<WalConfig> = [
            "ext4/buffered/group/none",
            "xfs/buffered/group/none",
            "xfs/direct/group/none",
        ]
        .iter()
        .map(|m| WalConfig::parse(m).unwrap())
        .collect();
        let run = |mode: &str, w: f64| Run {
            mode: mode.into(),
            repeat: 1,
            filesystem: "x".into(),
            writes: 1,
            seconds: 1.0,
            writes_per_s: w,
            write_latency_us: LatencySummary::default(),
            device: None,
            cpu_user_s: 0.0,
            cpu_sys_s: 0.0,
            cpu_source: CpuSource::Cpuacct,
            user_bytes: 0,
        };
        let runs = vec![
            run("ext4/buffered/group/none", 1000.0),
            run("xfs/buffered/group/none", 500.0),
            run("xfs/direct/group/none", 800.0),
        ];
        let r = xfs_ratios(&modes, &runs);
        assert_eq!(r, vec![("buffered/group/none".to_string(), 0.5)]);
    }
}
