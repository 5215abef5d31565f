//! The database's shared state: what the write path, the background
//! threads, snapshots and transactions all reach through `Inner`. Kept
//! apart from the code that works on it (flush, compaction, install,
//! recovery), which all import it, so none of them imports another
//! through it.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex, RwLock};
use quietio::IoEnv;

use super::counters::Counters;
use super::precondition::Precondition;
use crate::batch::WriteBatch;
use crate::compaction::picker::{PickerOptions, SliceCursor};
use crate::compaction::pressure::{write_pressure, WriteStall};
use crate::error::{Error, Result};
use crate::fileio::LogFile;
pub(crate) use crate::keyspace::tree::{Immutable, SuperVersion};
use crate::keyspace::tree::{Tree, TreeHandle};
use crate::options::Options;
use crate::record_log::LogWriter;
use crate::snapshot_list::SnapshotList;
use crate::table::TableCache;
use crate::version::Version;
use crate::wal::WalSet;

/// A manual compaction asked for by `compact_all`/`compact_range`, run
/// as slices (see `compaction::picker::pick_slice`).
pub(crate) struct ManualCompaction {
    /// The keyspace it compacts.
    pub keyspace: u32,
    pub cursor: SliceCursor,
    pub done: bool,
    pub result: Option<Result<()>>,
}

/// Mutable state guarded by `Inner::state`.
pub(crate) struct State {
    /// Every keyspace; the default one (id 0) first, always there.
    pub trees: Vec<Tree>,
    /// Versions of dropped keyspaces that readers still hold: their
    /// tables are kept until the readers are done.
    pub retired_versions: Vec<Weak<Version>>,
    /// The id the next created keyspace gets.
    pub next_keyspace_id: u32,
    /// `None` when opened read-only.
    pub manifest: Option<LogWriter<LogFile>>,
    pub manifest_number: u64,
    /// Size of the snapshot the current manifest starts with (see
    /// `manifest::maybe_rotate`).
    pub manifest_snapshot_bytes: u64,
    /// The WALs the manifest requires, kept up to date by `install` so a
    /// rotated manifest can record them.
    pub wals: WalSet,
    /// The live WAL, which every memtable started since its switch writes to.
    pub live_wal: u64,
    pub next_file: u64,
    /// Tables being written and not yet installed.
    pub pending_outputs: HashSet<u64>,
    pub compactions_running: usize,
    pub manual: Option<ManualCompaction>,
    /// A failed background write or WAL write: the database stays readable
    /// but refuses writes until reopened.
    pub bg_error: Option<Error>,
    /// Obsolete WAL files kept for reuse by the next WAL switches
    /// (`Options::wal_recycle_count`), oldest first.
    pub wal_pool: VecDeque<u64>,
    /// The first WAL this process wrote: only WALs from it on are in the
    /// recyclable format and may be kept.
    pub first_own_wal: u64,
}

impl State {
    /// Bytes of every keyspace's live tables.
    pub fn table_bytes(&self) -> u64 {
        self.trees.iter().map(|t| t.version.total_bytes()).sum()
    }

    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file;
        self.next_file += 1;
        n
    }

    /// The default keyspace.
    #[inline]
    pub fn default_tree(&self) -> &Tree {
        &self.trees[0]
    }

    #[inline]
    pub fn default_tree_mut(&mut self) -> &mut Tree {
        &mut self.trees[0]
    }

    /// Keyspace `id`, if it exists (not dropped).
    pub fn tree(&self, id: u32) -> Option<&Tree> {
        self.trees.iter().find(|t| t.id() == id)
    }

    pub fn tree_mut(&mut self, id: u32) -> Option<&mut Tree> {
        self.trees.iter_mut().find(|t| t.id() == id)
    }

    /// WAL files older than this hold nothing that is not in a table.
    pub fn min_live_wal(&self) -> u64 {
        self.trees
            .iter()
            .map(Tree::min_live_wal)
            .min()
            .unwrap_or(self.live_wal)
    }
}

/// The WAL being appended to; only the write leader touches it.
pub(crate) struct Wal {
    pub writer: LogWriter<LogFile>,
}

/// Everything an open database shares between its handle, its writers
/// and its background threads.
pub(crate) struct Inner {
    pub dir: PathBuf,
    /// Recorded in every table written (0 for a database created before
    /// ids existed; see `table::identity`).
    pub db_id: u64,
    pub opts: Options,
    pub popts: PickerOptions,
    pub env: Arc<IoEnv>,
    /// Exclusive for a writer; shared (or none, when the directory has no
    /// LOCK file) for a read-only open.
    /// Let go when the database is closed, even while handles (keyspaces,
    /// transactions) still hold this state.
    pub lock: Mutex<Option<crate::lockfile::DirLock>>,
    /// Opened with [`Db::open_read_only`].
    pub read_only: bool,
    pub table_cache: Arc<TableCache>,
    pub state: Mutex<State>,
    /// Wakes background threads when there is work.
    pub bg_cv: Condvar,
    /// Wakes writers, flush and compaction waiters when work finishes.
    pub done_cv: Condvar,
    /// The default keyspace's reader view (its tree's handle holds the same).
    pub super_version: Arc<RwLock<Arc<SuperVersion>>>,
    /// The default keyspace's handle.
    pub default_handle: Arc<TreeHandle>,
    /// `None` when opened read-only.
    pub wal: Mutex<Option<Wal>>,
    pub writers: Mutex<VecDeque<Arc<Writer>>>,
    /// The write leader's group batch (the WAL record it writes), kept
    /// between groups so a write does not allocate one; only the current
    /// leader locks it.
    pub group_batch: Mutex<crate::batch::WriteBatch>,
    pub snapshots: Arc<SnapshotList>,
    /// The newest sequence number readers may see.
    pub visible_seq: AtomicU64,
    pub shutting_down: AtomicBool,
    pub counters: Counters,
    pub compaction_open_files: Arc<AtomicUsize>,
    /// Held while obsolete files are deleted: the flush and compaction
    /// threads both delete after their work, and two listings at once
    /// would each try to delete the same files.
    pub deleting_obsolete: Mutex<()>,
}

