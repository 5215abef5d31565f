//! The verdict: which mode the background classes should use, drawn from
//! the figures alone (docs/benchmark.md, "Same work, or no comparison").
//!
//! A mode compares with buffered only if it did the same background work:
//! bytes per second of compaction and flush over the measured phase at most
//! [`SAME_WORK_TOLERANCE`] below buffered's. That holds in every experiment,
//! E1 included: there every mode rewrites the same bytes, so a compaction
//! that took three times as long spread them over three times the reads and
//! did a third of the work per second. A mode short of work is reported as
//! "not the same work", is never recommended however low its p99, and the
//! verdict says what it would take to compare it (for E1 the throttle at
//! which both modes run at the slower one's speed).
//!
//! [`figures_of`] extracts a section's figures from a report; everything
//! after it ([`judge`], [`verdict_text`]) is a pure function of them.

use std::collections::{BTreeMap, BTreeSet};

use super::model::ExperimentReport;
use crate::engines::PageCacheUse;
use crate::scale::mib;

/// How far below buffered's background throughput a mode may fall and
/// still count as doing the same work.
pub const SAME_WORK_TOLERANCE: f64 = 0.10;

/// The mode every other one is compared with.
pub const REFERENCE: &str = "buffered";

/// The background work of an experiment: it decides what it would take for
/// a mode that fell short to compare.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// E0: a sequential read and a sequential write stream at fixed rates
    /// (MiB/s, 0 = unthrottled).
    Streams { read_mib_s: u64, write_mib_s: u64 },
    /// E1/E3: one major compaction; every mode rewrites the same bytes.
    FixedJob { throttle_mib_s: u64 },
    /// E2: a writer at a fixed rate drives flush and compaction.
    Writer { write_rate_mib_s: f64 },
    /// The throughput experiment: `compact_all` flat out, no readers.
    Flat,
}

/// One mode's figures (medians over its clean runs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModeFigures {
    pub name: String,
    /// Measured read latency; `None` where the experiment has no readers
    /// beside the background work.
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    /// Background (compaction + flush) bytes per second, MiB/s.
    pub background_mib_s: f64,
    /// Of which read and written, MiB/s (E0's streams).
    pub background_read_mib_s: f64,
    pub background_write_mib_s: f64,
    /// Background MiB moved over the phase (E1: the whole rewrite).
    pub background_mib: f64,
    /// p99 of the reads' service time (issue to completion): what the
    /// engine and the kernel did, without the readers' wait for a CPU.
    pub service_p99_us: Option<f64>,
    /// p99 of the readers' lateness (scheduled to issued): time the
    /// readers waited for a CPU before they could issue a read.
    pub lateness_p99_us: Option<f64>,
    /// E2: the user data the writer wrote per second, MiB/s.
    pub user_write_mib_s: Option<f64>,
    /// Runs the medians come from, and runs asked for: fewer clean runs
    /// than asked (the machine disturbed the rest, or the mode failed
    /// them) are not ranked.
    pub clean_runs: usize,
    pub asked_runs: usize,
    /// Runs that failed through the mode's own doing (its worker outgrew
    /// the memory limit).
    pub failed_runs: usize,
}

impl ModeFigures {
    /// Fewer clean runs than asked: the machine disturbed the rest or the
    /// mode failed them, and the mode is ranked against nothing, its own
    /// engine's or a peer's.
    pub fn short_of_clean_runs(&self) -> bool {
        self.clean_runs < self.asked_runs
    }

    /// What became of the runs that are not clean: `the machine disturbed
    /// the rest`, or how many failed and why to look.
    pub fn why_short(&self) -> String {
        let missing = self.asked_runs.saturating_sub(self.clean_runs);
        match self.failed_runs.min(missing) {
            0 => "the machine disturbed the rest".into(),
            f if f == missing => format!("{f} failed (see Failed runs)"),
            f => format!("{f} failed (see Failed runs), the machine disturbed the rest"),
        }
    }
}

/// One report section's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct SectionFigures {
    pub id: String,
    /// E0, E1, E2, E3 or throughput.
    pub experiment: String,
    pub work: Work,
    pub hot_bytes: u64,
    pub memory_limit_bytes: Option<u64>,
    pub modes: Vec<ModeFigures>,
}

/// Where a mode stands against buffered.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// The reference itself.
    Reference,
    SameWork,
    /// Not compared: fewer clean runs than asked, its own or buffered's
    /// (see [`crate::disturbance`]).
    Unranked {
        why: String,
    },
    /// More than [`SAME_WORK_TOLERANCE`] short of buffered's background
    /// work: its latencies do not compare and it is not recommended.
    NotSameWork {
        /// How far below buffered's background MiB/s, in percent.
        shortfall_pct: f64,
        /// What it would take to compare it.
        remedy: String,
    },
}

