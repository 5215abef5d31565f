//! The memtable's ordered index: a skiplist whose nodes live in an
//! [`Arena`], ordered by internal key, with one writer at a time and any
//! number of lock-free readers.
//!
//! # Node layout
//!
//! Each node is one arena allocation, aligned to 8 bytes:
//!
//! ```text
//! value: AtomicPtr<u8>  -> value block: len: u32 (native endian) | bytes
//! key_len: u32 | height: u32
//! next: [AtomicPtr<Node>; height]
//! key: key_len bytes (the encoded internal key: user key | 8-byte trailer)
//! value block of the first insert (unaligned)
//! ```
//!
//! The value is reached through a pointer so that inserting the same
//! internal key again can replace it atomically; normally it points just
//! past the key in the same allocation.
//!
//! # Why readers never see a half-built node
//!
//! The writer fills a node completely (key, value, its own `next`
//! pointers) before linking it in, and links it with `Release` stores;
//! readers follow links with `Acquire` loads, so a reader that reaches a
//! node also sees everything written to it before it was linked. Nodes are
//! never unlinked or freed before the whole list is dropped, so a pointer a
//! reader loaded stays valid for as long as it borrows the list.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use parking_lot::Mutex;

use super::arena::Arena;
use crate::key::TRAILER_LEN;

/// Towers are at most this tall; with a branching factor of 4 that indexes
/// tens of millions of entries at full speed, far more than a memtable holds.
pub(super) const MAX_HEIGHT: usize = 12;
/// One node in this many is promoted to the next level.
const BRANCHING: u64 = 4;

/// Bytes before the tower: the value pointer, key length and height.
const HEADER: usize = 16;
const VALUE_LEN_BYTES: usize = 4;

/// Opaque node type: only ever used behind raw pointers into the arena,
/// because a node's real size depends on its height and key length.
pub(super) enum Node {}

/// A key to search for, split once into the parts the order compares:
/// user key ascending, then trailer (sequence and kind) descending.
#[derive(Clone, Copy)]
pub(super) struct SearchKey<'a> {
    user_key: &'a [u8],
    trailer: u64,
}

impl<'a> SearchKey<'a> {
    pub(super) fn new(user_key: &'a [u8], trailer: u64) -> Self {
        SearchKey { user_key, trailer }
    }

    /// Splits an encoded internal key the way
    /// [`crate::key::compare_internal`] does: a key shorter than its
    /// trailer is all user key, with trailer 0.
    pub(super) fn from_internal(ikey: &'a [u8]) -> Self {
        match ikey.len().checked_sub(TRAILER_LEN) {
            Some(n) => {
                let (user_key, t) = ikey.split_at(n);
                SearchKey::new(user_key, u64::from_le_bytes(t.try_into().expect("8 bytes")))
            }
            None => SearchKey::new(ikey, 0),
        }
    }
}

/// What the single writer owns: the arena and the tower-height generator.
struct WriterState {
    arena: Arena,
    rng: u64,
}

pub(super) struct SkipList {
    /// The head's tower; `head[i]` is the first node of level `i`. Boxed so
    /// its address is stable for the pointers a search hands around.
    head: Box<[AtomicPtr<Node>; MAX_HEIGHT]>,
    /// Height of the tallest tower so far. Readers may see a stale value:
    /// a lower one just starts them lower, a higher one finds null links.
    height: AtomicUsize,
    len: AtomicUsize,
    /// Arena bytes in use, readable without the writer lock.
    used: AtomicUsize,
    /// Taken by every insert. The engine already serialises writers, so
    /// the lock is never contended; it keeps a misuse of the memtable from
    /// ever corrupting the arena.
    writer: Mutex<WriterState>,
}

/// A node of a live list, valid for as long as the list is borrowed.
#[derive(Clone, Copy)]
pub(super) struct NodeRef<'a> {
    ptr: NonNull<Node>,
    _list: PhantomData<&'a SkipList>,
}

/// A position during a search: the head (`None`) or a node.
type Pos = Option<NonNull<Node>>;

