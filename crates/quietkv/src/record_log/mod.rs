//! A checksummed, append-only record log, shared by the write-ahead log and
//! the manifest.
//!
//! # Format
//!
//! A log file is a sequence of records, each written whole (no fragmentation
//! and no block structure):
//!
//! ```text
//! +------------------+-------------------+-------------------+-----------+-----------------+
//! | header crc (u32) | payload crc (u32) | payload len (u32) | type (u8) | payload (len B) |
//! +------------------+-------------------+-------------------+-----------+-----------------+
//!   all little endian
//! ```
//!
//! The payload checksum is CRC-32C over the type byte followed by the
//! payload; the header checksum is CRC-32C over the 9 header bytes after it
//! (payload crc, length, type). Both are masked (rotated and offset) so that
//! logs embedded in payloads do not checksum to themselves. The header has
//! its own checksum so that a damaged length field is recognised as damage:
//! without it, a flipped bit that makes the length point past the end of the
//! file looks exactly like a record the writer never finished, and the
//! reader would drop it and everything after it as a torn tail. A record can
//! hold up to [`MAX_RECORD_LEN`] bytes (4 GiB - 1).
//!
//! Record types: 1 = a full record (the payload the caller wrote); 2 = a
//! sync mark, appended by [`LogWriter::sync`] right after a successful sync,
//! whose 8-byte payload is the log length that sync made durable. A reader
//! skips marks. They exist so that a synced record is never the last thing
//! in the file: a damaged record with anything but zeros after it is
//! corruption, never a torn tail, so a synced record that rots after a
//! crash is reported instead of silently dropped with everything after it.
//! (The mark itself is not synced: after a power cut it may be missing, and
//! then the records it covered are treated like any last record. A WAL
//! written with O_DIRECT or RWF_DONTCACHE keeps the mark in its buffer
//! until its next sync, flush, seal or finish, since handing it over alone
//! would cost a device write per sync (see [`LogWriter::defer_sync_marks`]);
//! a process crash between two commits, or a close that fails before the
//! seal, then also leaves the last synced records without their mark.)
//!
//! 7 = an identity record, the first record of every WAL this version
//! writes: whose log the file is (see [`LogIdentity`]). Its 17-byte
//! payload is a kind byte (1 = WAL), the database id (u64 little endian)
//! and the log's file number (u64 little endian). A reader skips it like a
//! sync mark; one asked to ([`LogReader::expect_identity`]) compares it
//! with the database and file it reads, so a WAL copied in from another
//! database, or renamed, is Corruption instead of another database's
//! writes replayed as this one's. It is written with the first record, not
//! when the file is created, so a WAL nobody wrote to stays empty.
//!
//! 3 = a compressed record (WAL compression): the payload is one byte naming
//! the codec (1 lz4, 2 zstd), the uncompressed length (u32 little endian)
//! and the compressed bytes; readers return the uncompressed payload, so a
//! log may mix compressed and full records (compression turned on or off
//! between runs). Only payloads up to [`MAX_COMPRESSED_RECORD_LEN`] are
//! compressed, so a reader never allocates more than that for one.
//!
//! # Recyclable records
//!
//! A WAL written with recycling on (see
//! [`Options::wal_recycle_count`](crate::Options::wal_recycle_count)) uses
//! types 4, 5, 6 and 8: a full record, a sync mark, a compressed record and
//! an identity record as above, whose header also carries the number of the log the writer was
//! writing (u64 little endian), covered by the header checksum:
//!
//! ```text
//! +------------+-------------+-------------+-----------+------------------+-----------------+
//! | hdr crc u32| payload crc | len (u32)   | type (u8) | log number (u64) | payload (len B) |
//! +------------+-------------+-------------+-----------+------------------+-----------------+
//! ```
//!
//! The header checksum then covers the 17 bytes after it. A recycled WAL
//! file is an old WAL renamed and overwritten from offset 0, so after the
//! last record of its new life come the old life's bytes, not zeros: an
//! intact record naming another log is such a stale record and ends the
//! log (it is never replayed), and so does a damaged record that no later
//! intact sync mark of the same log covers (the end of an unsynced tail
//! written over old records). A reader must therefore know the number of
//! the log it reads ([`LogReader::for_log`]); one that does not refuses
//! recyclable records as Corruption. A log holds records of one format
//! only: a log written with recycling off (types 1-3) reads as before, and
//! a record of the other format after the first ends the log like a stale
//! one. The manifest is never recycled and always uses types 1-3.
//!
//! Type 0 is never written, so a header of zero bytes can only be padding or
//! preallocated space (O_DIRECT writers pad the tail to a sector or page
//! boundary). The reader's rules for the end of the file, and for a log the
//! manifest recorded as sealed at a known length, are described on
//! [`LogReader`].

mod identity;
mod reader;
pub(crate) mod salvage;
mod writer;

pub(crate) use identity::{IdentityRule, LogIdentity};
pub use reader::{LogReader, TailState};
pub use writer::{LogSink, LogWriter};

/// Size of a record header: header checksum (4) + payload checksum (4) +
/// length (4) + type (1).
pub const HEADER_LEN: usize = 13;

/// Payload length of a sync mark: the synced log length, u64 little endian.
pub(crate) const SYNC_MARK_LEN: usize = 8;

/// Largest payload one record can carry.
pub const MAX_RECORD_LEN: usize = u32::MAX as usize;

/// Largest uncompressed payload a writer compresses (larger ones are written
/// as full records) and a reader decompresses.
pub const MAX_COMPRESSED_RECORD_LEN: usize = 64 << 20;

