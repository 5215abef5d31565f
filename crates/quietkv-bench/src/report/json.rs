//! `report.json`: each mode's medians in the documented nesting
//! (`read_latency_us.p99` as `{"read_latency_us": {"p99": ...}}`), `range`
//! with [min, max], each run's flat numbers, the median run's time series,
//! and each section's same-work check (per engine with several engines).

use serde_json::{json, Map, Value};

use super::model::Report;
use super::peers;
use super::verdict::{self, Standing};

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
            let multi = peers::is_multi_engine(e);
            let per_engine = if multi {
                peers::judge_per_engine(e)
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
                        peers::standing(&per_engine, &m.name)
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
                    o.insert("failed_runs".into(), json!(m.failed));
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
                section["peers"] = peers::json_of(e, &per_engine);
            }
            section
        })
        .collect();
    json!({"machine": r.machine, "experiments": exps})
}
