//! `report.md`: the machine, then each section's header lines, its tables
//! and the lines under them (modes that did not do the same work as
//! buffered, readers that fell behind their schedule, runs the machine
//! disturbed, run notes). The parents print the same lines on the terminal.

use super::model::{ExperimentReport, ModeReport, Report};
use super::peers;
use super::table::{fmt_value, markdown_table, Fmt};
use super::verdict;

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

/// One line per mode with runs that failed (see [`ModeReport::failed`]).
pub fn failed_lines(e: &ExperimentReport) -> Vec<String> {
    e.modes.iter().filter_map(ModeReport::failed_line).collect()
}

/// A section's tables: one table with ratios against buffered, or with
/// several engines, the values and the two ratio views of
/// [`peers::markdown_tables`].
pub fn section_tables(e: &ExperimentReport) -> String {
    if peers::is_multi_engine(e) {
        peers::markdown_tables(e)
    } else {
        markdown_table(e)
    }
}

/// The "not the same work" lines of a section (see [`section_tables`]).
pub fn not_same_work_lines(e: &ExperimentReport) -> Vec<String> {
    if peers::is_multi_engine(e) {
        return peers::not_same_work_lines(e);
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
        for line in failed_lines(e) {
            out.push_str(&format!("\n**Failed runs:** {line}\n"));
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
