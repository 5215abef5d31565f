//! The fault layer under real writers: every write path (buffered,
//! dontcache, fadvise, O_DIRECT with blocking calls and with io_uring
//! write-behind) is recorded in the shadow model byte for byte, syncs make
//! it durable, and injected faults reach the writer as kernel errors would.

use std::path::Path;
use std::sync::{Arc, Mutex};

use quietio::fault::{CutPolicy, Fault, FaultLayer, FaultPlan, OpKind, SyncPoint};
use quietio::{AccessMode, IoClass, IoEngine, IoEnv, IoOptions};

#[path = "support/skip.rs"]
mod skip;

#[path = "support/disk_dir.rs"]
mod disk_dir;
use disk_dir::disk_dir;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// (label, mode, engine) for every write path the machine has.
fn write_paths(dir: &Path) -> Vec<(&'static str, AccessMode, IoEngine)> {
    let env = IoEnv::open(dir, IoOptions::default()).unwrap();
    let mut v = vec![
        ("buffered", AccessMode::Buffered, IoEngine::Sync),
        ("fadvise", AccessMode::Fadvise, IoEngine::Sync),
    ];
    if env.capabilities().dontcache.supported {
        v.push(("dontcache", AccessMode::DontCache, IoEngine::Sync));
    } else {
        skip::skip("RWF_DONTCACHE does not work here");
    }
    if env.capabilities().direct_unusable_reason(true).is_none() {
        v.push(("direct-sync", AccessMode::Direct, IoEngine::Sync));
        if quietio::uring_unavailable_reason().is_none() {
            v.push(("direct-uring", AccessMode::Direct, IoEngine::Uring));
        } else {
            skip::skip("io_uring unavailable");
        }
    } else {
        skip::skip("O_DIRECT unusable here");
    }
    v
}

fn env_with(dir: &Path, engine: IoEngine, layer: &Arc<FaultLayer>) -> IoEnv {
    IoEnv::open(
        dir,
        IoOptions {
            direct_write_buffer_size: 8192,
            fadvise_chunk_size: 8192,
            io_engine: engine,
            io_depth: 4,
            ..IoOptions::default()
        },
    )
    .unwrap()
    .with_fault_layer(Some(layer.clone()))
}

#[test]
fn every_write_path_is_recorded_and_only_synced_bytes_survive_a_cut() {
    let root = disk_dir();
    for (label, mode, engine) in write_paths(root.path()) {
        let dir = root.path().join(label);
        let layer = FaultLayer::new(&dir).unwrap();
        let env = env_with(&dir, engine, &layer);
        let path = env.dir().join("f");
        let mut w = env
            .create_with_mode(&path, IoClass::CompactionWrite, mode)
            .unwrap();
        // Several buffers (write-behind in flight), an odd tail (the direct
        // writer's padded, rewritten last block), a sync, then more.
        let first = pattern(3 * 8192 + 1000, 1);
        w.write_all(&first).unwrap();
        w.sync().unwrap();
        env.sync_dir().unwrap();
        let second = pattern(5000, 2);
        w.write_all(&second).unwrap();
        w.flush_all().unwrap();
        let mut all = first.clone();
        all.extend_from_slice(&second);
        assert_eq!(
            layer.visible_content("f").unwrap(),
            all,
            "{label}: the shadow sees what the file holds"
        );
        assert_eq!(std::fs::read(&path).unwrap(), all, "{label}");
        assert_eq!(layer.durable_content("f").unwrap(), first, "{label}");

        let dropped = root.path().join(format!("{label}-drop"));
        layer
            .power_cut_image(&dropped, CutPolicy::DropUnsynced)
            .unwrap();
        let cut = std::fs::read(dropped.join("f")).unwrap();
        assert_eq!(cut, first, "{label}: unsynced bytes dropped");
        let kept = root.path().join(format!("{label}-keep"));
        layer
            .power_cut_image(&kept, CutPolicy::KeepUnsynced)
            .unwrap();
        assert_eq!(std::fs::read(kept.join("f")).unwrap(), all, "{label}");
        for seed in 0..8 {
            let img = root.path().join(format!("{label}-rand{seed}"));
            layer
                .power_cut_image(&img, CutPolicy::Random(seed))
                .unwrap();
            let got = std::fs::read(img.join("f")).unwrap();
            // Durable bytes are never lost; whatever follows came from a
            // real write (or is zero, where a kept write lies beyond a
            // dropped one).
            assert!(got.len() >= first.len() - 1000, "{label} seed {seed}");
            let common = got.len().min(all.len());
            for i in 0..common {
                assert!(
                    got[i] == all[i] || got[i] == 0 || i >= first.len() - 1000,
                    "{label} seed {seed}: byte {i}"
                );
            }
        }
        w.finish(true).unwrap();
        assert_eq!(layer.durable_content("f").unwrap(), all, "{label}");
    }
}

