//! [`Value`]: the bytes of a value read without copying them, sharing the
//! memory they already live in (a table's decoded block or a memtable),
//! the way RocksDB's `PinnableSlice` pins a block or fjall's `Slice` shares
//! its buffer.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

/// A value read with [`Db::get_pinned`](crate::Db::get_pinned) (or the
/// same method of a [`Snapshot`](crate::Snapshot) or a
/// [`Transaction`](crate::Transaction)): the value's bytes, read in place.
///
/// It dereferences to `[u8]`, compares with byte strings, and clones
/// cheaply (a reference count, not the bytes). It is `Send + Sync +
/// 'static`: it owns what it points into, so it outlives the read, the
/// `Db` handle and any later writes, flushes or compactions, and always
/// reads the same bytes.
///
/// # What a `Value` keeps in memory
///
/// To avoid the copy, a `Value` shares the memory its bytes are in, and
/// keeps that memory alive (pinned) until the last clone is dropped:
///
/// - A value found in a table pins the one decoded data block it is in:
///   about [`Options::block_size`](crate::Options) bytes (a block holding a
///   single larger value is that value's size). When the block is evicted
///   from the block cache, or its table is compacted away and deleted, the
///   block's memory stays allocated, outside the cache's budget, until the
///   value is dropped.
/// - A value found in a memtable pins that whole memtable (up to
///   [`Options::memtable_size`](crate::Options) bytes, plus its range
///   deletes). After the memtable is flushed to a table its memory no
///   longer counts toward the database's write buffer, but it stays
///   allocated until every value (and iterator) reading from it is gone.
/// - Any other value (one a transaction wrote itself, or one made with
///   `Value::from`) owns a buffer of exactly its bytes.
///
/// [`pinned_bytes`](Self::pinned_bytes) says how much one value keeps
/// alive. Holding a few values briefly (a request's worth) costs nothing
/// noticeable; to keep many values for long, or values from a write-heavy
/// database, keep copies instead ([`to_vec`](slice::to_vec), or
/// [`Value::detach`]), which pin nothing.
///
/// ```
/// # fn main() -> quietkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = quietkv::Db::open(dir.path(), quietkv::Options::default())?;
/// db.put(b"k", b"hello")?;
/// let v = db.get_pinned(b"k")?.expect("written above");
/// db.put(b"k", b"changed")?;
/// db.flush()?;
/// assert_eq!(v, b"hello"); // still the bytes it was read as
/// assert_eq!(&v[..2], b"he");
/// let owned: Vec<u8> = v.into();
/// assert_eq!(owned, b"hello");
/// # Ok(())
/// # }
/// ```
pub struct Value {
    /// The value's bytes: `len` bytes at `ptr`, inside memory `owner`
    /// keeps alive and that nothing writes while it is shared.
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
}

/// What a [`Value`]'s bytes live in.
#[derive(Clone)]
enum Owner {
    /// No bytes: an empty value needs no memory.
    Empty,
    /// A decoded table block (shared with the block cache while it is
    /// cached there).
    Block(Arc<dyn PinnedMemory>),
    /// A memtable's arena.
    Memtable(Arc<dyn PinnedMemory>),
    /// A buffer of the value's own.
    Owned(Arc<Vec<u8>>),
}

/// Memory a [`Value`] can share and keep alive: a decoded table block or
/// a memtable, implemented beside each of them, so that this module needs
/// neither.
///
/// A value sees its owner only as memory of some size. Holding it as a
/// trait object also keeps `Value` from looking like it has interior
/// mutability (a memtable's atomics and locks) to clippy's
/// `mutable_key_type`, which would otherwise warn every user who keys a
/// map or set by `Value`; a value's hash and order depend only on its
/// bytes, which never change.
///
/// # Safety
///
/// An implementor promises that bytes it hands out through a shared
/// reference (`&self`) are never written, moved or freed while the
/// implementor is alive: [`Value::in_block`] keeps such bytes past the
/// borrow they were read through, for as long as it holds the owner.
pub(crate) unsafe trait PinnedMemory: Send + Sync {
    /// Bytes of memory this keeps allocated, as of now.
    fn pinned_bytes(&self) -> usize;
}

// SAFETY: a `Value` is, in effect, an `Arc` of its owner together with a
// shared `&[u8]` into that owner's memory. Every owner is `Send + Sync` (a
// `PinnedMemory` must be; `Vec<u8>` is), `Arc` of a `Send + Sync` type is
// `Send + Sync`, and the bytes are never written while a `Value` points at
// them (a `PinnedMemory` promises it: blocks are immutable once decoded; a
// memtable's value bytes are never overwritten after they are published,
// a replaced value gets new bytes; an owned buffer is only read behind the
// `Arc`). So moving or sharing a `Value` across threads is as safe as
// moving or sharing an `Arc<Owner>` and a `&[u8]`.
unsafe impl Send for Value {}
// SAFETY: as for `Send`: `&Value` only reads the immutable bytes.
unsafe impl Sync for Value {}

impl Value {
    /// An empty value (no allocation).
    pub fn empty() -> Value {
        Value {
            ptr: NonNull::dangling(),
            len: 0,
            owner: Owner::Empty,
        }
    }

