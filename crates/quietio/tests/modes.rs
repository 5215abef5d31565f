//! Every access mode against the real kernel: byte-identical files, reads at
//! odd offsets, short reads, the tmpfs fallback and bad input.

#[path = "support/skip.rs"]
mod skip;

#[path = "support/disk_dir.rs"]
mod disk_dir;

use std::path::{Path, PathBuf};

use disk_dir::disk_dir;
use quietio::{
    AccessMode, ClassModes, EffectiveMode, Engine, ErrorKind, IoClass, IoEngine, IoEnv, IoOptions,
    SeqReader, SeqWriter,
};

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The write modes this directory supports (buffered and fadvise always).
fn write_modes(env: &IoEnv) -> Vec<AccessMode> {
    let mut v = vec![AccessMode::Buffered, AccessMode::Fadvise];
    if env.capabilities().direct_unusable_reason(true).is_none() {
        v.push(AccessMode::Direct);
    }
    if env.capabilities().dontcache.supported {
        v.push(AccessMode::DontCache);
    }
    v
}

fn read_modes(env: &IoEnv) -> Vec<AccessMode> {
    let mut v = write_modes(env);
    v.push(AccessMode::Mmap);
    v
}

fn small_buffers() -> IoOptions {
    // Small buffers so multi-buffer paths run on small files too.
    IoOptions {
        direct_write_buffer_size: 8192,
        readahead_size: 8192,
        fadvise_chunk_size: 16384,
        writeback_chunk_size: 16384,
        ..IoOptions::default()
    }
}

const TAILS: [usize; 7] = [0, 1, 511, 512, 4095, 4096, 4097];

fn write_file(env: &IoEnv, path: &Path, mode: AccessMode, data: &[u8], piece: usize) -> u64 {
    let mut w = env
        .create_with_mode(path, IoClass::CompactionWrite, mode)
        .unwrap();
    for chunk in data.chunks(piece.max(1)) {
        w.write_all(chunk).unwrap();
    }
    w.finish(true).unwrap()
}

/// Appends `record` to the log `w` and to `expect` (what the log should
/// hold), then syncs it.
fn append_synced(w: &mut SeqWriter, expect: &mut Vec<u8>, record: Vec<u8>) {
    w.write_all(&record).unwrap();
    expect.extend_from_slice(&record);
    w.sync().unwrap();
}

