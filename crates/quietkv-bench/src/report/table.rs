//! The report's tables: the rows every section shows (laid out like the
//! seeds' tables: rows = metrics, columns = modes, then "vs buffered"
//! ratio columns), how a cell and a ratio are written, and the table of a
//! section with its values and any pairs of modes to compare.

use std::collections::BTreeMap;

use super::model::{ExperimentReport, ModeReport, Stat};

/// How a metric's cell is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fmt {
    /// Microseconds, shown as us below 1 ms, else ms.
    Us,
    Ms,
    Int,
    Float2,
    /// A 0..1 fraction as a percentage.
    Fraction,
    Pct,
    MiB,
    MiBs,
    Secs,
}

/// How a mode compares with the reference mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `8.5x lower` / `2.0x higher`.
    Lower,
    /// `41x reduction` / `2.0x increase`.
    Reduction,
    /// `4.0x shallower` / `2.0x deeper`.
    Shallower,
    /// Signed percent change: `-32%`.
    Percent,
    /// Percentage points of a 0..1 fraction: `+1.5 pp`.
    Points,
    None,
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    pub label: &'static str,
    pub key: String,
    pub fmt: Fmt,
    pub cmp: Cmp,
}

/// The rows every experiment shows, in the seeds' order: label, metric
/// key, how its cell is written and how a mode compares with the reference.
/// Kept one row a line so the table reads as a table.
#[rustfmt::skip]
const STANDARD_ROWS: &[(&str, &str, Fmt, Cmp)] = {
    use Cmp::*;
    use Fmt::*;
    &[
        ("**Throughput (reads/s)**", "ops_per_s", Int, Percent),
        ("p50 read latency", "read_latency_us.p50", Us, Lower),
        ("p90 read latency", "read_latency_us.p90", Us, Lower),
        ("**p99 read latency**", "read_latency_us.p99", Us, Lower),
        ("**p99.9 read latency**", "read_latency_us.p999", Us, Lower),
        ("p99.99 read latency", "read_latency_us.p9999", Us, Lower),
        ("Max read latency", "read_latency_us.max", Us, Lower),
        ("Mean read latency", "read_latency_us.mean", Us, Lower),
        ("StdDev", "read_latency_us.stddev", Us, Lower),
        ("p99 service time (issue to completion)", "service_time_us.p99", Us, Lower),
        ("p99.9 service time", "service_time_us.p999", Us, Lower),
        ("Reader lateness p50 (scheduled to issued)", "reader_lateness_us.p50", Us, None),
        ("Reader lateness p99", "reader_lateness_us.p99", Us, None),
        ("Reader lateness max", "reader_lateness_us.max", Us, None),
        ("Reader lateness mean", "reader_lateness_us.mean", Us, None),
        ("Reader CPU wait per read (run queue)", "reader_cpu_wait_us_per_read", Us, None),
        ("Baseline p50 (no background work)", "baseline_read_latency_us.p50", Us, Lower),
        ("p99 during the compaction", "during.read_latency_us.p99", Us, Lower),
        ("p99.9 during the compaction", "during.read_latency_us.p999", Us, Lower),
        ("p99 after its last install", "after.read_latency_us.p99", Us, Lower),
        ("p99.9 after its last install", "after.read_latency_us.p999", Us, Lower),
        ("Baseline p99", "baseline_read_latency_us.p99", Us, Lower),
        ("Baseline p99.9", "baseline_read_latency_us.p999", Us, Lower),
        ("Reads done", "reads.done", Int, None),
        ("Reads scheduled", "reads.scheduled", Int, None),
        ("Cache hit ratio (reads that needed no device read)", "cache_hit_ratio", Fraction, Points),
        ("Cache hit ratio during the compaction", "during.cache_hit_ratio", Fraction, Points),
        ("Cache hit ratio after its last install", "after.cache_hit_ratio", Fraction, Points),
        ("**Dirty pages/s**", "dirty_pages_per_s", Int, Reduction),
        ("**Stall time (us/s)**", "stall_us_per_s", Int, Percent),
        ("CPU steal (host ran something else), ms/s", "steal_ms_per_s", Int, None),
        ("Other processes' CPU, ms/s", "other_cpu_ms_per_s", Int, None),
        ("Longest device stall, ms (requests held, none completed)", "device.longest_stall_ms", Int, None),
        ("Longest stall its own queue does not explain, ms", "device.longest_held_ms", Int, None),
        ("Device stalled, ms/s", "device.stalled_ms_per_s", Float2, None),
        ("Refaults/s", "refaults_per_s", Int, Reduction),
        ("File pages scanned/s", "pgscan_file_per_s", Int, Reduction),
        ("File pages reclaimed/s", "pgsteal_file_per_s", Int, Reduction),
        ("Active file cache", "active_file_bytes", MiB, Percent),
        ("Inactive file cache", "inactive_file_bytes", MiB, Percent),
        ("Device read latency (r_await)", "device.r_await_ms", Ms, Percent),
        ("**Device write latency (w_await)**", "device.w_await_ms", Ms, Lower),
        ("Device queue depth (aqu-sz)", "device.aqu_sz", Float2, Shallower),
        ("Device utilisation", "device.util_pct", Pct, None),
        ("Device reads/s", "device.r_per_s", Int, None),
        ("Device writes/s", "device.w_per_s", Int, None),
        ("Device read MiB/s", "device.r_mib_s", MiBs, None),
        ("Device write MiB/s", "device.w_mib_s", MiBs, None),
        ("Background (compaction) throughput", "compaction_mib_s", MiBs, Percent),
        ("Background seconds", "compaction_seconds", Secs, None),
        ("CPU time, exact (scheduler runtime)", "cpu.run_s", Secs, Percent),
        ("CPU user", "cpu.user_s", Secs, Percent),
        ("CPU system", "cpu.sys_s", Secs, Percent),
        ("CPU user, % of all CPUs", "cpu.user_pct", Pct, Percent),
        ("**CPU system, % of all CPUs**", "cpu.sys_pct", Pct, Percent),
        ("Machine CPU user (all processes)", "system_cpu.user_s", Secs, Percent),
        ("Machine CPU system (all processes, kswapd, interrupts)", "system_cpu.sys_s", Secs, Percent),
        ("Machine CPU iowait", "system_cpu.iowait_s", Secs, None),
    ]
};

