//! Opening tables, point lookups and the user iterator.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use crate::block_cache::Reservation;
use crate::error::{Error, ErrorKind, Result};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, parse_internal_key, SeekKey, SeqNo, ValueKind, MAX_SEQ};
use crate::range_tombstone::{covering_seq, RangeTombstone};
use crate::table::block::{Block, BlockCache, BlockIter, BlockValue};
use crate::table::block_index::BlockIndex;
use crate::table::filter::BloomFilter;
use crate::table::format::{decode_block, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
use crate::table::identity::ExpectedTable;
use crate::table::properties::TableProperties;
use crate::table::scan_readahead::ScanReadahead;
use crate::table::source::RandomSource;
use crate::table::user_reads::UserReadMarks;

/// An open table: footer, index, filter and properties live in memory;
/// data blocks are read on demand (through the block cache if any).
///
/// The index and the filter are pinned: parsed once at open and held for
/// as long as the table is open, so no amount of data-block traffic makes a
/// point read pay an extra (possibly O_DIRECT, uncached) read for them.
/// Their memory is reserved against the block cache while the reader lives:
/// where the cache is a memory budget (sized from the memory limit), cache
/// and pinned metadata share it.
pub struct TableReader {
    source: Arc<dyn RandomSource>,
    table_id: u64,
    cache: Option<Arc<BlockCache>>,
    index: BlockIndex,
    filter: Option<BloomFilter>,
    props: TableProperties,
    /// The table's range tombstones, in internal-key order of their first
    /// keys (empty for most tables); read at open, like the index.
    range_dels: Vec<RangeTombstone>,
    file_size: u64,
    /// Data blocks user reads have fetched through this reader (see
    /// [`crate::table::user_reads`]).
    user_reads: Arc<UserReadMarks>,
    _pin: Option<Reservation<Block>>,
}

impl std::fmt::Debug for TableReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableReader")
            .field("path", &self.source.path())
            .field("table_id", &self.table_id)
            .field("file_size", &self.file_size)
            .field("data_blocks", &self.index.len())
            .finish()
    }
}

/// Adds file and offset to errors that lack them (decoding errors).
fn at(path: &Path, offset: u64) -> impl Fn(Error) -> Error + '_ {
    move |e| {
        if e.file().is_some() {
            e
        } else {
            e.with_file(path).with_offset(offset)
        }
    }
}

/// Heap and inline bytes of a parsed index and filter.
fn index_and_filter_bytes(index: &BlockIndex, filter: Option<&BloomFilter>) -> usize {
    index.memory_bytes() + filter.map_or(0, |f| f.size())
}

