//! The write path: writers queue up; the one at the front (the leader)
//! takes the batches of those behind it, writes them as one WAL record with
//! at most one sync, inserts them into the memtable and wakes them all.
//!
//! A write with a [`Precondition`] (a transaction's commit) always leads
//! its own group and checks it before writing: every earlier group is in
//! the memtable by then and no later one has started, so nothing can slip
//! in between the check and the apply.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::precondition::Precondition;
use super::state::{Inner, State, Wal, Writer};
use crate::batch::WriteBatch;
use crate::compaction::pressure::{write_pressure, WriteStall};
use crate::error::{Error, Result};
use crate::fileio::LogFile;
use crate::filenames::wal_path;
use crate::memtable::Memtable;
use crate::version::VersionEdit;

/// A group never grows past this many bytes, so one huge group does not
/// delay a small synced write for long.
const MAX_GROUP_BYTES: usize = 1 << 20;

pub(crate) fn write(
    inner: &Arc<Inner>,
    batch: WriteBatch,
    sync: bool,
    force_switch: bool,
) -> Result<()> {
    if batch.is_empty() && !force_switch {
        return if inner.read_only {
            Err(super::state::read_only_error())
        } else {
            Ok(())
        };
    }
    submit(inner, batch, sync, force_switch.then_some(0), None)
}

/// Freezes keyspace `id`'s memtable (switching to a new WAL) so the flush
/// thread writes it out; nothing to do if it is empty.
pub(crate) fn switch_for_flush(inner: &Arc<Inner>, id: u32) -> Result<()> {
    submit(inner, WriteBatch::new(), false, Some(id), None)
}

/// Writes `batch` only if `check` holds when it is applied; `Conflict`
/// (and nothing written) if not. An empty batch is checked without
/// writing.
pub(crate) fn write_checked(
    inner: &Arc<Inner>,
    batch: WriteBatch,
    sync: bool,
    check: Precondition,
) -> Result<()> {
    submit(inner, batch, sync, None, Some(Box::new(check)))
}

/// Queues the write and waits until a leader (this writer or another)
/// has written it. Inlined into both callers so a plain write costs no
/// extra call.
#[inline(always)]
fn submit(
    inner: &Arc<Inner>,
    batch: WriteBatch,
    sync: bool,
    force_switch: Option<u32>,
    check: Option<Box<Precondition>>,
) -> Result<()> {
    if inner.read_only {
        return Err(super::state::read_only_error());
    }
    if inner.shutting_down.load(Ordering::Acquire) {
        return Err(Error::new(crate::ErrorKind::Closed, "database is closing"));
    }
    let me = Arc::new(Writer {
        batch,
        sync,
        force_switch: force_switch.is_some(),
        force_keyspace: force_switch.unwrap_or(0),
        check,
        result: Mutex::new(None),
        cv: Condvar::new(),
    });
    let mut queue = inner.writers.lock();
    queue.push_back(me.clone());
    loop {
        if let Some(r) = me.result.lock().take() {
            return r;
        }
        if queue.front().is_some_and(|f| Arc::ptr_eq(f, &me)) {
            break;
        }
        me.cv.wait(&mut queue);
    }
    drop(queue);

    // The leader.
    let outcome = lead(inner, &me);
    let mut queue = inner.writers.lock();
    let group_len = match &outcome {
        Ok(n) => *n,
        Err(_) => 1,
    };
    let mut mine = None;
    for _ in 0..group_len {
        let w = queue
            .pop_front()
            .expect("group is at the front of the queue");
        let r = match &outcome {
            Ok(_) => Ok(()),
            Err(e) => Err(e.clone()),
        };
        if Arc::ptr_eq(&w, &me) {
            mine = Some(r);
        } else {
            *w.result.lock() = Some(r);
            w.cv.notify_one();
        }
    }
    if let Some(next) = queue.front() {
        next.cv.notify_one();
    }
    drop(queue);
    mine.expect("leader is in its own group")
}