/// The rows every experiment shows, in the seeds' order.
pub fn standard_rows() -> Vec<Row> {
    STANDARD_ROWS
        .iter()
        .map(|&(label, key, fmt, cmp)| Row {
            label,
            key: key.to_string(),
            fmt,
            cmp,
        })
        .collect()
}

fn thousands(v: f64) -> String {
    let neg = v < 0.0;
    let s = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if neg {
        format!("-{out}")
    } else {
        out
    }
}

/// A number in a format, without unit when `bare`.
pub fn fmt_value(v: f64, fmt: Fmt) -> String {
    match fmt {
        Fmt::Us if v >= 1000.0 => format!("{:.2} ms", v / 1000.0),
        Fmt::Us => format!("{v:.0} us"),
        Fmt::Ms => format!("{v:.3} ms"),
        Fmt::Int => thousands(v),
        Fmt::Float2 => format!("{v:.2}"),
        Fmt::Fraction => format!("{:.1}%", v * 100.0),
        Fmt::Pct => format!("{v:.1}%"),
        Fmt::MiB => format!("{:.0} MiB", v / (1 << 20) as f64),
        Fmt::MiBs => format!("{v:.0} MiB/s"),
        Fmt::Secs => format!("{v:.2} s"),
    }
}

fn fmt_range(s: &Stat, fmt: Fmt) -> String {
    let m = fmt_value(s.median, fmt);
    if s.n > 1 {
        format!("{m} ({}..{})", fmt_value(s.min, fmt), fmt_value(s.max, fmt))
    } else {
        m
    }
}

fn times(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}x")
    } else {
        format!("{r:.1}x")
    }
}

