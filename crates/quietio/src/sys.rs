//! Thin, checked wrappers over the Linux system calls quietio needs.
//!
//! Every wrapper retries EINTR and returns `std::io::Error`; callers add the
//! file and offset context.

use std::io;
use std::os::fd::RawFd;

/// `RWF_DONTCACHE` (Linux 6.14+): buffered I/O whose pages are dropped once
/// the I/O completes, unless they were already cached.
pub const RWF_DONTCACHE: libc::c_int = 0x80;
/// `RWF_NOWAIT`: fail with EAGAIN instead of blocking, i.e. when the data is
/// not in the page cache.
pub const RWF_NOWAIT: libc::c_int = 0x08;

const SYS_CACHESTAT: libc::c_long = 451;
const STATX_DIOALIGN: u32 = 0x2000;

fn cvt(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

fn retry<F: FnMut() -> io::Result<usize>>(mut f: F) -> io::Result<usize> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// `pread(2)`: reads into `buf` from `offset` without moving the file
/// position. Returns the bytes read, fewer than `buf.len()` at end of file
/// (or a short read: callers loop). With O_DIRECT, `buf`'s address, its
/// length and `offset` must be aligned (EINVAL otherwise).
pub fn pread(fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    retry(|| {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`,
        // which is valid and exclusively borrowed for the call.
        cvt(unsafe {
            libc::pread64(
                fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                offset as libc::off64_t,
            )
        })
    })
}

/// `pwrite(2)`: writes `buf` at `offset` without moving the file position.
/// Returns the bytes written, which may be fewer than `buf.len()` (a file
/// system filling up): callers loop. Alignment as for [`pread`] under
/// O_DIRECT.
pub fn pwrite(fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize> {
    retry(|| {
        // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`,
        // which is valid and borrowed for the call.
        cvt(unsafe { libc::pwrite64(fd, buf.as_ptr().cast(), buf.len(), offset as libc::off64_t) })
    })
}

/// `preadv2` with flags. EAGAIN (for RWF_NOWAIT) is returned as an error of
/// kind `WouldBlock`.
pub fn preadv2(fd: RawFd, buf: &mut [u8], offset: u64, flags: libc::c_int) -> io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: the one iovec points at `buf` (valid, exclusively borrowed
    // for this function) with its length; the kernel writes only there.
    retry(|| cvt(unsafe { libc::preadv2(fd, &iov, 1, offset as libc::off64_t, flags) }))
}

/// `pwritev2(2)` of one buffer with `RWF_*` flags (e.g. [`RWF_DONTCACHE`]).
/// A flag the kernel does not know fails with EINVAL, one the file system
/// does not support with EOPNOTSUPP. Short writes as for [`pwrite`].
pub fn pwritev2(fd: RawFd, buf: &[u8], offset: u64, flags: libc::c_int) -> io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the one iovec points at `buf` (valid, borrowed for this
    // function) with its length; the kernel only reads it, despite the
    // `*mut` the iovec type requires.
    retry(|| cvt(unsafe { libc::pwritev2(fd, &iov, 1, offset as libc::off64_t, flags) }))
}

/// `fdatasync(2)`: makes the file's data durable, with the metadata needed
/// to read it back (its size), but not its name: a new file's directory
/// entry needs an [`fsync`] of the directory.
pub fn fdatasync(fd: RawFd) -> io::Result<()> {
    // SAFETY: fdatasync only reads its integer argument; a bad fd is an
    // error return.
    retry(|| cvt(unsafe { libc::fdatasync(fd) } as isize)).map(|_| ())
}

/// `fsync(2)`: makes the file's data and all its metadata durable; on a
/// directory, the creations, renames and removals in it.
pub fn fsync(fd: RawFd) -> io::Result<()> {
    // SAFETY: fsync only reads its integer argument; a bad fd is an error
    // return.
    retry(|| cvt(unsafe { libc::fsync(fd) } as isize)).map(|_| ())
}

/// `ftruncate(2)`: sets the file's length to `len`, cutting it or extending
/// it with zeros. Durable only after a sync.
pub fn ftruncate(fd: RawFd, len: u64) -> io::Result<()> {
    // SAFETY: ftruncate only reads its integer arguments. (Shrinking a file
    // someone maps is not memory-unsafe for this call; see
    // `RandomReader`'s mmap mode for why the engine never does it.)
    retry(|| cvt(unsafe { libc::ftruncate64(fd, len as libc::off64_t) } as isize)).map(|_| ())
}

/// `fallocate` mode 0: allocates `[offset, offset + len)` (unwritten
/// extents, reading as zeros) and extends the file size to cover it.
pub fn fallocate(fd: RawFd, offset: u64, len: u64) -> io::Result<()> {
    retry(|| {
        cvt(
            // SAFETY: fallocate only reads its integer arguments; a bad fd
            // or range is an error return.
            unsafe { libc::fallocate64(fd, 0, offset as libc::off64_t, len as libc::off64_t) }
                as isize,
        )
    })
    .map(|_| ())
}

/// Starts (and with `wait`, waits for) write-back of a byte range.
pub fn sync_file_range(fd: RawFd, offset: u64, len: u64, wait: bool) -> io::Result<()> {
    let flags = if wait {
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER
    } else {
        libc::SYNC_FILE_RANGE_WRITE
    };
    retry(|| {
        // SAFETY: sync_file_range only reads its integer arguments.
        cvt(unsafe {
            libc::sync_file_range(fd, offset as libc::off64_t, len as libc::off64_t, flags)
        } as isize)
    })
    .map(|_| ())
}

/// `posix_fadvise(2)`: gives the kernel `advice` (a `libc::POSIX_FADV_*`
/// value) about `[offset, offset + len)`, `len` 0 meaning to the end of the
/// file. `POSIX_FADV_DONTNEED` drops only clean pages: start and wait for
/// write-back first ([`sync_file_range`]) to drop written data.
pub fn fadvise(fd: RawFd, offset: u64, len: u64, advice: libc::c_int) -> io::Result<()> {
    // SAFETY: posix_fadvise only reads its integer arguments.
    let rc =
        unsafe { libc::posix_fadvise64(fd, offset as libc::off64_t, len as libc::off64_t, advice) };
    // posix_fadvise returns the error number instead of setting errno.
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Direct-I/O alignment reported by `statx(STATX_DIOALIGN)` (Linux 6.1+):
/// `Some((mem_align, offset_align))`, `Some((0, 0))` when the file system
/// reports that this file cannot do direct I/O, `None` when the kernel or file
/// system does not report it at all.
pub fn statx_dio_align(fd: RawFd) -> Option<(u32, u32)> {
    // The kernel's struct statx is 256 bytes; the two fields we need sit at
    // fixed offsets (152 and 156) that are part of the stable ABI.
    let mut buf = [0u64; 32];
    let empty = c"";
    // SAFETY: the path is a valid NUL-terminated string (empty, with
    // AT_EMPTY_PATH: the fd itself), and `buf` is 256 writable bytes, the
    // size of the kernel's struct statx, 8-byte aligned as it requires.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            fd,
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            STATX_DIOALIGN,
            buf.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let u32_at = |off: usize| u32::from_ne_bytes(bytes[off..off + 4].try_into().unwrap());
    let mask = u32_at(0);
    if mask & STATX_DIOALIGN == 0 {
        return None;
    }
    Some((u32_at(152), u32_at(156)))
}

/// Page-cache state of a file range from `cachestat(2)` (Linux 6.5+).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStat {
    /// Pages of the range in the page cache.
    pub cache: u64,
    /// Of those, pages not yet written back.
    pub dirty: u64,
    /// Pages being written back now.
    pub writeback: u64,
    /// Pages evicted from the cache that the kernel still remembers (a
    /// shadow entry, kept to detect a refault).
    pub evicted: u64,
    /// Of the evicted pages, those evicted recently enough that reading
    /// them again would count as a refault of the working set.
    pub recently_evicted: u64,
}

/// `cachestat` over the whole file. `ENOSYS` means the kernel lacks it.
pub fn cachestat(fd: RawFd) -> io::Result<CacheStat> {
    cachestat_range(fd, 0, 0)
}

/// `cachestat` over `len` bytes from `off` (`len` 0 = to the end of the file).
pub fn cachestat_range(fd: RawFd, off: u64, len: u64) -> io::Result<CacheStat> {
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Raw {
        cache: u64,
        dirty: u64,
        writeback: u64,
        evicted: u64,
        recently_evicted: u64,
    }
    let range = Range { off, len };
    let mut raw = Raw::default();
    // SAFETY: `range` and `raw` are live, properly aligned `#[repr(C)]`
    // structs with the layouts of the kernel's cachestat_range and
    // cachestat; the kernel reads the first and writes only the second.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd,
            &range as *const Range,
            &mut raw as *mut Raw,
            0u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(CacheStat {
        cache: raw.cache,
        dirty: raw.dirty,
        writeback: raw.writeback,
        evicted: raw.evicted,
        recently_evicted: raw.recently_evicted,
    })
}

/// Number of resident pages of the first `len` bytes of a file, by mapping
/// it and asking `mincore`. Works on every Linux, but sees no dirty state.
pub fn mincore_resident(fd: RawFd, len: u64) -> io::Result<(u64, u64)> {
    let pages = resident_pages(fd, 0, len)?;
    let resident = pages.iter().filter(|&&r| r).count() as u64;
    Ok((resident, pages.len() as u64))
}

/// Which pages of `[offset, offset + len)` of a file are in the page cache,
/// one flag per page starting at the page holding `offset`. Mapping the
/// range and asking `mincore` faults nothing in. `len` must not reach past
/// the end of the file.
pub fn resident_pages(fd: RawFd, offset: u64, len: u64) -> io::Result<Vec<bool>> {
    let page = page_size() as u64;
    let start = offset - offset % page;
    let map_len = (offset + len - start) as usize;
    if len == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: a new read-only shared mapping chosen by the kernel (null
    // hint, no MAP_FIXED) cannot alias any Rust memory. It is never read:
    // mincore only reports residency and faults nothing in, so a file that
    // shrinks meanwhile cannot cause a SIGBUS here.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            start as libc::off_t,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; map_len.div_ceil(page as usize)];
    // SAFETY: `map` is a live mapping of `map_len` bytes, and `vec` holds
    // one byte per page of it, which is what mincore writes.
    let rc = unsafe { libc::mincore(map, map_len, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above, which nothing else
    // refers to.
    unsafe { libc::munmap(map, map_len) };
    if rc != 0 {
        return Err(err);
    }
    Ok(vec.iter().map(|b| b & 1 == 1).collect())
}

/// The system's page size in bytes (`sysconf(_SC_PAGESIZE)`), 4096 if it
/// cannot be read.
pub fn page_size() -> usize {
    // SAFETY: sysconf only reads its integer argument.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as usize
    } else {
        4096
    }
}

/// The size of a transparent huge page (the PMD size), from sysfs; 2 MiB
/// (x86-64's) if the kernel does not say.
pub fn huge_page_size() -> usize {
    static SIZE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|v| v.is_power_of_two() && *v >= page_size())
            .unwrap_or(2 << 20)
    })
}

