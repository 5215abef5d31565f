//! Entry points for fuzzing every parser of bytes read from disk.
//!
//! Each `pub fn <target>(data: &[u8])` feeds `data` to the engine's own
//! parser (the code recovery, reads, compaction, `check` and `repair` run)
//! and panics only when an invariant is broken: a parser that panics, an
//! error that is not `Corruption`, a successful parse that does not
//! round-trip, or two readers of the same bytes that disagree. The
//! libFuzzer targets in `fuzz/` and the stable replay test
//! `tests/fuzz_regressions.rs` both call these, through [`TARGETS`].
//!
//! Checksums would stop almost every mutated input at the first CRC, so the
//! targets whose format is checksummed take a leading flags byte: with bit 0
//! set the harness recomputes the checksums before parsing, which lets the
//! fuzzer reach the structure behind them; with it clear the bytes are
//! parsed as they are, which fuzzes the checksum checks themselves.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::error::{ErrorKind, Result};
use crate::filenames::{self, FileKind};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, make_internal_key, parse_internal_key, ValueKind, MAX_SEQ};
use crate::record_log::{LogReader, TailState, HEADER_LEN};
use crate::table::block::{Block, BlockBuilder, BlockIter};
use crate::table::filter::{BloomBuilder, BloomFilter};
use crate::table::format::{
    decode_block, encode_block, encode_padded_block, read_u32_le, read_u64_le, BlockHandle,
    Compression, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN,
};
use crate::table::properties::TableProperties;
use crate::table::reader::TableReader;
use crate::table::scanner::TableScanner;
use crate::table::MemSource;
use crate::version::{Version, VersionBuilder, VersionEdit, NUM_LEVELS};
use crate::wal::WalSet;

/// A fuzz target: takes any bytes, panics only on a broken invariant.
pub type Target = fn(&[u8]);

/// Every target, by the name its `fuzz/` binary and corpus directory use.
pub const TARGETS: &[(&str, Target)] = &[
    ("block", block),
    ("block_trailer", block_trailer),
    ("footer", footer),
    ("properties", properties),
    ("index", index),
    ("table", table),
    ("bloom", bloom),
    ("wal", wal),
    ("batch", batch),
    ("version_edit", version_edit),
    ("manifest", manifest),
    ("current", current),
];

/// Upper bound on entries walked per input: far more than any input the
/// fuzzer builds can hold (every entry takes at least 3 bytes), so hitting
/// it means an iterator that does not advance.
const MAX_STEPS: usize = 1 << 20;

/// A parse error from bytes must be Corruption, never an I/O or usage error.
fn expect_corruption<T>(r: &Result<T>, what: &str) {
    if let Err(e) = r {
        assert_eq!(
            e.kind(),
            ErrorKind::Corruption,
            "{what}: bytes from disk gave a non-corruption error: {e}"
        );
    }
}

/// Splits off the flags byte of a checksummed target.
fn flags(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((f, rest)) => (*f, rest),
        None => (0, data),
    }
}

fn fix_checksums(flags: u8) -> bool {
    flags & 1 != 0
}

/// Walks an iterator from the first entry, collecting every entry;
/// `Err` if the walk found damage.
fn collect(it: &mut dyn InternalIterator) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        assert!(out.len() <= MAX_STEPS, "iterator does not advance");
        it.next()?;
    }
    Ok(out)
}

// ------------------------------------------------------------------ blocks

/// A decompressed block (entries + restart array), as `Block::new` sees it
/// after the checksum passed. Bit 1 of the flags byte instead builds a
/// block from entries taken from the input and checks that the reader
/// returns exactly them.
pub fn block(data: &[u8]) {
    let (flags, rest) = flags(data);
    if flags & 2 != 0 {
        return built_block(flags, rest);
    }
    let parsed = Block::new(rest.to_vec());
    expect_corruption(&parsed, "Block::new");
    let Ok(block) = parsed else { return };
    let mut it = BlockIter::new(Arc::new(block));
    let walked = collect(&mut it);
    expect_corruption(&walked, "block iteration");
    // Seeks to keys from the block and to bytes from the input must not
    // panic whatever the block holds.
    let mut targets: Vec<Vec<u8>> = walked
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.0)
        .collect();
    targets.extend(rest.chunks(9).take(8).map(<[u8]>::to_vec));
    for t in &targets {
        let r = it.seek(t);
        expect_corruption(&r, "block seek");
        if r.is_ok() && it.valid() {
            let _ = it.value();
            expect_corruption(&it.next(), "block next after seek");
        }
    }
}

