//! Shared by the power-cut and I/O-error tests: a fixed workload, the
//! model of what the database holds after each prefix of its writes, the
//! access-mode combinations to run it in, and the check of a directory
//! against the model.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use quietio::IoEngine;
use quietkv::{AccessMode, Db, ErrorKind, IoClass, Options, WriteBatch, WriteOptions};

#[path = "../support/skip.rs"]
mod skip;

pub type Kv = BTreeMap<Vec<u8>, Vec<u8>>;

/// One step of the workload.
#[derive(Debug, Clone)]
pub enum Step {
    /// One `Db::write` of these puts (`Some`) and deletes (`None`).
    Write {
        ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        sync: bool,
    },
    Flush,
    CompactAll,
    /// Close (which seals the WAL) and open again.
    Reopen,
}

pub const KEYS: u32 = 24;

pub fn key(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

/// Unique per write, so an old version served is a wrong value.
fn value(write: usize, k: u32) -> Vec<u8> {
    format!("w{write}-k{k}.").repeat(12).into_bytes()
}

/// The fixed workload: puts, deletes and batches, some synced; flushes,
/// a full compaction, a reopen; small memtables and a small manifest
/// limit make it switch memtables (and WALs) and rotate the manifest.
pub fn workload() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut w = 0usize;
    let put = |steps: &mut Vec<Step>, k: u32, sync: bool, w: &mut usize| {
        steps.push(Step::Write {
            ops: vec![(key(k), Some(value(*w, k)))],
            sync,
        });
        *w += 1;
    };
    for i in 0..24 {
        put(&mut steps, i % KEYS, i % 6 == 5, &mut w);
    }
    for b in 0..4u32 {
        steps.push(Step::Write {
            ops: vec![
                (key(b * 3), Some(value(w, b * 3))),
                (key(b * 3 + 1), Some(value(w, b * 3 + 1))),
                (key(b * 5 + 2), None),
            ],
            sync: b == 2,
        });
        w += 1;
    }
    steps.push(Step::Flush);
    for i in 0..16u32 {
        if i % 5 == 4 {
            steps.push(Step::Write {
                ops: vec![(key(i * 7 % KEYS), None)],
                sync: false,
            });
            w += 1;
        } else {
            put(&mut steps, i * 11 % KEYS, i % 4 == 3, &mut w);
        }
    }
    steps.push(Step::CompactAll);
    for i in 0..10u32 {
        put(&mut steps, (i * 5 + 1) % KEYS, false, &mut w);
    }
    steps.push(Step::Reopen);
    for i in 0..12u32 {
        put(&mut steps, (i * 13 + 3) % KEYS, i == 11, &mut w);
    }
    steps.push(Step::Flush);
    for i in 0..6u32 {
        put(&mut steps, i * 3 % KEYS, false, &mut w);
    }
    steps
}

/// A small workload with every kind of step, for enumerating every
/// operation of it exhaustively: puts, a synced batch with a delete, a
/// flush, a compaction of two tables, a reopen, and writes to a new WAL
/// after it. Twelve writes, four of them synced.
/// A tree of several disjoint tables (keys written in order, flushed in
/// runs), then full compactions that run in slices (`base_options`), with
/// overwrites and deletes between them and a reopen.
pub fn sliced_workload() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut w = 0usize;
    for run in 0..4u32 {
        for j in 0..40u32 {
            let k = run * 40 + j;
            steps.push(Step::Write {
                ops: vec![(key(k), Some(value(w, k)))],
                sync: j % 10 == 9,
            });
            w += 1;
        }
        steps.push(Step::Flush);
    }
    steps.push(Step::CompactAll);
    for i in 0..20u32 {
        let k = i * 8;
        let v = if i % 4 == 3 { None } else { Some(value(w, k)) };
        steps.push(Step::Write {
            ops: vec![(key(k), v)],
            sync: i % 5 == 4,
        });
        w += 1;
    }
    steps.push(Step::CompactAll);
    steps.push(Step::Reopen);
    steps.push(Step::CompactAll);
    steps
}

pub fn small_workload() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut w = 0usize;
    let mut put = |steps: &mut Vec<Step>, k: u32, sync: bool| {
        steps.push(Step::Write {
            ops: vec![(key(k), Some(value(w, k)))],
            sync,
        });
        w += 1;
    };
    put(&mut steps, 0, false);
    put(&mut steps, 1, true);
    steps.push(Step::Write {
        ops: vec![
            (key(2), Some(value(99, 2))),
            (key(3), Some(value(99, 3))),
            (key(0), None),
        ],
        sync: true,
    });
    steps.push(Step::Flush);
    put(&mut steps, 4, false);
    put(&mut steps, 1, false);
    steps.push(Step::Flush);
    steps.push(Step::CompactAll);
    put(&mut steps, 5, true);
    put(&mut steps, 2, false);
    steps.push(Step::Reopen);
    put(&mut steps, 6, false);
    put(&mut steps, 3, true);
    put(&mut steps, 7, false);
    steps.push(Step::Write {
        ops: vec![(key(5), None), (key(8), Some(value(98, 8)))],
        sync: false,
    });
    put(&mut steps, 9, false);
    steps
}

