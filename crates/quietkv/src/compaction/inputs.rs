//! The input of a compaction: each input table opened with handles of its
//! own in the CompactionRead mode (positional reads for the index and
//! filter, a sequential reader with readahead for the data blocks), never
//! through the table cache, so a cached buffered handle cannot silently
//! defeat O_DIRECT. Each L0 table is one input; each deeper level is one
//! lazy iterator over its tables, one table open at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use quietio::{IoClass, IoEnv};

use super::warm::HotProbe;
use crate::error::Result;
use crate::fileio::{ScanSource, TableSource};
use crate::filenames::table_path;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::table::{ExpectedTable, TableReader, TableScanner};
use crate::version::FileMeta;

/// Opens one compaction input table with its own handles: positional reads
/// (footer, index, filter) and a sequential reader with readahead for the
/// data blocks, both in the CompactionRead mode. Never the table cache.
/// Corruption if the file is not the table `meta` describes.
pub(crate) fn open_compaction_input(
    env: &IoEnv,
    dir: &std::path::Path,
    meta: &FileMeta,
    db_id: u64,
    open_files: &Arc<AtomicUsize>,
    hot: Option<&HotProbe>,
    depth: usize,
) -> Result<CountedScanner> {
    let path = table_path(dir, meta.number);
    let meta_reader = env.open_random(&path, IoClass::CompactionRead)?;
    let table = Arc::new(TableReader::open_verified(
        Arc::new(TableSource(meta_reader)),
        &ExpectedTable::new(meta, db_id),
        None,
    )?);
    let mut seq = env.open_sequential_at_depth(&path, IoClass::CompactionRead, depth)?;
    if hot.is_some_and(|h| h.page_cache) {
        // Known only for direct reads; the block cache is asked either way.
        seq.track_page_cache();
    }
    open_files.fetch_add(2, Ordering::Relaxed);
    let mut scanner = TableScanner::new(table, Box::new(ScanSource(seq)));
    if let Some(h) = hot {
        scanner.note_hot_blocks(h.clone(), h.user_reads(meta.number));
    }
    Ok(CountedScanner {
        scanner,
        open_files: open_files.clone(),
    })
}

/// A compaction scanner that keeps the open-handle count honest.
pub(crate) struct CountedScanner {
    scanner: TableScanner,
    open_files: Arc<AtomicUsize>,
}

impl Drop for CountedScanner {
    fn drop(&mut self) {
        self.open_files.fetch_sub(2, Ordering::Relaxed);
    }
}

/// Compaction input over a level's tables in order, one open at a time.
pub(crate) struct CompactionLevelIter {
    files: Vec<Arc<FileMeta>>,
    env: Arc<IoEnv>,
    dir: std::path::PathBuf,
    db_id: u64,
    open_files: Arc<AtomicUsize>,
    hot: Option<HotProbe>,
    /// Chunk reads in flight per table (see `Options::background_io_depth`).
    depth: usize,
    index: usize,
    current: Option<CountedScanner>,
}

impl CompactionLevelIter {
    pub(crate) fn new(
        files: Vec<Arc<FileMeta>>,
        env: Arc<IoEnv>,
        dir: std::path::PathBuf,
        db_id: u64,
        open_files: Arc<AtomicUsize>,
        hot: Option<HotProbe>,
        depth: usize,
    ) -> Self {
        CompactionLevelIter {
            index: files.len(),
            files,
            env,
            dir,
            db_id,
            open_files,
            hot,
            depth,
            current: None,
        }
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.index = index;
        // Close the previous table before opening the next.
        self.current = None;
        if let Some(f) = self.files.get(index) {
            let mut s = open_compaction_input(
                &self.env,
                &self.dir,
                f,
                self.db_id,
                &self.open_files,
                self.hot.as_ref(),
                self.depth,
            )?;
            s.scanner.seek_to_first()?;
            self.current = Some(s);
        }
        Ok(())
    }

    fn skip_empty(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.scanner.valid()) {
            self.open(self.index + 1)?;
        }
        Ok(())
    }
}

impl InternalIterator for CompactionLevelIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.scanner.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        self.skip_empty()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        // Compaction only scans from the start; a seek is a forward skip.
        if self.current.is_none() {
            self.seek_to_first()?;
        }
        while self.valid() && compare_internal(self.key(), target).is_lt() {
            self.next()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.scanner.next()?;
        }
        self.skip_empty()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        Err(crate::iter::forward_only())
    }

    fn prev(&mut self) -> Result<()> {
        Err(crate::iter::forward_only())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().expect("valid").scanner.key()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().expect("valid").scanner.value()
    }
}

impl InternalIterator for CountedScanner {
    fn valid(&self) -> bool {
        self.scanner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.scanner.seek_to_first()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.scanner.seek(target)
    }
    fn next(&mut self) -> Result<()> {
        self.scanner.next()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        Err(crate::iter::forward_only())
    }
    fn prev(&mut self) -> Result<()> {
        Err(crate::iter::forward_only())
    }
    fn key(&self) -> &[u8] {
        self.scanner.key()
    }
    fn value(&self) -> &[u8] {
        self.scanner.value()
    }
}
