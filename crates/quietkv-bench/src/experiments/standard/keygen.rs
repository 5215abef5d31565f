//! The keys the standard workloads ask for, the same for every engine:
//! db_bench's present and absent keys, YCSB's request distributions
//! (zipfian with its constant 0.99, scrambled over the key space, and
//! "latest") and YCSB's operation mixes; and the seeded generator they
//! draw from.

use crate::keys::{key, permute, KEY_SIZE};

/// A small seeded generator (xorshift64*): every engine gets the same
/// sequence of requests for the same seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Never zero: xorshift would stay there.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The `i`-th of the db_bench workloads' present keys. Present keys are the
/// even key numbers, so that [`absent`] keys can fall between them.
pub fn present(i: u64) -> [u8; KEY_SIZE] {
    key(2 * i)
}

/// A key that is never written and sorts between [`present`]`(i)` and
/// `present(i + 1)`: no range of a table excludes it, only a filter can
/// tell it is not there (db_bench's `readmissing`).
pub fn absent(i: u64) -> [u8; KEY_SIZE] {
    key(2 * i + 1)
}

/// The key number of present key `i` (what its value starts with).
pub fn present_number(i: u64) -> u64 {
    2 * i
}

/// The key numbers YCSB's records are hashed over: 2^48.
pub const YCSB_KEY_SPAN: u64 = 1 << 48;

/// The YCSB key of record `i`: record numbers go through a fixed
/// permutation of a 2^48 space, as YCSB hashes its key numbers
/// (`insertorder=hashed`), so inserts land all over the key space and a
/// scan from a record's key meets other records.
pub fn ycsb_number(i: u64) -> u64 {
    permute(i, YCSB_KEY_SPAN)
}

/// YCSB's zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// The generalised harmonic number `sum_{i=1..n} 1/i^theta`.
pub fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// Zipfian ranks in `0..items` (rank 0 the most popular): the probability
/// of rank `r` is `1 / (r+1)^theta / zeta(items, theta)`, drawn with the
/// method of Gray et al. ("Quickly generating billion-record synthetic
/// databases", 1994), which YCSB uses. The item count can grow (YCSB's
/// inserts), updating the sum in O(new items).
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    zeta2: f64,
    zetan: f64,
    alpha: f64,
    eta: f64,
}

impl Zipfian {
    pub fn new(items: u64, theta: f64) -> Zipfian {
        assert!(items > 0 && theta > 0.0 && theta < 1.0);
        let mut z = Zipfian {
            items,
            theta,
            zeta2: zeta(2, theta),
            zetan: zeta(items, theta),
            alpha: 1.0 / (1.0 - theta),
            eta: 0.0,
        };
        z.eta = z.eta_now();
        z
    }

    fn eta_now(&self) -> f64 {
        let n = self.items as f64;
        (1.0 - (2.0 / n).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// Grows the item count to `items` (never shrinks).
    pub fn grow_to(&mut self, items: u64) {
        while self.items < items {
            self.items += 1;
            self.zetan += 1.0 / (self.items as f64).powf(self.theta);
        }
        self.eta = self.eta_now();
    }

    /// A rank in `0..items`.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 || self.items == 1 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.items - 1)
    }
}

/// 64-bit FNV-1a over the 8 bytes of `x`: YCSB scatters its zipfian ranks
/// with an FNV hash.
pub fn fnv1a(x: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in x.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// Zipfian popularity scattered over the records (YCSB's "scrambled
/// zipfian"): the popular records are not the first ones inserted.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian(Zipfian);

impl ScrambledZipfian {
    pub fn new(items: u64) -> ScrambledZipfian {
        ScrambledZipfian(Zipfian::new(items, ZIPFIAN_CONSTANT))
    }

    /// A record number in `0..items`.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        fnv1a(self.0.next(rng)) % self.0.items()
    }
}

/// YCSB's "latest": zipfian over recency, the newest record the most
/// popular (workload D).
#[derive(Debug, Clone)]
pub struct Latest(Zipfian);

impl Latest {
    pub fn new(records: u64) -> Latest {
        Latest(Zipfian::new(records, ZIPFIAN_CONSTANT))
    }

    /// One more record was inserted.
    pub fn inserted(&mut self) {
        let n = self.0.items() + 1;
        self.0.grow_to(n);
    }

    /// A record number in `0..records`.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        self.0.items() - 1 - self.0.next(rng)
    }
}

/// One operation of a YCSB workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YcsbOp {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// The shares of a YCSB workload's operations (they add up to 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
}

