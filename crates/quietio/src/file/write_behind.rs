//! Write-behind for direct sequential writers: up to `depth` full buffers
//! are being written by the kernel (through io_uring) while the caller
//! fills the next one, as the page cache's write-back does for buffered
//! writes.
//!
//! The writer owns every buffer it hands to the kernel until the matching
//! completion has been taken; `drain` (and `Drop`) wait for all of them, so
//! no buffer is freed or reused while a write still reads it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use super::config::FileConfig;
use super::raw::{io_err, write_fully};
use crate::aligned::{note_direct_io, AlignedBuf};
use crate::error::{Error, Result};
use crate::fault::{Tracked, WriteVerdict};
use crate::uring::Ring;

/// One write the kernel has been handed and not yet completed.
struct Pending {
    buf: AlignedBuf,
    offset: u64,
    len: usize,
    started: Instant,
    /// A fault the layer injects into this write: the completion's result
    /// is replaced by it (`-errno`, or a short length).
    injected: Option<i32>,
}

/// The first write that failed: its offset and what happened.
struct Failure {
    offset: u64,
    message: String,
    /// The write's errno, so a full disk stays recognisable as one.
    errno: Option<i32>,
}

pub(crate) struct WriteBehind {
    ring: Ring,
    depth: usize,
    /// Slot `i` holds the write whose completion carries user data `i`.
    slots: Vec<Option<Pending>>,
    /// Buffers whose writes have completed, ready to be filled again.
    spare: Vec<AlignedBuf>,
    /// Buffers in existence, counting the one the writer is filling.
    allocated: usize,
    failure: Option<Failure>,
    /// The ring itself broke (waiting for completions failed): buffers still
    /// in flight can never be known to be free, so they are leaked.
    ring_broken: bool,
    /// The fault layer's handle on the file (tests only).
    tracked: Option<Tracked>,
}

impl WriteBehind {
    pub(crate) fn new(depth: usize, tracked: Option<Tracked>) -> std::io::Result<WriteBehind> {
        let depth = depth.max(1);
        Ok(WriteBehind {
            ring: Ring::new(depth)?,
            depth,
            slots: (0..depth).map(|_| None).collect(),
            spare: Vec::new(),
            // The writer starts with a buffer of its own.
            allocated: 1,
            failure: None,
            ring_broken: false,
            tracked,
        })
    }

    /// Writes handed to the kernel whose completion has not been taken.
    pub(crate) fn in_flight(&self) -> usize {
        self.ring.in_flight()
    }

    /// Offset of the first failed write, if any write failed.
    pub(crate) fn failed_at(&self) -> Option<u64> {
        self.failure.as_ref().map(|f| f.offset)
    }

    /// An empty buffer to fill next: a spare one, a new one while fewer than
    /// `depth + 1` exist (`depth` in flight plus the one being filled), or
    /// the buffer of the oldest completed write.
    pub(crate) fn next_buffer(
        &mut self,
        file: &File,
        path: &Path,
        cfg: &FileConfig,
    ) -> Result<AlignedBuf> {
        loop {
            if let Some(b) = self.spare.pop() {
                return Ok(b);
            }
            if self.allocated < self.depth + 1 {
                self.allocated += 1;
                return cfg
                    .buffer(cfg.write_buffer_size)
                    .map_err(|e| e.with_file(path));
            }
            self.reap_one(file, path, cfg)?;
        }
    }

    /// Hands the first `len` bytes of `buf` to the kernel, to be written at
    /// `offset`, and returns at once. Fails if this or any earlier write of
    /// the file failed.
    pub(crate) fn start(
        &mut self,
        file: &File,
        path: &Path,
        cfg: &FileConfig,
        buf: AlignedBuf,
        len: usize,
        offset: u64,
    ) -> Result<()> {
        self.check(path)?;
        while self.ring.in_flight() >= self.depth {
            self.reap_one(file, path, cfg)?;
        }
        let slot = self
            .slots
            .iter()
            .position(Option::is_none)
            .expect("a free slot when fewer than depth writes are in flight");
        let ptr = buf.full().as_ptr();
        note_direct_io(ptr, len, cfg.align());
        cfg.throttle(len);
        // The write is submitted whatever the layer says; its verdict
        // replaces the completion's result, so the error takes the path a
        // kernel error takes.
        let injected = match self.tracked.as_ref().map(|t| t.write_verdict(len)) {
            None | Some(WriteVerdict::Full) => None,
            Some(WriteVerdict::Short(n)) => Some((n / cfg.align() * cfg.align()) as i32),
            Some(WriteVerdict::Fail(errno)) => Some(-errno),
        };
        self.slots[slot] = Some(Pending {
            buf,
            offset,
            len,
            started: Instant::now(),
            injected,
        });
        let before = self.ring.in_flight();
        // SAFETY: the buffer lives in `self.slots[slot]` until the
        // completion with this slot's user data is taken (`reap_one`), and
        // `drain`/`Drop` take every completion before the buffers go.
        let r = unsafe {
            self.ring.start_write(
                file.as_raw_fd(),
                ptr,
                len,
                cfg.sent_offset(offset),
                0,
                slot as u64,
            )
        };
        if let Err(e) = r {
            if self.ring.in_flight() == before {
                // Never queued: the buffer is ours again.
                let p = self.slots[slot].take().expect("just stored");
                self.spare.push(p.buf);
            }
            let err = io_err(path, offset, "io_uring write submission failed", e);
            self.fail(offset, &err);
            return Err(err);
        }
        Ok(())
    }

