//! Adapters that let the table and log formats read and write through
//! quietio's handles, so every byte the engine moves is tagged with its I/O
//! class and goes through the mode chosen for that class.

use std::path::Path;

use quietio::{RandomReader, SeqReader, SeqWriter};

use crate::error::Result;
use crate::log::LogSink;
use crate::table::{RandomSource, SeqSource, TableSink};

/// A table being written (flush or compaction output).
pub struct TableFile(pub SeqWriter);

impl TableSink for TableFile {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        Ok(self.0.write_all(buf)?)
    }
}

/// A log file (WAL or manifest). `sync` makes records durable; records
/// added without `sync` are handed to the kernel by `flush`.
pub struct LogFile(pub SeqWriter);

impl LogSink for LogFile {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        Ok(self.0.write_all(buf)?)
    }

    fn sync(&mut self) -> Result<()> {
        Ok(self.0.sync()?)
    }

    fn flush(&mut self) -> Result<()> {
        Ok(self.0.flush_all()?)
    }
}

/// Positional reads of a table (user reads, or a compaction's index reads).
pub struct TableSource(pub RandomReader);

impl RandomSource for TableSource {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        Ok(self.0.read_vec(offset, len)?)
    }

    fn size(&self) -> u64 {
        self.0.len()
    }

    fn read_at_uncounted(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        Ok(self.0.read_vec_unattributed(offset, len)?)
    }

    fn prefetch(&self, offset: u64, len: u64) {
        self.0.prefetch(offset, len)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Sequential reads of a compaction input, with the reader's own readahead.
pub struct ScanSource(pub SeqReader);

impl SeqSource for ScanSource {
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        Ok(self.0.read_exact(buf)?)
    }

    fn was_cached(&self, offset: u64, len: u64) -> bool {
        self.0.was_cached(offset, len)
    }
}