/// Entries from `data`: `(key len, key, value len, value)` bytes, made
/// into sorted, distinct internal keys.
fn entries_from(data: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut seq = 1;
    while let Some((&klen, r)) = rest.split_first() {
        let k = r.get(..usize::from(klen % 24)).unwrap_or(r);
        let r = &r[k.len()..];
        let Some((&vlen, r)) = r.split_first() else {
            break;
        };
        let v = r.get(..usize::from(vlen)).unwrap_or(r);
        rest = &r[v.len()..];
        let kind = if klen & 0x80 != 0 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        out.push((make_internal_key(k, seq, kind), v.to_vec()));
        seq += 1;
    }
    out.sort_by(|a, b| compare_internal(&a.0, &b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

fn built_block(flags: u8, data: &[u8]) {
    let entries = entries_from(data);
    let mut b = BlockBuilder::new(usize::from(flags >> 4) + 1);
    for (k, v) in &entries {
        b.add(k, v);
    }
    let raw = b.finish();
    let block = Block::new(raw).expect("a built block parses");
    let mut it = BlockIter::new(Arc::new(block));
    assert_eq!(collect(&mut it).expect("a built block iterates"), entries);
    for (k, v) in &entries {
        it.seek(k).expect("seek in a built block");
        assert!(it.valid(), "seek missed a key of a built block");
        assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
    }
    if let Some((last, _)) = entries.last() {
        // Just past the last key: the same user key with sequence 0 sorts
        // after it unless it already has sequence 0 (never: seq >= 1).
        it.seek(&make_internal_key(
            crate::key::user_key(last),
            0,
            ValueKind::Delete,
        ))
        .expect("seek past the end of a built block");
        assert!(!it.valid(), "seek past the last key found an entry");
    }
}

/// Recomputes the CRC32C trailer of an on-disk block in place.
fn reseal_block(disk: &mut [u8]) {
    if let Some(crc_at) = disk.len().checked_sub(4) {
        let crc = crc32c::crc32c(&disk[..crc_at]);
        disk[crc_at..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// An on-disk block: checksum, compression type, decompression.
pub fn block_trailer(data: &[u8]) {
    let (flags, rest) = flags(data);
    let mut disk = rest.to_vec();
    if fix_checksums(flags) {
        reseal_block(&mut disk);
    }
    let decoded = decode_block(disk.clone());
    expect_corruption(&decoded, "decode_block");
    let Ok(raw) = decoded else { return };
    if disk.len() >= BLOCK_TRAILER_LEN && disk[disk.len() - BLOCK_TRAILER_LEN] == 0 {
        assert_eq!(raw, disk[..disk.len() - BLOCK_TRAILER_LEN], "stored block");
    }
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let again = decode_block(encode_block(&raw, c, 1)).expect("re-encoded block decodes");
        assert_eq!(again, raw, "block round trip through {c:?}");
    }
    let filler = raw.len() % 513;
    let again = decode_block(encode_padded_block(&raw, filler)).expect("padded block decodes");
    assert_eq!(again, raw, "block round trip with {filler} bytes of filler");
}

// ------------------------------------------------------------------ footer

/// A table footer: after the flags byte, 8 bytes of file size it is
/// checked against, then the footer (its checksum recomputed if asked).
pub fn footer(data: &[u8]) {
    let (flags, rest) = flags(data);
    let file_size = read_u64_le(rest, 0).unwrap_or(0);
    let mut buf = rest.get(8..).unwrap_or(&[]).to_vec();
    if fix_checksums(flags) && buf.len() == FOOTER_LEN {
        reseal_footer(&mut buf);
    }
    let buf = &buf[..];
    let decoded = Footer::decode(buf, file_size);
    expect_corruption(&decoded, "Footer::decode");
    let Ok(f) = decoded else { return };
    assert_eq!(&f.encode()[..], buf, "footer round trip");
    let limit = file_size - FOOTER_LEN as u64;
    for h in [f.index, f.properties] {
        assert!(h.end().is_some_and(|e| e <= limit), "{h:?} past {limit}");
    }
}

// -------------------------------------------------------------- properties

pub fn properties(data: &[u8]) {
    let decoded = TableProperties::decode(data);
    expect_corruption(&decoded, "TableProperties::decode");
    let Ok(p) = decoded else { return };
    assert_eq!(
        TableProperties::decode(&p.encode()).expect("re-encoded properties decode"),
        p
    );
}

// ------------------------------------------------------------------- index

/// A table's index block checked against its properties: input is
/// `u16 LE properties length, properties, u64 LE data end, index block`.
pub fn index(data: &[u8]) {
    let plen = data
        .get(..2)
        .map_or(0, |b| usize::from(u16::from_le_bytes([b[0], b[1]])));
    let rest = data.get(2..).unwrap_or(&[]);
    let (props, rest) = rest.split_at(plen.min(rest.len()));
    let data_end = read_u64_le(rest, 0).unwrap_or(0);
    let raw = rest.get(8..).unwrap_or(&[]);
    let Ok(props) = TableProperties::decode(props) else {
        return;
    };
    let Ok(block) = Block::new(raw.to_vec()) else {
        return;
    };
    let parsed = TableReader::parse_index(block, data_end, &props);
    expect_corruption(&parsed, "parse_index");
    let Ok(index) = parsed else { return };
    assert_eq!(index.len() as u64, props.num_data_blocks);
    let mut next = 0;
    for (i, e) in index.iter().enumerate() {
        assert_eq!(e.handle.offset, next, "index entry {i} is not contiguous");
        assert!(e.handle.size >= BLOCK_TRAILER_LEN as u64);
        next = e.handle.end().expect("bounded handle");
        assert!(next <= data_end);
        parse_internal_key(e.last_key).expect("index keys are internal keys");
        if i > 0 {
            assert_eq!(
                compare_internal(index.last_key(i - 1), e.last_key),
                Ordering::Less
            );
        }
    }
}

// ------------------------------------------------------------------- table

/// Makes every checksum of a table image match, as far as its handles can
/// be read: data blocks the index names, the meta blocks, the footer.
fn reseal_table(img: &mut [u8]) {
    let Some(footer_at) = img.len().checked_sub(FOOTER_LEN) else {
        return;
    };
    let handle = |img: &[u8], i: usize| BlockHandle {
        offset: read_u64_le(img, footer_at + i * 16).unwrap_or(0),
        size: read_u64_le(img, footer_at + i * 16 + 8).unwrap_or(0),
    };
    let in_bounds = |h: BlockHandle| -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(h.offset).ok()?;
        let end = start.checked_add(usize::try_from(h.size).ok()?)?;
        (h.size >= BLOCK_TRAILER_LEN as u64 && end <= footer_at).then_some(start..end)
    };
    let index = handle(img, 1);
    if let Some(r) = in_bounds(index) {
        let payload = img[r.start..r.end - BLOCK_TRAILER_LEN].to_vec();
        if let Ok(block) = Block::new(payload) {
            let mut it = BlockIter::new(Arc::new(block));
            let mut handles = Vec::new();
            if it.seek_to_first().is_ok() {
                while it.valid() && handles.len() < MAX_STEPS {
                    if let Ok(h) = BlockHandle::decode_varint(it.value()) {
                        handles.push(h);
                    }
                    if it.next().is_err() {
                        break;
                    }
                }
            }
            for h in handles {
                if let Some(r) = in_bounds(h) {
                    reseal_block(&mut img[r]);
                }
            }
        }
    }
    for i in [0, 2, 1] {
        if let Some(r) = in_bounds(handle(img, i)) {
            reseal_block(&mut img[r]);
        }
    }
    // The range-tombstone block, which the properties name.
    if let Some(r) = in_bounds(handle(img, 2)) {
        let props = TableProperties::decode(&img[r.start..r.end - BLOCK_TRAILER_LEN]);
        if let Ok(p) = props {
            let h = BlockHandle {
                offset: p.range_del_offset,
                size: p.range_del_size,
            };
            if let Some(r) = in_bounds(h) {
                reseal_block(&mut img[r]);
            }
        }
    }
    reseal_footer(&mut img[footer_at..]);
}

/// Recomputes the checksum of a footer (exactly `FOOTER_LEN` bytes).
fn reseal_footer(f: &mut [u8]) {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&f[..48]), &f[52..56]);
    f[48..52].copy_from_slice(&crc.to_le_bytes());
}

/// A whole table opened from bytes: open (footer, properties, filter,
/// index), then a full iteration, a compaction scan, point lookups and
/// seeks. The iterator and the scanner read the same blocks and must agree.
pub fn table(data: &[u8]) {
    let (flags, rest) = flags(data);
    let mut img = rest.to_vec();
    if fix_checksums(flags) {
        reseal_table(&mut img);
    }
    let src = MemSource::new(img, "fuzz.sst");
    let opened = TableReader::open(Arc::new(src.clone()), 1, None);
    expect_corruption(&opened, "TableReader::open");
    let Ok(table) = opened else { return };
    let table = Arc::new(table);

    let mut it = table.iter();
    let walked = collect(&mut it);
    expect_corruption(&walked, "table iteration");
    let mut scanner = TableScanner::new(Arc::clone(&table), Box::new(src.seq()));
    let scanned = collect(&mut scanner);
    expect_corruption(&scanned, "table scan");
    if let (Ok(a), Ok(b)) = (&walked, &scanned) {
        assert_eq!(a, b, "the user iterator and the compaction scan disagree");
    }

    let mut keys: Vec<Vec<u8>> = walked
        .unwrap_or_default()
        .into_iter()
        .take(64)
        .map(|(k, _)| k)
        .collect();
    keys.extend(rest.chunks(13).take(4).map(<[u8]>::to_vec));
    // A table that opened holds only well-formed range tombstones.
    for t in table.range_tombstones().iter().take(64) {
        assert!(
            t.begin < t.end,
            "an opened table holds an empty range tombstone"
        );
        keys.push(t.internal_key());
    }
    for k in &keys {
        let user = crate::key::user_key(k);
        for snapshot in [MAX_SEQ, 1] {
            expect_corruption(&table.get_entry(user, snapshot), "table get");
            let covering = table.range_del_seq(user, snapshot);
            assert!(
                covering <= snapshot,
                "a tombstone newer than the read covers it"
            );
        }
        let r = it.seek(k);
        expect_corruption(&r, "table seek");
    }
}

// ------------------------------------------------------------------- bloom

/// A filter block as decoded from a table; bit 0 of the flags byte instead
/// builds a filter over keys from the input and checks it has no false
/// negatives.
pub fn bloom(data: &[u8]) {
    let (flags, rest) = flags(data);
    if flags & 1 != 0 {
        let keys: Vec<&[u8]> = rest.chunks(usize::from(flags >> 4) + 1).collect();
        let mut b = BloomBuilder::new(usize::from((flags >> 1) & 7) * 3 + 1);
        for k in &keys {
            b.add_key(k);
        }
        let f = BloomFilter::decode(b.finish()).expect("a built filter decodes");
        for k in &keys {
            assert!(f.may_contain(k), "false negative for {k:?}");
        }
        return;
    }
    let decoded = BloomFilter::decode(rest.to_vec());
    expect_corruption(&decoded, "BloomFilter::decode");
    let Ok(f) = decoded else { return };
    for k in rest.chunks(7).take(16) {
        let _ = f.may_contain(k);
    }
    let _ = f.may_contain(b"");
}

// --------------------------------------------------------------------- WAL

/// Recomputes the header and payload checksums of every record of a log
/// image in place, as far as the length fields lead.
fn reseal_log(img: &mut [u8]) {
    let mut pos = 0usize;
    while let Some(h) = img.get(pos..pos + HEADER_LEN) {
        if h.iter().all(|&b| b == 0) {
            return;
        }
        let len = read_u32_le(h, 8).unwrap_or(0) as usize;
        let ty = h[12];
        // A recyclable header carries the log number after the type.
        let header_len = if crate::record_log::is_recyclable_code(ty) {
            crate::record_log::RECYCLABLE_HEADER_LEN
        } else {
            HEADER_LEN
        };
        if img.len() < pos + header_len {
            return;
        }
        let end = pos + header_len + len;
        if let Some(payload) = img.get(pos + header_len..end) {
            let crc = crate::record_log::record_crc(ty, payload);
            img[pos + 4..pos + 8].copy_from_slice(&crc.to_le_bytes());
        }
        let hcrc = crate::record_log::mask_crc(crc32c::crc32c(&img[pos + 4..pos + header_len]));
        img[pos..pos + 4].copy_from_slice(&hcrc.to_le_bytes());
        pos = end;
    }
}

/// The log number the `wal` target reads a log as, with bit 2 of its flags.
const FUZZ_LOG_NUMBER: u64 = 9;

/// A WAL (or manifest) record stream, read the way recovery reads it,
/// including sync marks and, with bit 1 of the flags byte, the strict mode
/// of a log sealed at the length in the next two bytes; with bit 2, read as
/// log [`FUZZ_LOG_NUMBER`] (recyclable records, a recycled file's stale
/// ones); then the repair salvage scan over the same bytes, and every
/// record decoded as a write batch.
pub fn wal(data: &[u8]) {
    let (flags, mut rest) = flags(data);
    let mut sealed = None;
    if flags & 2 != 0 {
        sealed = rest
            .get(..2)
            .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])));
        rest = rest.get(2..).unwrap_or(&[]);
    }
    let mut img = rest.to_vec();
    if fix_checksums(flags) {
        reseal_log(&mut img);
    }
    let img = &img[..];
    let len = img.len() as u64;
    let log_number = (flags & 4 != 0).then_some(FUZZ_LOG_NUMBER);
    let mut reader = LogReader::new("fuzz.log", img);
    if let Some(n) = log_number {
        reader = reader.for_log(n);
    }
    if let Some(s) = sealed {
        reader = reader.sealed_at(s);
    }
    let mut records: Vec<std::borrow::Cow<[u8]>> = Vec::new();
    let outcome = loop {
        match reader.read_record() {
            Ok(Some(r)) => {
                match &r {
                    // A full record is a slice of the image, never a copy
                    // or a read past its end.
                    std::borrow::Cow::Borrowed(b) => {
                        let start = b.as_ptr() as usize - img.as_ptr() as usize;
                        assert!(start + b.len() <= img.len());
                        let header = start as u64 - reader.last_record_offset();
                        assert!(
                            header == HEADER_LEN as u64
                                || header == crate::record_log::RECYCLABLE_HEADER_LEN as u64,
                            "payload {header} bytes after its record's start"
                        );
                        assert_eq!(reader.valid_len(), (start + b.len()) as u64);
                    }
                    // A compressed one decompressed within its bound, from
                    // a record inside the image.
                    std::borrow::Cow::Owned(o) => {
                        assert!(o.len() <= crate::record_log::MAX_COMPRESSED_RECORD_LEN);
                        assert!(reader.valid_len() <= img.len() as u64);
                        assert!(
                            reader.last_record_offset() + HEADER_LEN as u64 <= reader.valid_len()
                        );
                    }
                }
                records.push(r);
                assert!(records.len() <= MAX_STEPS);
            }
            Ok(None) => break Ok(reader.tail()),
            Err(e) => break Err(e),
        }
    };
    expect_corruption(&outcome, "LogReader");
    match outcome {
        Ok(tail) => {
            assert_eq!(tail.valid_len(len), reader.valid_len(), "{tail:?}");
            assert!(reader.synced_len() <= reader.valid_len());
            if let Some(s) = sealed {
                assert!(reader.valid_len() >= s, "ended before the sealed length");
            }
            assert!(
                matches!(reader.read_record(), Ok(None)),
                "not done after the end"
            );
            let slices: Vec<&[u8]> = records.iter().map(|r| &r[..]).collect();
            check_salvage_agrees(img, &slices, tail, log_number);
        }
        Err(e) => {
            let again = reader.read_record();
            assert!(
                matches!(&again, Err(a) if a.message() == e.message()),
                "a failed reader must keep failing the same way"
            );
        }
    }
    // Re-encoding the records reads them back unchanged.
    let mut out = Vec::new();
    for r in &records {
        out.extend_from_slice(&crate::record_log::encode_header(
            crate::record_log::RecordType::Full,
            r,
        ));
        out.extend_from_slice(r);
    }
    let back: Vec<std::borrow::Cow<[u8]>> = LogReader::new("again.log", &out)
        .collect::<Result<_>>()
        .expect("re-encoded records read back");
    assert_eq!(back, records);
    for r in &records {
        expect_corruption(&WriteBatch::decode(r), "WAL record as a batch");
    }
}

