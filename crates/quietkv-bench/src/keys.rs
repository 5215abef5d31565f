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

/// Where the hot keys of E1-E3 lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HotLayout {
    /// A fixed pseudo-random set of `H` keys spread over the whole key
    /// space, the same for every engine: what real hot sets look like, and
    /// no engine gains from rewriting one end of the key space first.
    #[default]
    Scattered,
    /// Keys `[0, H)`: one end of the key space (the benchmark's layout
    /// before scattered hot sets, kept for comparison).
    Contiguous,
}

impl HotLayout {
    pub fn parse(s: &str) -> Result<HotLayout, String> {
        match s {
            "scattered" => Ok(HotLayout::Scattered),
            "contiguous" => Ok(HotLayout::Contiguous),
            other => Err(format!(
                "--hot-layout must be scattered or contiguous, got '{other}'"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HotLayout::Scattered => "scattered",
            HotLayout::Contiguous => "contiguous",
        }
    }

    /// The key index of hot key `i` (`0 <= i < hot`) in a key space of `n`
    /// keys. Scattered: `i` through a fixed pseudo-random permutation of
    /// `0..n` (so `H` hot keys are `H` distinct keys, and the first `H`
    /// of a larger hot set are the same keys).
    pub fn key_of(self, i: u64, n: u64) -> u64 {
        match self {
            HotLayout::Contiguous => i,
            HotLayout::Scattered => permute(i, n),
        }
    }
}

/// A pseudo-random permutation of `0..n`: a four-round Feistel network
/// over the smallest even power of two at least `n`, walked until it lands
/// inside `0..n` (cycle walking keeps it a permutation). Fixed keys: the
/// same on every machine and engine.
pub fn permute(i: u64, n: u64) -> u64 {
    assert!(i < n, "{i} is not below {n}");
    let mut bits = 64 - (n - 1).max(1).leading_zeros();
    bits += bits % 2;
    let half = bits / 2;
    let mask = (1u64 << half) - 1;
    let round = |r: u64, x: u64| -> u64 {
        let mut z = x.wrapping_add(r.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) & mask
    };
    let mut x = i;
    loop {
        let (mut l, mut r) = (x >> half, x & mask);
        for k in 0..4u64 {
            let next = l ^ round(k + 1, r);
            l = r;
            r = next;
        }
        x = (l << half) | r;
        if x < n {
            return x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hot_set_permutation_is_deterministic_distinct_and_spread() {
        for n in [1u64, 2, 3, 1000, 4097, 524_288] {
            let mut seen = std::collections::HashSet::new();
            for i in 0..n.min(5000) {
                let k = HotLayout::Scattered.key_of(i, n);
                assert!(k < n);
                assert!(seen.insert(k), "n {n}: {k} twice");
            }
        }
        // A small permutation is a whole one.
        let mut all: Vec<u64> = (0..1000).map(|i| permute(i, 1000)).collect();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
        // The same keys every time, on every engine (fixed, not seeded).
        assert_eq!(permute(0, 524_288), permute(0, 524_288));
        let first: Vec<u64> = (0..5).map(|i| permute(i, 524_288)).collect();
        assert_eq!(
            first,
            (0..5).map(|i| permute(i, 524_288)).collect::<Vec<_>>()
        );
        // Spread: 2,048 hot keys of 524,288 fall in every eighth of it.
        let mut eighths = [0u32; 8];
        for i in 0..2048 {
            eighths[(permute(i, 524_288) * 8 / 524_288) as usize] += 1;
        }
        assert!(
            eighths.iter().all(|&c| (170..=350).contains(&c)),
            "{eighths:?}"
        );
        assert_eq!(HotLayout::Contiguous.key_of(7, 100), 7);
        assert!(HotLayout::parse("diagonal").is_err());
    }

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
