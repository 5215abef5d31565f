//! A table's index as it is held in memory while the table is open: the
//! last internal key and the place of each data block.
//!
//! An open table keeps its index for as long as it is open, so its size is
//! paid once per data block of the whole database: with 4 KiB values (one
//! entry per block) an 8 GiB database has two million blocks. A key per
//! block in its own heap allocation beside a 16-byte handle came to about
//! 80 bytes a block, and a point read's binary search followed a pointer
//! to a separate allocation at every step. Here the keys lie end to end in
//! one buffer and a block is described by where its key ends and where the
//! block ends (data blocks are contiguous from offset 0, so each starts
//! where the previous one ends): 12 bytes a block besides its key, and a
//! search that reads two flat arrays.

use super::format::BlockHandle;
use crate::error::{Error, Result};

/// One data block as the index describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry<'a> {
    /// The block's last internal key.
    pub last_key: &'a [u8],
    pub handle: BlockHandle,
}

#[derive(Debug, Default)]
pub struct BlockIndex {
    /// Every block's last key, one after another.
    keys: Vec<u8>,
    /// Where block `i`'s key ends in `keys`; it starts where block
    /// `i - 1`'s ends.
    key_ends: Vec<u32>,
    /// Where block `i` ends in the file; it starts where block `i - 1`
    /// ends (block 0 at offset 0).
    block_ends: Vec<u64>,
}

impl BlockIndex {
    /// Appends the next block. Blocks are contiguous: `handle` must start
    /// where the previous block ended (Corruption otherwise, as for a key
    /// buffer that would outgrow 4 GiB).
    pub fn push(&mut self, last_key: &[u8], handle: BlockHandle) -> Result<()> {
        let expected = self.block_ends.last().copied().unwrap_or(0);
        let end = handle.end().filter(|_| handle.offset == expected);
        let Some(end) = end else {
            return Err(Error::corruption(format!(
                "index entry {} places its block at offset {} (size {}); expected offset {expected}",
                self.len(),
                handle.offset,
                handle.size
            )));
        };
        let key_end = u32::try_from(self.keys.len() + last_key.len())
            .map_err(|_| Error::corruption("index keys add up to more than 4 GiB"))?;
        self.keys.extend_from_slice(last_key);
        self.key_ends.push(key_end);
        self.block_ends.push(end);
        Ok(())
    }

    /// Gives back the spare capacity left by building it entry by entry.
    pub fn shrink_to_fit(&mut self) {
        self.keys.shrink_to_fit();
        self.key_ends.shrink_to_fit();
        self.block_ends.shrink_to_fit();
    }

    pub fn len(&self) -> usize {
        self.key_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.key_ends.is_empty()
    }

    /// Block `i`'s last key.
    ///
    /// # Panics
    ///
    /// If `i` is out of range, like slice indexing.
    pub fn last_key(&self, i: usize) -> &[u8] {
        let start = match i {
            0 => 0,
            _ => self.key_ends[i - 1] as usize,
        };
        &self.keys[start..self.key_ends[i] as usize]
    }

    /// Where block `i` is in the file, if there is a block `i`.
    pub fn handle(&self, i: usize) -> Option<BlockHandle> {
        let end = *self.block_ends.get(i)?;
        let offset = match i {
            0 => 0,
            _ => self.block_ends[i - 1],
        };
        Some(BlockHandle {
            offset,
            size: end - offset,
        })
    }

