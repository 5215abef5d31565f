//! Read-ahead for direct sequential readers: up to `depth` chunk reads are
//! in flight (through io_uring) ahead of the chunk being consumed, as the
//! page cache's readahead does for buffered reads.
//!
//! Every buffer handed to the kernel stays owned here until its completion
//! has been taken; `Drop` waits for all of them.

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use super::config::FileConfig;
use super::raw::{io_err, read_fully};
use crate::aligned::{note_direct_io, AlignedBuf};
use crate::error::{Error, Result};
use crate::sys;
use crate::uring::Ring;

/// One chunk read: requested, then completed.
struct Chunk {
    buf: AlignedBuf,
    offset: u64,
    want: usize,
    started: Instant,
    /// The completion's result once it came (`-errno` on failure).
    result: Option<i32>,
    /// Which of its pages were cached just before it was requested, when
    /// the reader tracks the page cache.
    resident: Vec<bool>,
}

pub(crate) struct ReadAhead {
    ring: Ring,
    depth: usize,
    chunk: usize,
    file_len: u64,
    /// Requested chunks in file order; the front is the next to hand out.
    queue: VecDeque<Chunk>,
    spare: Vec<AlignedBuf>,
    /// Offset of the next chunk to request.
    next_offset: u64,
    track_residency: bool,
    /// Waiting for completions failed: buffers in flight are leaked.
    ring_broken: bool,
    /// The most reads ever in flight at once: how deep the read-ahead
    /// really went, whatever completions have been taken since.
    most_in_flight: usize,
}

impl ReadAhead {
    pub(crate) fn new(depth: usize, chunk: usize, file_len: u64) -> std::io::Result<ReadAhead> {
        let depth = depth.max(1);
        Ok(ReadAhead {
            ring: Ring::new(depth)?,
            depth,
            chunk,
            file_len,
            queue: VecDeque::with_capacity(depth),
            spare: Vec::new(),
            next_offset: 0,
            track_residency: false,
            ring_broken: false,
            most_in_flight: 0,
        })
    }

    /// Reads handed to the kernel whose completion has not been taken.
    pub(crate) fn in_flight(&self) -> usize {
        self.ring.in_flight()
    }

    /// Chunks requested and not yet handed out, finished or not: the
    /// read-ahead depth kept behind the chunk being consumed. Unlike
    /// [`ReadAhead::in_flight`] it does not drop when a completion arrives
    /// early and is taken while waiting for an earlier chunk.
    pub(crate) fn requested_ahead(&self) -> usize {
        self.queue.len()
    }

    /// The most reads that were ever in flight at once.
    pub(crate) fn most_in_flight(&self) -> usize {
        self.most_in_flight
    }

    /// Note each chunk's page-cache residency just before requesting it.
    pub(crate) fn track_residency(&mut self) {
        self.track_residency = true;
    }

    /// Swaps the next chunk of the file into `buf` (whose old contents,
    /// consumed, become a spare buffer) and returns the chunk's offset and
    /// page-cache residency; `None` at end of file, `buf` untouched. Keeps up
    /// to `depth` further chunks requested behind it.
    pub(crate) fn next_into(
        &mut self,
        file: &File,
        path: &Path,
        cfg: &FileConfig,
        buf: &mut AlignedBuf,
    ) -> Result<Option<(u64, Vec<bool>)>> {
        self.top_up(file, path, cfg)?;
        if self.queue.is_empty() {
            return Ok(None);
        }
        while self.queue.front().is_some_and(|c| c.result.is_none()) {
            self.reap_one(path)?;
        }
        let mut c = self.queue.pop_front().expect("front exists");
        let res = c.result.expect("completed");
        std::mem::swap(buf, &mut c.buf);
        c.buf.clear();
        self.spare.push(c.buf);
        if res < 0 {
            let e = std::io::Error::from_raw_os_error(-res);
            return Err(io_err(
                path,
                c.offset,
                &format!("read failed ({} mode, io_uring)", cfg.mode),
                e,
            ));
        }
        let mut got = res as usize;
        if got < c.want
            && got.is_multiple_of(cfg.align())
            && c.offset + (got as u64) < self.file_len
        {
            // Short read inside the file: finish it the blocking way.
            let at = c.offset + got as u64;
            got += read_fully(file, path, cfg, &mut buf.full_mut()[got..c.want], at, 0)?;
        }
        cfg.stats.record_read(cfg.class, got, c.started.elapsed());
        buf.set_len(got);
        // Its place in flight goes to the next chunk at once.
        self.top_up(file, path, cfg)?;
        Ok(Some((c.offset, c.resident)))
    }

