//! The standard experiment's report: one Markdown table per workload (rows
//! = figures, columns = engine configurations with the median and min..max
//! over repeats, then quietkv's median over each peer's) and the same
//! figures for report.json. Phases the machine disturbed
//! ([`Phase::judge`]) are listed, and left out of the medians.

use serde_json::{json, Value};

use super::one_run::Run;
use super::phase::Phase;
use crate::report::peers::engine_of;
use crate::report::{stat_of, Stat};

/// A figure of a workload: its row label, its JSON key, how to read it from
/// a run's phase, and its decimals.
struct Figure {
    label: &'static str,
    key: &'static str,
    get: fn(&Phase) -> Option<f64>,
    decimals: usize,
}

const FIGURES: [Figure; 14] = [
    Figure {
        label: "ops/s",
        key: "ops_s",
        get: |p| Some(p.ops_s),
        decimals: 0,
    },
    Figure {
        label: "latency p50 us",
        key: "p50_us",
        get: |p| p.p50_us,
        decimals: 1,
    },
    Figure {
        label: "latency p99 us",
        key: "p99_us",
        get: |p| p.p99_us,
        decimals: 1,
    },
    Figure {
        label: "latency p99.9 us",
        key: "p999_us",
        get: |p| p.p999_us,
        decimals: 1,
    },
    Figure {
        label: "CPU us/op (process, all threads)",
        key: "cpu_us_per_op",
        get: |p| p.cpu_us_per_op,
        decimals: 2,
    },
    Figure {
        label: "write amplification (device / user bytes)",
        key: "write_amp",
        get: |p| p.write_amp,
        decimals: 2,
    },
    Figure {
        label: "device reads KiB/op (what every cache missed)",
        key: "device_read_kib_per_op",
        get: |p| p.device_read_bytes_per_op.map(|b| b / 1024.0),
        decimals: 2,
    },
    Figure {
        label: "L0 tables left after the catch-up (compaction left for later)",
        key: "l0_tables_after",
        get: |p| p.l0_tables_after.map(|n| n as f64),
        decimals: 0,
    },
    Figure {
        label: "space amplification (on disk / live user bytes)",
        key: "space_amp",
        get: |p| p.space_amp,
        decimals: 2,
    },
    Figure {
        label: "peak RSS MiB (VmHWM since the workload began)",
        key: "peak_rss_mib",
        get: |p| p.peak_rss_bytes.map(|b| b as f64 / (1 << 20) as f64),
        decimals: 0,
    },
    Figure {
        label: "memory added MiB (that peak less the RSS at its start)",
        key: "rss_growth_mib",
        get: |p| p.rss_growth_bytes.map(|b| b as f64 / (1 << 20) as f64),
        decimals: 0,
    },
    Figure {
        label: "page cache MiB in the process's memory cgroup at the end",
        key: "page_cache_mib",
        get: |p| p.page_cache_bytes.map(|b| b as f64 / (1 << 20) as f64),
        decimals: 0,
    },
    Figure {
        label: "CPU steal ms/s (the machine's, during the workload)",
        key: "steal_ms_per_s",
        get: |p| p.host.steal_ms_per_s,
        decimals: 0,
    },
    Figure {
        label: "paced writes done beside the reads",
        key: "side_writes",
        get: |p| p.side_writes.map(|w| w as f64),
        decimals: 0,
    },
];

/// The phases of `mode`'s runs for `workload`, disturbed ones included.
fn phases<'a>(
    runs: &'a [&Run],
    mode: &'a str,
    workload: &'a str,
) -> impl Iterator<Item = &'a Phase> {
    runs.iter()
        .filter(move |r| r.mode == mode)
        .filter_map(move |r| r.phases.iter().find(|p| p.workload == workload))
}

