//! The engine against a `BTreeMap` model: random sequences of puts,
//! deletes, range deletes, batches, flushes, compactions, reopens and snapshots, under
//! random access modes for every I/O class (the WAL's mmap mode included)
//! and random WAL compression and sync policies.

mod common;

#[path = "support/skip.rs"]
mod skip;

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use quietkv::{
    AccessMode, Compression, Db, DbIter, ErrorKind, IoClass, Options, Snapshot, WalSync,
    WriteBatch, WriteOptions,
};

#[derive(Debug, Clone)]
enum Op {
    Put(u16, Vec<u8>),
    Delete(u16),
    /// `key(a)..key(b)`, half open (empty when `a >= b`).
    DeleteRange(u16, u16),
    /// `key(a)..=key(b)` (a single key when `a == b`).
    DeleteRangeIncl(u16, u16),
    Batch(Vec<BatchOp>),
    Flush,
    CompactAll,
    CompactRange(u16, u16),
    Reopen,
    TakeSnapshot,
    CheckSnapshots,
    Get(u16),
    Scan(u16, u16),
    /// `a..=b` walked backwards.
    ScanBack(u16, u16),
    /// The keys starting with the first `len` bytes of `key(k)`.
    Prefix(u16, usize),
}

#[derive(Debug, Clone)]
enum BatchOp {
    Put(u16, Vec<u8>),
    Delete(u16),
    DeleteRange(u16, u16),
}

fn batch_op_strategy() -> impl Strategy<Value = BatchOp> {
    let k = 0u16..300;
    prop_oneof![
        8 => (k.clone(), value_strategy()).prop_map(|(k, v)| BatchOp::Put(k, v)),
        3 => k.clone().prop_map(BatchOp::Delete),
        1 => (k.clone(), 0u16..40).prop_map(|(a, n)| BatchOp::DeleteRange(a, a + n)),
    ]
}

/// Removes `key(a)..key(b)` from the model.
fn model_delete_range(m: &mut BTreeMap<Vec<u8>, Vec<u8>>, a: u16, b: u16) {
    let (lo, hi) = (key(a), key(b));
    m.retain(|k, _| !(lo <= *k && *k < hi));
}

fn key(k: u16) -> Vec<u8> {
    format!("k{k:05}").into_bytes()
}

fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), 0..64),
        1 => (any::<u8>(), 1000usize..6000).prop_map(|(b, n)| vec![b; n]),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u16..300;
    prop_oneof![
        30 => (k.clone(), value_strategy()).prop_map(|(k, v)| Op::Put(k, v)),
        8 => k.clone().prop_map(Op::Delete),
        // Short ranges mostly, sometimes a wide one.
        3 => (k.clone(), 0u16..30).prop_map(|(a, n)| Op::DeleteRange(a, a + n)),
        1 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::DeleteRange(a.min(b), a.max(b))),
        1 => (k.clone(), 0u16..3).prop_map(|(a, n)| Op::DeleteRangeIncl(a, a + n)),
        6 => proptest::collection::vec(batch_op_strategy(), 1..20).prop_map(Op::Batch),
        2 => Just(Op::Flush),
        1 => Just(Op::CompactAll),
        1 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::CompactRange(a.min(b), a.max(b))),
        1 => Just(Op::Reopen),
        2 => Just(Op::TakeSnapshot),
        2 => Just(Op::CheckSnapshots),
        6 => k.clone().prop_map(Op::Get),
        2 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Scan(a.min(b), a.max(b))),
        2 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::ScanBack(a.min(b), a.max(b))),
        2 => (k, 1usize..7).prop_map(|(k, len)| Op::Prefix(k, len)),
    ]
}

