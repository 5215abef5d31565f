//! The I/O seams of the table format.
//!
//! The table code never touches files directly: a builder writes through a
//! [`TableSink`], point lookups and user iterators read through a
//! [`RandomSource`], and compaction streams data blocks through a
//! [`SeqSource`]. The real implementations (O_DIRECT, RWF_DONTCACHE, ...)
//! live in quietio and are plugged in by the engine; the in-memory ones in
//! `mem_source` serve unit tests.

use std::path::Path;

use crate::error::Result;

/// Sequential sink for a table being built (implemented later by quietio's
/// sequential writer).
pub trait TableSink {
    fn write_all(&mut self, buf: &[u8]) -> Result<()>;
}

/// Positional reads for point lookups and user iterators.
pub trait RandomSource: Send + Sync {
    /// Reads exactly `len` bytes at `offset`; an error if fewer bytes exist.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    fn size(&self) -> u64;
    /// For error messages.
    fn path(&self) -> &Path;
    /// Like `read_at`, for a read the engine makes on its own behalf
    /// (warming, a table's metadata at open): not counted as a user read's cache hit or miss.
    fn read_at_uncounted(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.read_at(offset, len)
    }
    /// Starts reading `[offset, offset + len)` into the page cache in the
    /// background where reads go through it, and says whether it did. No-op
    /// (false) by default.
    fn prefetch(&self, _offset: u64, _len: u64) -> bool {
        false
    }
}

/// In-order reads from offset 0 (compaction input with its own readahead).
pub trait SeqSource: Send {
    /// Fills `buf` completely or fails.
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()>;

    /// Whether any of `[offset, offset + len)`, already read, was in the
    /// page cache before this source read it (someone else's hot data).
    /// False where the source cannot tell.
    fn was_cached(&self, _offset: u64, _len: u64) -> bool {
        false
    }
}

impl TableSink for Vec<u8> {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        self.extend_from_slice(buf);
        Ok(())
    }
}

impl<T: TableSink + ?Sized> TableSink for &mut T {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        (**self).write_all(buf)
    }
}

impl<T: TableSink + ?Sized> TableSink for Box<T> {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        (**self).write_all(buf)
    }
}
