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

use std::io;
use std::os::fd::RawFd;

use crate::uring::Ring;

/// Write-back requests one file keeps outstanding.
const DEPTH: usize = 2;

pub(crate) struct WritebackStarter {
    ring: Ring,
    /// The first request that failed: its offset and error. Reported by
    /// the next `start` or `drain`, and by every one after.
    failed: Option<(u64, i32)>,
    /// Offsets of the outstanding requests, by user data (slot).
    slots: [Option<u64>; DEPTH],
}

impl WritebackStarter {
    pub(crate) fn new() -> io::Result<WritebackStarter> {
        Ok(WritebackStarter {
            ring: Ring::new(DEPTH)?,
            failed: None,
            slots: [None; DEPTH],
        })
    }

    /// Starts write-back of `len` bytes of `fd` from `offset`, after
    /// waiting for the oldest request if `DEPTH` are outstanding.
    pub(crate) fn start(
        &mut self,
        fd: RawFd,
        offset: u64,
        len: u64,
    ) -> Result<(), (u64, io::Error)> {
        self.check()?;
        let slot = match self.slots.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                self.reap_one()?;
                self.check()?;
                self.slots
                    .iter()
                    .position(Option::is_none)
                    .expect("a completion frees its slot")
            }
        };
        self.ring
            .start_writeback(fd, offset, len, slot as u64)
            .map_err(|e| (offset, e))?;
        self.slots[slot] = Some(offset);
        Ok(())
    }

    /// Waits for every outstanding request; the first failure if any
    /// failed.
    pub(crate) fn drain(&mut self) -> Result<(), (u64, io::Error)> {
        while self.slots.iter().any(Option::is_some) {
            self.reap_one()?;
        }
        self.check()
    }

    fn check(&self) -> Result<(), (u64, io::Error)> {
        match self.failed {
            None => Ok(()),
            Some((offset, errno)) => Err((offset, io::Error::from_raw_os_error(errno))),
        }
    }

    /// Takes one completion and frees its slot.
    fn reap_one(&mut self) -> Result<(), (u64, io::Error)> {
        let (user_data, res) = self.ring.next_completion().map_err(|e| {
            // Waiting itself failed: nothing outstanding can be accounted
            // for any more, so the ring is not kept for reuse.
            self.ring.poison();
            self.slots = [None; DEPTH];
            (0, e)
        })?;
        let offset = self
            .slots
            .get_mut(user_data as usize)
            .and_then(Option::take)
            .unwrap_or(0);
        if res < 0 && self.failed.is_none() {
            self.failed = Some((offset, -res));
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
        }
        w.drain().unwrap();
        assert!(w.slots.iter().all(Option::is_none));
        assert_eq!(f.metadata().unwrap().len(), 5 << 20);
    }

    #[test]
    fn a_failed_request_is_reported_with_its_offset_from_then_on() {
        let mut w = WritebackStarter::new().unwrap();
        // Not a file descriptor: the request completes with EBADF.
        w.start(-1, 4096, 4096).unwrap();
        let (offset, e) = w.drain().unwrap_err();
        assert_eq!((offset, e.raw_os_error()), (4096, Some(libc::EBADF)));
        let (offset, _) = w.start(-1, 8192, 4096).unwrap_err();
        assert_eq!(offset, 4096, "the first failure stays the one reported");
    }
}