/// Output blocks being warmed (see [`TableReader::start_warming`]).
#[derive(Debug, Default)]
pub struct Warming {
    /// Byte ranges (offset, length) handed to kernel readahead, in order,
    /// for [`TableReader::finish_warming`] to wait for.
    pub in_flight: Vec<(u64, u64)>,
    /// Blocks warmed, through either cache.
    pub blocks: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl TableReader {
    pub fn open(
        source: Arc<dyn RandomSource>,
        table_id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<TableReader> {
        let path = source.path().to_path_buf();
        let file_size = source.size();
        if file_size < FOOTER_LEN as u64 {
            return Err(Error::corruption(format!(
                "not a quietkv table (file of {file_size} bytes is shorter than the {FOOTER_LEN}-byte footer)"
            ))
            .with_file(&path));
        }
        let footer_at = file_size - FOOTER_LEN as u64;
        // Opening is the engine's read, whoever triggers it (flush and
        // compaction open their outputs ahead): not a user read's page-cache
        // hit or miss. Reads that had to open a table are counted apart.
        let footer_bytes = source.read_at_uncounted(footer_at, FOOTER_LEN)?;
        let footer = Footer::decode(&footer_bytes, file_size).map_err(at(&path, footer_at))?;

        let read_meta = |h: BlockHandle| -> Result<Vec<u8>> {
            // Handles were bounded by the file size in Footer::decode.
            let len = h.size_usize().map_err(at(&path, h.offset))?;
            let disk = source.read_at_uncounted(h.offset, len)?;
            decode_block(disk).map_err(at(&path, h.offset))
        };

        let props = TableProperties::decode(&read_meta(footer.properties)?)
            .map_err(at(&path, footer.properties.offset))?;
        let filter = if footer.filter.size == 0 {
            None
        } else {
            Some(
                BloomFilter::decode(read_meta(footer.filter)?)
                    .map_err(at(&path, footer.filter.offset))?,
            )
        };
        let range_dels = Self::read_range_dels(&footer, &props, footer_at, &read_meta)
            .map_err(at(&path, props.range_del_offset))?;
        let index_block =
            Block::new(read_meta(footer.index)?).map_err(at(&path, footer.index.offset))?;
        let range_del_handle = BlockHandle {
            offset: props.range_del_offset,
            size: props.range_del_size,
        };
        let data_end = [
            footer.filter,
            range_del_handle,
            footer.index,
            footer.properties,
        ]
        .iter()
        .filter(|h| h.size > 0)
        .map(|h| h.offset)
        .min()
        .unwrap_or(footer_at);
        let index = Self::parse_index(index_block, data_end, &props)
            .map_err(at(&path, footer.index.offset))?;
        let user_reads = Arc::new(UserReadMarks::new(index.len()));
        let pinned = index_and_filter_bytes(&index, filter.as_ref())
            + user_reads.size()
            + range_dels
                .iter()
                .map(|t| std::mem::size_of::<RangeTombstone>() + t.begin.len() + t.end.len())
                .sum::<usize>();
        let pin = cache.as_ref().map(|c| c.reserve(pinned));

        Ok(TableReader {
            source,
            table_id,
            cache,
            index,
            filter,
            props,
            range_dels,
            file_size,
            user_reads,
            _pin: pin,
        })
    }

    /// Reads and checks the range-tombstone block the properties name, if
    /// any: only a version 2 table may have one, it lies between the data
    /// blocks and the footer, and it holds exactly the number of
    /// well-formed tombstones the properties claim, in order.
    fn read_range_dels(
        footer: &Footer,
        props: &TableProperties,
        footer_at: u64,
        read_meta: &dyn Fn(BlockHandle) -> Result<Vec<u8>>,
    ) -> Result<Vec<RangeTombstone>> {
        if props.range_del_size == 0 {
            return Ok(Vec::new());
        }
        if footer.version < crate::table::format::FORMAT_VERSION_RANGE_DELETES {
            return Err(Error::corruption(format!(
                "a table of format version {} cannot hold range tombstones, but its properties name a block of them",
                footer.version
            )));
        }
        let h = BlockHandle {
            offset: props.range_del_offset,
            size: props.range_del_size,
        };
        if h.offset < props.data_size
            || h.size < BLOCK_TRAILER_LEN as u64
            || h.end().is_none_or(|e| e > footer_at)
        {
            return Err(Error::corruption(format!(
                "range tombstone block handle (offset {}, size {}) lies outside the meta blocks (data ends at {}, footer at {footer_at})",
                h.offset, h.size, props.data_size
            )));
        }
        let mut it = BlockIter::new(Arc::new(Block::new(read_meta(h)?)?));
        it.seek_to_first()?;
        let mut out: Vec<RangeTombstone> = Vec::new();
        let mut prev: Vec<u8> = Vec::new();
        while it.valid() {
            if !out.is_empty() && compare_internal(&prev, it.key()) != Ordering::Less {
                return Err(Error::corruption(format!(
                    "range tombstone {} does not sort after the previous one",
                    out.len()
                )));
            }
            out.push(RangeTombstone::decode(it.key(), it.value()).map_err(|e| {
                Error::corruption(format!("range tombstone {}: {}", out.len(), e.message()))
            })?);
            prev.clear();
            prev.extend_from_slice(it.key());
            it.next()?;
        }
        if out.len() as u64 != props.num_range_deletes {
            return Err(Error::corruption(format!(
                "range tombstone block holds {} tombstones but the properties say {}",
                out.len(),
                props.num_range_deletes
            )));
        }
        Ok(out)
    }

    /// The table's range tombstones.
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.range_dels
    }

    /// The highest sequence number, at most `snapshot`, of the table's
    /// range tombstones covering `user_key` (0 if none does).
    pub fn range_del_seq(&self, user_key: &[u8], snapshot: SeqNo) -> SeqNo {
        // Sorted by first key: only those starting at or before the key
        // can cover it.
        let starts_before = self
            .range_dels
            .partition_point(|t| t.begin.as_slice() <= user_key);
        covering_seq(&self.range_dels[..starts_before], user_key, snapshot)
    }

    /// Opens table `expected.number` for the engine: like [`Self::open`],
    /// and Corruption if the file is not the table the manifest names (see
    /// [`crate::table::identity`]).
    pub fn open_verified(
        source: Arc<dyn RandomSource>,
        expected: &ExpectedTable,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<TableReader> {
        expected.verify_size(source.path(), source.size())?;
        let table = Self::open(source, expected.number, cache)?;
        expected.verify_properties(table.path(), &table.props)?;
        Ok(table)
    }

    /// Decodes and cross-checks the index against the properties.
    pub(crate) fn parse_index(
        block: Block,
        data_end: u64,
        props: &TableProperties,
    ) -> Result<BlockIndex> {
        let mut it = BlockIter::new(Arc::new(block));
        it.seek_to_first()?;
        let mut index = BlockIndex::default();
        while it.valid() {
            let handle = BlockHandle::decode_varint(it.value())?;
            parse_internal_key(it.key())?;
            // Blocks are contiguous: each starts where the index's data ends so far.
            let expected_offset = index.data_end();
            if handle.offset != expected_offset
                || handle.size < BLOCK_TRAILER_LEN as u64
                || handle.end().filter(|&e| e <= data_end).is_none()
            {
                return Err(Error::corruption(format!(
                    "index entry {} has bad handle (offset {}, size {}); expected offset {expected_offset}, data ends at {data_end}",
                    index.len(),
                    handle.offset,
                    handle.size
                )));
            }
            if let Some(prev) = index.last() {
                if compare_internal(prev.last_key, it.key()) != Ordering::Less {
                    return Err(Error::corruption("index keys are not increasing"));
                }
            }
            index.push(it.key(), handle)?;
            it.next()?;
        }
        index.shrink_to_fit();
        let consistent = index.len() as u64 == props.num_data_blocks
            && index.data_end() == props.data_size
            && (index.is_empty() == (props.num_entries == 0))
            && match index.last() {
                Some(e) => e.last_key == props.largest_key.as_slice(),
                None => true,
            };
        if !consistent {
            return Err(Error::corruption(
                "index block disagrees with the table properties",
            ));
        }
        Ok(index)
    }

    /// The data blocks user reads have fetched through this reader.
    pub fn user_reads(&self) -> &Arc<UserReadMarks> {
        &self.user_reads
    }

    pub fn table_id(&self) -> u64 {
        self.table_id
    }

    pub fn path(&self) -> &Path {
        self.source.path()
    }

    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// Bytes of index and filter this reader pins against the block
    /// cache's budget (0 without a cache).
    #[cfg(test)]
    pub fn pinned_bytes(&self) -> usize {
        self._pin.as_ref().map_or(0, |p| p.bytes())
    }

    /// The in-memory index, one entry per data block in file order.
    pub fn index(&self) -> &BlockIndex {
        &self.index
    }

    /// False means `user_key` is definitely not in the table.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        match &self.filter {
            Some(f) => f.may_contain(user_key),
            None => true,
        }
    }

