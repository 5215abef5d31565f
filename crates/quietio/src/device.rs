//! What the device under a directory does with plain O_DIRECT sequential
//! I/O, as fio measures it: a new file written front to back in 1 MiB
//! requests with `depth` of them in flight and then `fdatasync`ed, then read
//! back the same way. None of quietio's file handling sits in between, so
//! the access modes can be compared against it.
//!
//! The file is allocated first (`fallocate`), as fio does by default and
//! as quietio's pipelined table writers do ahead of their writes: on ext4
//! an O_DIRECT write that extends the file completes before the next one
//! starts, so appending would measure depth 1 at every depth.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::aligned::{note_direct_io, AlignedBuf};
use crate::error::{Error, Result};
use crate::probe::probe;
use crate::sys;
use crate::uring::{Engine, Ring};

/// Bytes per request, as in `fio --bs=1M`.
pub(crate) const REFERENCE_BLOCK: usize = 1 << 20;

/// One reference measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceSpeed {
    /// Requests kept in flight (always 1 with [`Engine::Sync`]).
    pub depth: usize,
    /// Write throughput in MiB/s (2^20 bytes per second), over the
    /// `fallocate`, the writes and the closing `fdatasync`.
    pub write_mib_s: f64,
    /// Throughput in MiB/s of reading the same file back with O_DIRECT,
    /// so from the device, not the page cache.
    pub read_mib_s: f64,
}

