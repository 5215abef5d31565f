//! Writes a table through a [`TableSink`].

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, SeqNo, ValueKind};
use crate::range_tombstone::RangeTombstone;
use crate::table::block::{BlockBuilder, DEFAULT_RESTART_INTERVAL};
use crate::table::filter::BloomBuilder;
use crate::table::format::{
    encode_block, encode_padded_block, BlockHandle, Compression, Footer, BLOCK_TRAILER_LEN,
    FORMAT_VERSION_PADDED, FORMAT_VERSION_PLAIN, FORMAT_VERSION_RANGE_DELETES, PAD_LEN_BYTES,
};
use crate::table::properties::TableProperties;
use crate::table::source::TableSink;

/// Largest block target accepted; larger requests are clamped.
pub const MAX_BLOCK_SIZE: usize = 32 << 20;
/// Largest single entry (internal key + value) a table accepts.
pub const MAX_ENTRY_BYTES: usize = 1 << 30;
/// The unit data blocks are aligned to: the page cache's page.
pub const PAGE: usize = 4096;
/// Most filler bytes a block gets to end on a page boundary: an eighth of a
/// page, so alignment never costs more than that in space. Blocks of large
/// entries, whose slack would be larger, stay unaligned.
pub const MAX_FILLER: usize = PAGE / 8;
/// What one entry can add to a block beyond its key and value bytes: three
/// varint lengths and a restart point.
const ENTRY_OVERHEAD_BOUND: usize = 3 * 5 + 4;
/// A padded block's bytes beyond its contents and filler.
const PADDED_OVERHEAD: usize = PAD_LEN_BYTES + BLOCK_TRAILER_LEN;

/// How a table is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// Target uncompressed size of a data block (clamped to 1..=32 MiB).
    pub block_size: usize,
    pub compression: Compression,
    /// Bloom filter bits per user key; 0 = no filter (clamped to <= 64).
    pub bloom_bits_per_key: usize,
    /// zstd level when `compression` is Zstd (clamped to 1..=22; 1..=3 is the sane range).
    pub zstd_level: i32,
    /// The keyspace the table belongs to, recorded in its properties (0:
    /// the default keyspace, which records nothing).
    pub keyspace_id: u32,
    /// End data blocks on page boundaries where that costs at most
    /// [`MAX_FILLER`] bytes, so a block read touches one page instead of
    /// two and a cached page holds whole blocks. Takes effect only for
    /// uncompressed tables with blocks of at least a page.
    pub align_blocks: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            compression: Compression::None,
            bloom_bits_per_key: 10,
            zstd_level: 1,
            keyspace_id: 0,
            align_blocks: true,
        }
    }
}

/// What the engine needs to record about a finished table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSummary {
    pub file_size: u64,
    pub num_entries: u64,
    pub num_deletes: u64,
    /// Range tombstones (not counted in `num_entries`).
    pub num_range_deletes: u64,
    /// Internal keys bounding every key the table holds or deletes: its
    /// point entries and the ranges of its tombstones (see
    /// [`RangeTombstone::largest_bound`]); empty for an empty table.
    pub smallest_key: Vec<u8>,
    pub largest_key: Vec<u8>,
    /// 0 for an empty table.
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
}

/// Builds one table. Keys must be added in strictly increasing
/// [`compare_internal`] order.
///
/// An empty table (no `add` before `finish`) is valid: it has no data
/// blocks, an empty index, empty key range and seqnos 0; readers return
/// nothing from it. Whether to keep such a file is the caller's decision.
///
/// After any sink error the builder is poisoned and every later call fails.
pub struct TableBuilder<S: TableSink> {
    sink: S,
    opts: TableOptions,
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    bloom: Option<BloomBuilder>,
    last_key: Vec<u8>,
    props: TableProperties,
    range_dels: Vec<RangeTombstone>,
    /// Whether data blocks are cut and padded to end on page boundaries
    /// (`align_blocks` where it applies).
    aligned: bool,
    /// Whether any block was padded (the table is then format version 3).
    padded: bool,
    failed: bool,
}

impl<S: TableSink> TableBuilder<S> {
    pub fn new(sink: S, opts: TableOptions) -> Self {
        let opts = TableOptions {
            block_size: opts.block_size.clamp(1, MAX_BLOCK_SIZE),
            compression: opts.compression,
            bloom_bits_per_key: opts.bloom_bits_per_key.min(64),
            zstd_level: opts.zstd_level.clamp(1, 22),
            keyspace_id: opts.keyspace_id,
            align_blocks: opts.align_blocks,
        };
        let aligned =
            opts.align_blocks && opts.compression == Compression::None && opts.block_size >= PAGE;
        TableBuilder {
            sink,
            opts,
            offset: 0,
            data_block: BlockBuilder::new(DEFAULT_RESTART_INTERVAL),
            index_block: BlockBuilder::new(1),
            bloom: (opts.bloom_bits_per_key > 0)
                .then(|| BloomBuilder::new(opts.bloom_bits_per_key)),
            last_key: Vec::new(),
            props: TableProperties {
                keyspace_id: opts.keyspace_id,
                ..TableProperties::default()
            },
            range_dels: Vec::new(),
            aligned,
            padded: false,
            failed: false,
        }
    }