/// Repair's salvage scan finds every record recovery read, in order.
fn check_salvage_agrees(img: &[u8], records: &[&[u8]], tail: TailState, log_number: Option<u64>) {
    use crate::record_log::salvage::{salvage_records, Salvaged};
    let found = salvage_records(img, log_number);
    let salvaged: Vec<&[u8]> = found
        .iter()
        .filter_map(|s| match s {
            Salvaged::Record { payload, .. } => Some(&payload[..]),
            Salvaged::Damaged { .. } | Salvaged::Identity { .. } => None,
        })
        .collect();
    assert!(
        salvaged.starts_with(records),
        "salvage lost records that recovery reads"
    );
    // Past a recycled log's end salvage may still find this log's records
    // (beyond the stale ones recovery stops at).
    if !matches!(
        tail,
        TailState::Torn { .. } | TailState::Unpersisted { .. } | TailState::Recycled { .. }
    ) {
        assert_eq!(salvaged.len(), records.len(), "salvage found extra records");
        assert!(
            found
                .iter()
                .all(|s| matches!(s, Salvaged::Record { .. } | Salvaged::Identity { .. })),
            "salvage reports damage in a log recovery reads cleanly"
        );
    }
}

// ------------------------------------------------------------------- batch

/// A write batch payload (one WAL record): decode, then rebuilding it from
/// its entries gives a batch that decodes to the same entries. (Not the
/// same bytes: like most LEB128 readers the decoder takes an overlong
/// varint such as `80 00` for 0, which the writer never produces and a
/// record checksum protects against; the entries it yields are the same.)
pub fn batch(data: &[u8]) {
    let decoded = WriteBatch::decode(data);
    expect_corruption(&decoded, "WriteBatch::decode");
    let Ok(b) = decoded else { return };
    let mut again = WriteBatch::new();
    for (ks, e) in b.iter_scoped() {
        match e.kind {
            ValueKind::Put => again.put_scoped(ks, e.key, e.value),
            ValueKind::Delete => again.delete_scoped(ks, e.key),
            ValueKind::RangeDelete => again.delete_range_scoped(ks, e.key, e.value),
        }
        .expect("a decoded entry can be re-added");
    }
    again.set_sequence(b.sequence());
    let back = WriteBatch::decode(again.data()).expect("a rebuilt batch decodes");
    assert!(
        back.iter_scoped().eq(b.iter_scoped()),
        "batch round trip changed the entries or their keyspaces"
    );
    assert_eq!((back.sequence(), back.len()), (b.sequence(), b.len()));
    if again.data().len() == data.len() {
        // Canonical input: then the bytes are the same too.
        assert_eq!(again.data(), data, "batch round trip");
    }
}