/// WAL lives of very different lengths, each ended by a flush (or a full
/// compaction, which drops deleted keys' old versions, so that an old
/// record replayed from a reused WAL would be visible), with overwrites,
/// deletes and a few synced writes: with recycling on, WAL switches keep
/// reusing files that held more than their new life writes.
pub fn recycle_workload() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut w = 0usize;
    for (life, n) in [40u32, 3, 30, 1, 24, 6, 36, 2, 12].into_iter().enumerate() {
        let life = life as u32;
        for i in 0..n {
            let k = (i * 7 + life * 5) % KEYS;
            let op = if (i + life) % 4 == 3 {
                (key(k), None)
            } else {
                (key(k), Some(value(w, k)))
            };
            steps.push(Step::Write {
                ops: vec![op],
                sync: i % 9 == 8,
            });
            w += 1;
        }
        steps.push(if life % 3 == 2 {
            Step::CompactAll
        } else {
            Step::Flush
        });
    }
    steps
}

/// `states[p]`: the database after the first `p` writes.
pub fn states(steps: &[Step]) -> Vec<Kv> {
    let mut s = Kv::new();
    let mut out = vec![s.clone()];
    for step in steps {
        if let Step::Write { ops, .. } = step {
            for (k, v) in ops {
                match v {
                    Some(v) => s.insert(k.clone(), v.clone()),
                    None => s.remove(k),
                };
            }
            out.push(s.clone());
        }
    }
    out
}

/// How far the workload got, read by a sync hook on another thread.
#[derive(Debug, Default)]
pub struct Progress {
    /// Writes handed to the database (the last may not have returned).
    pub issued: AtomicUsize,
    /// Writes that returned Ok.
    pub acked: AtomicUsize,
    /// Writes that must survive a power cut: up to the last acknowledged
    /// synced write, or everything acknowledged before a clean close.
    pub durable: AtomicUsize,
}

/// An access-mode combination of the write (and read) classes.
#[derive(Debug, Clone)]
pub struct ModeSet {
    pub name: &'static str,
    pub modes: Vec<(IoClass, AccessMode)>,
    pub engine: IoEngine,
    /// `Options::wal_recycle_count`.
    pub wal_recycle_count: usize,
}

/// The combinations the machine supports: all buffered; all direct with
/// io_uring and with blocking calls; a dontcache/fadvise mix; the WAL
/// written through a mapping (mmap reads of tables with it).
pub fn mode_sets(probe_dir: &Path) -> Vec<ModeSet> {
    let env = quietio::IoEnv::open(probe_dir, quietio::IoOptions::default()).unwrap();
    let all = |m: AccessMode| IoClass::ALL.iter().map(|&c| (c, m)).collect::<Vec<_>>();
    let mut v = vec![ModeSet {
        name: "buffered",
        modes: all(AccessMode::Buffered),
        engine: IoEngine::Sync,
        wal_recycle_count: 0,
    }];
    match env.capabilities().direct_unusable_reason(true) {
        None => {
            if quietio::uring_unavailable_reason().is_none() {
                v.push(ModeSet {
                    name: "direct-uring",
                    modes: all(AccessMode::Direct),
                    engine: IoEngine::Uring,
                    wal_recycle_count: 0,
                });
            } else {
                skip::skip("io_uring unavailable: no direct-uring runs");
            }
            v.push(ModeSet {
                name: "direct-sync",
                modes: all(AccessMode::Direct),
                engine: IoEngine::Sync,
                wal_recycle_count: 0,
            });
        }
        Some(why) => skip::skip(&format!("no direct runs: {why}")),
    }
    if env.capabilities().dontcache.supported {
        v.push(ModeSet {
            name: "dontcache-fadvise",
            modes: vec![
                (IoClass::WalWrite, AccessMode::DontCache),
                (IoClass::Manifest, AccessMode::Fadvise),
                (IoClass::FlushWrite, AccessMode::Fadvise),
                (IoClass::CompactionWrite, AccessMode::DontCache),
                (IoClass::CompactionRead, AccessMode::Fadvise),
                (IoClass::UserRead, AccessMode::DontCache),
            ],
            engine: IoEngine::Sync,
            wal_recycle_count: 0,
        });
    } else {
        skip::skip("RWF_DONTCACHE unavailable: no dontcache runs");
    }
    if env.capabilities().fallocate.supported {
        // The WAL written through a mapping; user reads mapped too.
        v.push(ModeSet {
            name: "mmap-wal",
            modes: vec![
                (IoClass::WalWrite, AccessMode::Mmap),
                (IoClass::UserRead, AccessMode::Mmap),
            ],
            engine: IoEngine::Sync,
            wal_recycle_count: 0,
        });
    } else {
        skip::skip("fallocate unavailable: no mmap WAL runs");
    }
    // Each again with WAL recycling: reused WAL files hold an earlier
    // life's records after the new ones.
    let recycled: Vec<ModeSet> = v
        .iter()
        .map(|s| ModeSet {
            name: recycled_name(s.name),
            wal_recycle_count: 2,
            ..s.clone()
        })
        .collect();
    v.extend(recycled);
    v
}