    /// In aligned mode, the bytes the pending block may take on disk: up
    /// to the page boundary nearest `block_size` past its start, or the
    /// one after when that would leave less than half a block.
    fn room_to_boundary(&self) -> usize {
        let start = self.offset as usize % PAGE;
        let down = (start + self.opts.block_size) / PAGE * PAGE - start;
        if down >= self.opts.block_size / 2 {
            down
        } else {
            down + PAGE
        }
    }

    /// Records the table's file number and its database's id in the
    /// properties, so a reader can tell this table from another one (see
    /// [`crate::table::identity`]). Without it both are 0 (unknown).
    pub fn with_identity(mut self, file_number: u64, db_id: u64) -> Self {
        self.props.file_number = file_number;
        self.props.db_id = db_id;
        self
    }

    fn check_ok(&self) -> Result<()> {
        if self.failed {
            Err(Error::invalid(
                "table builder failed earlier and cannot continue",
            ))
        } else {
            Ok(())
        }
    }

    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.check_ok()?;
        let parsed = parse_internal_key(ikey)
            .map_err(|e| Error::invalid(format!("bad internal key: {}", e.message())))?;
        if ikey.len().saturating_add(value.len()) > MAX_ENTRY_BYTES {
            return Err(Error::invalid(format!(
                "entry of {} bytes exceeds the {MAX_ENTRY_BYTES}-byte limit",
                ikey.len() + value.len()
            )));
        }
        let first = self.props.num_entries == 0;
        if !first && compare_internal(&self.last_key, ikey) != Ordering::Less {
            return Err(Error::invalid(
                "table keys must be added in strictly increasing internal-key order",
            ));
        }
        if let Some(bloom) = &mut self.bloom {
            if first || crate::key::user_key(&self.last_key) != parsed.user_key {
                bloom.add_key(parsed.user_key);
            }
        }
        let p = &mut self.props;
        if first {
            p.smallest_key = ikey.to_vec();
            p.smallest_seq = parsed.seq;
            p.largest_seq = parsed.seq;
        } else {
            p.smallest_seq = p.smallest_seq.min(parsed.seq);
            p.largest_seq = p.largest_seq.max(parsed.seq);
        }
        p.num_entries += 1;
        if parsed.kind == ValueKind::Delete {
            p.num_deletes += 1;
        }
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);

        if self.aligned {
            // Cut before an entry that might carry the block past its
            // boundary (it always takes at least one entry).
            let bound = ikey.len() + value.len() + ENTRY_OVERHEAD_BOUND;
            let room = self.room_to_boundary();
            if !self.data_block.is_empty()
                && self.data_block.estimated_size() + bound + PADDED_OVERHEAD > room
            {
                self.flush_data_block()?;
            }
            self.data_block.add(ikey, value);
            if self.data_block.estimated_size() + PADDED_OVERHEAD >= self.room_to_boundary() {
                self.flush_data_block()?;
            }
            return Ok(());
        }
        self.data_block.add(ikey, value);
        if self.data_block.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Adds a range tombstone, in any order relative to the point entries
    /// and to other tombstones; an empty range is ignored. They are written
    /// in their own block, which makes the table format version 2.
    pub fn add_range_tombstone(&mut self, t: &RangeTombstone) -> Result<()> {
        self.check_ok()?;
        if t.begin < t.end {
            self.range_dels.push(t.clone());
        }
        Ok(())
    }

    /// Whether any range tombstone was added.
    pub fn has_range_tombstones(&self) -> bool {
        !self.range_dels.is_empty()
    }

    fn write_block(&mut self, disk: &[u8]) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: disk.len() as u64,
        };
        if let Err(e) = self.sink.write_all(disk) {
            self.failed = true;
            return Err(e);
        }
        self.offset += disk.len() as u64;
        Ok(handle)
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let last = self.data_block.last_key().to_vec();
        let raw = self.data_block.finish();
        let disk = if self.aligned {
            self.encode_to_boundary(&raw)
        } else {
            encode_block(&raw, self.opts.compression, self.opts.zstd_level)
        };
        let handle = self.write_block(&disk)?;
        self.props.num_data_blocks += 1;
        self.props.data_size += handle.size;
        let mut hv = Vec::with_capacity(2 * crate::varint::MAX_LEN_U64);
        handle.encode_varint(&mut hv);
        self.index_block.add(&last, &hv);
        Ok(())
    }

    /// An uncompressed block, padded to end on the next page boundary when
    /// that takes at most [`MAX_FILLER`] bytes.
    fn encode_to_boundary(&mut self, raw: &[u8]) -> Vec<u8> {
        let end = self.offset as usize + raw.len() + BLOCK_TRAILER_LEN;
        let gap = (PAGE - end % PAGE) % PAGE;
        if (PAD_LEN_BYTES..=MAX_FILLER + PAD_LEN_BYTES).contains(&gap) {
            self.padded = true;
            encode_padded_block(raw, gap - PAD_LEN_BYTES)
        } else {
            encode_block(raw, Compression::None, 1)
        }
    }

    /// Bytes written so far plus the pending data block (uncompressed).
    pub fn estimated_size(&self) -> u64 {
        let pending = if self.data_block.is_empty() {
            0
        } else {
            self.data_block.estimated_size() as u64
        };
        self.offset + pending
    }

    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Writes the range-tombstone block (internal key of the first key ->
    /// end key, in internal-key order); the default handle if there is none.
    fn write_range_dels(&mut self) -> Result<BlockHandle> {
        let mut dels = std::mem::take(&mut self.range_dels);
        if dels.is_empty() {
            return Ok(BlockHandle::default());
        }
        dels.sort_by(|a, b| compare_internal(&a.internal_key(), &b.internal_key()));
        dels.dedup_by(|a, b| a.begin == b.begin && a.seq == b.seq);
        let mut block = BlockBuilder::new(DEFAULT_RESTART_INTERVAL);
        let p = &mut self.props;
        for (i, t) in dels.iter().enumerate() {
            block.add(&t.internal_key(), &t.end);
            if i == 0 && p.num_entries == 0 {
                p.smallest_seq = t.seq;
                p.largest_seq = t.seq;
            }
            p.smallest_seq = p.smallest_seq.min(t.seq);
            p.largest_seq = p.largest_seq.max(t.seq);
        }
        p.num_range_deletes = dels.len() as u64;
        let handle = self.write_block(&encode_block(&block.finish(), Compression::None, 1))?;
        self.props.range_del_offset = handle.offset;
        self.props.range_del_size = handle.size;
        self.range_dels = dels;
        Ok(handle)
    }

    /// Writes the remaining data, filter, index, properties and footer and
    /// returns the summary plus the sink (the caller syncs/closes it).
    pub fn finish(mut self) -> Result<(TableSummary, S)> {
        self.check_ok()?;
        self.flush_data_block()?;
        self.props.largest_key = self.last_key.clone();

        let filter = match self.bloom.take() {
            Some(b) => {
                let disk = encode_block(&b.finish(), Compression::None, 1);
                self.write_block(&disk)?
            }
            None => BlockHandle::default(),
        };
        let range_dels = self.write_range_dels()?;
        let index_raw = self.index_block.finish();
        let index = self.write_block(&encode_block(&index_raw, Compression::None, 1))?;
        let props_raw = self.props.encode();
        let properties = self.write_block(&encode_block(&props_raw, Compression::None, 1))?;
        let footer = Footer {
            filter,
            index,
            properties,
            version: if self.padded {
                FORMAT_VERSION_PADDED
            } else if range_dels.size > 0 {
                FORMAT_VERSION_RANGE_DELETES
            } else {
                FORMAT_VERSION_PLAIN
            },
        }
        .encode();
        self.write_block(&footer)?;

        let p = self.props;
        let (smallest_key, largest_key) =
            table_bounds(&p.smallest_key, &p.largest_key, &self.range_dels);
        Ok((
            TableSummary {
                file_size: self.offset,
                num_entries: p.num_entries,
                num_deletes: p.num_deletes,
                num_range_deletes: p.num_range_deletes,
                smallest_key,
                largest_key,
                smallest_seq: p.smallest_seq,
                largest_seq: p.largest_seq,
            },
            self.sink,
        ))
    }
}

/// The internal keys bounding a table with point keys from `smallest` to
/// `largest` (both empty when it has none) and the range tombstones
/// `range_dels`: what the manifest records, so that reads and compactions
/// that look at the table's key range see the keys its tombstones delete.
pub fn table_bounds(
    smallest: &[u8],
    largest: &[u8],
    range_dels: &[RangeTombstone],
) -> (Vec<u8>, Vec<u8>) {
    let mut lo: Option<Vec<u8>> = (!smallest.is_empty()).then(|| smallest.to_vec());
    let mut hi: Option<Vec<u8>> = (!largest.is_empty()).then(|| largest.to_vec());
    for t in range_dels {
        let (s, l) = (t.smallest_bound(), t.largest_bound());
        if lo
            .as_ref()
            .is_none_or(|k| compare_internal(&s, k) == Ordering::Less)
        {
            lo = Some(s);
        }
        if hi
            .as_ref()
            .is_none_or(|k| compare_internal(&l, k) == Ordering::Greater)
        {
            hi = Some(l);
        }
    }
    (lo.unwrap_or_default(), hi.unwrap_or_default())
}
