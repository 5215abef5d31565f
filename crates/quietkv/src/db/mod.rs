//! The database: write path (group commit into WAL and memtable), read path
//! (memtables, then tables level by level), versions and their installs,
//! and the background threads that flush and compact.

mod background;
mod checkpoint;
mod conflict;
mod estimates;
mod iter;
mod manifest;
mod read_view;
mod recovery;
#[cfg(feature = "fuzzing")]
pub(crate) use recovery::replay_manifest;
mod stats;
mod visible_iter;
mod write;

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};
use quietio::IoEnv;

use crate::compaction::picker::{BusyFiles, PickerOptions, SliceCursor};
use crate::compaction::pressure::{write_pressure, WriteStall};
use crate::error::{Error, Result};
use crate::fileio::LogFile;
use crate::filenames::{self, FileKind};
use crate::key::SeqNo;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::record_log::LogWriter;
use crate::snapshot::{Snapshot, SnapshotList};
use crate::table::TableCache;
use crate::value::Value;
use crate::version::{Version, VersionEdit};
use crate::wal::WalSet;
pub(crate) use conflict::Precondition;
pub(crate) use read_view::ReadView;
use std::ops::RangeBounds;
pub(crate) use write::write_checked;

pub use iter::DbIter;
pub(crate) use iter::KeyRange;
pub(crate) use recovery::{
    check_manifest_number, meta_from, missing_wal, new_db_id, set_current, write_l0,
};
pub use stats::{CompactionStats, DbStats, LevelCompactionStats, LevelStats, WriteStallStats};

/// What readers need to see one consistent state: the memtables and the
/// table version. Cloning the `Arc` is all a reader does under a lock.
pub(crate) struct SuperVersion {
    pub mem: Arc<Memtable>,
    /// Frozen memtables, newest first.
    pub imms: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
}

/// A frozen memtable waiting for flush, with the WAL that holds its data.
pub(crate) struct Immutable {
    pub mem: Arc<Memtable>,
    pub wal_number: u64,
}

/// A manual compaction asked for by `compact_all`/`compact_range`, run
/// as slices (see `compaction::picker::pick_slice`).
pub(crate) struct ManualCompaction {
    pub cursor: SliceCursor,
    pub done: bool,
    pub result: Option<Result<()>>,
}

/// Mutable state guarded by `Inner::state`.
pub(crate) struct State {
    pub mem: Arc<Memtable>,
    pub mem_wal: u64,
    /// Oldest first.
    pub imms: VecDeque<Immutable>,
    pub version: Arc<Version>,
    /// Versions handed to readers, to know which tables are still in use.
    pub live_versions: Vec<Weak<Version>>,
    /// `None` when opened read-only.
    pub manifest: Option<LogWriter<LogFile>>,
    pub manifest_number: u64,
    /// Size of the snapshot the current manifest starts with (see
    /// `manifest::maybe_rotate`).
    pub manifest_snapshot_bytes: u64,
    /// The WALs the manifest requires, kept up to date by `install` so a
    /// rotated manifest can record them.
    pub wals: WalSet,
    pub next_file: u64,
    pub busy: BusyFiles,
    /// Tables being written and not yet installed.
    pub pending_outputs: HashSet<u64>,
    pub flushing: bool,
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
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file;
        self.next_file += 1;
        n
    }

    /// WAL files older than this hold nothing that is not in a table.
    pub fn min_live_wal(&self) -> u64 {
        self.imms
            .front()
            .map(|i| i.wal_number)
            .unwrap_or(self.mem_wal)
    }
}

/// The WAL being appended to; only the write leader touches it.
pub(crate) struct Wal {
    pub writer: LogWriter<LogFile>,
}

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
    pub lock: Option<crate::lockfile::DirLock>,
    /// Opened with [`Db::open_read_only`].
    pub read_only: bool,
    pub table_cache: Arc<TableCache>,
    pub state: Mutex<State>,
    /// Wakes background threads when there is work.
    pub bg_cv: Condvar,
    /// Wakes writers, flush and compaction waiters when work finishes.
    pub done_cv: Condvar,
    pub super_version: Arc<RwLock<Arc<SuperVersion>>>,
    /// `None` when opened read-only.
    pub wal: Mutex<Option<Wal>>,
    pub writers: Mutex<VecDeque<Arc<write::Writer>>>,
    /// The write leader's group batch (the WAL record it writes), kept
    /// between groups so a write does not allocate one; only the current
    /// leader locks it.
    pub group_batch: Mutex<crate::batch::WriteBatch>,
    pub snapshots: Arc<SnapshotList>,
    /// The newest sequence number readers may see.
    pub visible_seq: AtomicU64,
    pub shutting_down: AtomicBool,
    pub counters: stats::Counters,
    pub compaction_open_files: Arc<AtomicUsize>,
    /// Held while obsolete files are deleted: the flush and compaction
    /// threads both delete after their work, and two listings at once
    /// would each try to delete the same files.
    pub deleting_obsolete: Mutex<()>,
}

