//! Adapters that let the table and log formats read and write through
//! quietio's handles, so every byte the engine moves is tagged with its I/O
//! class and goes through the mode chosen for that class.

use std::path::Path;

use quietio::{EffectiveMode, IoClass, IoEnv, MmapWriter, RandomReader, SeqReader, SeqWriter};

use crate::error::Result;
use crate::record_log::LogSink;
use crate::table::{RandomSource, SeqSource, TableSink};

/// A table being written (flush or compaction output).
pub struct TableFile(pub SeqWriter);

impl TableSink for TableFile {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        Ok(self.0.write_all(buf)?)
    }
}

/// A log file (WAL or manifest). `sync` makes records durable; records
/// added without `sync` are handed to the kernel by `flush`. A WAL in mmap
/// mode is written through a mapping; everything else is a [`SeqWriter`].
// One per open log and never in a collection: the size difference of the
// variants costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub enum LogFile {
    Seq(SeqWriter),
    Mapped(MmapWriter),
}

impl LogFile {
    /// Creates a new WAL file in the WAL class's mode, allocated
    /// `segment_size` bytes at a time (`fallocate`, size included) so steady
    /// writes neither allocate blocks nor extend the file; mapped in mmap
    /// mode. Until it is finished the file ends in allocated zeros, which
    /// the log reader takes as padding.
    pub fn create_wal(env: &IoEnv, path: &Path, segment_size: u64) -> Result<LogFile> {
        Ok(match env.mode(IoClass::WalWrite) {
            EffectiveMode::Mmap => {
                LogFile::Mapped(env.create_mapped(path, IoClass::WalWrite, segment_size)?)
            }
            _ => {
                let mut w = env.create(path, IoClass::WalWrite)?;
                w.preallocate_segments(segment_size)?;
                LogFile::Seq(w)
            }
        })
    }

    /// Opens the existing WAL file `path` (a kept one, renamed to the new
    /// WAL's name) to write it again from offset 0 in the WAL class's
    /// mode, without truncating it: its blocks are allocated and written
    /// already, and past its old size it grows `segment_size` bytes at a
    /// time as a new one does. Its old records stay after the new ones;
    /// the log reader tells them apart by their log number.
    pub fn reuse_wal(env: &IoEnv, path: &Path, segment_size: u64) -> Result<LogFile> {
        Ok(match env.mode(IoClass::WalWrite) {
            EffectiveMode::Mmap => {
                LogFile::Mapped(env.overwrite_mapped(path, IoClass::WalWrite, segment_size)?)
            }
            _ => {
                let mut w = env.overwrite(path, IoClass::WalWrite)?;
                w.preallocate_segments(segment_size)?;
                LogFile::Seq(w)
            }
        })
    }

    /// From now on `finish` (and drop) leave the file at its allocated
    /// size instead of cutting it to its true length: a WAL that will be
    /// kept and reused keeps its blocks (see `Options::wal_recycle_count`).
    pub fn keep_allocation(&mut self) {
        match self {
            LogFile::Seq(w) => w.keep_allocation(),
            LogFile::Mapped(w) => w.keep_allocation(),
        }
    }

    /// Writes what is buffered, cuts the file to its true length and with
    /// `sync` makes it durable; returns the length.
    pub fn finish(self, sync: bool) -> Result<u64> {
        Ok(match self {
            LogFile::Seq(w) => w.finish(sync)?,
            LogFile::Mapped(w) => w.finish(sync)?,
        })
    }
}

impl LogSink for LogFile {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        match self {
            LogFile::Seq(w) => w.write_all(buf)?,
            LogFile::Mapped(w) => w.write_all(buf)?,
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        match self {
            LogFile::Seq(w) => w.sync()?,
            LogFile::Mapped(w) => w.sync()?,
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        match self {
            LogFile::Seq(w) => w.flush_all()?,
            LogFile::Mapped(w) => w.flush_all()?,
        }
        Ok(())
    }

    fn flush_writes_device(&self) -> bool {
        match self {
            LogFile::Seq(w) => matches!(w.mode(), EffectiveMode::Direct | EffectiveMode::DontCache),
            LogFile::Mapped(_) => false,
        }
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

    fn prefetch(&self, offset: u64, len: u64) -> bool {
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
