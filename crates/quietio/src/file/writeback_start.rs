//! Starting write-back of a buffered file without the writer doing it.
//!
//! A buffered writer starts write-back of every chunk it has written (see
//! `SeqWriter`), so that the final sync of a table or a log does not write
//! all of it at once. `sync_file_range` does that, but it submits the
//! chunk's pages to the device in the caller's thread: for a log written
//! one small record at a time by the user's `put`, one put in every
//! megabyte waits tens to hundreds of microseconds for it. Through
//! io_uring the same request runs on one of the kernel's worker threads
//! and the writer goes on at once.
//!
//! At most [`DEPTH`] requests are outstanding: a writer that gets further
//! ahead of its write-back than that waits for the oldest, as it did
//! before.
//!
//! A request's result is advisory. One that fails, or that the kernel
//! cancels because the thread that made it has exited (the log is written
//! by whichever user thread leads a write), only leaves its pages to the
//! sync that ends the file, and that sync reports any I/O error. So a
//! failed request is logged, never the file's error.

use std::io;
use std::os::fd::RawFd;

use crate::uring::Ring;

/// Write-back requests one file keeps outstanding.
const DEPTH: usize = 2;

pub(crate) struct WritebackStarter {
    ring: Ring,
    /// Which user data (slot) has a request outstanding.
    outstanding: [bool; DEPTH],
}

impl WritebackStarter {
    pub(crate) fn new() -> io::Result<WritebackStarter> {
        Ok(WritebackStarter {
            ring: Ring::new(DEPTH)?,
            outstanding: [false; DEPTH],
        })
    }

    /// Starts write-back of `len` bytes (at most `u32::MAX`) of `fd` from
    /// `offset`, after waiting for the oldest request if `DEPTH` are
    /// outstanding. An error means the ring can no longer be used (the
    /// request may or may not have been made): the caller starts
    /// write-back itself from then on.
    pub(crate) fn start(&mut self, fd: RawFd, offset: u64, len: u64) -> io::Result<()> {
        let slot = match self.outstanding.iter().position(|o| !o) {
            Some(s) => s,
            None => {
                self.reap_one()?;
                self.outstanding
                    .iter()
                    .position(|o| !o)
                    .ok_or_else(|| io::Error::other("io_uring: a completion freed no slot"))?
            }
        };
        // Marked before the request is made, so that its completion, even
        // after a failed submission, frees this slot and no other.
        self.outstanding[slot] = true;
        self.ring
            .start_writeback(fd, offset, len, slot as u64)
            .inspect_err(|_| self.ring.poison())
    }

    /// Waits for every outstanding request. An error means the ring can no
    /// longer be used.
    pub(crate) fn drain(&mut self) -> io::Result<()> {
        while self.outstanding.iter().any(|o| *o) {
            self.reap_one()?;
        }
        Ok(())
    }

    /// Takes one completion and frees its slot; a failed request is only
    /// logged (see the module documentation).
    fn reap_one(&mut self) -> io::Result<()> {
        let (user_data, res) = self
            .ring
            .next_completion()
            .inspect_err(|_| self.ring.poison())?;
        if let Some(o) = self.outstanding.get_mut(user_data as usize) {
            *o = false;
        }
        if res < 0 {
            log::debug!(
                "quietio: starting write-back through io_uring failed ({}); the file's sync writes those pages",
                io::Error::from_raw_os_error(-res)
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn starts_write_back_of_written_bytes_and_drains() {
        if let Some(why) = crate::uring::uring_unavailable_reason() {
            panic!("io_uring is needed here: {why}");
        }
        let dir = tempfile::tempdir().unwrap();
        let mut f = std::fs::File::create(dir.path().join("log")).unwrap();
        let chunk = vec![7u8; 1 << 20];
        let mut w = WritebackStarter::new().unwrap();
        for i in 0..5u64 {
            f.write_all(&chunk).unwrap();
            // More requests than DEPTH: the oldest are waited for.
            w.start(f.as_raw_fd(), i << 20, 1 << 20).unwrap();
            assert!(w.outstanding.iter().filter(|o| **o).count() <= DEPTH);
        }
        w.drain().unwrap();
        assert!(w.outstanding.iter().all(|o| !o));
        assert_eq!(f.metadata().unwrap().len(), 5 << 20);
    }

    #[test]
    fn requests_of_a_thread_that_has_exited_are_drained_by_another() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = std::fs::File::create(dir.path().join("log")).unwrap();
        f.write_all(&vec![3u8; 4 << 20]).unwrap();
        let fd = f.as_raw_fd();
        let mut w = WritebackStarter::new().unwrap();
        // A log is written by whichever thread leads a write; this one
        // makes two requests and exits (the kernel may cancel them).
        let mut w = std::thread::spawn(move || {
            w.start(fd, 0, 2 << 20).unwrap();
            w.start(fd, 2 << 20, 2 << 20).unwrap();
            w
        })
        .join()
        .unwrap();
        w.drain().unwrap();
        w.start(fd, 0, 4 << 20).unwrap();
        w.drain().unwrap();
        assert!(w.outstanding.iter().all(|o| !o));
    }

    #[test]
    fn a_failed_request_is_not_the_writers_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = std::fs::File::create(dir.path().join("log")).unwrap();
        let mut w = WritebackStarter::new().unwrap();
        // Not a file descriptor: the requests complete with EBADF.
        for i in 0..3 {
            w.start(-1, i * 4096, 4096).unwrap();
        }
        w.drain().unwrap();
        // The starter goes on working for real files.
        f.write_all(&[1u8; 8192]).unwrap();
        w.start(f.as_raw_fd(), 0, 8192).unwrap();
        w.drain().unwrap();
        assert!(w.outstanding.iter().all(|o| !o));
    }
}
