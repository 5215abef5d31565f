//! A whole-table Bloom filter over user keys.
//!
//! Encoded filter (the payload of the filter block): `bits` bytes of bit
//! array followed by one byte holding the number of probes `k`. Probe `i`
//! of a key tests bit `(h1 + i * h2) mod m` where `h1`/`h2` are the low and
//! high 32 bits of [`hash64`] (Kirsch–Mitzenmacher double hashing) and `m`
//! is the number of bits. The hash function is part of the on-disk format.

use crate::error::{Error, Result};

const MAX_PROBES: u8 = 30;

/// A 64-bit hash of `data` (format-stable; do not change).
pub fn hash64(data: &[u8]) -> u64 {
    const P1: u64 = 0x9e37_79b9_7f4a_7c15;
    const P2: u64 = 0xc2b2_ae3d_27d4_eb4f;
    let mut h = (data.len() as u64).wrapping_mul(P1) ^ 0x5175_6965_746b_7631;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let v = u64::from_le_bytes(w).wrapping_mul(P2);
        h = (h ^ v.rotate_left(31).wrapping_mul(P1)).rotate_left(27);
        h = h.wrapping_mul(5).wrapping_add(0x52dc_e729);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut w = [0u8; 8];
        w[..tail.len()].copy_from_slice(tail);
        let v = u64::from_le_bytes(w).wrapping_mul(P2);
        h ^= v.rotate_left(31).wrapping_mul(P1);
    }
    // fmix64 from MurmurHash3.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

fn probes(hash: u64, k: u8, m: u64) -> impl Iterator<Item = u64> {
    let h1 = hash & 0xffff_ffff;
    let h2 = hash >> 32;
    (0..u64::from(k)).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % m)
}

/// Collects key hashes while a table is built.
pub struct BloomBuilder {
    bits_per_key: usize,
    hashes: Vec<u64>,
}

impl BloomBuilder {
    pub fn new(bits_per_key: usize) -> Self {
        BloomBuilder {
            bits_per_key: bits_per_key.clamp(1, 64),
            hashes: Vec::new(),
        }
    }

    pub fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(hash64(user_key));
    }

    /// The encoded filter.
    pub fn finish(&self) -> Vec<u8> {
        let k = ((self.bits_per_key as f64) * std::f64::consts::LN_2).round() as u8;
        let k = k.clamp(1, MAX_PROBES);
        let nbits = (self.hashes.len() * self.bits_per_key).max(64);
        let nbytes = nbits.div_ceil(8);
        let m = (nbytes * 8) as u64;
        let mut out = vec![0u8; nbytes + 1];
        for &h in &self.hashes {
            for bit in probes(h, k, m) {
                if let Some(b) = out.get_mut((bit / 8) as usize) {
                    *b |= 1 << (bit % 8);
                }
            }
        }
        if let Some(last) = out.last_mut() {
            *last = k;
        }
        out
    }
}

/// A decoded filter.
pub struct BloomFilter {
    bits: Vec<u8>,
    k: u8,
}

impl BloomFilter {
    pub fn decode(mut data: Vec<u8>) -> Result<BloomFilter> {
        let k = data
            .pop()
            .ok_or_else(|| Error::corruption("empty bloom filter block"))?;
        if k == 0 || k > MAX_PROBES || data.is_empty() {
            return Err(Error::corruption(format!(
                "bloom filter with {k} probes over {} bytes is invalid",
                data.len()
            )));
        }
        Ok(BloomFilter { bits: data, k })
    }

    /// False means the key is definitely absent.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let m = (self.bits.len() * 8) as u64;
        probes(hash64(user_key), self.k, m).all(|bit| {
            self.bits
                .get((bit / 8) as usize)
                .is_some_and(|b| b & (1 << (bit % 8)) != 0)
        })
    }

    /// Memory used by the bit array.
    pub fn size(&self) -> usize {
        self.bits.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        let mut b = BloomBuilder::new(10);
        let n = 10_000;
        for i in 0..n {
            b.add_key(format!("user-key-{i}").as_bytes());
        }
        let f = BloomFilter::decode(b.finish()).unwrap();
        for i in 0..n {
            assert!(f.may_contain(format!("user-key-{i}").as_bytes()));
        }
        let fp = (0..n)
            .filter(|i| f.may_contain(format!("absent-key-{i}").as_bytes()))
            .count();
        let rate = fp as f64 / n as f64;
        // Theory for 10 bits/key, 7 probes: ~0.82%.
        assert!(rate < 0.03, "false-positive rate {rate}");
    }

    #[test]
    fn empty_filter_and_bad_encodings() {
        let f = BloomFilter::decode(BloomBuilder::new(10).finish()).unwrap();
        assert!(!f.may_contain(b"x"));
        assert!(BloomFilter::decode(vec![]).is_err());
        assert!(BloomFilter::decode(vec![5]).is_err());
        assert!(BloomFilter::decode(vec![0, 0, 0, 0, 31]).is_err());
        assert!(BloomFilter::decode(vec![0, 0, 0, 0, 0]).is_err());
    }
}
