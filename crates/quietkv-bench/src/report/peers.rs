//! Several engines in one report section: modes named
//! `engine:config`, each engine's modes judged against that engine's own
//! `buffered` (the rule of [`super::verdict`]), the two ratio views (against
//! the same engine's buffered configuration, against RocksDB's best), and
//! where quietkv stands against the peers, with the same-work rule applied
//! across engines: two modes compare only if their background MiB/s are
//! within [`SAME_WORK_TOLERANCE`] of each other.

use super::model::ExperimentReport;
use super::table::render_table;
use super::verdict::{
    figures_of, judge, not_same_work_line, ModeFigures, SectionJudgement, Standing,
    SAME_WORK_TOLERANCE,
};

pub const QUIETKV: &str = "quietkv";
pub const ROCKSDB: &str = "rocksdb";
pub const FJALL: &str = "fjall";

/// The engine of a report name (`rocksdb:both-direct` -> `rocksdb`); `None`
/// for a bare name (a single-engine report).
pub fn engine_of(name: &str) -> Option<&str> {
    name.split_once(':').map(|(e, _)| e)
}

/// The engines of a section, in the order their first mode appears.
pub fn engines(e: &ExperimentReport) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for m in &e.modes {
        if let Some(en) = engine_of(&m.name) {
            if !v.iter().any(|x| x == en) {
                v.push(en.to_string());
            }
        }
    }
    v
}

pub fn is_multi_engine(e: &ExperimentReport) -> bool {
    engines(e).len() > 1
}

/// The section with `engine`'s modes alone, under their configuration
/// names (what a single-engine report would hold).
pub fn project(e: &ExperimentReport, engine: &str) -> ExperimentReport {
    let mut p = e.clone();
    p.modes = e
        .modes
        .iter()
        .filter(|m| engine_of(&m.name) == Some(engine))
        .cloned()
        .map(|mut m| {
            m.name = m.name[engine.len() + 1..].to_string();
            m
        })
        .collect();
    p
}

/// Each engine's modes judged against its own buffered configuration.
pub fn judge_per_engine(e: &ExperimentReport) -> Vec<(String, SectionJudgement)> {
    engines(e)
        .into_iter()
        .map(|en| {
            let j = judge(&figures_of(&project(e, &en)));
            (en, j)
        })
        .collect()
}

/// The standing of the mode of report name `name` within its engine.
pub fn standing(judged: &[(String, SectionJudgement)], name: &str) -> Option<Standing> {
    let en = engine_of(name)?;
    let (_, j) = judged.iter().find(|(e, _)| e == en)?;
    j.mode(&name[en.len() + 1..]).map(|m| m.standing.clone())
}

/// The best configuration of `engine` in a section: the lowest median p99
/// among its modes that did the same work as its buffered one (buffered
/// included). The report name, or `None` without such a mode.
pub fn best_of(e: &ExperimentReport, engine: &str) -> Option<String> {
    let p = project(e, engine);
    let j = judge(&figures_of(&p));
    figures_of(&p)
        .modes
        .iter()
        .filter(|m| {
            matches!(
                j.mode(&m.name).map(|x| &x.standing),
                Some(Standing::Reference | Standing::SameWork)
            )
        })
        .filter_map(|m| Some((m, m.p99_us?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(m, _)| format!("{engine}:{}", m.name))
}

/// report.md's tables of a multi-engine section: every mode's values, then
/// the ratios against the same engine's buffered configuration, then
/// against the best RocksDB configuration.
pub fn markdown_tables(e: &ExperimentReport) -> String {
    let idx = |name: &str| e.modes.iter().position(|m| m.name == name);
    let mut out = render_table(e, true, &[]);
    let same_engine: Vec<(usize, usize)> = e
        .modes
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let en = engine_of(&m.name)?;
            let r = idx(&format!("{en}:buffered"))?;
            (r != i).then_some((i, r))
        })
        .collect();
    if !same_engine.is_empty() {
        out.push_str("\nAgainst the same engine's buffered configuration:\n\n");
        out.push_str(&render_table(e, false, &same_engine));
    }
    match best_of(e, ROCKSDB).and_then(|b| Some((idx(&b)?, b))) {
        Some((r, name)) => {
            let pairs: Vec<(usize, usize)> = (0..e.modes.len())
                .filter(|&i| i != r)
                .map(|i| (i, r))
                .collect();
            out.push_str(&format!(
                "\nAgainst the best RocksDB configuration ({name}: the lowest p99 among RocksDB's configurations that did the same background work as rocksdb:buffered):\n\n"
            ));
            out.push_str(&render_table(e, false, &pairs));
        }
        None if engines(e).iter().any(|x| x == ROCKSDB) => out.push_str(
            "\nNo RocksDB configuration did the same background work as rocksdb:buffered with a p99 to compare, so there is no best RocksDB configuration to compare with.\n",
        ),
        None => {}
    }
    out
}

