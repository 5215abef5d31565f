//! The iterator protocol shared by memtables, tables and merging iterators.

use crate::error::{Error, ErrorKind, Result};
use crate::key::SeqNo;

/// A cursor over `(internal key, value)` entries in
/// [`crate::key::compare_internal`] order, movable both ways.
///
/// Positioning calls return errors (a damaged block is found while moving);
/// `key`/`value` may only be called while `valid()`. Cursors that can only
/// stream forward (compaction input read sequentially) answer `prev` and
/// `seek_to_last` with [`forward_only`].
pub trait InternalIterator {
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions at the first entry whose internal key is >= `target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the last entry whose internal key is < `target`.
    fn seek_before(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if self.valid() {
            self.prev()
        } else {
            self.seek_to_last()
        }
    }
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry (invalid before the first).
    fn prev(&mut self) -> Result<()>;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];

    /// Moving forward, inside a range tombstone that deletes every version
    /// older than `seq` of the keys below `end`: a cursor made of parts
    /// that each know how new their entries are may move the parts holding
    /// nothing as new as `seq` straight past those keys, instead of
    /// stepping through entries that can only read as deleted. Returns
    /// whether it moved; the default does nothing.
    fn skip_deleted_forward(&mut self, _end: &[u8], _seq: SeqNo) -> Result<bool> {
        Ok(false)
    }

    /// [`skip_deleted_forward`](Self::skip_deleted_forward) moving back:
    /// past the keys at or above `begin`.
    fn skip_deleted_backward(&mut self, _begin: &[u8], _seq: SeqNo) -> Result<bool> {
        Ok(false)
    }
}

/// What a forward-only cursor answers to `prev` and `seek_to_last`.
pub(crate) fn forward_only() -> Error {
    Error::new(
        ErrorKind::NotSupported,
        "this cursor reads its input sequentially and only moves forward",
    )
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn seek_before(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek_before(target)
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn skip_deleted_forward(&mut self, end: &[u8], seq: SeqNo) -> Result<bool> {
        (**self).skip_deleted_forward(end, seq)
    }
    fn skip_deleted_backward(&mut self, begin: &[u8], seq: SeqNo) -> Result<bool> {
        (**self).skip_deleted_backward(begin, seq)
    }
}

/// An iterator over a sorted in-memory vector; handy for tests and for
/// small sorted runs.
#[cfg(test)]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

#[cfg(test)]
impl VecIterator {
    /// `entries` must already be sorted by internal key.
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        let pos = entries.len();
        VecIterator { entries, pos }
    }
}

#[cfg(test)]
impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self
            .entries
            .len()
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = match self.pos {
            0 => self.entries.len(),
            p if p < self.entries.len() => p - 1,
            p => p,
        };
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| crate::key::compare_internal(k, target).is_lt());
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        if self.pos < self.entries.len() {
            self.pos += 1;
        }
        Ok(())
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}