impl SkipList {
    pub(super) fn new() -> Self {
        SkipList {
            head: Box::new(std::array::from_fn(
                |_| AtomicPtr::new(std::ptr::null_mut()),
            )),
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            used: AtomicUsize::new(0),
            writer: Mutex::new(WriterState {
                arena: Arena::new(),
                rng: 0x2545_F491_4F6C_DD1D,
            }),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    /// Arena bytes used by nodes, keys and values.
    pub(super) fn used_bytes(&self) -> usize {
        self.used.load(Relaxed)
    }

    /// The link slot of `pos` at `level`.
    ///
    /// # Safety
    /// `pos` must be the head or a node of this list whose height is
    /// greater than `level`.
    unsafe fn link(&self, pos: Pos, level: usize) -> &AtomicPtr<Node> {
        match pos {
            None => &self.head[level],
            // SAFETY: the caller guarantees `node` is a node of this list
            // (so it lives until the list is dropped, which `&self`
            // prevents) with at least `level + 1` tower slots.
            Some(node) => unsafe { &*tower(node).add(level) },
        }
    }

    /// The next node after `pos` at `level`.
    ///
    /// # Safety
    /// As for [`Self::link`].
    unsafe fn next(&self, pos: Pos, level: usize) -> Pos {
        // SAFETY: forwarded from the caller.
        NonNull::new(unsafe { self.link(pos, level) }.load(Acquire))
    }

    /// Walks down from the top, at each level advancing while the next
    /// node is before `key`. Returns the last position per level (in
    /// `prev` if given) and, at level 0, that position and the node after
    /// it: the last node before `key` and the first node not before it.
    fn search(&self, key: SearchKey<'_>, mut prev: Option<&mut [Pos; MAX_HEIGHT]>) -> (Pos, Pos) {
        let mut pos: Pos = None;
        let mut level = self.height.load(Relaxed) - 1;
        loop {
            // SAFETY: `pos` is the head or a node reached by following this
            // list's links at a level >= `level`, so its height > `level`.
            let next = unsafe { self.next(pos, level) };
            // SAFETY: `n` was loaded from this list's links.
            let advance = next.is_some_and(|n| unsafe { compare(n, key) }.is_lt());
            if advance {
                pos = next;
                continue;
            }
            if let Some(prev) = prev.as_deref_mut() {
                prev[level] = pos;
            }
            if level == 0 {
                return (pos, next);
            }
            level -= 1;
        }
    }

    /// The first node whose key is >= `key`.
    pub(super) fn seek(&self, key: SearchKey<'_>) -> Option<NodeRef<'_>> {
        self.search(key, None).1.map(|p| self.node_ref(p))
    }

    /// The last node whose key is < `key`.
    pub(super) fn seek_before(&self, key: SearchKey<'_>) -> Option<NodeRef<'_>> {
        self.search(key, None).0.map(|p| self.node_ref(p))
    }

    pub(super) fn first(&self) -> Option<NodeRef<'_>> {
        // SAFETY: the head has every level.
        unsafe { self.next(None, 0) }.map(|p| self.node_ref(p))
    }

    pub(super) fn last(&self) -> Option<NodeRef<'_>> {
        let mut pos: Pos = None;
        let mut level = self.height.load(Relaxed) - 1;
        loop {
            // SAFETY: as in `search`: `pos` was reached at a level >= `level`.
            match unsafe { self.next(pos, level) } {
                Some(n) => pos = Some(n),
                None if level == 0 => return pos.map(|p| self.node_ref(p)),
                None => level -= 1,
            }
        }
    }

    fn node_ref(&self, ptr: NonNull<Node>) -> NodeRef<'_> {
        NodeRef {
            ptr,
            _list: PhantomData,
        }
    }

    /// Rebuilds a reference from [`NodeRef::as_ptr`].
    ///
    /// # Safety
    /// `ptr` must come from a `NodeRef` of this same list.
    pub(super) unsafe fn node_from_ptr(&self, ptr: NonNull<Node>) -> NodeRef<'_> {
        self.node_ref(ptr)
    }

