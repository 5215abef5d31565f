//! The background threads: one flushes frozen memtables to L0, the others
//! pick compactions (automatic, or the slices of a manual one) and run them
//! (see [`crate::compaction`]). Also the handshake by which `compact_range`
//! hands a manual compaction to them and waits for it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use quietio::{sys, IoClass};

use super::recovery::write_l0;
use super::state::{Inner, ManualCompaction, State};
use super::table_write_mode::table_write_mode;
use crate::compaction::job::CompactionJob;
use crate::compaction::picker::{pick, pick_slice, SliceCursor};
use crate::compaction::run::run_job;
use crate::error::{Error, Result};
use crate::filenames::table_path;
use crate::options::IoPriority;
use crate::version::{FileMeta, KeyspaceEdit, VersionEdit};

/// Work on one keyspace (by id).
enum Work {
    Flush(u32),
    Compact(u32, CompactionJob),
    Manual(u32, CompactionJob),
}

/// What a background thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Writes frozen memtables to L0. One thread of its own, at the
    /// writer's priority, because writers stall once the frozen memtables
    /// pile up: behind a compaction of L1 or deeper, which can run for
    /// seconds, a flush would stop every writer for as long (RocksDB keeps
    /// flushes in a pool of their own for the same reason).
    Flush,
    /// Picks and runs compactions, automatic and manual, at the configured
    /// background priority.
    Compaction,
}

/// The loop of one background thread.
pub(crate) fn run(inner: Arc<Inner>, role: Role) {
    if role == Role::Compaction {
        set_background_priority(&inner.opts);
    }
    loop {
        let work = {
            let mut st = inner.state.lock();
            loop {
                if inner.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if st.bg_error.is_some() {
                    // Nothing runs after a background error; wait for close.
                } else if role == Role::Flush {
                    if let Some(t) = st
                        .trees
                        .iter_mut()
                        .find(|t| !t.flushing && !t.imms.is_empty())
                    {
                        t.flushing = true;
                        break Work::Flush(t.id());
                    }
                } else if st
                    .manual
                    .as_ref()
                    .is_some_and(|m| !m.done && m.result.is_none())
                {
                    // A manual compaction waits for running jobs, then
                    // runs alone: it ignores the busy set.
                    if st.compactions_running == 0 {
                        let max = inner.opts.max_compaction_bytes;
                        let id = st.manual.as_ref().expect("checked").keyspace;
                        let Some(version) = st.tree(id).map(|t| t.version.clone()) else {
                            let m = st.manual.as_mut().expect("checked");
                            m.done = true;
                            m.result = Some(Err(super::install::dropped_error(id)));
                            inner.done_cv.notify_all();
                            continue;
                        };
                        let m = st.manual.as_mut().expect("checked");
                        match pick_slice(&version, &inner.popts, &mut m.cursor, max) {
                            Some(job) => {
                                st.tree_mut(id).expect("checked").busy.register(&job);
                                st.compactions_running += 1;
                                break Work::Manual(id, job);
                            }
                            None => {
                                let m = st.manual.as_mut().expect("checked");
                                m.done = true;
                                m.result = Some(Ok(()));
                                inner.done_cv.notify_all();
                                continue;
                            }
                        }
                    }
                } else if let Some((t, job)) = st
                    .trees
                    .iter_mut()
                    .find_map(|t| pick(&t.version, &inner.popts, &t.busy).map(|j| (t, j)))
                {
                    t.busy.register(&job);
                    let id = t.id();
                    st.compactions_running += 1;
                    break Work::Compact(id, job);
                }
                inner.bg_cv.wait(&mut st);
            }
        };
        match work {
            Work::Flush(id) => flush_one(&inner, id),
            Work::Compact(id, job) => {
                let _ = compact(&inner, id, job);
            }
            Work::Manual(id, job) => {
                // One slice; the next pick finds the next one, or that the
                // range is done.
                let r = compact(&inner, id, job);
                if let Ok(written) = r {
                    inner.counters.record_manual_slice(written);
                }
                let mut st = inner.state.lock();
                if let (Err(e), Some(m)) = (r, st.manual.as_mut()) {
                    m.done = true;
                    m.result = Some(Err(e));
                }
                inner.done_cv.notify_all();
            }
        }
        inner.delete_obsolete_files();
        inner.bg_cv.notify_all();
        if inner.opts.release_heap_after_jobs {
            // What the job allocated and freed goes back to the kernel, not
            // kept resident for the next job beside the page cache.
            let started = std::time::Instant::now();
            quietio::sys::trim_heap();
            inner
                .counters
                .record_heap_trim(started.elapsed().as_micros() as u64);
        }
    }
}

