//! Open table readers for user reads, bounded in number.
//!
//! A table is checked against its manifest entry when it is opened (size,
//! number and database id, see [`crate::table::identity`]), so a file that
//! is not the table the manifest names is Corruption, never stale data.
//!
//! These handles are opened in the UserRead mode and share the block cache.
//! Compaction never reads its inputs through them: it opens its own handles
//! in CompactionRead mode, so a cached buffered handle cannot silently
//! defeat O_DIRECT. Flush and compaction do open their *outputs* here,
//! before installing them, and warm them through these handles: that is
//! the user read path those tables will be read through.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use quietio::{IoClass, IoEnv};

use crate::block_cache::Cache;
use crate::error::Result;
use crate::fileio::TableSource;
use crate::filenames::table_path;
use crate::table::user_reads::UserReadMarks;
use crate::table::{BlockCache, ExpectedTable, TableReader};
use crate::version::FileMeta;

/// Every point read looks its table up here, so one lock would serialize
/// all reader threads: up to 16 shards, each keeping at least 16 handles.
/// A shard evicts when its own share is full, so the open-handle count
/// stays within `max_open` (it may evict a little before reaching it).
fn reader_shard_bits(max_open: usize) -> u32 {
    let mut bits = 0;
    while bits < 4 && max_open >> (bits + 1) >= 16 {
        bits += 1;
    }
    bits
}

pub struct TableCache {
    dir: PathBuf,
    env: Arc<IoEnv>,
    readers: Cache<TableReader>,
    blocks: Arc<BlockCache>,
    /// The database's id (0 = unknown, not compared).
    db_id: u64,
    /// Tables a read had to open itself (see [`TableCache::get`]).
    opened_by_reads: AtomicU64,
}

impl TableCache {
    pub fn new(
        dir: PathBuf,
        env: Arc<IoEnv>,
        max_open: usize,
        blocks: Arc<BlockCache>,
        db_id: u64,
    ) -> Self {
        TableCache {
            dir,
            env,
            // Each reader is charged 1, so the capacity is a count of handles.
            readers: Cache::with_shard_bits(max_open, reader_shard_bits(max_open)),
            blocks,
            db_id,
            opened_by_reads: AtomicU64::new(0),
        }
    }

    /// The reader of the table `meta` describes, opening (and verifying)
    /// it if needed. Opening reads and checks the whole index and the
    /// filter, several hundred KiB for a large table: the read that does it
    /// waits for that, so each such open is counted.
    pub fn get(&self, meta: &FileMeta) -> Result<Arc<TableReader>> {
        if let Some(r) = self.readers.get(meta.number, 0) {
            return Ok(r);
        }
        let reader = self.open(meta)?;
        self.opened_by_reads.fetch_add(1, Relaxed);
        Ok(reader)
    }

    /// Opens a table that flush or compaction has just written, before it
    /// is installed: otherwise the first user read to reach it would read
    /// its index and filter (from the disk, when the table was written
    /// around the page cache). A table that cannot be opened and verified
    /// must not be installed, so the caller fails its job if it is corrupt
    /// (any other error leaves the opening to the first read).
    pub fn open_ahead(&self, meta: &FileMeta) -> Result<Arc<TableReader>> {
        match self.readers.get(meta.number, 0) {
            Some(r) => Ok(r),
            None => self.open(meta),
        }
    }

    /// [`TableCache::open_ahead`] for a table flush or compaction has just
    /// written: a table that does not verify fails the job; any other
    /// failure (out of file descriptors, say) is only logged, and the first
    /// read to reach the table opens it.
    pub fn open_output(&self, meta: &FileMeta) -> Result<Option<Arc<TableReader>>> {
        match self.open_ahead(meta) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == crate::ErrorKind::Corruption => Err(e),
            Err(e) => {
                log::warn!(
                    "quietkv: table {} not opened before its install ({e}); the first read will open it",
                    meta.number
                );
                Ok(None)
            }
        }
    }

    /// Tables user reads and iterators opened themselves since the
    /// database opened (two reads racing to open one table count twice):
    /// the first read of each table after open, and of each table the cache
    /// had closed to stay within `max_open_tables`.
    pub fn opened_by_reads(&self) -> u64 {
        self.opened_by_reads.load(Relaxed)
    }

    fn open(&self, meta: &FileMeta) -> Result<Arc<TableReader>> {
        let number = meta.number;
        let path = table_path(&self.dir, number);
        let file = self.env.open_random(&path, IoClass::UserRead)?;
        let reader = Arc::new(TableReader::open_verified(
            Arc::new(TableSource(file)),
            &ExpectedTable::new(meta, self.db_id),
            Some(self.blocks.clone()),
        )?);
        self.readers.insert(number, 0, reader.clone(), 1);
        Ok(reader)
    }

    /// Forgets a deleted table's reader and cached blocks.
    pub fn evict(&self, number: u64) {
        self.readers.erase_table(number);
        self.blocks.erase_table(number);
    }

    /// The data blocks user reads have fetched from table `number`, if it
    /// is open for user reads (a table closed to stay within
    /// `max_open_tables`, or never read, has no record).
    pub fn user_reads(&self, number: u64) -> Option<Arc<UserReadMarks>> {
        self.readers
            .get(number, 0)
            .map(|r| Arc::clone(r.user_reads()))
    }

    /// Table readers currently open.
    pub fn open_count(&self) -> usize {
        self.readers.usage()
    }

    pub fn block_cache(&self) -> &Arc<BlockCache> {
        &self.blocks
    }
}

#[cfg(test)]
mod tests {
    use super::reader_shard_bits;

    #[test]
    fn reader_lookups_are_sharded_with_at_least_16_handles_a_shard() {
        assert_eq!(reader_shard_bits(1000), 4);
        assert_eq!(reader_shard_bits(64), 2);
        assert_eq!(reader_shard_bits(16), 0);
        for n in [16, 17, 40, 100, 1000, 100_000] {
            assert!(n >> reader_shard_bits(n) >= 16, "{n}");
        }
    }
}