impl Mix {
    const NONE: Mix = Mix {
        read: 0.0,
        update: 0.0,
        insert: 0.0,
        scan: 0.0,
        read_modify_write: 0.0,
    };

    /// The operation `u` (uniform in `[0, 1)`) picks.
    pub fn pick(&self, u: f64) -> YcsbOp {
        let mut edge = self.read;
        if u < edge {
            return YcsbOp::Read;
        }
        edge += self.update;
        if u < edge {
            return YcsbOp::Update;
        }
        edge += self.insert;
        if u < edge {
            return YcsbOp::Insert;
        }
        edge += self.scan;
        if u < edge {
            return YcsbOp::Scan;
        }
        if self.read_modify_write > 0.0 {
            YcsbOp::ReadModifyWrite
        } else {
            // Rounding left a sliver past the last share: the biggest one.
            self.largest()
        }
    }

    fn largest(&self) -> YcsbOp {
        [
            (self.read, YcsbOp::Read),
            (self.update, YcsbOp::Update),
            (self.insert, YcsbOp::Insert),
            (self.scan, YcsbOp::Scan),
        ]
        .into_iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, op)| op)
        .unwrap_or(YcsbOp::Read)
    }
}

/// Which records a workload asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// [`ScrambledZipfian`].
    Zipfian,
    /// [`Latest`].
    Latest,
}

/// YCSB's core workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    A,
    B,
    C,
    D,
    E,
    F,
}

impl Workload {
    /// In YCSB's recommended order (D and E insert, so they come last).
    pub const ORDER: [Workload; 6] = [
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::F,
        Workload::D,
        Workload::E,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::A => "ycsb-a",
            Workload::B => "ycsb-b",
            Workload::C => "ycsb-c",
            Workload::D => "ycsb-d",
            Workload::E => "ycsb-e",
            Workload::F => "ycsb-f",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Workload::A => "50% reads, 50% updates, zipfian",
            Workload::B => "95% reads, 5% updates, zipfian",
            Workload::C => "100% reads, zipfian",
            Workload::D => "95% reads of the latest records, 5% inserts",
            Workload::E => {
                "95% short scans (1-100 records, uniform) from a zipfian record, 5% inserts"
            }
            Workload::F => "50% reads, 50% read-modify-writes, zipfian",
        }
    }

    pub fn mix(self) -> Mix {
        match self {
            Workload::A => Mix {
                read: 0.5,
                update: 0.5,
                ..Mix::NONE
            },
            Workload::B => Mix {
                read: 0.95,
                update: 0.05,
                ..Mix::NONE
            },
            Workload::C => Mix {
                read: 1.0,
                ..Mix::NONE
            },
            Workload::D => Mix {
                read: 0.95,
                insert: 0.05,
                ..Mix::NONE
            },
            Workload::E => Mix {
                scan: 0.95,
                insert: 0.05,
                ..Mix::NONE
            },
            Workload::F => Mix {
                read: 0.5,
                read_modify_write: 0.5,
                ..Mix::NONE
            },
        }
    }

    pub fn distribution(self) -> Distribution {
        match self {
            Workload::D => Distribution::Latest,
            _ => Distribution::Zipfian,
        }
    }

    /// Whether it writes (its write amplification is reported).
    pub fn writes(self) -> bool {
        self != Workload::C
    }
}

