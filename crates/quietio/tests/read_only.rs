//! `IoEnv::open_read_only`: a directory that must not (or cannot) be
//! written is probed through an existing file, reads work in every read
//! mode the probe allows, and nothing is ever created in it.

#[path = "support/skip.rs"]
mod skip;

#[path = "support/ro_mount.rs"]
mod ro_mount;

#[path = "support/disk_dir.rs"]
mod disk_dir;

use std::fs;
use std::path::{Path, PathBuf};

use disk_dir::disk_dir;
use quietio::{AccessMode, ClassModes, EffectiveMode, ErrorKind, IoClass, IoEnv, IoOptions};

fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn user_reads(mode: AccessMode) -> IoOptions {
    let mut modes = ClassModes::default();
    modes.set(IoClass::UserRead, mode);
    // A write class set to something a read-only directory cannot do must
    // not fail the open: nothing is written.
    modes.set(IoClass::CompactionWrite, AccessMode::Direct);
    IoOptions {
        modes,
        ..IoOptions::default()
    }
}

#[test]
fn reads_every_mode_and_creates_nothing() {
    let d = disk_dir();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    let file = d.path().join("data");
    fs::write(&file, &data).unwrap();
    let before = listing(d.path());
    for (mode, effective) in [
        (AccessMode::Buffered, EffectiveMode::Buffered),
        (AccessMode::Direct, EffectiveMode::Direct),
        (AccessMode::DontCache, EffectiveMode::DontCache),
        (AccessMode::Mmap, EffectiveMode::Mmap),
    ] {
        let env = IoEnv::open_read_only(d.path(), &file, user_reads(mode)).unwrap();
        assert!(env.is_read_only());
        assert_eq!(env.mode(IoClass::UserRead), effective);
        // Nothing was allocated to find out: fallocate is not claimed.
        assert!(!env.capabilities().fallocate.supported);
        let r = env.open_random(&file, IoClass::UserRead).unwrap();
        assert_eq!(
            r.read_vec(1000, 5000).unwrap(),
            &data[1000..6000],
            "{mode:?}"
        );
        let e = match env.create(&d.path().join("new"), IoClass::FlushWrite) {
            Ok(_) => panic!("created a file in a read-only environment"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(env.sync_dir().is_err());
    }
    assert_eq!(
        listing(d.path()),
        before,
        "a read-only environment wrote to the directory"
    );
}

/// A read-only bind mount: the normal probe cannot create its probe file,
/// the read-only one works.
#[test]
fn works_on_a_read_only_mount() {
    if quietio::sys::effective_uid() != 0 {
        skip::skip("bind mounts need root");
        return;
    }
    let d = disk_dir();
    let src = d.path().join("src");
    let ro = d.path().join("ro");
    fs::create_dir_all(&src).unwrap();
    fs::create_dir_all(&ro).unwrap();
    fs::write(src.join("data"), b"hello, read-only world").unwrap();
    let _guard = ro_mount::RoBindMount::new(&src, &ro);

    let e = IoEnv::open(&ro, IoOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    let env = IoEnv::open_read_only(&ro, &ro.join("data"), IoOptions::default()).unwrap();
    let r = env
        .open_random(&ro.join("data"), IoClass::UserRead)
        .unwrap();
    assert_eq!(r.read_vec(0, 5).unwrap(), b"hello");
}