    /// Decodes an on-disk data block (checksum, decompression, restarts).
    pub(crate) fn parse_data_block(&self, handle: BlockHandle, disk: Vec<u8>) -> Result<Block> {
        decode_block(disk)
            .and_then(Block::new)
            .map_err(at(self.source.path(), handle.offset))
    }

    /// Starts putting the data blocks `idxs` (ascending) where user reads
    /// will look for them. Where this table's reads go through the page
    /// cache, each run of neighbouring blocks is handed to kernel readahead
    /// (`RandomSource::prefetch`) and returned in `in_flight`, so the
    /// caller can overlap the runs of several tables and then wait for each
    /// with [`TableReader::finish_warming`]. Otherwise (direct user reads)
    /// the blocks are read into the block cache now, if there is one; with
    /// neither, nothing is warmed.
    pub fn start_warming(&self, idxs: &[usize]) -> Result<Warming> {
        let mut w = Warming::default();
        let mut i = 0;
        while i < idxs.len() {
            let mut j = i;
            while j + 1 < idxs.len() && idxs[j + 1] == idxs[j] + 1 {
                j += 1;
            }
            let (first, last) = (self.handle(idxs[i])?, self.handle(idxs[j])?);
            let end = last.end().unwrap_or(u64::MAX);
            let len = end.saturating_sub(first.offset);
            let warmed = if self.source.prefetch(first.offset, len) {
                w.in_flight.push((first.offset, len));
                true
            } else if self.cache.is_some() {
                for &idx in &idxs[i..=j] {
                    self.warm_block(idx)?;
                }
                true
            } else {
                false
            };
            if warmed {
                w.blocks += (j - i + 1) as u64;
                w.bytes += len;
            }
            i = j + 1;
        }
        Ok(w)
    }

