//! A bump allocator for one memtable: memory is handed out from large
//! chunks and never freed piece by piece; every chunk is returned to the
//! system allocator in one go when the arena is dropped.
//!
//! This makes an insert into the memtable one pointer bump instead of
//! several `malloc` calls, and dropping a flushed memtable a handful of
//! `free` calls instead of one per entry.
//!
//! Chunks of [`MAPPED_CHUNK`] or more are mapped from the kernel directly
//! and unmapped when the arena is dropped, so a flushed memtable's memory
//! leaves the process at once. Through the system allocator it would not:
//! glibc raises its threshold for mapping a block to the size of the
//! first mapped block freed, so later chunks come from its heaps and,
//! freed, stay resident there for reuse. Every memtable the process ever
//! had in memory at once then stays resident, and under a memory limit
//! that is memory the page cache does not get.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use quietio::sys::AnonymousMap;

/// Every allocation is aligned to this: the skiplist nodes start with
/// pointer-sized atomics.
pub(super) const ALIGN: usize = 8;

/// The first chunk is small so that many small or short-lived memtables
/// (tests, repair, tiny write buffers) cost little; later chunks double up
/// to [`MAX_CHUNK`], which keeps the number of chunks of a 64 MiB memtable
/// small without reserving much unused memory at the end.
const FIRST_CHUNK: usize = 64 << 10;
const MAX_CHUNK: usize = 4 << 20;
/// Chunks this large or larger are mapped and unmapped directly.
const MAPPED_CHUNK: usize = 1 << 20;

/// Where a chunk came from, and so how it is given back.
enum Chunk {
    /// The system allocator, with this layout.
    Heap(NonNull<u8>, Layout),
    /// A mapping of its own, unmapped when dropped.
    Mapped(AnonymousMap),
}

pub(super) struct Arena {
    /// Every chunk ever allocated, to free on drop.
    chunks: Vec<Chunk>,
    /// Next free byte of the current chunk and the end of that chunk.
    /// Both are null before the first allocation.
    cur: *mut u8,
    end: *mut u8,
    /// Size of the next regular chunk.
    next_chunk: usize,
    /// Bytes handed out, including alignment padding.
    used: usize,
}

// SAFETY: the arena owns its chunks exclusively (like a `Vec<u8>` owns its
// buffer); the raw pointers are not shared with anything that outlives it,
// so moving it to another thread or sharing `&Arena` (which allows no
// mutation) is as safe as for a `Vec`.
unsafe impl Send for Arena {}
// SAFETY: as for Send: `&Arena` only reads the bookkeeping fields.
unsafe impl Sync for Arena {}

impl Arena {
    pub(super) fn new() -> Self {
        Arena {
            chunks: Vec::new(),
            cur: std::ptr::null_mut(),
            end: std::ptr::null_mut(),
            next_chunk: FIRST_CHUNK,
            used: 0,
        }
    }

    /// Bytes handed out so far (requested sizes rounded up to [`ALIGN`]).
    pub(super) fn used(&self) -> usize {
        self.used
    }

    /// `size` bytes aligned to [`ALIGN`], uninitialised, valid until the
    /// arena is dropped. The memory is never handed out twice.
    pub(super) fn allocate(&mut self, size: usize) -> NonNull<u8> {
        let size = size.max(1).next_multiple_of(ALIGN);
        let room = self.end as usize - self.cur as usize;
        if size > room {
            if size > self.next_chunk / 4 {
                // A large entry gets a chunk of its own, so the rest of the
                // current chunk is not wasted.
                self.used += size;
                return self.new_chunk(size);
            }
            let chunk_size = self.next_chunk;
            self.next_chunk = (self.next_chunk * 2).min(MAX_CHUNK);
            let chunk = self.new_chunk(chunk_size);
            self.cur = chunk.as_ptr();
            // SAFETY: `chunk` is the start of an allocation of `chunk_size`
            // bytes, so one past its end is in bounds for `add`.
            self.end = unsafe { self.cur.add(chunk_size) };
        }
        let p = self.cur;
        // SAFETY: `size <= end - cur` (checked above or guaranteed by the
        // fresh chunk, which is at least four times larger than `size`), so
        // the result stays within the current chunk or one past its end.
        self.cur = unsafe { p.add(size) };
        self.used += size;
        // SAFETY: `cur` is non-null here: it points into a chunk returned
        // by the allocator.
        unsafe { NonNull::new_unchecked(p) }
    }

