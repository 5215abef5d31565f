//! LEB128 varints: the one variable-length integer encoding of every file
//! format (table blocks and properties, manifest edits, write batches; see
//! `docs/format.md`).
//!
//! Seven bits per byte, least significant group first, the high bit set on
//! every byte but the last. Decoding is strict, because the bytes come from
//! disk: an encoding that runs off the end of the input is
//! [`VarintError::Truncated`], and one that is longer than the type allows
//! or carries bits above it is [`VarintError::Overflow`]. Callers turn both
//! into Corruption with their own context (file, offset, field).

use std::fmt;

/// Longest encoding of a `u64`: 10 bytes, the last holding the top bit.
pub const MAX_LEN_U64: usize = 10;
/// Longest encoding of a `u32`: 5 bytes, the last holding the top 4 bits.
pub const MAX_LEN_U32: usize = 5;

/// Why a varint could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended before the last byte of the varint.
    Truncated,
    /// The varint has more bytes, or more significant bits, than the type.
    Overflow { bits: u32 },
}

impl fmt::Display for VarintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VarintError::Truncated => f.write_str("truncated varint"),
            VarintError::Overflow { bits } => write!(f, "varint overflows {bits} bits"),
        }
    }
}

/// Appends `v` to `out`.
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` to `out` (the same bytes as [`put_u64`] of the same value).
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    put_u64(out, u64::from(v));
}

/// Decodes a varint of at most `bits` significant bits from the start of
/// `buf`: the value and the number of bytes it took.
fn decode(buf: &[u8], bits: u32) -> Result<(u64, usize), VarintError> {
    let max_len = bits.div_ceil(7) as usize;
    // Bits the last allowed byte may carry.
    let last_bits = bits - 7 * (max_len as u32 - 1);
    let mut v: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(max_len) {
        if i == max_len - 1 && u32::from(b) >> last_bits != 0 {
            // Either a continuation bit or value bits above `bits`.
            return Err(VarintError::Overflow { bits });
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((v, i + 1));
        }
    }
    // Only reachable when `buf` ended: a full-length varint returned or
    // overflowed above.
    Err(VarintError::Truncated)
}

/// Decodes a `u64` varint from the start of `buf`: the value and its length.
pub fn decode_u64(buf: &[u8]) -> Result<(u64, usize), VarintError> {
    decode(buf, 64)
}

/// Decodes a `u32` varint from the start of `buf`: the value and its length.
pub fn decode_u32(buf: &[u8]) -> Result<(u32, usize), VarintError> {
    // `decode` admits no bits above 32, so the value fits.
    decode(buf, 32).map(|(v, n)| (v as u32, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc64(v: u64) -> Vec<u8> {
        let mut b = Vec::new();
        put_u64(&mut b, v);
        b
    }

    #[test]
    fn known_encodings() {
        assert_eq!(enc64(0), [0x00]);
        assert_eq!(enc64(1), [0x01]);
        assert_eq!(enc64(127), [0x7f]);
        assert_eq!(enc64(128), [0x80, 0x01]);
        assert_eq!(enc64(300), [0xac, 0x02]);
        assert_eq!(enc64(u64::MAX).len(), MAX_LEN_U64);
        assert_eq!(*enc64(u64::MAX).last().unwrap(), 0x01);
        let mut b = Vec::new();
        put_u32(&mut b, u32::MAX);
        assert_eq!(b, [0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(b.len(), MAX_LEN_U32);
    }

    #[test]
    fn round_trips_at_every_width_and_ignores_what_follows() {
        let mut values = vec![0u64, u64::MAX];
        for shift in 0..64 {
            let p = 1u64 << shift;
            values.extend([p - 1, p, p + 1]);
        }
        for v in values {
            let mut b = enc64(v);
            let n = b.len();
            b.extend_from_slice(&[0xff, 0x00]);
            assert_eq!(decode_u64(&b), Ok((v, n)), "{v}");
            if let Ok(v32) = u32::try_from(v) {
                let mut c = Vec::new();
                put_u32(&mut c, v32);
                assert_eq!(c, enc64(v));
                assert_eq!(decode_u32(&b), Ok((v32, n)), "{v}");
            }
        }
    }

    #[test]
    fn truncation_is_reported() {
        assert_eq!(decode_u64(&[]), Err(VarintError::Truncated));
        assert_eq!(decode_u64(&[0x80]), Err(VarintError::Truncated));
        assert_eq!(decode_u64(&[0xff; 9]), Err(VarintError::Truncated));
        assert_eq!(decode_u32(&[]), Err(VarintError::Truncated));
        assert_eq!(decode_u32(&[0x80, 0x80]), Err(VarintError::Truncated));
        assert_eq!(decode_u32(&[0xff; 4]), Err(VarintError::Truncated));
        // Every proper prefix of a valid encoding is truncated.
        let b = enc64(u64::MAX);
        for len in 0..b.len() {
            assert_eq!(decode_u64(&b[..len]), Err(VarintError::Truncated));
        }
    }

    #[test]
    fn overflow_is_reported() {
        let over64 = Err(VarintError::Overflow { bits: 64 });
        // 10th byte with a value bit above bit 63.
        let mut b = vec![0xff; 9];
        b.push(0x02);
        assert_eq!(decode_u64(&b), over64);
        // 10th byte with a continuation bit: more than 10 bytes.
        assert_eq!(decode_u64(&[0xff; 11]), over64);
        assert_eq!(decode_u64(&[0x80; 10]), over64);
        // The largest 10-byte encoding is fine.
        b[9] = 0x01;
        assert_eq!(decode_u64(&b), Ok((u64::MAX, 10)));

        let over32 = Err(VarintError::Overflow { bits: 32 });
        assert_eq!(decode_u32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), over32);
        assert_eq!(decode_u32(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]), over32);
        // A u64 that does not fit in 32 bits is an overflow for decode_u32.
        assert_eq!(decode_u32(&enc64(1 << 32)), over32);
        assert_eq!(
            VarintError::Overflow { bits: 32 }.to_string(),
            "varint overflows 32 bits"
        );
        assert_eq!(VarintError::Truncated.to_string(), "truncated varint");
    }
}
