//! Power cuts at every sync point. The workload runs once per access-mode
//! combination with the fault layer under the engine; just before every
//! file sync and directory sync the layer writes power-cut images (unsynced
//! changes dropped; kept; and one random mix of kept, dropped and torn
//! writes with a random prefix of the unsynced name changes). Each image is
//! then opened with a clean environment and must hold every write
//! acknowledged as synced (and all before it) and equal the model after a
//! prefix of the writes issued. Refusing to open is a violation too: the
//! images are what a power cut leaves a correct engine, not damage. A
//! SIGKILL test cannot show this: the page cache survives a kill, not a
//! power cut.
//!
//! `QUIETKV_SIM_SEEDS=n` takes n random cuts per sync point instead of 1.

mod sim;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quietio::fault::{CutPolicy, FaultLayer, OpKind, SyncPoint};
use quietkv::{Db, Options};
use sim::{
    check_dir, mode_sets, options_for, recycle_workload, states, workload, Progress, RunEnd, Step,
    Verdict,
};

struct Cut {
    dir: PathBuf,
    point: String,
    policy: CutPolicy,
    lo: usize,
    hi: usize,
}

fn policies(point: u64, seeds: u64) -> Vec<CutPolicy> {
    let mut v = vec![CutPolicy::DropUnsynced, CutPolicy::KeepUnsynced];
    v.extend((0..seeds).map(|s| CutPolicy::Random(point * 7919 + s)));
    v
}

fn take_cuts(
    layer: &FaultLayer,
    root: &Path,
    point: &str,
    tag: u64,
    progress: &Progress,
    seeds: u64,
) -> Vec<Cut> {
    // Read `lo` before the image and `hi` after: a write acknowledged
    // meanwhile is only less required, and none issued later can be in it.
    let lo = progress.durable.load(Ordering::SeqCst);
    let mut cuts = Vec::new();
    for (i, policy) in policies(tag, seeds).into_iter().enumerate() {
        let dir = root.join(format!("cut-{tag}-{i}"));
        layer.power_cut_image(&dir, policy).unwrap();
        cuts.push(Cut {
            dir,
            point: point.to_string(),
            policy,
            lo,
            hi: 0,
        });
    }
    let hi = progress.issued.load(Ordering::SeqCst);
    for c in &mut cuts {
        c.hi = hi;
    }
    cuts
}

#[test]
fn every_sync_point_of_the_workload_survives_a_power_cut_in_every_mode() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sets = mode_sets(root.path());
    check_power_cuts(root, sets, &workload(), 1);
}

/// A full compaction in slices under power cuts: every image, including
/// the ones cut between slices, opens to a prefix of the writes. Two mode
/// sets (buffered, and direct I/O through io_uring) keep it short.
#[test]
fn sliced_full_compactions_survive_a_power_cut_at_every_sync_point() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sets: Vec<_> = mode_sets(root.path())
        .into_iter()
        .filter(|s| s.wal_recycle_count == 0 && (s.name == "buffered" || s.name == "direct-uring"))
        .collect();
    assert!(!sets.is_empty());
    // The workload does run in slices.
    let plain = root.path().join("plain");
    let steps = sim::sliced_workload();
    let progress = Progress::default();
    let end = sim::run(&plain, &sim::base_options(), &steps, &progress);
    assert!(end.error.is_none(), "{:?}", end.error);
    let db = quietkv::Db::open(&plain, sim::base_options()).unwrap();
    db.compact_all().unwrap();
    assert!(
        db.stats().compaction.manual_slices >= 3,
        "{}",
        db.stats().compaction.manual_slices
    );
    drop(db);
    check_power_cuts(root, sets, &steps, 0);
}

/// WAL recycling under power cuts: a workload of long and short WAL lives
/// (each ended by a flush or a full compaction, with deletes between) so
/// that WAL switches reuse kept files again and again, some of which held
/// more than their new life writes; every mode set with recycling on.
#[test]
fn recycled_wals_survive_a_power_cut_at_every_sync_point() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sets: Vec<_> = mode_sets(root.path())
        .into_iter()
        .filter(|s| s.wal_recycle_count > 0)
        .collect();
    check_power_cuts(root, sets, &recycle_workload(), 3);
}