    /// Waits until a range [`TableReader::start_warming`] handed to
    /// readahead is in the page cache, by reading it (1 MiB at a time,
    /// uncounted as a user read's hit or miss): a user read right after the
    /// install then finds it there instead of waiting for the rest of a
    /// readahead. A range that cannot be read back is an error.
    pub fn finish_warming(&self, offset: u64, len: u64) -> Result<()> {
        const CHUNK: u64 = 1 << 20;
        let end = offset.saturating_add(len);
        let mut at = offset;
        while at < end {
            let n = CHUNK.min(end - at);
            self.source.read_at_uncounted(at, n as usize)?;
            at += n;
        }
        Ok(())
    }

    /// Reads data block `idx` through the block cache (filling it), for a
    /// user read or, with its readahead state, an iterator.
    fn read_data_block(
        &self,
        idx: usize,
        readahead: Option<&mut ScanReadahead>,
    ) -> Result<Arc<Block>> {
        let handle = self.handle(idx)?;
        self.user_reads.mark(idx);
        if let Some(cache) = &self.cache {
            if let Some(b) = cache.get(self.table_id, handle.offset) {
                return Ok(b);
            }
        }
        if let Some((offset, len)) =
            readahead.and_then(|r| r.on_miss(handle.offset, handle.size, self.index.data_end()))
        {
            // Where reads bypass the page cache this does nothing, and the
            // iterator reads block by block.
            self.source.prefetch(offset, len);
        }
        self.load_block(handle, false)
    }

    /// Puts data block `idx` where a user read would (block cache, page
    /// cache) without counting as a user read's hit or miss.
    fn warm_block(&self, idx: usize) -> Result<()> {
        let handle = self.handle(idx)?;
        if self
            .cache
            .as_ref()
            .is_some_and(|c| c.contains(self.table_id, handle.offset))
        {
            return Ok(());
        }
        self.load_block(handle, true).map(|_| ())
    }