    /// Requests chunks until `depth` are queued or the file ends.
    fn top_up(&mut self, file: &File, path: &Path, cfg: &FileConfig) -> Result<()> {
        while self.queue.len() < self.depth && self.next_offset < self.file_len {
            let buf = match self.spare.pop() {
                Some(b) => b,
                None => cfg.buffer(self.chunk).map_err(|e| e.with_file(path))?,
            };
            let offset = self.next_offset;
            // O_DIRECT reads whole blocks: the last chunk asks for the
            // block-rounded rest and gets the true rest back.
            let rest = (self.file_len - offset).next_multiple_of(cfg.align() as u64);
            let want = (self.chunk as u64).min(rest) as usize;
            let resident = if self.track_residency {
                // A failed probe counts as cold: it only costs a warming.
                let len = (want as u64).min(self.file_len - offset);
                sys::resident_pages(file.as_raw_fd(), offset, len).unwrap_or_default()
            } else {
                Vec::new()
            };
            cfg.throttle(want);
            let mut chunk = Chunk {
                buf,
                offset,
                want,
                started: Instant::now(),
                result: None,
                resident,
            };
            let ptr = chunk.buf.full_mut().as_mut_ptr();
            note_direct_io(ptr, want, cfg.align());
            let before = self.ring.in_flight();
            // SAFETY: the buffer stays in `self.queue` (a move of the Chunk
            // does not move the heap buffer) until its completion has been
            // taken; `Drop` takes every completion first.
            let r = unsafe {
                self.ring.start_read(
                    file.as_raw_fd(),
                    ptr,
                    want,
                    offset,
                    offset / self.chunk as u64,
                )
            };
            if self.ring.in_flight() > before {
                self.queue.push_back(chunk);
                self.next_offset += want as u64;
                self.most_in_flight = self.most_in_flight.max(self.ring.in_flight());
            } else {
                // Never queued: the buffer is ours again.
                self.spare.push(chunk.buf);
            }
            r.map_err(|e| io_err(path, offset, "io_uring read submission failed", e))?;
        }
        Ok(())
    }

    fn reap_one(&mut self, path: &Path) -> Result<()> {
        let (id, res) = self.ring.next_completion().map_err(|e| {
            self.ring_broken = true;
            self.ring.poison();
            io_err(path, 0, "waiting for io_uring completions failed", e)
        })?;
        let chunk = self.chunk as u64;
        match self
            .queue
            .iter_mut()
            .find(|c| c.offset / chunk == id && c.result.is_none())
        {
            Some(c) => {
                c.result = Some(res);
                Ok(())
            }
            None => {
                // The count of requests in flight no longer matches the
                // queue: never free a buffer or keep the ring on that basis.
                self.ring_broken = true;
                self.ring.poison();
                Err(Error::io(
                    std::io::Error::other(format!("unknown user data {id}")),
                    "io_uring returned a completion this reader did not submit",
                )
                .with_file(path))
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        while self.ring.in_flight() > 0 && !self.ring_broken {
            if self.ring.next_completion().is_err() {
                self.ring_broken = true;
                self.ring.poison();
            }
        }
        if self.ring_broken {
            // The kernel may still write into these buffers: never free them.
            for c in self.queue.drain(..) {
                std::mem::forget(c.buf);
            }
        }
    }
}
