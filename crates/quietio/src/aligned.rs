//! A heap buffer whose address and capacity are multiples of an alignment,
//! as O_DIRECT requires.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::error::{Error, Result};

/// An aligned, zero-initialised byte buffer with a fixed capacity and a
/// current length.
///
/// Allocated and freed with the same explicit `Layout`: turning it into a
/// `Vec<u8>` would free it with the wrong alignment, so it never is.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
    len: usize,
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
        if align == 0 || !align.is_power_of_two() {
            return Err(Error::invalid(format!(
                "buffer alignment must be a power of two, got {align}"
            )));
        }
        if capacity == 0 || !capacity.is_multiple_of(align) {
            return Err(Error::invalid(format!(
                "buffer size must be a positive multiple of the alignment {align}, got {capacity}"
            )));
        }
        let layout = Layout::from_size_align(capacity, align)
            .map_err(|e| Error::invalid(format!("bad buffer layout: {e}")))?;
        // Zeroed so padding written after a short tail is zeros, never stale heap bytes.
        // SAFETY: `layout` has a nonzero size (capacity > 0 is checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Ok(AlignedBuf {
            ptr,
            layout,
            len: 0,
        })
    }

    pub fn capacity(&self) -> usize {
        self.layout.size()
    }

    pub fn align(&self) -> usize {
        self.layout.align()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

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

    /// The filled bytes rounded up to the alignment, with the bytes past
    /// `len` zeroed: what a direct write of a partial tail must send.
    pub fn padded(&mut self) -> &[u8] {
        let padded = self.len.next_multiple_of(self.align()).min(self.capacity());
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

    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
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
