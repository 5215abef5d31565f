//! The report of a benchmark run, in layers, each using only those below:
//!
//! - [`model`]: the data model (a run's figures gathered per mode, section
//!   and report; medians and ranges over repeats), what `report.json`
//!   keeps and everything above reads;
//! - [`table`]: the Markdown tables (rows = metrics, columns = modes, then
//!   ratio columns against the reference mode) and how cells are written;
//! - [`verdict`]: the same-work rule and the recommendation, drawn from a
//!   section's figures alone;
//! - [`peers`]: the view of a section with several engines (each engine
//!   against its own buffered configuration, quietkv against the peers);
//! - [`markdown`], [`json`], [`plot`]: `report.md`, `report.json`, the PNGs;
//! - [`output`]: the files written into `--out`, verdict included.
//!
//! The items experiments use are re-exported here.

pub mod json;
pub mod markdown;
pub mod model;
pub mod output;
pub mod peers;
pub mod plot;
pub mod table;
pub mod verdict;

#[cfg(test)]
mod tests;

pub use self::json::{render_json, REQUIRED_KEYS};
pub use self::markdown::{
    disturbed_lines, failed_lines, not_same_work_lines, readers_behind, render_markdown,
    section_tables, READER_LATE_US,
};
pub use self::model::{
    stat_of, DisturbedRun, ExperimentReport, FailedRun, Machine, ModeReport, Report, Stat,
};
pub use self::output::{write_outputs, write_outputs_with_verdict};
pub(crate) use self::output::{write_outputs_and_verdict, write_plain_report};
pub use self::table::{
    compare, fmt_value, markdown_table, render_table, standard_rows, Cmp, Fmt, Row,
};
