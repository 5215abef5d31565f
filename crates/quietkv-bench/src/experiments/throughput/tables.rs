//! The throughput experiment's report: the Markdown table (one row per
//! metric, one column per mode, median with min..max) and the same-work
//! rule applied to the full compaction, each engine's modes against its
//! own buffered one.

use super::one_run::{Params, Run};
use crate::cpu::CpuSource;
use crate::report::peers::engine_of;
use crate::report::stat_of;
use crate::report::verdict::{
    judge, not_same_work_line, ModeFigures, SectionFigures, SectionJudgement, Standing, Work,
};

/// Median, min and max of `v`, which is not empty.
fn median(v: Vec<f64>) -> (f64, f64, f64) {
    let s = stat_of(v).expect("a metric of at least one run");
    (s.median, s.min, s.max)
}

/// The same-work rule applied to `compact_all`: a mode whose compaction
/// MiB/s fell more than 10% below buffered's is not the same work. With
/// several engines (`engine:config` names), each engine's modes against
/// its own buffered: one judgement per engine, with its name prefix
/// (`rocksdb:`; empty for bare names).
pub fn judge_compaction(p: &Params, runs: &[Run]) -> Vec<(String, SectionJudgement)> {
    let mut prefixes: Vec<String> = Vec::new();
    for m in &p.modes {
        let pre = engine_of(m).map(|e| format!("{e}:")).unwrap_or_default();
        if !prefixes.contains(&pre) {
            prefixes.push(pre);
        }
    }
    prefixes
        .into_iter()
        .map(|pre| {
            let modes = p
                .modes
                .iter()
                .filter(|m| m.starts_with(&pre) && (!pre.is_empty() || engine_of(m).is_none()))
                .filter_map(|m| {
                    let rates: Vec<f64> = runs
                        .iter()
                        .filter(|r| &r.mode == m)
                        .map(|r| r.compact_mib_s)
                        .collect();
                    let written: Vec<f64> = runs
                        .iter()
                        .filter(|r| &r.mode == m)
                        .map(|r| r.compact_written_mib)
                        .collect();
                    if rates.is_empty() {
                        return None;
                    }
                    let rate = median(rates).0;
                    Some(ModeFigures {
                        name: m[pre.len()..].to_string(),
                        p99_us: None,
                        p999_us: None,
                        background_mib_s: rate,
                        background_read_mib_s: 0.0,
                        background_write_mib_s: rate,
                        background_mib: median(written).0,
                        ..Default::default()
                    })
                })
                .collect();
            let j = judge(&SectionFigures {
                id: "throughput".into(),
                experiment: "throughput".into(),
                work: Work::Flat,
                hot_bytes: 0,
                memory_limit_bytes: None,
                modes,
            });
            (pre, j)
        })
        .collect()
}

/// One line per mode other than its engine's buffered: the same work or
/// not, and what it would take.
pub fn same_work_lines(judged: &[(String, SectionJudgement)]) -> Vec<String> {
    let mut v = Vec::new();
    for (pre, j) in judged {
        v.extend(j.modes.iter().filter_map(|m| match &m.standing {
            Standing::Reference => None,
            Standing::SameWork => Some(format!(
                "{pre}{}: the same work (compact_all {:.0} MiB/s, {:+.0}% against {pre}buffered).",
                m.name, m.background_mib_s, m.speed_pct
            )),
            Standing::NotSameWork { .. } => {
                not_same_work_line(j, m).map(|l| format!("**Not the same work:** {pre}{l}"))
            }
            Standing::Unranked { why } => Some(format!("{pre}{}: not ranked ({why}).", m.name)),
        }));
    }
    v
}