/// Waits until `db` keeps a WAL file for reuse. The WAL a flush makes
/// obsolete is kept after the flush returns, on the flush thread, so a
/// WAL switch right after it may find none; a busy machine makes that
/// likelier. A minute is far more than the keeping takes.
fn wait_for_a_kept_wal(db: &Db) {
    let started = Instant::now();
    while db.stats().wal_files_kept == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no WAL was kept for reuse within a minute of a flush"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `sim::run`, except that with WAL recycling on every flush and full
/// compaction (whose flush switches the WAL) but the first after an open
/// waits for the WAL the previous one made obsolete to be kept, so that
/// its switch surely reuses a file, whatever the timing of the threads.
fn run(dir: &Path, opts: &Options, steps: &[Step], progress: &Progress) -> RunEnd {
    let recycling = opts.wal_recycle_count > 0;
    let hooks = sim::Hooks {
        before_later_flush: &|db| {
            if recycling {
                wait_for_a_kept_wal(db);
            }
        },
        ..sim::Hooks::NONE
    };
    sim::run_with_hooks(dir, opts, steps, progress, &hooks)
}

/// Runs `steps` once per mode set with power-cut images at every sync
/// point (and after the close), checks every image against the model, and
/// panics with the violations. A set with recycling on must have reused
/// at least `min_reused` WAL files (see [`run`] for why it surely does).
fn check_power_cuts(
    root: tempfile::TempDir,
    sets: Vec<sim::ModeSet>,
    steps: &[sim::Step],
    min_reused: u64,
) {
    let seeds: u64 = std::env::var("QUIETKV_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let model = states(steps);
    let mut violations = Vec::new();
    let mut summary = Vec::new();
    for set in sets {
        let db_dir = root.path().join(set.name).join("db");
        let images = root.path().join(set.name).join("images");
        std::fs::create_dir_all(&images).unwrap();
        let layer = FaultLayer::new(&db_dir).unwrap();
        let progress = Arc::new(Progress::default());
        let cuts: Arc<Mutex<Vec<Cut>>> = Arc::default();
        let kinds: Arc<Mutex<std::collections::BTreeSet<String>>> = Arc::default();
        {
            let (progress, cuts, kinds, images) = (
                progress.clone(),
                cuts.clone(),
                kinds.clone(),
                images.clone(),
            );
            layer.set_sync_hook(Some(Arc::new(move |l: &FaultLayer, p: &SyncPoint| {
                let what = match p.kind {
                    OpKind::DirSync => "dir".to_string(),
                    _ => file_class(&p.name).to_string(),
                };
                kinds.lock().unwrap().insert(what.clone());
                let name = format!("#{} {} {}", p.index, p.kind, p.name);
                let c = take_cuts(l, &images, &name, p.index, &progress, seeds);
                cuts.lock().unwrap().extend(c);
            })));
        }
        let mut opts = options_for(&set);
        opts.fault_layer = Some(layer.clone());
        let end = run(&db_dir, &opts, steps, &progress);
        assert!(end.error.is_none(), "{}: {:?}", set.name, end.error);
        if set.wal_recycle_count > 0 {
            assert!(
                end.wal_files_recycled >= min_reused,
                "{}: only {} WAL switches reused a kept file",
                set.name,
                end.wal_files_recycled
            );
        }
        layer.set_sync_hook(None);
        let points = layer.sync_points();
        // And the state after the clean close: everything acknowledged.
        let last = take_cuts(&layer, &images, "after close", points, &progress, seeds);
        cuts.lock().unwrap().extend(last);

        let kinds = kinds.lock().unwrap().clone();
        for want in ["wal", "manifest", "table", "current", "dir"] {
            assert!(
                kinds.contains(want),
                "{}: no sync point of a {want}: {kinds:?}",
                set.name
            );
        }
        let cuts = std::mem::take(&mut *cuts.lock().unwrap());
        let (mut prefixes, mut refused) = (0, 0);
        for c in &cuts {
            match check_dir(&c.dir, &model, c.lo, c.hi) {
                Ok(Verdict::Prefix(_)) => prefixes += 1,
                Ok(Verdict::Corruption(e)) => {
                    refused += 1;
                    // Every image here is one a power cut can leave after
                    // the engine did everything right, so it must open:
                    // a refusal is a clear error, but still a violation.
                    // (A reordered cut of the live WAL's unsynced tail - a
                    // later sector on disk, an earlier one not - was
                    // refused until the log reader learned that shape.)
                    violations.push(format!(
                        "{}: cut before {} ({:?}) refused: {e}",
                        set.name, c.point, c.policy
                    ));
                }
                Err(v) => violations.push(format!(
                    "{}: cut before {} ({:?}, writes {}..={}): {v} [image {}]",
                    set.name,
                    c.point,
                    c.policy,
                    c.lo,
                    c.hi,
                    c.dir.display()
                )),
            }
            if violations.is_empty() {
                let _ = std::fs::remove_dir_all(&c.dir);
            }
        }
        let line = format!(
            "{}: {} sync points, {} images checked: {} a valid prefix, {} refused as corruption; {} WAL files reused; sync points by file: {:?}",
            set.name,
            points,
            cuts.len(),
            prefixes,
            refused,
            end.wal_files_recycled,
            kinds
        );
        eprintln!("{line}");
        summary.push(line);
    }
    for s in &summary {
        println!("{s}");
    }
    sim::panic_on_violations(root, &violations, "images", 30);
}

fn file_class(name: &str) -> &'static str {
    if name.ends_with(".log") {
        "wal"
    } else if name.ends_with(".sst") {
        "table"
    } else if name.starts_with("MANIFEST") {
        "manifest"
    } else if name.starts_with("CURRENT") {
        "current"
    } else {
        "other"
    }
}