    pub fn get(&self, i: usize) -> Option<IndexEntry<'_>> {
        let handle = self.handle(i)?;
        Some(IndexEntry {
            last_key: self.last_key(i),
            handle,
        })
    }

    pub fn last(&self) -> Option<IndexEntry<'_>> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// Where the data blocks end (0 for a table without any).
    pub fn data_end(&self) -> u64 {
        self.block_ends.last().copied().unwrap_or(0)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = IndexEntry<'_>> + '_ {
        (0..self.len()).map(|i| IndexEntry {
            last_key: self.last_key(i),
            handle: self.handle(i).expect("in range"),
        })
    }

    /// The number of leading blocks whose last key satisfies `pred`, which
    /// must hold for a prefix of the blocks and not after (binary search,
    /// as [`slice::partition_point`]).
    pub fn partition_point(&self, mut pred: impl FnMut(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.last_key(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Bytes it holds on the heap, and inline.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.keys.capacity()
            + self.key_ends.capacity() * std::mem::size_of::<u32>()
            + self.block_ends.capacity() * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_of(blocks: &[(&[u8], u64)]) -> BlockIndex {
        let mut index = BlockIndex::default();
        let mut offset = 0;
        for &(key, size) in blocks {
            index.push(key, BlockHandle { offset, size }).unwrap();
            offset += size;
        }
        index
    }

    #[test]
    fn entries_come_back_as_they_went_in() {
        let blocks: [(&[u8], u64); 4] =
            [(b"", 10), (b"apple", 4096), (b"b", 7), (b"cherry pie", 1)];
        let index = index_of(&blocks);
        assert_eq!(index.len(), 4);
        let mut offset = 0;
        for (i, (e, &(key, size))) in index.iter().zip(&blocks).enumerate() {
            assert_eq!(e.last_key, key);
            assert_eq!(e.handle, BlockHandle { offset, size });
            assert_eq!(index.get(i), Some(e));
            assert_eq!(index.last_key(i), key);
            offset += size;
        }
        assert_eq!(index.data_end(), offset);
        assert_eq!(index.last().unwrap().last_key, b"cherry pie");
        assert_eq!(index.get(4), None);
        assert_eq!(index.handle(4), None);
        assert!(BlockIndex::default().last().is_none());
        assert_eq!(BlockIndex::default().data_end(), 0);
    }

    #[test]
    fn a_block_that_does_not_follow_the_previous_one_is_corruption() {
        let mut index = index_of(&[(b"a", 100)]);
        for offset in [0, 99, 101] {
            let err = index
                .push(b"b", BlockHandle { offset, size: 5 })
                .unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Corruption, "{err}");
        }
        let overflow = BlockHandle {
            offset: 100,
            size: u64::MAX,
        };
        assert!(index.push(b"b", overflow).is_err());
        assert_eq!(index.len(), 1, "a refused entry is not added");
        let mut fresh = BlockIndex::default();
        assert!(fresh
            .push(b"a", BlockHandle { offset: 1, size: 5 })
            .is_err());
    }

    #[test]
    fn partition_point_agrees_with_the_slice_one() {
        let keys: Vec<Vec<u8>> = (0..200u32)
            .map(|i| (i * 3).to_be_bytes().to_vec())
            .collect();
        let blocks: Vec<(&[u8], u64)> = keys.iter().map(|k| (k.as_slice(), 1)).collect();
        let index = index_of(&blocks);
        for probe in 0..650u32 {
            let probe = probe.to_be_bytes();
            assert_eq!(
                index.partition_point(|k| k < &probe[..]),
                keys.partition_point(|k| k.as_slice() < &probe[..])
            );
        }
        assert_eq!(BlockIndex::default().partition_point(|_| true), 0);
    }

    #[test]
    fn a_block_costs_twelve_bytes_besides_its_key() {
        let keys: Vec<[u8; 24]> = (0..1000u64)
            .map(|i| {
                let mut k = [0u8; 24];
                k[..8].copy_from_slice(&i.to_be_bytes());
                k
            })
            .collect();
        let blocks: Vec<(&[u8], u64)> = keys.iter().map(|k| (&k[..], 4100)).collect();
        let mut index = index_of(&blocks);
        index.shrink_to_fit();
        let per_block = (index.memory_bytes() - std::mem::size_of::<BlockIndex>()) / 1000;
        assert_eq!(per_block, 24 + 12);
    }
}
