//! [`Ring`]: one io_uring instance, the requests it has in flight, and what
//! it does about a request the kernel accepted but never started.
//!
//! The kernel runs a write it cannot do without blocking (any O_DIRECT
//! write into allocated but unwritten blocks, as a preallocated table file
//! has) on a worker thread of its own. Should that work item wait and no
//! worker ever take it, its completion never comes, and a thread waiting
//! for it would wait for ever. So a ring that has waited [`STALL`] with
//! requests in flight and nothing completing asks the kernel to cancel
//! them: one that had not started is removed and completes as cancelled,
//! and the ring then does it itself with the blocking call it stands for
//! and hands its owner that result, as if the kernel had. One already
//! running (or at the device) cannot be cancelled and is waited for, as a
//! blocking call would wait. A slow device therefore costs nothing but a
//! log line, and a request held back for ever costs [`STALL`].

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use super::request::Request;
use crate::kept::Kept;

/// How long a ring waits with requests in flight and no completion before
/// it cancels those the kernel has not started. Far above any healthy
/// request's time (milliseconds), and long enough that a device stall
/// rarely reaches it; it only decides when a request that never started is
/// done here instead.
const STALL: Duration = Duration::from_secs(10);

/// Set in the user data of the cancel requests a ring sends itself; the
/// user data its owners give must leave it clear.
const CANCEL: u64 = 1 << 63;

/// One request handed to the kernel whose completion has not been taken.
struct InFlight {
    user_data: u64,
    request: Request,
    /// The ring has asked the kernel to cancel it.
    cancel_sent: bool,
}

/// One io_uring instance with the requests it has in flight.
///
/// A ring whose requests have all completed is kept when dropped (up to
/// [`KEPT_RINGS`], process-wide) and handed to the next file: compaction
/// opens many files a second, and setting a ring up and tearing it down
/// (an mmap, a munmap and an exit work item in a kernel worker) each time
/// is system time the compaction thread spends where a user thread may be
/// waiting for the CPU.
pub(crate) struct Ring {
    ring: Option<IoUring>,
    entries: u32,
    /// Requests handed to the kernel whose completions have not been taken.
    requests: Vec<InFlight>,
    /// The kernel can bound a wait (5.11 and later); without that a ring
    /// waits as long as it takes and rescues nothing.
    timed_waits: bool,
    stall: Duration,
    /// Never kept: its owner lost track of a request (an error waiting,
    /// a completion it did not submit), or the ring sent cancels whose
    /// completions may still arrive.
    poisoned: bool,
    /// Taken from the kept rings rather than set up.
    #[cfg(test)]
    kept: bool,
}

/// Idle rings kept for reuse: a background thread's writer and readers.
pub(crate) const KEPT_RINGS: usize = 8;

/// Kept rings by entry count, each of weight 1.
static KEPT: Kept<u32, IoUring> = Kept::new(KEPT_RINGS);

/// Closes every kept ring.
pub(crate) fn release_kept_rings() {
    KEPT.release();
}

impl Ring {
    /// A ring for up to `depth` requests in flight.
    pub(crate) fn new(depth: usize) -> io::Result<Ring> {
        let entries = depth.clamp(1, 4096).next_power_of_two() as u32;
        let kept = KEPT.take(&entries);
        #[cfg(test)]
        let was_kept = kept.is_some();
        let ring = match kept {
            Some(r) => r,
            None => IoUring::new(entries)?,
        };
        Ok(Ring {
            timed_waits: ring.params().is_feature_ext_arg(),
            ring: Some(ring),
            entries,
            requests: Vec::new(),
            stall: STALL,
            poisoned: false,
            #[cfg(test)]
            kept: was_kept,
        })
    }

    /// Marks the ring as not to be kept when dropped: its owner can no
    /// longer account for every request it handed over.
    pub(crate) fn poison(&mut self) {
        self.poisoned = true;
    }

    /// Whether this ring came from the kept ones.
    #[cfg(test)]
    fn was_kept(&self) -> bool {
        self.kept
    }

    fn uring(&mut self) -> &mut IoUring {
        self.ring
            .as_mut()
            .expect("a ring is only taken when dropped")
    }

    /// Requests handed over whose completions have not been taken.
    pub(crate) fn in_flight(&self) -> usize {
        self.requests.len()
    }

    /// Starts a request that does nothing (to see that the kernel takes
    /// requests at all).
    pub(crate) fn start_nop(&mut self, user_data: u64) -> io::Result<()> {
        let e = opcode::Nop::new().build().user_data(user_data);
        // SAFETY: a no-op references no memory.
        unsafe { self.push(e, Request::Nop) }
    }