/// YCSB's longest scan (`maxscanlength`).
pub const MAX_SCAN: u64 = 100;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_keys_are_never_present_and_fall_between_present_ones() {
        let n = 10_000u64;
        let present_keys: std::collections::BTreeSet<[u8; KEY_SIZE]> =
            (0..n).map(present).collect();
        assert_eq!(present_keys.len(), n as usize);
        for i in 0..n {
            let a = absent(i);
            assert!(!present_keys.contains(&a), "{i}");
            assert!(present(i) < a, "{i}");
            if i + 1 < n {
                assert!(a < present(i + 1), "{i}");
            }
            // The nearest present key at or after it is the next one: a
            // table's key range never rules it out.
            let next = present_keys.range(a..).next();
            assert_eq!(next, (i + 1 < n).then(|| present(i + 1)).as_ref());
        }
        assert_eq!(&present(3), b"0000000000000006");
        assert_eq!(present_number(3), 6);
    }

    #[test]
    fn zipfian_ranks_follow_the_formula() {
        let n = 1000;
        let z = Zipfian::new(n, ZIPFIAN_CONSTANT);
        let mut rng = Rng::new(7);
        let draws = 400_000;
        let mut count = vec![0u64; n as usize];
        for _ in 0..draws {
            let r = z.next(&mut rng);
            assert!(r < n);
            count[r as usize] += 1;
        }
        let zn = zeta(n, ZIPFIAN_CONSTANT);
        // Ranks 0 and 1 are exact in the method; beyond them it
        // approximates the formula (rank 2 comes out ~15% above it, as
        // in YCSB, which draws the same way).
        for (r, tol) in [(0usize, 0.02), (1, 0.03), (2, 0.25), (9, 0.25)] {
            let want = 1.0 / ((r + 1) as f64).powf(ZIPFIAN_CONSTANT) / zn;
            let got = count[r] as f64 / draws as f64;
            assert!(
                (got - want).abs() <= tol * want,
                "rank {r}: {got:.4} drawn, {want:.4} by the formula"
            );
        }
        // The head holds most of the draws: the top 10% of ranks get the
        // share the formula gives them.
        let head: u64 = count[..100].iter().sum();
        let want = zeta(100, ZIPFIAN_CONSTANT) / zn;
        let got = head as f64 / draws as f64;
        assert!((got - want).abs() < 0.03, "{got} vs {want}");
    }

    #[test]
    fn a_grown_zipfian_is_the_one_built_at_that_size() {
        let mut z = Zipfian::new(100, ZIPFIAN_CONSTANT);
        z.grow_to(5000);
        let fresh = Zipfian::new(5000, ZIPFIAN_CONSTANT);
        assert!((z.zetan - fresh.zetan).abs() < 1e-9);
        assert!((z.eta - fresh.eta).abs() < 1e-9);
    }

    #[test]
    fn scrambled_and_latest_stay_in_range_and_skew_where_they_should() {
        let n = 10_000;
        let s = ScrambledZipfian::new(n);
        let mut l = Latest::new(n);
        let mut rng = Rng::new(3);
        let mut newest = 0;
        let mut first_tenth = 0;
        for _ in 0..100_000 {
            let k = s.next(&mut rng);
            assert!(k < n);
            if k < n / 10 {
                first_tenth += 1;
            }
            let k = l.next(&mut rng);
            assert!(k < n);
            if k >= n - 10 {
                newest += 1;
            }
        }
        // Latest: the 10 newest records take the share of zipfian's top 10.
        let want = zeta(10, ZIPFIAN_CONSTANT) / zeta(n, ZIPFIAN_CONSTANT);
        let got = newest as f64 / 100_000.0;
        assert!((got - want).abs() < 0.03, "{got} vs {want}");
        // Scrambled: the popular records are spread, not the first ones.
        let tenth = first_tenth as f64 / 100_000.0;
        assert!(tenth < 0.3, "{tenth}");
        l.inserted();
        let mut saw_new = false;
        for _ in 0..10_000 {
            let k = l.next(&mut rng);
            assert!(k <= n);
            saw_new |= k == n;
        }
        assert!(saw_new, "the newest record is the most popular");
    }

    #[test]
    fn ycsb_mixes_are_drawn_in_their_shares() {
        let mut rng = Rng::new(11);
        let draws = 200_000;
        for w in Workload::ORDER {
            let m = w.mix();
            let total = m.read + m.update + m.insert + m.scan + m.read_modify_write;
            assert!((total - 1.0).abs() < 1e-12, "{w:?}");
            let mut seen = [0u64; 5];
            for _ in 0..draws {
                let i = match m.pick(rng.unit()) {
                    YcsbOp::Read => 0,
                    YcsbOp::Update => 1,
                    YcsbOp::Insert => 2,
                    YcsbOp::Scan => 3,
                    YcsbOp::ReadModifyWrite => 4,
                };
                seen[i] += 1;
            }
            let shares = [m.read, m.update, m.insert, m.scan, m.read_modify_write];
            for (i, want) in shares.iter().enumerate() {
                let got = seen[i] as f64 / draws as f64;
                assert!((got - want).abs() < 0.01, "{w:?} op {i}: {got} vs {want}");
            }
        }
        assert_eq!(Workload::C.mix().pick(0.999_999_9), YcsbOp::Read);
        assert!(!Workload::C.writes() && Workload::E.writes());
    }

    #[test]
    fn ycsb_keys_are_distinct_and_uniform_draws_cover_the_range() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            assert!(seen.insert(ycsb_number(i)));
            assert!(ycsb_number(i) < 1 << 48);
        }
        let mut rng = Rng::new(5);
        let mut buckets = [0u32; 10];
        for _ in 0..100_000 {
            buckets[rng.below(10) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&b| (9_000..11_000).contains(&b)),
            "{buckets:?}"
        );
    }
}