/// A mode's standing and how it compares with buffered.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeJudgement {
    pub name: String,
    pub standing: Standing,
    /// buffered p99 / this mode's p99 (> 1: lower latency).
    pub p99_ratio: Option<f64>,
    pub p999_ratio: Option<f64>,
    /// Background MiB/s against buffered's, in percent.
    pub speed_pct: f64,
    pub background_mib_s: f64,
    /// buffered's service-time p99 / this mode's (> 1: served faster).
    pub service_p99_ratio: Option<f64>,
    /// This mode's reader lateness p99, us.
    pub lateness_p99_us: Option<f64>,
}

/// A section judged.
#[derive(Debug, Clone, PartialEq)]
pub struct SectionJudgement {
    pub id: String,
    pub experiment: String,
    pub hot_bytes: u64,
    pub memory_limit_bytes: Option<u64>,
    /// buffered's background MiB/s (`None` without a buffered mode).
    pub reference_mib_s: Option<f64>,
    /// buffered's reader lateness p99, us.
    pub reference_lateness_p99_us: Option<f64>,
    pub modes: Vec<ModeJudgement>,
    /// The non-buffered mode with the best p99 among those that did the
    /// same work.
    pub best: Option<String>,
}

impl SectionJudgement {
    pub fn mode(&self, name: &str) -> Option<&ModeJudgement> {
        self.modes.iter().find(|m| m.name == name)
    }

    /// The modes that fell short of buffered's work.
    pub fn not_same_work(&self) -> impl Iterator<Item = &ModeJudgement> {
        self.modes
            .iter()
            .filter(|m| matches!(m.standing, Standing::NotSameWork { .. }))
    }
}

/// Whether `mode_mib_s` of background work is the same work as
/// `reference_mib_s` (at most [`SAME_WORK_TOLERANCE`] below it; more is
/// fine: the mode did not get its latency by doing less).
pub fn same_work(reference_mib_s: f64, mode_mib_s: f64) -> bool {
    reference_mib_s <= 0.0 || mode_mib_s >= (1.0 - SAME_WORK_TOLERANCE) * reference_mib_s
}

/// What it would take for `m`, short of `reference`'s work, to compare.
pub fn remedy(work: &Work, reference: &ModeFigures, m: &ModeFigures) -> String {
    let share = if reference.background_mib_s > 0.0 {
        m.background_mib_s / reference.background_mib_s
    } else {
        1.0
    };
    match work {
        Work::FixedJob { throttle_mib_s } => {
            let t = (m.background_mib_s.floor() as u64).max(1);
            format!(
                "rerun with --throttle {t} (every compaction held to {}'s {t} MiB/s of reads + writes{}, so each mode rewrites the same bytes in the same time)",
                m.name,
                if *throttle_mib_s > 0 {
                    format!(", below this section's {throttle_mib_s} MiB/s")
                } else {
                    String::new()
                }
            )
        }
        Work::Writer { write_rate_mib_s } => format!(
            "rerun with --write-rate {:.1} ({:.0}% of {:.1} MiB/s: the share of buffered's background work {} kept up with), or make its compaction as fast as buffered's",
            write_rate_mib_s * share,
            share * 100.0,
            write_rate_mib_s,
            m.name
        ),
        Work::Streams {
            read_mib_s,
            write_mib_s,
        } => format!(
            "rerun with --bg-read-rate {} --bg-write-rate {} (the rates {}'s streams reached; asked for {} and {})",
            (m.background_read_mib_s.floor() as u64).max(1),
            (m.background_write_mib_s.floor() as u64).max(1),
            m.name,
            rate_text(*read_mib_s),
            rate_text(*write_mib_s)
        ),
        Work::Flat => format!(
            "make {} compact at {:.0} MiB/s or more ({:.0}% of buffered's {:.0} MiB/s); `quietkv doctor` shows what the device does",
            m.name,
            (1.0 - SAME_WORK_TOLERANCE) * reference.background_mib_s,
            (1.0 - SAME_WORK_TOLERANCE) * 100.0,
            reference.background_mib_s
        ),
    }
}

fn rate_text(mib_s: u64) -> String {
    if mib_s == 0 {
        "full speed".into()
    } else {
        format!("{mib_s} MiB/s")
    }
}

