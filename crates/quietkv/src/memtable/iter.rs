//! [`MemtableIter`]: a cursor over a memtable that keeps it alive.

use std::ptr::NonNull;
use std::sync::Arc;

use super::skiplist::{Node, NodeRef, SearchKey};
use super::Memtable;
use crate::error::Result;
use crate::iter::InternalIterator;

/// An [`InternalIterator`] over a [`Memtable`]; values are the stored value
/// bytes (empty for deletes).
pub struct MemtableIter {
    mem: Arc<Memtable>,
    /// The current node of `mem`'s skiplist, or `None` when not valid.
    cur: Option<NonNull<Node>>,
}

// SAFETY: `cur` only ever points to a node of `mem`'s skiplist, which is
// `Send + Sync` and is kept alive by the `Arc`; nodes are never freed or
// changed in a way that races with readers (see the skiplist's docs), so
// using the pointer from another thread is as safe as using the list.
unsafe impl Send for MemtableIter {}
// SAFETY: `&MemtableIter` only reads through `cur` (key and value bytes,
// which readers on any thread may read concurrently with the writer).
unsafe impl Sync for MemtableIter {}

impl MemtableIter {
    pub(super) fn new(mem: Arc<Memtable>) -> Self {
        MemtableIter { mem, cur: None }
    }

    fn node(&self) -> Option<NodeRef<'_>> {
        // SAFETY: `cur` is only ever assigned `NodeRef::as_ptr` of a node
        // of `self.mem.list` (see every method below).
        self.cur.map(|p| unsafe { self.mem.list.node_from_ptr(p) })
    }

    fn current(&self) -> NodeRef<'_> {
        self.node()
            .expect("MemtableIter::key/value called while not valid")
    }
}

impl InternalIterator for MemtableIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let n = self.mem.list.first().map(NodeRef::as_ptr);
        self.cur = n;
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let n = self.mem.list.last().map(NodeRef::as_ptr);
        self.cur = n;
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let n = self
            .mem
            .list
            .seek(SearchKey::from_internal(target))
            .map(NodeRef::as_ptr);
        self.cur = n;
        Ok(())
    }

    fn seek_before(&mut self, target: &[u8]) -> Result<()> {
        let n = self
            .mem
            .list
            .seek_before(SearchKey::from_internal(target))
            .map(NodeRef::as_ptr);
        self.cur = n;
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let n = self.node().and_then(NodeRef::next).map(NodeRef::as_ptr);
        self.cur = n;
        Ok(())
    }

    /// A singly linked list cannot step back: this searches for the last
    /// entry before the current key, which costs one seek.
    fn prev(&mut self) -> Result<()> {
        let n = self
            .node()
            .and_then(|n| self.mem.list.seek_before(SearchKey::from_internal(n.key())))
            .map(NodeRef::as_ptr);
        self.cur = n;
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current().key()
    }

    fn value(&self) -> &[u8] {
        self.current().value()
    }
}
