//! A heap buffer whose address and capacity are multiples of an alignment,
//! as O_DIRECT requires, and the audit of every buffer handed to a direct
//! read or write.
//!
//! The statx `dio_mem_align` (often 512) is only the minimum the kernel
//! accepts. A direct write from a buffer that starts inside a page is much
//! slower on some devices (about 3x for appends on the virtio disk this was
//! developed on), so direct I/O buffers start on a page boundary:
//! [`direct_io_align`] and [`AlignedBuf::for_direct_io`].
//!
//! A direct I/O buffer of a huge page or more is also aligned to the huge
//! page size and advised to be backed by transparent huge pages. The block
//! layer splits a request at `max_segments` discontiguous pieces of
//! memory (254 on the virtio disk this was developed on), so a 2 MiB
//! direct read from small pages goes to the device as a ~1 MiB request, a
//! second ~1 MiB one and a small tail: measured under the benchmark, direct
//! compaction reads averaged 0.6 MiB per request where buffered readahead
//! averaged 1.3 MiB, and each request costs the host-cached disk time. A
//! buffer in one huge page is one physically contiguous segment, so the
//! device sees the whole transfer as one request.
//!
//! Those huge buffers are kept when freed ([`SPARE_HUGE_LIMIT`] bytes of
//! them, process-wide) and handed to the next file that asks for the same
//! size. Compaction opens and closes files many times a second, and a fresh
//! buffer costs a huge-page fault in which the kernel zeroes 2 MiB, our own
//! zeroing of it, and an unmap with its TLB shootdown when it is freed:
//! measured under the benchmark, page zeroing alone was 16% of the compaction
//! thread's CPU samples.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::kept::Kept;
use crate::sys;

/// The address alignment direct I/O buffers get: at least a page, and at
/// least what the file system demands.
pub fn direct_io_align(mem_align: usize) -> usize {
    mem_align.max(1).next_power_of_two().max(sys::page_size())
}

static DIRECT_IOS: AtomicU64 = AtomicU64::new(0);
static DIRECT_IOS_OFF_PAGE: AtomicU64 = AtomicU64::new(0);
static DIRECT_IOS_BAD_LENGTH: AtomicU64 = AtomicU64::new(0);

/// What the direct-I/O call sites have been handed since the process
/// started: how many buffers, how many did not start on a page boundary,
/// and how many had a length that is not a multiple of the offset alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirectIoAudit {
    /// Buffers handed to an O_DIRECT read or write (one per system call or
    /// io_uring submission).
    pub ios: u64,
    /// Of those, buffers whose address did not start on a page boundary:
    /// accepted by the kernel when the file system's `dio_mem_align` is
    /// smaller than a page, but slow on some devices (see the module docs).
    /// quietio's own buffers never do; a nonzero count is a bug to look at.
    pub off_page: u64,
    /// Of those, transfers whose length was not a multiple of the direct-I/O
    /// offset alignment, which the kernel refuses with EINVAL.
    pub bad_length: u64,
}

/// The audit counters so far (process-wide).
pub fn direct_io_audit() -> DirectIoAudit {
    DirectIoAudit {
        ios: DIRECT_IOS.load(Ordering::Relaxed),
        off_page: DIRECT_IOS_OFF_PAGE.load(Ordering::Relaxed),
        bad_length: DIRECT_IOS_BAD_LENGTH.load(Ordering::Relaxed),
    }
}

/// Called by every site that hands `buf` to an O_DIRECT read or write,
/// just before the system call or io_uring submission. Counting is two
/// relaxed atomics per I/O of up to megabytes: cheap enough to stay on.
pub(crate) fn note_direct_io(addr: *const u8, len: usize, offset_align: usize) {
    DIRECT_IOS.fetch_add(1, Ordering::Relaxed);
    if !(addr as usize).is_multiple_of(sys::page_size()) {
        DIRECT_IOS_OFF_PAGE.fetch_add(1, Ordering::Relaxed);
    }
    if !len.is_multiple_of(offset_align.max(1)) {
        DIRECT_IOS_BAD_LENGTH.fetch_add(1, Ordering::Relaxed);
    }
}