/// The "not the same work" lines of a multi-engine section, per engine
/// against its own buffered configuration.
pub fn not_same_work_lines(e: &ExperimentReport) -> Vec<String> {
    let mut v = Vec::new();
    for (en, j) in judge_per_engine(e) {
        for m in j.not_same_work() {
            if let Some(line) = not_same_work_line(&j, m) {
                v.push(format!("{en}:{line}"));
            }
        }
    }
    v
}

/// report.json's `peers` object of a multi-engine section: each engine's
/// same-work check against its own buffered, the best RocksDB
/// configuration, and the cross-engine comparisons.
pub fn json_of(e: &ExperimentReport, judged: &[(String, SectionJudgement)]) -> serde_json::Value {
    use serde_json::json;
    json!({
        "engines": engines(e),
        "best_rocksdb": best_of(e, ROCKSDB),
        "same_work_check": judged.iter().map(|(en, j)| json!({
            "engine": en,
            "reference": format!("{en}:buffered"),
            "reference_mib_s": j.reference_mib_s,
            "not_same_work": j.not_same_work().map(|m| format!("{en}:{}", m.name)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "comparisons": comparisons(e).iter().map(|c| json!({
            "quietkv": c.quietkv,
            "peer": c.peer,
            "p99_ratio": c.p99_ratio,
            "p999_ratio": c.p999_ratio,
            "quietkv_background_mib_s": c.quietkv_mib_s,
            "peer_background_mib_s": c.peer_mib_s,
            "same_work": c.same_work,
        })).collect::<Vec<_>>(),
        "same_work_tolerance": SAME_WORK_TOLERANCE,
    })
}

/// Whether two modes of different engines did the same background work:
/// their background MiB/s within [`SAME_WORK_TOLERANCE`] of the larger.
pub fn same_work_across(a_mib_s: f64, b_mib_s: f64) -> bool {
    let hi = a_mib_s.max(b_mib_s);
    hi <= 0.0 || (a_mib_s - b_mib_s).abs() <= SAME_WORK_TOLERANCE * hi
}

/// quietkv's mode against a peer's in one section.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerComparison {
    pub section: String,
    pub experiment: String,
    pub quietkv: String,
    pub peer: String,
    /// quietkv's p99 / the peer's (below 1: quietkv lower).
    pub p99_ratio: Option<f64>,
    pub p999_ratio: Option<f64>,
    pub quietkv_mib_s: f64,
    pub peer_mib_s: f64,
    /// E2: each side's user writes, MiB/s (they differ when a mode was
    /// given a write rate of its own).
    pub quietkv_user_write_mib_s: Option<f64>,
    pub peer_user_write_mib_s: Option<f64>,
    pub same_work: bool,
    /// Why the two are not compared, when either side has fewer clean
    /// runs than asked (the machine disturbed the rest, or the mode failed
    /// them).
    pub unranked: Option<String>,
}

/// Why a mode is not ranked: fewer clean runs than asked.
fn too_few_clean(m: &ModeFigures) -> Option<String> {
    m.short_of_clean_runs().then(|| {
        format!(
            "{} has {} clean run(s) of {} asked: {}",
            m.name,
            m.clean_runs,
            m.asked_runs,
            m.why_short()
        )
    })
}

/// How far below the peer's user write rate quietkv's may fall (the
/// writer's pacing, not a load of its own) and still count as writing
/// as much.
const USER_WRITE_SLACK: f64 = 0.02;

/// Whether quietkv wrote at least as much user data per second as the
/// peer: background bytes that match only because quietkv was given
/// fewer user writes would not be the same work.
fn wrote_as_much(quietkv: Option<f64>, peer: Option<f64>) -> bool {
    match (quietkv, peer) {
        (Some(q), Some(p)) => q >= (1.0 - USER_WRITE_SLACK) * p,
        _ => true,
    }
}

fn figures<'a>(all: &'a [ModeFigures], name: &str) -> Option<&'a ModeFigures> {
    all.iter().find(|m| m.name == name)
}

/// quietkv's `auto` (and its best configuration, where that differs)
/// against RocksDB's best configuration and fjall's.
pub fn comparisons(e: &ExperimentReport) -> Vec<PeerComparison> {
    let f = figures_of(e);
    let mut ours: Vec<String> = Vec::new();
    if figures(&f.modes, "quietkv:auto").is_some() {
        ours.push("quietkv:auto".into());
    }
    if let Some(b) = best_of(e, QUIETKV) {
        if !ours.contains(&b) {
            ours.push(b);
        }
    }
    let peers: Vec<String> = [best_of(e, ROCKSDB), best_of(e, FJALL)]
        .into_iter()
        .flatten()
        .collect();
    let mut v = Vec::new();
    for q in &ours {
        for p in &peers {
            let (Some(a), Some(b)) = (figures(&f.modes, q), figures(&f.modes, p)) else {
                continue;
            };
            let ratio = |x: Option<f64>, y: Option<f64>| Some(x? / y?.max(1.0));
            v.push(PeerComparison {
                section: e.id.clone(),
                experiment: f.experiment.clone(),
                quietkv: q.clone(),
                peer: p.clone(),
                p99_ratio: ratio(a.p99_us, b.p99_us),
                p999_ratio: ratio(a.p999_us, b.p999_us),
                quietkv_mib_s: a.background_mib_s,
                peer_mib_s: b.background_mib_s,
                quietkv_user_write_mib_s: a.user_write_mib_s,
                peer_user_write_mib_s: b.user_write_mib_s,
                same_work: same_work_across(a.background_mib_s, b.background_mib_s)
                    && wrote_as_much(a.user_write_mib_s, b.user_write_mib_s),
                unranked: match (too_few_clean(a), too_few_clean(b)) {
                    (None, None) => None,
                    (x, y) => Some(x.into_iter().chain(y).collect::<Vec<_>>().join(", ")),
                },
            });
        }
    }
    v
}

/// The target: quietkv's `auto` p99 and p99.9 at most this share
/// of the best RocksDB configuration's, with the same work.
pub const TARGET_RATIO: f64 = 0.5;

/// A ratio as `0.25x`, or as `1/911` when two decimals would print 0.00x.
fn x(r: Option<f64>) -> String {
    match r {
        Some(r) if r > 0.0 && r < 0.095 => format!("1/{:.0}", 1.0 / r),
        Some(r) => format!("{r:.2}x"),
        None => "n/a".into(),
    }
}

/// A peer that ran in a section beside quietkv but has no configuration
/// to compare with: none of its modes has a median p99 of clean runs that
/// did its reference's work.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingPeer {
    pub section: String,
    pub experiment: String,
    pub engine: String,
    /// Why, per mode: too few clean runs, or none that did the same work.
    pub why: String,
}

