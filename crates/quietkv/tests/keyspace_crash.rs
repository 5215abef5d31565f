//! Power cuts during work on several keyspaces: every image the fault
//! layer writes at a sync point (unsynced changes dropped, kept, or a
//! random mix) must open, hold every synced batch acknowledged before the
//! cut, show each batch across keyspaces whole or not at all, and show a
//! keyspace being dropped either whole or gone (and after the drop was
//! acknowledged, gone, its tables deleted at open).

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use quietio::fault::{CutPolicy, FaultLayer, SyncPoint};
use quietkv::{Db, KeyspaceOptions, Options, WriteBatch, WriteOptions};

const BATCHES: u64 = 48;
const DROP_AT: u64 = 24;
const NAMES: [&str; 4] = ["default", "a", "b", "c"];

#[derive(Default)]
struct Progress {
    /// Synced batches acknowledged.
    acked: AtomicU64,
    /// Batches whose write has started.
    issued: AtomicU64,
    /// 1 once `drop_keyspace("c")` returned.
    dropped: AtomicU64,
    /// 1 once the keyspaces were created.
    created: AtomicU64,
}

struct Image {
    dir: PathBuf,
    point: String,
    lo: u64,
    hi: u64,
    dropped: bool,
    created: bool,
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn value(name: &str, i: u64) -> Vec<u8> {
    format!("{name}-{i}-").repeat(20).into_bytes()
}

fn options() -> Options {
    // Small WAL segments: every image holds the WALs' allocated size, and
    // there are hundreds of images.
    Options::default()
        .memtable_size(32 << 10)
        .wal_segment_size(16 << 10)
        .background_threads(1)
}

fn workload(db: &Db, progress: &Progress) {
    let ks: Vec<_> = NAMES[1..]
        .iter()
        .map(|n| db.keyspace(n, KeyspaceOptions::default()).unwrap())
        .collect();
    progress.created.store(1, Ordering::SeqCst);
    for i in 0..BATCHES {
        let mut batch = WriteBatch::new();
        batch.put(key(i), value("default", i)).unwrap();
        for (n, k) in NAMES[1..].iter().zip(&ks) {
            if *n == "c" && i >= DROP_AT {
                continue;
            }
            batch.put_in(k, key(i), value(n, i)).unwrap();
        }
        progress.issued.store(i + 1, Ordering::SeqCst);
        db.write(batch, WriteOptions { sync: true }).unwrap();
        progress.acked.store(i + 1, Ordering::SeqCst);
        match i {
            8 => ks[0].flush().unwrap(),
            16 => ks[2].flush().unwrap(),
            20 => ks[1].compact_all().unwrap(),
            x if x == DROP_AT - 1 => {
                db.drop_keyspace("c").unwrap();
                progress.dropped.store(1, Ordering::SeqCst);
            }
            36 => db.flush().unwrap(),
            _ => {}
        }
    }
}

/// Checks one image; `Err` says what is wrong.
fn check_image(img: &Image) -> Result<(), String> {
    let db = Db::open(&img.dir, options()).map_err(|e| format!("refused: {e}"))?;
    let names = db.keyspace_names();
    if !img.created {
        // Cut while the keyspaces were being created, one edit each.
        if names.len() > NAMES.len() || names[..] != NAMES[..names.len()] {
            return Err(format!("keyspaces {names:?} while creating them"));
        }
        return Ok(());
    }
    let has_c = names.iter().any(|n| n == "c");
    if names[..3] != ["default", "a", "b"] || names.len() != 3 + has_c as usize {
        return Err(format!("keyspaces {names:?}"));
    }
    if img.dropped && has_c {
        return Err("keyspace c is back after its drop was acknowledged".into());
    }
    let mut present = Vec::new();
    for i in 0..BATCHES {
        let mut seen = Vec::new();
        for n in NAMES {
            if n == "c" && (!has_c || i >= DROP_AT) {
                continue;
            }
            let ks = db.keyspace(n, KeyspaceOptions::default()).unwrap();
            let got = ks.get(key(i)).map_err(|e| e.to_string())?;
            match got {
                None => seen.push(false),
                Some(v) if v == value(n, i) => seen.push(true),
                Some(_) => return Err(format!("{n}: batch {i} has a wrong value")),
            }
        }
        if seen.iter().any(|&s| s != seen[0]) {
            return Err(format!("batch {i} is only partly there: {seen:?}"));
        }
        present.push(seen[0]);
    }
    let m = present.iter().take_while(|&&p| p).count() as u64;
    if present[m as usize..].iter().any(|&p| p) {
        return Err(format!("batches after {m} are there but {m} is not"));
    }
    if m < img.lo || m > img.hi {
        return Err(format!("{m} batches, expected {}..={}", img.lo, img.hi));
    }
    // Open deleted every table no keyspace has (a dropped one's).
    db.wait_idle().map_err(|e| e.to_string())?;
    let live: usize = names
        .iter()
        .map(|n| {
            let ks = db.keyspace(n, KeyspaceOptions::default()).unwrap();
            ks.stats()
                .unwrap()
                .levels
                .iter()
                .map(|l| l.files)
                .sum::<usize>()
        })
        .sum();
    let on_disk = common::tables(&img.dir).len();
    if on_disk != live {
        return Err(format!("{on_disk} tables on disk, {live} live"));
    }
    Ok(())
}

#[test]
fn batches_across_keyspaces_and_drops_survive_power_cuts_at_every_sync_point() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db_dir = root.path().join("db");
    let images_dir = root.path().join("images");
    std::fs::create_dir_all(&images_dir).unwrap();
    let layer = FaultLayer::new(&db_dir).unwrap();
    let progress = Arc::new(Progress::default());
    let images: Arc<Mutex<Vec<Image>>> = Arc::default();
    let take = {
        let (progress, images, images_dir) = (progress.clone(), images.clone(), images_dir.clone());
        move |l: &FaultLayer, index: u64, point: String| {
            let lo = progress.acked.load(Ordering::SeqCst);
            let dropped = progress.dropped.load(Ordering::SeqCst) == 1;
            let created = progress.created.load(Ordering::SeqCst) == 1;
            let mut taken = Vec::new();
            for (i, policy) in [CutPolicy::DropUnsynced, CutPolicy::Random(index * 31 + 7)]
                .into_iter()
                .enumerate()
            {
                let dir = images_dir.join(format!("cut-{index}-{i}"));
                l.power_cut_image(&dir, policy).unwrap();
                taken.push(Image {
                    dir,
                    point: format!("{point} ({policy:?})"),
                    lo,
                    hi: 0,
                    dropped,
                    created,
                });
            }
            let hi = progress.issued.load(Ordering::SeqCst);
            for t in &mut taken {
                t.hi = hi;
            }
            images.lock().unwrap().extend(taken);
        }
    };
    let hook_take = take.clone();
    layer.set_sync_hook(Some(Arc::new(move |l: &FaultLayer, p: &SyncPoint| {
        hook_take(l, p.index, format!("#{} {} {}", p.index, p.kind, p.name));
    })));
    let mut opts = options();
    opts.fault_layer = Some(layer.clone());
    let db = Db::open(&db_dir, opts).unwrap();
    workload(&db, &progress);
    db.close().unwrap();
    layer.set_sync_hook(None);
    take(&layer, layer.sync_points(), "after close".into());

    let images = std::mem::take(&mut *images.lock().unwrap());
    assert!(images.len() > 100, "only {} images", images.len());
    let mut violations = Vec::new();
    for img in &images {
        match check_image(img) {
            Err(v) => violations.push(format!("{}: {v} [{}]", img.point, img.dir.display())),
            // Kept for a look if it failed, else not taking disk space.
            Ok(()) => std::fs::remove_dir_all(&img.dir).unwrap(),
        }
    }
    let dropped_images = images.iter().filter(|i| i.dropped).count();
    eprintln!(
        "{} images checked, {} after the drop was acknowledged",
        images.len(),
        dropped_images
    );
    assert!(dropped_images > 10 && dropped_images < images.len() - 10);
    if !violations.is_empty() {
        let _ = root.keep();
        let shown = violations.len().min(30);
        panic!(
            "{} violations:\n{}",
            violations.len(),
            violations[..shown].join("\n")
        );
    }
}