/// An open database. `Send + Sync`: share it with an `Arc`. Dropping it
/// waits for running background work and closes cleanly.
pub struct Db {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl Db {
    /// Opens (or creates) the database in `path`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an invalid option ([`Options::validate`]) or a
    /// path that is not a directory; `Busy` if another process, or this one,
    /// has the database open; `Corruption` (naming the file and offset) if
    /// the manifest, a table it names or a WAL cannot be trusted (see
    /// [`repair_dir`](crate::repair_dir)); `Io` (naming the file) for an
    /// I/O error, a full disk or missing permissions.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = recovery::open(path.as_ref(), opts)?;
        let mut threads = Vec::new();
        let roles = std::iter::once((background::Role::Flush, "quietkv-flush".to_string())).chain(
            (0..inner.opts.background_threads)
                .map(|i| (background::Role::Compaction, format!("quietkv-bg-{i}"))),
        );
        for (role, name) in roles {
            let inner = inner.clone();
            let t = std::thread::Builder::new()
                .name(name)
                .spawn(move || background::run(inner, role))
                .map_err(|e| Error::io(e, "cannot start a background thread"))?;
            threads.push(t);
        }
        if let Some(interval) = inner.opts.wal_sync.interval() {
            let inner = inner.clone();
            let t = std::thread::Builder::new()
                .name("quietkv-wal-sync".into())
                .spawn(move || crate::wal::syncer::run(inner, interval))
                .map_err(|e| Error::io(e, "cannot start the WAL sync thread"))?;
            threads.push(t);
        }
        inner.bg_cv.notify_all();
        Ok(Db { inner, threads })
    }