    /// Inserts `user_key` with `trailer` and `value`. If that exact internal
    /// key is present already its value is replaced instead.
    pub(super) fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) {
        let value_len = u32::try_from(value.len()).expect("batch limits keep values under 4 GiB");
        let key_len = u32::try_from(user_key.len() + TRAILER_LEN)
            .expect("batch limits keep keys under 4 GiB");
        let mut w = self.writer.lock();
        let key = SearchKey::new(user_key, trailer);
        let mut prev: [Pos; MAX_HEIGHT] = [None; MAX_HEIGHT];
        let (_, at) = self.search(key, Some(&mut prev));
        if let Some(n) = at {
            // SAFETY: `n` was loaded from this list's links.
            if unsafe { compare(n, key) } == Ordering::Equal {
                let block = w.arena.allocate(VALUE_LEN_BYTES + value.len());
                // SAFETY: `block` has room for the length and the bytes and
                // is not yet visible to anyone.
                unsafe { write_value_block(block.as_ptr(), value_len, value) };
                self.used.store(w.arena.used(), Relaxed);
                // SAFETY: `n` is a node of this list; its value slot is at
                // offset 0. Release publishes the block's contents.
                unsafe { value_slot(n) }.store(block.as_ptr(), Release);
                return;
            }
        }

        let height = random_height(&mut w.rng);
        let tower_bytes = height * size_of::<AtomicPtr<Node>>();
        let size = HEADER + tower_bytes + key_len as usize + VALUE_LEN_BYTES + value.len();
        let base = w.arena.allocate(size).as_ptr();
        // SAFETY: `base` is a fresh, 8-aligned allocation of `size` bytes
        // that no other thread can reach until it is linked below; every
        // write stays inside it (the offsets add up to `size`), and the
        // atomics are written at 8-aligned offsets (HEADER is 16).
        let node = unsafe {
            let key_at = base.add(HEADER + tower_bytes);
            let value_at = key_at.add(key_len as usize);
            std::ptr::copy_nonoverlapping(user_key.as_ptr(), key_at, user_key.len());
            std::ptr::copy_nonoverlapping(
                trailer.to_le_bytes().as_ptr(),
                key_at.add(user_key.len()),
                TRAILER_LEN,
            );
            write_value_block(value_at, value_len, value);
            base.cast::<AtomicPtr<u8>>().write(AtomicPtr::new(value_at));
            base.add(8).cast::<u32>().write(key_len);
            base.add(12).cast::<u32>().write(height as u32);
            let node = NonNull::new_unchecked(base.cast::<Node>());
            for (level, p) in prev.iter().enumerate().take(height) {
                let next = self.link(*p, level).load(Acquire);
                tower(node).add(level).write(AtomicPtr::new(next));
            }
            node
        };
        self.used.store(w.arena.used(), Relaxed);
        let old_height = self.height.load(Relaxed);
        if height > old_height {
            // Levels above the old height start at the head: `prev` was only
            // filled up to the old height, and the rest is still `None`.
            self.height.store(height, Relaxed);
        }
        for (level, p) in prev.iter().enumerate().take(height) {
            // SAFETY: `p` is the head or a node of this list that the search
            // stopped at on `level`, so it has that level. The writer lock is
            // held since the search, so nothing was linked after `p` in the
            // meantime and the new node keeps the order. Linking bottom-up
            // with Release makes the node's contents visible to any reader
            // that finds it through any level.
            unsafe { self.link(*p, level) }.store(node.as_ptr(), Release);
        }
        self.len.fetch_add(1, Relaxed);
        drop(w);
    }
}

impl<'a> NodeRef<'a> {
    pub(super) fn as_ptr(self) -> NonNull<Node> {
        self.ptr
    }

    /// The encoded internal key.
    pub(super) fn key(self) -> &'a [u8] {
        // SAFETY: the node belongs to a list borrowed for 'a, whose arena
        // outlives the borrow; key_len and height were written before the
        // node was published and never change.
        unsafe { key_of(self.ptr) }
    }

    pub(super) fn value(self) -> &'a [u8] {
        // SAFETY: as for `key`; the value pointer always points to a
        // complete value block in the same arena (published with Release,
        // loaded with Acquire).
        unsafe {
            let block = value_slot(self.ptr).load(Acquire);
            read_value_block(block)
        }
    }

    pub(super) fn next(self) -> Option<NodeRef<'a>> {
        // SAFETY: every node has at least level 0; the list outlives 'a.
        let next = unsafe { &*tower(self.ptr) }.load(Acquire);
        NonNull::new(next).map(|ptr| NodeRef {
            ptr,
            _list: PhantomData,
        })
    }
}

/// # Safety (all helpers below)
/// `node` must point to a fully written node of a live list.
unsafe fn tower(node: NonNull<Node>) -> *mut AtomicPtr<Node> {
    // SAFETY: the tower starts HEADER bytes into the node's allocation.
    unsafe { node.as_ptr().cast::<u8>().add(HEADER).cast() }
}

unsafe fn value_slot<'a>(node: NonNull<Node>) -> &'a AtomicPtr<u8> {
    // SAFETY: the value pointer is the node's first field, 8-aligned.
    unsafe { &*node.as_ptr().cast::<AtomicPtr<u8>>() }
}