/// Does the leader's work; returns how many queued writers it served.
fn lead(inner: &Arc<Inner>, me: &Arc<Writer>) -> Result<usize> {
    let mem = make_room(inner, me.force_switch.then_some(me.force_keyspace))?;
    if let Some(check) = &me.check {
        // The leader, so the state is settled; on a conflict only this
        // writer is answered and the next in line leads.
        check.check(inner)?;
    }
    if me.batch.is_empty() {
        return Ok(1);
    }
    // Take the group: the leader plus followers, up to the size cap. A
    // follower that wants a sync cannot join a group that will not sync,
    // unless the leader syncs anyway.
    let policy = inner.opts.wal_sync;
    let group = {
        let queue = inner.writers.lock();
        let mut group: Vec<Arc<Writer>> = Vec::new();
        let mut bytes = 0;
        for w in queue.iter() {
            if !group.is_empty()
                && (!policy.groups_writers()
                    || w.force_switch
                    // Checked writes lead their own group (see above).
                    || w.check.is_some()
                    // So does a batch that writes other keyspaces (see
                    // `memtables_of`), and nobody joins it.
                    || w.batch.has_keyspaces()
                    || me.batch.has_keyspaces()
                    || (w.sync && !me.sync && !policy.syncs_every_write())
                    || bytes + w.batch.approximate_size() > MAX_GROUP_BYTES)
            {
                break;
            }
            bytes += w.batch.approximate_size();
            group.push(w.clone());
        }
        group
    };
    let mut merged = inner.group_batch.lock();
    merged.clear();
    for w in &group {
        merged.append(&w.batch)?;
    }
    let result = write_group(inner, &mem, &mut merged, &group);
    if merged.approximate_size() > MAX_GROUP_BYTES {
        // One huge batch should not keep its buffer for the life of the
        // database.
        *merged = WriteBatch::new();
    }
    result
}

/// Writes the group's merged batch to the WAL and the memtable and
/// publishes its sequence numbers; returns how many writers it served.
fn write_group(
    inner: &Arc<Inner>,
    mem: &Memtable,
    merged: &mut WriteBatch,
    group: &[Arc<Writer>],
) -> Result<usize> {
    let policy = inner.opts.wal_sync;
    let sync = policy.syncs_every_write() || group.iter().any(|w| w.sync);
    let first_seq = inner.visible_seq.load(Ordering::Acquire) + 1;
    merged.set_sequence(first_seq);
    let scoped = if merged.has_keyspaces() {
        Some(memtables_of(inner, merged)?)
    } else {
        None
    };

    let written = {
        let mut wal = inner.wal.lock();
        let wal = wal.as_mut().ok_or_else(super::state::read_only_error)?;
        wal.writer.add_record(merged.data()).and_then(|_| {
            if sync {
                wal.writer.sync()
            } else {
                // Handed to the kernel: survives a process crash.
                wal.writer.flush()
            }
        })
    };
    if let Err(e) = written {
        // The WAL's state is unknown now; stop accepting writes. (The WAL
        // lock is released first: the lock order is state, then WAL.)
        let mut st = inner.state.lock();
        inner.set_bg_error(&mut st, &e);
        return Err(e);
    }
    match &scoped {
        None => mem.insert_batch(merged)?,
        Some(mems) => insert_scoped(mems, merged)?,
    }
    let last = first_seq + merged.len() as u64 - 1;
    inner.visible_seq.store(last, Ordering::Release);
    inner.counters.record_write(
        merged.len() as u64,
        merged.data().len() as u64,
        group.len() as u64,
    );
    Ok(group.len())
}