// ---------------------------------------------------------------- manifest

/// One manifest record: decode, round trip, apply to an empty version.
pub fn version_edit(data: &[u8]) {
    let decoded = VersionEdit::decode(data);
    expect_corruption(&decoded, "VersionEdit::decode");
    let Ok(e) = decoded else { return };
    assert_eq!(
        VersionEdit::decode(&e.encode()).expect("re-encoded edit decodes"),
        e,
        "edit round trip"
    );
    let mut b = VersionBuilder::new(&Version::new());
    let applied = b.apply(&e).and_then(|_| b.build());
    expect_corruption(&applied, "applying an edit");
    if let Ok(v) = applied {
        check_version(&v);
    }
    for k in &e.keyspaces {
        let mut b = VersionBuilder::new(&Version::new());
        let applied = b.apply(&k.edit).and_then(|_| b.build());
        expect_corruption(&applied, "applying a keyspace's part of an edit");
        if let Ok(v) = applied {
            check_version(&v);
        }
    }
    let mut wals = WalSet::default();
    wals.apply(&e);
    let _ = wals.required();
}

fn check_version(v: &Version) {
    for level in 1..NUM_LEVELS {
        for w in v.files(level).windows(2) {
            assert!(
                w[0].largest_user_key() < w[1].smallest_user_key(),
                "L{level} overlaps"
            );
        }
    }
    assert_eq!(
        v.total_files(),
        (0..NUM_LEVELS).map(|l| v.num_files(l)).sum::<usize>()
    );
}