/// Runs `job` ([`run_job`]) and marks it finished, failed or not: its files
/// are no longer busy, and a failure (other than the database closing)
/// becomes the background error.
fn compact(inner: &Arc<Inner>, id: u32, job: CompactionJob) -> Result<u64> {
    let result = run_job(inner, id, &job);
    let mut st = inner.state.lock();
    let dropped = match st.tree_mut(id) {
        Some(t) => {
            t.busy.release(&job);
            false
        }
        None => true,
    };
    st.compactions_running -= 1;
    if let Err(e) = &result {
        // A keyspace dropped meanwhile is no failure of the database.
        if !inner.shutting_down.load(Ordering::Acquire) && !dropped {
            inner.set_bg_error(&mut st, e);
        }
    }
    inner.done_cv.notify_all();
    result
}

/// Writes keyspace `id`'s oldest frozen memtable to an L0 table and
/// installs it.
fn flush_one(inner: &Arc<Inner>, id: u32) {
    // Read outside the state lock: a few small files under /proc and /sys.
    let memory = quietio::usable_memory();
    let (mem, number, depth, handle, mode) = {
        let mut st = inner.state.lock();
        let depth = inner.background_depth(&st, false);
        // Dropped since it was picked (the lock was let go): nothing to do.
        let Some(tree) = st.tree(id) else {
            return;
        };
        let Some(oldest) = tree.imms.front() else {
            return;
        };
        let mem = oldest.mem.clone();
        let handle = tree.handle.clone();
        let number = st.new_file_number();
        st.pending_outputs.insert(number);
        let mode = table_write_mode(
            &inner.opts,
            &inner.env,
            IoClass::FlushWrite,
            st.table_bytes(),
            mem.approximate_bytes() as u64,
            memory,
        );
        (mem, number, depth, handle, mode)
    };
    let t = Instant::now();
    let cpu0 = quietio::sys::thread_cpu_time();
    // A snapshot taken after this reads the newest version of every key
    // in the frozen memtable, so the ones live now are all it must keep.
    let snapshots = inner.snapshots.sequences();
    let written = write_l0(
        &inner.env,
        &inner.dir,
        &inner.opts,
        handle.table_options,
        &mem,
        &snapshots,
        number,
        inner.db_id,
        depth,
        mode,
    )
    .and_then(|meta| {
        // Opened here, not by the first read to reach it (see
        // `TableCache::open_ahead`); a table that fails to open is removed
        // like one that failed to write.
        if let Some(m) = &meta {
            if let Err(e) = inner.table_cache.open_output(m) {
                inner.table_cache.evict(m.number);
                let _ = inner.env.remove_file(&table_path(&inner.dir, m.number));
                return Err(e);
            }
            if mode.is_some() {
                inner.counters.record_small_database_cached_table();
            }
        }
        Ok(meta)
    });
    let mut st = inner.state.lock();
    let Some(tree) = st.tree_mut(id) else {
        // Dropped meanwhile: the table is nobody's, and obsolete.
        st.pending_outputs.remove(&number);
        inner.done_cv.notify_all();
        return;
    };
    tree.flushing = false;
    // Written: whatever the install does, the table stays (see below).
    let installing = written.is_ok();
    let result = written.and_then(|meta| {
        let bytes = meta.as_ref().map_or(0, |m| m.size);
        let edit = flush_edit(&st, id, meta);
        inner.install(&mut st, edit)?;
        let tree = st.tree_mut(id).expect("installed");
        tree.imms.pop_front();
        inner.refresh_super_version(&mut st);
        let cpu = quietio::sys::thread_cpu_time().saturating_sub(cpu0);
        inner.counters.record_flush(bytes, t.elapsed(), cpu);
        Ok(())
    });
    // A failed write removed its own file (`write_l0`). A failed install
    // may still have put the edit in the manifest (the write went through,
    // the sync failed), so the table is kept, and kept out of reach of
    // obsolete-file deletion, until a reopen reads the manifest and either
    // uses it or deletes it as an orphan.
    if result.is_ok() || !installing {
        st.pending_outputs.remove(&number);
    }
    if let Err(e) = result {
        inner.set_bg_error(&mut st, &e);
    }
    inner.done_cv.notify_all();
}