    /// Waits for every write in flight; fails if any write of the file
    /// failed, naming the first.
    pub(crate) fn drain(&mut self, file: &File, path: &Path, cfg: &FileConfig) -> Result<()> {
        while self.ring.in_flight() > 0 && !self.ring_broken {
            // Errors are recorded in `failure`; keep waiting for the rest.
            let _ = self.reap_one(file, path, cfg);
        }
        self.check(path)
    }

    fn check(&self, path: &Path) -> Result<()> {
        match &self.failure {
            None => Ok(()),
            Some(f) => Err(Error::io(
                f.errno.map_or_else(
                    || std::io::Error::other(f.message.clone()),
                    std::io::Error::from_raw_os_error,
                ),
                format!(
                    "a write of this file failed; the file is incomplete: {}",
                    f.message
                ),
            )
            .with_file(path)
            .with_offset(f.offset)),
        }
    }

    fn fail(&mut self, offset: u64, err: &Error) {
        match &self.failure {
            Some(f) if f.offset <= offset => {}
            _ => {
                self.failure = Some(Failure {
                    offset,
                    message: err.message().to_string(),
                    errno: err.os_error().and_then(std::io::Error::raw_os_error),
                })
            }
        }
    }

    /// Takes one completion: a failed write is recorded (and returned), a
    /// short one is finished with blocking writes, and the buffer becomes
    /// spare.
    fn reap_one(&mut self, file: &File, path: &Path, cfg: &FileConfig) -> Result<()> {
        let (slot, res) = match self.ring.next_completion() {
            Ok(c) => c,
            Err(e) => {
                self.ring_broken = true;
                self.ring.poison();
                let err = io_err(path, 0, "waiting for io_uring completions failed", e);
                self.fail(0, &err);
                return Err(err);
            }
        };
        let Some(p) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
            // The count of requests in flight no longer matches the slots:
            // never free a buffer or keep the ring on that basis.
            self.ring_broken = true;
            self.ring.poison();
            return Err(Error::io(
                std::io::Error::other(format!("unknown user data {slot}")),
                "io_uring returned a completion this writer did not submit",
            )
            .with_file(path));
        };
        let res = match p.injected {
            // A short transfer of nothing is a full disk.
            Some(0) => -libc::ENOSPC,
            Some(forced) if res >= 0 => forced.min(res),
            _ => res,
        };
        if res > 0 {
            if let Some(t) = &self.tracked {
                t.wrote(p.offset, &p.buf.full()[..res as usize]);
            }
        }
        let mut result = Ok(());
        if res < 0 {
            let e = std::io::Error::from_raw_os_error(-res);
            result = Err(io_err(
                path,
                p.offset,
                &format!("write failed ({} mode, io_uring)", cfg.mode),
                e,
            ));
        } else if (res as usize) < p.len {
            // Short write (e.g. a nearly full disk): finish it in place,
            // from the last aligned boundary, the way the blocking path does.
            let align = cfg.align();
            let done = res as usize / align * align;
            result = write_fully(
                file,
                path,
                cfg,
                self.tracked.as_ref(),
                &p.buf.full()[done..p.len],
                p.offset + done as u64,
            );
        }
        match &result {
            Ok(()) => cfg
                .stats
                .record_write(cfg.class, p.len, p.started.elapsed()),
            Err(e) => self.fail(p.offset, e),
        }
        let mut buf = p.buf;
        buf.clear();
        self.spare.push(buf);
        result
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        while self.ring.in_flight() > 0 && !self.ring_broken {
            match self.ring.next_completion() {
                Ok((slot, _)) => {
                    if let Some(s) = self.slots.get_mut(slot as usize) {
                        s.take();
                    }
                }
                Err(_) => {
                    self.ring_broken = true;
                    self.ring.poison();
                }
            }
        }
        if self.ring_broken {
            // The kernel may still read these buffers: never free them.
            for p in self.slots.iter_mut().filter_map(Option::take) {
                std::mem::forget(p.buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EffectiveMode, IoClass, IoEnv, IoOptions};

    #[test]
    fn keeps_depth_plus_one_buffers_and_writes_them_where_they_belong() {
        if crate::uring::uring_unavailable_reason().is_some() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let env = IoEnv::open(
            d.path(),
            IoOptions {
                direct_write_buffer_size: 8192,
                ..IoOptions::default()
            },
        )
        .unwrap();
        if env.capabilities().direct_unusable_reason(true).is_some() {
            return;
        }
        let cfg = env.file_config(IoClass::CompactionWrite, EffectiveMode::Direct);
        let path = d.path().join("wb");
        let file = std::fs::File::create(&path).unwrap();
        let depth = 2;
        let mut wb = WriteBehind::new(depth, None).unwrap();
        // The writer's own first buffer.
        let mut buf = cfg.buffer(8192).unwrap();
        // Every buffer stays alive, so distinct addresses are distinct buffers.
        let mut seen = std::collections::HashSet::new();
        seen.insert(buf.full().as_ptr() as usize);
        for i in 0..6u8 {
            buf.extend_from(&[i + 1; 8192]);
            let next = wb.next_buffer(&file, &path, &cfg).unwrap();
            seen.insert(next.full().as_ptr() as usize);
            let full = std::mem::replace(&mut buf, next);
            wb.start(&file, &path, &cfg, full, 8192, i as u64 * 8192)
                .unwrap();
            assert!(wb.in_flight() <= depth);
            assert!(seen.len() <= depth + 1, "{} buffers", seen.len());
        }
        wb.drain(&file, &path, &cfg).unwrap();
        assert_eq!(wb.in_flight(), 0);
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len(), 6 * 8192);
        for (i, block) in back.chunks(8192).enumerate() {
            assert!(block.iter().all(|&b| b == i as u8 + 1), "block {i}");
        }
    }
}
