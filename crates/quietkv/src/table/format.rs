//! Low-level encodings: a decoder over untrusted bytes, block handles, the
//! block trailer (compression type + CRC32C) and the fixed-size footer.
//! Varints are [`crate::varint`].
//!
//! Every decoder here takes untrusted bytes and returns
//! [`Error::corruption`] instead of panicking; callers attach the file path
//! and block offset.

use crate::error::{Error, Result};
use crate::varint;

/// Magic number in the last 8 bytes of every table ("qkvtbl01" little endian-ish).
pub const TABLE_MAGIC: u64 = 0x3130_6c62_7476_6b71;
/// The newest table format version this build understands.
pub const FORMAT_VERSION: u32 = 3;
/// The version of a table without range tombstones: what every build
/// since the first reads.
pub const FORMAT_VERSION_PLAIN: u32 = 1;
/// The version of a table with a range-tombstone block: a build that does
/// not know range tombstones refuses it instead of resurrecting the keys
/// they delete.
pub const FORMAT_VERSION_RANGE_DELETES: u32 = 2;
/// The version of a table with data blocks padded to page boundaries (and
/// range tombstones or not): builds that do not know padded blocks refuse
/// it with "newer than this build" instead of calling it damaged.
pub const FORMAT_VERSION_PADDED: u32 = 3;
/// Footer: 3 handles as (u64 offset, u64 size) + u32 crc + u32 version + u64 magic.
pub const FOOTER_LEN: usize = 3 * 16 + 4 + 4 + 8;
/// Bytes after every block payload: 1 byte compression type + 4 bytes CRC32C.
pub const BLOCK_TRAILER_LEN: usize = 5;
/// Block type byte of an uncompressed block followed by padding: the payload
/// is the block's contents, then `n` filler bytes, then `n` as u16 LE. It
/// lets a block end exactly on a page boundary while the next one still
/// starts where it ends (see `TableOptions::align_blocks`).
pub const PADDED_BLOCK_TYPE: u8 = 3;
/// Bytes a padded block carries beyond its contents and filler.
pub const PAD_LEN_BYTES: usize = 2;
/// Largest decompressed block we accept from disk; a larger claim is corruption.
pub const MAX_DECOMPRESSED_BLOCK: usize = 64 << 20;

/// How a block payload is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    /// Stored as is.
    None,
    /// lz4_flex block format; payload = u32 LE uncompressed size ++ lz4 block.
    Lz4,
    /// zstd frame; payload = u32 LE uncompressed size ++ zstd frame.
    Zstd,
}

impl Compression {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    pub(crate) fn from_u8(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// A cursor over untrusted bytes.
pub struct Decoder<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Decoder { buf, what }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub fn varint(&mut self) -> Result<u64> {
        let (v, n) = varint::decode_u64(self.buf)
            .map_err(|e| Error::corruption(format!("{e} in {}", self.what)))?;
        self.buf = self.buf.get(n..).unwrap_or(&[]);
        Ok(v)
    }

    pub fn fixed64(&mut self) -> Result<u64> {
        let v = read_u64_le(self.buf, 0)
            .ok_or_else(|| Error::corruption(format!("truncated 8-byte field in {}", self.what)))?;
        self.buf = &self.buf[8..];
        Ok(v)
    }

    pub fn len_prefixed(&mut self) -> Result<&'a [u8]> {
        let len = self.varint()?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= self.buf.len())
            .ok_or_else(|| {
                Error::corruption(format!("length {len} runs past the end of {}", self.what))
            })?;
        let (head, tail) = self.buf.split_at(len);
        self.buf = tail;
        Ok(head)
    }
}

pub fn read_u32_le(buf: &[u8], at: usize) -> Option<u32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

pub fn read_u64_le(buf: &[u8], at: usize) -> Option<u64> {
    let bytes = buf.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

// ---------------------------------------------------------------- handles

/// Where a block lives: `size` counts the whole on-disk block, payload plus
/// the 5-byte trailer, so consecutive blocks satisfy `next.offset == offset + size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// The size as a buffer length (Corruption if it does not fit).
    pub fn size_usize(&self) -> Result<usize> {
        usize::try_from(self.size).map_err(|_| {
            Error::corruption(format!("block size {} does not fit in memory", self.size))
                .with_offset(self.offset)
        })
    }

    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.size)
    }

    pub fn encode_varint(&self, out: &mut Vec<u8>) {
        varint::put_u64(out, self.offset);
        varint::put_u64(out, self.size);
    }

    pub fn decode_varint(buf: &[u8]) -> Result<BlockHandle> {
        let mut d = Decoder::new(buf, "block handle");
        let offset = d.varint()?;
        let size = d.varint()?;
        if !d.is_empty() {
            return Err(Error::corruption("trailing bytes after block handle"));
        }
        Ok(BlockHandle { offset, size })
    }
}

// ---------------------------------------------------------------- blocks