/// The edit that installs keyspace `id`'s flushed oldest frozen memtable
/// (as table `meta`, if it held anything): the keyspace needs the WALs
/// from its next memtable's on, and the database the WALs from the oldest
/// any keyspace needs. With the default keyspace alone, that is the edit
/// written before keyspaces existed.
fn flush_edit(st: &State, id: u32, meta: Option<FileMeta>) -> VersionEdit {
    let mut files = VersionEdit::new();
    if let Some(meta) = meta {
        files.add_file(0, meta);
    }
    let mut edit = VersionEdit::for_keyspace(id, files);
    let mut log = u64::MAX;
    for t in &st.trees {
        let needs = if t.id() == id {
            let own = t.log_after_flush();
            if id != 0 || st.trees.len() > 1 {
                match edit.keyspaces.first_mut() {
                    Some(k) => k.log_number = Some(own),
                    None => edit.keyspaces.push(KeyspaceEdit {
                        id,
                        log_number: Some(own),
                        ..KeyspaceEdit::default()
                    }),
                }
            }
            own
        } else {
            t.min_live_wal()
        };
        log = log.min(needs);
    }
    edit.log_number = Some(log);
    edit
}

/// Asks the background threads for a manual compaction and waits for it.
pub(crate) fn run_manual(
    inner: &Arc<Inner>,
    keyspace: u32,
    begin: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
) -> Result<()> {
    let mut st = inner.state.lock();
    // One manual compaction at a time.
    while st.manual.is_some() {
        inner.check_bg_error(&st)?;
        inner.done_cv.wait(&mut st);
    }
    st.manual = Some(ManualCompaction {
        keyspace,
        cursor: SliceCursor::new(begin, end),
        done: false,
        result: None,
    });
    inner.bg_cv.notify_all();
    loop {
        if let Some(m) = st.manual.as_mut() {
            if m.done {
                let r = m.result.take().unwrap_or(Ok(()));
                st.manual = None;
                inner.bg_cv.notify_all();
                inner.done_cv.notify_all();
                return r;
            }
        }
        if let Err(e) = inner.check_bg_error(&st) {
            st.manual = None;
            return Err(e);
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            st.manual = None;
            return Err(Error::new(crate::ErrorKind::Closed, "database is closing"));
        }
        inner.done_cv.wait(&mut st);
    }
}

/// Lowers this thread's CPU and I/O priority as configured. Failing to is
/// not an error: the work still gets done, only with less isolation.
fn set_background_priority(opts: &crate::options::Options) {
    if opts.background_nice != 0 {
        if let Err(e) = sys::set_thread_nice(opts.background_nice) {
            log::warn!(
                "quietkv: cannot set background nice {}: {e}",
                opts.background_nice
            );
        }
    }
    if let Some(p) = opts.background_io_priority {
        let class = match p {
            IoPriority::BestEffort(level) => sys::IoPriorityClass::BestEffort(level),
            IoPriority::Idle => sys::IoPriorityClass::Idle,
        };
        if let Err(e) = sys::set_thread_io_priority(class) {
            log::warn!("quietkv: cannot set background I/O priority: {e}");
        }
    }
}