/// Payloads shorter than this are not worth compressing.
const MIN_COMPRESSED_RECORD_LEN: usize = 128;

/// Size of a recyclable record's header: [`HEADER_LEN`] + the log number (8).
pub const RECYCLABLE_HEADER_LEN: usize = HEADER_LEN + 8;

/// What a record is; its type byte also says whether its header carries a
/// log number (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum RecordType {
    Full = 1,
    SyncMark = 2,
    Compressed = 3,
    Identity = 7,
}

impl RecordType {
    /// The kind of a type byte of either format.
    pub(crate) fn from_u8(b: u8) -> Option<RecordType> {
        match b {
            1 | 4 => Some(RecordType::Full),
            2 | 5 => Some(RecordType::SyncMark),
            3 | 6 => Some(RecordType::Compressed),
            7 | 8 => Some(RecordType::Identity),
            _ => None,
        }
    }

    /// The type byte of this kind, in the recyclable format or not.
    pub(crate) fn code(self, recyclable: bool) -> u8 {
        match (self, recyclable) {
            (RecordType::Full, false) => 1,
            (RecordType::SyncMark, false) => 2,
            (RecordType::Compressed, false) => 3,
            (RecordType::Full, true) => 4,
            (RecordType::SyncMark, true) => 5,
            (RecordType::Compressed, true) => 6,
            (RecordType::Identity, false) => 7,
            (RecordType::Identity, true) => 8,
        }
    }
}

/// Whether a type byte names a recyclable record (whose header is
/// [`RECYCLABLE_HEADER_LEN`] bytes).
pub(crate) fn is_recyclable_code(b: u8) -> bool {
    matches!(b, 4 | 5 | 6 | 8)
}

/// The payload of a [`RecordType::Compressed`] record, decompressed.
/// Errors are Corruption without file or offset (the caller adds them).
pub(crate) fn decompress_record(payload: &[u8]) -> crate::error::Result<Vec<u8>> {
    use crate::error::Error;
    use crate::table::Compression;
    let (&codec, framed) = payload
        .split_first()
        .ok_or_else(|| Error::corruption("compressed log record with an empty payload"))?;
    match Compression::from_u8(codec) {
        Some(c) if c != Compression::None => {
            crate::codec::decompress(c, framed, MAX_COMPRESSED_RECORD_LEN)
        }
        _ => Err(Error::corruption(format!(
            "compressed log record names unknown codec {codec}"
        ))),
    }
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC so that a CRC stored inside checksummed data does not make
/// the outer checksum degenerate.
pub(crate) fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

#[cfg(test)]
pub(crate) fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The masked payload checksum stored in a record header.
pub(crate) fn record_crc(ty: u8, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&[ty]);
    mask_crc(crc32c::crc32c_append(crc, payload))
}

/// A complete plain record header for `payload` of type `ty`.
pub(crate) fn encode_header(ty: RecordType, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    fill_header(&mut h, ty.code(false), payload);
    h
}

/// A complete recyclable record header for `payload` of type `ty`, written
/// to log `log_number`.
pub(crate) fn encode_recyclable_header(
    ty: RecordType,
    payload: &[u8],
    log_number: u64,
) -> [u8; RECYCLABLE_HEADER_LEN] {
    let mut h = [0u8; RECYCLABLE_HEADER_LEN];
    h[HEADER_LEN..].copy_from_slice(&log_number.to_le_bytes());
    fill_header(&mut h, ty.code(true), payload);
    h
}

/// Fills in everything but a recyclable header's log number (already in
/// place), then the checksum over all of it.
fn fill_header(h: &mut [u8], code: u8, payload: &[u8]) {
    h[4..8].copy_from_slice(&record_crc(code, payload).to_le_bytes());
    h[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[12] = code;
    let header_crc = mask_crc(crc32c::crc32c(&h[4..]));
    h[0..4].copy_from_slice(&header_crc.to_le_bytes());
}

/// The fields of a header whose own checksum matched.
pub(crate) struct Header {
    pub payload_crc: u32,
    pub len: usize,
    /// The type byte as stored (either format).
    pub ty: u8,
    /// The log number a recyclable header carries.
    pub log_number: Option<u64>,
    /// [`HEADER_LEN`] or [`RECYCLABLE_HEADER_LEN`].
    pub header_len: usize,
}

/// What the bytes at a record's start hold.
pub(crate) enum ParsedHeader {
    Intact(Header),
    /// The checksum does not match.
    Damaged,
    /// The type byte names a recyclable header, but the data ends before
    /// its log number does.
    Short,
}

/// Parses the header at the start of `rest` (at least [`HEADER_LEN`] bytes).
pub(crate) fn decode_header(rest: &[u8]) -> ParsedHeader {
    let ty = rest[12];
    let header_len = if is_recyclable_code(ty) {
        RECYCLABLE_HEADER_LEN
    } else {
        HEADER_LEN
    };
    let Some(h) = rest.get(..header_len) else {
        return ParsedHeader::Short;
    };
    let stored = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    if mask_crc(crc32c::crc32c(&h[4..])) != stored {
        return ParsedHeader::Damaged;
    }
    let log_number = (header_len == RECYCLABLE_HEADER_LEN)
        .then(|| u64::from_le_bytes(h[HEADER_LEN..].try_into().expect("eight bytes")));
    ParsedHeader::Intact(Header {
        payload_crc: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
        len: u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize,
        ty,
        log_number,
        header_len,
    })
}

#[cfg(test)]
mod tests;
