//! What each mode leaves in the page cache, measured with cachestat/mincore
//! on the real kernel: direct and dontcache leave (almost) nothing, buffered
//! leaves (almost) everything.

#[path = "support/skip.rs"]
mod skip;

#[path = "support/disk_dir.rs"]
mod disk_dir;

use disk_dir::disk_dir;
use quietio::{residency, AccessMode, IoClass, IoEnv, IoOptions};

const SIZE: usize = 64 << 20;

#[test]
fn residency_after_write_and_read_per_mode() {
    let d = disk_dir();
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
    let d = disk_dir();
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

/// A direct sequential reader can tell which of the ranges it read were
/// already cached (hot for someone else); a buffered one declines, since its
/// own readahead would fill the cache ahead of the check.
#[test]
fn direct_reader_reports_what_was_cached_before_it() {
    let d = disk_dir();
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    if !env.capabilities().direct.supported {
        skip::skip(&format!("no O_DIRECT under {}", d.path().display()));
        return;
    }
    const LEN: usize = 8 << 20;
    let p = d.path().join("hot");
    std::fs::write(&p, vec![7u8; LEN]).unwrap();
    quietio::evict_file(&p).unwrap();
    // Make [3 MiB, 3 MiB + 16 KiB) hot with a buffered read.
    let hot = 3u64 << 20;
    let f = std::fs::File::open(&p).unwrap();
    let mut buf = vec![0u8; 16 << 10];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, hot).unwrap();
    // Readahead may have pulled in more after it; nothing before it.
    let mut r = env
        .open_sequential_with_mode(&p, IoClass::CompactionRead, AccessMode::Direct)
        .unwrap();
    assert!(r.track_page_cache());
    let mut seen_hot = Vec::new();
    let mut block = vec![0u8; 4096];
    let mut off = 0u64;
    while off < LEN as u64 {
        r.read_exact(&mut block).unwrap();
        if r.was_cached(off, 4096) {
            seen_hot.push(off);
        }
        if off == hot + 4096 {
            // Any cached page makes a block hot: under memory pressure the
            // kernel evicts a hot block's pages one by one, and requiring
            // all of them cached misses about half of a hot set (and
            // doubles the tail latency of the reads it serves). The price
            // is a neighbour or two warmed.
            assert!(r.was_cached(hot - 2048, 4096), "partly cached block missed");
            assert!(r.was_cached(hot + 2048, 4096), "unaligned hot block missed");
        }
        off += 4096;
    }
    assert!(
        (hot..hot + (16 << 10))
            .step_by(4096)
            .all(|o| seen_hot.contains(&o)),
        "hot blocks not seen: {seen_hot:?}"
    );
    assert!(
        seen_hot.iter().all(|&o| o >= hot),
        "cold block seen as hot: {seen_hot:?}"
    );
    assert!(seen_hot.len() < 256 + 4, "{} hot blocks", seen_hot.len());
    assert!(!r.was_cached(0, 4096), "offset 0 was cold");

    let mut b = env
        .open_sequential_with_mode(&p, IoClass::CompactionRead, AccessMode::Buffered)
        .unwrap();
    assert!(!b.track_page_cache());
    b.read_exact(&mut block).unwrap();
    assert!(!b.was_cached(0, 4096));
}

/// Mapped user reads are point reads: a fault must bring in about the page
/// it touches, not the kernel's read-around window (MADV_RANDOM).
#[test]
fn mmap_point_reads_do_not_read_around() {
    let d = disk_dir();
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    if env.capabilities().filesystem == "tmpfs" {
        skip::skip("tmpfs pages are always resident");
        return;
    }
    let p = d.path().join("mapped");
    std::fs::write(&p, vec![7u8; 16 << 20]).unwrap();
    std::fs::File::open(&p).unwrap().sync_all().unwrap();
    quietio::evict_file(&p).unwrap();
    if residency(&p).unwrap().cached > 0 {
        skip::skip("cannot evict the file from the page cache here");
        return;
    }
    let r = env
        .open_random_with_mode(&p, IoClass::UserRead, AccessMode::Mmap)
        .unwrap();
    let mut buf = [0u8; 4096];
    // 64 reads 256 KiB apart: with read-around each would pull in 128 KiB
    // or more (2,048+ pages in all); without it, about one page each.
    for i in 0..64u64 {
        r.read_exact_at(i * (256 << 10) + 100, &mut buf[..100])
            .unwrap();
        assert_eq!(buf[0], 7);
    }
    let pages = residency(&p).unwrap().cached;
    assert!(
        pages <= 64 * 4,
        "{pages} pages cached after 64 mapped point reads"
    );
}