/// A Markdown table: one row per metric, one column per mode, median with
/// min..max when repeated.
pub fn markdown(p: &Params, runs: &[Run], header: &str) -> String {
    let mut out = String::new();
    out.push_str(header);
    out.push_str(&format!(
        "\n{} keys x {} B values ({:.1} GiB), {} random reads, {} repeat(s), modes interleaved; \
         median (min..max).\n\n",
        p.keys,
        p.value_size,
        p.keys as f64 * p.value_size as f64 / (1u64 << 30) as f64,
        p.reads,
        p.repeats
    ));
    out.push_str("| metric |");
    for m in &p.modes {
        out.push_str(&format!(" {m} |"));
    }
    out.push_str("\n|---|");
    for _ in &p.modes {
        out.push_str("---|");
    }
    out.push('\n');
    type Get = fn(&Run) -> f64;
    let rows: [(&str, Get, usize); 12] = [
        ("fill MiB/s", |r| r.fill_mib_s, 1),
        ("fill ops/s", |r| r.fill_ops_s, 0),
        // NaN: the engine does not count it; shown as '-'.
        (
            "write stalls during fill, s",
            |r| r.fill_write_stall_s.unwrap_or(f64::NAN),
            1,
        ),
        ("compaction catch-up after fill, s", |r| r.settle_seconds, 2),
        ("fill + catch-up MiB/s", |r| r.fill_settled_mib_s, 1),
        ("random read ops/s (cold cache)", |r| r.read_ops_s, 0),
        ("random read p50 us", |r| r.read_p50_us, 1),
        ("random read p99 us", |r| r.read_p99_us, 1),
        ("compact_all seconds", |r| r.compact_seconds, 2),
        ("compact_all MiB/s written", |r| r.compact_mib_s, 1),
        ("CPU user s (whole run)", |r| r.cpu_user_s, 1),
        ("CPU sys s (whole run)", |r| r.cpu_sys_s, 1),
    ];
    for (name, get, prec) in rows {
        out.push_str(&format!("| {name} |"));
        for m in &p.modes {
            let vals: Vec<f64> = runs
                .iter()
                .filter(|r| &r.mode == m)
                .map(get)
                .filter(|v| !v.is_nan())
                .collect();
            if vals.is_empty() {
                out.push_str(" - |");
                continue;
            }
            let (med, lo, hi) = median(vals.clone());
            if vals.len() > 1 {
                out.push_str(&format!(" {med:.prec$} ({lo:.prec$}..{hi:.prec$}) |"));
            } else {
                out.push_str(&format!(" {med:.prec$} |"));
            }
        }
        out.push('\n');
    }
    let sources: Vec<CpuSource> = runs.iter().map(|r| r.cpu_source).collect();
    out.push_str(&format!("\n{}\n", CpuSource::describe(&sources)));
    let lines = same_work_lines(&judge_compaction(p, runs));
    if !lines.is_empty() {
        out.push_str("\nSame work (compact_all MiB/s within 10% of the same engine's buffered or above):\n\n");
        for l in lines {
            out.push_str(&format!("- {l}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn run(mode: &str, repeat: u32, compact_mib_s: f64) -> Run {
        Run {
            mode: mode.into(),
            repeat,
            fill_seconds: 10.0,
            fill_mib_s: 400.0,
            fill_ops_s: 100_000.0,
            settle_seconds: 1.0,
            fill_write_stall_s: Some(0.0),
            fill_settled_mib_s: 4096.0 / 11.0,
            read_ops_s: 5000.0,
            read_p50_us: 100.0,
            read_p99_us: 900.0,
            compact_seconds: 4096.0 / compact_mib_s,
            compact_mib_s,
            compact_read_mib: 4096.0,
            compact_written_mib: 4096.0,
            cpu_user_s: 10.0,
            cpu_sys_s: 5.0,
            cpu_source: CpuSource::Cpuacct,
        }
    }

    /// A small run's parameters: `repeats` of each of `modes`.
    fn params(modes: &[&str], repeats: u32) -> Params {
        Params {
            keys: 1000,
            value_size: 4096,
            reads: 10,
            modes: modes.iter().map(|m| m.to_string()).collect(),
            repeats,
            dir: PathBuf::from("/nonexistent"),
        }
    }

    #[test]
    fn a_compaction_more_than_ten_percent_slower_is_not_the_same_work() {
        let p = params(&["buffered", "direct", "auto"], 2);
        let runs = vec![
            run("buffered", 0, 300.0),
            run("direct", 0, 200.0),
            run("auto", 0, 290.0),
            run("buffered", 1, 320.0),
            run("direct", 1, 220.0),
            run("auto", 1, 310.0),
        ];
        let judged = judge_compaction(&p, &runs);
        assert_eq!(judged.len(), 1);
        let j = &judged[0].1;
        assert!(matches!(
            j.mode("direct").unwrap().standing,
            Standing::NotSameWork { .. }
        ));
        assert_eq!(j.mode("auto").unwrap().standing, Standing::SameWork);
        let md = markdown(&p, &runs, "# t\n");
        assert!(
            md.contains("**Not the same work:** direct did 210 MiB/s of background work, 32% below buffered's 310 MiB/s"),
            "{md}"
        );
        assert!(md.contains("so it is not recommended"), "{md}");
        assert!(
            md.contains("make direct compact at 279 MiB/s or more"),
            "{md}"
        );
        assert!(
            md.contains("auto: the same work (compact_all 300 MiB/s, -3% against buffered)"),
            "{md}"
        );
    }

    #[test]
    fn a_stall_the_engine_does_not_count_is_a_dash_not_a_zero() {
        let p = params(&["quietkv:auto", "fjall:buffered"], 1);
        let mut counted = run("quietkv:auto", 0, 300.0);
        counted.fill_write_stall_s = Some(2.5);
        let mut uncounted = run("fjall:buffered", 0, 300.0);
        uncounted.fill_write_stall_s = None;
        let md = markdown(&p, &[counted, uncounted], "# t\n");
        assert!(
            md.contains("| write stalls during fill, s | 2.5 | - |"),
            "{md}"
        );
        assert!(
            md.contains("| fill + catch-up MiB/s | 372.4 | 372.4 |"),
            "{md}"
        );
    }

    #[test]
    fn with_several_engines_each_is_judged_against_its_own_buffered() {
        let p = params(
            &[
                "quietkv:buffered",
                "rocksdb:buffered",
                "rocksdb:both-direct",
                "fjall:buffered",
            ],
            1,
        );
        let runs = vec![
            run("quietkv:buffered", 0, 300.0),
            run("rocksdb:buffered", 0, 100.0),
            run("rocksdb:both-direct", 0, 80.0),
            run("fjall:buffered", 0, 50.0),
        ];
        let judged = judge_compaction(&p, &runs);
        let pres: Vec<&str> = judged.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(pres, ["quietkv:", "rocksdb:", "fjall:"]);
        // fjall at a sixth of quietkv's speed is its own reference, not
        // "short" of quietkv's work; both-direct is 20% short of RocksDB's.
        let md = markdown(&p, &runs, "# t\n");
        assert!(md.contains("| metric | quietkv:buffered | rocksdb:buffered | rocksdb:both-direct | fjall:buffered |"), "{md}");
        assert!(
            md.contains("**Not the same work:** rocksdb:both-direct did 80 MiB/s of background work, 20% below buffered's 100 MiB/s"),
            "{md}"
        );
        assert!(!md.contains("fjall:buffered did"), "{md}");
    }
}