/// An aligned byte buffer with a fixed capacity and a current length,
/// zeroed when first allocated (a kept huge direct buffer holds old bytes;
/// see the module docs).
///
/// Allocated and freed with the same explicit `Layout`: turning it into a
/// `Vec<u8>` would free it with the wrong alignment, so it never is. The
/// capacity is a multiple of `block`, the unit a padded tail is rounded to
/// (the direct-I/O offset alignment); the address is a multiple of
/// `align()`, which may be larger (a page).
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
    block: usize,
    len: usize,
    /// A huge direct buffer: returned to the spare pool when dropped.
    pooled: bool,
    /// Taken from the spare pool rather than allocated.
    #[cfg(test)]
    kept: bool,
}

/// Bytes of freed huge direct buffers kept for reuse, process-wide: enough
/// for a writer's and a few readers' buffers to pass from one file to the
/// next, small beside any memory limit a database runs under.
pub(crate) const SPARE_HUGE_LIMIT: usize = 32 << 20;

/// A freed huge direct buffer: an allocation with its layout, every byte
/// initialised (zeroed when it was made, written only with bytes since).
/// Freed when dropped (evicted or released from the pool).
struct Spare {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a spare is an allocation owned by the pool alone; no other
// pointer to it exists until it is taken again.
unsafe impl Send for Spare {}

impl Spare {
    /// Hands the allocation back to a buffer, which now owns it.
    fn into_ptr(self) -> NonNull<u8> {
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        // SAFETY: the spare owns an allocation made with exactly `layout`,
        // freed here once (`into_ptr` forgets the spare instead).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

static SPARE_HUGE: Kept<Layout, Spare> = Kept::new(SPARE_HUGE_LIMIT);

/// Frees every kept huge direct buffer (a process done with direct I/O for
/// a while gives the memory back). Buffers in use are not affected.
pub(crate) fn release_spare_buffers() {
    SPARE_HUGE.release();
}

// SAFETY: the buffer owns its allocation exclusively (no other pointer to
// it exists), like a `Vec<u8>`, so moving it to another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only reads the bytes (`&self` methods never
// write), and writes need `&mut self`, like a `Vec<u8>`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `capacity` bytes aligned to `align`.
    /// `align` must be a power of two and `capacity` a positive multiple of it.
    pub fn new(capacity: usize, align: usize) -> Result<Self> {
        Self::with_block(capacity, align, align)
    }

    /// A buffer for O_DIRECT: its address on a page boundary (or the file
    /// system's `mem_align`, if larger) and its capacity a positive multiple
    /// of `block` (the direct-I/O offset alignment).
    ///
    /// From a huge page up ([`sys::huge_page_size`]) the address is aligned
    /// to the huge page and the memory advised to be backed by huge pages
    /// (see the module docs). Such a buffer may be a kept one, holding old
    /// bytes past its length 0: initialised, but not zeros (`padded` zeroes
    /// whatever it sends past the filled length).
    pub fn for_direct_io(capacity: usize, mem_align: usize, block: usize) -> Result<Self> {
        let huge = sys::huge_page_size();
        let mut align = direct_io_align(mem_align);
        if capacity >= huge {
            align = align.max(huge);
        }
        let pooled = capacity >= huge;
        let (mut buf, kept) = Self::allocate(capacity, align, block.max(1), pooled)?;
        buf.pooled = pooled;
        if kept {
            // Already advised and initialised.
            return Ok(buf);
        }
        if pooled {
            let whole = capacity - capacity % huge;
            // SAFETY: the buffer's memory is this allocation of `capacity`
            // bytes (>= `whole`), starting on a huge page boundary (so also
            // a page boundary), owned by `buf` alone.
            // A refusal (THP compiled out) only leaves small pages.
            let _ = unsafe { sys::advise_huge_pages(buf.ptr.as_ptr(), whole) };
        }
        // Zeroed after the advice, so the first touch faults in huge pages.
        buf.zero_fresh();
        Ok(buf)
    }

    /// A buffer for one direct transfer of an odd size (a span of a user
    /// read): aligned as [`for_direct_io`](Self::for_direct_io) does, but
    /// never taken from or given to the spare pool, whose point is the
    /// few sizes files use over and over.
    pub fn for_direct_io_once(capacity: usize, mem_align: usize, block: usize) -> Result<Self> {
        Self::with_block(capacity, direct_io_align(mem_align), block.max(1))
    }

    /// Whether this buffer came from the spare pool.
    #[cfg(test)]
    fn was_kept(&self) -> bool {
        self.kept
    }

    fn with_block(capacity: usize, align: usize, block: usize) -> Result<Self> {
        let (mut buf, _) = Self::allocate(capacity, align, block, false)?;
        buf.zero_fresh();
        Ok(buf)
    }

    /// Zeroes a fresh allocation, so that padding written after a short
    /// tail is zeros, never stale heap bytes, and no byte is ever read
    /// uninitialised.
    fn zero_fresh(&mut self) {
        // SAFETY: `ptr` points at `capacity` writable bytes owned by `self`;
        // writing them needs no initialised contents.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), 0, self.capacity()) }
    }

    /// An allocation of `capacity` bytes at `align`, not yet zeroed: callers
    /// call `zero_fresh` before anything else. With `take_kept`, a kept
    /// buffer of the same layout is taken instead when there is one, and
    /// the second value says so (it is initialised already).
    fn allocate(
        capacity: usize,
        align: usize,
        block: usize,
        take_kept: bool,
    ) -> Result<(Self, bool)> {
        for (what, v) in [("alignment", align), ("block size", block)] {
            if v == 0 || !v.is_power_of_two() {
                return Err(Error::invalid(format!(
                    "buffer {what} must be a power of two, got {v}"
                )));
            }
        }
        if capacity == 0 || !capacity.is_multiple_of(block) {
            return Err(Error::invalid(format!(
                "buffer size must be a positive multiple of the block size {block}, got {capacity}"
            )));
        }
        let layout = Layout::from_size_align(capacity, align)
            .map_err(|e| Error::invalid(format!("bad buffer layout: {e}")))?;
        let kept = if take_kept {
            SPARE_HUGE.take(&layout)
        } else {
            None
        };
        let (ptr, was_kept) = match kept {
            Some(spare) => (spare.into_ptr(), true),
            None => {
                // SAFETY: `layout` has a nonzero size (capacity > 0 is
                // checked above).
                let raw = unsafe { alloc::alloc(layout) };
                let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
                (ptr, false)
            }
        };
        let buf = AlignedBuf {
            ptr,
            layout,
            block,
            len: 0,
            pooled: false,
            #[cfg(test)]
            kept: was_kept,
        };
        Ok((buf, was_kept))
    }

    /// The size in bytes, fixed at allocation: a positive multiple of
    /// [`block`](Self::block).
    pub fn capacity(&self) -> usize {
        self.layout.size()
    }

    /// Alignment of the buffer's address.
    pub fn align(&self) -> usize {
        self.layout.align()
    }

    /// The unit a padded tail is rounded up to.
    pub fn block(&self) -> usize {
        self.block
    }

    /// Bytes filled so far: the length of [`as_slice`](Self::as_slice).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is filled (`len() == 0`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes that still fit: `capacity() - len()`.
    pub fn remaining(&self) -> usize {
        self.capacity() - self.len
    }

    /// The filled part.
    pub fn as_slice(&self) -> &[u8] {
        &self.full()[..self.len]
    }

    /// The whole capacity, filled or not.
    pub fn full(&self) -> &[u8] {
        // SAFETY: `ptr` points at an allocation of `capacity` bytes, all
        // initialised (zeroed at allocation), alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.capacity()) }
    }

    /// The whole capacity, mutable (for reading into it).
    pub fn full_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `full`, and `&mut self` makes this the only
        // reference to the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity()) }
    }