fn recycled_name(name: &str) -> &'static str {
    match name {
        "buffered" => "buffered-recycle",
        "direct-uring" => "direct-uring-recycle",
        "direct-sync" => "direct-sync-recycle",
        "dontcache-fadvise" => "dontcache-fadvise-recycle",
        "mmap-wal" => "mmap-wal-recycle",
        other => panic!("no recycled name for mode set {other}"),
    }
}

/// Small everything, so the workload flushes, switches WALs, compacts
/// and rotates the manifest.
pub fn base_options() -> Options {
    Options::default()
        .memtable_size(4096)
        .max_immutable_memtables(2)
        .l0_compaction_trigger(2)
        .l0_slowdown_trigger(8)
        .l0_stop_trigger(12)
        .level_base_bytes(16 << 10)
        .target_file_size(8 << 10)
        .block_size(512)
        .block_cache_bytes(64 << 10)
        .direct_write_buffer_size(8192)
        .compaction_readahead_size(8192)
        .fadvise_chunk_size(8192)
        .io_depth(2)
        .max_manifest_size(1024)
        // Small, so a WAL outgrows its first segment.
        .wal_segment_size(16 << 10)
        // About one table: a full compaction of a tree of several
        // disjoint tables runs in slices.
        .max_compaction_bytes(8 << 10)
}

pub fn options_for(set: &ModeSet) -> Options {
    let mut o = base_options();
    for &(class, mode) in &set.modes {
        o = o.io_mode(class, mode);
    }
    o.io_engine = set.engine;
    o.wal_recycle_count = set.wal_recycle_count;
    o
}

/// How a run ended: completed, or the first error a call returned.
#[derive(Debug)]
pub struct RunEnd {
    pub error: Option<(String, quietkv::Error)>,
    /// WAL switches that reused a kept file, over every open of the run.
    pub wal_files_recycled: u64,
}

/// What a run calls on the writing thread, for tests that time something
/// to its steps.
pub struct Hooks<'a> {
    /// Called with `n` right after the `n`th write was acknowledged (and
    /// `progress` updated).
    pub after_ack: &'a dyn Fn(usize),
    /// Called before a flush or full compaction that follows another one
    /// since the database was (re)opened.
    pub before_later_flush: &'a dyn Fn(&Db),
}

impl Hooks<'_> {
    /// Nothing called.
    pub const NONE: Hooks<'static> = Hooks {
        after_ack: &|_: usize| {},
        before_later_flush: &|_: &Db| {},
    };
}

/// Runs `steps` on the database in `dir`; stops at the first error.
pub fn run(dir: &Path, opts: &Options, steps: &[Step], progress: &Progress) -> RunEnd {
    run_with_hooks(dir, opts, steps, progress, &Hooks::NONE)
}

/// [`run`], calling `after_ack(n)` right after the `n`th write was
/// acknowledged (and `progress` updated), on the writing thread.
pub fn run_with_hook(
    dir: &Path,
    opts: &Options,
    steps: &[Step],
    progress: &Progress,
    after_ack: &dyn Fn(usize),
) -> RunEnd {
    let hooks = Hooks {
        after_ack,
        ..Hooks::NONE
    };
    run_with_hooks(dir, opts, steps, progress, &hooks)
}

