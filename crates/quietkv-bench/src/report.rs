//! The report: per-mode medians (min..max over repeats), the Markdown table
//! laid out like the seeds' tables (rows = metrics, columns = modes, then
//! "vs buffered" ratio columns), and `report.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::engines::PageCacheUse;
use crate::result::RunResult;
use crate::verdict::{self, Standing};

/// The machine the benchmark ran on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpus: usize,
    pub memory_bytes: u64,
    pub filesystem: String,
    pub device: Option<String>,
    pub dir: String,
}

/// The runs of one mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModeReport {
    pub name: String,
    pub runs: Vec<RunResult>,
    /// What the mode's configuration does to the page cache (for the
    /// verdict's recommendation); `None` where no engine was configured.
    #[serde(default)]
    pub page_cache: Option<PageCacheUse>,
    /// Runs the machine disturbed (see [`crate::disturbance`]): reported,
    /// left out of every median.
    #[serde(default)]
    pub disturbed: Vec<crate::disturbance::DisturbedRun>,
    /// Clean runs asked for (`--repeats`); 0 in reports written before
    /// runs were judged, where every run counts.
    #[serde(default)]
    pub asked: u32,
}

/// Median, min and max of one metric over a mode's runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

pub fn stat_of(mut v: Vec<f64>) -> Option<Stat> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Stat {
        median,
        min: v[0],
        max: v[n - 1],
        n,
    })
}

impl ModeReport {
    /// A mode with no runs yet, `asked` clean runs wanted.
    pub fn new(name: impl Into<String>, page_cache: Option<PageCacheUse>, asked: u32) -> Self {
        ModeReport {
            name: name.into(),
            runs: Vec::new(),
            page_cache,
            disturbed: Vec::new(),
            asked,
        }
    }

    /// Clean runs it got and clean runs it was asked for.
    pub fn clean_of_asked(&self) -> (usize, usize) {
        let asked = if self.asked == 0 {
            self.runs.len()
        } else {
            self.asked as usize
        };
        (self.runs.len(), asked)
    }

    /// A line saying which runs the machine disturbed, if any did.
    pub fn disturbed_line(&self) -> Option<String> {
        if self.disturbed.is_empty() {
            return None;
        }
        let (clean, asked) = self.clean_of_asked();
        let runs: Vec<String> = self
            .disturbed
            .iter()
            .map(|d| format!("run {}: {}", d.run.repeat, d.reasons.join("; ")))
            .collect();
        Some(format!(
            "{}: {} run(s) disturbed and left out of the medians ({}); {clean} clean of {asked} asked{}",
            self.name,
            self.disturbed.len(),
            runs.join(" | "),
            if clean < asked {
                ", too few to rank"
            } else {
                ""
            }
        ))
    }

    /// Every flat metric aggregated over the runs.
    pub fn stats(&self) -> BTreeMap<String, Stat> {
        let mut all: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for r in &self.runs {
            for (k, v) in r.flat_metrics() {
                all.entry(k).or_default().push(v);
            }
        }
        all.into_iter()
            .filter_map(|(k, v)| Some((k, stat_of(v)?)))
            .collect()
    }

    /// The run whose measured p99 is the median one (its curves are plotted).
    pub fn median_run(&self) -> Option<&RunResult> {
        let mut v: Vec<&RunResult> = self.runs.iter().collect();
        v.sort_by(|a, b| a.measured.latency.p99.total_cmp(&b.measured.latency.p99));
        v.get(v.len().saturating_sub(1) / 2).copied()
    }
}

/// One experiment's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentReport {
    pub id: String,
    pub title: String,
    pub params: Value,
    /// Header lines: (what, value), e.g. ("cgroup limit", "256 MiB").
    pub header: Vec<(String, String)>,
    /// What could not be done and what that means.
    pub notes: Vec<String>,
    pub modes: Vec<ModeReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub machine: Machine,
    pub experiments: Vec<ExperimentReport>,
}

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

fn row(label: &'static str, key: &str, fmt: Fmt, cmp: Cmp) -> Row {
    Row {
        label,
        key: key.to_string(),
        fmt,
        cmp,
    }
}