/// Asks the kernel to back `[ptr, ptr + len)` of this process's anonymous
/// memory with transparent huge pages (`MADV_HUGEPAGE`), before it is first
/// touched. Only a hint: where THP is off the range stays in small pages.
///
/// # Safety
/// `ptr` must be page-aligned and `[ptr, ptr + len)` memory this process
/// owns (a live allocation), so the advice changes no one else's mapping.
pub unsafe fn advise_huge_pages(ptr: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller guarantees the range is its own live memory;
    // MADV_HUGEPAGE changes only how later faults are backed, never the
    // contents.
    let r = unsafe { libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `statfs(2)` file-system magic of the file system holding `fd`.
pub fn fs_magic(fd: RawFd) -> io::Result<i64> {
    // SAFETY: statfs64 is a plain C struct of integers, for which all
    // zero bytes is a valid value.
    let mut st: libc::statfs64 = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, exclusively borrowed statfs64 to fill.
    let rc = unsafe { libc::fstatfs64(fd, &mut st) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64)
}

/// The kernel release string (`uname -r`).
pub fn kernel_release() -> String {
    // SAFETY: utsname is a plain C struct of char arrays, for which all
    // zero bytes is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, exclusively borrowed utsname to fill; the
    // kernel NUL-terminates each field.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether a lock taken with [`try_flock`] excludes everyone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// `LOCK_SH`: any number of shared holders, no exclusive one.
    Shared,
    /// `LOCK_EX`: one holder, and no shared ones.
    Exclusive,
}

/// `flock` without blocking: `Ok(false)` when another holder's lock
/// conflicts (EWOULDBLOCK).
pub fn try_flock(fd: RawFd, kind: LockKind) -> io::Result<bool> {
    let op = match kind {
        LockKind::Shared => libc::LOCK_SH,
        LockKind::Exclusive => libc::LOCK_EX,
    } | libc::LOCK_NB;
    loop {
        // SAFETY: flock only reads its integer arguments; a bad fd is an
        // error return, not undefined behaviour.
        if unsafe { libc::flock(fd, op) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Maps the first `len` bytes of `fd` (`len > 0`) shared, with protection
/// `prot`, at an address the kernel picks; returns the address and length.
/// What makes touching the bytes sound is the caller's contract about the
/// file ([`ReadOnlyMap`], [`WritableMap`]).
fn map_shared(fd: RawFd, len: u64, prot: libc::c_int) -> io::Result<(*mut libc::c_void, usize)> {
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad mapping length"))?;
    // SAFETY: a new shared mapping at an address the kernel picks (null
    // hint, no MAP_FIXED) aliases no Rust memory.
    let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok((ptr, len))
}

/// Asks the C allocator to give free memory back to the kernel, in every
/// arena (glibc's `malloc_trim`; a no-op with other C libraries). Returns
/// whether anything was released.
pub fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks the allocator's own free lists
        // under its locks.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Private anonymous memory mapped straight from the kernel and unmapped
/// on drop: memory that leaves the process the moment its owner is done
/// with it, whatever the allocator's policy for keeping freed blocks.
#[derive(Debug)]
pub struct AnonymousMap {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone, like a `Vec<u8>`'s
// buffer; the raw pointer is not tied to the thread that created it.
unsafe impl Send for AnonymousMap {}
// SAFETY: `&AnonymousMap` hands out only the pointer; what the owner does
// through it is the owner's to synchronize.
unsafe impl Sync for AnonymousMap {}

impl AnonymousMap {
    /// `len` bytes (`len > 0`) of zeroed, readable and writable memory,
    /// page-aligned, with every page faulted in now (`MAP_POPULATE`: one
    /// call instead of a fault per page for memory about to be filled).
    pub fn populated(len: usize) -> io::Result<AnonymousMap> {
        if len == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: a fresh anonymous mapping aliases nothing; the result is
        // checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = std::ptr::NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable))?;
        Ok(AnonymousMap { ptr, len })
    }

    /// The first byte; `len()` bytes from it are the mapping's.
    pub fn as_ptr(&self) -> std::ptr::NonNull<u8> {
        self.ptr
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a mapping has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AnonymousMap {
    fn drop(&mut self) {
        // SAFETY: the mapping `populated` made, of exactly `len` bytes,
        // unmapped once. A failure would leave the memory mapped, which a
        // destructor cannot act on.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A read-only, shared memory mapping of a whole file, unmapped on drop.
///
/// Only for files nobody writes, truncates or replaces in place while they
/// are mapped: reading a page that lies past the end of a file that shrank
/// after it was mapped raises SIGBUS and kills the process, and bytes
/// changed through another descriptor show up in the mapping. quietkv maps
/// only table files, which are immutable once written: a table is written
/// whole and synced before any reader opens it, never written or truncated
/// afterwards, and deleted only by unlinking it, which keeps the inode and
/// its pages alive until the last mapping goes. Another process truncating
/// a table is outside that contract, and a SIGBUS is then how it shows.
///
/// Crate-private for that reason: its soundness rests on a contract about
/// the file that only quietio's own callers (the mmap mode of
/// `RandomReader`) are known to keep.
#[derive(Debug)]
pub(crate) struct ReadOnlyMap {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone; the raw
// pointer is not tied to the thread that created it.
unsafe impl Send for ReadOnlyMap {}
// SAFETY: shared access only copies bytes out of the read-only mapping.
unsafe impl Sync for ReadOnlyMap {}

impl ReadOnlyMap {
    /// Maps the first `len` bytes of `fd` (its whole length; `len > 0`).
    pub(crate) fn whole_file(fd: RawFd, len: u64) -> io::Result<ReadOnlyMap> {
        // Reading the mapping is sound as long as the file neither shrinks
        // nor changes while mapped (see the type's docs).
        let (ptr, len) = map_shared(fd, len, libc::PROT_READ)?;
        Ok(ReadOnlyMap { ptr, len })
    }

    /// Tells the kernel the mapping is read at random (`MADV_RANDOM`): a
    /// fault then reads the faulting page only, not the read-around window
    /// (128 KiB and more) a sequential guess would bring in - for 4 KiB
    /// point reads in a memory cgroup, that window is mostly evicted again
    /// unread, and the reclaim of mapped pages costs kernel CPU.
    pub(crate) fn advise_random(&self) -> io::Result<()> {
        // SAFETY: `ptr`/`len` are exactly the live mapping made in
        // `whole_file`; MADV_RANDOM only changes readahead policy.
        let r = unsafe { libc::madvise(self.ptr, self.len, libc::MADV_RANDOM) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The mapped length in bytes.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    /// Copies `out.len()` mapped bytes from `offset` into `out`. Panics if
    /// that range is not inside the mapping (a caller bug: callers bound
    /// reads by the file length first).
    pub(crate) fn copy_to(&self, offset: usize, out: &mut [u8]) {
        assert_in_mapping("read", offset, out.len(), self.len);
        // SAFETY: the source range lies inside the live mapping (asserted
        // above), and `out` is a distinct, exclusively borrowed buffer of
        // `out.len()` bytes. Copying with raw pointers takes no Rust
        // reference to the mapped bytes. If the file had shrunk below this
        // range since it was mapped, the copy would raise SIGBUS rather
        // than read garbage; the type's docs say why table files never
        // shrink.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.cast::<u8>().cast_const().add(offset),
                out.as_mut_ptr(),
                out.len(),
            );
        }
    }
}

impl Drop for ReadOnlyMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `whole_file`, once;
        // no copy of the pointer outlives this value.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A writable shared mapping of the start of a file (the mmap WAL).
///
/// The same hazards as the crate's read-only mapping, for a file this process writes:
/// touching a page past the end of the file raises SIGBUS, and so does a
/// write into a hole the file system cannot allocate (a full disk). The
/// owner therefore maps only a range it has allocated with `fallocate`
/// and never shrinks the file while it is mapped.
#[derive(Debug)]
pub struct WritableMap {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone and only written through
// `&mut self`; the raw pointer is not tied to the thread that created it.
unsafe impl Send for WritableMap {}
// SAFETY: `&self` methods only msync (a system call on the range), never
// touch the bytes.
unsafe impl Sync for WritableMap {}

impl WritableMap {
    /// Maps the first `len` bytes of `fd` (opened read-write) shared and
    /// writable; the file must be at least `len` bytes long.
    pub fn new(fd: RawFd, len: u64) -> io::Result<WritableMap> {
        // Writing the mapping is sound as long as the file covers it (see
        // the type's docs).
        let (ptr, len) = map_shared(fd, len, libc::PROT_READ | libc::PROT_WRITE)?;
        Ok(WritableMap { ptr, len })
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: `new` refuses a zero length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` into the mapping at `offset`. Panics if that range is
    /// not inside the mapping (a caller bug: the writer grows the mapping
    /// first).
    pub fn copy_in(&mut self, offset: usize, data: &[u8]) {
        assert_in_mapping("write", offset, data.len(), self.len);
        // SAFETY: the destination lies inside the live, writable mapping
        // (asserted above), which no Rust reference points into; `data` is
        // ordinary memory, so the ranges cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.ptr.cast::<u8>().add(offset),
                data.len(),
            );
        }
    }

    /// `msync(MS_SYNC)` of `len` bytes from `offset`: written back and
    /// durable when it returns (on Linux, an `fdatasync` of that range of
    /// the file). `offset` is rounded down to a page.
    pub fn sync_range(&self, offset: usize, len: usize) -> io::Result<()> {
        let page = page_size();
        let start = offset / page * page;
        let end = offset.saturating_add(len).min(self.len);
        if end <= start {
            return Ok(());
        }
        retry(|| {
            cvt(
                // SAFETY: the range is page-aligned and inside the live
                // mapping; msync does not touch memory Rust can see.
                unsafe {
                    libc::msync(
                        self.ptr.cast::<u8>().add(start).cast(),
                        end - start,
                        libc::MS_SYNC,
                    )
                } as isize,
            )
        })
        .map(|_| ())
    }
}

impl Drop for WritableMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`, once; no copy of
        // the pointer outlives this value. Dirty pages stay in the page
        // cache and are written back (or synced by fdatasync) as usual.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// errno of "no space left on device".
pub const ENOSPC: i32 = libc::ENOSPC;
/// errno of "disk quota exceeded".
pub const EDQUOT: i32 = libc::EDQUOT;

/// Whether `e` says the file system ran out of space (ENOSPC) or the
/// user's quota (EDQUOT): both mean "free space, then retry".
pub fn is_out_of_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(ENOSPC | EDQUOT))
}

/// CPU time (user + system) the calling thread has used so far. Work the
/// kernel does for the thread elsewhere (page-cache writeback in flusher
/// threads, io_uring's async workers) is not in it.
pub fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a timespec we own for the duration of the call, and
    // CLOCK_THREAD_CPUTIME_ID is a valid clock id on every Linux kernel.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory
    // of ours.
    unsafe { libc::geteuid() }
}

/// The kernel's id of the calling thread (what per-thread scheduling calls
/// take as "process").
fn current_tid() -> libc::c_long {
    // SAFETY: gettid takes no arguments and cannot fail; the raw syscall
    // avoids depending on a libc wrapper that older glibc lacks.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// Sets the CPU niceness of the calling thread only. On Linux, `setpriority(PRIO_PROCESS, tid)` addresses one thread, so
/// background threads can be deprioritized without touching user threads.
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    let tid = current_tid() as libc::id_t;
    // SAFETY: setpriority only reads its integer arguments; an invalid
    // value is an error return.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Moves the calling thread to the idle scheduling policy (`SCHED_IDLE`),
/// for work that should have a CPU only when nothing else wants one. A
/// higher niceness only weighs a thread less: when a reader wakes, the
/// scheduler still lets the niced thread finish its slice first. A thread
/// at the idle policy gives the CPU up to any woken thread of the normal
/// policy at once. It still gets a small share (about 0.3% of a busy
/// CPU), so its work slows down on a saturated machine but does not stop.
/// Needs no privilege; the thread's I/O priority is unchanged.
pub fn set_thread_idle_policy() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param`, which lives across the
    // call; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An I/O scheduling class and level for [`set_thread_io_priority`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoPriorityClass {
    /// Best effort at a level 0 (highest) ..= 7 (lowest).
    BestEffort(u8),
    /// Served only when no other process uses the disk.
    Idle,
}

/// Sets the I/O priority of the calling thread (`ioprio_set` with
/// `IOPRIO_WHO_PROCESS` and the thread's id, which addresses one thread).
pub fn set_thread_io_priority(class: IoPriorityClass) -> io::Result<()> {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_SHIFT: u32 = 13;
    const IOPRIO_CLASS_BE: u32 = 2;
    const IOPRIO_CLASS_IDLE: u32 = 3;
    let value = match class {
        // Bits above the level are the class and, since Linux 6.5, hints:
        // an out-of-range level must not set them.
        IoPriorityClass::BestEffort(level) if level > 7 => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("best-effort I/O priority level {level} is not in 0..=7"),
            ))
        }
        IoPriorityClass::BestEffort(level) => {
            (IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | u32::from(level)
        }
        IoPriorityClass::Idle => IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
    };
    let tid = current_tid();
    // SAFETY: ioprio_set only reads its integer arguments; an invalid class,
    // level or id is an error return.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            tid,
            libc::c_long::from(value),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Flushes every file system's dirty data (`sync(2)`), e.g. before
/// dropping the page cache for a cold measurement.
pub fn sync_all() {
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// Panics unless `n` bytes at `offset` lie inside a mapping of `len` bytes:
/// a `what` ("read", "write") outside it is a caller bug.
fn assert_in_mapping(what: &str, offset: usize, n: usize, len: usize) {
    let end = offset.checked_add(n);
    assert!(
        end.is_some_and(|e| e <= len),
        "{what} of {n} bytes at {offset} outside a {len}-byte mapping"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        let t0 = thread_cpu_time();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = thread_cpu_time() - t0;
        assert!(slept < std::time::Duration::from_millis(10), "{slept:?}");
        // Spin until the clock has counted 20 ms of work. On a busy machine
        // that takes longer than 20 ms of wall time (the thread waits for a
        // CPU now and then), which is why the limit is generous; a clock
        // that does not count work never gets there.
        let t1 = thread_cpu_time();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let mut spun = std::time::Duration::ZERO;
        while spun < std::time::Duration::from_millis(20) {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "a minute of spinning counted only {spun:?} of CPU time"
            );
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            spun = thread_cpu_time() - t1;
        }
    }

    fn nice_of(tid: libc::c_long) -> i32 {
        // SAFETY: getpriority only reads its integer arguments.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) }
    }

    fn ioprio_of(tid: libc::c_long) -> libc::c_long {
        // SAFETY: ioprio_get only reads its integer arguments.
        unsafe { libc::syscall(libc::SYS_ioprio_get, 1 as libc::c_long, tid) }
    }

    #[test]
    fn thread_priorities_apply_to_the_calling_thread_only() {
        let main_tid = current_tid();
        let main_nice = nice_of(main_tid);
        let main_ioprio = ioprio_of(main_tid);
        std::thread::spawn(move || {
            let tid = current_tid();
            assert_ne!(tid, main_tid);
            // Raising niceness needs no privilege.
            set_thread_nice(main_nice + 3).unwrap();
            assert_eq!(nice_of(tid), main_nice + 3);
            set_thread_io_priority(IoPriorityClass::Idle).unwrap();
            assert_eq!(ioprio_of(tid), 3 << 13);
            set_thread_io_priority(IoPriorityClass::BestEffort(7)).unwrap();
            assert_eq!(ioprio_of(tid), (2 << 13) | 7);
            let e = set_thread_io_priority(IoPriorityClass::BestEffort(200)).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(ioprio_of(tid), (2 << 13) | 7);
        })
        .join()
        .unwrap();
        assert_eq!(nice_of(main_tid), main_nice);
        assert_eq!(ioprio_of(main_tid), main_ioprio);
    }

    fn policy_of(tid: libc::c_long) -> libc::c_int {
        // SAFETY: sched_getscheduler only reads its integer argument.
        unsafe { libc::sched_getscheduler(tid as libc::pid_t) }
    }

    #[test]
    fn the_idle_policy_applies_to_the_calling_thread_only() {
        let main_tid = current_tid();
        let main_policy = policy_of(main_tid);
        assert_ne!(main_policy, libc::SCHED_IDLE);
        std::thread::spawn(move || {
            let tid = current_tid();
            set_thread_idle_policy().unwrap();
            assert_eq!(policy_of(tid), libc::SCHED_IDLE);
        })
        .join()
        .unwrap();
        assert_eq!(policy_of(main_tid), main_policy);
    }

    #[test]
    fn read_only_map_copies_ranges_and_refuses_outside() {
        use std::os::fd::AsRawFd;
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::io::Write::write_all(&mut f, &data).unwrap();
        let map = ReadOnlyMap::whole_file(f.as_raw_fd(), data.len() as u64).unwrap();
        assert_eq!(map.len(), data.len());
        let mut out = vec![0u8; 300];
        map.copy_to(4096 - 100, &mut out);
        assert_eq!(out, data[3996..4296]);
        let mut last = [0u8; 1];
        map.copy_to(data.len() - 1, &mut last);
        assert_eq!(last[0], data[data.len() - 1]);
        assert!(ReadOnlyMap::whole_file(f.as_raw_fd(), 0).is_err());
        let outside = std::panic::catch_unwind(|| map.copy_to(data.len() - 1, &mut [0u8; 2]));
        assert!(outside.is_err());
    }

    #[test]
    fn out_of_space_errors() {
        assert!(is_out_of_space(&io::Error::from_raw_os_error(ENOSPC)));
        assert!(is_out_of_space(&io::Error::from_raw_os_error(EDQUOT)));
        assert!(!is_out_of_space(&io::Error::from_raw_os_error(libc::EIO)));
        assert!(!is_out_of_space(&io::Error::other("no errno")));
    }
}
