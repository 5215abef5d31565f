//! The I/O engine of sequential direct files: io_uring, which keeps several
//! requests in flight, or plain blocking system calls. This module decides
//! which one a process gets and wraps the ring; the write-behind and
//! read-ahead that use it live in `write_behind` and `read_ahead`.

use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::str::FromStr;
use std::sync::OnceLock;

use io_uring::{opcode, types, IoUring};

use crate::error::{Error, Result};
use crate::kept::Kept;

/// The engine a user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IoEngine {
    /// io_uring where the kernel allows it, else blocking calls.
    #[default]
    Auto,
    /// io_uring; opening fails where the kernel refuses it.
    Uring,
    /// Blocking `pread`/`pwrite`, one request at a time.
    Sync,
}

impl IoEngine {
    /// The lower-case name `Display` prints and `FromStr` accepts (`auto`,
    /// `uring`, `sync`; `io_uring` is also accepted).
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Auto => "auto",
            IoEngine::Uring => "uring",
            IoEngine::Sync => "sync",
        }
    }
}

impl fmt::Display for IoEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IoEngine {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(IoEngine::Auto),
            "uring" | "io_uring" => Ok(IoEngine::Uring),
            "sync" => Ok(IoEngine::Sync),
            _ => Err(Error::invalid(format!(
                "unknown I/O engine '{s}' (expected auto, uring or sync)"
            ))),
        }
    }
}

/// The engine files really use: never `Auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// io_uring: a direct sequential writer or reader keeps up to
    /// [`IoOptions::io_depth`](crate::IoOptions::io_depth) requests in flight.
    Uring,
    /// Blocking `pread`/`pwrite`, one request at a time.
    Sync,
}

impl Engine {
    /// The lower-case name (`uring` or `sync`), as [`IoEngine::name`]
    /// spells the same engine.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Uring => "uring",
            Engine::Sync => "sync",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A resolved engine plus, when `auto` fell back to blocking calls, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineResolution {
    /// The engine direct sequential files use.
    pub engine: Engine,
    /// Why `auto` fell back to [`Engine::Sync`] (what refused io_uring, as
    /// [`uring_unavailable_reason`] says); `None` otherwise.
    pub fallback: Option<String>,
}

/// Decides the engine from the request and why io_uring cannot be used
/// here (`None` = it can). An explicit `uring` that cannot work is an error
/// that says why and what to set instead.
pub fn resolve_engine(
    requested: IoEngine,
    uring_refused: Option<&str>,
) -> Result<EngineResolution> {
    match (requested, uring_refused) {
        (IoEngine::Sync, _) => Ok(EngineResolution {
            engine: Engine::Sync,
            fallback: None,
        }),
        (IoEngine::Auto | IoEngine::Uring, None) => Ok(EngineResolution {
            engine: Engine::Uring,
            fallback: None,
        }),
        (IoEngine::Auto, Some(why)) => Ok(EngineResolution {
            engine: Engine::Sync,
            fallback: Some(format!(
                "io_uring unavailable ({why}); using blocking I/O, one request at a time"
            )),
        }),
        (IoEngine::Uring, Some(why)) => Err(Error::not_supported(format!(
            "io_engine uring was requested but io_uring cannot be used here: {why}; set io_engine to auto or sync"
        ))),
    }
}

/// Why this process cannot use io_uring, or `None` when it can. Tried once
/// per process: a ring is set up and a no-op goes through it, since a
/// seccomp filter may allow the setup and refuse the submission.
pub fn uring_unavailable_reason() -> Option<&'static str> {
    static REASON: OnceLock<Option<String>> = OnceLock::new();
    REASON
        .get_or_init(|| {
            let why = try_uring().err();
            if let Some(w) = &why {
                log::info!("quietio: io_uring unavailable: {w}");
            }
            why
        })
        .as_deref()
}

fn try_uring() -> std::result::Result<(), String> {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    if disabled == Some(2) {
        return Err("kernel.io_uring_disabled = 2".into());
    }
    let explain = |e: io::Error| refusal_reason(&e, disabled);
    let mut ring = Ring::new(2).map_err(explain)?;
    // SAFETY: a no-op references no memory.
    unsafe { ring.push(opcode::Nop::new().build().user_data(7)) }.map_err(explain)?;
    match ring.next_completion() {
        Ok((7, res)) if res >= 0 => Ok(()),
        Ok((_, res)) => Err(explain(io::Error::from_raw_os_error(-res))),
        Err(e) => Err(explain(e)),
    }
}

