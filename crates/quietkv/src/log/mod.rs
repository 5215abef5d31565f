//! A checksummed, append-only record log, shared by the write-ahead log and
//! the manifest.
//!
//! # Format
//!
//! A log file is a sequence of records, each written whole (no fragmentation
//! and no block structure):
//!
//! ```text
//! +---------------------+------------------+-----------+-----------------+
//! | masked crc32c (u32) | payload len (u32) | type (u8) | payload (len B) |
//! +---------------------+------------------+-----------+-----------------+
//!   little endian        little endian       1 = Full
//! ```
//!
//! The checksum is CRC-32C over the type byte followed by the payload, masked
//! (rotated and offset) so that logs embedded in payloads do not checksum to
//! themselves. A record can hold up to [`MAX_RECORD_LEN`] bytes (4 GiB - 1).
//!
//! Type 0 is never written, so a header of nine zero bytes can only be
//! padding or preallocated space (O_DIRECT writers pad the tail to a sector
//! or page boundary). The reader's rules for the end of the file are
//! described on [`LogReader`].

mod reader;
mod writer;

pub use reader::{LogReader, TailState};
pub use writer::{LogSink, LogWriter};

/// Size of a record header: checksum (4) + length (4) + type (1).
pub const HEADER_LEN: usize = 9;

/// Largest payload one record can carry.
pub const MAX_RECORD_LEN: usize = u32::MAX as usize;

/// Record types. Only whole records exist today; the byte leaves room for
/// fragmented records later without a format break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum RecordType {
    Full = 1,
}

impl RecordType {
    pub(crate) fn from_u8(b: u8) -> Option<RecordType> {
        match b {
            1 => Some(RecordType::Full),
            _ => None,
        }
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

/// The masked checksum stored in a record header.
pub(crate) fn record_crc(ty: u8, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&[ty]);
    mask_crc(crc32c::crc32c_append(crc, payload))
}

#[cfg(test)]
mod tests;