/// Reads `r` to its end `piece` bytes at a time.
fn read_in_pieces(r: &mut SeqReader, piece: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; piece];
    loop {
        let n = r.read(&mut buf).unwrap();
        if n == 0 {
            return got;
        }
        got.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn ext4_supports_direct_and_dontcache_here() {
    // The machine this project is developed on: if this fails elsewhere, the
    // other tests still cover whatever the directory supports.
    let d = disk_dir();
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    let caps = env.capabilities();
    eprintln!("{caps:#?}");
    if caps.filesystem == "ext4" {
        assert!(caps.direct.supported, "{caps:?}");
        assert!(caps.direct.offset_align >= 512);
        assert_eq!(env.mode(IoClass::CompactionWrite), EffectiveMode::Direct);
        assert_eq!(env.mode(IoClass::CompactionRead), EffectiveMode::Direct);
        assert_eq!(env.mode(IoClass::FlushWrite), EffectiveMode::Direct);
        // fallocate works, so the WAL may be written through a mapping.
        assert!(caps.fallocate.supported, "{caps:?}");
        assert_eq!(
            env.resolve_explicit(IoClass::WalWrite, AccessMode::Mmap)
                .unwrap(),
            EffectiveMode::Mmap
        );
    }
    assert_eq!(env.mode(IoClass::UserRead), EffectiveMode::Buffered);
    assert_eq!(env.mode(IoClass::WalWrite), EffectiveMode::Buffered);
    assert_eq!(env.mode(IoClass::Manifest), EffectiveMode::Buffered);
}

#[test]
fn every_mode_writes_byte_identical_files() {
    let d = disk_dir();
    let env = IoEnv::open(d.path(), small_buffers()).unwrap();
    let mut sizes: Vec<usize> = TAILS.to_vec();
    sizes.extend([8191, 8192, 8193, 3 * 1024 * 1024 + 17]);
    for (i, size) in sizes.iter().enumerate() {
        let data = pattern(*size, i as u64);
        for mode in write_modes(&env) {
            for piece in [1000usize, 4096, 1 << 20] {
                let p = d.path().join(format!("w-{size}-{mode}-{piece}"));
                let len = write_file(&env, &p, mode, &data, piece);
                assert_eq!(len, *size as u64);
                let back = std::fs::read(&p).unwrap();
                assert_eq!(back.len(), data.len(), "{mode} size {size} piece {piece}");
                assert!(
                    back == data,
                    "{mode} size {size} piece {piece}: content differs"
                );
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
}

#[test]
fn sync_mid_file_then_continue_leaves_no_padding() {
    // WAL-like use: sync after every odd-sized record. Direct mode writes the
    // padded tail and truncates; the next write rewrites that block.
    let d = disk_dir();
    let env = IoEnv::open(d.path(), small_buffers()).unwrap();
    for mode in write_modes(&env) {
        let p = d.path().join(format!("sync-{mode}"));
        let mut w = env.create_with_mode(&p, IoClass::WalWrite, mode).unwrap();
        let mut expect = Vec::new();
        for i in 0..40 {
            append_synced(&mut w, &mut expect, pattern(37 + i * 301, i as u64));
            // After a sync the file on disk is exactly what was written.
            let on_disk = std::fs::read(&p).unwrap();
            assert_eq!(on_disk.len(), expect.len(), "{mode} after record {i}");
            assert!(on_disk == expect, "{mode} after record {i}");
        }
        assert_eq!(w.finish(true).unwrap(), expect.len() as u64);
        assert!(std::fs::read(&p).unwrap() == expect);
    }
}

/// The segment the preallocated-log tests grow their files by.
const SEGMENT: u64 = 16 << 10;

#[test]
fn segment_preallocated_logs_keep_their_allocation_until_finish() {
    // The WAL with preallocated segments: each sync leaves the file at a
    // whole number of segments, the records then zeros; finish (or drop)
    // cuts it to the records.
    use std::os::unix::fs::MetadataExt;
    let d = disk_dir();
    for (engine, _, env) in pipelined_envs(d.path(), &[2]) {
        for mode in write_modes(&env) {
            for finish in [true, false] {
                let p = d.path().join(format!("seg-{mode}-{engine:?}-{finish}"));
                let mut w = env.create_with_mode(&p, IoClass::WalWrite, mode).unwrap();
                w.preallocate_segments(SEGMENT).unwrap();
                let meta = std::fs::metadata(&p).unwrap();
                assert_eq!(meta.len(), 0, "{mode}: nothing before the first write");
                assert_eq!(meta.blocks(), 0, "{mode}: no blocks before the first write");
                let mut expect = Vec::new();
                for i in 0..30 {
                    append_synced(&mut w, &mut expect, pattern(37 + i * 301, i as u64));
                    let on_disk = std::fs::read(&p).unwrap();
                    let want = (expect.len() as u64).div_ceil(SEGMENT) * SEGMENT;
                    assert_eq!(on_disk.len() as u64, want, "{mode} after record {i}");
                    assert!(on_disk[..expect.len()] == expect[..], "{mode} record {i}");
                    assert!(
                        on_disk[expect.len()..].iter().all(|&b| b == 0),
                        "{mode} record {i}: not zeros after the records"
                    );
                }
                assert!(expect.len() as u64 > 8 * SEGMENT, "grew over segments");
                if finish {
                    assert_eq!(w.finish(true).unwrap(), expect.len() as u64);
                } else {
                    drop(w);
                }
                assert!(std::fs::read(&p).unwrap() == expect, "{mode} {finish}");
            }
        }
    }
    let env = IoEnv::open(d.path(), small_buffers()).unwrap();
    let p = d.path().join("seg-odd");
    let mut w = env
        .create_with_mode(&p, IoClass::WalWrite, AccessMode::Buffered)
        .unwrap();
    w.write_all(b"x").unwrap();
    assert!(
        w.preallocate_segments(SEGMENT).is_err(),
        "only a new writer"
    );
}

#[test]
fn an_overwritten_log_reuses_its_blocks_and_keeps_its_old_bytes_until_finish() {
    // A recycled WAL: the old file is written again from offset 0 without
    // truncation. Inside its old size nothing is allocated or extended
    // (same inode, same size); past it the file grows by segments; finish
    // cuts it to the new bytes.
    use std::os::unix::fs::MetadataExt;
    let d = disk_dir();
    for (engine, _, env) in pipelined_envs(d.path(), &[2]) {
        for mode in write_modes(&env) {
            let p = d.path().join(format!("over-{mode}-{engine:?}"));
            let old = pattern(3 * SEGMENT as usize + 1000, 1);
            let mut w = env.create_with_mode(&p, IoClass::WalWrite, mode).unwrap();
            w.preallocate_segments(SEGMENT).unwrap();
            w.write_all(&old).unwrap();
            w.finish(true).unwrap();
            let ino = std::fs::metadata(&p).unwrap().ino();

            let mut w = env
                .overwrite_with_mode(&p, IoClass::WalWrite, mode)
                .unwrap();
            assert_eq!(w.allocated(), old.len() as u64, "{mode}: old size counts");
            w.preallocate_segments(SEGMENT).unwrap();
            assert_eq!(w.allocated(), old.len() as u64, "{mode}: nothing allocated");
            let new = pattern(SEGMENT as usize + 333, 2);
            w.write_all(&new).unwrap();
            w.sync().unwrap();
            let on_disk = std::fs::read(&p).unwrap();
            let meta = std::fs::metadata(&p).unwrap();
            assert_eq!(meta.ino(), ino, "{mode}: the same file");
            assert_eq!(on_disk.len(), old.len(), "{mode}: not cut, not grown");
            assert!(on_disk[..new.len()] == new[..], "{mode}: new bytes first");
            // (A direct writer pads its last block with zeros.)
            let block_end = new.len().next_multiple_of(4096);
            assert!(
                on_disk[block_end..] == old[block_end..],
                "{mode}: the old bytes stay after them"
            );
            assert!(
                (new.len()..block_end).all(|i| on_disk[i] == old[i] || on_disk[i] == 0),
                "{mode}: old bytes or padding in the last block"
            );
            // Past the old size: a segment at a time.
            let more = pattern(3 * SEGMENT as usize, 3);
            w.write_all(&more).unwrap();
            w.sync().unwrap();
            let len = (new.len() + more.len()) as u64;
            assert_eq!(w.allocated(), len.div_ceil(SEGMENT) * SEGMENT, "{mode}");
            assert_eq!(w.finish(true).unwrap(), len);
            let mut want = new.clone();
            want.extend_from_slice(&more);
            assert!(
                std::fs::read(&p).unwrap() == want,
                "{mode}: cut to the new bytes"
            );

            // Kept allocation: finish leaves the file whole, so the next
            // life finds every block allocated.
            let mut w = env
                .overwrite_with_mode(&p, IoClass::WalWrite, mode)
                .unwrap();
            w.preallocate_segments(SEGMENT).unwrap();
            w.keep_allocation();
            w.write_all(&old).unwrap();
            let allocated = w.allocated();
            assert_eq!(allocated, len, "{mode}: the old size, nothing allocated");
            assert_eq!(w.finish(true).unwrap(), old.len() as u64);
            let on_disk = std::fs::read(&p).unwrap();
            assert_eq!(on_disk.len() as u64, allocated, "{mode}: not cut");
            assert!(on_disk[..old.len()] == old[..], "{mode}");
            let mut w = env
                .overwrite_with_mode(&p, IoClass::WalWrite, mode)
                .unwrap();
            w.preallocate_segments(SEGMENT).unwrap();
            w.keep_allocation();
            w.write_all(b"short").unwrap();
            drop(w);
            assert_eq!(
                std::fs::metadata(&p).unwrap().len(),
                allocated,
                "{mode}: drop"
            );
            assert_eq!(std::fs::metadata(&p).unwrap().ino(), ino, "{mode}");
        }
        assert!(env
            .overwrite_with_mode(
                &d.path().join("missing"),
                IoClass::WalWrite,
                AccessMode::Buffered
            )
            .is_err());
    }
}

#[test]
fn sequential_reads_in_every_mode() {
    let d = disk_dir();
    let env = IoEnv::open(d.path(), small_buffers()).unwrap();
    let mut sizes: Vec<usize> = TAILS.to_vec();
    sizes.push(1024 * 1024 + 333);
    for (i, size) in sizes.iter().enumerate() {
        let data = pattern(*size, 100 + i as u64);
        let p = d.path().join(format!("r-{size}"));
        std::fs::write(&p, &data).unwrap();
        for mode in read_modes(&env) {
            for piece in [1usize, 777, 4096, 100_000] {
                if piece == 1 && *size > 10_000 {
                    continue;
                }
                let mut r = env
                    .open_sequential_with_mode(&p, IoClass::CompactionRead, mode)
                    .unwrap();
                let got = read_in_pieces(&mut r, piece);
                assert!(got == data, "{mode} size {size} piece {piece}");
                assert_eq!(r.position(), *size as u64);
            }
            // read_exact past the end names the offset.
            let mut r = env
                .open_sequential_with_mode(&p, IoClass::CompactionRead, mode)
                .unwrap();
            let mut all = vec![0u8; *size + 1];
            let e = r.read_exact(&mut all).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Io);
            assert_eq!(e.offset(), Some(0));
        }
    }
}

#[test]
fn random_reads_at_unaligned_offsets_and_across_eof() {
    let d = disk_dir();
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    let size = 70_001usize;
    let data = pattern(size, 7);
    let p = d.path().join("rand");
    std::fs::write(&p, &data).unwrap();
    for mode in read_modes(&env) {
        let r = env
            .open_random_with_mode(&p, IoClass::UserRead, mode)
            .unwrap();
        assert_eq!(r.len(), size as u64);
        for (off, len) in [
            (0usize, 1usize),
            (1, 511),
            (511, 2),
            (4095, 4098),
            (12345, 54321),
            (size - 3, 3),
            (65536, 4096),
        ] {
            let got = r.read_vec(off as u64, len).unwrap();
            assert!(
                got[..] == data[off..off + len],
                "{mode} off {off} len {len}"
            );
        }
        // Across EOF: a short read, then nothing.
        let mut buf = vec![0u8; 100];
        assert_eq!(r.read_at(size as u64 - 10, &mut buf).unwrap(), 10, "{mode}");
        assert!(buf[..10] == data[size - 10..]);
        assert_eq!(r.read_at(size as u64, &mut buf).unwrap(), 0);
        assert_eq!(r.read_at(size as u64 + 5000, &mut buf).unwrap(), 0);
        let e = r.read_exact_at(size as u64 - 10, &mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(e.offset(), Some(size as u64 - 10));
        assert!(e.to_string().contains("rand"), "{e}");
    }
}

#[test]
fn buffered_reads_attribute_hits_and_misses() {
    let d = disk_dir();
    let env = IoEnv::open(
        d.path(),
        IoOptions {
            attribute_cache_hits: true,
            ..IoOptions::default()
        },
    )
    .unwrap();
    let p = d.path().join("hits");
    std::fs::write(&p, pattern(1 << 20, 3)).unwrap();
    quietio::evict_file(&p).unwrap();
    assert_eq!(quietio::residency(&p).unwrap().cached, 0);
    let r = env.open_random(&p, IoClass::UserRead).unwrap();
    let before = env.stats().class(IoClass::UserRead);
    let mut buf = vec![0u8; 4096];
    r.read_exact_at(200_000, &mut buf).unwrap(); // cold: miss
    r.read_exact_at(200_000, &mut buf).unwrap(); // now cached: hit
    let after = env.stats().class(IoClass::UserRead);
    assert_eq!(after.cache_misses - before.cache_misses, 1);
    assert_eq!(after.cache_hits - before.cache_hits, 1);
    assert_eq!(after.read_bytes - before.read_bytes, 8192);
    assert_eq!(after.read_ops - before.read_ops, 2);
}

/// A positional read that misses brings its own pages into the page cache
/// and no readahead around them (buffered and fadvise alike); readahead
/// comes only when asked for, and then covers the range asked.
#[test]
fn buffered_random_reads_read_no_more_than_asked_until_prefetch() {
    let d = disk_dir();
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    let p = d.path().join("random");
    std::fs::write(&p, pattern(8 << 20, 9)).unwrap();
    for mode in [AccessMode::Buffered, AccessMode::Fadvise] {
        quietio::evict_file(&p).unwrap();
        assert_eq!(quietio::residency(&p).unwrap().cached, 0);
        let r = env
            .open_random_with_mode(&p, IoClass::UserRead, mode)
            .unwrap();
        let (mut four, mut one) = (vec![0u8; 16384], vec![0u8; 4096]);
        // At twenty places 400 KiB apart, four pages, then the page after
        // them: pages cached just before a miss are what makes the kernel
        // take a miss for part of a sequential stream and read ahead.
        for i in 0..20u64 {
            let at = i * (400 << 10) + 8192;
            r.read_exact_at(at, &mut four).unwrap();
            r.read_exact_at(at + 16384, &mut one).unwrap();
        }
        let cached = quietio::residency(&p).unwrap().cached;
        assert!(
            cached <= 100,
            "{mode}: {cached} pages cached after reading 100"
        );
        // Asked for, a range is read ahead: all of it, and nothing else.
        assert!(r.prefetch(1 << 20, 1 << 20), "{mode}");
        let range = p.clone();
        let in_range = || {
            let f = std::fs::File::open(&range).unwrap();
            quietio::sys::cachestat_range(std::os::fd::AsRawFd::as_raw_fd(&f), 1 << 20, 1 << 20)
                .unwrap()
                .cache
        };
        assert_eq!(in_range(), 256, "{mode}");
    }
}

/// Counting hits costs a system call per read: off unless asked for.
#[test]
fn buffered_reads_are_not_attributed_by_default() {
    let d = disk_dir();
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    let p = d.path().join("plain");
    std::fs::write(&p, pattern(1 << 20, 5)).unwrap();
    quietio::evict_file(&p).unwrap();
    let r = env.open_random(&p, IoClass::UserRead).unwrap();
    let mut buf = vec![0u8; 4096];
    r.read_exact_at(100_000, &mut buf).unwrap();
    r.read_exact_at(100_000, &mut buf).unwrap();
    assert_eq!(buf, pattern(1 << 20, 5)[100_000..104_096]);
    let s = env.stats().class(IoClass::UserRead);
    assert_eq!((s.cache_hits, s.cache_misses), (0, 0));
    assert_eq!(s.read_ops, 2);
}

#[test]
fn buffered_writers_start_write_back_as_they_go_and_keep_the_pages() {
    let d = disk_dir();
    const CHUNK: u64 = 1 << 20;
    const BUF: usize = 64 << 10;
    let write = |name: &str, writeback_chunk_size: u64| {
        let env = IoEnv::open(
            d.path(),
            IoOptions {
                direct_write_buffer_size: BUF,
                writeback_chunk_size,
                ..IoOptions::default()
            },
        )
        .unwrap();
        let p = d.path().join(name);
        let mut w = env
            .create_with_mode(&p, IoClass::FlushWrite, AccessMode::Buffered)
            .unwrap();
        w.write_all(&pattern(8 << 20, 5)).unwrap();
        w.flush().unwrap();
        let r = quietio::residency(&p).unwrap();
        w.finish(true).unwrap();
        r
    };
    let r = write("kicked", CHUNK);
    let Some(dirty) = r.dirty else {
        skip::skip("no cachestat: dirty pages cannot be counted");
        return;
    };
    // Everything but the last chunk had its write-back started or handed
    // to io_uring, which keeps at most two such requests outstanding (a
    // third waits for the oldest to run): so at most three chunks and a
    // buffer of the eight MiB are still dirty (the kernel's own flusher
    // may have taken more).
    assert!(
        dirty <= (3 * CHUNK + BUF as u64) / 4096,
        "{dirty} pages still dirty after 8 MiB in 1 MiB chunks"
    );
    assert!(
        r.cached >= r.total_pages / 2,
        "the pages stay cached: {r:?}"
    );
    // Off: the kernel is left to it (nothing to assert about its timing;
    // the write must simply work).
    let off = write("left", 0);
    assert_eq!(off.total_pages, 2048);
}

#[test]
fn tmpfs_falls_back_to_buffered_and_refuses_explicit_direct() {
    let Some(d) = skip::tmpfs_dir() else {
        return;
    };
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    let caps = env.capabilities();
    assert_eq!(caps.filesystem, "tmpfs");
    assert!(!caps.direct.supported);
    assert!(
        caps.direct.reason.as_deref().unwrap().contains("tmpfs"),
        "{caps:?}"
    );
    for class in IoClass::ALL {
        assert_eq!(env.mode(class), EffectiveMode::Buffered, "{class}");
    }
    assert!(env.resolution(IoClass::CompactionWrite).fallback.is_some());

    let opts = IoOptions {
        modes: ClassModes::default().with(IoClass::CompactionWrite, AccessMode::Direct),
        ..IoOptions::default()
    };
    let e = IoEnv::open(d.path(), opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotSupported);
    let msg = e.to_string();
    assert!(
        msg.contains("/dev/shm") && msg.contains("tmpfs") && msg.contains("auto"),
        "{msg}"
    );

    if !caps.dontcache.supported {
        let opts = IoOptions {
            modes: ClassModes::default().with(IoClass::CompactionRead, AccessMode::DontCache),
            ..IoOptions::default()
        };
        let e = IoEnv::open(d.path(), opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotSupported);
        assert!(e.to_string().contains("RWF_DONTCACHE"), "{e}");
    }

    // Buffered files still work there.
    let p = d.path().join("f");
    let data = pattern(10_000, 1);
    let mut w = env.create(&p, IoClass::CompactionWrite).unwrap();
    w.write_all(&data).unwrap();
    w.finish(true).unwrap();
    assert!(std::fs::read(&p).unwrap() == data);
}

#[test]
fn bad_options_and_directories_are_clear_errors() {
    let d = disk_dir();
    for bad in [0usize, 1000, 4097] {
        let opts = IoOptions {
            direct_write_buffer_size: bad,
            ..IoOptions::default()
        };
        let e = IoEnv::open(d.path(), opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}");
        assert!(e.to_string().contains("direct_write_buffer_size"), "{e}");
        let opts = IoOptions {
            readahead_size: bad,
            ..IoOptions::default()
        };
        assert_eq!(
            IoEnv::open(d.path(), opts).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    let opts = IoOptions {
        modes: ClassModes::default().with(IoClass::FlushWrite, AccessMode::Mmap),
        ..IoOptions::default()
    };
    assert_eq!(
        IoEnv::open(d.path(), opts).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    let missing: PathBuf = d.path().join("missing");
    let e = IoEnv::open(&missing, IoOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains("missing"));

    let file = d.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        IoEnv::open(&file, IoOptions::default()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    // Even root cannot create files in /proc.
    let e = IoEnv::open(Path::new("/proc"), IoOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains("not writable"), "{e}");
}

#[test]
fn background_classes_share_the_rate_limiter() {
    let d = disk_dir();
    let opts = IoOptions {
        background_bytes_per_sec: 1 << 40,
        ..IoOptions::default()
    };
    let env = IoEnv::open(d.path(), opts).unwrap();
    let limiter = |class| env.file_config(class, EffectiveMode::Buffered).limiter;
    for (class, limited) in [
        (IoClass::CompactionWrite, true),
        (IoClass::CompactionRead, true),
        (IoClass::UserRead, false),
        (IoClass::WalWrite, false),
    ] {
        assert_eq!(limiter(class).is_some(), limited, "{class}");
    }
    let a = limiter(IoClass::CompactionWrite).unwrap();
    let b = limiter(IoClass::CompactionRead).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
}

#[test]
fn counters_count_bytes_per_class() {
    let d = disk_dir();
    let env = IoEnv::open(d.path(), IoOptions::default()).unwrap();
    let p = d.path().join("c");
    let mut w = env.create(&p, IoClass::FlushWrite).unwrap();
    w.write_all(&pattern(3 << 20, 1)).unwrap();
    w.finish(true).unwrap();
    let s = env.stats().class(IoClass::FlushWrite);
    assert_eq!(s.write_bytes, 3 << 20);
    // One write per full buffer, and one for the tail.
    let buffer = IoOptions::default().direct_write_buffer_size as u64;
    assert_eq!(s.write_ops, (3u64 << 20).div_ceil(buffer));
    assert_eq!(s.sync_ops, 1);
    assert_eq!(env.stats().class(IoClass::CompactionWrite).write_bytes, 0);
}

#[test]
fn every_direct_buffer_starts_on_a_page_boundary() {
    // The kernel accepts 512-aligned buffers here, but appending from one
    // that starts inside a page is several times slower: every buffer the
    // direct paths hand to the kernel must start on a page.
    let d = disk_dir();
    let env = IoEnv::open(d.path(), small_buffers()).unwrap();
    if env.capabilities().direct_unusable_reason(true).is_some() {
        skip::skip("no direct I/O here");
        return;
    }
    let before = quietio::direct_io_audit();
    let mut ios = 0u64;
    for (i, size) in [1usize, 511, 4097, 8193, 100_000].iter().enumerate() {
        let data = pattern(*size, 40 + i as u64);
        let p = d.path().join(format!("aligned-{size}"));
        // A sync after an odd-sized piece writes a padded tail mid-file.
        let mut w = env
            .create_with_mode(&p, IoClass::CompactionWrite, AccessMode::Direct)
            .unwrap();
        for piece in data.chunks(3001) {
            w.write_all(piece).unwrap();
            w.sync().unwrap();
            ios += 1;
        }
        w.finish(true).unwrap();
        let mut r = env
            .open_sequential_with_mode(&p, IoClass::CompactionRead, AccessMode::Direct)
            .unwrap();
        let mut back = vec![0u8; *size];
        r.read_exact(&mut back).unwrap();
        ios += 1;
        assert!(back == data);
        let r = env
            .open_random_with_mode(&p, IoClass::UserRead, AccessMode::Direct)
            .unwrap();
        for off in [0usize, 1, size / 3, size - 1] {
            let len = (size - off).min(777);
            assert!(r.read_vec(off as u64, len).unwrap() == data[off..off + len]);
            ios += 1;
        }
    }
    let after = quietio::direct_io_audit();
    assert!(after.ios - before.ios >= ios, "{before:?} -> {after:?}");
    // Process-wide: no test in this binary may hand the kernel a buffer off
    // a page boundary or a length off the block size.
    assert_eq!(after.off_page, 0, "{after:?}");
    assert_eq!(after.bad_length, 0, "{after:?}");
}

/// Options with small buffers and the given engine and depth.
fn pipelined(engine: IoEngine, depth: usize) -> IoOptions {
    IoOptions {
        io_engine: engine,
        io_depth: depth,
        ..small_buffers()
    }
}

/// The engines to test: both where io_uring works, else sync only.
fn engines() -> Vec<IoEngine> {
    match quietio::uring_unavailable_reason() {
        None => vec![IoEngine::Uring, IoEngine::Sync],
        Some(why) => {
            eprintln!("io_uring unavailable here ({why}); testing the sync engine only");
            vec![IoEngine::Sync]
        }
    }
}

/// An environment for each engine to test (see [`engines`]) at each of
/// `depths`, with the engine and depth it was opened with; one at a time.
fn pipelined_envs<'a>(
    dir: &'a Path,
    depths: &'a [usize],
) -> impl Iterator<Item = (IoEngine, usize, IoEnv)> + 'a {
    engines().into_iter().flat_map(move |engine| {
        depths.iter().map(move |&depth| {
            (
                engine,
                depth,
                IoEnv::open(dir, pipelined(engine, depth)).unwrap(),
            )
        })
    })
}

const DEPTHS: [usize; 4] = [1, 2, 4, 16];

#[test]
fn pipelined_writes_are_byte_identical_for_every_engine_and_depth() {
    let d = disk_dir();
    let mut sizes: Vec<usize> = TAILS.to_vec();
    sizes.extend([8192, 8193, 3 * 1024 * 1024 + 17]);
    for (engine, depth, env) in pipelined_envs(d.path(), &DEPTHS) {
        let want = if engine == IoEngine::Uring {
            Engine::Uring
        } else {
            Engine::Sync
        };
        assert_eq!(env.engine().engine, want);
        for (i, size) in sizes.iter().enumerate() {
            let data = pattern(*size, 200 + i as u64);
            for mode in write_modes(&env) {
                for piece in [1000usize, 1 << 20] {
                    let p = d
                        .path()
                        .join(format!("p-{engine}-{depth}-{size}-{mode}-{piece}"));
                    let len = write_file(&env, &p, mode, &data, piece);
                    assert_eq!(len, *size as u64);
                    let back = std::fs::read(&p).unwrap();
                    let what = format!("{engine} depth {depth} {mode} size {size} piece {piece}");
                    assert_eq!(back.len(), data.len(), "{what}");
                    assert!(back == data, "{what}: content differs");
                    std::fs::remove_file(&p).unwrap();
                }
            }
        }
    }
}

#[test]
fn pipelined_sync_mid_file_waits_for_every_write() {
    // sync() must wait for the writes in flight before the tail is written
    // and the file truncated: afterwards the file is exactly what was written.
    let d = disk_dir();
    for (engine, depth, env) in pipelined_envs(d.path(), &DEPTHS) {
        if env.capabilities().direct_unusable_reason(true).is_some() {
            return;
        }
        let p = d.path().join(format!("psync-{engine}-{depth}"));
        let mut w = env
            .create_with_mode(&p, IoClass::CompactionWrite, AccessMode::Direct)
            .unwrap();
        let mut expect = Vec::new();
        for i in 0..12 {
            append_synced(&mut w, &mut expect, pattern(5000 + i * 7919, i as u64));
            assert_eq!(w.writes_in_flight(), 0);
            assert!(
                std::fs::read(&p).unwrap() == expect,
                "{engine} {depth} record {i}"
            );
        }
        assert_eq!(w.finish(true).unwrap(), expect.len() as u64);
    }
}

#[test]
fn uring_writer_keeps_writes_in_flight_and_sync_engine_does_not() {
    let d = disk_dir();
    for (engine, _, env) in pipelined_envs(d.path(), &[4]) {
        if env.capabilities().direct_unusable_reason(true).is_some() {
            return;
        }
        let p = d.path().join(format!("inflight-{engine}"));
        let mut w = env
            .create_with_mode(&p, IoClass::CompactionWrite, AccessMode::Direct)
            .unwrap();
        // Three full 8 KiB buffers: handed to the kernel, not waited for.
        w.write_all(&pattern(3 * 8192 + 100, 1)).unwrap();
        let expect = if engine == IoEngine::Uring { 3 } else { 0 };
        assert_eq!(w.writes_in_flight(), expect, "{engine}");
        // A fifth and sixth buffer: never more than the depth in flight.
        w.write_all(&pattern(3 * 8192, 2)).unwrap();
        assert!(w.writes_in_flight() <= 4);
        w.flush_all().unwrap();
        assert_eq!(w.writes_in_flight(), 0);
        assert_eq!(w.finish(true).unwrap(), 6 * 8192 + 100);

        let mut r = env
            .open_sequential_with_mode(&p, IoClass::CompactionRead, AccessMode::Direct)
            .unwrap();
        let mut b = [0u8; 10];
        r.read_exact(&mut b).unwrap();
        // The chunk being read plus four requested ahead of it (the file
        // has seven), all four handed to the kernel before the first was
        // waited for. How many are still in flight now depends on the
        // device: a read that completed early was taken while waiting for
        // the first. The one requested after the first chunk came back has
        // not been waited for yet, so at least one is.
        if engine == IoEngine::Uring {
            assert_eq!(r.reads_requested_ahead(), 4, "{engine}");
            assert_eq!(r.most_reads_in_flight(), 4, "{engine}");
            let now = r.reads_in_flight();
            assert!((1..=4).contains(&now), "{engine}: {now} reads in flight");
        } else {
            assert_eq!(r.reads_requested_ahead(), 0, "{engine}");
            assert_eq!(r.most_reads_in_flight(), 0, "{engine}");
            assert_eq!(r.reads_in_flight(), 0, "{engine}");
        }
    }
}

#[test]
fn pipelined_reads_at_every_depth() {
    let d = disk_dir();
    let mut sizes: Vec<usize> = TAILS.to_vec();
    sizes.extend([8192, 8193, 3 * 1024 * 1024 + 17]);
    let files: Vec<(PathBuf, Vec<u8>)> = sizes
        .iter()
        .enumerate()
        .map(|(i, size)| {
            let data = pattern(*size, 300 + i as u64);
            let p = d.path().join(format!("pr-{size}"));
            std::fs::write(&p, &data).unwrap();
            (p, data)
        })
        .collect();
    for (engine, depth, env) in pipelined_envs(d.path(), &DEPTHS) {
        for mode in read_modes(&env) {
            for (p, data) in &files {
                for piece in [777usize, 100_000] {
                    let mut r = env
                        .open_sequential_with_mode(p, IoClass::CompactionRead, mode)
                        .unwrap();
                    let got = read_in_pieces(&mut r, piece);
                    let what = format!(
                        "{engine} depth {depth} {mode} size {} piece {piece}",
                        data.len()
                    );
                    assert!(got == *data, "{what}");
                    assert_eq!(r.position(), data.len() as u64, "{what}");
                    assert_eq!(r.read(&mut vec![0u8; piece]).unwrap(), 0, "{what}");
                }
                // Dropped half-way with reads in flight: nothing breaks.
                let mut r = env
                    .open_sequential_with_mode(p, IoClass::CompactionRead, mode)
                    .unwrap();
                let mut one = [0u8; 1];
                let _ = r.read(&mut one).unwrap();
                drop(r);
            }
        }
    }
}

#[test]
fn a_failed_write_fails_the_file_and_leaves_a_strict_prefix() {
    let d = disk_dir();
    for (engine, depth, env) in pipelined_envs(d.path(), &[1, 4]) {
        if env.capabilities().direct_unusable_reason(true).is_some() {
            return;
        }
        let p = d.path().join(format!("fault-{engine}-{depth}"));
        let mut cfg = env.file_config(IoClass::CompactionWrite, EffectiveMode::Direct);
        // The third 8 KiB buffer goes to an offset O_DIRECT refuses;
        // with write-behind the writes after it are in flight and land.
        let fault = 2 * 8192;
        cfg.inject_write_fault_at = Some(fault);
        let mut w = quietio::SeqWriter::create(&p, cfg).unwrap();
        let data = pattern(10 * 8192 + 300, 9);
        let mut first_err = None;
        for piece in data.chunks(3000) {
            if let Err(e) = w.write_all(piece) {
                first_err = Some(e);
                break;
            }
        }
        let what = format!("{engine} depth {depth}");
        let e = match first_err {
            Some(e) => {
                // Every later call fails too.
                assert!(w.write_all(b"x").is_err(), "{what}");
                assert!(w.finish(true).is_err(), "{what}");
                e
            }
            None => w.finish(true).unwrap_err(),
        };
        assert_eq!(e.kind(), ErrorKind::Io, "{what}: {e}");
        assert_eq!(e.offset(), Some(fault), "{what}: {e}");
        assert!(
            e.to_string().contains(&p.display().to_string()),
            "{what}: {e}"
        );
        let on_disk = std::fs::read(&p).unwrap();
        assert_eq!(
            on_disk.len() as u64,
            fault,
            "{what}: no full-length file with a hole"
        );
        assert!(on_disk[..] == data[..fault as usize], "{what}");
    }
}

#[test]
fn sync_engine_is_the_fallback_and_bad_depths_are_refused() {
    let d = disk_dir();
    // Forced by option: no ring, one request at a time, no fallback note.
    let env = IoEnv::open(d.path(), pipelined(IoEngine::Sync, 8)).unwrap();
    assert_eq!(env.engine().engine, Engine::Sync);
    assert!(env.engine().fallback.is_none());
    assert_eq!(env.effective_io_depth(), 1);
    // Auto resolves to io_uring exactly when the kernel allows it here.
    let env = IoEnv::open(d.path(), pipelined(IoEngine::Auto, 8)).unwrap();
    match quietio::uring_unavailable_reason() {
        None => {
            assert_eq!(env.engine().engine, Engine::Uring);
            assert_eq!(env.effective_io_depth(), 8);
        }
        Some(why) => {
            assert_eq!(env.engine().engine, Engine::Sync);
            assert!(env.engine().fallback.as_deref().unwrap().contains(why));
            let e = IoEnv::open(d.path(), pipelined(IoEngine::Uring, 8)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotSupported);
        }
    }
    for bad in [0usize, quietio::MAX_IO_DEPTH + 1] {
        let e = IoEnv::open(d.path(), pipelined(IoEngine::Auto, bad)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("io_depth"), "{e}");
    }
}

#[test]
fn table_writers_preallocate_ahead_and_trim_to_the_true_length() {
    let d = disk_dir();
    if quietio::uring_unavailable_reason().is_some() {
        return;
    }
    let env = IoEnv::open(d.path(), pipelined(IoEngine::Uring, 4)).unwrap();
    if env.capabilities().direct_unusable_reason(true).is_some() {
        return;
    }
    let size_on_disk = |p: &Path| std::fs::metadata(p).unwrap().len();
    let data = pattern(5 * 8192 + 77, 5);
    for class in [IoClass::CompactionWrite, IoClass::WalWrite] {
        let p = d.path().join(format!("prealloc-{class}"));
        let mut w = env.create_with_mode(&p, class, AccessMode::Direct).unwrap();
        w.write_all(&data).unwrap();
        let during = size_on_disk(&p);
        if class == IoClass::CompactionWrite {
            // Allocated ahead, so the writes in flight do not extend it.
            assert!(during > data.len() as u64, "{class}: {during}");
        } else {
            // A WAL cut short by a crash must not end in zeros.
            assert!(during <= data.len() as u64, "{class}: {during}");
        }
        w.sync().unwrap();
        assert_eq!(size_on_disk(&p), data.len() as u64, "{class} after sync");
        w.write_all(&data).unwrap();
        assert_eq!(w.finish(true).unwrap(), 2 * data.len() as u64);
        assert_eq!(
            size_on_disk(&p),
            2 * data.len() as u64,
            "{class} after finish"
        );
        let back = std::fs::read(&p).unwrap();
        assert!(back[..data.len()] == data[..] && back[data.len()..] == data[..]);
    }
}

#[test]
fn a_failed_rewrite_of_the_synced_tail_keeps_what_was_synced() {
    // WAL-like: after a sync the partial last block stays buffered and is
    // rewritten at its aligned offset by the next write. If that rewrite
    // fails, the bytes synced before it must survive.
    let d = disk_dir();
    for (engine, _, env) in pipelined_envs(d.path(), &[4]) {
        if env.capabilities().direct_unusable_reason(true).is_some() {
            return;
        }
        let p = d.path().join(format!("tail-fault-{engine}"));
        let mut cfg = env.file_config(IoClass::CompactionWrite, EffectiveMode::Direct);
        let align = env.capabilities().direct.offset_align as u64;
        let synced = pattern(5000, 11);
        let tail_block = 5000 / align * align;
        cfg.inject_write_fault_at = Some(tail_block);
        let mut w = quietio::SeqWriter::create(&p, cfg).unwrap();
        w.write_all(&synced).unwrap();
        if tail_block == 0 {
            // An alignment above 5000 bytes: the tail write itself fails.
            assert!(w.sync().is_err());
            continue;
        }
        w.sync().unwrap();
        let more = pattern(3 * 8192, 12);
        let failed = w.write_all(&more).is_err() || w.finish(true).is_err();
        assert!(failed, "{engine}: the rewrite at {tail_block} must fail");
        let on_disk = std::fs::read(&p).unwrap();
        assert!(
            on_disk == synced,
            "{engine}: {} bytes on disk",
            on_disk.len()
        );
    }
}