/// A whole manifest replayed by recovery's own code (the record stream and
/// every edit applied in turn). Flags bit 0 reseals the record checksums.
pub fn manifest(data: &[u8]) {
    let (flags, rest) = flags(data);
    let mut img = rest.to_vec();
    if fix_checksums(flags) {
        reseal_log(&mut img);
    }
    let replayed = replay_manifest_image(&img);
    expect_corruption(&replayed, "manifest replay");
    let Ok(r) = replayed else { return };
    check_version(&r.version);
    // What recovery opens must be a catalogue it can serve: ids of created
    // keyspaces below the next id (never reused), and no two keyspaces of
    // one name (a lookup by name would pick one of them at random).
    let mut names = std::collections::BTreeSet::new();
    for (id, k) in &r.keyspaces {
        check_version(&k.version);
        assert!(
            *id != 0 && *id < r.next_keyspace_id,
            "keyspace id {id} with next id {}",
            r.next_keyspace_id
        );
        assert!(
            names.insert(&k.def.name),
            "two keyspaces named {:?}",
            k.def.name
        );
        let _ = k.log_number;
    }
    let _ = r.default_log;
    let _ = (r.next_file, r.last_seq, r.db_id, r.wals.required());
}

/// Replays a manifest image with recovery's code. Recovery checks that a
/// manifest names itself, so the image is read under the name its first
/// record gives: a real manifest of any number then gets past that check
/// into its edits (keyspaces included), while a mutated later record that
/// names another manifest is still caught.
fn replay_manifest_image(img: &[u8]) -> Result<crate::db::recovery::Recovered> {
    let number = LogReader::new("fuzz.manifest", img)
        .next()
        .and_then(|r| r.ok())
        .and_then(|rec| VersionEdit::decode(&rec).ok())
        .and_then(|e| e.manifest_number)
        .unwrap_or(1);
    let path = filenames::manifest_name(number);
    crate::db::replay_manifest(Path::new(&path), img)
}

// ----------------------------------------------------------------- CURRENT

/// The CURRENT file: the name of a manifest and a newline, read the way
/// recovery, `check` and `repair` read it. A name that parses as a manifest
/// must be the canonical name of that manifest, or recovery (which opens
/// the name as written) and repair (which opens the canonical name of the
/// number) would read different files.
pub fn current(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let name = text.trim_end_matches('\n');
    if let Some(FileKind::Manifest(n)) = filenames::parse(name) {
        assert_eq!(
            filenames::manifest_name(n),
            name,
            "non-canonical manifest name"
        );
    }
    // Every other name a directory listing holds must round-trip too, or
    // obsolete-file cleanup could delete a file that is not the one it means.
    match filenames::parse(name) {
        Some(FileKind::Table(n)) => {
            assert_eq!(
                filenames::table_path(Path::new(""), n),
                Path::new(name),
                "non-canonical table name"
            );
        }
        Some(FileKind::Wal(n)) => {
            assert_eq!(
                filenames::wal_path(Path::new(""), n),
                Path::new(name),
                "non-canonical WAL name"
            );
        }
        _ => {}
    }
}

// ------------------------------------------------------------------- seeds

/// Whether `name` is a file name the engine treats as one of its own
/// (the regression test of the non-canonical names the `current` target
/// found).
pub fn is_database_file_name(name: &str) -> bool {
    crate::filenames::parse(name).is_some()
}

/// Seed inputs for every target, cut from a real database: a few small
/// databases (one per compression) are written with the engine, and their
/// tables, WALs, manifests and CURRENT files are split into the pieces each
/// target parses. `scratch` is an empty directory to build them in.
pub fn seed_corpora(scratch: &Path) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let mut out: Vec<(&'static str, Vec<u8>)> = Vec::new();
    for (i, compression) in [Compression::None, Compression::Lz4, Compression::Zstd]
        .into_iter()
        .enumerate()
    {
        let dir = scratch.join(format!("db{i}"));
        let files = write_seed_db(&dir, compression, i)?;
        for (name, bytes) in files {
            match filenames::parse(&name) {
                Some(FileKind::Table(_)) => table_seeds(&bytes, &mut out),
                Some(FileKind::Wal(_)) => log_seeds(&bytes, "batch", &mut out),
                Some(FileKind::Manifest(_)) => {
                    out.push(("manifest", [&[0u8][..], &bytes].concat()));
                    log_seeds(&bytes, "version_edit", &mut out);
                }
                Some(FileKind::Current) => out.push(("current", bytes)),
                _ => {}
            }
        }
    }
    // The built-block, built-filter and resealing modes start from the
    // same shapes with their flag bits set.
    let entries: Vec<u8> = (0..40u8)
        .flat_map(|i| [3, b'k', i, b'x', 2, i, i])
        .collect();
    out.push(("block", [&[0x32u8][..], &entries].concat()));
    out.push(("bloom", [&[0x75u8][..], &entries].concat()));
    // A data block with filler (the seed databases' small blocks have none).
    out.push((
        "block_trailer",
        [&[0u8][..], &encode_padded_block(&entries, 37)].concat(),
    ));
    out.push(("current", b"MANIFEST-000007".to_vec()));
    out.push(("current", b"000012.sst".to_vec()));
    let (recycled, new_len) = recycled_log_image()?;
    out.push(("wal", [&[4u8][..], &recycled].concat()));
    let sealed = (new_len as u16).to_le_bytes();
    out.push(("wal", [&[6u8][..], &sealed, &recycled].concat()));
    let mut out = spread(out, MAX_SEEDS_PER_TARGET);
    // Kept apart from the spread: a keyspace record is rare among the
    // databases' records, and spreading could leave every one of them out.
    out.extend(keyspace_seed_corpora(&scratch.join("keyspaces"))?);
    Ok(out)
}