    fn handle(&self, idx: usize) -> Result<BlockHandle> {
        self.index
            .handle(idx)
            .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "data block index out of range"))
    }

    /// Reads, verifies and decodes a block, and adds it to the block cache.
    fn load_block(&self, handle: BlockHandle, warming: bool) -> Result<Arc<Block>> {
        // Bounded by the file size at open.
        let len = handle
            .size_usize()
            .map_err(at(self.source.path(), handle.offset))?;
        let disk = if warming {
            self.source.read_at_uncounted(handle.offset, len)?
        } else {
            self.source.read_at(handle.offset, len)?
        };
        let block = Arc::new(self.parse_data_block(handle, disk)?);
        if let Some(cache) = &self.cache {
            cache.insert(
                self.table_id,
                handle.offset,
                Arc::clone(&block),
                block.size(),
            );
        }
        Ok(block)
    }

    /// Index of the first data block whose last key is >= `target`.
    fn find_block(&self, target: &[u8]) -> usize {
        self.index
            .partition_point(|last_key| compare_internal(last_key, target) == Ordering::Less)
    }

    /// The newest entry for `user_key` with seq <= `snapshot`.
    #[cfg(test)]
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Result<Option<(ValueKind, Vec<u8>)>> {
        Ok(self
            .get_entry(user_key, snapshot)?
            .map(|(kind, _, value)| (kind, value.as_slice().to_vec())))
    }

    /// Like [`Self::get`], with the entry's sequence number, and the value
    /// in place, holding the decoded data block it is in, so the caller can
    /// copy the value or share the block ([`BlockValue::into_value`]). Range tombstones are not consulted (see
    /// [`Self::range_del_seq`]).
    pub fn get_entry(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(ValueKind, SeqNo, BlockValue)>> {
        self.find(user_key, snapshot, |kind, seq, it| {
            (kind, seq, it.into_block_value())
        })
    }

    /// The sequence number of the newest write to `user_key` in this table
    /// (a put, a delete, or a range tombstone covering it), without
    /// copying a value; the bloom filter answers most keys the table does
    /// not hold.
    pub fn latest_seq(&self, user_key: &[u8]) -> Result<Option<SeqNo>> {
        let point = self.find(user_key, MAX_SEQ, |_, seq, _| seq)?;
        let range = Some(self.range_del_seq(user_key, MAX_SEQ)).filter(|&seq| seq > 0);
        Ok(point.max(range))
    }

    /// Finds the newest point entry for `user_key` with seq <= `snapshot`
    /// and hands its kind, sequence number and a block iterator positioned
    /// on it to `found`. Range tombstones are not consulted (see
    /// [`Self::range_del_seq`]).
    fn find<T>(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        found: impl FnOnce(ValueKind, SeqNo, BlockIter) -> T,
    ) -> Result<Option<T>> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let target = SeekKey::new(user_key, snapshot.min(MAX_SEQ));
        let target = target.as_slice();
        let mut idx = self.find_block(target);
        while idx < self.index.len() {
            let offset = self.handle(idx)?.offset;
            let ctx = at(self.source.path(), offset);
            let mut it = BlockIter::new(self.read_data_block(idx, None)?);
            it.seek(target).map_err(&ctx)?;
            if it.valid() {
                let p = parse_internal_key(it.key()).map_err(&ctx)?;
                if p.user_key == user_key {
                    if p.kind == ValueKind::RangeDelete {
                        return Err(ctx(Error::corruption(
                            "a data block holds a range tombstone (they belong in their own block)",
                        )));
                    }
                    let (kind, seq) = (p.kind, p.seq);
                    return Ok(Some(found(kind, seq, it)));
                }
                return Ok(None);
            }
            // Only reachable if the index lied; keep looking forward.
            idx += 1;
        }
        Ok(None)
    }

    /// An iterator over all entries, reading through the block cache.
    pub fn iter(self: &Arc<Self>) -> TableIterator {
        TableIterator {
            inner: TwoLevel::new(Arc::clone(self), CachedFetch::default()),
        }
    }
}

/// How a two-level iterator obtains data block `idx`.
pub(crate) trait BlockFetch {
    fn fetch(&mut self, table: &TableReader, idx: usize) -> Result<Arc<Block>>;
}

/// Blocks through the block cache, with readahead when the iterator walks
/// neighbouring blocks.
#[derive(Default)]
struct CachedFetch {
    readahead: ScanReadahead,
}

impl BlockFetch for CachedFetch {
    fn fetch(&mut self, table: &TableReader, idx: usize) -> Result<Arc<Block>> {
        self.readahead.note(idx);
        table.read_data_block(idx, Some(&mut self.readahead))
    }
}

/// Index-then-block iteration shared by [`TableIterator`] and the scanner.
pub(crate) struct TwoLevel<F: BlockFetch> {
    table: Arc<TableReader>,
    fetch: F,
    block_idx: usize,
    block: Option<BlockIter>,
}

