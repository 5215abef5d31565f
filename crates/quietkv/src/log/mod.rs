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
//! then the records it covered are treated like any last record.)
//!
//! 3 = a compressed record (WAL compression): the payload is one byte naming
//! the codec (1 lz4, 2 zstd), the uncompressed length (u32 little endian)
//! and the compressed bytes; readers return the uncompressed payload, so a
//! log may mix compressed and full records (compression turned on or off
//! between runs). Only payloads up to [`MAX_COMPRESSED_RECORD_LEN`] are
//! compressed, so a reader never allocates more than that for one.
//!
//! Type 0 is never written, so a header of zero bytes can only be padding or
//! preallocated space (O_DIRECT writers pad the tail to a sector or page
//! boundary). The reader's rules for the end of the file, and for a log the
//! manifest recorded as sealed at a known length, are described on
//! [`LogReader`].

mod reader;
pub(crate) mod salvage;
mod writer;

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

/// Record types. The byte leaves room for fragmented or recyclable records
/// later without a format break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum RecordType {
    Full = 1,
    SyncMark = 2,
    Compressed = 3,
}

impl RecordType {
    pub(crate) fn from_u8(b: u8) -> Option<RecordType> {
        match b {
            1 => Some(RecordType::Full),
            2 => Some(RecordType::SyncMark),
            3 => Some(RecordType::Compressed),
            _ => None,
        }
    }
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

/// A complete record header for `payload` of type `ty`.
pub(crate) fn encode_header(ty: RecordType, payload: &[u8]) -> [u8; HEADER_LEN] {
    let ty = ty as u8;
    let mut h = [0u8; HEADER_LEN];
    h[4..8].copy_from_slice(&record_crc(ty, payload).to_le_bytes());
    h[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[12] = ty;
    let header_crc = mask_crc(crc32c::crc32c(&h[4..]));
    h[0..4].copy_from_slice(&header_crc.to_le_bytes());
    h
}

/// The fields of a header whose own checksum matched.
pub(crate) struct Header {
    pub payload_crc: u32,
    pub len: usize,
    pub ty: u8,
}

/// Parses a header, `None` if its checksum does not match.
pub(crate) fn decode_header(h: &[u8; HEADER_LEN]) -> Option<Header> {
    let stored = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    if mask_crc(crc32c::crc32c(&h[4..])) != stored {
        return None;
    }
    Some(Header {
        payload_crc: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
        len: u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize,
        ty: h[12],
    })
}

#[cfg(test)]
mod tests;
