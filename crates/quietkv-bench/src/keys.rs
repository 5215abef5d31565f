//! The benchmark's keys and values, the same for every engine and
//! experiment: 16-digit ASCII keys, values whose first bytes say which key
//! and version they belong to, and the scattered order of fills.

pub const KEY_SIZE: usize = 16;

/// The key of index `k`: 16 ASCII digits.
pub fn key(k: u64) -> [u8; KEY_SIZE] {
    let mut out = [0u8; KEY_SIZE];
    out.copy_from_slice(format!("{k:016}").as_bytes());
    out
}

/// The value of key `k` at `version` (0 = as built); its first 16 bytes
/// identify both, the rest is incompressible-looking filler.
pub fn fill_value(buf: &mut [u8], k: u64, version: u64) {
    let mut x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    for w in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        w.copy_from_slice(&b[..w.len()]);
    }
    if buf.len() >= 16 {
        buf[..8].copy_from_slice(&k.to_le_bytes());
        buf[8..16].copy_from_slice(&version.to_le_bytes());
    }
}

/// Whether `v` is a value of key `k` of `value_size` bytes (any version).
pub fn is_value_of(v: &[u8], k: u64, value_size: usize) -> bool {
    v.len() == value_size && v.len() >= 8 && v[..8] == k.to_le_bytes()
}

/// A permutation of `0..n`, so fills write keys in scattered order and the
/// tree goes through real compactions while it is built.
pub fn scatter(i: u64, n: u64) -> u64 {
    const P: u64 = 2_654_435_761; // prime
    let p = if n.is_multiple_of(P) { 1_000_003 } else { P };
    ((i % n) as u128 * (p % n) as u128 % n as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_is_a_permutation() {
        for n in [1u64, 7, 16, 1000, 4096] {
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                seen[scatter(i, n) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "n = {n}");
        }
    }

    #[test]
    fn a_value_names_its_key() {
        let mut v = vec![0u8; 100];
        fill_value(&mut v, 42, 3);
        assert!(is_value_of(&v, 42, 100));
        assert!(!is_value_of(&v, 43, 100));
        assert!(!is_value_of(&v[..99], 42, 100));
        assert_eq!(&key(42), b"0000000000000042");
    }
}