/// Seeds holding the keyspace parts of the format, cut from a database
/// that creates keyspaces, writes across them in single batches, flushes
/// them and drops one: the WAL with cross-keyspace batches (`wal`) and
/// those batches (`batch`, keyspace markers), the edits that create, drop,
/// flush into keyspaces or move their log numbers (`version_edit`, manifest
/// tags 13 to 17), the whole manifest (`manifest`), and the tables of a
/// keyspace other than the default one, whose properties end with its id
/// (`table`, `properties`, `index`). `scratch` is an empty directory to
/// build the database in.
pub fn keyspace_seed_corpora(scratch: &Path) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let opts = crate::Options {
        memtable_size: 4096,
        block_size: 256,
        compression: Compression::None,
        ..crate::Options::default()
    };
    let db = crate::Db::open(scratch, opts)?;
    for i in 0..20u32 {
        db.put(format!("default{i:03}").as_bytes(), b"d")?;
    }
    let events = db.keyspace("events", crate::KeyspaceOptions::default().block_size(512))?;
    let metrics = db.keyspace("metrics", crate::KeyspaceOptions::default())?;
    let gone = db.keyspace("gone", crate::KeyspaceOptions::default())?;
    // Batches spanning the default keyspace and three others, each one WAL
    // record with keyspace markers between the runs of entries.
    for round in 0..4u32 {
        let mut b = WriteBatch::new();
        b.put(format!("default-r{round}").as_bytes(), b"1")?;
        for i in 0..6u32 {
            let key = format!("ev{:03}", i * 5 + round);
            b.put_in(
                &events,
                key.as_bytes(),
                format!("event {round} {i}").as_bytes(),
            )?;
        }
        b.put_in(&metrics, format!("m{round}").as_bytes(), b"42")?;
        b.delete_in(&gone, format!("g{round}").as_bytes())?;
        b.delete_range_in(&events, &b"ev000"[..]..&b"ev002"[..])?;
        // Back to the default keyspace after the others.
        b.delete(format!("default{round:03}").as_bytes())?;
        db.write(
            b,
            crate::WriteOptions {
                sync: round % 2 == 1,
            },
        )?;
    }
    gone.put(b"g-last", b"x")?;
    // The WAL as it is now holds every cross-keyspace batch: flushing next
    // may retire it.
    db.wait_idle()?;
    let wals: Vec<Vec<u8>> = snapshot_dir(scratch)?
        .into_iter()
        .filter(|(name, _)| matches!(filenames::parse(name), Some(FileKind::Wal(_))))
        .map(|(_, bytes)| bytes)
        .collect();
    events.flush()?;
    metrics.flush()?;
    db.drop_keyspace("gone")?;
    let mut b = WriteBatch::new();
    b.put_in(&metrics, b"after-drop", b"1")?;
    b.put(b"default-after-drop", b"2")?;
    db.write(b, crate::WriteOptions { sync: true })?;
    db.flush()?;
    db.wait_idle()?;
    let files = snapshot_dir(scratch)?;
    db.close()?;

    let mut out = Vec::new();
    for img in wals {
        // A WAL file is made longer than its records up front; the seed is
        // the records (a few hundred bytes), not the zeroes after them.
        let mut reader = LogReader::new("seed.log", &img[..]);
        while let Ok(Some(_)) = reader.read_record() {}
        let img = &img[..(reader.valid_len() as usize).min(img.len())];
        let sealed = (img.len() as u16).to_le_bytes();
        out.push(("wal", [&[0u8][..], img].concat()));
        out.push(("wal", [&[2u8][..], &sealed, img].concat()));
        for rec in LogReader::new("seed.log", img).flatten() {
            let spans =
                WriteBatch::decode(&rec).is_ok_and(|b| b.iter_scoped().any(|(ks, _)| ks != 0));
            if spans {
                out.push(("batch", rec.to_vec()));
            }
        }
    }
    for (name, bytes) in files {
        match filenames::parse(&name) {
            Some(FileKind::Table(_)) => {
                let mut pieces = Vec::new();
                table_seeds(&bytes, &mut pieces);
                let of_keyspace = pieces.iter().any(|(t, p)| {
                    *t == "properties"
                        && TableProperties::decode(p).is_ok_and(|p| p.keyspace_id != 0)
                });
                if of_keyspace {
                    out.extend(
                        pieces
                            .into_iter()
                            .filter(|(t, _)| matches!(*t, "table" | "properties" | "index")),
                    );
                }
            }
            Some(FileKind::Manifest(_)) => {
                out.push(("manifest", [&[0u8][..], &bytes].concat()));
                for rec in LogReader::new("seed.log", &bytes[..]).flatten() {
                    let of_keyspaces = VersionEdit::decode(&rec).is_ok_and(|e| {
                        !e.keyspaces.is_empty()
                            || !e.dropped_keyspaces.is_empty()
                            || e.next_keyspace_id.is_some()
                    });
                    if of_keyspaces {
                        out.push(("version_edit", rec.to_vec()));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// A recycled WAL: log [`FUZZ_LOG_NUMBER`]'s records written over a longer
/// earlier life's, synced now and then, and the new life's length.
fn recycled_log_image() -> Result<(Vec<u8>, usize)> {
    let life = |number: u64, n: usize| -> Result<Vec<u8>> {
        let mut w = crate::record_log::LogWriter::new(Vec::new())
            .recyclable(number)
            .with_compression(Compression::Lz4);
        for i in 0..n {
            let mut b = WriteBatch::new();
            b.put(
                format!("k{i}-{number}").as_bytes(),
                vec![b'a' + (i % 26) as u8; 40 + i * 13],
            )?;
            w.add_record(b.data())?;
            if i % 3 == 2 {
                w.sync()?;
            }
        }
        Ok(w.into_inner())
    };
    let old = life(FUZZ_LOG_NUMBER - 6, 24)?;
    let mut img = life(FUZZ_LOG_NUMBER, 7)?;
    let new_len = img.len();
    img.extend_from_slice(&old[new_len.min(old.len())..]);
    Ok((img, new_len))
}

/// Enough seeds per target to hold every shape the databases produce
/// while keeping the committed corpus small.
const MAX_SEEDS_PER_TARGET: usize = 30;

/// At most `max` distinct seeds per target, spread evenly over what was
/// found (so every compression and file keeps some).
fn spread(seeds: Vec<(&'static str, Vec<u8>)>, max: usize) -> Vec<(&'static str, Vec<u8>)> {
    let mut by_target: std::collections::BTreeMap<&str, Vec<Vec<u8>>> = Default::default();
    for (t, bytes) in seeds {
        let v = by_target.entry(t).or_default();
        if !v.contains(&bytes) {
            v.push(bytes);
        }
    }
    let mut out = Vec::new();
    for (t, v) in by_target {
        let step = v.len().div_ceil(max).max(1);
        out.extend(v.into_iter().step_by(step).map(|b| (t, b)));
    }
    out
}

/// Writes a small database and returns a copy of every file in it, taken
/// while it is open (so the live WAL still holds records and sync marks)
/// and again after it was closed.
fn write_seed_db(
    dir: &Path,
    compression: Compression,
    salt: usize,
) -> Result<Vec<(String, Vec<u8>)>> {
    let opts = crate::Options {
        memtable_size: 4096,
        block_size: 256,
        compression,
        ..crate::Options::default()
    };
    let db = crate::Db::open(dir, opts)?;
    for round in 0..3u32 {
        for i in 0..60u32 {
            let key = format!("key{:04}", (i * 7 + round) % 97);
            let value = format!("v{round}-{i}-{}", "z".repeat((i as usize + salt) % 40));
            db.put(key.as_bytes(), value.as_bytes())?;
            if i % 13 == 0 {
                db.delete(format!("key{:04}", i % 97).as_bytes())?;
            }
            // Range tombstones in the WALs and tables too.
            if i % 29 == 5 {
                let start = format!("key{:04}", (i * 3 + round) % 97);
                let end = format!("key{:04}", (i * 3 + round) % 97 + 4);
                db.delete_range(start.as_bytes()..end.as_bytes())?;
            }
        }
        db.flush()?;
    }
    let mut b = WriteBatch::new();
    b.put(b"batch-a", b"1")?;
    b.delete(b"batch-b")?;
    b.delete_range(b"batch-c", b"batch-d")?;
    if salt == 2 {
        // Keyspaces: created, written across in one batch, flushed,
        // dropped (manifest tags 13 to 17, WAL keyspace markers).
        let ks = db.keyspace("events", crate::KeyspaceOptions::default().block_size(512))?;
        let gone = db.keyspace("gone", crate::KeyspaceOptions::default())?;
        b.put_in(&ks, b"ks-a", b"2")?;
        b.delete_in(&gone, b"ks-b")?;
        b.delete_range_in(&ks, &b"ks-c"[..]..&b"ks-d"[..])?;
        ks.put(b"ks-e", b"3")?;
        ks.flush()?;
        gone.put(b"ks-f", b"4")?;
        db.write(b, crate::WriteOptions { sync: true })?;
        db.drop_keyspace("gone")?;
        b = WriteBatch::new();
    }
    db.write(b, crate::WriteOptions { sync: true })?;
    db.put(b"after-sync", b"tail")?;
    // No background compaction may delete a table while it is copied.
    db.wait_idle()?;
    let mut files = snapshot_dir(dir)?;
    db.compact_all()?;
    db.close()?;
    files.extend(snapshot_dir(dir)?);
    Ok(files)
}

fn snapshot_dir(dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    let rd =
        std::fs::read_dir(dir).map_err(|e| crate::Error::io(e, "cannot list").with_file(dir))?;
    for entry in rd {
        let entry = entry.map_err(|e| crate::Error::io(e, "cannot list").with_file(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let bytes = match std::fs::read(entry.path()) {
            Ok(bytes) => bytes,
            // A retired WAL may be deleted (or renamed for reuse) while the
            // directory is copied: it is no longer part of the database.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(crate::Error::io(e, "cannot read").with_file(entry.path())),
        };
        files.push((name, bytes));
    }
    files.sort();
    Ok(files)
}

/// Seeds from one table file: the whole table, its footer, every block
/// on disk and decompressed, the properties, filter and index.
fn table_seeds(img: &[u8], out: &mut Vec<(&'static str, Vec<u8>)>) {
    out.push(("table", [&[0u8][..], img].concat()));
    out.push(("table", [&[1u8][..], img].concat()));
    let Some(footer_at) = img.len().checked_sub(FOOTER_LEN) else {
        return;
    };
    for flags in [0u8, 1] {
        out.push((
            "footer",
            [
                &[flags][..],
                &(img.len() as u64).to_le_bytes(),
                &img[footer_at..],
            ]
            .concat(),
        ));
    }
    let Ok(f) = Footer::decode(&img[footer_at..], img.len() as u64) else {
        return;
    };
    let block_at = |h: BlockHandle| img.get(h.offset as usize..(h.offset + h.size) as usize);
    let payload = |h: BlockHandle| block_at(h).and_then(|d| decode_block(d.to_vec()).ok());
    let (Some(props), Some(index)) = (payload(f.properties), payload(f.index)) else {
        return;
    };
    out.push(("properties", props.clone()));
    if let Some(filter) = payload(f.filter) {
        out.push(("bloom", [&[0u8][..], &filter].concat()));
    }
    out.push(("block", [&[0u8][..], &index].concat()));
    let data_end = f.filter.offset.min(f.index.offset);
    out.push((
        "index",
        [
            &(props.len() as u16).to_le_bytes()[..],
            &props,
            &data_end.to_le_bytes(),
            &index,
        ]
        .concat(),
    ));
    let Ok(block) = Block::new(index) else { return };
    let mut it = BlockIter::new(Arc::new(block));
    let mut handles = Vec::new();
    if it.seek_to_first().is_ok() {
        while it.valid() {
            handles.extend(BlockHandle::decode_varint(it.value()).ok());
            if it.next().is_err() {
                break;
            }
        }
    }
    // A few data blocks per table keep the corpus small.
    for h in handles.into_iter().take(3) {
        if let Some(disk) = block_at(h) {
            out.push(("block_trailer", [&[0u8][..], disk].concat()));
            if let Ok(raw) = decode_block(disk.to_vec()) {
                out.push(("block", [&[0u8][..], &raw].concat()));
            }
        }
    }
}

/// Seeds from one log file (WAL or manifest): the stream itself for the
/// `wal` target, plain and sealed at its length, and each record for
/// `record_target`.
fn log_seeds(img: &[u8], record_target: &'static str, out: &mut Vec<(&'static str, Vec<u8>)>) {
    // Keep stream seeds small: the first few KiB hold every record shape.
    let img = &img[..img.len().min(4096)];
    let sealed = (img.len() as u16).to_le_bytes();
    out.push(("wal", [&[0u8][..], img].concat()));
    out.push(("wal", [&[2u8][..], &sealed, img].concat()));
    for r in LogReader::new("seed.log", img).take(8) {
        match r {
            Ok(rec) => out.push((record_target, rec.to_vec())),
            Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_survives_empty_and_tiny_inputs() {
        for (name, target) in TARGETS {
            for input in [&b""[..], &[0], &[1], &[3, 0, 0], &[0xff; 70]] {
                let r = std::panic::catch_unwind(|| target(input));
                assert!(r.is_ok(), "{name} panicked on {input:?}");
            }
        }
    }

    /// The keyspace seeds reach the keyspace code of each parser, rather
    /// than failing before it (a harness or seed that stops early would
    /// leave the fuzzer mutating bytes no keyspace code ever reads).
    #[test]
    fn keyspace_seeds_reach_the_keyspace_paths() {
        let dir = tempfile::tempdir().unwrap();
        let seeds = keyspace_seed_corpora(dir.path()).unwrap();
        let of = |t: &str| -> Vec<&Vec<u8>> {
            seeds
                .iter()
                .filter(|(n, _)| *n == t)
                .map(|(_, b)| b)
                .collect()
        };
        for (name, bytes) in &seeds {
            let f = TARGETS.iter().find(|(n, _)| n == name).unwrap().1;
            f(bytes);
        }
        // Batches spanning keyspaces, in the WAL read back whole.
        assert!(!of("wal").is_empty());
        for w in of("wal") {
            // Small, and its sealed length fits the two bytes it is given.
            assert!(w.len() < 4096, "a {} byte WAL seed", w.len());
            let img = if w[0] & 2 != 0 { &w[3..] } else { &w[1..] };
            let spanning = LogReader::new("w", img)
                .flatten()
                .filter(|r| {
                    WriteBatch::decode(r).is_ok_and(|b| b.iter_scoped().any(|(k, _)| k != 0))
                })
                .count();
            assert!(spanning >= 4, "{spanning} keyspace batches in a WAL seed");
        }
        let spans: Vec<usize> = of("batch")
            .iter()
            .map(|b| {
                let b = WriteBatch::decode(b).unwrap();
                assert!(b.iter_scoped().any(|(k, _)| k != 0));
                let ids: std::collections::BTreeSet<u32> =
                    b.iter_scoped().map(|(k, _)| k).collect();
                ids.len()
            })
            .collect();
        assert!(spans.iter().filter(|&&n| n >= 4).count() >= 4, "{spans:?}");
        // Edits creating, dropping and flushing into keyspaces.
        let edits: Vec<VersionEdit> = of("version_edit")
            .iter()
            .map(|b| VersionEdit::decode(b).unwrap())
            .collect();
        assert!(edits
            .iter()
            .any(|e| e.keyspaces.iter().any(|k| k.create.is_some())));
        assert!(edits.iter().any(|e| !e.dropped_keyspaces.is_empty()));
        assert!(edits
            .iter()
            .any(|e| e.keyspaces.iter().any(|k| !k.edit.new_files.is_empty())));
        // The manifest replays to the keyspaces left: the dropped one gone.
        let manifests = of("manifest");
        assert!(!manifests.is_empty());
        for m in manifests {
            let r = replay_manifest_image(&m[1..]).unwrap();
            let mut names: Vec<&str> = r.keyspaces.values().map(|k| &k.def.name[..]).collect();
            names.sort();
            assert_eq!(names, ["events", "metrics"]);
            assert!(r.keyspaces.values().all(|k| k.version.total_files() > 0));
        }
        // Tables of a keyspace: their properties carry its id.
        let props = of("properties");
        assert!(!props.is_empty());
        for p in props {
            assert_ne!(TableProperties::decode(p).unwrap().keyspace_id, 0);
        }
        assert!(!of("table").is_empty());
    }

    #[test]
    fn reseal_log_makes_a_damaged_record_readable() {
        let mut img =
            crate::record_log::encode_header(crate::record_log::RecordType::Full, b"abc").to_vec();
        img.extend_from_slice(b"abc");
        img[HEADER_LEN] = b'x';
        img.extend_from_slice(&img.clone());
        assert!(LogReader::new("x", &img).next().unwrap().is_err());
        reseal_log(&mut img);
        let recs: Vec<std::borrow::Cow<[u8]>> =
            LogReader::new("x", &img).collect::<Result<_>>().unwrap();
        assert_eq!(recs, vec![&b"xbc"[..], &b"xbc"[..]]);
    }
}