/// The ratio text of `value` against `base` (the reference mode's).
pub fn compare(base: f64, value: f64, cmp: Cmp) -> String {
    let (better, worse) = match cmp {
        Cmp::Lower => ("lower", "higher"),
        Cmp::Reduction => ("reduction", "increase"),
        Cmp::Shallower => ("shallower", "deeper"),
        Cmp::Points => {
            let d = (value - base) * 100.0;
            return if d.abs() < 0.05 {
                "same".into()
            } else {
                format!("{d:+.1} pp")
            };
        }
        Cmp::Percent => {
            if base == 0.0 {
                return if value == 0.0 {
                    "same".into()
                } else {
                    "from 0".into()
                };
            }
            let d = (value - base) / base * 100.0;
            return if d.abs() < 1.0 {
                "~same".into()
            } else {
                format!("{d:+.0}%")
            };
        }
        Cmp::None => return String::new(),
    };
    if base == 0.0 && value == 0.0 {
        return "same".into();
    }
    if value <= 0.0 {
        return format!("to 0 ({better})");
    }
    if base <= 0.0 {
        return format!("from 0 ({worse})");
    }
    let r = base / value;
    if (0.95..=1.05).contains(&r) {
        "~same".into()
    } else if r > 1.0 {
        format!("{} {better}", times(r))
    } else {
        format!("{} {worse}", times(1.0 / r))
    }
}

fn reference(e: &ExperimentReport) -> Option<&ModeReport> {
    e.modes
        .iter()
        .find(|m| m.name == "buffered")
        .or_else(|| e.modes.first())
}

/// The experiment's Markdown table (no header).
pub fn markdown_table(e: &ExperimentReport) -> String {
    let refm = reference(e).map(|m| m.name.clone()).unwrap_or_default();
    let ref_idx = e.modes.iter().position(|m| m.name == refm).unwrap_or(0);
    let pairs: Vec<(usize, usize)> = (0..e.modes.len())
        .filter(|&i| i != ref_idx)
        .map(|i| (i, ref_idx))
        .collect();
    render_table(e, true, &pairs)
}

/// A table of `e`'s rows: one column per mode with its values (when
/// `values`), then one per `(mode, reference)` pair (indices into
/// `e.modes`) with the ratio of the mode against the reference.
pub fn render_table(e: &ExperimentReport, values: bool, pairs: &[(usize, usize)]) -> String {
    let stats: Vec<BTreeMap<String, Stat>> = e.modes.iter().map(|m| m.stats()).collect();
    let mut rows = standard_rows();
    // Experiment-specific numbers follow the standard rows.
    let mut extra: Vec<String> = stats
        .iter()
        .flat_map(|s| s.keys().filter(|k| k.starts_with("extra.")).cloned())
        .collect();
    extra.sort();
    extra.dedup();
    for k in extra {
        rows.push(Row {
            label: "",
            key: k,
            fmt: Fmt::Float2,
            cmp: Cmp::Percent,
        });
    }
    let value_cols = if values { e.modes.len() } else { 0 };
    let mut out = String::new();
    out.push_str("| Metric |");
    if values {
        for m in &e.modes {
            out.push_str(&format!(" {} |", m.name));
        }
    }
    for &(i, r) in pairs {
        out.push_str(&format!(" {} vs {} |", e.modes[i].name, e.modes[r].name));
    }
    out.push('\n');
    out.push_str(&"|---".repeat(1 + value_cols + pairs.len()));
    out.push_str("|\n");
    for r in rows {
        if stats.iter().all(|s| !s.contains_key(&r.key)) {
            continue;
        }
        if !values && r.cmp == Cmp::None {
            continue;
        }
        let label = if r.label.is_empty() {
            r.key.trim_start_matches("extra.").to_string()
        } else {
            r.label.to_string()
        };
        out.push_str(&format!("| {label} |"));
        if values {
            for s in &stats {
                match s.get(&r.key) {
                    Some(st) => out.push_str(&format!(" {} |", fmt_range(st, r.fmt))),
                    None => out.push_str(" n/a |"),
                }
            }
        }
        for &(i, refi) in pairs {
            let txt = match (stats[refi].get(&r.key), stats[i].get(&r.key)) {
                (Some(a), Some(b)) => compare(a.median, b.median, r.cmp),
                _ => String::new(),
            };
            out.push_str(&format!(" {txt} |"));
        }
        out.push('\n');
    }
    out
}