/// The figure's values over the runs of `mode` for `workload`, from the
/// phases that count (the machine left them alone).
fn values(runs: &[&Run], mode: &str, workload: &str, f: &Figure) -> Vec<f64> {
    phases(runs, mode, workload)
        .filter(|p| p.counts())
        .filter_map(|p| (f.get)(p))
        .filter(|v| v.is_finite())
        .collect()
}

/// The phases of `mode` for `workload` that count, and all of them.
fn clean_of(runs: &[&Run], mode: &str, workload: &str) -> (usize, usize) {
    let all: Vec<&Phase> = phases(runs, mode, workload).collect();
    (all.iter().filter(|p| p.counts()).count(), all.len())
}

/// Whether a mode with `clean` of `all` phases counted is compared: with
/// two or more repeats, at least two clean ones, so that no ratio rests
/// on a single phase when repeats were asked for.
fn ranked((clean, all): (usize, usize)) -> bool {
    clean >= all.min(2) && clean > 0
}

fn cell(s: &Stat, d: usize) -> String {
    if s.n > 1 {
        format!("{:.d$} ({:.d$}..{:.d$})", s.median, s.min, s.max)
    } else {
        format!("{:.d$}", s.median)
    }
}

/// The (quietkv configuration, peer configuration) pairs the ratio columns
/// compare; none when a single engine runs.
pub fn ratio_pairs(modes: &[String]) -> Vec<(String, String)> {
    let ours: Vec<&String> = modes
        .iter()
        .filter(|m| engine_of(m) == Some("quietkv"))
        .collect();
    let peers: Vec<&String> = modes
        .iter()
        .filter(|m| engine_of(m).is_some_and(|e| e != "quietkv"))
        .collect();
    ours.iter()
        .flat_map(|q| peers.iter().map(move |p| (q.to_string(), p.to_string())))
        .collect()
}

/// One workload's table: the figures some run has, one column per mode,
/// then the ratio of medians for each quietkv/peer pair ("n/r", not
/// ranked, where a side has too few phases the machine left alone); a
/// row of clean phases when the machine disturbed some.
pub fn workload_table(runs: &[&Run], modes: &[String], workload: &str) -> String {
    let pairs = ratio_pairs(modes);
    let counts: Vec<(usize, usize)> = modes.iter().map(|m| clean_of(runs, m, workload)).collect();
    let mut out = String::from("| figure |");
    for m in modes {
        out.push_str(&format!(" {m} |"));
    }
    for (q, p) in &pairs {
        out.push_str(&format!(" {q} / {p} |"));
    }
    out.push_str("\n|---|");
    for _ in 0..modes.len() + pairs.len() {
        out.push_str("---|");
    }
    out.push('\n');
    for f in &FIGURES {
        let stats: Vec<Option<Stat>> = modes
            .iter()
            .map(|m| stat_of(values(runs, m, workload, f)))
            .collect();
        if stats.iter().all(Option::is_none) {
            continue;
        }
        out.push_str(&format!("| {} |", f.label));
        for s in &stats {
            match s {
                Some(s) => out.push_str(&format!(" {} |", cell(s, f.decimals))),
                None => out.push_str(" - |"),
            }
        }
        for (q, p) in &pairs {
            let med = |m: &str| {
                let i = modes.iter().position(|x| x == m)?;
                stats[i].map(|s| s.median)
            };
            let both_ranked = [q, p].iter().all(|m| {
                modes
                    .iter()
                    .position(|x| x == *m)
                    .is_some_and(|i| ranked(counts[i]))
            });
            match (med(q), med(p)) {
                (Some(_), Some(_)) if !both_ranked => out.push_str(" n/r |"),
                (Some(a), Some(b)) if b > 0.0 => out.push_str(&format!(" {:.2} |", a / b)),
                _ => out.push_str(" - |"),
            }
        }
        out.push('\n');
    }
    if counts.iter().any(|(clean, all)| clean < all) {
        out.push_str("| phases the machine left alone |");
        for (clean, all) in &counts {
            out.push_str(&format!(" {clean} of {all} |"));
        }
        for _ in &pairs {
            out.push_str(" |");
        }
        out.push('\n');
    }
    out
}

