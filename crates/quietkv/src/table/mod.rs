//! The block-based table (SSTable) format.
//!
//! A table file is laid out as
//!
//! ```text
//! data block 0 .. data block n-1   (contiguous from offset 0)
//! filter block                     (optional; whole-table Bloom filter over user keys)
//! index block                      (last internal key of each data block -> handle)
//! properties block
//! footer                           (64 bytes, fixed)
//! ```
//!
//! Every block on disk is `payload ++ compression type (1 byte) ++ CRC32C
//! (4 bytes LE, over payload and type)`; a block handle's size includes
//! that 5-byte trailer. Data blocks may be compressed (lz4 / zstd, with a
//! u32 LE decompressed-size prefix); meta blocks never are. See
//! [`format`], [`block`], [`filter`] and [`properties`] for the details.
//!
//! Reading paths:
//! * [`TableReader::get`] / [`TableReader::iter`] read blocks positionally
//!   through a [`RandomSource`] and the optional [`BlockCache`]; an
//!   iterator walking neighbouring blocks asks for readahead
//!   (`scan_readahead`);
//! * [`TableScanner`] streams data blocks through a [`SeqSource`] for
//!   compaction and never touches the cache.
//!
//! [`TableCache`] keeps the readers of user reads open, bounded in number.

pub mod block;
pub mod block_index;
pub mod builder;
mod cache;
pub mod filter;
pub mod format;
pub mod identity;
#[cfg(any(test, feature = "fuzzing"))]
mod mem_source;
pub mod properties;
pub mod reader;
mod scan_readahead;
pub mod scanner;
pub mod source;
pub mod user_reads;

#[cfg(test)]
mod tests;

pub use block::BlockCache;
pub use builder::{TableBuilder, TableOptions, TableSummary};
pub use cache::TableCache;
pub use format::{BlockHandle, Compression};
pub use identity::ExpectedTable;
#[cfg(test)]
pub use mem_source::MemSeqSource;
#[cfg(any(test, feature = "fuzzing"))]
pub use mem_source::MemSource;
pub use properties::TableProperties;
pub use reader::{TableIterator, TableReader};
pub use scanner::TableScanner;
pub use source::{RandomSource, SeqSource, TableSink};