/// [`run`], calling `hooks` as it goes.
pub fn run_with_hooks(
    dir: &Path,
    opts: &Options,
    steps: &[Step],
    progress: &Progress,
    hooks: &Hooks,
) -> RunEnd {
    let recycled = std::cell::Cell::new(0u64);
    let fail = |what: String, e| RunEnd {
        error: Some((what, e)),
        wal_files_recycled: recycled.get(),
    };
    let mut db = match Db::open(dir, opts.clone()) {
        Ok(db) => db,
        Err(e) => return fail("open".into(), e),
    };
    let mut flushed_since_open = false;
    let mut w = 0usize;
    for (i, step) in steps.iter().enumerate() {
        if flushed_since_open && matches!(step, Step::Flush | Step::CompactAll) {
            (hooks.before_later_flush)(&db);
        }
        let r = match step {
            Step::Write { ops, sync } => {
                let mut b = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => b.put(k, v).unwrap(),
                        None => b.delete(k).unwrap(),
                    }
                }
                progress.issued.store(w + 1, Ordering::SeqCst);
                let r = db.write(b, WriteOptions { sync: *sync });
                if r.is_ok() {
                    w += 1;
                    progress.acked.store(w, Ordering::SeqCst);
                    if *sync {
                        progress.durable.store(w, Ordering::SeqCst);
                    }
                    (hooks.after_ack)(w);
                }
                r
            }
            Step::Flush => {
                flushed_since_open = true;
                db.flush()
            }
            Step::CompactAll => {
                flushed_since_open = true;
                db.compact_all()
            }
            Step::Reopen => {
                recycled.set(recycled.get() + db.stats().wal_files_recycled);
                let closed = db.close();
                if let Err(e) = closed {
                    return fail(format!("step {i} close"), e);
                }
                progress.durable.store(w, Ordering::SeqCst);
                flushed_since_open = false;
                match Db::open(dir, opts.clone()) {
                    Ok(d) => {
                        db = d;
                        Ok(())
                    }
                    Err(e) => return fail(format!("step {i} reopen"), e),
                }
            }
        };
        if let Err(e) = r {
            return fail(format!("step {i} {step:?}"), e);
        }
    }
    recycled.set(recycled.get() + db.stats().wal_files_recycled);
    if let Err(e) = db.close() {
        return fail("final close".into(), e);
    }
    progress.durable.store(w, Ordering::SeqCst);
    RunEnd {
        error: None,
        wal_files_recycled: recycled.get(),
    }
}

/// What opening a directory against the model found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The database holds `states[p]` for this `p`.
    Prefix(usize),
    /// The open (or a read) refused with Corruption naming a file.
    Corruption(String),
}

/// Opens `dir` with a clean environment and checks it holds the model's
/// state after some prefix `p` of the writes, `lo <= p <= hi`; point reads
/// agree with the scan. `Err` is a violation: a wrong or lost value, an
/// unclear error, a panic.
pub fn check_dir(dir: &Path, states: &[Kv], lo: usize, hi: usize) -> Result<Verdict, String> {
    let hi = hi.min(states.len() - 1);
    match catch_unwind(AssertUnwindSafe(|| check_dir_inner(dir, states, lo, hi))) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panic: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

fn corruption_or_violation(what: &str, e: quietkv::Error) -> Result<Verdict, String> {
    if e.kind() == ErrorKind::Corruption && e.file().is_some() {
        Ok(Verdict::Corruption(e.to_string()))
    } else {
        Err(format!("{what}: {e} (kind {:?})", e.kind()))
    }
}

fn check_dir_inner(dir: &Path, states: &[Kv], lo: usize, hi: usize) -> Result<Verdict, String> {
    let db = match Db::open(dir, base_options()) {
        Ok(db) => db,
        Err(e) => return corruption_or_violation("open", e),
    };
    let mut got = Kv::new();
    for item in db.iter().map_err(|e| format!("iter: {e}"))? {
        match item {
            Ok((k, v)) => {
                got.insert(k, v);
            }
            Err(e) => return corruption_or_violation("scan", e),
        }
    }
    for i in 0..KEYS {
        let k = key(i);
        match db.get(&k) {
            Ok(v) if v.as_ref() == got.get(&k) => {}
            Ok(v) => {
                return Err(format!(
                    "get({}) = {:?} but the scan has {:?}",
                    String::from_utf8_lossy(&k),
                    v.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()),
                    got.get(&k)
                        .map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned())
                ))
            }
            Err(e) => return corruption_or_violation("get", e),
        }
    }
    db.close()
        .map_err(|e| format!("close after the check: {e}"))?;
    if let Some(p) = (lo..=hi).rev().find(|&p| states[p] == got) {
        return Ok(Verdict::Prefix(p));
    }
    let nearest = (0..states.len())
        .find(|&p| states[p] == got)
        .map_or("no prefix".to_string(), |p| format!("prefix {p}"));
    Err(format!(
        "the database holds {} keys, equal to {nearest}, but must equal a prefix in {lo}..={hi}",
        got.len()
    ))
}

/// Panics with the first `shown` of `violations`, if there are any,
/// keeping `root` (where the run left its `what`) for a look.
pub fn panic_on_violations(
    root: tempfile::TempDir,
    violations: &[String],
    what: &str,
    shown: usize,
) {
    if violations.is_empty() {
        return;
    }
    let kept = root.keep();
    panic!(
        "{} violations ({what} kept under {}):\n{}",
        violations.len(),
        kept.display(),
        violations[..violations.len().min(shown)].join("\n")
    );
}