const WRITE_MODES: [AccessMode; 4] = [
    AccessMode::Buffered,
    AccessMode::Direct,
    AccessMode::DontCache,
    AccessMode::Fadvise,
];
/// The WAL may also be written through a mapping.
const WAL_MODES: [AccessMode; 5] = [
    AccessMode::Buffered,
    AccessMode::Direct,
    AccessMode::DontCache,
    AccessMode::Fadvise,
    AccessMode::Mmap,
];
const WAL_COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];
const WAL_SYNCS: [WalSync; 4] = [
    WalSync::None,
    WalSync::Group,
    WalSync::PerWrite,
    WalSync::Periodic(std::time::Duration::from_millis(1)),
];
const USER_READ_MODES: [AccessMode; 4] = [
    AccessMode::Buffered,
    AccessMode::Direct,
    AccessMode::DontCache,
    AccessMode::Mmap,
];

fn options(modes: [AccessMode; 5]) -> Options {
    Options::default()
        .memtable_size(16 << 10)
        .level_base_bytes(64 << 10)
        .target_file_size(16 << 10)
        .l0_compaction_trigger(2)
        .l0_slowdown_trigger(4)
        .l0_stop_trigger(8)
        .block_size(1024)
        .block_cache_bytes(256 << 10)
        .direct_write_buffer_size(16 << 10)
        .compaction_readahead_size(16 << 10)
        .fadvise_chunk_size(32 << 10)
        .io_mode(IoClass::CompactionRead, modes[0])
        .io_mode(IoClass::CompactionWrite, modes[1])
        .io_mode(IoClass::FlushWrite, modes[2])
        .io_mode(IoClass::UserRead, modes[3])
        .io_mode(IoClass::WalWrite, modes[4])
        // Small, so WALs outgrow their first segment.
        .wal_segment_size(64 << 10)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Every pair `it` yields, unwrapped.
fn pairs(it: impl Iterator<Item = quietkv::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|r| r.unwrap()).collect()
}

fn model_pairs<'a>(
    it: impl Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The reads the database and its snapshots share.
trait View {
    fn get(&self, k: &[u8]) -> Option<Vec<u8>>;
    fn iter(&self) -> DbIter;
    fn range(&self, a: Vec<u8>, b: Vec<u8>) -> DbIter;
    fn range_incl(&self, a: Vec<u8>, b: Vec<u8>) -> DbIter;
    fn prefix(&self, p: &[u8]) -> DbIter;
}

/// The same calls on the database and on a snapshot: both types have
/// these methods, but no trait of the crate's own to call them through.
macro_rules! impl_view {
    ($t:ty) => {
        impl View for $t {
            fn get(&self, k: &[u8]) -> Option<Vec<u8>> {
                <$t>::get(self, k).unwrap()
            }
            fn iter(&self) -> DbIter {
                <$t>::iter(self).unwrap()
            }
            fn range(&self, a: Vec<u8>, b: Vec<u8>) -> DbIter {
                <$t>::range(self, a..b).unwrap()
            }
            fn range_incl(&self, a: Vec<u8>, b: Vec<u8>) -> DbIter {
                <$t>::range(self, a..=b).unwrap()
            }
            fn prefix(&self, p: &[u8]) -> DbIter {
                <$t>::prefix(self, p).unwrap()
            }
        }
    };
}

impl_view!(Db);
impl_view!(Snapshot);

/// Checks the read operations of the API, on the database or on a
/// snapshot, against the model `m`: full iteration both ways, a forward
/// range, an inclusive range backwards, a prefix both ways, and gets.
fn check_view(v: &impl View, m: &Model, what: &str, probe: (u16, u16)) {
    let (a, b) = (probe.0.min(probe.1), probe.0.max(probe.1));
    assert_eq!(pairs(v.iter()), model_pairs(m.iter()), "{what}: iter");
    assert_eq!(
        pairs(v.iter().rev()),
        model_pairs(m.iter().rev()),
        "{what}: iter().rev()"
    );
    assert_eq!(
        pairs(v.range(key(a), key(b))),
        model_pairs(m.range(key(a)..key(b))),
        "{what}: range {a}..{b}"
    );
    assert_eq!(
        pairs(v.range_incl(key(a), key(b)).rev()),
        model_pairs(m.range(key(a)..=key(b)).rev()),
        "{what}: range {a}..={b} reversed"
    );
    let p = &key(a)[..4];
    let want: Vec<_> = model_pairs(m.iter().filter(|(k, _)| k.starts_with(p)));
    assert_eq!(pairs(v.prefix(p)), want, "{what}: prefix {p:?}");
    let mut back = pairs(v.prefix(p).rev());
    back.reverse();
    assert_eq!(back, want, "{what}: prefix {p:?} reversed");
    for k in [a, b] {
        assert_eq!(v.get(&key(k)), m.get(&key(k)).cloned(), "{what}: get {k}");
    }
}