/// Judges every mode of a section against buffered (or, without a
/// buffered mode, the first one).
pub fn judge(s: &SectionFigures) -> SectionJudgement {
    let reference = s
        .modes
        .iter()
        .find(|m| m.name == REFERENCE)
        .or_else(|| s.modes.first());
    let mut j = SectionJudgement {
        id: s.id.clone(),
        experiment: s.experiment.clone(),
        hot_bytes: s.hot_bytes,
        memory_limit_bytes: s.memory_limit_bytes,
        reference_mib_s: reference.map(|r| r.background_mib_s),
        reference_lateness_p99_us: reference.and_then(|r| r.lateness_p99_us),
        modes: Vec::new(),
        best: None,
    };
    let Some(r) = reference else {
        return j;
    };
    j.modes = s
        .modes
        .iter()
        .map(|m| {
            let standing = if m.name == r.name {
                Standing::Reference
            } else if m.short_of_clean_runs() {
                Standing::Unranked {
                    why: format!(
                        "{} clean run(s) of {} asked: {}",
                        m.clean_runs,
                        m.asked_runs,
                        m.why_short()
                    ),
                }
            } else if r.short_of_clean_runs() {
                Standing::Unranked {
                    why: format!(
                        "{} has {} clean run(s) of {} asked, too few to compare with",
                        r.name, r.clean_runs, r.asked_runs
                    ),
                }
            } else if !same_work(r.background_mib_s, m.background_mib_s) {
                Standing::NotSameWork {
                    shortfall_pct: (1.0 - m.background_mib_s / r.background_mib_s) * 100.0,
                    remedy: remedy(&s.work, r, m),
                }
            } else if matches!(s.work, Work::FixedJob { .. })
                && (m.background_mib - r.background_mib).abs() > 0.1 * r.background_mib
            {
                // A fixed job that moved other bytes did not finish (or did
                // something else) within the phase.
                Standing::NotSameWork {
                    shortfall_pct: (1.0 - m.background_mib / r.background_mib.max(1e-9)) * 100.0,
                    remedy: format!(
                        "the same bytes moved: {} moved {:.0} MiB against buffered's {:.0} MiB (raise --duration if the cap cut its compaction off)",
                        m.name, m.background_mib, r.background_mib
                    ),
                }
            } else {
                Standing::SameWork
            };
            let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?.max(1.0));
            ModeJudgement {
                name: m.name.clone(),
                standing,
                p99_ratio: ratio(r.p99_us, m.p99_us),
                p999_ratio: ratio(r.p999_us, m.p999_us),
                speed_pct: if r.background_mib_s > 0.0 {
                    (m.background_mib_s - r.background_mib_s) / r.background_mib_s * 100.0
                } else {
                    0.0
                },
                background_mib_s: m.background_mib_s,
                service_p99_ratio: ratio(r.service_p99_us, m.service_p99_us),
                lateness_p99_us: m.lateness_p99_us,
            }
        })
        .collect();
    j.best = j
        .modes
        .iter()
        .filter(|m| m.standing == Standing::SameWork)
        .filter_map(|m| Some((m, m.p99_ratio?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(m, _)| m.name.clone());
    j
}

/// One mode that fell short, for report.md and the terminal.
pub fn not_same_work_line(j: &SectionJudgement, m: &ModeJudgement) -> Option<String> {
    let Standing::NotSameWork {
        shortfall_pct,
        remedy,
    } = &m.standing
    else {
        return None;
    };
    Some(format!(
        "{} did {:.0} MiB/s of background work, {shortfall_pct:.0}% below buffered's {:.0} MiB/s (more than {:.0}%), so {}it is not recommended{}. To compare: {remedy}.",
        m.name,
        m.background_mib_s,
        j.reference_mib_s.unwrap_or(0.0),
        SAME_WORK_TOLERANCE * 100.0,
        if m.p99_ratio.is_some() {
            "its latencies do not compare and "
        } else {
            ""
        },
        match m.p99_ratio {
            Some(r) if r >= 1.05 => format!(" (even with its p99 {r:.1}x lower)"),
            _ => String::new(),
        }
    ))
}

/// For every mode with latencies: its service-time p99 against buffered's
/// and its readers' lateness, so a reader of the verdict sees whether a
/// difference came from the engine (service time) or from the readers
/// waiting for a CPU (lateness).
fn engine_or_cpu_text(j: &SectionJudgement) -> String {
    let us = |v: f64| {
        if v >= 1000.0 {
            format!("{:.1} ms", v / 1000.0)
        } else {
            format!("{v:.0} us")
        }
    };
    let modes: Vec<String> = j
        .modes
        .iter()
        .filter(|m| m.standing != Standing::Reference)
        .filter_map(|m| {
            let service = ratio_text(m.service_p99_ratio?, "service time p99");
            let late = match (m.lateness_p99_us, j.reference_lateness_p99_us) {
                (Some(l), Some(r)) => {
                    format!(", reader lateness p99 {} (buffered {})", us(l), us(r))
                }
                (Some(l), None) => format!(", reader lateness p99 {}", us(l)),
                _ => String::new(),
            };
            Some(format!("{}: {service}{late}", m.name))
        })
        .collect();
    if modes.is_empty() {
        String::new()
    } else {
        format!(" Engine or CPU? {}.", modes.join("; "))
    }
}

/// The modes a section did not rank, and why.
fn unranked_text(j: &SectionJudgement) -> String {
    let modes: Vec<String> = j
        .modes
        .iter()
        .filter_map(|m| match &m.standing {
            Standing::Unranked { why } => Some(format!("{} ({why})", m.name)),
            _ => None,
        })
        .collect();
    if modes.is_empty() {
        String::new()
    } else {
        format!(" Not ranked: {}.", modes.join(", "))
    }
}

/// The report section's figures: medians of each mode's runs.
pub fn figures_of(e: &ExperimentReport) -> SectionFigures {
    let experiment = match e.params["experiment"].as_str() {
        Some(x) => x.to_string(),
        None => e.id.split('-').next().unwrap_or("").to_string(),
    };
    let p = &e.params;
    let work = match experiment.as_str() {
        "E1" | "E3" => Work::FixedJob {
            throttle_mib_s: p["throttle_mib_s"].as_u64().unwrap_or(0),
        },
        "E2" => Work::Writer {
            write_rate_mib_s: p["write_rate_mib_s"].as_f64().unwrap_or(0.0),
        },
        _ => Work::Streams {
            read_mib_s: p["bg_read_bytes_per_s"].as_u64().unwrap_or(0) >> 20,
            write_mib_s: p["bg_write_bytes_per_s"].as_u64().unwrap_or(0) >> 20,
        },
    };
    let modes = e
        .modes
        .iter()
        .map(|m| {
            let st = m.stats();
            let get = |k: &str| st.get(k).map(|s| s.median);
            let secs = get("compaction_seconds").unwrap_or(0.0);
            let per_s = |mib: Option<f64>| {
                if secs > 0.0 {
                    mib.unwrap_or(0.0) / secs
                } else {
                    0.0
                }
            };
            ModeFigures {
                name: m.name.clone(),
                p99_us: get("read_latency_us.p99"),
                p999_us: get("read_latency_us.p999"),
                background_mib_s: get("compaction_mib_s").unwrap_or(0.0),
                background_read_mib_s: per_s(get("compaction_read_mib")),
                background_write_mib_s: per_s(get("compaction_write_mib")),
                background_mib: get("compaction_read_mib").unwrap_or(0.0)
                    + get("compaction_write_mib").unwrap_or(0.0),
                service_p99_us: get("service_time_us.p99"),
                lateness_p99_us: get("reader_lateness_us.p99"),
                user_write_mib_s: get("extra.write_mib_s"),
                clean_runs: m.clean_of_asked().0,
                asked_runs: m.clean_of_asked().1,
                failed_runs: m.failed.len(),
            }
        })
        .collect();
    SectionFigures {
        id: e.id.clone(),
        experiment,
        work,
        hot_bytes: p["hot_bytes"].as_u64().unwrap_or(0),
        memory_limit_bytes: p["memory_limit_bytes"].as_u64(),
        modes,
    }
}

fn ratio_text(r: f64, what: &str) -> String {
    if r >= 1.05 {
        format!("{what} {r:.1}x lower")
    } else if r <= 0.95 {
        format!("{what} {:.1}x higher", 1.0 / r)
    } else {
        format!("{what} about the same")
    }
}

/// A short paragraph: which mode the background classes should use, what
/// it bought with the same work, which modes did not do the same work and
/// what it would take to compare them, and when it stops helping (E3).
/// `page_cache` says what the mode of a name does to the page cache, for
/// the recommendation's how-to.
pub fn verdict_text(
    sections: &[SectionJudgement],
    page_cache: &dyn Fn(&str) -> Option<PageCacheUse>,
) -> String {
    let mut parts = Vec::new();
    let mut wins: BTreeMap<String, usize> = BTreeMap::new();
    let mut e3 = Vec::new();
    let e3_sections = sections.iter().filter(|j| j.experiment == "E3").count();
    // A mode that fell short of buffered's work anywhere is recommended
    // nowhere: its wins elsewhere were not bought with the same work.
    let short_anywhere: BTreeSet<&str> = sections
        .iter()
        .flat_map(|j| j.not_same_work().map(|m| m.name.as_str()))
        .collect();
    let mut excluded = BTreeSet::new();
    for j in sections {
        let short: Vec<String> = j
            .not_same_work()
            .map(|m| {
                format!(
                    "{} ({:.0} MiB/s against buffered's {:.0}{})",
                    m.name,
                    m.background_mib_s,
                    j.reference_mib_s.unwrap_or(0.0),
                    match m.p99_ratio {
                        Some(r) if r >= 1.05 => format!(", though its p99 was {r:.1}x lower"),
                        _ => String::new(),
                    }
                )
            })
            .collect();
        // The slowest one's remedy brings every mode of the section to the
        // same work (E1: all held to its compaction speed).
        let slowest = j
            .not_same_work()
            .min_by(|a, b| a.background_mib_s.total_cmp(&b.background_mib_s));
        let short_text = match slowest.map(|m| &m.standing) {
            Some(Standing::NotSameWork { remedy, .. }) => format!(
                " Not the same work (more than {:.0}% below buffered's background MiB/s), so not recommended: {}. To compare {}: {remedy}.",
                SAME_WORK_TOLERANCE * 100.0,
                short.join(", "),
                if short.len() > 1 { "them" } else { "it" }
            ),
            _ => String::new(),
        };
        let Some(best) = j.best.as_ref().and_then(|b| j.mode(b)) else {
            let all_unranked = j
                .modes
                .iter()
                .all(|m| matches!(m.standing, Standing::Reference | Standing::Unranked { .. }));
            let why = if all_unranked && j.modes.len() > 1 {
                "no mode had enough clean runs to compare (the machine disturbed the others; see the disturbed runs in the report), so none is recommended"
            } else {
                "no other mode did the same background work as buffered with a latency to compare, so none is recommended"
            };
            parts.push(format!(
                "{}: {why}.{short_text}{}{}",
                j.id,
                engine_or_cpu_text(j),
                unranked_text(j)
            ));
            continue;
        };
        let r99 = best.p99_ratio.unwrap_or(1.0);
        if j.experiment == "E3" {
            e3.push((j.hot_bytes, j.memory_limit_bytes, best.name.clone(), r99));
        }
        if r99 >= 1.2 {
            if short_anywhere.contains(best.name.as_str()) {
                excluded.insert(best.name.clone());
            } else {
                *wins.entry(best.name.clone()).or_default() += 1;
            }
        }
        parts.push(format!(
            "{}: best {} with the same work ({}, {}, background work {}{:.0}% {}).{short_text}{}{}",
            j.id,
            best.name,
            ratio_text(r99, "p99"),
            ratio_text(best.p999_ratio.unwrap_or(1.0), "p99.9"),
            if best.speed_pct >= 0.0 { "+" } else { "" },
            best.speed_pct,
            if j.experiment == "E1" || j.experiment == "E3" {
                "compaction speed"
            } else {
                "throughput"
            },
            engine_or_cpu_text(j),
            unranked_text(j)
        ));
    }
    let mut out = String::new();
    match wins.iter().max_by_key(|(_, n)| **n) {
        Some((mode, n)) => {
            out.push_str(&format!(
                "This machine should run background I/O as **{mode}**{} (with the same background work as buffered, it cut p99 by 1.2x or more in {n} of {} section(s)). ",
                page_cache(mode)
                    .map(|u| format!(" ({})", u.how_to_configure()))
                    .unwrap_or_default(),
                sections.len()
            ));
        }
        None => out.push_str(&format!(
            "No mode that did the same background work as buffered in every section cut p99 by 1.2x or more, so none is recommended over buffered on this machine at these sizes{}. ",
            if excluded.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} did best somewhere but fell short of buffered's work elsewhere)",
                    excluded.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            }
        )),
    }
    out.push_str(&parts.join(" "));
    let mut out = out.trim_end().to_string();
    if e3_sections > 0 && e3.is_empty() {
        out.push_str(
            " In E3: no mode did the same background work as buffered at any hot-set size, so where the gain stops cannot be read from this run.",
        );
    } else if !e3.is_empty() {
        e3.sort_by_key(|x| x.0);
        let share = |hot: u64, limit: Option<u64>| {
            limit
                .map(|l| format!(" ({:.2}x the cgroup limit)", hot as f64 / l as f64))
                .unwrap_or_default()
        };
        let sizes: Vec<String> = e3
            .iter()
            .map(|(hot, limit, mode, r99)| {
                format!(
                    "{} with {mode} at a {} hot set{}",
                    ratio_text(*r99, "p99"),
                    mib(*hot),
                    share(*hot, *limit)
                )
            })
            .collect();
        out.push_str(&format!(" In E3: {}.", sizes.join("; ")));
        // Where does it stop helping? Look at the hot sets larger than the cache.
        let over: Vec<_> = e3
            .iter()
            .filter(|(hot, limit, _, _)| limit.is_some_and(|l| *hot > l))
            .collect();
        match over.iter().find(|x| x.3 < 1.2) {
            Some((hot, limit, _, r99)) => out.push_str(&format!(
                " Once the hot set outgrows the page cache it stops helping: at {}{} {}.",
                mib(*hot),
                share(*hot, *limit),
                ratio_text(*r99, "p99")
            )),
            None if !over.is_empty() => {
                out.push_str(" It still helped with a hot set larger than the page cache.")
            }
            None => out.push_str(" No E3 hot set was larger than the page cache."),
        }
    } else if sections.iter().any(|j| j.experiment == "E1") {
        out.push_str(
            " Published measurements expect the gain to vanish once the hot set is larger than the page cache (run --experiment E3 to see whether it does here).",
        );
    }
    out
}