/// Removes the reference file however the measurement ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes and reads a new file of `bytes` (rounded up to whole 1 MiB
/// requests) in `dir` with O_DIRECT, `depth` requests in flight. The sync
/// engine can only keep one request in flight, so `depth` must be 1 there.
pub fn measure_device(dir: &Path, bytes: u64, depth: usize, engine: Engine) -> Result<DeviceSpeed> {
    if depth == 0 || (engine == Engine::Sync && depth > 1) {
        return Err(Error::invalid(format!(
            "a device reference with the {engine} engine needs a depth of 1{}, got {depth}",
            if engine == Engine::Uring {
                " or more"
            } else {
                ""
            }
        )));
    }
    let caps = probe(dir)?;
    if let Some(why) = caps.direct_unusable_reason(true) {
        return Err(
            Error::not_supported(format!("no device reference without direct I/O: {why}"))
                .with_file(dir),
        );
    }
    let align = caps.direct.offset_align.max(caps.direct.mem_align);
    if !REFERENCE_BLOCK.is_multiple_of(align) {
        return Err(Error::not_supported(format!(
            "the direct I/O alignment {align} does not divide 1 MiB"
        ))
        .with_file(dir));
    }
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let scratch = Scratch(caps.dir.join(format!(
        ".quietio-device-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )));
    let path = &scratch.0;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::io(e, "cannot create the device reference file").with_file(path))?;
    let requests = bytes.div_ceil(REFERENCE_BLOCK as u64).max(1);
    let mut bufs = (0..depth)
        .map(|i| {
            let mut b = AlignedBuf::for_direct_io(REFERENCE_BLOCK, caps.direct.mem_align, align)?;
            // Not all zeros, so no layer can shortcut the data.
            for (j, x) in b.full_mut().iter_mut().enumerate() {
                *x = (j as u64).wrapping_mul(2654435761).wrapping_add(i as u64) as u8;
            }
            Ok(b)
        })
        .collect::<Result<Vec<_>>>()?;
    let mib = (requests * REFERENCE_BLOCK as u64) as f64 / (1 << 20) as f64;

    let t = Instant::now();
    if let Err(e) = sys::fallocate(file.as_raw_fd(), 0, requests * REFERENCE_BLOCK as u64) {
        // Where the file system cannot preallocate, the writes append.
        log::debug!("device reference: no fallocate ({e}); appending");
    }
    run(&file, path, &mut bufs, requests, engine, Op::Write)?;
    sys::fdatasync(file.as_raw_fd())
        .map_err(|e| Error::io(e, "fdatasync failed").with_file(path))?;
    let write_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    run(&file, path, &mut bufs, requests, engine, Op::Read)?;
    let read_s = t.elapsed().as_secs_f64();
    Ok(DeviceSpeed {
        depth,
        write_mib_s: mib / write_s.max(1e-9),
        read_mib_s: mib / read_s.max(1e-9),
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Write,
    Read,
}

/// Moves `requests` whole blocks front to back, one buffer per request in
/// flight.
fn run(
    file: &File,
    path: &Path,
    bufs: &mut Vec<AlignedBuf>,
    requests: u64,
    engine: Engine,
    op: Op,
) -> Result<()> {
    let fd = file.as_raw_fd();
    let what = if op == Op::Write { "write" } else { "read" };
    let check = |res: std::io::Result<usize>, offset: u64| -> Result<()> {
        match res {
            Ok(n) if n == REFERENCE_BLOCK => Ok(()),
            Ok(n) => Err(Error::io(
                std::io::Error::other(format!("{n} of {REFERENCE_BLOCK} bytes")),
                format!("short {what} in the device reference"),
            )
            .with_file(path)
            .with_offset(offset)),
            Err(e) => Err(
                Error::io(e, format!("{what} failed in the device reference"))
                    .with_file(path)
                    .with_offset(offset),
            ),
        }
    };
    if engine == Engine::Sync {
        let buf = &mut bufs[0];
        for i in 0..requests {
            let offset = i * REFERENCE_BLOCK as u64;
            note_direct_io(buf.full().as_ptr(), REFERENCE_BLOCK, 1);
            let r = match op {
                Op::Write => sys::pwrite(fd, buf.full(), offset),
                Op::Read => sys::pread(fd, buf.full_mut(), offset),
            };
            check(r, offset)?;
        }
        return Ok(());
    }
    let mut ring = Ring::new(bufs.len())
        .map_err(|e| Error::io(e, "cannot set up an io_uring ring").with_file(path))?;
    // Which request each buffer carries (its offset), while in flight.
    let mut carrying: Vec<Option<u64>> = vec![None; bufs.len()];
    let mut next = 0u64;
    let mut failure = None;
    while (next < requests && failure.is_none()) || ring.in_flight() > 0 {
        let free = carrying.iter().position(Option::is_none);
        if let (Some(slot), true) = (free, next < requests && failure.is_none()) {
            let offset = next * REFERENCE_BLOCK as u64;
            let buf = &mut bufs[slot];
            note_direct_io(buf.full().as_ptr(), REFERENCE_BLOCK, 1);
            // SAFETY: the buffer is not touched again until its completion
            // has been taken below, and the loop only ends when none is in
            // flight.
            let r = unsafe {
                match op {
                    Op::Write => ring.start_write(
                        fd,
                        buf.full().as_ptr(),
                        REFERENCE_BLOCK,
                        offset,
                        0,
                        slot as u64,
                    ),
                    Op::Read => ring.start_read(
                        fd,
                        buf.full_mut().as_mut_ptr(),
                        REFERENCE_BLOCK,
                        offset,
                        slot as u64,
                    ),
                }
            };
            match r {
                Ok(()) => {
                    carrying[slot] = Some(offset);
                    next += 1;
                }
                Err(e) => failure = Some(check(Err(e), offset).unwrap_err()),
            }
            continue;
        }
        let (slot, res) = match ring.next_completion() {
            Ok(c) => c,
            Err(e) => {
                // Requests may still be in flight, reading or writing these
                // buffers: they must never be freed (or pooled) now.
                for b in bufs.drain(..) {
                    std::mem::forget(b);
                }
                return Err(Error::io(e, "waiting for io_uring failed").with_file(path));
            }
        };
        let offset = carrying
            .get_mut(slot as usize)
            .and_then(Option::take)
            .unwrap_or_default();
        let r = if res < 0 {
            Err(std::io::Error::from_raw_os_error(-res))
        } else {
            Ok(res as usize)
        };
        if let Err(e) = check(r, offset) {
            failure.get_or_insert(e);
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_both_engines_and_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        if probe(d.path())
            .unwrap()
            .direct_unusable_reason(true)
            .is_some()
        {
            eprintln!("no direct I/O here; skipping");
            return;
        }
        let s = measure_device(d.path(), 3 << 20, 1, Engine::Sync).unwrap();
        assert_eq!(s.depth, 1);
        assert!(s.write_mib_s > 0.0 && s.read_mib_s > 0.0, "{s:?}");
        if crate::uring::uring_unavailable_reason().is_none() {
            let s = measure_device(d.path(), 5 << 20, 4, Engine::Uring).unwrap();
            assert_eq!(s.depth, 4);
            assert!(s.write_mib_s > 0.0 && s.read_mib_s > 0.0, "{s:?}");
        }
        assert!(measure_device(d.path(), 1 << 20, 2, Engine::Sync).is_err());
        assert!(measure_device(d.path(), 1 << 20, 0, Engine::Uring).is_err());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