impl<F: BlockFetch> TwoLevel<F> {
    pub(crate) fn new(table: Arc<TableReader>, fetch: F) -> Self {
        TwoLevel {
            table,
            fetch,
            block_idx: 0,
            block: None,
        }
    }

    pub(crate) fn fetch_mut(&mut self) -> &mut F {
        &mut self.fetch
    }

    fn ctx(&self) -> impl Fn(Error) -> Error + '_ {
        let offset = self
            .table
            .index
            .handle(self.block_idx)
            .map_or(0, |h| h.offset);
        at(self.table.path(), offset)
    }

    /// Loads block `idx` (or clears the position past the end).
    fn load(&mut self, idx: usize) -> Result<bool> {
        self.block_idx = idx;
        if idx >= self.table.index.len() {
            self.block = None;
            return Ok(false);
        }
        match self.fetch.fetch(&self.table, idx) {
            Ok(b) => {
                self.block = Some(BlockIter::new(b));
                Ok(true)
            }
            Err(e) => {
                self.block = None;
                Err(e)
            }
        }
    }

    /// Moves forward over exhausted blocks until positioned or at the end.
    fn skip_exhausted(&mut self) -> Result<()> {
        while self.block.as_ref().is_some_and(|b| !b.valid()) {
            if !self.load(self.block_idx + 1)? {
                return Ok(());
            }
            let r = self.block.as_mut().map_or(Ok(()), |b| b.seek_to_first());
            self.check(r)?;
        }
        Ok(())
    }

    fn check(&mut self, r: Result<()>) -> Result<()> {
        if let Err(e) = r {
            let e = (self.ctx())(e);
            self.block = None;
            return Err(e);
        }
        Ok(())
    }

    /// Moves back over exhausted blocks until positioned or before the
    /// first.
    fn skip_exhausted_back(&mut self) -> Result<()> {
        while self.block.as_ref().is_some_and(|b| !b.valid()) {
            let Some(idx) = self.block_idx.checked_sub(1) else {
                self.block = None;
                return Ok(());
            };
            self.load(idx)?;
            let r = self.block.as_mut().map_or(Ok(()), |b| b.seek_to_last());
            self.check(r)?;
        }
        Ok(())
    }

    pub(crate) fn seek_to_block(&mut self, idx: usize, target: Option<&[u8]>) -> Result<()> {
        if !self.load(idx)? {
            return Ok(());
        }
        let r = match (self.block.as_mut(), target) {
            (Some(b), Some(t)) => b.seek(t),
            (Some(b), None) => b.seek_to_first(),
            (None, _) => Ok(()),
        };
        self.check(r)?;
        self.skip_exhausted()
    }

    pub(crate) fn current_block(&self) -> usize {
        self.block_idx
    }
}

impl<F: BlockFetch> InternalIterator for TwoLevel<F> {
    fn valid(&self) -> bool {
        self.block.as_ref().is_some_and(|b| b.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_to_block(0, None)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let idx = self.table.find_block(target);
        self.seek_to_block(idx, Some(target))
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let Some(last) = self.table.index.len().checked_sub(1) else {
            self.block = None;
            return Ok(());
        };
        if !self.load(last)? {
            return Ok(());
        }
        let r = self.block.as_mut().map_or(Ok(()), |b| b.seek_to_last());
        self.check(r)?;
        self.skip_exhausted_back()
    }

    fn prev(&mut self) -> Result<()> {
        let r = self.block.as_mut().map_or(Ok(()), |b| b.prev());
        self.check(r)?;
        self.skip_exhausted_back()
    }

    fn next(&mut self) -> Result<()> {
        let r = self.block.as_mut().map_or(Ok(()), |b| b.next());
        self.check(r)?;
        self.skip_exhausted()
    }

    fn key(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |b| b.key())
    }

    fn value(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |b| b.value())
    }
}

/// Iterates a table in internal-key order, reading blocks through the
/// block cache. Errors leave the iterator invalid.
pub struct TableIterator {
    inner: TwoLevel<CachedFetch>,
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()
    }
    fn prev(&mut self) -> Result<()> {
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}