/// One write waiting in the queue; the leader of its group answers it.
pub(crate) struct Writer {
    pub(crate) batch: WriteBatch,
    pub(crate) sync: bool,
    /// Freeze the memtable even if it is not full (`flush`).
    pub(crate) force_switch: bool,
    /// Whose memtable `force_switch` freezes.
    pub(crate) force_keyspace: u32,
    /// Keys nobody may have written since a sequence number; `None` for
    /// plain writes, which pay nothing else for transactions (boxed, so
    /// their `Writer` grows by one pointer only).
    pub(crate) check: Option<Box<Precondition>>,
    pub(crate) result: Mutex<Option<Result<()>>>,
    pub(crate) cv: Condvar,
}

/// A writer for new WAL `number` of database `db_id` in `file`, starting
/// with the identity record that names both: compressed as the options say,
/// and in the recyclable format when recycling is on (a WAL written
/// otherwise may never be reused: its records do not name their log).
///
/// A recyclable WAL also keeps its allocation when it is closed: a later
/// life then finds every block allocated (and, up to where an earlier life
/// wrote, written), so steady writes neither allocate nor extend it. Its
/// length in the manifest is what the reader goes by, not the file's.
pub(crate) fn new_wal_writer(
    opts: &Options,
    mut file: LogFile,
    number: u64,
    db_id: u64,
) -> LogWriter<LogFile> {
    if opts.wal_recycle_count > 0 {
        file.keep_allocation();
    }
    let w = LogWriter::new(file)
        .with_compression(opts.wal_compression)
        .defer_sync_marks()
        .with_identity(db_id, number);
    if opts.wal_recycle_count > 0 {
        w.recyclable(number)
    } else {
        w
    }
}

/// What every write-side operation of a read-only database returns.
pub(crate) fn read_only_error() -> Error {
    Error::new(
        crate::ErrorKind::ReadOnly,
        "the database was opened read-only",
    )
}

impl Inner {
    #[inline]
    pub(crate) fn check_bg_error(&self, st: &State) -> Result<()> {
        match &st.bg_error {
            Some(e) => Err(Error::caused_by(
                e.kind(),
                "database refuses writes after an earlier failure",
                e.clone(),
            )),
            None => Ok(()),
        }
    }

    pub(crate) fn set_bg_error(&self, st: &mut State, e: &Error) {
        if st.bg_error.is_none() {
            log::error!(
                "quietkv: {}: background error, writes are refused until reopen: {e}",
                self.dir.display()
            );
            st.bg_error = Some(e.clone());
        }
        self.done_cv.notify_all();
    }

    /// Requests in flight per direct file of background work:
    /// `io_depth` for what hurries (a full compaction, or anything while
    /// writes are slowed or frozen memtables wait), else the short
    /// `background_io_depth`, so user reads that miss the cache wait behind
    /// little background I/O at the device.
    ///
    /// A full compaction held to a rate limit does not hurry: the limit,
    /// not the depth, sets its pace, and more requests in flight only make
    /// its bursts deeper (after each pause the limiter lets 100 ms of
    /// budget go at once). With an 8 GiB database held to 700 MiB/s,
    /// depth 4 had read p99.9 at 6.5 ms, depth 1 at 1.6 ms (3 runs each).
    pub(crate) fn background_depth(&self, st: &State, hurry: bool) -> usize {
        let behind = st.trees.iter().any(|t| {
            t.imms.len() > 1 || write_pressure(&t.version, &self.popts) != WriteStall::None
        });
        let limited = self.env.rate_limiter().bytes_per_sec() > 0;
        if wants_full_depth(hurry, behind, limited) {
            self.opts.io_depth
        } else {
            self.opts.background_io_depth
        }
    }

    /// Checks that this process still holds the database's LOCK file (see
    /// [`crate::lockfile`]); Busy if another process took it.
    pub(crate) fn verify_lock(&self) -> Result<()> {
        match &*self.lock.lock() {
            Some(lock) => lock.verify(),
            None => Ok(()),
        }
    }

    /// Publishes a new reader view of every keyspace.
    pub(crate) fn refresh_super_version(&self, st: &mut State) {
        for t in &st.trees {
            t.refresh_super_version();
        }
    }

    /// A writer for new WAL `number` in `file`, in the recyclable format
    /// when recycling is on.
    pub(crate) fn wal_writer(&self, file: LogFile, number: u64) -> LogWriter<LogFile> {
        new_wal_writer(&self.opts, file, number, self.db_id)
    }
}

/// Whether background work gets `io_depth` requests in flight rather than
/// `background_io_depth` (see [`Inner::background_depth`]): when the tree
/// is behind the writes, always; a full compaction, only when no rate
/// limit sets its pace.
fn wants_full_depth(hurry: bool, behind: bool, rate_limited: bool) -> bool {
    behind || (hurry && !rate_limited)
}

#[cfg(test)]
mod tests {
    use super::wants_full_depth;

    #[test]
    fn a_rate_limited_full_compaction_keeps_the_short_depth() {
        // A full compaction hurries unless a rate limit paces it.
        assert!(wants_full_depth(true, false, false));
        assert!(!wants_full_depth(true, false, true));
        // Falling behind the writes hurries whatever the limit.
        assert!(wants_full_depth(false, true, true));
        assert!(wants_full_depth(true, true, true));
        assert!(!wants_full_depth(false, false, false));
    }
}