/// The phases the machine disturbed, a line each with its reasons, and
/// what was done with them; empty if none.
pub fn disturbed_markdown(runs: &[&Run]) -> String {
    let mut out = String::new();
    for r in runs {
        for p in r.phases.iter().filter(|p| !p.disturbed.is_empty()) {
            out.push_str(&format!(
                "- {} #{} {}: {}{}\n",
                r.mode,
                r.repeat,
                p.workload,
                p.disturbed.join("; "),
                if p.disturbed_kept {
                    " (kept in the medians as asked: --keep-disturbed)"
                } else {
                    ""
                }
            ));
        }
    }
    out
}

/// The workloads of `runs`, in the order the runs did them.
pub fn workloads_of(runs: &[&Run]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in runs {
        for p in &r.phases {
            if !v.contains(&p.workload) {
                v.push(p.workload.clone());
            }
        }
    }
    v
}

/// One section (one value size): a heading and a table per workload.
pub fn section_markdown(
    runs: &[&Run],
    modes: &[String],
    title: &str,
    what: &dyn Fn(&str) -> String,
) -> String {
    let mut out = format!("## {title}\n\n");
    for w in workloads_of(runs) {
        out.push_str(&format!("### {w}\n\n{}\n\n", what(&w)));
        out.push_str(&workload_table(runs, modes, &w));
        out.push('\n');
    }
    let disturbed = disturbed_markdown(runs);
    if !disturbed.is_empty() {
        out.push_str(&format!(
            "### Phases the machine disturbed\n\nLeft out of the medians above (unless kept as asked); \"n/r\" marks a ratio whose side kept fewer than two phases.\n\n{disturbed}\n"
        ));
    }
    out
}

