//! I/O errors at every operation. A workload runs once per access-mode
//! combination with the fault layer counting its operations per kind;
//! then, for each kind and fault (EIO, ENOSPC, a short write followed by
//! a full disk), it runs again with the Nth operation failed, for every N:
//! exhaustively for the small workload, sampled evenly for the larger one
//! (`QUIETKV_SIM_MAX_PER_KIND` indices per kind and fault, default 3; 0 =
//! every index). After each run:
//!
//! * a fault in the WAL's writes or syncs must have reached the caller
//!   (elsewhere the engine may absorb it: a failed preallocation, removal
//!   of an obsolete file or manifest rotation is retried or harmless);
//! * the directory reopened without faults holds every acknowledged write
//!   and equals the model after a prefix of the writes issued;
//! * a power cut right after (unsynced changes dropped; a failed fsync's
//!   changes are lost for good) holds every write acknowledged as synced
//!   and a prefix of the writes issued.

mod sim;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use quietio::fault::{CutPolicy, Fault, FaultLayer, FaultPlan, OpKind};
use sim::{
    check_dir, mode_sets, options_for, run, small_workload, states, workload, Progress, Step,
    Verdict,
};

fn faults_for(kind: OpKind) -> &'static [Fault] {
    match kind {
        OpKind::Write => &[Fault::Eio, Fault::Enospc, Fault::ShortWrite],
        OpKind::Sync | OpKind::Create | OpKind::Fallocate => &[Fault::Eio, Fault::Enospc],
        _ => &[Fault::Eio],
    }
}

/// `count` indices, or at most `max` of them spread evenly (first and
/// last included).
fn indices(count: u64, max: u64) -> Vec<u64> {
    if max == 0 || count <= max {
        return (0..count).collect();
    }
    let mut v: Vec<u64> = (0..max).map(|i| i * (count - 1) / (max - 1)).collect();
    v.dedup();
    v
}

#[derive(Default, Debug)]
struct Tally {
    runs: u64,
    fired: u64,
    surfaced: u64,
    absorbed: u64,
    not_reached: u64,
}

/// Every operation of the small workload, in every mode, with every fault.
#[test]
fn every_io_error_in_a_small_workload_is_reported_or_absorbed_and_loses_nothing() {
    enumerate_errors(&small_workload(), 0);
}

/// The larger workload (more WAL switches, manifest rotations and
/// compactions), sampled: `QUIETKV_SIM_MAX_PER_KIND` indices per kind and
/// fault (default 3; 0 = every index, about half an hour).
#[test]
fn injected_io_errors_in_the_larger_workload_are_reported_or_absorbed_and_lose_nothing() {
    let max: u64 = std::env::var("QUIETKV_SIM_MAX_PER_KIND")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    enumerate_errors(&workload(), max);
}