/// The rows every experiment shows, in the seeds' order.
pub fn standard_rows() -> Vec<Row> {
    use Cmp::*;
    use Fmt::*;
    vec![
        row("**Throughput (reads/s)**", "ops_per_s", Int, Percent),
        row("p50 read latency", "read_latency_us.p50", Us, Lower),
        row("p90 read latency", "read_latency_us.p90", Us, Lower),
        row("**p99 read latency**", "read_latency_us.p99", Us, Lower),
        row("**p99.9 read latency**", "read_latency_us.p999", Us, Lower),
        row("p99.99 read latency", "read_latency_us.p9999", Us, Lower),
        row("Max read latency", "read_latency_us.max", Us, Lower),
        row("Mean read latency", "read_latency_us.mean", Us, Lower),
        row("StdDev", "read_latency_us.stddev", Us, Lower),
        row(
            "p99 service time (issue to completion)",
            "service_time_us.p99",
            Us,
            Lower,
        ),
        row("p99.9 service time", "service_time_us.p999", Us, Lower),
        row(
            "Reader lateness p50 (scheduled to issued)",
            "reader_lateness_us.p50",
            Us,
            None,
        ),
        row("Reader lateness p99", "reader_lateness_us.p99", Us, None),
        row("Reader lateness max", "reader_lateness_us.max", Us, None),
        row("Reader lateness mean", "reader_lateness_us.mean", Us, None),
        row(
            "Reader CPU wait per read (run queue)",
            "reader_cpu_wait_us_per_read",
            Us,
            None,
        ),
        row(
            "Baseline p50 (no background work)",
            "baseline_read_latency_us.p50",
            Us,
            Lower,
        ),
        row(
            "p99 during the compaction",
            "during.read_latency_us.p99",
            Us,
            Lower,
        ),
        row(
            "p99.9 during the compaction",
            "during.read_latency_us.p999",
            Us,
            Lower,
        ),
        row(
            "p99 after its last install",
            "after.read_latency_us.p99",
            Us,
            Lower,
        ),
        row(
            "p99.9 after its last install",
            "after.read_latency_us.p999",
            Us,
            Lower,
        ),
        row("Baseline p99", "baseline_read_latency_us.p99", Us, Lower),
        row("Baseline p99.9", "baseline_read_latency_us.p999", Us, Lower),
        row("Reads done", "reads.done", Int, None),
        row("Reads scheduled", "reads.scheduled", Int, None),
        row(
            "Cache hit ratio (reads that needed no device read)",
            "cache_hit_ratio",
            Fraction,
            Points,
        ),
        row(
            "Cache hit ratio during the compaction",
            "during.cache_hit_ratio",
            Fraction,
            Points,
        ),
        row(
            "Cache hit ratio after its last install",
            "after.cache_hit_ratio",
            Fraction,
            Points,
        ),
        row("**Dirty pages/s**", "dirty_pages_per_s", Int, Reduction),
        row("**Stall time (us/s)**", "stall_us_per_s", Int, Percent),
        row(
            "CPU steal (host ran something else), ms/s",
            "steal_ms_per_s",
            Int,
            None,
        ),
        row(
            "Other processes' CPU, ms/s",
            "other_cpu_ms_per_s",
            Int,
            None,
        ),
        row("Refaults/s", "refaults_per_s", Int, Reduction),
        row("File pages scanned/s", "pgscan_file_per_s", Int, Reduction),
        row(
            "File pages reclaimed/s",
            "pgsteal_file_per_s",
            Int,
            Reduction,
        ),
        row("Active file cache", "active_file_bytes", MiB, Percent),
        row("Inactive file cache", "inactive_file_bytes", MiB, Percent),
        row(
            "Device read latency (r_await)",
            "device.r_await_ms",
            Ms,
            Percent,
        ),
        row(
            "**Device write latency (w_await)**",
            "device.w_await_ms",
            Ms,
            Lower,
        ),
        row(
            "Device queue depth (aqu-sz)",
            "device.aqu_sz",
            Float2,
            Shallower,
        ),
        row("Device utilisation", "device.util_pct", Pct, None),
        row("Device reads/s", "device.r_per_s", Int, None),
        row("Device writes/s", "device.w_per_s", Int, None),
        row("Device read MiB/s", "device.r_mib_s", MiBs, None),
        row("Device write MiB/s", "device.w_mib_s", MiBs, None),
        row(
            "Background (compaction) throughput",
            "compaction_mib_s",
            MiBs,
            Percent,
        ),
        row("Background seconds", "compaction_seconds", Secs, None),
        row(
            "CPU time, exact (scheduler runtime)",
            "cpu.run_s",
            Secs,
            Percent,
        ),
        row("CPU user", "cpu.user_s", Secs, Percent),
        row("CPU system", "cpu.sys_s", Secs, Percent),
        row("CPU user, % of all CPUs", "cpu.user_pct", Pct, Percent),
        row("**CPU system, % of all CPUs**", "cpu.sys_pct", Pct, Percent),
        row(
            "Machine CPU user (all processes)",
            "system_cpu.user_s",
            Secs,
            Percent,
        ),
        row(
            "Machine CPU system (all processes, kswapd, interrupts)",
            "system_cpu.sys_s",
            Secs,
            Percent,
        ),
        row("Machine CPU iowait", "system_cpu.iowait_s", Secs, None),
    ]
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

/// A reader lateness p99 from which the report warns that the readers fell
/// behind their schedule.
pub const READER_LATE_US: f64 = 1000.0;

/// The instrument's own floor: modes whose readers issued reads late (p99
/// lateness from [`READER_LATE_US`]), whose latencies then include the load
/// generator's own delay.
pub fn readers_behind(e: &ExperimentReport) -> Vec<String> {
    e.modes
        .iter()
        .filter_map(|md| {
            let l = md.stats().get("reader_lateness_us.p99")?.median;
            (l >= READER_LATE_US).then(|| {
                format!(
                    "{}: reader lateness p99 {} (scheduled to issued): reads were issued late, because every reader was busy with a slow read (see the service-time rows) or waiting for a CPU{}.",
                    md.name,
                    fmt_value(l, Fmt::Us),
                    match (
                        md.stats().get("reader_cpu_wait_us_per_read"),
                        md.stats().get("reader_lateness_us.mean"),
                    ) {
                        (Some(w), Some(m)) => format!(
                            " (the readers waited {} per read for a CPU against a mean lateness of {})",
                            fmt_value(w.median, Fmt::Us),
                            fmt_value(m.median, Fmt::Us)
                        ),
                        _ => "; raising --readers tells the two apart".to_string(),
                    }
                )
            })
        })
        .collect()
}

/// One line per mode with runs the machine disturbed (see
/// [`crate::disturbance`]).
pub fn disturbed_lines(e: &ExperimentReport) -> Vec<String> {
    e.modes
        .iter()
        .filter_map(ModeReport::disturbed_line)
        .collect()
}

/// A section's tables: one table with ratios against buffered, or with
/// several engines, the values and the two ratio views of
/// [`crate::peers::markdown_tables`].
pub fn section_tables(e: &ExperimentReport) -> String {
    if crate::peers::is_multi_engine(e) {
        crate::peers::markdown_tables(e)
    } else {
        markdown_table(e)
    }
}

/// The "not the same work" lines of a section (see [`section_tables`]).
pub fn not_same_work_lines(e: &ExperimentReport) -> Vec<String> {
    if crate::peers::is_multi_engine(e) {
        return crate::peers::not_same_work_lines(e);
    }
    let j = verdict::judge(&verdict::figures_of(e));
    j.not_same_work()
        .filter_map(|m| verdict::not_same_work_line(&j, m))
        .collect()
}

/// The whole `report.md`.
pub fn render_markdown(r: &Report) -> String {
    let m = &r.machine;
    let mut out = String::from("# quietkv bench report\n\n");
    out.push_str(&format!(
        "- Machine: {} ({} cores, {:.0} GiB RAM)\n- Kernel: Linux {}\n- Data directory: {} ({}, device {})\n",
        m.hostname,
        m.cpus,
        m.memory_bytes as f64 / (1u64 << 30) as f64,
        m.kernel,
        m.dir,
        m.filesystem,
        m.device.as_deref().unwrap_or("none found")
    ));
    for e in &r.experiments {
        out.push_str(&format!("\n## {}: {}\n\n", e.id, e.title));
        for (k, v) in &e.header {
            out.push_str(&format!("- {k}: {v}\n"));
        }
        if !e.notes.is_empty() {
            out.push_str("\n**Could not be done here:**\n\n");
            for n in &e.notes {
                out.push_str(&format!("- {n}\n"));
            }
        }
        out.push('\n');
        out.push_str(&section_tables(e));
        // The same-work rule of every experiment (verdict.rs): a mode short
        // of buffered's background work does not compare; with several
        // engines, each engine's modes against its own buffered (peers.rs).
        for line in not_same_work_lines(e) {
            out.push_str(&format!("\n**Not the same work:** {line}\n"));
        }
        for line in readers_behind(e) {
            out.push_str(&format!("\n**Readers fell behind:** {line}\n"));
        }
        for line in disturbed_lines(e) {
            out.push_str(&format!("\n**Disturbed runs:** {line}\n"));
        }
        let mut run_notes = Vec::new();
        for md in &e.modes {
            for run in &md.runs {
                for n in &run.notes {
                    run_notes.push(format!("{} run {}: {n}", md.name, run.repeat));
                }
            }
        }
        if !run_notes.is_empty() {
            out.push_str("\nRun notes:\n\n");
            for n in run_notes {
                out.push_str(&format!("- {n}\n"));
            }
        }
        let latency = if e.params["load"]["kind"] == "closed" {
            "Closed loop: latency is each read's service time (nothing is scheduled)"
        } else {
            "Latency is measured from each read's scheduled time (open loop, coordinated omission corrected)"
        };
        out.push_str(&format!(
            "\n{latency}; \
             cells with repeats show median (min..max). Plots: `{0}-percentiles.png`, `{0}-p99-over-time.png`.\n",
            e.id.to_lowercase()
        ));
    }
    out
}

fn set_path(obj: &mut Map<String, Value>, key: &str, v: Value) {
    match key.split_once('.') {
        None => {
            obj.insert(key.to_string(), v);
        }
        Some((head, rest)) => {
            let e = obj
                .entry(head.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !e.is_object() {
                *e = Value::Object(Map::new());
            }
            if let Value::Object(m) = e {
                set_path(m, rest, v);
            }
        }
    }
}

/// Keys that are always present in a mode's JSON (null when not measured).
pub const REQUIRED_KEYS: [&str; 26] = [
    "read_latency_us.p50",
    "read_latency_us.p90",
    "read_latency_us.p99",
    "read_latency_us.p999",
    "read_latency_us.p9999",
    "read_latency_us.max",
    "read_latency_us.mean",
    "read_latency_us.stddev",
    "reads.scheduled",
    "reads.done",
    "baseline_read_latency_us.p50",
    "baseline_read_latency_us.p99",
    "baseline_read_latency_us.p999",
    "cache_hit_ratio",
    "dirty_pages_per_s",
    "stall_us_per_s",
    "refaults_per_s",
    "active_file_bytes",
    "inactive_file_bytes",
    "device.r_await_ms",
    "device.w_await_ms",
    "device.aqu_sz",
    "device.util_pct",
    "compaction_mib_s",
    "compaction_seconds",
    "cpu.user_s",
];

/// `report.json`: medians in the documented nesting, `range` with
/// [min, max], each run's flat numbers, and the median run's time series.
pub fn render_json(r: &Report) -> Value {
    let exps: Vec<Value> = r
        .experiments
        .iter()
        .map(|e| {
            let judged = verdict::judge(&verdict::figures_of(e));
            let multi = crate::peers::is_multi_engine(e);
            let per_engine = if multi {
                crate::peers::judge_per_engine(e)
            } else {
                Vec::new()
            };
            let modes: Vec<Value> = e
                .modes
                .iter()
                .map(|m| {
                    let stats = m.stats();
                    let mut o = Map::new();
                    o.insert("name".into(), json!(m.name));
                    o.insert("runs".into(), json!(m.runs.len()));
                    for k in REQUIRED_KEYS.iter().chain(["cpu.sys_s"].iter()) {
                        set_path(&mut o, k, Value::Null);
                    }
                    let mut range = Map::new();
                    for (k, s) in &stats {
                        set_path(&mut o, k, json!(s.median));
                        set_path(&mut range, k, json!([s.min, s.max]));
                    }
                    o.insert("range".into(), Value::Object(range));
                    let standing = if multi {
                        crate::peers::standing(&per_engine, &m.name)
                    } else {
                        judged.mode(&m.name).map(|j| j.standing.clone())
                    };
                    o.insert(
                        "same_work".into(),
                        json!(!matches!(standing, Some(Standing::NotSameWork { .. }))),
                    );
                    o.insert(
                        "runs_detail".into(),
                        Value::Array(m.runs.iter().map(|r| json!(r.flat_metrics())).collect()),
                    );
                    let (clean, asked) = m.clean_of_asked();
                    o.insert("clean_runs".into(), json!(clean));
                    o.insert("asked_runs".into(), json!(asked));
                    o.insert(
                        "disturbed_runs".into(),
                        Value::Array(
                            m.disturbed
                                .iter()
                                .map(|d| json!({"repeat": d.run.repeat, "reasons": d.reasons, "metrics": d.run.flat_metrics()}))
                                .collect(),
                        ),
                    );
                    if let Some(run) = m.median_run() {
                        o.insert(
                            "timeline".into(),
                            json!(run
                                .timeline
                                .iter()
                                .map(|p| json!({"t_s": p.t_s, "p50_us": p.p50_us, "p99_us": p.p99_us, "count": p.count, "background": p.background}))
                                .collect::<Vec<_>>()),
                        );
                        o.insert("percentile_curve".into(), json!(run.curve));
                    }
                    Value::Object(o)
                })
                .collect();
            let mut section = json!({
                "id": e.id,
                "title": e.title,
                "params": e.params,
                "header": e.header.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
                "could_not_be_done": e.notes,
                "modes": modes,
                "same_work_check": {
                    "reference": verdict::REFERENCE,
                    "reference_mib_s": judged.reference_mib_s,
                    "tolerance": verdict::SAME_WORK_TOLERANCE,
                    "best_same_work": judged.best,
                    "unranked": judged.modes.iter().filter_map(|m| match &m.standing {
                        Standing::Unranked { why } => Some(json!({"mode": m.name, "why": why})),
                        _ => None,
                    }).collect::<Vec<_>>(),
                    "not_same_work": judged.not_same_work().map(|m| match &m.standing {
                        Standing::NotSameWork { shortfall_pct, remedy } => json!({
                            "mode": m.name,
                            "background_mib_s": m.background_mib_s,
                            "shortfall_pct": shortfall_pct,
                            "to_compare": remedy,
                        }),
                        _ => Value::Null,
                    }).collect::<Vec<_>>(),
                },
            });
            if multi {
                section["peers"] = crate::peers::json_of(e, &per_engine);
            }
            section
        })
        .collect();
    json!({"machine": r.machine, "experiments": exps})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadgen::LatencySummary;
    use crate::metrics::DeviceRates;
    use crate::result::{BackgroundWork, PhaseResult};
    use crate::sampler::PhaseMetrics;

    fn run(mode: &str, repeat: u32, p99: f64, dirty: f64, bg_mib: u64) -> RunResult {
        let lat = LatencySummary {
            count: 1000,
            p50: 100.0,
            p90: 200.0,
            p99,
            p999: p99 * 10.0,
            p9999: p99 * 20.0,
            max: p99 * 30.0,
            mean: 150.0,
            stddev: 50.0,
        };
        RunResult {
            mode: mode.into(),
            repeat,
            measured: PhaseResult {
                latency: lat.clone(),
                service: lat.clone(),
                scheduled: 1000,
                done: 1000,
                cache_hit_ratio: Some(0.5),
                kernel: PhaseMetrics {
                    seconds: 10.0,
                    dirty_pages_per_s: dirty,
                    stall_us_per_s: Some(1000.0),
                    active_file_bytes: Some((100u64 << 20) as f64),
                    inactive_file_bytes: Some((50u64 << 20) as f64),
                    device: Some(DeviceRates {
                        r_await_ms: 0.5,
                        w_await_ms: 9.0,
                        aqu_sz: 12.0,
                        util_pct: 99.0,
                        ..Default::default()
                    }),
                    cpu_user_s: Some(1.0),
                    cpu_sys_s: Some(2.0),
                    ..Default::default()
                },
                ..Default::default()
            },
            baseline: Some(PhaseResult {
                latency: lat,
                ..Default::default()
            }),
            background: BackgroundWork {
                read_bytes: bg_mib << 20,
                write_bytes: 0,
                seconds: 1.0,
            },
            ..Default::default()
        }
    }

    fn fixed() -> Report {
        Report {
            machine: Machine {
                hostname: "h".into(),
                kernel: "6.18".into(),
                cpus: 2,
                memory_bytes: 24 << 30,
                filesystem: "ext4".into(),
                device: Some("vda".into()),
                dir: "/x".into(),
            },
            experiments: vec![ExperimentReport {
                id: "E0".into(),
                title: "no-engine reference".into(),
                params: json!({"hot_bytes": 1}),
                header: vec![("cgroup limit".into(), "256 MiB".into())],
                notes: vec!["no PSI cgroup: system-wide".into()],
                modes: vec![
                    ModeReport {
                        runs: vec![
                            run("buffered", 1, 16200.0, 42862.0, 400),
                            run("buffered", 2, 15000.0, 40000.0, 400),
                        ],
                        ..ModeReport::new("buffered", None, 0)
                    },
                    ModeReport {
                        runs: vec![
                            run("direct", 1, 1900.0, 1038.0, 400),
                            run("direct", 2, 1900.0, 1038.0, 400),
                        ],
                        ..ModeReport::new("direct", None, 0)
                    },
                    ModeReport {
                        runs: vec![run("dontcache", 1, 1800.0, 874.0, 100)],
                        ..ModeReport::new("dontcache", None, 0)
                    },
                ],
            }],
        }
    }

    #[test]
    fn verdict_reads_one_e3_section_larger_than_the_cache_from_its_figures() {
        let mut r = fixed();
        let e = &mut r.experiments[0];
        e.id = "E3-hot3072MiB".into();
        e.params =
            json!({"experiment": "E3", "hot_bytes": 3u64 << 30, "memory_limit_bytes": 1u64 << 30});
        e.modes.truncate(2);
        let v = crate::verdict::verdict(&r.experiments);
        assert!(
            v.contains("at a 3.0 GiB hot set (3.00x the cgroup limit)"),
            "{v}"
        );
        assert!(
            v.contains("It still helped with a hot set larger than the page cache"),
            "{v}"
        );
        // And the other way round: no gain there.
        for run in &mut r.experiments[0].modes[1].runs {
            run.measured.latency.p99 = 15_600.0;
        }
        let v = crate::verdict::verdict(&r.experiments);
        assert!(
            v.contains("Once the hot set outgrows the page cache it stops helping"),
            "{v}"
        );
    }

    #[test]
    fn markdown_has_rows_columns_and_ratios() {
        let md = render_markdown(&fixed());
        assert!(md.contains("| Metric | buffered | direct | dontcache | direct vs buffered | dontcache vs buffered |"), "{md}");
        assert!(md.contains("| **p99 read latency** | 15.60 ms (15.00 ms..16.20 ms) | 1.90 ms (1.90 ms..1.90 ms) | 1.80 ms |"), "{md}");
        assert!(md.contains("8.2x lower"), "{md}");
        assert!(
            md.contains("| **Dirty pages/s** | 41,431 (40,000..42,862) |"),
            "{md}"
        );
        assert!(md.contains("40x reduction"), "{md}");
        assert!(md.contains("Cache hit ratio"));
        assert!(md.contains("w_await"));
        assert!(md.contains("Reads done"));
        assert!(md.contains("p99.9 service time"));
        assert!(md.contains("CPU user"));
        assert!(md.contains("- cgroup limit: 256 MiB"));
        assert!(md.contains("no PSI cgroup"));
        assert!(md.contains("**Not the same work:** dontcache"), "{md}");
    }

    #[test]
    fn a_fixed_job_that_ran_slower_is_not_the_same_work_either() {
        // E1: every mode rewrites the same bytes, so a slower compaction
        // spread them thinner: it did less work per second.
        let mut r = fixed();
        r.experiments[0].params = json!({"experiment": "E1", "throttle_mib_s": 0});
        for run in &mut r.experiments[0].modes[2].runs {
            run.background = BackgroundWork {
                read_bytes: 400 << 20,
                write_bytes: 0,
                seconds: 4.0,
            };
        }
        let md = render_markdown(&r);
        assert!(
            md.contains("**Not the same work:** dontcache did 100 MiB/s"),
            "{md}"
        );
        assert!(md.contains("75% below buffered's 400 MiB/s"), "{md}");
        assert!(md.contains("--throttle 100"), "{md}");
        assert!(!md.contains("**Not the same work:** direct"), "{md}");
        let j = render_json(&r);
        let e = &j["experiments"][0];
        assert_eq!(e["modes"][1]["same_work"], true);
        assert_eq!(e["modes"][2]["same_work"], false);
        let short = &e["same_work_check"]["not_same_work"][0];
        assert_eq!(short["mode"], "dontcache");
        assert!(short["to_compare"]
            .as_str()
            .unwrap()
            .contains("--throttle 100"));
        assert_eq!(e["same_work_check"]["best_same_work"], "direct");
    }

    #[test]
    fn reader_lateness_has_its_rows_and_a_warning_when_late() {
        let mut r = fixed();
        for (i, m) in r.experiments[0].modes.iter_mut().enumerate() {
            for run in &mut m.runs {
                run.measured.lateness = LatencySummary {
                    count: 1000,
                    p50: 3.0,
                    p99: if i == 1 { 4_000.0 } else { 40.0 },
                    max: 9_000.0,
                    mean: if i == 1 { 300.0 } else { 5.0 },
                    ..Default::default()
                };
                run.measured.reader_cpu_wait_us_per_read = (i == 1).then_some(250.0);
            }
        }
        let md = render_markdown(&r);
        assert!(
            md.contains("| Reader lateness p99 | 40 us (40 us..40 us) | 4.00 ms (4.00 ms..4.00 ms) | 40 us |"),
            "{md}"
        );
        assert!(
            md.contains("Reader lateness p50 (scheduled to issued)"),
            "{md}"
        );
        assert!(
            md.contains("**Readers fell behind:** direct: reader lateness p99 4.00 ms"),
            "{md}"
        );
        assert!(!md.contains("**Readers fell behind:** buffered"), "{md}");
        // Whether they waited for a CPU: the run-queue wait beside the
        // mean lateness.
        assert!(
            md.contains(
                "(the readers waited 250 us per read for a CPU against a mean lateness of 300 us)"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| Reader CPU wait per read (run queue) | n/a | 250 us (250 us..250 us) | n/a |"
            ),
            "{md}"
        );
        let j = render_json(&r);
        assert_eq!(
            j["experiments"][0]["modes"][1]["reader_cpu_wait_us_per_read"],
            250.0
        );
        assert_eq!(
            j["experiments"][0]["modes"][1]["reader_lateness_us"]["p99"],
            4000.0
        );
    }

    #[test]
    fn json_has_the_documented_keys() {
        let j = render_json(&fixed());
        let e = &j["experiments"][0];
        assert_eq!(e["id"], "E0");
        assert_eq!(j["machine"]["kernel"], "6.18");
        let m = &e["modes"][0];
        assert_eq!(m["name"], "buffered");
        assert_eq!(m["runs"], 2);
        for k in [
            "p50", "p90", "p99", "p999", "p9999", "max", "mean", "stddev",
        ] {
            assert!(m["read_latency_us"][k].is_number(), "{k}");
        }
        assert_eq!(m["read_latency_us"]["p99"], 15600.0);
        assert_eq!(
            m["range"]["read_latency_us"]["p99"],
            json!([15000.0, 16200.0])
        );
        assert_eq!(m["reads"]["scheduled"], 1000.0);
        assert_eq!(m["reads"]["done"], 1000.0);
        for k in ["p50", "p99", "p999"] {
            assert!(m["baseline_read_latency_us"][k].is_number());
        }
        for k in [
            "cache_hit_ratio",
            "dirty_pages_per_s",
            "stall_us_per_s",
            "refaults_per_s",
            "active_file_bytes",
            "inactive_file_bytes",
            "compaction_mib_s",
            "compaction_seconds",
        ] {
            assert!(m[k].is_number(), "{k}");
        }
        for k in ["r_await_ms", "w_await_ms", "aqu_sz", "util_pct"] {
            assert!(m["device"][k].is_number(), "{k}");
        }
        assert_eq!(m["cpu"]["user_s"], 1.0);
        assert_eq!(m["cpu"]["sys_s"], 2.0);
        assert_eq!(e["modes"][2]["same_work"], false);
    }

    #[test]
    fn ratio_texts() {
        assert_eq!(compare(16.2, 1.9, Cmp::Lower), "8.5x lower");
        assert_eq!(compare(100.0, 200.0, Cmp::Lower), "2.0x higher");
        assert_eq!(compare(42862.0, 1038.0, Cmp::Reduction), "41x reduction");
        assert_eq!(compare(11.9, 1.52, Cmp::Shallower), "7.8x shallower");
        assert_eq!(compare(31599.0, 21534.0, Cmp::Percent), "-32%");
        assert_eq!(compare(0.161, 0.176, Cmp::Points), "+1.5 pp");
        assert_eq!(compare(1.0, 1.01, Cmp::Lower), "~same");
        assert_eq!(compare(5.0, 0.0, Cmp::Reduction), "to 0 (reduction)");
        assert_eq!(stat_of(vec![3.0, 1.0, 2.0, 10.0]).unwrap().median, 2.5);
    }
}