/// Compresses `raw` (when asked and worth it) and appends the trailer.
/// Returns the full on-disk bytes of the block.
pub fn encode_block(raw: &[u8], compression: Compression, zstd_level: i32) -> Vec<u8> {
    let compressed = if raw.len() > MAX_DECOMPRESSED_BLOCK {
        // Too large to claim a decompressed size the reader would accept.
        None
    } else {
        crate::codec::compress(raw, compression, zstd_level)
    };
    // Keep compression only if it saves at least 1/8.
    let (payload, ctype): (&[u8], Compression) = match &compressed {
        Some(c) if c.len() <= raw.len() - raw.len() / 8 => (c, compression),
        _ => (raw, Compression::None),
    };
    let mut out = Vec::with_capacity(payload.len() + BLOCK_TRAILER_LEN);
    out.extend_from_slice(payload);
    out.push(ctype.to_u8());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The on-disk bytes of an uncompressed block of contents `raw` followed by
/// `filler` zero bytes ([`PADDED_BLOCK_TYPE`]); `filler` must fit in a u16.
pub fn encode_padded_block(raw: &[u8], filler: usize) -> Vec<u8> {
    let n = u16::try_from(filler).expect("filler fits in a u16");
    let mut out = Vec::with_capacity(raw.len() + filler + PAD_LEN_BYTES + BLOCK_TRAILER_LEN);
    out.extend_from_slice(raw);
    out.resize(raw.len() + filler, 0);
    out.extend_from_slice(&n.to_le_bytes());
    out.push(PADDED_BLOCK_TYPE);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Verifies the checksum of an on-disk block and returns its decompressed
/// payload. Errors carry no file/offset; the caller adds them.
pub fn decode_block(mut disk: Vec<u8>) -> Result<Vec<u8>> {
    if disk.len() < BLOCK_TRAILER_LEN {
        return Err(Error::corruption(format!(
            "block of {} bytes is shorter than its trailer",
            disk.len()
        )));
    }
    let crc_at = disk.len() - 4;
    let stored = read_u32_le(&disk, crc_at).unwrap_or(0);
    let actual = crc32c::crc32c(&disk[..crc_at]);
    if stored != actual {
        return Err(Error::corruption(format!(
            "block checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        )));
    }
    let ctype_byte = disk[crc_at - 1];
    let payload_len = crc_at - 1;
    if ctype_byte == PADDED_BLOCK_TYPE {
        let filler = payload_len
            .checked_sub(PAD_LEN_BYTES)
            .and_then(|at| Some((at, disk.get(at..payload_len)?)))
            .map(|(at, n)| (at, u16::from_le_bytes([n[0], n[1]]) as usize));
        let contents_len = filler.and_then(|(at, n)| at.checked_sub(n));
        let Some(contents_len) = contents_len else {
            return Err(Error::corruption(format!(
                "padded block of {} bytes claims more padding than it holds",
                disk.len()
            )));
        };
        disk.truncate(contents_len);
        return Ok(disk);
    }
    let ctype = Compression::from_u8(ctype_byte)
        .ok_or_else(|| Error::corruption(format!("unknown block compression type {ctype_byte}")))?;
    match ctype {
        Compression::None => {
            disk.truncate(payload_len);
            Ok(disk)
        }
        Compression::Lz4 | Compression::Zstd => {
            crate::codec::decompress(ctype, &disk[..payload_len], MAX_DECOMPRESSED_BLOCK)
        }
    }
}

// ---------------------------------------------------------------- footer

/// The fixed-size tail of every table.
///
/// Layout (little endian): filter handle, index handle, properties handle
/// (each u64 offset + u64 size; a filter size of 0 means "no filter"),
/// u32 CRC32C of the 48 handle bytes and the version, u32 format version,
/// u64 magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub filter: BlockHandle,
    pub index: BlockHandle,
    pub properties: BlockHandle,
    /// [`FORMAT_VERSION_PLAIN`] or [`FORMAT_VERSION_RANGE_DELETES`].
    pub version: u32,
}

impl Footer {
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        let mut v = Vec::with_capacity(FOOTER_LEN);
        for h in [self.filter, self.index, self.properties] {
            v.extend_from_slice(&h.offset.to_le_bytes());
            v.extend_from_slice(&h.size.to_le_bytes());
        }
        let version = self.version.to_le_bytes();
        let mut crc = crc32c::crc32c(&v);
        crc = crc32c::crc32c_append(crc, &version);
        v.extend_from_slice(&crc.to_le_bytes());
        v.extend_from_slice(&version);
        v.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        out.copy_from_slice(&v);
        out
    }

    /// Decodes and sanity-checks a footer; `file_size` bounds the handles.
    pub fn decode(buf: &[u8], file_size: u64) -> Result<Footer> {
        let bad = || Error::corruption("not a quietkv table (footer has the wrong size)");
        if buf.len() != FOOTER_LEN {
            return Err(bad());
        }
        let magic = read_u64_le(buf, 56).ok_or_else(bad)?;
        if magic != TABLE_MAGIC {
            return Err(Error::corruption(format!(
                "not a quietkv table (bad magic number {magic:#018x})"
            )));
        }
        let version = read_u32_le(buf, 52).ok_or_else(bad)?;
        if version > FORMAT_VERSION {
            return Err(Error::corruption(format!(
                "table format version {version} is newer than this build understands ({FORMAT_VERSION})"
            )));
        }
        if version == 0 {
            return Err(Error::corruption("table format version 0 is invalid"));
        }
        let stored_crc = read_u32_le(buf, 48).ok_or_else(bad)?;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[..48]), &buf[52..56]);
        if crc != stored_crc {
            return Err(Error::corruption("table footer checksum mismatch"));
        }
        let handle = |i: usize| -> Result<BlockHandle> {
            Ok(BlockHandle {
                offset: read_u64_le(buf, i * 16).ok_or_else(bad)?,
                size: read_u64_le(buf, i * 16 + 8).ok_or_else(bad)?,
            })
        };
        let footer = Footer {
            filter: handle(0)?,
            index: handle(1)?,
            properties: handle(2)?,
            version,
        };
        let limit = file_size.saturating_sub(FOOTER_LEN as u64);
        for (name, h) in [
            ("filter", footer.filter),
            ("index", footer.index),
            ("properties", footer.properties),
        ] {
            if name == "filter" && h.size == 0 {
                continue;
            }
            let ok = h.size >= BLOCK_TRAILER_LEN as u64 && h.end().is_some_and(|e| e <= limit);
            if !ok {
                return Err(Error::corruption(format!(
                    "{name} block handle (offset {}, size {}) lies outside the table ({} bytes before the footer)",
                    h.offset, h.size, limit
                )));
            }
        }
        Ok(footer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_names_what_it_decodes() {
        let mut d = Decoder::new(&[0x80], "test block");
        assert_eq!(
            d.varint().unwrap_err().message(),
            "truncated varint in test block"
        );
        let mut d = Decoder::new(&[0xac, 0x02, 0x05], "test block");
        assert_eq!(d.varint().unwrap(), 300);
        assert_eq!(d.remaining(), 1);
    }

    #[test]
    fn blocks_round_trip_with_every_compression() {
        let raw: Vec<u8> = (0..5000u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let disk = encode_block(&raw, c, 1);
            assert_eq!(
                disk[disk.len() - 5],
                c.to_u8(),
                "{c:?} should have paid off"
            );
            assert_eq!(decode_block(disk).unwrap(), raw);
        }
        // Incompressible data is stored raw.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let disk = encode_block(&noise, Compression::Lz4, 1);
        assert_eq!(disk[disk.len() - 5], 0);
        assert_eq!(decode_block(disk).unwrap(), noise);
        assert_eq!(
            decode_block(encode_block(&[], Compression::Zstd, 3)).unwrap(),
            b""
        );
    }

    #[test]
    fn padded_blocks_round_trip_and_a_lying_filler_length_is_corruption() {
        let raw: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        for filler in [0, 1, 90, 512] {
            let disk = encode_padded_block(&raw, filler);
            assert_eq!(
                disk.len(),
                raw.len() + filler + PAD_LEN_BYTES + BLOCK_TRAILER_LEN
            );
            assert_eq!(decode_block(disk).unwrap(), raw);
        }
        let reseal = |mut disk: Vec<u8>| {
            let n = disk.len();
            let crc = crc32c::crc32c(&disk[..n - 4]);
            disk[n - 4..].copy_from_slice(&crc.to_le_bytes());
            disk
        };
        // A filler length larger than the payload, and a payload too short
        // to hold one, behind valid checksums.
        let mut disk = encode_padded_block(&raw, 10);
        let at = disk.len() - BLOCK_TRAILER_LEN - PAD_LEN_BYTES;
        disk[at..at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        let e = decode_block(reseal(disk)).unwrap_err();
        assert!(e.message().contains("more padding than it holds"), "{e}");
        let tiny = reseal(vec![7, PADDED_BLOCK_TYPE, 0, 0, 0, 0]);
        assert!(decode_block(tiny).is_err());
    }

    #[test]
    fn lying_size_claims_are_corruption() {
        let raw = vec![7u8; 10_000];
        let mut disk = encode_block(&raw, Compression::Lz4, 1);
        disk[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let n = disk.len();
        let crc = crc32c::crc32c(&disk[..n - 4]);
        disk[n - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(decode_block(disk).unwrap_err().message().contains("claims"));
    }

    #[test]
    fn footer_round_trip_and_errors() {
        let f = Footer {
            filter: BlockHandle {
                offset: 10,
                size: 20,
            },
            index: BlockHandle {
                offset: 30,
                size: 40,
            },
            properties: BlockHandle {
                offset: 70,
                size: 30,
            },
            version: FORMAT_VERSION_PLAIN,
        };
        let enc = f.encode();
        assert_eq!(Footer::decode(&enc, 100 + FOOTER_LEN as u64).unwrap(), f);
        assert!(Footer::decode(&enc, 99 + FOOTER_LEN as u64).is_err());
        let mut bad = enc;
        bad[60] ^= 1;
        assert!(Footer::decode(&bad, 1000)
            .unwrap_err()
            .message()
            .contains("not a quietkv table"));
        let mut v7 = enc;
        v7[52..56].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(
            Footer::decode(&v7, 1000).unwrap_err().message(),
            "table format version 7 is newer than this build understands (3)"
        );
    }
}