/// The memtable of every keyspace `batch` writes, looked up before it is
/// logged: a keyspace dropped since the batch was built fails the write
/// (`InvalidArgument`) with nothing written. Such a batch is a group of
/// its own, so the failure is only its writer's.
fn memtables_of(inner: &Inner, batch: &WriteBatch) -> Result<Vec<(u32, Arc<Memtable>)>> {
    let mut ids: Vec<u32> = batch.iter_scoped().map(|(id, _)| id).collect();
    ids.sort_unstable();
    ids.dedup();
    let st = inner.state.lock();
    ids.into_iter()
        .map(|id| match st.tree(id) {
            Some(t) => Ok((id, t.mem.clone())),
            None => Err(Error::invalid(format!(
                "the write batch writes keyspace {id}, which was dropped; nothing was written"
            ))),
        })
        .collect()
}

/// Inserts each entry of `batch` into its keyspace's memtable, the `i`th
/// with sequence number `batch.sequence() + i`, as
/// [`Memtable::insert_batch`] does for one keyspace.
pub(crate) fn insert_scoped(mems: &[(u32, Arc<Memtable>)], batch: &WriteBatch) -> Result<()> {
    let first = batch.sequence();
    for (i, (id, e)) in batch.iter_scoped().enumerate() {
        let Some((_, mem)) = mems.iter().find(|(m, _)| *m == id) else {
            return Err(Error::invalid(format!("no memtable for keyspace {id}")));
        };
        mem.add(first + i as u64, e.kind, e.key, e.value)?;
    }
    Ok(())
}

/// The worst write pressure over the keyspaces: a keyspace whose flushes
/// or compactions are behind slows or stops every writer, as the one tree
/// did before keyspaces.
#[inline]
fn pressure(st: &State, inner: &Inner) -> WriteStall {
    if let [only] = &st.trees[..] {
        return write_pressure(&only.version, &inner.popts);
    }
    let mut worst = WriteStall::None;
    for t in &st.trees {
        match write_pressure(&t.version, &inner.popts) {
            WriteStall::Stop => return WriteStall::Stop,
            WriteStall::Slowdown => worst = WriteStall::Slowdown,
            WriteStall::None => {}
        }
    }
    worst
}

/// Makes sure the memtable has room, switching to a new one (and WAL) when
/// it is full, and delays or stops the writer when flush or L0 compaction
/// is behind. Returns the memtable to insert into.
fn make_room(inner: &Arc<Inner>, force: Option<u32>) -> Result<Arc<Memtable>> {
    let mut allow_delay = force.is_none();
    let mut force = force;
    let mut st = inner.state.lock();
    loop {
        inner.check_bg_error(&st)?;
        if inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::new(crate::ErrorKind::Closed, "database is closing"));
        }
        let pressure = pressure(&st, inner);
        if allow_delay && pressure == WriteStall::Slowdown {
            // One short delay per write spreads the slowdown over writers
            // instead of stopping one of them for long.
            drop(st);
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(1));
            inner.counters.record_stall(false, t.elapsed());
            allow_delay = false;
            st = inner.state.lock();
            continue;
        }
        let limit = inner.opts.memtable_size;
        let full = match &st.trees[..] {
            [only] => only.mem.approximate_bytes() >= limit,
            trees => trees.iter().any(|t| t.mem.approximate_bytes() >= limit),
        };
        // A forced switch of an empty (or dropped) keyspace has nothing to
        // freeze.
        let forced = force.filter(|&id| st.tree(id).is_some_and(|t| !t.mem.is_empty()));
        if forced.is_none() && !full {
            return Ok(st.default_tree().mem.clone());
        }
        let max_imms = inner.opts.max_immutable_memtables;
        if st.trees.iter().any(|t| t.imms.len() >= max_imms) || pressure == WriteStall::Stop {
            let t = Instant::now();
            inner.bg_cv.notify_all();
            inner.done_cv.wait_for(&mut st, Duration::from_millis(100));
            inner.counters.record_stall(true, t.elapsed());
            continue;
        }
        // Switch: a new WAL for the new memtable; the old WAL is synced and
        // closed (its data is now only needed until the flush). Not while
        // another process may hold this database's LOCK file.
        if let Err(e) = inner.verify_lock() {
            inner.set_bg_error(&mut st, &e);
            return Err(e);
        }
        let number = st.new_file_number();
        let path = wal_path(&inner.dir, number);
        let file = match open_new_wal(inner, &mut st, &path) {
            Ok(f) => f,
            Err(e) => {
                inner.set_bg_error(&mut st, &e);
                return Err(e);
            }
        };
        let new_wal = Wal {
            writer: inner.wal_writer(file, number),
        };
        let Some(old) = inner.wal.lock().replace(new_wal) else {
            return Err(super::state::read_only_error());
        };
        let old_len = old.writer.bytes_written();
        if let Err(e) = old.writer.into_inner().finish(true) {
            inner.set_bg_error(&mut st, &e);
            return Err(e);
        }
        if let Err(e) = inner.env.sync_dir() {
            let e = Error::from(e);
            inner.set_bg_error(&mut st, &e);
            return Err(e);
        }
        // Only now is the new WAL's creation (or a kept file's rename to
        // its name) durable, so only now may the manifest require it; the
        // old one is complete and synced. No record was written to the new
        // WAL yet: a crash before this point leaves a kept file under
        // either name, whose records all name its old log.
        let mut edit = VersionEdit::new();
        edit.sealed_wals.push((st.live_wal, old_len));
        edit.live_wal = Some(number);
        inner.install(&mut st, edit)?;
        st.live_wal = number;
        for t in &mut st.trees {
            if t.mem.is_empty() {
                // Nothing of it is in the older WALs.
                t.mem_wal = number;
            } else if t.mem.approximate_bytes() >= limit || forced == Some(t.id()) {
                t.freeze(number);
            }
        }
        if st.trees.len() > 1 {
            bound_wal_growth(inner, &mut st, number);
        }
        inner.refresh_super_version(&mut st);
        inner.bg_cv.notify_all();
        force = None;
    }
}