/// The peers of a section that quietkv is compared with nowhere, and why.
pub fn missing_peers(e: &ExperimentReport) -> Vec<MissingPeer> {
    let present = engines(e);
    if !present.iter().any(|x| x == QUIETKV) {
        return Vec::new();
    }
    let f = figures_of(e);
    [ROCKSDB, FJALL]
        .into_iter()
        .filter(|en| present.iter().any(|x| x == en) && best_of(e, en).is_none())
        .map(|en| {
            let short: Vec<String> = f
                .modes
                .iter()
                .filter(|m| engine_of(&m.name) == Some(en))
                .filter_map(too_few_clean)
                .collect();
            MissingPeer {
                section: e.id.clone(),
                experiment: f.experiment.clone(),
                engine: en.to_string(),
                why: if short.is_empty() {
                    format!("none of its configurations has a p99 of runs that did {en}:buffered's work")
                } else {
                    short.join(", ")
                },
            }
        })
        .collect()
}

/// One sentence per comparison and per peer left without one, then the
/// target against RocksDB.
pub fn peers_text(cmps: &[PeerComparison], missing: &[MissingPeer]) -> String {
    if cmps.is_empty() && missing.is_empty() {
        return "Against the peers: no section had a quietkv mode and a peer's best configuration to compare.".into();
    }
    let mut parts = Vec::new();
    for c in cmps {
        // The ratios of runs the machine disturbed are not a result, and
        // are not printed as one (the tables keep every clean run's figures).
        if let Some(why) = &c.unranked {
            parts.push(format!(
                "{}: {} not ranked against {} ({why}).",
                c.section, c.quietkv, c.peer
            ));
            continue;
        }
        // Said only where the two wrote at different rates.
        let user_writes = match (c.quietkv_user_write_mib_s, c.peer_user_write_mib_s) {
            (Some(q), Some(p)) if (q - p).abs() > USER_WRITE_SLACK * p.max(q) => {
                format!(", quietkv writing {q:.1} MiB/s of user data against {p:.1}")
            }
            _ => String::new(),
        };
        let work = if c.same_work {
            format!(
                "the same background work ({:.0} against {:.0} MiB/s{user_writes})",
                c.quietkv_mib_s, c.peer_mib_s
            )
        } else if !wrote_as_much(c.quietkv_user_write_mib_s, c.peer_user_write_mib_s) {
            format!(
                "**not the same work** (quietkv wrote less user data: {:.1} against {:.1} MiB/s), so the latencies do not compare",
                c.quietkv_user_write_mib_s.unwrap_or(0.0),
                c.peer_user_write_mib_s.unwrap_or(0.0)
            )
        } else {
            format!(
                "**not the same work** ({:.0} against {:.0} MiB/s, more than {:.0}% apart{user_writes}), so the latencies do not compare",
                c.quietkv_mib_s,
                c.peer_mib_s,
                SAME_WORK_TOLERANCE * 100.0
            )
        };
        parts.push(format!(
            "{}: {} p99 {} and p99.9 {} of {}'s, {work}.",
            c.section,
            c.quietkv,
            x(c.p99_ratio),
            x(c.p999_ratio),
            c.peer
        ));
    }
    let target: Vec<String> = cmps
        .iter()
        .filter(|c| c.quietkv == "quietkv:auto" && engine_of(&c.peer) == Some(ROCKSDB))
        .filter(|c| matches!(c.experiment.as_str(), "E1" | "E2" | "E3"))
        .map(|c| {
            let met = c.same_work
                && c.p99_ratio.is_some_and(|r| r <= TARGET_RATIO)
                && c.p999_ratio.is_some_and(|r| r <= TARGET_RATIO);
            format!(
                "{} {}",
                c.section,
                if c.unranked.is_some() {
                    "not judged (too few clean runs)".to_string()
                } else if met {
                    "met".to_string()
                } else if !c.same_work {
                    "not judged (not the same work)".to_string()
                } else {
                    "not met".to_string()
                }
            )
        })
        .chain(
            missing
                .iter()
                .filter(|m| m.engine == ROCKSDB)
                .filter(|m| matches!(m.experiment.as_str(), "E1" | "E2" | "E3"))
                .map(|m| {
                    format!(
                        "{} not judged (no RocksDB configuration to compare)",
                        m.section
                    )
                }),
        )
        .collect();
    parts.extend(missing.iter().map(|m| {
        format!(
            "{}: quietkv not ranked against {} ({}).",
            m.section, m.engine, m.why
        )
    }));
    let mut out = format!("Against the peers: {}", parts.join(" "));
    if !target.is_empty() {
        out.push_str(&format!(
            " Target (quietkv:auto p99 and p99.9 at most {TARGET_RATIO}x the best RocksDB configuration's, with the same work): {}.",
            target.join("; ")
        ));
    }
    out
}

