//! Compression of table blocks and WAL records: one framing for both,
//! `u32 LE uncompressed size ++ compressed body`, so the reader can bound
//! what it allocates before it decompresses bytes read from disk.

use crate::error::{Error, Result};
use crate::table::Compression;

/// lz4 cannot expand input by more than about 255x: a larger claim is
/// damage, and refusing it keeps a damaged size from allocating gigabytes.
const LZ4_MAX_RATIO: usize = 255;

/// `raw` compressed with `c`, framed with its size; `None` when `c` is
/// `None`, `raw` does not fit a u32 size, or the compressor failed.
pub(crate) fn compress(raw: &[u8], c: Compression, zstd_level: i32) -> Option<Vec<u8>> {
    if raw.len() > u32::MAX as usize {
        return None;
    }
    match c {
        Compression::None => None,
        Compression::Lz4 => Some(lz4_flex::block::compress_prepend_size(raw)),
        Compression::Zstd => zstd::bulk::compress(raw, zstd_level).ok().map(|z| {
            let mut out = Vec::with_capacity(4 + z.len());
            out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
            out.extend_from_slice(&z);
            out
        }),
    }
}

/// Decompresses a framed payload written by [`compress`] with `c` (not
/// `None`). A claimed size above `limit`, or one the body cannot produce,
/// is Corruption (without file or offset: the caller adds them).
pub(crate) fn decompress(c: Compression, framed: &[u8], limit: usize) -> Result<Vec<u8>> {
    let claimed = framed
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| Error::corruption("compressed payload lacks its size prefix"))?;
    let body = &framed[4..];
    if claimed > limit {
        return Err(Error::corruption(format!(
            "compressed payload claims {claimed} decompressed bytes (limit {limit})"
        )));
    }
    let out = match c {
        Compression::None => {
            return Err(Error::corruption(
                "payload marked compressed names no compression",
            ))
        }
        Compression::Lz4 => {
            if claimed > body.len().saturating_mul(LZ4_MAX_RATIO).saturating_add(16) {
                return Err(Error::corruption(format!(
                    "lz4 payload of {} bytes cannot decompress to {claimed} bytes",
                    body.len()
                )));
            }
            lz4_flex::block::decompress(body, claimed)
                .map_err(|e| Error::corruption(format!("lz4 decompression failed: {e}")))?
        }
        Compression::Zstd => zstd::bulk::decompress(body, claimed)
            .map_err(|e| Error::corruption(format!("zstd decompression failed: {e}")))?,
    };
    if out.len() != claimed {
        return Err(Error::corruption(format!(
            "payload decompressed to {} bytes, expected {claimed}",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_lies() {
        let raw: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        for c in [Compression::Lz4, Compression::Zstd] {
            let f = compress(&raw, c, 1).unwrap();
            assert!(f.len() < raw.len());
            assert_eq!(decompress(c, &f, raw.len()).unwrap(), raw);
            // Over the caller's limit.
            assert!(decompress(c, &f, raw.len() - 1).is_err());
            // A size the body does not produce.
            let mut bad = f.clone();
            bad[..4].copy_from_slice(&((raw.len() + 1) as u32).to_le_bytes());
            assert!(decompress(c, &bad, usize::MAX).is_err());
            // Truncated body, and no prefix at all.
            assert!(decompress(c, &f[..f.len() / 2], usize::MAX).is_err());
            assert!(decompress(c, &f[..3], usize::MAX).is_err());
        }
        // lz4's ratio bound refuses before allocating.
        let mut huge = vec![0u8; 4];
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&[0u8; 10]);
        let e = decompress(Compression::Lz4, &huge, usize::MAX).unwrap_err();
        assert!(e.to_string().contains("cannot decompress"), "{e}");
        assert!(compress(&raw, Compression::None, 1).is_none());
    }
}
