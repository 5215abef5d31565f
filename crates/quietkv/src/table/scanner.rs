//! Sequential full-table reads for compaction.
//!
//! The scanner streams data blocks in file order from a [`SeqSource`]
//! (which does its own readahead and page-cache hygiene), verifies each
//! block's checksum, and never touches the block cache. It uses the
//! already-open [`TableReader`] only for its parsed index.

use std::sync::Arc;

use crate::compaction::warm::HotProbe;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::user_key;
use crate::table::block::Block;
use crate::table::block::BlockIter;
use crate::table::reader::{BlockFetch, TableReader, TwoLevel};
use crate::table::source::SeqSource;
use crate::table::user_reads::UserReadMarks;

struct SeqFetch {
    source: Box<dyn SeqSource>,
    /// Index of the next block to read from `source`.
    next_idx: usize,
    /// File offset of `source`'s position.
    pos: u64,
    /// The most recently read block, reused when asked for again.
    last: Option<(usize, Arc<Block>)>,
    /// Notes the key ranges of blocks that were hot, when warming is on.
    hot: Option<HotProbe>,
    /// The blocks user reads fetched from this table, when known: a block
    /// in the page cache that no user read fetched is there only because
    /// it shares a page with one that was.
    user_reads: Option<Arc<UserReadMarks>>,
}

impl BlockFetch for SeqFetch {
    fn fetch(&mut self, table: &TableReader, idx: usize) -> Result<Arc<Block>> {
        if let Some((i, b)) = &self.last {
            if *i == idx {
                return Ok(Arc::clone(b));
            }
        }
        if idx < self.next_idx {
            return Err(Error::invalid(
                "table scanner reads forward only and cannot return to an earlier block",
            ));
        }
        let mut block = None;
        while self.next_idx <= idx {
            let handle = table
                .index()
                .handle(self.next_idx)
                .ok_or_else(|| Error::invalid("data block index out of range"))?;
            if handle.offset != self.pos {
                return Err(Error::corruption(format!(
                    "data block {} starts at offset {} but the previous block ended at {}",
                    self.next_idx, handle.offset, self.pos
                ))
                .with_file(table.path())
                .with_offset(handle.offset));
            }
            // Bounded by the file size when the table was opened.
            let mut disk = vec![0u8; handle.size_usize().map_err(|e| e.with_file(table.path()))?];
            self.source.read_exact(&mut disk)?;
            self.pos += handle.size;
            self.next_idx += 1;
            if self.next_idx > idx {
                let b = Arc::new(table.parse_data_block(handle, disk)?);
                if let Some(hot) = &self.hot {
                    let fetched = self.user_reads.as_ref().is_none_or(|m| m.is_marked(idx));
                    if hot.in_block_cache(table.table_id(), handle.offset)
                        || (fetched && self.source.was_cached(handle.offset, handle.size))
                    {
                        // A block may begin with older versions of the
                        // previous block's last user key; reads of that key
                        // stop before them, so the block's hot keys start
                        // after it (see `compaction::warm::hot_blocks`).
                        let after = idx
                            .checked_sub(1)
                            .map(|p| user_key(table.index().last_key(p)));
                        let mut it = BlockIter::new(Arc::clone(&b));
                        let at = |e: Error| e.with_file(table.path()).with_offset(handle.offset);
                        it.seek_to_first().map_err(at)?;
                        while it.valid() && Some(user_key(it.key())) == after {
                            it.next().map_err(at)?;
                        }
                        if it.valid() {
                            hot.note(it.key(), table.index().last_key(idx));
                        }
                    }
                }
                block = Some(b);
            }
            // Blocks skipped by a seek are read (the source is sequential) but not decoded.
        }
        let block = block.ok_or_else(|| Error::invalid("no block read"))?;
        self.last = Some((idx, Arc::clone(&block)));
        Ok(block)
    }
}

/// Iterates all entries of a table for compaction; see the module docs.
///
/// `seek_to_first` works until the scanner has moved past the first block;
/// `seek` may only move forward (within the current block it may go back).
pub struct TableScanner {
    inner: TwoLevel<SeqFetch>,
}

impl TableScanner {
    /// `source` must be positioned at offset 0 of the same file.
    pub fn new(table: Arc<TableReader>, source: Box<dyn SeqSource>) -> Self {
        TableScanner {
            inner: TwoLevel::new(
                table,
                SeqFetch {
                    source,
                    next_idx: 0,
                    pos: 0,
                    last: None,
                    hot: None,
                    user_reads: None,
                },
            ),
        }
    }

    /// Notes hot blocks into `probe` as they are read (see
    /// [`crate::compaction::warm`]); `user_reads`, when known, says which
    /// blocks user reads fetched.
    pub fn note_hot_blocks(&mut self, probe: HotProbe, user_reads: Option<Arc<UserReadMarks>>) {
        let fetch = self.inner.fetch_mut();
        fetch.hot = Some(probe);
        fetch.user_reads = user_reads;
    }

    /// Index of the data block the scanner is in.
    pub fn current_block(&self) -> usize {
        self.inner.current_block()
    }
}

impl InternalIterator for TableScanner {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        Err(crate::iter::forward_only())
    }
    fn prev(&mut self) -> Result<()> {
        Err(crate::iter::forward_only())
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}