unsafe fn key_of<'a>(node: NonNull<Node>) -> &'a [u8] {
    // SAFETY: key_len and height sit at offsets 8 and 12 and the key right
    // after the tower, all inside the node's allocation.
    unsafe {
        let base = node.as_ptr().cast::<u8>();
        let key_len = base.add(8).cast::<u32>().read() as usize;
        let height = base.add(12).cast::<u32>().read() as usize;
        let key_at = base.add(HEADER + height * size_of::<AtomicPtr<Node>>());
        std::slice::from_raw_parts(key_at, key_len)
    }
}

/// Orders `node` against `key`: one slice compare of the user keys, then
/// the trailers as integers (descending: newer first).
unsafe fn compare(node: NonNull<Node>, key: SearchKey<'_>) -> Ordering {
    // SAFETY: forwarded; a node's key always holds its 8-byte trailer.
    let k = unsafe { key_of(node) };
    let (user_key, t) = k.split_at(k.len() - TRAILER_LEN);
    compare_bytes(user_key, key.user_key).then_with(|| {
        let trailer = u64::from_le_bytes(t.try_into().expect("8 bytes"));
        key.trailer.cmp(&trailer)
    })
}

/// Lexicographic byte order, the same as `a.cmp(b)` on slices, but eight
/// bytes at a time inline: the search compares short keys millions of
/// times a second, and a call into `memcmp` per step costs more than the
/// comparison itself. Big-endian words order like their bytes.
fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut a8, mut b8) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (x, y) in (&mut a8).zip(&mut b8) {
        let x = u64::from_be_bytes(x.try_into().expect("8 bytes"));
        let y = u64::from_be_bytes(y.try_into().expect("8 bytes"));
        if x != y {
            return x.cmp(&y);
        }
    }
    for (x, y) in a8.remainder().iter().zip(b8.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// # Safety
/// `at` must have room for `VALUE_LEN_BYTES + value.len()` bytes.
unsafe fn write_value_block(at: *mut u8, len: u32, value: &[u8]) {
    // SAFETY: forwarded from the caller; unaligned writes need no alignment.
    unsafe {
        at.cast::<[u8; VALUE_LEN_BYTES]>()
            .write_unaligned(len.to_ne_bytes());
        std::ptr::copy_nonoverlapping(value.as_ptr(), at.add(VALUE_LEN_BYTES), value.len());
    }
}

/// # Safety
/// `at` must point to a complete value block that lives for 'a.
unsafe fn read_value_block<'a>(at: *const u8) -> &'a [u8] {
    // SAFETY: forwarded from the caller.
    unsafe {
        let len = u32::from_ne_bytes(at.cast::<[u8; VALUE_LEN_BYTES]>().read_unaligned());
        std::slice::from_raw_parts(at.add(VALUE_LEN_BYTES), len as usize)
    }
}

fn random_height(rng: &mut u64) -> usize {
    let mut height = 1;
    while height < MAX_HEIGHT {
        // xorshift64: cheap, and the quality is ample for tower heights.
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        if !rng.is_multiple_of(BRANCHING) {
            break;
        }
        height += 1;
    }
    height
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn compare_bytes_is_slice_order(
            a in prop::collection::vec(0u8..4, 0..40),
            b in prop::collection::vec(0u8..4, 0..40),
            shared in 0usize..40,
        ) {
            // A shared prefix makes long equal runs (and equal keys) likely.
            let mut b2 = a[..shared.min(a.len())].to_vec();
            b2.extend_from_slice(&b);
            prop_assert_eq!(compare_bytes(&a, &b2), a.cmp(&b2));
            prop_assert_eq!(compare_bytes(&b2, &a), b2.cmp(&a));
            prop_assert_eq!(compare_bytes(&a, &a), Ordering::Equal);
        }
    }

    #[test]
    fn tower_heights_stay_in_range_and_thin_out() {
        let mut rng = 1u64;
        let mut counts = [0usize; MAX_HEIGHT + 1];
        for _ in 0..100_000 {
            counts[random_height(&mut rng)] += 1;
        }
        assert_eq!(counts[0], 0);
        // About three in four towers have height 1, one in four reach 2.
        assert!((70_000..80_000).contains(&counts[1]), "{counts:?}");
        assert!(counts[2] > counts[3] && counts[3] > counts[4], "{counts:?}");
    }
}