    /// The bytes `bytes_of` picks out of a decoded `block`, sharing the
    /// block (an empty value, pinning nothing, if they are empty).
    pub(crate) fn in_block<B: PinnedMemory + 'static>(
        block: Arc<B>,
        bytes_of: impl FnOnce(&B) -> &[u8],
    ) -> Value {
        let bytes = bytes_of(&block);
        if bytes.is_empty() {
            return Value::empty();
        }
        // The bytes stay valid after this borrow of `block` ends: the
        // `Arc` moved into the value keeps the block alive, and a
        // `PinnedMemory` never changes bytes it handed out.
        let (ptr, len) = (NonNull::from(bytes).cast::<u8>(), bytes.len());
        Value {
            ptr,
            len,
            owner: Owner::Block(block),
        }
    }

    /// `bytes`, which live in `memtable`'s arena, sharing the memtable.
    ///
    /// # Safety
    ///
    /// `bytes` must point into memory that `memtable` owns and keeps,
    /// unchanged, until it is dropped (its arena: value bytes there are
    /// never freed or written once published).
    pub(crate) unsafe fn in_memtable<M: PinnedMemory + 'static>(
        memtable: Arc<M>,
        bytes: &[u8],
    ) -> Value {
        if bytes.is_empty() {
            return Value::empty();
        }
        Value {
            ptr: NonNull::from(bytes).cast::<u8>(),
            len: bytes.len(),
            owner: Owner::Memtable(memtable),
        }
    }

    /// Bytes of memory this value keeps allocated (see [`Value`]): the
    /// decoded block's size, the memtable's size (as of now), or the
    /// value's own length. Other clones of the value, the block cache or a
    /// live memtable may be keeping the same memory too.
    pub fn pinned_bytes(&self) -> usize {
        match &self.owner {
            Owner::Empty => 0,
            Owner::Block(b) => b.pinned_bytes(),
            Owner::Memtable(m) => m.pinned_bytes(),
            Owner::Owned(v) => v.capacity(),
        }
    }

    /// The same bytes in a buffer of their own, pinning nothing else (a
    /// value that owns its buffer already is returned as it is).
    pub fn detach(self) -> Value {
        match self.owner {
            Owner::Empty | Owner::Owned(_) => self,
            Owner::Block(_) | Owner::Memtable(_) => Value::from(self.as_slice().to_vec()),
        }
    }

    /// The bytes as a `Vec`: one copy, or none when this is the only
    /// handle on a buffer of its own.
    pub fn into_vec(self) -> Vec<u8> {
        match self.owner {
            Owner::Owned(v) => Arc::try_unwrap(v).unwrap_or_else(|v| v.as_ref().clone()),
            Owner::Empty => Vec::new(),
            Owner::Block(_) | Owner::Memtable(_) => self.as_slice().to_vec(),
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` and `len` were taken from a live slice (or are a
        // dangling pointer with length 0, valid for an empty slice) whose
        // memory `self.owner` keeps allocated and unchanged for as long as
        // `self` lives (see the `Send` impl for why nothing writes it).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// How many handles share the block this value is in (the cache's
    /// included), for tests that check a block outlives the cache.
    #[cfg(test)]
    pub(crate) fn block_handles(&self) -> Option<usize> {
        match &self.owner {
            Owner::Block(b) => Some(Arc::strong_count(b)),
            _ => None,
        }
    }

    /// Whether the bytes are read in place from a memtable.
    #[cfg(test)]
    pub(crate) fn is_in_memtable(&self) -> bool {
        matches!(self.owner, Owner::Memtable(_))
    }
}

impl Clone for Value {
    fn clone(&self) -> Self {
        Value {
            ptr: self.ptr,
            len: self.len,
            owner: self.owner.clone(),
        }
    }
}

impl Default for Value {
    fn default() -> Self {
        Value::empty()
    }
}

impl Deref for Value {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Value {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for Value {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<Vec<u8>> for Value {
    /// Takes the buffer over (no copy).
    fn from(v: Vec<u8>) -> Value {
        if v.is_empty() {
            return Value::empty();
        }
        let owned = Arc::new(v);
        Value {
            ptr: NonNull::from(owned.as_slice()).cast::<u8>(),
            len: owned.len(),
            owner: Owner::Owned(owned),
        }
    }
}

impl From<&[u8]> for Value {
    /// Copies the bytes into a buffer of the value's own.
    fn from(v: &[u8]) -> Value {
        Value::from(v.to_vec())
    }
}

impl From<Value> for Vec<u8> {
    fn from(v: Value) -> Vec<u8> {
        v.into_vec()
    }
}

impl std::fmt::Debug for Value {
    /// Like a byte string literal: printable ASCII as is, the rest escaped.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "b\"{}\"", self.as_slice().escape_ascii())
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    /// Byte order, as for `[u8]`.
    fn cmp(&self, other: &Value) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl Hash for Value {
    /// Hashes as the `[u8]` it holds, so lookups by `&[u8]` work.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

macro_rules! eq_bytes {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for Value {
            fn eq(&self, other: &$t) -> bool {
                self.as_slice() == AsRef::<[u8]>::as_ref(other)
            }
        }
        impl PartialEq<Value> for $t {
            fn eq(&self, other: &Value) -> bool {
                AsRef::<[u8]>::as_ref(self) == other.as_slice()
            }
        }
    )*};
}

eq_bytes!([u8], &[u8], Vec<u8>);

impl<const N: usize> PartialEq<[u8; N]> for Value {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_slice() == other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Value {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.as_slice() == *other
    }
}

#[cfg(test)]
mod tests;
