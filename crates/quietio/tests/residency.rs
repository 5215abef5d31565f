//! What each mode leaves in the page cache, measured with cachestat/mincore
//! on the real kernel: direct and dontcache leave (almost) nothing, buffered
//! leaves (almost) everything.

use quietio::{residency, AccessMode, IoClass, IoEnv, IoOptions};

const SIZE: usize = 64 << 20;

#[test]
fn residency_after_write_and_read_per_mode() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    let caps = env.capabilities().clone();
    if caps.filesystem != "ext4" && caps.filesystem != "xfs" {
        eprintln!(
            "residency expectations are for ext4/xfs; this is {}",
            caps.filesystem
        );
        return;
    }
    let data: Vec<u8> = (0..SIZE).map(|i| (i * 31 % 251) as u8).collect();
    let mut modes = vec![AccessMode::Buffered];
    if caps.direct.supported {
        modes.push(AccessMode::Direct);
    }
    if caps.dontcache.supported {
        modes.push(AccessMode::DontCache);
    }
    for mode in modes {
        let p = d.path().join(format!("res-{mode}"));
        let mut w = env
            .create_with_mode(&p, IoClass::CompactionWrite, mode)
            .unwrap();
        w.write_all(&data).unwrap();
        w.finish(true).unwrap();
        let after_write = residency(&p).unwrap().fraction();

        quietio::evict_file(&p).unwrap();
        assert!(
            residency(&p).unwrap().fraction() < 0.01,
            "evict_file must empty the cache"
        );
        let mut r = env
            .open_sequential_with_mode(&p, IoClass::CompactionRead, mode)
            .unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0;
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            total += n;
        }
        assert_eq!(total, SIZE);
        drop(r);
        let after_read = residency(&p).unwrap().fraction();
        eprintln!("{mode}: resident after write {after_write:.3}, after read {after_read:.3}");
        match mode {
            AccessMode::Buffered => {
                assert!(after_write > 0.9, "{mode} after write {after_write}");
                assert!(after_read > 0.9, "{mode} after read {after_read}");
            }
            _ => {
                assert!(after_write < 0.05, "{mode} after write {after_write}");
                assert!(after_read < 0.05, "{mode} after read {after_read}");
            }
        }
        std::fs::remove_file(&p).unwrap();
    }
}

#[test]
fn cachestat_agrees_with_mincore() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = d.path().join("agree");
    std::fs::write(&p, vec![7u8; 4 << 20]).unwrap();
    let a = residency(&p).unwrap();
    let b = quietio::residency_mincore(&p).unwrap();
    assert_eq!(a.total_pages, b.total_pages);
    assert!(
        (a.cached as i64 - b.cached as i64).abs() <= 2,
        "{a:?} vs {b:?}"
    );
    quietio::evict_file(&p).unwrap();
    assert_eq!(quietio::residency_mincore(&p).unwrap().cached, 0);
}
