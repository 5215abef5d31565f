//! Background work: flushing frozen memtables, picking and running
//! compactions, and manual (full or range) compactions.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use quietio::{sys, EffectiveMode, IoClass};

use super::level_iter::{open_compaction_input, CompactionLevelIter};
use super::recovery::{meta_from, write_l0};
use super::{Inner, ManualCompaction};
use crate::cpu_yield::CpuYield;
use crate::error::{Error, Result};
use crate::fileio::TableFile;
use crate::filenames::table_path;
use crate::iter::InternalIterator;
use crate::key::user_key;
use crate::merge::{CompactionIterator, MergingIterator};
use crate::options::IoPriority;
use crate::output_cut::OutputCutter;
use crate::picker::{pick, pick_slice, CompactionJob, CompactionKind, CompactionReason};
use crate::table::{TableBuilder, TableReader};
use crate::version::{FileMeta, VersionEdit};
use crate::warm::{hot_blocks, HotProbe};

enum Work {
    Flush,
    Compact(CompactionJob),
    Manual(CompactionJob),
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
                    if !st.flushing && !st.imms.is_empty() {
                        st.flushing = true;
                        break Work::Flush;
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
                        let version = st.version.clone();
                        let m = st.manual.as_mut().expect("checked");
                        match pick_slice(&version, &inner.popts, &mut m.cursor, max) {
                            Some(job) => {
                                st.busy.register(&job);
                                st.compactions_running += 1;
                                break Work::Manual(job);
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
                } else if let Some(job) = pick(&st.version, &inner.popts, &st.busy) {
                    st.busy.register(&job);
                    st.compactions_running += 1;
                    break Work::Compact(job);
                }
                inner.bg_cv.wait(&mut st);
            }
        };
        match work {
            Work::Flush => flush_one(&inner),
            Work::Compact(job) => {
                let _ = compact(&inner, job);
            }
            Work::Manual(job) => {
                // One slice; the next pick finds the next one, or that the
                // range is done.
                let r = compact(&inner, job);
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
    }
}

/// Writes the oldest frozen memtable to an L0 table and installs it.
fn flush_one(inner: &Arc<Inner>) {
    let (mem, number, depth) = {
        let mut st = inner.state.lock();
        let depth = inner.background_depth(&st, false);
        let mem = st
            .imms
            .front()
            .expect("flush with a frozen memtable")
            .mem
            .clone();
        let number = st.new_file_number();
        st.pending_outputs.insert(number);
        (mem, number, depth)
    };
    let t = Instant::now();
    let cpu0 = quietio::sys::thread_cpu_time();
    let written = write_l0(
        &inner.env,
        &inner.dir,
        &inner.opts,
        &mem,
        number,
        inner.db_id,
        depth,
    )
    .and_then(|meta| {
        // Opened here, not by the first read to reach it (see
        // `TableCache::open_ahead`); a table that fails to open is removed
        // like one that failed to write.
        if let Some(m) = &meta {
            if let Err(e) = open_output(inner, m) {
                inner.table_cache.evict(m.number);
                let _ = inner.env.remove_file(&table_path(&inner.dir, m.number));
                return Err(e);
            }
        }
        Ok(meta)
    });
    let mut st = inner.state.lock();
    st.flushing = false;
    // Written: whatever the install does, the table stays (see below).
    let installing = written.is_ok();
    let result = written.and_then(|meta| {
        let mut edit = VersionEdit::new();
        let bytes = meta.as_ref().map_or(0, |m| m.size);
        if let Some(meta) = meta {
            edit.add_file(0, meta);
        }
        // The data of the frozen memtable is in a table now; the next
        // memtable's WAL is the oldest one still needed.
        let next_wal = st.imms.get(1).map(|i| i.wal_number).unwrap_or(st.mem_wal);
        edit.log_number = Some(next_wal);
        inner.install(&mut st, edit)?;
        st.imms.pop_front();
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

/// Runs `job` and installs its outputs; the bytes of new tables written.
fn compact(inner: &Arc<Inner>, job: CompactionJob) -> Result<u64> {
    let t = Instant::now();
    let cpu0 = quietio::sys::thread_cpu_time();
    log::debug!(
        "quietkv: {:?} compaction ({:?}) of L{} into L{}",
        job.kind,
        job.reason,
        job.level,
        job.output_level
    );
    let result = if job.kind == CompactionKind::TrivialMove {
        let mut st = inner.state.lock();
        let r = inner.install(&mut st, job.trivial_move_edit());
        if r.is_ok() {
            inner
                .counters
                .record_move_into(job.output_level, job.input_bytes());
        }
        r.map(|()| 0)
    } else {
        merge_job(inner, &job).and_then(|(outputs, read, written)| {
            let mut st = inner.state.lock();
            let numbers: Vec<u64> = outputs.iter().map(|m| m.number).collect();
            let r = inner.install(&mut st, job.edit_for_outputs(outputs));
            // After a failed install the edit may be in the manifest all the
            // same: the outputs stay protected until a reopen decides.
            if r.is_ok() {
                for n in numbers {
                    st.pending_outputs.remove(&n);
                }
            }
            if r.is_ok() {
                let cpu = quietio::sys::thread_cpu_time().saturating_sub(cpu0);
                inner
                    .counters
                    .record_compaction(read, written, t.elapsed(), cpu);
                let (from_above, from_level) = job.input_files().fold((0, 0), |(a, l), (lv, f)| {
                    if lv == job.output_level {
                        (a, l + f.size)
                    } else {
                        (a + f.size, l)
                    }
                });
                inner
                    .counters
                    .record_merge_into(job.output_level, from_above, from_level, written);
            }
            r.map(|()| written)
        })
    };
    if result.is_ok() {
        // Before the job counts as finished: whoever waits for it
        // (compact_all, wait_idle) sees the replaced tables gone, unless a
        // reader still holds them.
        inner.delete_obsolete_files();
    }
    let mut st = inner.state.lock();
    st.busy.release(&job);
    st.compactions_running -= 1;
    if let Err(e) = &result {
        if !inner.shutting_down.load(Ordering::Acquire) {
            inner.set_bg_error(&mut st, e);
        }
    }
    inner.done_cv.notify_all();
    result
}

/// Merges the job's inputs into new tables at the output level. Returns
/// the outputs (registered as pending) and the bytes read and written.
fn merge_job(inner: &Arc<Inner>, job: &CompactionJob) -> Result<(Vec<FileMeta>, u64, u64)> {
    // A full compaction hurries (the caller waits for it) and replaces
    // everything at once, so its output is warmed; automatic work keeps
    // the device queue short while the tree keeps up (see the options).
    let manual = job.reason == CompactionReason::Manual;
    let depth = inner.background_depth(&inner.state.lock(), manual);
    let warm =
        inner.opts.warm_compaction_output && (manual || inner.opts.warm_automatic_compactions);
    // Children newest first: L0 tables by descending number, then deeper
    // levels, each (sorted, non-overlapping) level as one lazy iterator.
    let mut children: Vec<Box<dyn InternalIterator + Send>> = Vec::new();
    let hot = warm.then(|| {
        let cache = inner.table_cache.block_cache();
        HotProbe::new(cache.is_enabled().then(|| Arc::clone(cache)))
    });
    // Residency says "hot" only for tables not written through the cache.
    let bypassed = |class| {
        !matches!(
            inner.env.mode(class),
            EffectiveMode::Buffered | EffectiveMode::Mmap
        )
    };
    let l0_hot = hot
        .as_ref()
        .map(|h| h.with_page_cache(bypassed(IoClass::FlushWrite)));
    let deeper_hot = hot
        .as_ref()
        .map(|h| h.with_page_cache(bypassed(IoClass::CompactionWrite)));
    for (level, files) in &job.inputs {
        if files.is_empty() {
            continue;
        }
        if *level == 0 {
            let mut l0 = files.clone();
            l0.sort_by_key(|f| std::cmp::Reverse(f.number));
            for f in l0 {
                let mut s = open_compaction_input(
                    &inner.env,
                    &inner.dir,
                    &f,
                    inner.db_id,
                    &inner.compaction_open_files,
                    l0_hot.as_ref(),
                    depth,
                )?;
                s.seek_to_first()?;
                children.push(Box::new(s));
            }
        } else {
            children.push(Box::new(CompactionLevelIter::new(
                files.clone(),
                inner.env.clone(),
                inner.dir.clone(),
                inner.db_id,
                inner.compaction_open_files.clone(),
                deeper_hot.clone(),
                depth,
            )));
        }
    }
    let snapshots = inner.snapshots.sequences();
    let mut it = CompactionIterator::new(
        MergingIterator::new(children),
        &snapshots,
        job.is_bottommost,
    )
    .with_cpu_yield(CpuYield::every_micros(inner.opts.background_yield_micros));
    it.seek_to_first()?;

    let mut outputs: Vec<FileMeta> = Vec::new();
    let mut current: Option<(u64, TableBuilder<TableFile>)> = None;
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut cutter = OutputCutter::new(&job.grandparent_bounds, job.max_output_file_size);
    let result = (|| -> Result<()> {
        while it.valid() {
            if inner.shutting_down.load(Ordering::Acquire) {
                return Err(Error::new(
                    crate::ErrorKind::Closed,
                    "compaction stopped: database is closing",
                ));
            }
            let key = it.key();
            let uk = user_key(key);
            let cut = cutter.cut_before(
                uk,
                current.is_some() && uk == last_user_key.as_slice(),
                current.as_ref().map(|(_, b)| b.estimated_size()),
            );
            if cut {
                let (number, builder) = current.take().expect("checked");
                outputs.push(finish_output(number, builder)?);
            }
            if current.is_none() {
                let number = {
                    let mut st = inner.state.lock();
                    let n = st.new_file_number();
                    st.pending_outputs.insert(n);
                    n
                };
                let file = inner.env.create_at_depth(
                    &table_path(&inner.dir, number),
                    IoClass::CompactionWrite,
                    depth,
                )?;
                current = Some((
                    number,
                    TableBuilder::new(TableFile(file), inner.opts.table_options())
                        .with_identity(number, inner.db_id),
                ));
            }
            let (_, builder) = current.as_mut().expect("just set");
            builder.add(key, it.value())?;
            last_user_key.clear();
            last_user_key.extend_from_slice(user_key(key));
            it.next()?;
        }
        if let Some((number, builder)) = current.take() {
            outputs.push(finish_output(number, builder)?);
        }
        inner.env.sync_dir()?;
        // Before install, so no user read waits for an output's index and
        // filter (see `TableCache::open_ahead`).
        let mut opened = Vec::with_capacity(outputs.len());
        for out in &outputs {
            opened.extend(open_output(inner, out)?);
        }
        if let Some(hot) = &hot {
            warm_outputs(inner, &opened, hot)?;
        }
        Ok(())
    })();
    inner.counters.record_background_yields(it.cpu_yields());
    if let Err(e) = result {
        // Nothing was installed: remove what was written.
        let mut st = inner.state.lock();
        let mut numbers: Vec<u64> = outputs.iter().map(|m| m.number).collect();
        if let Some((n, _)) = current {
            numbers.push(n);
        }
        for n in numbers {
            st.pending_outputs.remove(&n);
            // It may have been opened ahead through the table cache.
            inner.table_cache.evict(n);
            let _ = inner.env.remove_file(&table_path(&inner.dir, n));
        }
        return Err(e);
    }
    let read = job.input_bytes();
    let written = outputs.iter().map(|m| m.size).sum();
    Ok((outputs, read, written))
}

/// Opens a new table for user reads before it is installed (see
/// `TableCache::open_ahead`). A table that does not verify fails the job;
/// any other failure (out of file descriptors, say) is only logged, and the
/// first read to reach the table opens it.
fn open_output(inner: &Arc<Inner>, meta: &FileMeta) -> Result<Option<Arc<TableReader>>> {
    match inner.table_cache.open_ahead(meta) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == crate::ErrorKind::Corruption => Err(e),
        Err(e) => {
            log::warn!(
                "quietkv: table {} not opened before its install ({e}); the first read will open it",
                meta.number
            );
            Ok(None)
        }
    }
}

/// Hot ranges handed to readahead but not yet waited for, at most: enough to
/// keep the device busy, without asking the kernel for a whole large
/// compaction's hot set at once (in a tight cgroup, early readahead could be
/// reclaimed before it is read back).
const WARM_WINDOW_BYTES: u64 = 64 << 20;

/// Puts the output blocks that hold keys which were hot in the inputs where
/// user reads will look for them, before the outputs are installed (see
/// [`crate::warm`]): kernel readahead, waited for, for buffered user reads;
/// the block cache for direct ones. A range that cannot be read back fails
/// the compaction: better than installing it.
fn warm_outputs(inner: &Arc<Inner>, tables: &[Arc<TableReader>], hot: &HotProbe) -> Result<()> {
    let mut ranges = hot.ranges.lock();
    if ranges.is_empty() {
        return Ok(());
    }
    // The ranges of several outputs are in flight at once, so they overlap
    // on the device; the oldest is waited for once the window is full.
    let wait = |table: &TableReader, offset: u64, len: u64| -> Result<()> {
        if inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::new(
                crate::ErrorKind::Closed,
                "compaction stopped: database is closing",
            ));
        }
        table.finish_warming(offset, len)
    };
    let mut in_flight: VecDeque<(&TableReader, u64, u64)> = VecDeque::new();
    let mut outstanding = 0u64;
    for table in tables {
        let idxs = hot_blocks(
            table.index().iter().map(|e| e.last_key.as_slice()),
            &mut ranges,
        );
        let warming = table.start_warming(&idxs)?;
        inner.counters.record_warming(warming.blocks, warming.bytes);
        for (offset, len) in warming.in_flight {
            in_flight.push_back((table, offset, len));
            outstanding += len;
        }
        while outstanding > WARM_WINDOW_BYTES {
            let Some((t, offset, len)) = in_flight.pop_front() else {
                break;
            };
            wait(t, offset, len)?;
            outstanding -= len;
        }
    }
    for (t, offset, len) in in_flight {
        wait(t, offset, len)?;
    }
    Ok(())
}

fn finish_output(number: u64, builder: TableBuilder<TableFile>) -> Result<FileMeta> {
    let (summary, sink) = builder.finish()?;
    sink.0.finish(true)?;
    Ok(meta_from(number, &summary))
}

/// Asks the background threads for a manual compaction and waits for it.
pub(crate) fn run_manual(
    inner: &Arc<Inner>,
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
        cursor: crate::picker::SliceCursor::new(begin, end),
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