/// Runs `ops` against a fresh database in `dir` and the model. Snapshots
/// borrow the database, so each open is one session; a reopen ends it
/// (and its snapshots).
fn run(dir: &Path, opts: &Options, ops: &[Op]) {
    let mut model: Model = BTreeMap::new();
    let mut ops = ops.iter().enumerate().peekable();
    loop {
        let db = Db::open(dir, opts.clone()).unwrap();
        let reopen = run_session(&db, &mut ops, &mut model);
        db.close().unwrap();
        if !reopen {
            break;
        }
    }
    // Full check at the end, after a reopen.
    let d = Db::open(dir, opts.clone()).unwrap();
    let want = model_pairs(model.iter());
    assert_eq!(pairs(d.iter().unwrap()), want, "final scan after reopen");
    for (k, v) in &model {
        assert_eq!(d.get(k).unwrap().as_ref(), Some(v));
    }
}

/// Applies ops to `d` and `model` until a reopen (true) or the end (false).
fn run_session<'a>(
    d: &Db,
    ops: &mut impl Iterator<Item = (usize, &'a Op)>,
    model: &mut Model,
) -> bool {
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    for (step, op) in ops {
        match op {
            Op::Put(k, v) => {
                d.put(key(*k), v).unwrap();
                model.insert(key(*k), v.clone());
            }
            Op::Delete(k) => {
                d.delete(key(*k)).unwrap();
                model.remove(&key(*k));
            }
            Op::DeleteRange(a, b) => {
                d.delete_range(key(*a)..key(*b)).unwrap();
                model_delete_range(model, *a, *b);
            }
            Op::DeleteRangeIncl(a, b) => {
                d.delete_range(key(*a)..=key(*b)).unwrap();
                model_delete_range(model, *a, *b + 1);
            }
            Op::Batch(entries) => {
                let mut b = WriteBatch::new();
                for e in entries {
                    match e {
                        BatchOp::Put(k, v) => {
                            b.put(key(*k), v).unwrap();
                            model.insert(key(*k), v.clone());
                        }
                        BatchOp::Delete(k) => {
                            b.delete(key(*k)).unwrap();
                            model.remove(&key(*k));
                        }
                        BatchOp::DeleteRange(x, y) => {
                            b.delete_range(key(*x), key(*y)).unwrap();
                            model_delete_range(model, *x, *y);
                        }
                    }
                }
                d.write(
                    b,
                    WriteOptions {
                        sync: step % 2 == 0,
                    },
                )
                .unwrap();
            }
            Op::Flush => d.flush().unwrap(),
            Op::CompactAll => d.compact_all().unwrap(),
            Op::CompactRange(a, b) => d.compact_range(Some(&key(*a)), Some(&key(*b))).unwrap(),
            Op::Reopen => return true,
            Op::TakeSnapshot => snaps.push((d.snapshot(), model.clone())),
            Op::CheckSnapshots => {
                for (i, (s, m)) in snaps.iter().enumerate() {
                    let probe = (step as u16 * 7 % 300, step as u16 * 13 % 300);
                    check_view(s, m, &format!("snapshot {i} at step {step}"), probe);
                }
            }
            Op::Get(k) => assert_eq!(
                d.get(key(*k)).unwrap(),
                model.get(&key(*k)).cloned(),
                "get {k} at step {step}"
            ),
            Op::Scan(a, b) => {
                let got = pairs(d.range(key(*a)..key(*b)).unwrap());
                let want = model_pairs(model.range(key(*a)..key(*b)));
                assert_eq!(got, want, "scan {a}..{b} at step {step}");
            }
            Op::ScanBack(a, b) => {
                let got = pairs(d.range(key(*a)..=key(*b)).unwrap().rev());
                let want = model_pairs(model.range(key(*a)..=key(*b)).rev());
                assert_eq!(got, want, "scan back {a}..={b} at step {step}");
            }
            Op::Prefix(k, len) => {
                let p = &key(*k)[..*len];
                let got = pairs(d.prefix(p).unwrap());
                let want = model_pairs(model.iter().filter(|(k, _)| k.starts_with(p)));
                assert_eq!(got, want, "prefix {p:?} at step {step}");
            }
        }
    }
    // The end: the database and every snapshot still open, both ways.
    check_view(d, model, "final", (17, 240));
    false
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_model_under_random_modes(
        ops in proptest::collection::vec(op_strategy(), 1..250),
        cr in 0usize..4, cw in 0usize..4, fw in 0usize..4, ur in 0usize..4, wal in 0usize..5,
        wal_compression in 0usize..3, wal_sync in 0usize..4,
        warm in any::<bool>(),
        // Half the runs with the smallest manifest limit: rotations between
        // the model's flushes, compactions and reopens.
        tiny_manifest in any::<bool>(),
        // WAL recycling: reused WAL files under every mode and reopen.
        recycle in any::<bool>(),
    ) {
        let d = common::dir();
        let modes = [WRITE_MODES[cr], WRITE_MODES[cw], WRITE_MODES[fw], USER_READ_MODES[ur], WAL_MODES[wal]];
        let max_manifest_size = if tiny_manifest { 1024 } else { Options::default().max_manifest_size };
        let opts = options(modes)
            .warm_compaction_output(warm)
            .max_manifest_size(max_manifest_size)
            .wal_compression(WAL_COMPRESSIONS[wal_compression])
            .wal_sync(WAL_SYNCS[wal_sync])
            .wal_recycle_count(if recycle { 2 } else { 0 });
        run(d.path(), &opts, &ops);
    }
}