/// Says why setting up or using a ring failed with `e`, given the value of
/// `kernel.io_uring_disabled` (if readable).
fn refusal_reason(e: &io::Error, disabled: Option<u32>) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no io_uring (ENOSYS)".into(),
        Some(code @ (libc::EPERM | libc::EACCES)) => format!(
            "the kernel refused it ({}){}",
            if code == libc::EPERM {
                "EPERM"
            } else {
                "EACCES"
            },
            match disabled {
                Some(n) if n > 0 => format!(": kernel.io_uring_disabled = {n}"),
                _ => ": a seccomp filter or security module".into(),
            }
        ),
        Some(libc::ENOMEM) => "no memory for a ring (ENOMEM: memlock limit?)".into(),
        _ => format!("setting up a ring failed ({e})"),
    }
}

/// One io_uring instance with a count of requests in flight.
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
    in_flight: usize,
    /// Never kept: its owner lost track of a request (an error waiting,
    /// a completion it did not submit).
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
            ring: Some(ring),
            entries,
            in_flight: 0,
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

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
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
        self.push(e)
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
        self.push(e)
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
        let len = u32::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("write-back of {len} bytes in one request"),
            )
        })?;
        let e = opcode::SyncFileRange::new(types::Fd(fd), len)
            .offset(offset)
            .flags(libc::SYNC_FILE_RANGE_WRITE)
            .build()
            .user_data(user_data);
        // SAFETY: the request points at no memory.
        unsafe { self.push(e) }
    }

    unsafe fn push(&mut self, e: io_uring::squeue::Entry) -> io::Result<()> {
        if self.uring().submission().is_full() {
            self.submit()?;
        }
        self.uring()
            .submission()
            .push(&e)
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.in_flight += 1;
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
    /// negative result is `-errno`.
    pub(crate) fn next_completion(&mut self) -> io::Result<(u64, i32)> {
        loop {
            let next = self.uring().completion().next();
            if let Some(c) = next {
                self.in_flight = self.in_flight.saturating_sub(1);
                return Ok((c.user_data(), c.result()));
            }
            if self.in_flight == 0 {
                return Err(io::Error::other("io_uring: waited with nothing in flight"));
            }
            match self.uring().submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    self.poisoned = true;
                    return Err(e);
                }
            }
        }
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
            && self.in_flight == 0
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

    #[test]
    fn auto_falls_back_and_explicit_uring_says_why() {
        let r = resolve_engine(IoEngine::Auto, None).unwrap();
        assert_eq!(r.engine, Engine::Uring);
        assert!(r.fallback.is_none());
        let r =
            resolve_engine(IoEngine::Auto, Some("EPERM: kernel.io_uring_disabled = 1")).unwrap();
        assert_eq!(r.engine, Engine::Sync);
        assert!(r.fallback.unwrap().contains("io_uring_disabled"));
        let e = resolve_engine(IoEngine::Uring, Some("ENOSYS")).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::NotSupported);
        assert!(e.to_string().contains("ENOSYS") && e.to_string().contains("sync"));
        let r = resolve_engine(IoEngine::Sync, None).unwrap();
        assert_eq!(r.engine, Engine::Sync);
        assert!(r.fallback.is_none());
    }

    #[test]
    fn refusals_name_their_cause() {
        let err = |n| io::Error::from_raw_os_error(n);
        assert!(refusal_reason(&err(libc::ENOSYS), None).contains("ENOSYS"));
        let r = refusal_reason(&err(libc::EPERM), Some(1));
        assert!(
            r.contains("EPERM") && r.contains("io_uring_disabled = 1"),
            "{r}"
        );
        let r = refusal_reason(&err(libc::EPERM), Some(0));
        assert!(r.contains("seccomp"), "{r}");
        assert!(refusal_reason(&err(libc::EACCES), None).contains("EACCES"));
        assert!(refusal_reason(&err(libc::ENOMEM), None).contains("memlock"));
        assert!(refusal_reason(&err(libc::EINVAL), None).contains("setting up"));
    }

    #[test]
    fn parse_engines() {
        assert_eq!("URING".parse::<IoEngine>().unwrap(), IoEngine::Uring);
        assert_eq!("sync".parse::<IoEngine>().unwrap(), IoEngine::Sync);
        assert_eq!("auto".parse::<IoEngine>().unwrap(), IoEngine::Auto);
        assert!("aio".parse::<IoEngine>().is_err());
    }

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
}
