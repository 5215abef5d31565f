//! The report's files in `--out`: `report.md`, `report.json` and each
//! section's plots, with the verdict appended to both documents; and the
//! plain report of the experiments without plots (E4, throughput).

use std::path::Path;

use super::json::render_json;
use super::markdown::render_markdown;
use super::model::Report;
use super::{peers, plot, verdict};

/// Writes report.md, report.json and each experiment's plots into `out`.
pub fn write_outputs(report: &Report, out: &Path) -> Result<(), String> {
    let md = render_markdown(report);
    std::fs::write(out.join("report.md"), md).map_err(|e| e.to_string())?;
    let json = serde_json::to_string_pretty(&render_json(report)).map_err(|e| e.to_string())?;
    std::fs::write(out.join("report.json"), json).map_err(|e| e.to_string())?;
    for e in &report.experiments {
        let id = e.id.to_lowercase();
        plot::percentile_chart(e, &out.join(format!("{id}-percentiles.png")))?;
        plot::timeline_chart(e, &out.join(format!("{id}-p99-over-time.png")))?;
    }
    Ok(())
}

/// [`write_outputs`], then the verdict (same-work rule included) appended
/// to report.md as its own section, followed by `tail`, and to report.json
/// under `verdict`. Returns the verdict.
pub fn write_outputs_with_verdict(
    report: &Report,
    out: &Path,
    tail: &str,
) -> Result<String, String> {
    let verdict = if report.experiments.iter().any(peers::is_multi_engine) {
        peers::verdict(&report.experiments)
    } else {
        verdict::verdict(&report.experiments)
    };
    write_outputs_and_verdict(report, out, &verdict, serde_json::json!(verdict), tail)?;
    Ok(verdict)
}

/// [`write_outputs`], then a verdict the experiment drew itself: `verdict`
/// appended to report.md as its own section, followed by `tail`, and
/// `verdict_json` put in report.json under `verdict`.
pub(crate) fn write_outputs_and_verdict(
    report: &Report,
    out: &Path,
    verdict: &str,
    verdict_json: serde_json::Value,
    tail: &str,
) -> Result<(), String> {
    write_outputs(report, out)?;
    let mut md = render_markdown(report);
    md.push_str(&format!("\n## Verdict\n\n{verdict}\n\n{tail}\n"));
    std::fs::write(out.join("report.md"), md).map_err(|e| e.to_string())?;
    let mut j = render_json(report);
    j["verdict"] = verdict_json;
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())
}

/// Writes report.md and report.json of an experiment without plots (E4,
/// throughput) into `out` and prints the table and where it is.
pub(crate) fn write_plain_report(
    out: &Path,
    md: &str,
    json: &serde_json::Value,
) -> Result<(), String> {
    std::fs::write(out.join("report.md"), md).map_err(|e| e.to_string())?;
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(json).unwrap(),
    )
    .map_err(|e| e.to_string())?;
    println!("{md}");
    println!("report: {}", out.join("report.md").display());
    Ok(())
}