    /// Opens the database in `path` for reads only, without writing
    /// anything to the directory: it works on a read-only mount or a full
    /// disk. WALs are replayed into memory. Writes, `flush` and compactions
    /// fail with [`ErrorKind::ReadOnly`](crate::ErrorKind::ReadOnly). A
    /// process that has the database open for writing makes this fail with
    /// `Busy`, and a writer cannot open it while this is open.
    ///
    /// # Errors
    ///
    /// As [`Db::open`], and `Busy` if a writer has it open.
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = recovery::open_read_only(path.as_ref(), opts)?;
        Ok(Db {
            inner,
            threads: Vec::new(),
        })
    }

    /// Whether `path` holds a database, found without writing to it.
    ///
    /// `Ok(false)` for a missing or empty directory, and for one holding
    /// only what a creation cut short leaves (which [`Db::open`] cleans up).
    /// [`ErrorKind::Corruption`](crate::ErrorKind::Corruption), naming the
    /// newest manifest, for a directory that holds data but lost its
    /// CURRENT file: opening it would not create a fresh database.
    ///
    /// # Errors
    ///
    /// `Corruption` as above; `Io` if the directory cannot be read.
    pub fn exists(path: impl AsRef<Path>) -> Result<bool> {
        Ok(matches!(
            crate::creation::inspect(path.as_ref())?,
            crate::creation::Creation::Complete
        ))
    }

    /// Whether the database was opened with [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The directory the database lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// The access mode `class` resolved to when the database was opened:
    /// what an `auto` (or explicit) [`AccessMode`](crate::AccessMode) became
    /// on this directory's file system and kernel.
    pub fn io_mode(&self, class: quietio::IoClass) -> quietio::EffectiveMode {
        self.inner.env.mode(class)
    }

    /// Sets `key` to `value` (not synced; see [`WriteOptions::sync`](crate::WriteOptions::sync)).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a key longer than [`MAX_KEY_LEN`](crate::MAX_KEY_LEN)
    /// or a value longer than [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN);
    /// `ReadOnly` on a database opened read-only; `Io` if the WAL could not
    /// be written; the error that stopped background work (a failed flush
    /// or compaction, for instance a full disk) on every write after it.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        // Room for the entry's kind byte and two length varints too, so
        // building the batch is one allocation.
        let mut b = crate::batch::WriteBatch::with_capacity(key.len() + value.len() + 16);
        b.put(key, value)?;
        self.write(b, crate::options::WriteOptions::default())
    }

    /// Deletes `key` (not synced). Deleting a missing key is not an error.
    ///
    /// # Errors
    ///
    /// As [`Db::put`].
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = crate::batch::WriteBatch::new();
        b.delete(key)?;
        self.write(b, crate::options::WriteOptions::default())
    }

    /// Deletes every key in `range` that exists now (not synced): one WAL
    /// record and one memtable entry however many keys the range holds; a
    /// later compaction removes the keys it covers from disk. Keys written
    /// after it are not affected, and snapshots taken before it keep
    /// seeing the keys.
    ///
    /// `a..b` deletes `[a, b)`, `a..=b` also `b`, `..b` everything before
    /// `b` (from the empty key on); an excluded start (through
    /// [`Bound::Excluded`](std::ops::Bound)) starts just after the key. The
    /// end must be bounded: a range tombstone stores its end key, and there
    /// is no key after every other one (to delete through the last key,
    /// give an end past it). An empty range (`a..a`) writes nothing.
    ///
    /// ```
    /// # fn main() -> quietkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = quietkv::Db::open(dir.path(), quietkv::Options::default())?;
    /// for k in [b"a", b"b", b"c"] {
    ///     db.put(k, b"v")?;
    /// }
    /// db.delete_range(&b"a"[..]..&b"c"[..])?;
    /// assert_eq!(db.iter()?.count(), 1); // only "c" is left
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an unbounded end, a start after the end, or a
    /// key longer than [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) (after `a..=b`
    /// adds a byte to `b`); otherwise as [`Db::put`].
    pub fn delete_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        use std::ops::Bound;
        let begin = match range.start_bound() {
            Bound::Included(k) => k.as_ref().to_vec(),
            Bound::Excluded(k) => crate::range_tombstone::successor(k.as_ref()),
            Bound::Unbounded => Vec::new(),
        };
        let end =
            match range.end_bound() {
                Bound::Excluded(k) => k.as_ref().to_vec(),
                Bound::Included(k) => crate::range_tombstone::successor(k.as_ref()),
                Bound::Unbounded => return Err(Error::invalid(
                    "delete_range needs an end key (an exclusive end past the last key to delete)",
                )),
            };
        if begin == end {
            return Ok(());
        }
        let mut b = crate::batch::WriteBatch::with_capacity(begin.len() + end.len() + 16);
        b.delete_range(&begin, &end)?;
        self.write(b, crate::options::WriteOptions::default())
    }

    /// Applies a batch atomically. Concurrent writers share one WAL write
    /// and one sync (group commit).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a batch whose sequence numbers would run out;
    /// otherwise as [`Db::put`]. On an error nothing of the batch is
    /// visible.
    pub fn write(
        &self,
        batch: crate::batch::WriteBatch,
        opts: crate::options::WriteOptions,
    ) -> Result<()> {
        write::write(&self.inner, batch, opts.sync, false)
    }

    /// The newest value of `key`, or `None` if it was never written or
    /// was deleted. The value is copied once, into the `Vec`, straight
    /// from where it was found; to read it without a copy, see
    /// [`Db::get_pinned`].
    ///
    /// # Errors
    ///
    /// `Corruption` (naming the table and offset) if a block it reads fails
    /// its checksum; `Io` (naming the file) for an I/O error.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        read_view::get_vec_at(
            &self.inner.super_version,
            &self.inner.table_cache,
            self.inner.opts.compaction_filter.as_deref(),
            key.as_ref(),
            self.latest(),
        )
    }

    /// The newest value of `key`, like [`Db::get`], read in place instead
    /// of copied: the [`Value`] shares the memory the bytes are in (the
    /// table block or the memtable) and keeps it allocated while it lives,
    /// as RocksDB's `get_pinned` pins a block. It stays valid, and reads
    /// the same bytes, whatever is written, flushed or compacted later.
    /// See [`Value`] for how much memory one keeps alive; copy values you
    /// keep for long.
    ///
    /// ```
    /// # fn main() -> quietkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = quietkv::Db::open(dir.path(), quietkv::Options::default())?;
    /// db.put(b"user:1", b"alice")?;
    /// db.flush()?;
    /// let name = db.get_pinned(b"user:1")?.expect("written above");
    /// assert_eq!(name, b"alice");
    /// assert!(db.get_pinned(b"user:2")?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Db::get`].
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        read_view::get_at(
            &self.inner.super_version,
            &self.inner.table_cache,
            self.inner.opts.compaction_filter.as_deref(),
            key.as_ref(),
            self.latest(),
        )
    }

    /// A consistent read view: reads through it ignore every later write.
    /// See [`Snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        let registration = self.inner.snapshots.acquire(self.latest());
        Snapshot::new(self.inner.read_view(), registration)
    }

    /// Every key in order (double-ended: `.rev()` starts at the last).
    ///
    /// # Errors
    ///
    /// As [`Db::get`], here and from the iterator's items.
    pub fn iter(&self) -> Result<DbIter> {
        self.iter_at(KeyRange::default(), self.latest())
    }

    /// The keys in `range`, in order; `.rev()` walks them backwards.
    ///
    /// Any [`RangeBounds`] over byte strings works: `a..b`, `a..=b`, `a..`,
    /// `..b`, or `(Bound, Bound)` pairs. A range whose start is after its
    /// end is empty.
    ///
    /// ```
    /// # fn main() -> quietkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = quietkv::Db::open(dir.path(), quietkv::Options::default())?;
    /// for i in 0..30u32 {
    ///     db.put(format!("k{i:03}").as_bytes(), b"v")?;
    /// }
    /// let ten = db.range(&b"k010"[..]..&b"k020"[..])?.collect::<Result<Vec<_>, _>>()?;
    /// assert_eq!(ten.len(), 10);
    /// let (last, _) = db.range(&b"k010"[..]..=&b"k020"[..])?.next_back().unwrap()?;
    /// assert_eq!(last, b"k020");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Db::get`], here and from the iterator's items.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIter> {
        self.iter_at(KeyRange::from_bounds(&range), self.latest())
    }

    /// The keys that start with `prefix`, in order.
    ///
    /// # Errors
    ///
    /// As [`Db::get`], here and from the iterator's items.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<DbIter> {
        self.iter_at(KeyRange::prefix(prefix.as_ref()), self.latest())
    }

    fn iter_at(&self, range: KeyRange, seq: SeqNo) -> Result<DbIter> {
        read_view::iter_at(
            &self.inner.super_version,
            &self.inner.table_cache,
            &self.inner.opts.compaction_filter,
            range,
            seq,
        )
    }

    /// Writes the memtable out as a table and waits until every frozen
    /// memtable is flushed.
    ///
    /// # Errors
    ///
    /// `ReadOnly` on a database opened read-only; `Io` if the table could
    /// not be written (a full disk): background work then stops, and every
    /// later write returns that error until the database is reopened.
    pub fn flush(&self) -> Result<()> {
        write::write(&self.inner, crate::batch::WriteBatch::new(), false, true)?;
        let mut st = self.inner.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            if st.imms.is_empty() {
                return Ok(());
            }
            self.inner.done_cv.wait(&mut st);
        }
    }

    /// A full (major) compaction: every table of every level is merged into
    /// the last level, dropping overwritten versions and tombstones no
    /// snapshot needs. Flushes the memtable first.
    ///
    /// # Errors
    ///
    /// As [`Db::flush`]; a compaction that fails (a damaged input table is
    /// `Corruption`, a full disk `Io`) also stops background work.
    pub fn compact_all(&self) -> Result<()> {
        self.compact_range(None, None)
    }

    /// Compacts every table overlapping `[begin, end]` (user keys, inclusive;
    /// `None` = unbounded) down to the bottom of the tree.
    ///
    /// # Errors
    ///
    /// As [`Db::compact_all`].
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        background::run_manual(
            &self.inner,
            begin.map(<[u8]>::to_vec),
            end.map(<[u8]>::to_vec),
        )
    }

    /// Waits until background work is done: no memtable waiting for flush,
    /// no compaction running, and none the picker would start. (Writes
    /// arriving meanwhile can keep it waiting.)
    ///
    /// # Errors
    ///
    /// The error that stopped background work, if any.
    pub fn wait_idle(&self) -> Result<()> {
        if self.inner.read_only {
            // No background work runs; replayed memtables stay in memory.
            return Ok(());
        }
        let mut st = self.inner.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            let idle = st.imms.is_empty()
                && !st.flushing
                && st.compactions_running == 0
                && st.manual.is_none()
                && crate::compaction::picker::pick(&st.version, &self.inner.popts, &st.busy)
                    .is_none();
            if idle {
                return Ok(());
            }
            self.inner.bg_cv.notify_all();
            self.inner
                .done_cv
                .wait_for(&mut st, std::time::Duration::from_millis(50));
        }
    }

    /// Counters and the shape of the tree, as of now.
    pub fn stats(&self) -> DbStats {
        stats::collect(&self.inner)
    }

    /// Waits for background work to finish and closes the database. Errors
    /// from closing the WAL are reported (dropping does the same silently).
    ///
    /// # Errors
    ///
    /// The error that stopped background work, or `Io` if the WAL could not
    /// be synced or its length recorded; the data acknowledged before is
    /// still recovered at the next open.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        self.inner.shutting_down.store(true, Ordering::Release);
        {
            let _st = self.inner.state.lock();
            self.inner.bg_cv.notify_all();
            self.inner.done_cv.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The buffers and rings quietio kept for the next file: a closed
        // database needs none (another one open in the process just
        // allocates its next ones afresh).
        quietio::release_kept_io_memory();
        if self.inner.read_only {
            return Ok(());
        }
        // Seal the live WAL: synced, and its length in the manifest, so the
        // next open reads it strictly (truncation or damage anywhere in it
        // is corruption, not a torn tail). Lock order: state, then WAL.
        let mut st = self.inner.state.lock();
        self.inner.check_bg_error(&st)?;
        let (number, len) = {
            let mut wal = self.inner.wal.lock();
            let wal = wal.as_mut().ok_or_else(read_only_error)?;
            (st.mem_wal, wal.writer.seal()?)
        };
        let mut edit = VersionEdit::new();
        edit.sealed_wals.push((number, len));
        self.inner.install(&mut st, edit)
    }

    /// The shared state, for the parts of the engine built on `Db`
    /// (transactions).
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// The newest sequence number readers may see.
    fn latest(&self) -> SeqNo {
        self.inner.visible_seq.load(Ordering::Acquire)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if !self.threads.is_empty() || !self.inner.shutting_down.load(Ordering::Acquire) {
            if let Err(e) = self.shutdown() {
                log::warn!("quietkv: closing {}: {e}", self.inner.dir.display());
            }
        }
    }
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
    /// Handles to what reads consult, for the database and its snapshots.
    pub(crate) fn read_view(&self) -> ReadView {
        ReadView {
            super_version: self.super_version.clone(),
            table_cache: self.table_cache.clone(),
            filter: self.opts.compaction_filter.clone(),
        }
    }

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
    pub(crate) fn background_depth(&self, st: &State, hurry: bool) -> usize {
        let behind =
            st.imms.len() > 1 || write_pressure(&st.version, &self.popts) != WriteStall::None;
        if hurry || behind {
            self.opts.io_depth
        } else {
            self.opts.background_io_depth
        }
    }

    /// Checks that this process still holds the database's LOCK file (see
    /// [`crate::lockfile`]); Busy if another process took it.
    pub(crate) fn verify_lock(&self) -> Result<()> {
        match &self.lock {
            Some(lock) => lock.verify(),
            None => Ok(()),
        }
    }

    /// Publishes a new reader view of the current state.
    pub(crate) fn refresh_super_version(&self, st: &mut State) {
        let sv = SuperVersion {
            mem: st.mem.clone(),
            imms: st.imms.iter().rev().map(|i| i.mem.clone()).collect(),
            version: st.version.clone(),
        };
        *self.super_version.write() = Arc::new(sv);
    }

    /// Logs `edit` to the manifest (synced) and makes it the current
    /// version; rotates the manifest once it has grown past its limit.
    pub(crate) fn install(&self, st: &mut State, mut edit: VersionEdit) -> Result<()> {
        if let Err(e) = self.verify_lock() {
            self.set_bg_error(st, &e);
            return Err(e);
        }
        edit.next_file_number = Some(st.next_file);
        edit.last_sequence = Some(self.visible_seq.load(Ordering::Acquire));
        let next = st.version.apply(&edit)?;
        if st.manifest.is_none() && !self.read_only {
            // Closed after a failed manifest rotation (`manifest::maybe_rotate`).
            self.check_bg_error(st)?;
        }
        let manifest = st.manifest.as_mut().ok_or_else(read_only_error)?;
        let res = manifest
            .add_record(&edit.encode())
            .and_then(|_| manifest.sync());
        if let Err(e) = res {
            self.set_bg_error(st, &e);
            return Err(e);
        }
        st.wals.apply(&edit);
        let old = std::mem::replace(&mut st.version, Arc::new(next));
        st.live_versions.retain(|w| w.strong_count() > 0);
        st.live_versions.push(Arc::downgrade(&old));
        self.refresh_super_version(st);
        // The edit is durable: whatever rotation does, it stays installed.
        manifest::maybe_rotate(self, st);
        Ok(())
    }

    /// Whether obsolete WAL `number` is (now) kept for reuse instead of
    /// deleted: recycling is on, the pool has room, and the file is one
    /// this process wrote (so every record in it names its log) whose data
    /// the manifest says is in tables.
    fn keep_wal_for_reuse(&self, number: u64) -> bool {
        let limit = self.opts.wal_recycle_count;
        if limit == 0 {
            return false;
        }
        let mut st = self.state.lock();
        if st.wal_pool.contains(&number) {
            return true;
        }
        if number < st.first_own_wal
            || number >= st.wals.log_number()
            || st.wal_pool.len() >= limit
            || st.bg_error.is_some()
            // Taken and renamed by a switch since the caller listed it
            // (switches rename under the state lock held here).
            || !filenames::wal_path(&self.dir, number).exists()
        {
            return false;
        }
        st.wal_pool.push_back(number);
        true
    }

    /// A writer for new WAL `number` in `file`, in the recyclable format
    /// when recycling is on.
    pub(crate) fn wal_writer(&self, file: LogFile, number: u64) -> LogWriter<LogFile> {
        new_wal_writer(&self.opts, file, number, self.db_id)
    }

    /// Deletes tables no version uses any more, WALs whose data is in
    /// tables and old manifests. Files a reader or iterator still holds
    /// (through an old version) are kept.
    pub(crate) fn delete_obsolete_files(&self) {
        self.remove_obsolete(false)
    }

    /// [`Inner::delete_obsolete_files`], and the temporary files a crash
    /// left mid-install: only at open, when no install can be writing one.
    pub(crate) fn delete_obsolete_files_at_open(&self) {
        self.remove_obsolete(true)
    }

    fn remove_obsolete(&self, temporary_files_too: bool) {
        let _one_at_a_time = self.deleting_obsolete.lock();
        // The directory is listed after the lock is let go, while the
        // flush and compaction threads go on creating files: a table
        // numbered from `unallocated` on did not exist when `live` was
        // taken, so it is not known to be obsolete.
        let (live_tables, unallocated, min_wal, manifest_number) = {
            let mut st = self.state.lock();
            st.live_versions.retain(|w| w.strong_count() > 0);
            let mut live: HashSet<u64> = st.pending_outputs.clone();
            live.extend(st.version.all_file_numbers());
            for v in st.live_versions.iter().filter_map(Weak::upgrade) {
                live.extend(v.all_file_numbers());
            }
            (live, st.next_file, st.min_live_wal(), st.manifest_number)
        };
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(kind) = name.to_str().and_then(filenames::parse) else {
                continue;
            };
            let obsolete = match kind {
                FileKind::Table(n) => n < unallocated && !live_tables.contains(&n),
                FileKind::Wal(n) => n < min_wal && !self.keep_wal_for_reuse(n),
                // Only older ones: a newer one is a rotation in progress
                // (this listing may race with it) or one whose CURRENT
                // switch failed and might be in charge after a crash.
                FileKind::Manifest(n) => n < manifest_number,
                // At run time a manifest rotation (under the lock, in
                // another thread) may be between writing one and renaming it.
                FileKind::Temp => temporary_files_too,
                FileKind::Current | FileKind::Lock => false,
            };
            if obsolete {
                if let FileKind::Table(n) = kind {
                    self.table_cache.evict(n);
                }
                if let Err(e) = self.env.remove_file(&entry.path()) {
                    if matches!(kind, FileKind::Wal(_)) && e.kind() == std::io::ErrorKind::NotFound
                    {
                        // A kept WAL a switch took (renamed) since the listing.
                        continue;
                    }
                    log::warn!(
                        "quietkv: cannot delete obsolete {}: {e}",
                        entry.path().display()
                    );
                }
            }
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.inner.dir).finish()
    }
}
