//! Range tombstones: "every key in `[begin, end)` written before sequence
//! number `seq` is deleted". One tombstone costs one entry however many
//! keys it covers; readers ask [`covering_seq`] (one source's list, for a
//! point read) or a [`FragmentSet`] (every source merged, for an iterator)
//! whether a key's version is covered, and compactions cut tombstones to
//! their output tables with [`clip`].
//!
//! A version of `key` with sequence number `s` is deleted for a reader at
//! sequence number `r` when some tombstone covers `key` with
//! `s < seq <= r`.

use crate::error::{Error, Result};
use crate::key::{make_internal_key, parse_internal_key, SeqNo, ValueKind};

/// One range tombstone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangeTombstone {
    /// First user key deleted.
    pub begin: Vec<u8>,
    /// First user key after the range (exclusive); always `> begin`.
    pub end: Vec<u8>,
    pub seq: SeqNo,
}

impl RangeTombstone {
    pub fn new(begin: &[u8], end: &[u8], seq: SeqNo) -> Self {
        RangeTombstone {
            begin: begin.to_vec(),
            end: end.to_vec(),
            seq,
        }
    }

    pub fn covers(&self, user_key: &[u8]) -> bool {
        self.begin.as_slice() <= user_key && user_key < self.end.as_slice()
    }

    /// The internal key it is stored under: the begin key with a
    /// RangeDelete trailer (its value is the end key).
    pub fn internal_key(&self) -> Vec<u8> {
        make_internal_key(&self.begin, self.seq, ValueKind::RangeDelete)
    }

    /// Parses a stored `(internal key, end)` pair; bytes from disk that are
    /// not a RangeDelete key or describe an empty range are corruption.
    pub fn decode(ikey: &[u8], end: &[u8]) -> Result<RangeTombstone> {
        let p = parse_internal_key(ikey)?;
        if p.kind != ValueKind::RangeDelete {
            return Err(Error::corruption(format!(
                "range tombstone entry has kind {:?}, expected RangeDelete",
                p.kind
            )));
        }
        if p.user_key >= end {
            return Err(Error::corruption(format!(
                "range tombstone at sequence {} has an empty range (begin {} bytes, end {} bytes, begin >= end)",
                p.seq,
                p.user_key.len(),
                end.len()
            )));
        }
        Ok(RangeTombstone::new(p.user_key, end, p.seq))
    }

    /// The smallest internal key a table holding it must claim.
    pub fn smallest_bound(&self) -> Vec<u8> {
        self.internal_key()
    }

    /// The largest internal key a table holding it must claim: the keys it
    /// covers are those below `end`. When `end` is `x ++ [0]` (a range cut
    /// right after key `x`) that is exactly "up to `x`", and the bound is
    /// `x`; otherwise the bound is `end` itself, one key more than needed,
    /// which only makes the table look like it may hold `end` (reads then
    /// look at it for nothing). The trailer is the smallest a range
    /// tombstone can have (sequence 0), so the bound sorts after every
    /// entry of that user key, the tombstone's own first key included.
    pub fn largest_bound(&self) -> Vec<u8> {
        let uk = match self.end.split_last() {
            Some((0, head)) if head >= self.begin.as_slice() => head,
            _ => self.end.as_slice(),
        };
        make_internal_key(uk, 0, ValueKind::RangeDelete)
    }
}

/// The highest sequence number, at most `read_seq`, of the tombstones in
/// `tombstones` that cover `user_key` (0 if none does). Linear in the list:
/// for one source's tombstones in a point read.
pub fn covering_seq(tombstones: &[RangeTombstone], user_key: &[u8], read_seq: SeqNo) -> SeqNo {
    tombstones
        .iter()
        .filter(|t| t.seq <= read_seq && t.covers(user_key))
        .map(|t| t.seq)
        .max()
        .unwrap_or(0)
}