#[test]
fn a_file_whose_creation_was_not_dir_synced_is_gone_after_a_cut() {
    let root = disk_dir();
    let layer = FaultLayer::new(root.path()).unwrap();
    let env = env_with(root.path(), IoEngine::Sync, &layer);
    let a = env.dir().join("a");
    let mut w = env.create(&a, IoClass::WalWrite).unwrap();
    w.write_all(b"synced").unwrap();
    w.sync().unwrap();
    let img = root.path().join("img1");
    layer
        .power_cut_image(&img, CutPolicy::DropUnsynced)
        .unwrap();
    assert!(
        !img.join("a").exists(),
        "fdatasync does not make the name durable"
    );
    env.sync_dir().unwrap();
    env.rename(&a, &env.dir().join("b")).unwrap();
    let img = root.path().join("img2");
    layer
        .power_cut_image(&img, CutPolicy::DropUnsynced)
        .unwrap();
    assert_eq!(std::fs::read(img.join("a")).unwrap(), b"synced");
    assert!(!img.join("b").exists(), "the rename is undone");
    env.sync_dir().unwrap();
    env.remove_file(&env.dir().join("b")).unwrap();
    let img = root.path().join("img3");
    layer
        .power_cut_image(&img, CutPolicy::DropUnsynced)
        .unwrap();
    assert_eq!(std::fs::read(img.join("b")).unwrap(), b"synced");
}

#[test]
fn the_sync_hook_runs_at_every_file_and_directory_sync() {
    let root = disk_dir();
    let layer = FaultLayer::new(root.path()).unwrap();
    let env = env_with(root.path(), IoEngine::Sync, &layer);
    let seen: Arc<Mutex<Vec<SyncPoint>>> = Arc::default();
    let s2 = seen.clone();
    layer.set_sync_hook(Some(Arc::new(move |_: &FaultLayer, p: &SyncPoint| {
        s2.lock().unwrap().push(p.clone());
    })));
    let mut w = env.create(&env.dir().join("x"), IoClass::Manifest).unwrap();
    w.write_all(b"1").unwrap();
    w.sync().unwrap();
    env.sync_dir().unwrap();
    w.finish(true).unwrap();
    let kinds: Vec<(OpKind, String)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|p| (p.kind, p.name.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (OpKind::Sync, "x".to_string()),
            (OpKind::DirSync, String::new()),
            (OpKind::Sync, "x".to_string())
        ]
    );
}

/// Fails the `index`th write of a direct table file of 6 buffers and
/// returns the error the writer reported.
fn failed_direct_write(engine: IoEngine, fault: Fault, index: u64) -> Option<quietio::Error> {
    let root = disk_dir();
    let layer = FaultLayer::new(root.path()).unwrap();
    let env = env_with(root.path(), engine, &layer);
    layer.set_plan(Some(FaultPlan {
        kind: OpKind::Write,
        index,
        fault,
    }));
    let path = env.dir().join("t");
    let result = env
        .create_with_mode(&path, IoClass::CompactionWrite, AccessMode::Direct)
        .and_then(|mut w| {
            w.write_all(&pattern(6 * 8192 + 100, 3))?;
            w.finish(true)
        });
    assert_eq!(layer.fired().len(), 1, "{engine:?} {fault:?} {index}");
    let on_disk = std::fs::read(&path).unwrap();
    let want = pattern(6 * 8192 + 100, 3);
    match result {
        Ok(len) => {
            assert_eq!(len as usize, want.len());
            assert_eq!(on_disk, want);
            None
        }
        Err(e) => {
            // A strict prefix of what was written, never a hole.
            assert!(on_disk.len() < want.len(), "{engine:?}");
            assert_eq!(on_disk[..], want[..on_disk.len()], "{engine:?}");
            Some(e)
        }
    }
}

