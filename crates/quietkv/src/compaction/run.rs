//! Executing one compaction job: a trivial move is installed as a version
//! edit; a merge opens its inputs ([`super::inputs`]), merges them
//! newest first, drops what no reader can see ([`super::drop_rules`]), cuts
//! the output into tables ([`super::output_cut`]), builds and syncs them,
//! opens them for user reads and warms what was hot in the inputs
//! ([`super::warm`]), then installs the job's edit. Outputs of a job that
//! fails are removed; nothing of it is installed.
//!
//! The one file of the compaction module that works on the database's
//! shared state (`db::Inner`): file numbers, the version, the counters.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use quietio::{EffectiveMode, IoClass};

use super::drop_rules::CompactionIterator;
use super::inputs::{open_compaction_input, CompactionLevelIter};
use super::job::{CompactionJob, CompactionKind, CompactionReason};
use super::output_cut::OutputCutter;
use super::warm::{hot_blocks, HotProbe};
use crate::cpu_yield::CpuYield;
use crate::db::recovery::meta_from;
use crate::db::state::Inner;
use crate::db::table_write_mode::table_write_mode;
use crate::error::{Error, Result};
use crate::fileio::TableFile;
use crate::filenames::table_path;
use crate::iter::InternalIterator;
use crate::key::user_key;
use crate::keyspace::tree::TreeHandle;
use crate::merge::MergingIterator;
use crate::range_tombstone::OutputSplitter;
use crate::table::{TableBuilder, TableReader};
use crate::version::{FileMeta, VersionEdit};