    /// Starts a write of `len` bytes from `buf` to `fd` at `offset`.
    ///
    /// # Safety
    /// `buf..buf + len` must stay valid and unchanged until the completion
    /// with `user_data` has been taken from [`Ring::next_completion`].
    pub(crate) unsafe fn start_write(
        &mut self,
        fd: RawFd,
        buf: *const u8,
        len: usize,
        offset: u64,
        rw_flags: i32,
        user_data: u64,
    ) -> io::Result<()> {
        let e = opcode::Write::new(types::Fd(fd), buf, len as u32)
            .offset(offset)
            .rw_flags(rw_flags)
            .build()
            .user_data(user_data);
        let request = Request::Write {
            fd,
            buf: buf as usize,
            len,
            offset,
            rw_flags,
        };
        // SAFETY: the caller keeps the buffer as this function requires.
        unsafe { self.push(e, request) }
    }

    /// Starts a read of `len` bytes into `buf` from `fd` at `offset`.
    ///
    /// # Safety
    /// `buf..buf + len` must stay valid, and not be read or written by
    /// anyone else, until the completion with `user_data` has been taken.
    pub(crate) unsafe fn start_read(
        &mut self,
        fd: RawFd,
        buf: *mut u8,
        len: usize,
        offset: u64,
        user_data: u64,
    ) -> io::Result<()> {
        let e = opcode::Read::new(types::Fd(fd), buf, len as u32)
            .offset(offset)
            .build()
            .user_data(user_data);
        let request = Request::Read {
            fd,
            buf: buf as usize,
            len,
            offset,
        };
        // SAFETY: the caller keeps the buffer as this function requires.
        unsafe { self.push(e, request) }
    }

