//! The database: write path (group commit into WAL and memtable), read path
//! (memtables, then tables level by level), versions and their installs,
//! and the background threads that flush and compact.
//!
//! The state they share is in [`state`]; every file here that works on it
//! imports it from there, and nothing outside this module imports this
//! file's `Db` to reach it.

pub(crate) mod background;
mod checkpoint;
mod conflict;
pub(crate) mod counters;
pub(crate) mod estimates;
pub(crate) mod install;
pub(crate) mod iter;
pub(crate) mod key_range;
mod manifest;
mod obsolete;
pub(crate) mod precondition;
mod range_writes;
pub(crate) mod read_view;
pub(crate) mod recovery;
#[cfg(feature = "fuzzing")]
pub(crate) use recovery::replay_manifest;
pub(crate) mod state;
pub(crate) mod stats;
pub(crate) mod table_write_mode;
mod visible_iter;
pub(crate) mod write;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::options::Options;
use crate::snapshot::Snapshot;
use crate::value::Value;
use crate::version::VersionEdit;
pub(crate) use precondition::Precondition;
use state::{read_only_error, Inner};
use std::ops::RangeBounds;
pub(crate) use write::write_checked;

pub use iter::DbIter;
pub(crate) use key_range::KeyRange;
pub(crate) use manifest::{set_current, FIRST_KEYSPACE_ID};
pub(crate) use recovery::{check_manifest_number, meta_from, missing_wal, new_db_id, write_l0};
pub use stats::{CompactionStats, DbStats, LevelCompactionStats, LevelStats, WriteStallStats};

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
        let Some((begin, end)) = range_delete_bounds(&range)? else {
            return Ok(());
        };
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
        flush_wait(&self.inner, 0)
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
            0,
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
            let idle = st.compactions_running == 0
                && st.manual.is_none()
                && st.trees.iter().all(|t| {
                    t.imms.is_empty()
                        && !t.flushing
                        && crate::compaction::picker::pick(&t.version, &self.inner.popts, &t.busy)
                            .is_none()
                });
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
        let closed = self.stop_and_seal();
        // Handles that outlive the database (keyspaces, transactions)
        // must not keep another open out.
        self.inner.lock.lock().take();
        closed
    }

    fn stop_and_seal(&mut self) -> Result<()> {
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
            (st.live_wal, wal.writer.seal()?)
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

/// The `[begin, end)` a range delete of `range` writes; `None` for an
/// empty range.
pub(crate) fn range_delete_bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(
    range: &R,
) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    use std::ops::Bound;
    let begin = match range.start_bound() {
        Bound::Included(k) => k.as_ref().to_vec(),
        Bound::Excluded(k) => crate::range_tombstone::successor(k.as_ref()),
        Bound::Unbounded => Vec::new(),
    };
    let end = match range.end_bound() {
        Bound::Excluded(k) => k.as_ref().to_vec(),
        Bound::Included(k) => crate::range_tombstone::successor(k.as_ref()),
        Bound::Unbounded => {
            return Err(Error::invalid(
                "delete_range needs an end key (an exclusive end past the last key to delete)",
            ))
        }
    };
    Ok((begin != end).then_some((begin, end)))
}

/// Waits until keyspace `id` has no frozen memtable left (or is gone).
pub(crate) fn flush_wait(inner: &Inner, id: u32) -> Result<()> {
    let mut st = inner.state.lock();
    loop {
        if let Some(e) = &st.bg_error {
            return Err(e.clone());
        }
        if st.tree(id).is_none_or(|t| t.imms.is_empty()) {
            return Ok(());
        }
        inner.done_cv.wait(&mut st);
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

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.inner.dir).finish()
    }
}