fn enumerate_errors(steps: &[Step], max: u64) {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let model = states(steps);
    let mut violations = Vec::new();
    let mut lines = Vec::new();
    let mut run_no = 0u64;
    // With WAL recycling only for the two kinds of WAL writer (system
    // calls, a mapping): every set runs recycled in `power_cut.rs`, and
    // each set here costs a run per operation.
    let sets = mode_sets(root.path()).into_iter().filter(|s| {
        s.wal_recycle_count == 0 || matches!(s.name, "buffered-recycle" | "mmap-wal-recycle")
    });
    for set in sets {
        let opts = options_for(&set);
        // Count the operations of a clean run.
        let counts = {
            let dir = root.path().join(format!("{}-count", set.name));
            let layer = FaultLayer::new(&dir).unwrap();
            let mut o = opts.clone();
            o.fault_layer = Some(layer.clone());
            let end = run(&dir, &o, steps, &Progress::default());
            assert!(end.error.is_none(), "{}: {:?}", set.name, end.error);
            std::fs::remove_dir_all(&dir).unwrap();
            layer.counts()
        };
        let mut tally: BTreeMap<(OpKind, &str), Tally> = BTreeMap::new();
        for kind in OpKind::ALL {
            for &fault in faults_for(kind) {
                for index in indices(counts.get(kind), max) {
                    run_no += 1;
                    let dir = root.path().join(format!("run-{run_no}"));
                    let layer = FaultLayer::new(&dir).unwrap();
                    let plan = FaultPlan { kind, index, fault };
                    layer.set_plan(Some(plan));
                    let mut o = opts.clone();
                    o.fault_layer = Some(layer.clone());
                    let progress = Progress::default();
                    let end = run(&dir, &o, steps, &progress);
                    let t = tally.entry((kind, fault.name())).or_default();
                    t.runs += 1;
                    let fired = layer.fired();
                    layer.set_plan(None);
                    let label = format!("{} {kind} #{index} {}", set.name, fault.name());
                    let Some(f) = fired.first() else {
                        // The run took another path (background timing).
                        t.not_reached += 1;
                        std::fs::remove_dir_all(&dir).unwrap();
                        continue;
                    };
                    t.fired += 1;
                    match &end.error {
                        Some((_, e)) => {
                            t.surfaced += 1;
                            if e.file().is_none() && e.message().is_empty() {
                                violations.push(format!("{label}: an unclear error: {e}"));
                            }
                        }
                        None => {
                            t.absorbed += 1;
                            let wal = f.name.ends_with(".log");
                            if wal && matches!(kind, OpKind::Write | OpKind::Sync) {
                                violations.push(format!(
                                    "{label}: the WAL {} failed but no call reported it",
                                    f.name
                                ));
                            }
                        }
                    }
                    let (durable, acked, issued) = (
                        progress.durable.load(Ordering::SeqCst),
                        progress.acked.load(Ordering::SeqCst),
                        progress.issued.load(Ordering::SeqCst),
                    );
                    // A power cut after the error, then the directory as
                    // the running system left it.
                    let image = root.path().join(format!("run-{run_no}-cut"));
                    layer
                        .power_cut_image(&image, CutPolicy::DropUnsynced)
                        .unwrap();
                    for (what, d, lo) in [("power cut", &image, durable), ("reopen", &dir, acked)] {
                        match check_dir(d, &model, lo, issued) {
                            Ok(Verdict::Prefix(_)) => {}
                            Ok(Verdict::Corruption(e)) => violations
                                .push(format!("{label} in {}: {what} refused: {e}", f.name)),
                            Err(v) => violations.push(format!(
                                "{label} in {} ({:?}): {what}: {v}",
                                f.name,
                                end.error.as_ref().map(|(s, e)| format!("{s}: {e}"))
                            )),
                        }
                    }
                    if violations.is_empty() {
                        std::fs::remove_dir_all(&dir).unwrap();
                        std::fs::remove_dir_all(&image).unwrap();
                    }
                }
            }
        }
        for ((kind, fault), t) in &tally {
            let line = format!(
                "{} {kind} ({} counted) {fault}: {} runs, {} fired ({} reported to the caller, {} absorbed), {} not reached",
                set.name,
                counts.get(*kind),
                t.runs,
                t.fired,
                t.surfaced,
                t.absorbed,
                t.not_reached
            );
            eprintln!("{line}");
            lines.push(line);
        }
    }
    for l in &lines {
        println!("{l}");
    }
    sim::panic_on_violations(root, &violations, "directories", 40);
}

/// Regression: a flush whose manifest edit fails to sync must not delete
/// its table. The edit's bytes may already be in the manifest (the write
/// went through, only the fdatasync failed), so the next open reads an
/// edit naming the table; deleting it made the database unopenable
/// ("table ... is listed in the manifest but missing").
#[test]
fn a_flush_whose_manifest_sync_fails_keeps_its_table() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = sim::base_options();
    let work = |dir: &std::path::Path, layer: &std::sync::Arc<FaultLayer>| {
        let mut o = opts.clone();
        o.fault_layer = Some(layer.clone());
        let db = quietkv::Db::open(dir, o)?;
        db.put(b"a", b"1")?;
        db.flush()?;
        db.close()
    };
    // Find the index of the manifest sync that installs the flush: the
    // first manifest sync after the first table sync.
    let names: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let dir = root.path().join("count");
    let layer = FaultLayer::new(&dir).unwrap();
    {
        let names = names.clone();
        layer.set_sync_hook(Some(std::sync::Arc::new(
            move |_: &FaultLayer, p: &quietio::fault::SyncPoint| {
                if p.kind == OpKind::Sync {
                    names.lock().unwrap().push(p.name.clone());
                }
            },
        )));
    }
    work(&dir, &layer).unwrap();
    let names = names.lock().unwrap().clone();
    let table = names.iter().position(|n| n.ends_with(".sst")).unwrap();
    let index = (table..names.len())
        .find(|&i| names[i].starts_with("MANIFEST"))
        .unwrap() as u64;

    let dir = root.path().join("fail");
    let layer = FaultLayer::new(&dir).unwrap();
    layer.set_plan(Some(FaultPlan {
        kind: OpKind::Sync,
        index,
        fault: Fault::Eio,
    }));
    let e = work(&dir, &layer).unwrap_err();
    assert_eq!(layer.fired().len(), 1, "{e}");
    assert!(
        layer.fired()[0].name.starts_with("MANIFEST"),
        "{:?}",
        layer.fired()
    );
    let db = quietkv::Db::open(&dir, sim::base_options()).unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}