/// The verdict of a whole report.
pub fn verdict(experiments: &[ExperimentReport]) -> String {
    let judged: Vec<SectionJudgement> = experiments.iter().map(|e| judge(&figures_of(e))).collect();
    let page_cache: BTreeMap<&str, &PageCacheUse> = experiments
        .iter()
        .flat_map(|e| &e.modes)
        .filter_map(|m| Some((m.name.as_str(), m.page_cache.as_ref()?)))
        .collect();
    verdict_text(&judged, &|name| page_cache.get(name).map(|u| (*u).clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::{EngineConfig, QuietkvConfig};

    fn no_config(_: &str) -> Option<PageCacheUse> {
        None
    }

    /// quietkv's configuration of a mode name, as the report carries it.
    fn quietkv(name: &str) -> Option<PageCacheUse> {
        let dir = tempfile::tempdir().ok()?;
        Some(QuietkvConfig::parse(name).ok()?.page_cache(dir.path()))
    }

    fn mode(name: &str, p99: f64, mib_s: f64) -> ModeFigures {
        ModeFigures {
            name: name.into(),
            p99_us: Some(p99),
            p999_us: Some(p99 * 4.0),
            background_mib_s: mib_s,
            background_read_mib_s: mib_s / 2.0,
            background_write_mib_s: mib_s / 2.0,
            // E1 quick: a 2 GiB database read and rewritten.
            background_mib: 4096.0,
            ..Default::default()
        }
    }

    fn e1(modes: Vec<ModeFigures>) -> SectionFigures {
        SectionFigures {
            id: "E1".into(),
            experiment: "E1".into(),
            work: Work::FixedJob { throttle_mib_s: 0 },
            hot_bytes: 8 << 20,
            memory_limit_bytes: Some(256 << 20),
            modes,
        }
    }

    /// The run of the verdict that flipped on a busy host: auto's reads
    /// were served 11x faster once issued, its readers waited for a CPU.
    #[test]
    fn the_verdict_says_engine_or_cpu_for_every_mode() {
        let with = |m: ModeFigures, service: f64, late: f64| ModeFigures {
            service_p99_us: Some(service),
            lateness_p99_us: Some(late),
            ..m
        };
        let j = judge(&e1(vec![
            with(mode("buffered", 3_630.0, 548.0), 1_820.0, 1_200.0),
            with(mode("auto", 7_010.0, 560.0), 171.0, 6_960.0),
        ]));
        let a = j.mode("auto").unwrap();
        assert!((a.service_p99_ratio.unwrap() - 10.64).abs() < 0.01);
        let v = verdict_text(&[j], &no_config);
        assert!(
            v.contains("Engine or CPU? auto: service time p99 10.6x lower, reader lateness p99 7.0 ms (buffered 1.2 ms)"),
            "{v}"
        );
    }

    #[test]
    fn too_few_clean_runs_are_not_ranked() {
        let runs = |m: ModeFigures, clean: usize| ModeFigures {
            clean_runs: clean,
            asked_runs: 3,
            ..m
        };
        // auto: best p99, but the machine disturbed one of its runs.
        let j = judge(&e1(vec![
            runs(mode("buffered", 29_100.0, 548.0), 3),
            runs(mode("auto", 100.0, 560.0), 2),
            runs(mode("dontcache", 14_000.0, 540.0), 3),
        ]));
        assert!(matches!(
            &j.mode("auto").unwrap().standing,
            Standing::Unranked { why } if why.contains("2 clean run(s) of 3 asked")
        ));
        assert_eq!(j.best.as_deref(), Some("dontcache"));
        let v = verdict_text(std::slice::from_ref(&j), &no_config);
        assert!(
            v.contains("Not ranked: auto (2 clean run(s) of 3 asked"),
            "{v}"
        );
        assert!(!v.contains("**auto**"), "{v}");
        // buffered short of clean runs: nothing compares with it.
        let j = judge(&e1(vec![
            runs(mode("buffered", 29_100.0, 548.0), 1),
            runs(mode("auto", 100.0, 560.0), 3),
        ]));
        assert!(matches!(
            &j.mode("auto").unwrap().standing,
            Standing::Unranked { why } if why.contains("buffered has 1 clean run(s)")
        ));
        assert_eq!(j.best, None);
        let v = verdict_text(std::slice::from_ref(&j), &no_config);
        assert!(
            v.contains("no mode had enough clean runs to compare"),
            "{v}"
        );
        // Enough clean runs, and old reports (nothing asked): ranked.
        let j = judge(&e1(vec![
            runs(mode("buffered", 29_100.0, 548.0), 3),
            mode("auto", 100.0, 560.0),
        ]));
        assert_eq!(j.best.as_deref(), Some("auto"));
    }

    #[test]
    fn the_ten_percent_line() {
        assert!(same_work(548.0, 548.0));
        assert!(same_work(548.0, 500.0)); // 8.8% below
        assert!(!same_work(548.0, 490.0)); // 10.6% below
        assert!(same_work(548.0, 681.0)); // more work is not less
        assert!(same_work(0.0, 0.0));
    }

    #[test]
    fn the_same_work_with_a_better_p99_is_recommended() {
        let j = judge(&e1(vec![
            mode("buffered", 29_100.0, 548.0),
            mode("both-direct", 300.0, 530.0),
        ]));
        assert_eq!(j.mode("buffered").unwrap().standing, Standing::Reference);
        assert_eq!(j.mode("both-direct").unwrap().standing, Standing::SameWork);
        assert_eq!(j.best.as_deref(), Some("both-direct"));
        let v = verdict_text(&[j], &no_config);
        assert!(
            v.contains("should run background I/O as **both-direct**"),
            "{v}"
        );
        assert!(
            v.contains("best both-direct with the same work (p99 97.0x lower"),
            "{v}"
        );
        assert!(!v.contains("Not the same work"), "{v}");
    }

    #[test]
    fn short_of_work_is_not_recommended_even_with_a_much_better_p99() {
        // Commit 21f6731, quick E1: write-direct compacted at 169 MiB/s
        // against buffered's 548 and was recommended for a 291x lower p99.
        let j = judge(&e1(vec![
            mode("buffered", 29_100.0, 548.0),
            mode("write-direct", 100.0, 169.0),
            mode("dontcache", 14_000.0, 520.0),
        ]));
        let wd = j.mode("write-direct").unwrap();
        match &wd.standing {
            Standing::NotSameWork {
                shortfall_pct,
                remedy,
            } => {
                assert!((shortfall_pct - 69.2).abs() < 0.1, "{shortfall_pct}");
                assert!(remedy.contains("--throttle 169"), "{remedy}");
            }
            other => panic!("write-direct: {other:?}"),
        }
        assert_eq!(j.best.as_deref(), Some("dontcache"));
        let line = not_same_work_line(&j, wd).unwrap();
        assert!(line.contains("69% below buffered's 548 MiB/s"), "{line}");
        assert!(
            line.contains("not recommended (even with its p99 291.0x lower). To compare: rerun with --throttle 169"),
            "{line}"
        );
        let v = verdict_text(std::slice::from_ref(&j), &no_config);
        assert!(!v.contains("**write-direct**"), "{v}");
        assert!(
            v.contains("should run background I/O as **dontcache** (with the same"),
            "{v}"
        );
        // With the mode's configuration known, the verdict says how to set it.
        let v = verdict_text(&[j], &quietkv);
        assert!(
            v.contains("should run background I/O as **dontcache** (compaction reads dontcache, compaction writes dontcache, flush writes dontcache; user reads stay buffered) (with the same"),
            "{v}"
        );
        assert!(
            v.contains("so not recommended: write-direct (169 MiB/s against buffered's 548, though its p99 was 291.0x lower). To compare it: rerun with --throttle 169"),
            "{v}"
        );
    }

    #[test]
    fn when_every_other_mode_fell_short_none_is_recommended() {
        let j = judge(&e1(vec![
            mode("buffered", 29_100.0, 548.0),
            mode("write-direct", 100.0, 169.0),
            mode("both-direct", 120.0, 221.0),
        ]));
        assert_eq!(j.best, None);
        assert_eq!(j.not_same_work().count(), 2);
        let v = verdict_text(&[j], &no_config);
        assert!(
            v.starts_with("No mode that did the same background work"),
            "{v}"
        );
        assert!(v.contains("none is recommended"), "{v}");
        assert!(v.contains("both-direct (221 MiB/s"), "{v}");
        // One throttle brings all of them to the same work: the slowest's.
        assert!(
            v.contains("To compare them: rerun with --throttle 169"),
            "{v}"
        );
    }

    #[test]
    fn the_remedy_fits_the_experiment() {
        let b = mode("buffered", 1000.0, 100.0);
        let d = mode("direct", 10.0, 50.0);
        let e2 = remedy(
            &Work::Writer {
                write_rate_mib_s: 16.0,
            },
            &b,
            &d,
        );
        assert!(e2.contains("--write-rate 8.0"), "{e2}");
        let e0 = remedy(
            &Work::Streams {
                read_mib_s: 200,
                write_mib_s: 0,
            },
            &b,
            &d,
        );
        assert!(e0.contains("--bg-read-rate 25 --bg-write-rate 25"), "{e0}");
        assert!(e0.contains("200 MiB/s and full speed"), "{e0}");
        let flat = remedy(&Work::Flat, &b, &d);
        assert!(flat.contains("90 MiB/s or more"), "{flat}");
        let throttled = remedy(&Work::FixedJob { throttle_mib_s: 64 }, &b, &d);
        assert!(throttled.contains("--throttle 50"), "{throttled}");
        assert!(
            throttled.contains("below this section's 64 MiB/s"),
            "{throttled}"
        );
    }

    #[test]
    fn a_fixed_job_that_moved_other_bytes_is_not_the_same_work() {
        let mut cut = mode("both-direct", 100.0, 540.0);
        cut.background_mib = 2000.0;
        let j = judge(&e1(vec![mode("buffered", 29_100.0, 548.0), cut]));
        assert!(matches!(
            j.mode("both-direct").unwrap().standing,
            Standing::NotSameWork { .. }
        ));
        assert_eq!(j.best, None);
    }

    #[test]
    fn a_mode_short_of_work_in_one_section_is_not_recommended_for_winning_another() {
        // Quick E1 + E2 at 21f6731-like figures: dontcache best in E2 with
        // the same work, but 21% short of buffered's compaction in E1.
        let e1_sec = e1(vec![
            mode("buffered", 231_000.0, 413.0),
            mode("dontcache", 22_000.0, 324.0),
        ]);
        let e2_sec = SectionFigures {
            id: "E2".into(),
            experiment: "E2".into(),
            work: Work::Writer {
                write_rate_mib_s: 16.0,
            },
            hot_bytes: 30 << 20,
            memory_limit_bytes: Some(256 << 20),
            modes: vec![
                mode("buffered", 43_900.0, 147.0),
                mode("dontcache", 21_500.0, 180.0),
            ],
        };
        let v = verdict_text(&[judge(&e1_sec), judge(&e2_sec)], &no_config);
        assert!(!v.contains("**dontcache**"), "{v}");
        assert!(
            v.contains("E2: best dontcache with the same work (p99 2.0x lower"),
            "{v}"
        );
        assert!(
            v.contains(
                "(dontcache did best somewhere but fell short of buffered's work elsewhere)"
            ),
            "{v}"
        );
    }

    #[test]
    fn e3_with_no_mode_doing_the_same_work_says_so() {
        let mut s = e1(vec![
            mode("buffered", 29_100.0, 548.0),
            mode("both-direct", 100.0, 200.0),
        ]);
        s.experiment = "E3".into();
        let v = verdict_text(&[judge(&s)], &no_config);
        assert!(
            v.contains(
                "In E3: no mode did the same background work as buffered at any hot-set size"
            ),
            "{v}"
        );
    }

    #[test]
    fn auto_recommended_says_nothing_to_configure() {
        let j = judge(&e1(vec![
            mode("buffered", 29_100.0, 548.0),
            mode("auto", 200.0, 560.0),
        ]));
        let v = verdict_text(&[j], &quietkv);
        assert!(
            v.contains("**auto** (the engine's defaults: nothing to configure)"),
            "{v}"
        );
    }
}
