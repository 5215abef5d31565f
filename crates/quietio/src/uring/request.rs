//! What one io_uring request does, kept by its ring while the request is in
//! flight, so that a request the kernel accepted but never started can be
//! done with a blocking call instead (see `Ring::next_completion`).

use std::os::fd::RawFd;

use crate::sys;

/// One request's operation. Buffers are held as addresses (the ring moves
/// between threads with its owner); the owner keeps them valid until the
/// request's completion has been taken, as every `Ring::start_*` requires.
#[derive(Debug, Clone, Copy)]
pub(super) enum Request {
    Nop,
    Write {
        fd: RawFd,
        buf: usize,
        len: usize,
        offset: u64,
        rw_flags: i32,
    },
    Read {
        fd: RawFd,
        buf: usize,
        len: usize,
        offset: u64,
    },
    /// `sync_file_range` with `SYNC_FILE_RANGE_WRITE` only.
    Writeback {
        fd: RawFd,
        offset: u64,
        len: u64,
    },
    /// A timer that holds back the request linked after it (tests only):
    /// cancelled, it has nothing left to do.
    #[cfg(test)]
    Delay,
}

impl Request {
    /// Does the request on the calling thread and returns what its
    /// completion would have carried: bytes transferred, or `-errno`.
    ///
    /// # Safety
    /// The memory the request names must still be valid, and not in use by
    /// anyone else, as it is until the request's completion is taken.
    pub(super) unsafe fn run_blocking(&self) -> i32 {
        let done = match *self {
            Request::Nop => Ok(0),
            Request::Write {
                fd,
                buf,
                len,
                offset,
                rw_flags,
            } => {
                // SAFETY: the caller keeps `buf..buf + len` valid.
                let data = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
                if rw_flags == 0 {
                    sys::pwrite(fd, data, offset)
                } else {
                    sys::pwritev2(fd, data, offset, rw_flags)
                }
            }
            Request::Read {
                fd,
                buf,
                len,
                offset,
            } => {
                // SAFETY: the caller keeps `buf..buf + len` valid and unshared.
                let into = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) };
                sys::pread(fd, into, offset)
            }
            Request::Writeback { fd, offset, len } => {
                sys::sync_file_range(fd, offset, len, false).map(|()| 0)
            }
            #[cfg(test)]
            Request::Delay => Err(std::io::Error::from_raw_os_error(libc::ECANCELED)),
        };
        match done {
            // A request moves at most u32::MAX bytes.
            Ok(n) => i32::try_from(n).unwrap_or(i32::MAX),
            Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn each_kind_does_what_its_completion_would_say() {
        let f = tempfile::tempfile().unwrap();
        let fd = f.as_raw_fd();
        let data = *b"blocking";
        let write = Request::Write {
            fd,
            buf: data.as_ptr() as usize,
            len: 8,
            offset: 4,
            rw_flags: 0,
        };
        // SAFETY: `data` outlives the call.
        assert_eq!(unsafe { write.run_blocking() }, 8);
        let mut back = [0u8; 12];
        let read = Request::Read {
            fd,
            buf: back.as_mut_ptr() as usize,
            len: 12,
            offset: 0,
        };
        // SAFETY: the buffers named outlive the call.
        assert_eq!(unsafe { read.run_blocking() }, 12);
        assert_eq!(&back, b"\0\0\0\0blocking");
        let wb = Request::Writeback {
            fd,
            offset: 0,
            len: 12,
        };
        // SAFETY: the buffers named outlive the call.
        assert_eq!(unsafe { wb.run_blocking() }, 0);
        // SAFETY: the buffers named outlive the call.
        assert_eq!(unsafe { Request::Nop.run_blocking() }, 0);
        // A failure comes back as -errno, as a completion carries it.
        let bad = Request::Read {
            fd: -1,
            buf: back.as_mut_ptr() as usize,
            len: 1,
            offset: 0,
        };
        // SAFETY: the buffers named outlive the call.
        assert_eq!(unsafe { bad.run_blocking() }, -libc::EBADF);
    }
}
