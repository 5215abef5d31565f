//! Compaction: merging tables of one level with the tables they overlap in
//! the next into new tables there, so that reads search few tables,
//! overwritten and deleted data leaves the disk, and level 0 (where flushes
//! land) drains.
//!
//! One job, from start to end:
//!
//! 1. **Pick.** [`picker`] chooses the job from the current version alone
//!    (no I/O, no locks): the level most over its target, its input tables
//!    and the output level, as a [`job::CompactionJob`]. A manual
//!    compaction (`compact_all`, `compact_range`) is picked as a series of
//!    slices instead. How far compaction is behind, and whether writes must
//!    slow down for it, is [`pressure`].
//! 2. **Run.** [`run`] executes the job on a background thread. A trivial
//!    move is only a version edit. A merge opens its input tables with
//!    handles of its own ([`inputs`]), merges them
//!    ([`MergingIterator`](crate::merge::MergingIterator)), keeps only what
//!    some reader can still see ([`drop_rules`]), cuts the output into
//!    tables ([`output_cut`]), builds and syncs them, warms the blocks that
//!    were hot in the inputs ([`warm`]) and installs the job's edit.
//!
//! The thread loop that schedules jobs (and flushes memtables) is
//! `db/background.rs`. Of the files here only [`run`] reaches into the
//! database's shared state; the others know tables, versions and keys.
//!
//! | file            | what it holds                                              |
//! |-----------------|------------------------------------------------------------|
//! | `job.rs`        | the job: inputs, output level, kind, reason, its edit      |
//! | `picker.rs`     | the leveled picker (its policy at the top) and the slices of manual compactions |
//! | `pressure.rs`   | pending compaction bytes and the write stalls they cause   |
//! | `run.rs`        | executing one job: inputs, merge, drop, cut, build, sync, warm, install |
//! | `inputs.rs`     | the input iterators, one table open at a time per level    |
//! | `drop_rules.rs` | what a compaction drops, and the iterator that applies it  |
//! | `output_cut.rs` | where the output is cut into tables                        |
//! | `warm.rs`       | noting hot input blocks and finding the output blocks to warm |
//! | `user_filter.rs`| the user's compaction filter: keep, remove or change a value |

pub(crate) mod drop_rules;
pub(crate) mod inputs;
pub(crate) mod job;
pub(crate) mod output_cut;
pub(crate) mod picker;
pub(crate) mod pressure;
pub(crate) mod run;
pub(crate) mod user_filter;
pub(crate) mod warm;

pub use picker::CompactionPriority;
pub use user_filter::{CompactionFilter, FilterDecision};
