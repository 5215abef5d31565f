//! One unit of compaction work, as the picker hands it over and the run
//! executes it: which tables of which levels go in, where the output goes,
//! why the job was picked, and the version edit that installs its result.

use std::sync::Arc;

use crate::version::{FileMeta, VersionEdit};

/// How a job changes the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionKind {
    /// Move the single input file to `output_level` with an edit; no I/O.
    TrivialMove,
    /// Merge the inputs and write new files to `output_level`.
    Merge,
}

/// Why a job was picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// L0 holds `l0_compaction_trigger` files or more.
    L0FileCount,
    /// A level of L1 or deeper is over its target size.
    LevelSize,
    /// A slice of `compact_all` / `compact_range` (see
    /// [`pick_slice`](super::picker::pick_slice)).
    Manual,
}

/// One unit of compaction work.
#[derive(Debug, Clone)]
pub struct CompactionJob {
    pub kind: CompactionKind,
    pub reason: CompactionReason,
    /// The shallowest input level.
    pub level: usize,
    /// Where outputs go.
    pub output_level: usize,
    /// Input files by level, ascending levels, no empty lists. Within a
    /// level, files are in [`Version::files`] order.
    pub inputs: Vec<(usize, Vec<Arc<FileMeta>>)>,
    /// No level deeper than `output_level` holds data in the job's key
    /// range: tombstones may be dropped (subject to snapshots).
    pub is_bottommost: bool,
    pub max_output_file_size: u64,
    /// Largest user keys of the tables of `output_level + 1` that overlap
    /// the job's range, ascending: outputs are also cut where they pass one
    /// (see [`super::output_cut`]), so they line up with the level below.
    pub grandparent_bounds: Vec<Vec<u8>>,
    /// Compact pointer to record in the job's edit.
    pub compact_pointer: Option<(usize, Vec<u8>)>,
}

impl CompactionJob {
    pub fn input_bytes(&self) -> u64 {
        self.input_files().map(|(_, f)| f.size).sum()
    }

    #[cfg(test)]
    pub fn num_input_files(&self) -> usize {
        self.inputs.iter().map(|(_, v)| v.len()).sum()
    }

    /// All inputs with their levels.
    pub fn input_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMeta>)> + '_ {
        self.inputs
            .iter()
            .flat_map(|(l, files)| files.iter().map(move |f| (*l, f)))
    }

    /// Smallest and largest user key over all inputs.
    pub fn user_key_range(&self) -> (Vec<u8>, Vec<u8>) {
        let (lo, hi) = key_range(self.input_files().map(|(_, f)| f)).unwrap_or_default();
        (lo.to_vec(), hi.to_vec())
    }

    /// The edit that installs this job's result: deletes every input, adds
    /// `outputs` to `output_level`, and advances the compact pointer. For a
    /// [`CompactionKind::TrivialMove`], use [`CompactionJob::trivial_move_edit`].
    pub fn edit_for_outputs(&self, outputs: impl IntoIterator<Item = FileMeta>) -> VersionEdit {
        let mut e = VersionEdit::new();
        for (l, f) in self.input_files() {
            e.delete_file(l, f.number);
        }
        for f in outputs {
            e.add_file(self.output_level, f);
        }
        if let Some(p) = &self.compact_pointer {
            e.compact_pointers.push(p.clone());
        }
        e
    }

    /// The edit that moves the inputs unchanged to `output_level` (only
    /// meaningful for [`CompactionKind::TrivialMove`]).
    pub fn trivial_move_edit(&self) -> VersionEdit {
        let moved: Vec<FileMeta> = self.input_files().map(|(_, f)| (**f).clone()).collect();
        self.edit_for_outputs(moved)
    }
}

/// Smallest and largest user key over `files`; `None` when there are none.
pub(crate) fn key_range<'a>(
    files: impl Iterator<Item = &'a Arc<FileMeta>>,
) -> Option<(&'a [u8], &'a [u8])> {
    let mut r: Option<(&[u8], &[u8])> = None;
    for f in files {
        let (s, l) = (f.smallest_user_key(), f.largest_user_key());
        r = Some(match r {
            None => (s, l),
            Some((lo, hi)) => (lo.min(s), hi.max(l)),
        });
    }
    r
}