/// The part of `t` inside `[lower, upper)` (`None` = unbounded), if any.
pub fn clip(
    t: &RangeTombstone,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Option<RangeTombstone> {
    let begin = match lower {
        Some(l) if l > t.begin.as_slice() => l,
        _ => t.begin.as_slice(),
    };
    let end = match upper {
        Some(u) if u < t.end.as_slice() => u,
        _ => t.end.as_slice(),
    };
    (begin < end).then(|| RangeTombstone::new(begin, end, t.seq))
}

/// The smallest key after `key` in byte order.
pub fn successor(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.extend_from_slice(key);
    k.push(0);
    k
}

/// Cuts range tombstones to the tables of a run written in key order (a
/// compaction's or a repair's outputs), so each table holds only the part
/// of each tombstone inside its own key range and the tables stay disjoint:
/// a table that ends with user key `k` gets the parts up to and including
/// `k`, the next one the parts from just after `k`, and the last one
/// everything after that.
#[derive(Debug, Default)]
pub struct OutputSplitter {
    tombstones: Vec<RangeTombstone>,
    /// Where the next table's parts start (`None`: at the beginning).
    lower: Option<Vec<u8>>,
}

impl OutputSplitter {
    pub fn new(tombstones: Vec<RangeTombstone>) -> Self {
        OutputSplitter {
            tombstones,
            lower: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tombstones.is_empty()
    }

    /// The parts for a table that is not the last one and whose last point
    /// entry has user key `last_user_key`.
    pub fn cut_after(&mut self, last_user_key: &[u8]) -> Vec<RangeTombstone> {
        let upper = successor(last_user_key);
        let parts = self.parts(Some(&upper));
        self.lower = Some(upper);
        parts
    }

    /// The parts for the last table.
    pub fn rest(&mut self) -> Vec<RangeTombstone> {
        self.parts(None)
    }

    fn parts(&self, upper: Option<&[u8]>) -> Vec<RangeTombstone> {
        self.tombstones
            .iter()
            .filter_map(|t| clip(t, self.lower.as_deref(), upper))
            .collect()
    }
}

/// One piece of a [`FragmentSet`]: every version older than `seq` of a key
/// in `[begin, end)` is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment<'a> {
    pub begin: &'a [u8],
    pub end: &'a [u8],
    pub seq: SeqNo,
}

/// Tombstones visible at one sequence number, cut into non-overlapping
/// fragments sorted by key, each with the highest sequence number of the
/// tombstones over it: a lookup is one binary search.
#[derive(Debug, Clone, Default)]
pub struct FragmentSet {
    /// `(begin, end, seq)`, sorted, disjoint, no empty ranges.
    fragments: Vec<(Vec<u8>, Vec<u8>, SeqNo)>,
}

impl FragmentSet {
    /// The fragments of every tombstone in `tombstones` with
    /// `seq <= read_seq`.
    pub fn new<'a>(
        tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
        read_seq: SeqNo,
    ) -> Self {
        let visible: Vec<&RangeTombstone> = tombstones
            .into_iter()
            .filter(|t| t.seq <= read_seq && t.begin < t.end)
            .collect();
        let mut points: Vec<&[u8]> = visible
            .iter()
            .flat_map(|t| [t.begin.as_slice(), t.end.as_slice()])
            .collect();
        points.sort_unstable();
        points.dedup();
        let mut by_begin = visible;
        by_begin.sort_by(|a, b| a.begin.cmp(&b.begin));
        // Sweep the boundaries left to right, with the tombstones that have
        // begun in a heap by sequence number; ended ones are popped lazily.
        let mut active: std::collections::BinaryHeap<(SeqNo, &[u8])> =
            std::collections::BinaryHeap::new();
        let mut next = 0;
        let mut fragments: Vec<(Vec<u8>, Vec<u8>, SeqNo)> = Vec::new();
        for w in points.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            while next < by_begin.len() && by_begin[next].begin.as_slice() <= lo {
                active.push((by_begin[next].seq, by_begin[next].end.as_slice()));
                next += 1;
            }
            while active.peek().is_some_and(|&(_, end)| end <= lo) {
                active.pop();
            }
            if let Some(&(seq, _)) = active.peek() {
                match fragments.last_mut() {
                    // Merge with the previous fragment when they touch and
                    // agree, so the set stays small.
                    Some(last) if last.1.as_slice() == lo && last.2 == seq => {
                        last.1 = hi.to_vec();
                    }
                    _ => fragments.push((lo.to_vec(), hi.to_vec(), seq)),
                }
            }
        }
        FragmentSet { fragments }
    }

    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// The highest sequence number of the tombstones covering `user_key`
    /// (0 if none does).
    pub fn covering_seq(&self, user_key: &[u8]) -> SeqNo {
        self.covering(user_key).map_or(0, |f| f.seq)
    }

    /// The fragment over `user_key`, if any.
    pub fn covering(&self, user_key: &[u8]) -> Option<Fragment<'_>> {
        let i = self
            .fragments
            .partition_point(|(begin, _, _)| begin.as_slice() <= user_key);
        match i.checked_sub(1).map(|i| &self.fragments[i]) {
            Some((begin, end, seq)) if user_key < end.as_slice() => Some(Fragment {
                begin,
                end,
                seq: *seq,
            }),
            _ => None,
        }
    }

    /// Whether a version of `user_key` with sequence number `seq` is deleted
    /// by a tombstone of the set.
    pub fn covers(&self, user_key: &[u8], seq: SeqNo) -> bool {
        self.covering_seq(user_key) > seq
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::key::MAX_SEQ;

    fn t(b: &str, e: &str, seq: SeqNo) -> RangeTombstone {
        RangeTombstone::new(b.as_bytes(), e.as_bytes(), seq)
    }

    #[test]
    fn fragments_take_the_highest_sequence() {
        let ts = [t("b", "f", 5), t("d", "h", 9), t("a", "c", 2)];
        let set = FragmentSet::new(&ts, 100);
        let at = |k: &str| set.covering_seq(k.as_bytes());
        assert_eq!(
            (at(""), at("a"), at("b"), at("c"), at("d"), at("g"), at("h")),
            (0, 2, 5, 5, 9, 9, 0)
        );
        // A reader at 8 does not see the tombstone at 9.
        let old = FragmentSet::new(&ts, 8);
        assert_eq!(old.covering_seq(b"e"), 5);
        assert_eq!(old.covering_seq(b"g"), 0);
        assert!(old.covers(b"e", 4));
        assert!(!old.covers(b"e", 5));
        assert!(FragmentSet::new(&ts, 1).is_empty());
    }

    #[test]
    fn clip_and_bounds() {
        let x = t("b", "m", 3);
        assert_eq!(clip(&x, Some(b"d"), Some(b"f")), Some(t("d", "f", 3)));
        assert_eq!(clip(&x, None, Some(b"b")), None);
        assert_eq!(clip(&x, Some(b"m"), None), None);
        assert_eq!(clip(&x, None, None), Some(x.clone()));
        // A range cut after "d" ends at "d\0": the table claims up to "d".
        let cut = RangeTombstone::new(b"b", b"d\0", 3);
        assert_eq!(crate::key::user_key(&cut.largest_bound()), b"d");
        assert_eq!(crate::key::user_key(&x.largest_bound()), b"m");
        // "\0" after an empty begin: the range is just the empty key.
        let only_empty = RangeTombstone::new(b"", b"\0", 1);
        assert_eq!(crate::key::user_key(&only_empty.largest_bound()), b"");
        // A range of one key: the bounds are that key, in order.
        let one = RangeTombstone::new(b"k", b"k\0", MAX_SEQ);
        assert!(crate::key::compare_internal(&one.smallest_bound(), &one.largest_bound()).is_lt());
    }

    #[test]
    fn splitter_keeps_outputs_disjoint() {
        let mut s = OutputSplitter::new(vec![t("a", "z", 7), t("m", "n", 9)]);
        let first = s.cut_after(b"c");
        assert_eq!(first, vec![RangeTombstone::new(b"a", b"c\0", 7)]);
        let second = s.cut_after(b"m");
        assert_eq!(
            second,
            vec![
                RangeTombstone::new(b"c\0", b"m\0", 7),
                RangeTombstone::new(b"m", b"m\0", 9)
            ]
        );
        let last = s.rest();
        assert_eq!(
            last,
            vec![
                RangeTombstone::new(b"m\0", b"z", 7),
                RangeTombstone::new(b"m\0", b"n", 9)
            ]
        );
        // Each table's bounds end where the next one's begin.
        assert_eq!(crate::key::user_key(&first[0].largest_bound()), b"c");
        assert_eq!(crate::key::user_key(&second[0].smallest_bound()), b"c\0");
    }

    #[test]
    fn decode_rejects_bad_entries() {
        let x = t("b", "m", 3);
        assert_eq!(RangeTombstone::decode(&x.internal_key(), b"m").unwrap(), x);
        assert!(RangeTombstone::decode(&x.internal_key(), b"b").is_err());
        assert!(RangeTombstone::decode(&x.internal_key(), b"a").is_err());
        let put = make_internal_key(b"b", 3, ValueKind::Put);
        assert!(RangeTombstone::decode(&put, b"m").is_err());
        assert!(RangeTombstone::decode(b"short", b"m").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn fragment_set_matches_a_linear_scan(
            raw in prop::collection::vec((0u8..8, 1u8..5, 1u64..20), 0..8),
            read_seq in 0u64..22,
            key in prop::collection::vec(0u8..10, 0..2),
        ) {
            let ts: Vec<RangeTombstone> = raw
                .iter()
                .map(|&(b, len, seq)| RangeTombstone::new(&[b], &[b + len], seq))
                .collect();
            let set = FragmentSet::new(&ts, read_seq);
            prop_assert_eq!(set.covering_seq(&key), covering_seq(&ts, &key, read_seq));
            // The fragment over the key holds it, and every key inside the
            // fragment is deleted up to the same sequence number: what lets
            // a reader jump to its end.
            if let Some(f) = set.covering(&key) {
                prop_assert!(f.begin <= key.as_slice() && key.as_slice() < f.end);
                for b in 0u8..10 {
                    for k in [vec![b], vec![b, 0], vec![b, 9]] {
                        if f.begin <= k.as_slice() && k.as_slice() < f.end {
                            prop_assert_eq!(covering_seq(&ts, &k, read_seq), f.seq);
                        }
                    }
                }
            }
        }
    }
}