/// A fixed workload big enough to flush and compact several times.
fn fixed_workload() -> Vec<Op> {
    let mut ops = Vec::new();
    let mut x: u32 = 12345;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    for i in 0..600u32 {
        let r = next();
        let k = (r % 250) as u16;
        ops.push(match i % 50 {
            10 => Op::TakeSnapshot,
            25 => Op::Flush,
            40 => Op::CheckSnapshots,
            49 => Op::CompactAll,
            _ if r % 7 == 0 => Op::Delete(k),
            _ if r % 29 == 0 => Op::DeleteRange(k, k + (r >> 20) as u16 % 40),
            _ => Op::Put(k, vec![(r >> 8) as u8; 50 + (r % 400) as usize]),
        });
        if i == 300 {
            ops.push(Op::Reopen);
        }
    }
    ops
}

#[test]
fn every_background_mode_combination_passes_the_same_workload() {
    let ops = fixed_workload();
    for cr in WRITE_MODES {
        for cw in WRITE_MODES {
            for fw in WRITE_MODES {
                let d = common::dir();
                let opts = options([cr, cw, fw, AccessMode::Buffered, AccessMode::Buffered]);
                run(d.path(), &opts, &ops);
            }
        }
    }
}

#[test]
fn tmpfs_works_under_auto_and_refuses_explicit_direct() {
    let Some(d) = skip::tmpfs_dir() else {
        return;
    };
    let opts = options([AccessMode::Auto; 5]);
    run(d.path(), &opts, &fixed_workload()[..200]);
    let db = Db::open(d.path(), opts).unwrap();
    assert!(db
        .stats()
        .io_modes
        .iter()
        .all(|(_, m)| *m == quietkv::EffectiveMode::Buffered));
    drop(db);

    let e = Db::open(
        d.path(),
        Options::default().io_mode(IoClass::CompactionWrite, AccessMode::Direct),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotSupported);
    assert!(e.to_string().contains("tmpfs"), "{e}");
}