    /// Appends as much of `data` as fits; returns how many bytes were taken.
    pub fn extend_from(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.remaining());
        let start = self.len;
        self.full_mut()[start..start + n].copy_from_slice(&data[..n]);
        self.len += n;
        n
    }

    /// Sets the filled length (after reading into `full_mut`).
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity(), "length beyond capacity");
        self.len = len;
    }

    /// The filled bytes rounded up to the block size, with the bytes past
    /// `len` zeroed: what a direct write of a partial tail must send.
    pub fn padded(&mut self) -> &[u8] {
        let padded = self.len.next_multiple_of(self.block).min(self.capacity());
        let len = self.len;
        self.full_mut()[len..padded].fill(0);
        &self.full()[..padded]
    }

    /// Keeps only the bytes from `from` on, moved to the start.
    pub fn consume_front(&mut self, from: usize) {
        assert!(from <= self.len, "consume past length");
        let len = self.len;
        self.full_mut().copy_within(from..len, 0);
        self.len = len - from;
    }

    /// Empties the buffer (length 0), keeping its allocation. The old bytes
    /// stay in memory; [`padded`](Self::padded) zeroes whatever it sends
    /// past the filled length.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.pooled {
            let spare = Spare {
                ptr: self.ptr,
                layout: self.layout,
            };
            SPARE_HUGE.keep(self.layout, self.layout.size(), spare);
            return;
        }
        // SAFETY: `ptr` was allocated in `new` with exactly `layout` and is
        // freed only here, once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .field("align", &self.align())
            .field("block", &self.block)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_aligned_and_zeroed() {
        let b = AlignedBuf::new(8192, 4096).unwrap();
        assert_eq!(b.full().as_ptr() as usize % 4096, 0);
        assert!(b.full().iter().all(|x| *x == 0));
    }

    #[test]
    fn direct_io_buffers_start_on_a_page_even_when_512_would_do() {
        let page = sys::page_size();
        assert_eq!(direct_io_align(512), page);
        assert_eq!(direct_io_align(0), page);
        assert_eq!(direct_io_align(4 * page), 4 * page);
        // Many small buffers: the heap hands out 512-aligned addresses
        // inside pages unless asked for a page.
        let bufs: Vec<AlignedBuf> = (0..64)
            .map(|_| AlignedBuf::for_direct_io(1536, 512, 512).unwrap())
            .collect();
        for b in &bufs {
            assert_eq!(b.full().as_ptr() as usize % page, 0, "{b:?}");
            assert_eq!(b.capacity(), 1536);
            assert_eq!(b.block(), 512);
        }
        assert!(AlignedBuf::for_direct_io(1000, 512, 512).is_err());
    }

    #[test]
    fn huge_direct_buffers_are_aligned_and_advised_for_huge_pages() {
        let huge = sys::huge_page_size();
        // An odd size, so that no other test's kept buffer is handed out.
        let b = AlignedBuf::for_direct_io(2 * huge + 8192, 512, 512).unwrap();
        let addr = b.full().as_ptr() as usize;
        assert_eq!(addr % huge, 0, "{b:?}");
        assert!(b.full().iter().all(|x| *x == 0));
        // Below a huge page: a page boundary is enough.
        let small = AlignedBuf::for_direct_io(huge / 2, 512, 512).unwrap();
        assert_eq!(small.align(), sys::page_size());
        // Where THP can be used, the kernel marks the buffer's range as
        // eligible for huge pages (the madvise reached it).
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if thp.is_empty() || thp.contains("[never]") {
            return;
        }
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut in_range = false;
        let mut eligible = None;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    in_range = lo <= addr && addr < hi;
                    continue;
                }
            }
            if in_range {
                if let Some(v) = line.strip_prefix("THPeligible:") {
                    eligible = Some(v.trim() == "1");
                }
            }
        }
        assert_eq!(
            eligible,
            Some(true),
            "the buffer's mapping is not THP-eligible"
        );
    }

    #[test]
    fn freed_huge_direct_buffers_are_reused_not_reallocated() {
        let huge = sys::huge_page_size();
        // A size no other test asks for, so the kept buffer is this one's.
        let size = 3 * huge + 4096;
        let mut first = AlignedBuf::for_direct_io(size, 512, 512).unwrap();
        first.extend_from(&[9u8; 700]);
        let addr = first.full().as_ptr() as usize;
        drop(first);
        let mut again = AlignedBuf::for_direct_io(size, 512, 512).unwrap();
        assert!(again.was_kept(), "not taken from the pool");
        assert_eq!(again.full().as_ptr() as usize, addr, "not the kept buffer");
        // Empty, aligned as before; old bytes never leave through `padded`.
        assert_eq!(again.len(), 0);
        assert_eq!(addr % huge, 0);
        again.extend_from(&[1u8; 10]);
        let p = again.padded();
        assert_eq!(p.len(), 512);
        assert!(p[10..].iter().all(|x| *x == 0));
        // Buffers that are not direct huge ones are never kept.
        for plain in [
            AlignedBuf::new(size, 4096).unwrap(),
            AlignedBuf::for_direct_io_once(size, 512, 512).unwrap(),
        ] {
            drop(plain);
            let fresh = AlignedBuf::for_direct_io_once(size, 512, 512).unwrap();
            assert!(!fresh.was_kept());
            assert!(fresh.full().iter().all(|x| *x == 0));
        }
        // The pool gives its memory back on request.
        drop(again);
        release_spare_buffers();
        let b = AlignedBuf::for_direct_io(size, 512, 512).unwrap();
        assert!(!b.was_kept(), "released, so allocated anew");
        assert!(b.full().iter().all(|x| *x == 0));
    }

    #[test]
    fn padded_rounds_to_the_block_not_the_page() {
        let mut b = AlignedBuf::for_direct_io(8192, 512, 512).unwrap();
        b.extend_from(&[7u8; 600]);
        assert_eq!(b.padded().len(), 1024);
    }

    #[test]
    fn audit_counts_off_page_buffers_and_odd_lengths() {
        let page = sys::page_size();
        let buf = AlignedBuf::for_direct_io(2 * page, 512, 512).unwrap();
        let before = direct_io_audit();
        note_direct_io(buf.full().as_ptr(), page, 512);
        // SAFETY: 512 is within the buffer's 2 * page bytes.
        note_direct_io(unsafe { buf.full().as_ptr().add(512) }, 512, 512);
        note_direct_io(buf.full().as_ptr(), 100, 512);
        let after = direct_io_audit();
        // Other tests may count their own I/O at the same time: at least.
        assert!(after.ios - before.ios >= 3);
        assert!(after.off_page - before.off_page >= 1);
        assert!(after.bad_length - before.bad_length >= 1);
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(AlignedBuf::new(0, 512).is_err());
        assert!(AlignedBuf::new(1000, 512).is_err());
        assert!(AlignedBuf::new(1024, 3).is_err());
    }

    #[test]
    fn padded_zeroes_tail_and_consume_moves() {
        let mut b = AlignedBuf::new(2048, 512).unwrap();
        b.full_mut().fill(0xAB);
        b.set_len(0);
        assert_eq!(b.extend_from(&[1u8; 600]), 600);
        let p = b.padded();
        assert_eq!(p.len(), 1024);
        assert!(p[600..].iter().all(|x| *x == 0));
        b.consume_front(512);
        assert_eq!(b.len(), 88);
        assert!(b.as_slice().iter().all(|x| *x == 1));
        assert_eq!(b.extend_from(&[2u8; 5000]), 2048 - 88);
    }
}
