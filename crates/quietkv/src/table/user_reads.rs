//! Which data blocks of a table user reads have fetched.
//!
//! Warming a compaction's output needs to know which input blocks were hot.
//! With buffered user reads the page cache answers only per page, and a
//! block rarely fills whole pages: a 4 KiB value makes a block a few bytes
//! longer than a page, so every block shares a page with each neighbour,
//! and a hot block's pages make the cold block after it look cached too.
//! Counting those would warm about twice the hot set and push hot pages
//! out to make room for cold ones. One bit per block, set by the reads
//! themselves, tells the two apart; the page cache still says whether a
//! block fetched once is hot *now*.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One bit per data block, set the first time a user read fetches it.
#[derive(Debug)]
pub struct UserReadMarks {
    words: Box<[AtomicU64]>,
    blocks: usize,
}

impl UserReadMarks {
    /// Marks for a table of `blocks` data blocks, none set.
    pub fn new(blocks: usize) -> Self {
        UserReadMarks {
            words: (0..blocks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            blocks,
        }
    }

    /// Notes that a user read fetched block `idx` (out of range: ignored).
    pub fn mark(&self, idx: usize) {
        if idx >= self.blocks {
            return;
        }
        let bit = 1u64 << (idx % 64);
        if let Some(word) = self.words.get(idx / 64) {
            // Reads of a hot block mostly find its bit set: a load keeps
            // the cache line shared between reader threads.
            if word.load(Relaxed) & bit == 0 {
                word.fetch_or(bit, Relaxed);
            }
        }
    }

    /// Whether a user read has fetched block `idx`.
    pub fn is_marked(&self, idx: usize) -> bool {
        self.words
            .get(idx / 64)
            .is_some_and(|w| w.load(Relaxed) & (1u64 << (idx % 64)) != 0)
    }

    /// Heap bytes held.
    pub fn size(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_per_block_and_stay() {
        let m = UserReadMarks::new(130);
        assert!((0..130).all(|i| !m.is_marked(i)));
        for i in [0, 63, 64, 129] {
            m.mark(i);
            m.mark(i);
        }
        let marked: Vec<usize> = (0..130).filter(|&i| m.is_marked(i)).collect();
        assert_eq!(marked, vec![0, 63, 64, 129]);
        // Past the last block: ignored, never marked.
        m.mark(130);
        m.mark(10_000);
        assert!(!m.is_marked(130) && !m.is_marked(10_000));
        assert_eq!(m.size(), 24);
        assert_eq!(UserReadMarks::new(0).size(), 0);
    }
}