    /// Starts write-back (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`
    /// only) of `len` bytes of `fd` from `offset`. The kernel runs it on a
    /// worker thread of its own: the caller does not submit the pages
    /// itself. It references no memory of the caller's, but the worker
    /// looks `fd` up when it runs: the file must stay open until the
    /// completion has been taken.
    pub(crate) fn start_writeback(
        &mut self,
        fd: RawFd,
        offset: u64,
        len: u64,
        user_data: u64,
    ) -> io::Result<()> {
        let len32 = u32::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("write-back of {len} bytes in one request"),
            )
        })?;
        let e = opcode::SyncFileRange::new(types::Fd(fd), len32)
            .offset(offset)
            .flags(libc::SYNC_FILE_RANGE_WRITE)
            .build()
            .user_data(user_data);
        // SAFETY: the request points at no memory.
        unsafe { self.push(e, Request::Writeback { fd, offset, len }) }
    }

    /// Queues `e`, which does `request`, and submits it.
    ///
    /// # Safety
    /// Whatever memory `e` points at must stay valid until its completion
    /// has been taken.
    unsafe fn push(&mut self, e: io_uring::squeue::Entry, request: Request) -> io::Result<()> {
        let user_data = e.get_user_data();
        if user_data & CANCEL != 0 || self.requests.iter().any(|r| r.user_data == user_data) {
            // The ring finds a request by its user data: two alike, and a
            // completion could be matched to the other's buffer.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("io_uring user data {user_data:#x} is reserved or already in flight"),
            ));
        }
        if self.uring().submission().is_full() {
            self.submit()?;
        }
        // SAFETY: the caller keeps `e`'s memory valid until its completion.
        unsafe { self.uring().submission().push(&e) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.requests.push(InFlight {
            user_data,
            request,
            cancel_sent: false,
        });
        // Submitted at once: the point is that the device starts now, while
        // the caller fills the next buffer.
        self.submit()
    }

    fn submit(&mut self) -> io::Result<()> {
        loop {
            match self.uring().submit() {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    // The completion queue is full: the caller reaps first.
                    return Ok(());
                }
                r => return r.map(|_| ()),
            }
        }
    }

    /// Waits for the next completion: `(user_data, result)`, where a
    /// negative result is `-errno`. A request this ring had to do itself
    /// (see the module documentation) comes back the same way.
    pub(crate) fn next_completion(&mut self) -> io::Result<(u64, i32)> {
        let mut quiet_since = Instant::now();
        loop {
            if let Some(done) = self.take_completion() {
                return Ok(done);
            }
            if self.requests.is_empty() {
                return Err(io::Error::other("io_uring: waited with nothing in flight"));
            }
            let limit = self.stall.saturating_sub(quiet_since.elapsed());
            match self.wait(limit) {
                Ok(true) => {}
                Ok(false) => {
                    self.cancel_in_flight()?;
                    quiet_since = Instant::now();
                }
                Err(e) => {
                    self.poisoned = true;
                    return Err(e);
                }
            }
        }
    }

    /// Takes the next completion for an owner from the completion queue,
    /// doing a request itself when its cancel took it from the kernel.
    fn take_completion(&mut self) -> Option<(u64, i32)> {
        loop {
            let c = self.uring().completion().next()?;
            let (user_data, result) = (c.user_data(), c.result());
            if user_data & CANCEL != 0 {
                log::debug!(
                    "quietio: io_uring cancel of request {:#x}: {}",
                    user_data & !CANCEL,
                    match -result {
                        0 => "removed before it started",
                        libc::EALREADY => "already running, waiting for it",
                        _ => "not cancellable (at the device or done), waiting for it",
                    }
                );
                continue;
            }
            let Some(i) = self.requests.iter().position(|r| r.user_data == user_data) else {
                // Not one of its requests: the owner decides what that means.
                return Some((user_data, result));
            };
            let f = self.requests.swap_remove(i);
            // Cancelled before it started, or interrupted by the cancel.
            let stopped = result == -libc::ECANCELED || result == -libc::EINTR;
            if f.cancel_sent && stopped {
                // SAFETY: the owner keeps the request's memory valid until
                // this completion is taken, which is after this call.
                let result = unsafe { f.request.run_blocking() };
                log::warn!(
                    "quietio: an io_uring request ({:?}) the kernel held {} s without running it was done with a blocking call",
                    f.request,
                    self.stall.as_secs_f64()
                );
                return Some((user_data, result));
            }
            return Some((user_data, result));
        }
    }

    /// Submits whatever is queued and waits up to `limit` for a completion:
    /// `Ok(false)` when the time ran out with none.
    fn wait(&mut self, limit: Duration) -> io::Result<bool> {
        let outcome = if self.timed_waits {
            let ts = types::Timespec::from(limit.max(Duration::from_millis(1)));
            let args = types::SubmitArgs::new().timespec(&ts);
            self.uring().submitter().submit_with_args(1, &args)
        } else {
            self.uring().submit_and_wait(1)
        };
        match outcome {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(true),
            // The completion queue is full: there is something to take.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Asks the kernel to cancel every request in flight; those it had not
    /// started complete as cancelled and are done here (`take_completion`).
    fn cancel_in_flight(&mut self) -> io::Result<()> {
        // Its cancels' completions may come after the last request's.
        self.poisoned = true;
        let first = self.requests.iter().any(|r| !r.cancel_sent);
        if first {
            log::warn!(
                "quietio: {} io_uring request(s) in flight and none completed for {} s; cancelling those the kernel has not started, to do them with blocking calls",
                self.requests.len(),
                self.stall.as_secs_f64()
            );
        }
        for i in 0..self.requests.len() {
            let target = self.requests[i].user_data;
            let e = opcode::AsyncCancel::new(target)
                .build()
                .user_data(CANCEL | target);
            if self.uring().submission().is_full() {
                self.submit()?;
            }
            // SAFETY: a cancel references no memory of the caller's.
            unsafe { self.uring().submission().push(&e) }
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
            self.requests[i].cancel_sent = true;
        }
        self.submit()
    }

    /// Queues a timer of `ts` that holds back the next request pushed (it
    /// is linked to it), without submitting it (tests only).
    #[cfg(test)]
    fn queue_delay(&mut self, ts: &types::Timespec, user_data: u64) {
        let e = opcode::Timeout::new(ts)
            .build()
            .flags(io_uring::squeue::Flags::IO_LINK)
            .user_data(user_data);
        // SAFETY: the test keeps `ts` alive until the next push submits.
        unsafe { self.uring().submission().push(&e) }.unwrap();
        self.requests.push(InFlight {
            user_data,
            request: Request::Delay,
            cancel_sent: false,
        });
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let Some(mut ring) = self.ring.take() else {
            return;
        };
        // Only a ring with nothing in flight and nothing unread is kept: a
        // request still running would complete into the next file's ring.
        // Anything else is closed, which makes the kernel cancel or wait.
        let idle = !self.poisoned
            && self.requests.is_empty()
            && ring.submission().is_empty()
            && ring.completion().is_empty();
        if idle {
            KEPT.keep(self.entries, 1, ring);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uring::uring_unavailable_reason;

    #[test]
    fn ring_reads_and_writes_a_file() {
        if let Some(why) = uring_unavailable_reason() {
            // CI's kernel has io_uring: a skip there would hide a failure.
            assert!(
                std::env::var_os("CI").is_none(),
                "io_uring unavailable in CI: {why}"
            );
            eprintln!("io_uring unavailable here ({why}); skipping");
            return;
        }
        use std::os::fd::AsRawFd;
        let f = tempfile::tempfile().unwrap();
        let mut ring = Ring::new(4).unwrap();
        let data = [b"abcd", b"efgh"];
        for (i, d) in data.iter().enumerate() {
            // SAFETY: `data` outlives both completions, taken below.
            unsafe {
                ring.start_write(f.as_raw_fd(), d.as_ptr(), 4, i as u64 * 4, 0, i as u64)
                    .unwrap()
            };
        }
        assert_eq!(ring.in_flight(), 2);
        let mut seen = [false; 2];
        for _ in 0..2 {
            let (id, res) = ring.next_completion().unwrap();
            assert_eq!(res, 4);
            seen[id as usize] = true;
        }
        assert_eq!(seen, [true, true]);
        let mut back = [0u8; 8];
        // SAFETY: `back` lives until the completion is taken on the next line.
        unsafe {
            ring.start_read(f.as_raw_fd(), back.as_mut_ptr(), 8, 0, 9)
                .unwrap()
        };
        assert_eq!(ring.next_completion().unwrap(), (9, 8));
        assert_eq!(&back, b"abcdefgh");
        assert!(ring.next_completion().is_err(), "nothing in flight");
    }

    #[test]
    fn idle_rings_are_kept_and_busy_ones_are_not() {
        if uring_unavailable_reason().is_some() {
            assert!(std::env::var_os("CI").is_none());
            return;
        }
        use std::os::fd::AsRawFd;
        // A size no other test asks for, so the kept ring is this one's.
        let depth = 1000;
        drop(Ring::new(depth).unwrap());
        let mut ring = Ring::new(depth).unwrap();
        assert!(ring.was_kept(), "the idle ring was not reused");
        // A kept ring works like a new one.
        let f = tempfile::tempfile().unwrap();
        let data = b"kept";
        // SAFETY: `data` outlives the completion, taken on the next line.
        unsafe { ring.start_write(f.as_raw_fd(), data.as_ptr(), 4, 0, 0, 3) }.unwrap();
        assert_eq!(ring.next_completion().unwrap(), (3, 4));
        // One with a request whose completion was never taken is closed.
        // SAFETY: `data` is a static byte string, valid for ever.
        unsafe { ring.start_write(f.as_raw_fd(), data.as_ptr(), 4, 4, 0, 4) }.unwrap();
        drop(ring);
        let fresh = Ring::new(depth).unwrap();
        assert!(
            !fresh.was_kept(),
            "a ring with a request in flight was kept"
        );
        // A poisoned ring is not kept either.
        let mut poisoned = fresh;
        poisoned.poison();
        drop(poisoned);
        assert!(
            !Ring::new(depth).unwrap().was_kept(),
            "a poisoned ring was kept"
        );
    }

    #[test]
    fn a_request_the_kernel_never_starts_is_done_with_a_blocking_call() {
        if uring_unavailable_reason().is_some() {
            assert!(std::env::var_os("CI").is_none());
            return;
        }
        use std::os::fd::AsRawFd;
        let f = tempfile::tempfile().unwrap();
        let mut ring = Ring::new(4).unwrap();
        ring.stall = Duration::from_millis(300);
        // The write is linked behind a one-minute timer: the kernel holds it
        // without starting it, as it would a work item no worker takes.
        let ts = types::Timespec::new().sec(60);
        ring.queue_delay(&ts, 1);
        let data = b"rescued";
        let t = Instant::now();
        // SAFETY: `data` is a static byte string, valid for ever.
        unsafe { ring.start_write(f.as_raw_fd(), data.as_ptr(), 7, 0, 0, 2) }.unwrap();
        let mut results = std::collections::BTreeMap::new();
        for _ in 0..2 {
            let (id, res) = ring.next_completion().unwrap();
            results.insert(id, res);
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert_eq!(results[&1], -libc::ECANCELED, "the timer was cancelled");
        assert_eq!(results[&2], 7, "the write was done and reported in full");
        let mut back = [0u8; 7];
        assert_eq!(crate::sys::pread(f.as_raw_fd(), &mut back, 0).unwrap(), 7);
        assert_eq!(&back, data);
        assert_eq!(ring.in_flight(), 0);
        assert!(ring.next_completion().is_err(), "nothing in flight");
    }

    #[test]
    fn user_data_must_be_unique_and_unreserved() {
        if uring_unavailable_reason().is_some() {
            assert!(std::env::var_os("CI").is_none());
            return;
        }
        let mut ring = Ring::new(4).unwrap();
        let ts = types::Timespec::new().sec(60);
        ring.queue_delay(&ts, 5);
        let e = ring.start_nop(5).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(ring.start_nop(CANCEL | 6).is_err());
        ring.poison();
    }
}