#[test]
fn injected_direct_write_faults_reach_the_writer_in_both_engines() {
    let root = disk_dir();
    let env = IoEnv::open(root.path(), IoOptions::default()).unwrap();
    if let Some(why) = env.capabilities().direct_unusable_reason(true) {
        skip::skip(&why);
        return;
    }
    let mut engines = vec![IoEngine::Sync];
    if quietio::uring_unavailable_reason().is_none() {
        engines.push(IoEngine::Uring);
    }
    for engine in engines {
        for index in [0, 2, 5] {
            let e = failed_direct_write(engine, Fault::Eio, index).expect("EIO fails");
            // The errno itself, not only its text: callers tell a full
            // disk from a broken one by it (`is_no_space`).
            assert_eq!(
                e.os_error().and_then(|e| e.raw_os_error()),
                Some(libc::EIO),
                "{engine:?} {index}: {e}"
            );
            assert!(e.file().is_some(), "{e}");
            let e = failed_direct_write(engine, Fault::Enospc, index).expect("ENOSPC fails");
            assert!(e.is_no_space(), "{engine:?} {index}: {e}");
            // A short write is continued, and the continuation finds the
            // disk full.
            let e = failed_direct_write(engine, Fault::ShortWrite, index).expect("short fails");
            assert!(e.is_no_space(), "{engine:?} {index}: {e}");
        }
    }
}

#[test]
fn a_failed_sync_is_reported_and_its_bytes_never_become_durable() {
    let root = disk_dir();
    let layer = FaultLayer::new(root.path()).unwrap();
    let env = env_with(root.path(), IoEngine::Sync, &layer);
    layer.set_plan(Some(FaultPlan {
        kind: OpKind::Sync,
        index: 0,
        fault: Fault::Eio,
    }));
    let mut w = env.create(&env.dir().join("w"), IoClass::WalWrite).unwrap();
    w.write_all(b"lost").unwrap();
    let e = w.sync().unwrap_err();
    assert!(e.to_string().contains("fdatasync failed"), "{e}");
    w.write_all(b"kept").unwrap();
    w.sync().unwrap();
    assert_eq!(layer.durable_content("w").unwrap(), b"\0\0\0\0kept");
}

#[test]
fn opens_renames_removes_truncates_and_dir_syncs_can_fail() {
    let root = disk_dir();
    let layer = FaultLayer::new(root.path()).unwrap();
    let env = env_with(root.path(), IoEngine::Sync, &layer);
    let a = env.dir().join("a");
    std::fs::write(&a, b"x").unwrap();
    for (kind, op) in [
        (OpKind::Open, "open"),
        (OpKind::Create, "create"),
        (OpKind::Rename, "rename"),
        (OpKind::DirSync, "dirsync"),
        (OpKind::Remove, "remove"),
    ] {
        layer.set_plan(Some(FaultPlan {
            kind,
            index: 0,
            fault: Fault::Eio,
        }));
        let failed = match op {
            "open" => env.open_random(&a, IoClass::UserRead).is_err(),
            "create" => env.create(&env.dir().join("c"), IoClass::WalWrite).is_err(),
            "rename" => env.rename(&a, &env.dir().join("b")).is_err(),
            "dirsync" => env.sync_dir().is_err(),
            _ => env.remove_file(&a).is_err(),
        };
        assert!(failed, "{op}");
        assert_eq!(layer.fired().len(), 1, "{op}");
        assert!(a.exists(), "{op}: a failed operation does nothing");
    }
}