/// A section's figures for report.json: per workload, per mode, per
/// figure, the median, min, max and run count.
pub fn section_json(runs: &[&Run], modes: &[String]) -> Value {
    let workloads: Vec<Value> = workloads_of(runs)
        .iter()
        .map(|w| {
            let per_mode: serde_json::Map<String, Value> = modes
                .iter()
                .map(|m| {
                    let figs: serde_json::Map<String, Value> = FIGURES
                        .iter()
                        .filter_map(|f| {
                            let s = stat_of(values(runs, m, w, f))?;
                            Some((f.key.to_string(), json!(s)))
                        })
                        .collect();
                    (m.clone(), Value::Object(figs))
                })
                .collect();
            json!({"workload": w, "figures": per_mode})
        })
        .collect();
    json!(workloads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::standard::measure::Cost;

    fn run(mode: &str, repeat: u32, ops_s: f64) -> Run {
        let cost = Cost {
            seconds: 1.0,
            cpu_seconds: Some(1.0),
            device_write_bytes: Some(2000),
            device_read_bytes: Some(500),
            page_cache_bytes: None,
            peak_rss_bytes: Some(100 << 20),
            start_rss_bytes: Some(60 << 20),
            host: Default::default(),
        };
        let mut fill = Phase::new("fillrandom", ops_s as u64, 1.0, None, &cost, 1000);
        fill.space_amp = Some(1.1);
        let read = Phase::new("readseq", ops_s as u64, 1.0, None, &cost, 0);
        Run {
            mode: mode.into(),
            process_id: 1,
            repeat,
            value_size: 100,
            keys: 10,
            compact_seconds: 0.1,
            phases: vec![fill, read],
        }
    }

    /// Three rounds of quietkv against RocksDB, in the order they ran.
    fn three_rounds() -> Vec<Run> {
        vec![
            run("quietkv:auto", 0, 300.0),
            run("rocksdb:buffered", 0, 100.0),
            run("quietkv:auto", 1, 500.0),
            run("rocksdb:buffered", 1, 200.0),
            run("quietkv:auto", 2, 400.0),
            run("rocksdb:buffered", 2, 150.0),
        ]
    }

    #[test]
    fn a_table_per_workload_with_medians_ranges_and_ratios() {
        let runs = three_rounds();
        let refs: Vec<&Run> = runs.iter().collect();
        let modes = vec!["quietkv:auto".to_string(), "rocksdb:buffered".to_string()];
        let md = section_markdown(&refs, &modes, "100-byte values", &|w| format!("about {w}"));
        assert!(md.contains("### fillrandom\n\nabout fillrandom"), "{md}");
        assert!(
            md.contains(
                "| figure | quietkv:auto | rocksdb:buffered | quietkv:auto / rocksdb:buffered |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| ops/s | 400 (300..500) | 150 (100..200) | 2.67 |"),
            "{md}"
        );
        assert!(
            md.contains("| write amplification (device / user bytes) | 2.00 (2.00..2.00) |"),
            "{md}"
        );
        // A read workload has no write or space amplification row.
        let readseq = &md[md.find("### readseq").unwrap()..];
        assert!(!readseq.contains("write amplification"), "{readseq}");
        assert!(!readseq.contains("latency p50"), "{readseq}");
        let j = section_json(&refs, &modes);
        assert_eq!(j[0]["workload"], "fillrandom");
        assert_eq!(j[0]["figures"]["quietkv:auto"]["ops_s"]["median"], 400.0);
        assert_eq!(j[0]["figures"]["rocksdb:buffered"]["space_amp"]["n"], 3);
        assert_eq!(
            j[0]["figures"]["rocksdb:buffered"]["rss_growth_mib"]["median"],
            40.0
        );
        // One engine: no ratio columns.
        assert!(ratio_pairs(&["auto".to_string()]).is_empty());
        assert!(!md.contains("left alone"), "{md}");
    }

    #[test]
    fn disturbed_phases_leave_the_medians_and_too_few_go_unranked() {
        let mut runs = three_rounds();
        // quietkv's best fill and two of RocksDB's reads were disturbed.
        runs[2].phases[0].host.steal_ms_per_s = Some(300.0);
        runs[2].phases[0].judge(false);
        for i in [1, 3] {
            runs[i].phases[1].host.other_cpu_ms_per_s = Some(900.0);
            runs[i].phases[1].judge(false);
        }
        let refs: Vec<&Run> = runs.iter().collect();
        let modes = vec!["quietkv:auto".to_string(), "rocksdb:buffered".to_string()];
        let md = section_markdown(&refs, &modes, "100-byte values", &|_| String::new());
        let fill = &md[md.find("### fillrandom").unwrap()..md.find("### readseq").unwrap()];
        assert!(
            fill.contains("| ops/s | 350 (300..400) | 150 (100..200) | 2.33 |"),
            "{fill}"
        );
        assert!(
            fill.contains("| phases the machine left alone | 2 of 3 | 3 of 3 | |"),
            "{fill}"
        );
        let read = &md[md.find("### readseq").unwrap()..];
        assert!(
            read.contains("| ops/s | 400 (300..500) | 150 | n/r |"),
            "{read}"
        );
        assert!(
            md.contains("- quietkv:auto #1 fillrandom: CPU steal 300 ms/s in the fillrandom phase (limit 100)"),
            "{md}"
        );
        let j = section_json(&refs, &modes);
        assert_eq!(j[0]["figures"]["quietkv:auto"]["ops_s"]["n"], 2);
        // Kept as asked, they count again.
        for r in &mut runs {
            for p in &mut r.phases {
                if !p.disturbed.is_empty() {
                    p.judge(true);
                }
            }
        }
        let refs: Vec<&Run> = runs.iter().collect();
        let md = section_markdown(&refs, &modes, "100-byte values", &|_| String::new());
        assert!(
            md.contains("| ops/s | 400 (300..500) | 150 (100..200) | 2.67 |"),
            "{md}"
        );
        assert!(md.contains("kept in the medians as asked"), "{md}");
    }
}
