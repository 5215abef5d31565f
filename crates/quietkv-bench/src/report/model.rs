//! The report's data model: what one run of `quietkv bench` measured, as
//! every renderer (Markdown, JSON, plots), the verdict and the peers' view
//! read it, and as `report.json` keeps it. Nothing here renders or judges:
//! a run's figures are gathered into modes, modes into sections
//! ([`ExperimentReport`]), sections into the [`Report`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engines::PageCacheUse;
use crate::result::RunResult;

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
    pub disturbed: Vec<DisturbedRun>,
    /// Clean runs asked for (`--repeats`); 0 in reports written before
    /// runs were judged, where every run counts.
    #[serde(default)]
    pub asked: u32,
    /// Runs that gave no result through the mode's own doing (its worker
    /// outgrew the run's memory limit): reported, never run again.
    #[serde(default)]
    pub failed: Vec<FailedRun>,
}

/// Median, min and max of one metric over a mode's runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

/// Median (the mean of the middle two of an even count), min and max of
/// `v`; `None` when it is empty.
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
            failed: Vec::new(),
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
        let runs = self
            .disturbed
            .iter()
            .map(|d| format!("run {}: {}", d.run.repeat, d.reasons.join("; ")))
            .collect();
        self.left_out_line("disturbed and left out of the medians", runs)
    }

    /// A line saying which runs failed and why, if any did.
    pub fn failed_line(&self) -> Option<String> {
        let runs = self
            .failed
            .iter()
            .map(|f| format!("run {}: {}", f.repeat, f.why))
            .collect();
        self.left_out_line("failed", runs)
    }

    /// `name: N run(s) <what> (run 1: why | ...); C clean of A asked`,
    /// with `too few to rank` when short; `None` without such runs.
    fn left_out_line(&self, what: &str, runs: Vec<String>) -> Option<String> {
        if runs.is_empty() {
            return None;
        }
        let (clean, asked) = self.clean_of_asked();
        Some(format!(
            "{}: {} run(s) {what} ({}); {clean} clean of {asked} asked{}",
            self.name,
            runs.len(),
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

/// The whole report: the machine and every section, as `report.json`
/// stores it and the renderers read it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub machine: Machine,
    pub experiments: Vec<ExperimentReport>,
}

/// A run that gave no result through the mode's own doing, with why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FailedRun {
    /// 1-based round.
    pub repeat: u32,
    pub why: String,
}

/// A run the disturbance rule set aside (see [`crate::disturbance`]),
/// with its reasons: kept in the report, left out of the medians.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DisturbedRun {
    pub run: RunResult,
    pub reasons: Vec<String>,
}