/// Runs `job` and installs its outputs; the bytes of new tables written.
/// The caller registered the job as running and releases it afterwards,
/// whatever the result.
pub(crate) fn run_job(inner: &Arc<Inner>, keyspace: u32, job: &CompactionJob) -> Result<u64> {
    let Some(tree) = inner.state.lock().tree(keyspace).map(|t| t.handle.clone()) else {
        return Err(crate::db::install::dropped_error(keyspace));
    };
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
        let edit = VersionEdit::for_keyspace(keyspace, job.trivial_move_edit());
        let r = inner.install(&mut st, edit);
        if r.is_ok() {
            inner
                .counters
                .record_move_into(job.output_level, job.input_bytes());
        }
        r.map(|()| 0)
    } else {
        merge_job(inner, &tree, job).and_then(|(outputs, read, written)| {
            let mut st = inner.state.lock();
            let numbers: Vec<u64> = outputs.iter().map(|m| m.number).collect();
            let edit = VersionEdit::for_keyspace(keyspace, job.edit_for_outputs(outputs));
            let r = inner.install(&mut st, edit);
            // After a failed install the edit may be in the manifest all the
            // same: the outputs stay protected until a reopen decides. Not
            // when the keyspace was dropped meanwhile: that install failed
            // before logging anything, and the outputs are nobody's.
            if r.is_ok() || st.tree(keyspace).is_none() {
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
    result
}

/// Merges the job's inputs into new tables at the output level. Returns
/// the outputs (registered as pending) and the bytes read and written.
fn merge_job(
    inner: &Arc<Inner>,
    tree: &TreeHandle,
    job: &CompactionJob,
) -> Result<(Vec<FileMeta>, u64, u64)> {
    // A full compaction hurries (the caller waits for it) and replaces
    // everything at once, so its output is warmed; automatic work keeps
    // the device queue short while the tree keeps up (see the options).
    let manual = job.reason == CompactionReason::Manual;
    let memory = quietio::usable_memory();
    let (depth, mode) = {
        let st = inner.state.lock();
        // The inputs stay cached beside the outputs until they are deleted.
        let input_bytes: u64 = job
            .inputs
            .iter()
            .flat_map(|(_, f)| f.iter())
            .map(|f| f.size)
            .sum();
        let mode = table_write_mode(
            &inner.opts,
            &inner.env,
            IoClass::CompactionWrite,
            st.table_bytes(),
            input_bytes,
            memory,
        );
        (inner.background_depth(&st, manual), mode)
    };
    // Outputs written through the page cache are already where buffered
    // user reads look: nothing to warm.
    let warm = mode.is_none()
        && inner.opts.warm_compaction_output
        && (manual || inner.opts.warm_automatic_compactions);
    // Children newest first: L0 tables by descending number, then deeper
    // levels, each (sorted, non-overlapping) level as one lazy iterator.
    let mut children: Vec<Box<dyn InternalIterator + Send>> = Vec::new();
    let hot = warm.then(|| {
        let cache = inner.table_cache.block_cache();
        HotProbe::new(
            cache.is_enabled().then(|| Arc::clone(cache)),
            Some(Arc::clone(&inner.table_cache)),
        )
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
    // The inputs' range tombstones, from the tables the manifest says hold
    // some (opened through the table cache: they are read at open).
    let mut range_dels = Vec::new();
    for (_, f) in job.input_files() {
        if f.num_range_deletes > 0 {
            range_dels.extend_from_slice(inner.table_cache.get(f)?.range_tombstones());
        }
    }
    let snapshots = inner.snapshots.sequences();
    let mut it = CompactionIterator::new(
        MergingIterator::new(children),
        &snapshots,
        job.is_bottommost,
    )
    .with_cpu_yield(CpuYield::every_micros(inner.opts.background_yield_micros))
    .with_filter(tree.filter())
    .with_range_tombstones(&range_dels);
    range_dels.retain(|t| it.keeps_range_tombstone(t));
    // Each output gets the parts of the kept tombstones over its own keys,
    // so the outputs stay disjoint and a read finds a key's tombstones in
    // the one table of the level that may hold the key.
    let mut splitter = OutputSplitter::new(range_dels);
    it.seek_to_first()?;

    let mut outputs: Vec<FileMeta> = Vec::new();
    // Each output is opened for user reads as soon as it is written, so
    // no user read waits for its index and filter after the install (see
    // `TableCache::open_ahead`). One at a time, as they come: opening a
    // slice's outputs together at its end read all their indexes in one
    // burst, and user reads that missed the cache queued behind it.
    let mut opened: Vec<Arc<TableReader>> = Vec::new();
    let open_ahead = |out: &FileMeta, opened: &mut Vec<Arc<TableReader>>| -> Result<()> {
        opened.extend(inner.table_cache.open_output(out)?);
        if mode.is_some() {
            inner.counters.record_small_database_cached_table();
        }
        Ok(())
    };
    let mut current: Option<(u64, TableBuilder<TableFile>)> = None;
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut cutter = OutputCutter::new(&job.grandparent_bounds, job.max_output_file_size);
    let new_output = || -> Result<(u64, TableBuilder<TableFile>)> {
        let number = {
            let mut st = inner.state.lock();
            let n = st.new_file_number();
            st.pending_outputs.insert(n);
            n
        };
        let file = inner.env.create_at_depth_in(
            &table_path(&inner.dir, number),
            IoClass::CompactionWrite,
            depth,
            mode,
        );
        match file {
            Ok(file) => Ok((
                number,
                TableBuilder::new(TableFile(file), tree.table_options)
                    .with_identity(number, inner.db_id),
            )),
            Err(e) => {
                inner.state.lock().pending_outputs.remove(&number);
                Err(e.into())
            }
        }
    };
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
                let (number, mut builder) = current.take().expect("checked");
                for t in splitter.cut_after(&last_user_key) {
                    builder.add_range_tombstone(&t)?;
                }
                outputs.push(finish_output(number, builder)?);
                open_ahead(outputs.last().expect("just pushed"), &mut opened)?;
            }
            if current.is_none() {
                current = Some(new_output()?);
            }
            let (_, builder) = current.as_mut().expect("just set");
            builder.add(key, it.value())?;
            last_user_key.clear();
            last_user_key.extend_from_slice(user_key(key));
            it.next()?;
        }
        if current.is_none() && !splitter.is_empty() {
            // Every point entry was dropped (or there were none), but some
            // tombstones must still hide what deeper levels hold.
            current = Some(new_output()?);
        }
        if let Some((number, mut builder)) = current.take() {
            for t in splitter.rest() {
                builder.add_range_tombstone(&t)?;
            }
            outputs.push(finish_output(number, builder)?);
            open_ahead(outputs.last().expect("just pushed"), &mut opened)?;
        }
        inner.env.sync_dir()?;
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

/// Puts the output blocks that hold keys which were hot in the inputs where
/// user reads will look for them, before the outputs are installed (see
/// [`super::warm`]): kernel readahead, waited for, for buffered user reads;
/// the block cache for direct ones. A range that cannot be read back fails
/// the compaction: better than installing it.
fn warm_outputs(inner: &Arc<Inner>, tables: &[Arc<TableReader>], hot: &HotProbe) -> Result<()> {
    let mut ranges = hot.ranges.lock();
    if ranges.is_empty() {
        return Ok(());
    }
    // The ranges of several outputs are in flight at once, so they overlap
    // on the device; the oldest is waited for once the window
    // (`warm_window_bytes`) is full. Never the whole hot set of a large
    // compaction at once: in a tight cgroup, early readahead could be
    // reclaimed before it is read back.
    let window = inner.opts.warm_window_bytes;
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
        let idxs = hot_blocks(table.index().iter().map(|e| e.last_key), &mut ranges);
        // A table's hot blocks go to readahead a window at a time too: one
        // table of a large compaction can hold thousands of scattered hot
        // blocks, each its own device request, and a user read that misses
        // the cache queues behind every one in flight.
        let mut rest = idxs.as_slice();
        while !rest.is_empty() {
            let index = table.index();
            let sizes = rest.iter().map(|&i| index.handle(i).map_or(0, |h| h.size));
            let n = blocks_within(sizes, window);
            let warming = table.start_warming(&rest[..n])?;
            rest = &rest[n..];
            inner.counters.record_warming(warming.blocks, warming.bytes);
            for (offset, len) in warming.in_flight {
                in_flight.push_back((table, offset, len));
                outstanding += len;
            }
            while outstanding > window {
                let Some((t, offset, len)) = in_flight.pop_front() else {
                    break;
                };
                wait(t, offset, len)?;
                outstanding -= len;
            }
        }
    }
    for (t, offset, len) in in_flight {
        wait(t, offset, len)?;
    }
    Ok(())
}

/// How many blocks of the given sizes, from the first, fit in `window`
/// bytes; at least one, however large.
fn blocks_within(sizes: impl IntoIterator<Item = u64>, window: u64) -> usize {
    let mut bytes = 0u64;
    let n = sizes
        .into_iter()
        .take_while(|&size| {
            bytes = bytes.saturating_add(size);
            bytes <= window
        })
        .count();
    n.max(1)
}

fn finish_output(number: u64, builder: TableBuilder<TableFile>) -> Result<FileMeta> {
    let (summary, sink) = builder.finish()?;
    sink.0.finish(true)?;
    Ok(meta_from(number, &summary))
}

#[cfg(test)]
mod tests {
    use super::blocks_within;

    #[test]
    fn warming_hands_readahead_a_window_of_blocks_at_a_time() {
        // Blocks of a 4 KiB value are a few bytes longer than a page.
        let sizes = [4_100u64; 10];
        assert_eq!(blocks_within(sizes, 16 << 10), 3);
        assert_eq!(blocks_within(sizes, 1 << 20), 10);
        assert_eq!(blocks_within(sizes, 4_100), 1);
        // A block larger than the window still goes, alone.
        assert_eq!(blocks_within([1 << 20, 4_100], 64 << 10), 1);
        assert_eq!(blocks_within([u64::MAX, 1], 4096), 1);
    }
}