    fn new_chunk(&mut self, size: usize) -> NonNull<u8> {
        if size >= MAPPED_CHUNK {
            if let Ok(m) = AnonymousMap::populated(size) {
                // Page-aligned, so ALIGN-aligned.
                let p = m.as_ptr();
                self.chunks.push(Chunk::Mapped(m));
                return p;
            }
            // Refused (address space or a mapping limit): the allocator
            // may still find the memory.
        }
        let layout = Layout::from_size_align(size, ALIGN)
            .expect("a memtable chunk size fits the address space");
        // SAFETY: `layout` has a non-zero size (`allocate` asks for at least
        // ALIGN bytes and chunks are larger).
        let p = unsafe { alloc(layout) };
        let Some(p) = NonNull::new(p) else {
            handle_alloc_error(layout)
        };
        self.chunks.push(Chunk::Heap(p, layout));
        p
    }

    /// Bytes of the chunks mapped directly (given back to the kernel on
    /// drop).
    #[cfg(test)]
    fn mapped_bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| match c {
                Chunk::Mapped(m) => m.len(),
                Chunk::Heap(..) => 0,
            })
            .sum()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for chunk in self.chunks.drain(..) {
            match chunk {
                // SAFETY: each chunk was allocated by `new_chunk` with exactly
                // this layout and is freed once (drain removes it from the
                // list).
                Chunk::Heap(p, layout) => unsafe { dealloc(p.as_ptr(), layout) },
                // Unmapped as it drops; nothing borrows from the arena any
                // more.
                Chunk::Mapped(m) => drop(m),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_counted() {
        let mut a = Arena::new();
        assert_eq!(a.used(), 0);
        let mut spans = Vec::new();
        for size in [1usize, 7, 8, 9, 100, 5000, 70_000, 3, 1 << 20, 16] {
            let p = a.allocate(size);
            assert_eq!(p.as_ptr() as usize % ALIGN, 0, "size {size}");
            // SAFETY: `allocate` hands out `size` writable bytes; writing
            // all of them checks that (Miri flags out-of-bounds writes).
            unsafe { std::ptr::write_bytes(p.as_ptr(), 0xab, size) };
            spans.push((p.as_ptr() as usize, size));
        }
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap: {w:?}");
        }
        let want: usize = [1usize, 7, 8, 9, 100, 5000, 70_000, 3, 1 << 20, 16]
            .iter()
            .map(|s| s.next_multiple_of(ALIGN))
            .sum();
        assert_eq!(a.used(), want);
    }

    /// A memtable's worth of entries lands mostly in mapped chunks: the
    /// small first chunks come from the allocator, every chunk from
    /// [`MAPPED_CHUNK`] up (and an entry that large) is mapped.
    #[test]
    fn large_chunks_are_mapped_and_small_ones_are_not() {
        let mut a = Arena::new();
        for _ in 0..(16 << 20) / 128 {
            let p = a.allocate(128);
            // SAFETY: 128 writable bytes from `allocate`.
            unsafe { std::ptr::write_bytes(p.as_ptr(), 1, 128) };
        }
        let mapped = a.mapped_bytes();
        assert!(mapped >= 15 << 20, "{mapped} of 16 MiB mapped");
        let small = Arena::new().mapped_bytes();
        assert_eq!(small, 0);
        let mut b = Arena::new();
        b.allocate(100);
        assert_eq!(
            b.mapped_bytes(),
            0,
            "a 64 KiB first chunk is the allocator's"
        );
        b.allocate(3 << 20);
        assert_eq!(
            b.mapped_bytes(),
            3 << 20,
            "a large entry's own chunk is mapped"
        );
    }
}