/// Keeps the WALs that must be kept within `Options::max_total_wal_size`
/// when some keyspace is written rarely: its memtable, never full, would
/// otherwise keep every WAL since its first write. Once the WALs still
/// needed pass the limit, the keyspaces whose memtables hold data of the
/// oldest one are frozen (and so flushed), letting it go. Called at a WAL
/// switch, after the switch to WAL `live`.
fn bound_wal_growth(inner: &Inner, st: &mut State, live: u64) {
    let oldest = st.min_live_wal();
    let kept: u64 = st
        .wals
        .sealed()
        .filter(|&(n, _)| n >= oldest)
        .map(|(_, len)| len)
        .sum();
    if kept <= inner.opts.resolved_max_total_wal_size() {
        return;
    }
    for t in &mut st.trees {
        if t.imms.is_empty() && !t.mem.is_empty() && t.mem_wal == oldest {
            t.freeze(live);
        }
    }
}

/// The file for a new WAL at `path`: a kept obsolete WAL renamed to it and
/// written again from offset 0 when recycling has one (see
/// `Options::wal_recycle_count`), else a new file. The rename, like a
/// creation, is made durable by the directory sync of the switch before
/// the manifest names the new WAL. A kept file that cannot be taken is
/// left to obsolete-file deletion (under whichever name it has now: if
/// the rename went through, creating the new WAL truncates it).
fn open_new_wal(inner: &Inner, st: &mut State, path: &Path) -> Result<LogFile> {
    let segment = inner.opts.wal_segment_size;
    if let Some(kept) = st.wal_pool.pop_front() {
        let from = wal_path(&inner.dir, kept);
        let reused = inner
            .env
            .rename(&from, path)
            .map_err(|e| Error::io(e, "cannot rename a kept WAL for reuse").with_file(&from))
            .and_then(|()| LogFile::reuse_wal(&inner.env, path, segment));
        match reused {
            Ok(file) => {
                inner.counters.record_wal_recycled();
                return Ok(file);
            }
            Err(e) => log::warn!(
                "quietkv: {}: cannot reuse WAL {kept} as {}, creating it instead: {e}",
                inner.dir.display(),
                path.display()
            ),
        }
    }
    LogFile::create_wal(&inner.env, path, segment)
}