/// The verdict of a report with several engines: quietkv's own verdict
/// drawn from its modes alone (as a quietkv-only run; only where it ran
/// two or more modes to compare), then where it stands against the peers.
pub fn verdict(experiments: &[ExperimentReport]) -> String {
    let ours: Vec<ExperimentReport> = experiments.iter().map(|e| project(e, QUIETKV)).collect();
    let mut out = if ours.iter().any(|e| e.modes.len() >= 2) {
        format!("quietkv: {}", super::verdict::verdict(&ours))
    } else {
        String::new()
    };
    let cmps: Vec<PeerComparison> = experiments.iter().flat_map(comparisons).collect();
    let missing: Vec<MissingPeer> = experiments.iter().flat_map(missing_peers).collect();
    out.push_str(if out.is_empty() { "" } else { "\n\n" });
    out.push_str(&peers_text(&cmps, &missing));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ratios_print_as_fractions() {
        assert_eq!(x(Some(0.25)), "0.25x");
        assert_eq!(x(Some(1.0 / 911.0)), "1/911");
        assert_eq!(x(Some(0.05)), "1/20");
        assert_eq!(x(None), "n/a");
    }
    use crate::report::model::ModeReport;
    use crate::result::{BackgroundWork, RunResult};

    fn mode(name: &str, p99: f64, mib_s: f64) -> ModeReport {
        let mut r = RunResult {
            mode: name.into(),
            repeat: 1,
            ..Default::default()
        };
        r.measured.latency.p99 = p99;
        r.measured.latency.p999 = p99 * 3.0;
        r.measured.latency.count = 100;
        // E1: the same 2 GiB rewritten, at mib_s.
        r.background = BackgroundWork {
            read_bytes: 1 << 30,
            write_bytes: 1 << 30,
            seconds: 2048.0 / mib_s,
        };
        ModeReport {
            runs: vec![r],
            ..ModeReport::new(name, None, 0)
        }
    }

    fn section(modes: Vec<ModeReport>) -> ExperimentReport {
        ExperimentReport {
            id: "E1".into(),
            title: "t".into(),
            params: serde_json::json!({"experiment": "E1", "throttle_mib_s": 0}),
            header: Vec::new(),
            notes: Vec::new(),
            modes,
        }
    }

    fn three_engines() -> ExperimentReport {
        section(vec![
            mode("quietkv:buffered", 20_000.0, 400.0),
            mode("rocksdb:buffered", 30_000.0, 300.0),
            mode("fjall:buffered", 40_000.0, 200.0),
            mode("quietkv:auto", 500.0, 390.0),
            mode("rocksdb:both-direct", 2_000.0, 290.0),
            // Lowest p99 of RocksDB's, but 50% short of its buffered work.
            mode("rocksdb:read-direct", 100.0, 150.0),
        ])
    }

    #[test]
    fn engines_and_projections_follow_the_names() {
        let e = three_engines();
        assert_eq!(engines(&e), ["quietkv", "rocksdb", "fjall"]);
        assert!(is_multi_engine(&e));
        let r = project(&e, "rocksdb");
        let names: Vec<&str> = r.modes.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["buffered", "both-direct", "read-direct"]);
        assert!(!is_multi_engine(&project(&e, "quietkv")));
        assert_eq!(engine_of("buffered"), None);
    }

    #[test]
    fn the_best_rocksdb_configuration_did_its_buffered_work() {
        let e = three_engines();
        assert_eq!(best_of(&e, ROCKSDB).as_deref(), Some("rocksdb:both-direct"));
        assert_eq!(best_of(&e, FJALL).as_deref(), Some("fjall:buffered"));
        let judged = judge_per_engine(&e);
        assert!(matches!(
            standing(&judged, "rocksdb:read-direct"),
            Some(Standing::NotSameWork { .. })
        ));
        assert_eq!(standing(&judged, "quietkv:auto"), Some(Standing::SameWork));
        let lines = not_same_work_lines(&e);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("rocksdb:read-direct did 150 MiB/s"),
            "{lines:?}"
        );
    }

    #[test]
    fn the_tables_hold_every_mode_and_both_ratio_views() {
        let md = markdown_tables(&three_engines());
        assert!(md.contains("| Metric | quietkv:buffered | rocksdb:buffered | fjall:buffered | quietkv:auto | rocksdb:both-direct | rocksdb:read-direct |"), "{md}");
        assert!(
            md.contains("Against the same engine's buffered configuration"),
            "{md}"
        );
        assert!(md.contains("| quietkv:auto vs quietkv:buffered | rocksdb:both-direct vs rocksdb:buffered | rocksdb:read-direct vs rocksdb:buffered |"), "{md}");
        assert!(
            md.contains("Against the best RocksDB configuration (rocksdb:both-direct"),
            "{md}"
        );
        assert!(
            md.contains("| quietkv:auto vs rocksdb:both-direct |"),
            "{md}"
        );
        // quietkv:auto's p99 500 us against both-direct's 2 ms.
        assert!(md.contains("4.0x lower"), "{md}");
    }

    #[test]
    fn cross_engine_same_work_is_within_ten_percent_either_way() {
        assert!(same_work_across(400.0, 370.0));
        assert!(same_work_across(370.0, 400.0));
        assert!(!same_work_across(400.0, 350.0));
        assert!(!same_work_across(350.0, 400.0));
        assert!(same_work_across(0.0, 0.0));
    }

    #[test]
    fn the_verdict_places_quietkv_against_rocksdb_s_best_and_fjall() {
        let e = three_engines();
        let c = comparisons(&e);
        let names: Vec<(&str, &str)> = c
            .iter()
            .map(|c| (c.quietkv.as_str(), c.peer.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("quietkv:auto", "rocksdb:both-direct"),
                ("quietkv:auto", "fjall:buffered")
            ]
        );
        // 390 against 290 MiB/s: more than 10% apart.
        assert!(!c[0].same_work);
        assert!((c[0].p99_ratio.unwrap() - 0.25).abs() < 1e-9);
        let v = verdict(std::slice::from_ref(&e));
        assert!(v.starts_with("quietkv: "), "{v}");
        assert!(
            v.contains("E1: quietkv:auto p99 0.25x and p99.9 0.25x of rocksdb:both-direct's, **not the same work** (390 against 290 MiB/s"),
            "{v}"
        );
        assert!(v.contains("E1 not judged (not the same work)"), "{v}");
        // With the same work, the target is met at 0.25x.
        let mut e2 = e.clone();
        e2.modes[4] = mode("rocksdb:both-direct", 2_000.0, 380.0);
        e2.modes[1] = mode("rocksdb:buffered", 30_000.0, 385.0);
        let v = verdict(&[e2]);
        assert!(
            v.contains("the same background work (390 against 380 MiB/s)"),
            "{v}"
        );
        assert!(v.contains("E1 met"), "{v}");
        // Slower than RocksDB's best: not met.
        let mut e3 = e.clone();
        e3.modes[3] = mode("quietkv:auto", 1_500.0, 300.0);
        let v = verdict(&[e3]);
        assert!(v.contains("p99 0.75x"), "{v}");
        assert!(v.contains("E1 not met"), "{v}");
        // With quietkv:auto alone, quietkv has no modes of its own to weigh.
        let mut solo = e.clone();
        solo.modes
            .retain(|m| !m.name.starts_with("quietkv:") || m.name == "quietkv:auto");
        let v = verdict(&[solo]);
        assert!(v.starts_with("Against the peers: "), "{v}");
    }

    /// E2's mode: `mib_s` of background work while the writer wrote
    /// `user_mib_s` of user data.
    fn writer_mode(name: &str, p99: f64, mib_s: f64, user_mib_s: f64) -> ModeReport {
        let mut m = mode(name, p99, mib_s);
        m.runs[0].extra.insert("write_mib_s".into(), user_mib_s);
        m
    }

    fn e2(modes: Vec<ModeReport>) -> ExperimentReport {
        ExperimentReport {
            id: "E2".into(),
            params: serde_json::json!({"experiment": "E2", "write_rate_mib_s": 16.0}),
            ..section(modes)
        }
    }

    #[test]
    fn more_user_writes_for_the_same_background_bytes_compare_and_fewer_do_not() {
        // quietkv moved 15% fewer background bytes for the same writes.
        let c = comparisons(&e2(vec![
            writer_mode("quietkv:auto", 400.0, 220.0, 16.0),
            writer_mode("rocksdb:all-direct", 2_000.0, 259.0, 16.0),
        ]));
        assert!(!c[0].same_work);
        // Given 19 MiB/s of user writes, its background bytes match: the
        // same work, and the verdict says quietkv wrote more.
        let more = e2(vec![
            writer_mode("quietkv:auto", 400.0, 255.0, 19.0),
            writer_mode("rocksdb:all-direct", 2_000.0, 259.0, 16.0),
        ]);
        assert!(comparisons(&more)[0].same_work);
        let v = verdict(&[more]);
        assert!(
            v.contains("the same background work (255 against 259 MiB/s, quietkv writing 19.0 MiB/s of user data against 16.0)"),
            "{v}"
        );
        assert!(v.contains("E2 met"), "{v}");
        // Matching bytes with fewer user writes is not the same work.
        let fewer = e2(vec![
            writer_mode("quietkv:auto", 400.0, 255.0, 14.0),
            writer_mode("rocksdb:all-direct", 2_000.0, 259.0, 16.0),
        ]);
        assert!(!comparisons(&fewer)[0].same_work);
        let v = verdict(&[fewer]);
        assert!(
            v.contains(
                "**not the same work** (quietkv wrote less user data: 14.0 against 16.0 MiB/s)"
            ),
            "{v}"
        );
        // Within the writer's pacing slack it is as much.
        assert!(wrote_as_much(Some(15.8), Some(16.0)));
        assert!(!wrote_as_much(Some(15.5), Some(16.0)));
        assert!(wrote_as_much(None, Some(16.0)));
    }

    #[test]
    fn a_side_with_too_few_clean_runs_is_not_compared() {
        let clean = |mut m: ModeReport, n: usize| {
            m.asked = 3;
            m.runs = (0..n).map(|_| m.runs[0].clone()).collect();
            m
        };
        let both = e2(vec![
            clean(writer_mode("quietkv:auto", 300.0, 268.0, 19.0), 3),
            clean(writer_mode("rocksdb:all-direct", 1_100.0, 253.0, 16.0), 3),
        ]);
        let v = verdict(&[both]);
        assert!(v.contains("quietkv:auto p99 0.27x"), "{v}");
        assert!(v.contains("E2 met"), "{v}");
        // The machine disturbed one of quietkv's runs: no ratio, no target.
        let short = e2(vec![
            clean(writer_mode("quietkv:auto", 300.0, 268.0, 19.0), 2),
            clean(writer_mode("rocksdb:all-direct", 1_100.0, 253.0, 16.0), 3),
        ]);
        let c = comparisons(&short);
        assert_eq!(
            c[0].unranked.as_deref(),
            Some("quietkv:auto has 2 clean run(s) of 3 asked: the machine disturbed the rest")
        );
        let v = verdict(&[short]);
        assert!(
            v.contains("E2: quietkv:auto not ranked against rocksdb:all-direct (quietkv:auto has 2 clean run(s) of 3 asked: the machine disturbed the rest)."),
            "{v}"
        );
        assert!(!v.contains("p99 0.27x"), "{v}");
        assert!(v.contains("E2 not judged (too few clean runs)"), "{v}");
        // The peer's worker outgrew the memory limit in one run: its own
        // doing, said as such.
        let mut failed = clean(writer_mode("rocksdb:all-direct", 1_100.0, 253.0, 16.0), 2);
        failed.failed.push(crate::report::FailedRun {
            repeat: 3,
            why: "killed by the OOM killer".into(),
        });
        let c = comparisons(&e2(vec![
            clean(writer_mode("quietkv:auto", 300.0, 268.0, 19.0), 3),
            failed,
        ]));
        assert_eq!(
            c[0].unranked.as_deref(),
            Some("rocksdb:all-direct has 2 clean run(s) of 3 asked: 1 failed (see Failed runs)")
        );
    }

    #[test]
    fn a_peer_without_one_clean_run_is_named_with_the_reason() {
        let mut disturbed = writer_mode("rocksdb:all-direct", 1_100.0, 253.0, 16.0);
        disturbed.asked = 3;
        disturbed.disturbed = std::mem::take(&mut disturbed.runs)
            .into_iter()
            .map(|r| crate::report::DisturbedRun {
                run: r,
                reasons: vec!["the disk held requests".into()],
            })
            .collect();
        let mut ours = writer_mode("quietkv:auto", 300.0, 268.0, 19.0);
        ours.asked = 1;
        let e = e2(vec![ours, disturbed]);
        assert!(comparisons(&e).is_empty());
        let missing = missing_peers(&e);
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert_eq!(missing[0].engine, "rocksdb");
        let v = verdict(&[e]);
        assert!(
            v.contains("E2: quietkv not ranked against rocksdb (rocksdb:all-direct has 0 clean run(s) of 3 asked: the machine disturbed the rest)."),
            "{v}"
        );
        assert!(
            v.contains("E2 not judged (no RocksDB configuration to compare)"),
            "{v}"
        );
        assert!(!v.contains("no section had"), "{v}");
    }
}
