//! The key ranges a transaction's iterators covered: what each iterator
//! showed the transaction about which keys exist, so that its commit can
//! fail when a key was written into one of them since the snapshot (a
//! phantom), not only when a key it was handed changed.
//!
//! An iterator over `[lower, upper)` covers, from the front, everything
//! from `lower` through the last key `next` returned (that key included:
//! the transaction saw that nothing lies between the keys it got), and from
//! the back, everything from the last key `next_back` returned through
//! `upper` (excluded, as the range itself). Once it has returned `None`
//! from either end it covers the whole range: every key in it was handed
//! out from one end or the other. Keys it looked ahead at but did not
//! return are not covered, so an iterator dropped early covers only what
//! it showed. (A transaction's iterator has no seek, so a covered part
//! always starts at one of the range's ends.)

use crate::db::KeyRange;

/// What one iterator has covered so far.
#[derive(Debug)]
pub(crate) struct Scan {
    range: KeyRange,
    /// The last key returned from the front, if any.
    front: Option<Vec<u8>>,
    /// The last key returned from the back, if any.
    back: Option<Vec<u8>>,
    /// The iterator ran out: the whole range is covered.
    ran_out: bool,
}

impl Scan {
    pub(crate) fn new(range: KeyRange) -> Self {
        Scan {
            range,
            front: None,
            back: None,
            ran_out: false,
        }
    }

    /// The iterator returned `key` from the front (`forward`) or the back.
    pub(crate) fn returned(&mut self, forward: bool, key: &[u8]) {
        let last = if forward {
            &mut self.front
        } else {
            &mut self.back
        };
        // Reuse the buffer: a long scan replaces it once per key.
        let buf = last.get_or_insert_with(Vec::new);
        buf.clear();
        buf.extend_from_slice(key);
    }

    /// The iterator returned `None`: it handed out every key of its range.
    pub(crate) fn ran_out(&mut self) {
        self.ran_out = true;
    }

    /// The parts of the range covered (none, one or two), none empty.
    pub(crate) fn covered(&self) -> Vec<KeyRange> {
        let parts = if self.ran_out {
            vec![self.range.clone()]
        } else {
            let head = self.front.as_deref().map(|k| self.range.through(k));
            let tail = self.back.as_deref().map(|k| self.range.starting_at(k));
            head.into_iter().chain(tail).collect()
        };
        parts.into_iter().filter(|r| !r.is_empty()).collect()
    }
}

/// `ranges` as the fewest ranges covering the same keys: sorted by start,
/// overlapping or touching ones joined, so the commit reads each stretch
/// of keys once.
pub(crate) fn merge(mut ranges: Vec<KeyRange>) -> Vec<KeyRange> {
    // `None` (unbounded) sorts before any key, as it should for a start.
    ranges.sort_by(|a, b| a.lower().cmp(&b.lower()));
    let mut out: Vec<KeyRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        if let Some(last) = out.last_mut() {
            // `r` starts at or after `last` does; they join if `r` starts
            // before `last` ends (or right where it ends).
            let joins = match (last.upper(), r.lower()) {
                (None, _) => true,
                (Some(_), None) => true,
                (Some(end), Some(start)) => start <= end,
            };
            if joins {
                let upper = match (last.upper(), r.upper()) {
                    (Some(a), Some(b)) => Some(a.max(b).to_vec()),
                    _ => None,
                };
                *last = KeyRange::new(last.lower().map(<[u8]>::to_vec), upper);
                continue;
            }
        }
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn r(lower: &[u8], upper: &[u8]) -> KeyRange {
        KeyRange::new(Some(lower.to_vec()), Some(upper.to_vec()))
    }

    #[test]
    fn an_unused_iterator_covers_nothing_and_an_exhausted_one_its_range() {
        let mut scan = Scan::new(r(b"b", b"f"));
        assert!(scan.covered().is_empty());
        scan.ran_out();
        assert_eq!(scan.covered(), vec![r(b"b", b"f")]);
    }

    #[test]
    fn each_end_covers_up_to_its_last_key_included() {
        let mut scan = Scan::new(r(b"b", b"f"));
        scan.returned(true, b"b");
        scan.returned(true, b"c");
        assert_eq!(scan.covered(), vec![r(b"b", b"c\0")]);
        scan.returned(false, b"e");
        assert_eq!(scan.covered(), vec![r(b"b", b"c\0"), r(b"e", b"f")]);
        // Meeting in the middle and running out: the whole range.
        scan.ran_out();
        assert_eq!(scan.covered(), vec![r(b"b", b"f")]);

        let mut back = Scan::new(KeyRange::default());
        back.returned(false, b"x");
        assert_eq!(
            back.covered(),
            vec![KeyRange::new(Some(b"x".to_vec()), None)]
        );
    }

    #[test]
    fn merging_joins_overlapping_and_touching_ranges_only() {
        let merged = merge(vec![
            r(b"m", b"p"),
            r(b"a", b"c"),
            r(b"c", b"d"),
            r(b"b", b"c"),
            r(b"n", b"o"),
            r(b"q", b"r"),
        ]);
        assert_eq!(merged, vec![r(b"a", b"d"), r(b"m", b"p"), r(b"q", b"r")]);
        let unbounded = merge(vec![
            r(b"k", b"l"),
            KeyRange::new(None, Some(b"b".to_vec())),
            KeyRange::new(Some(b"c".to_vec()), None),
        ]);
        assert_eq!(
            unbounded,
            vec![
                KeyRange::new(None, Some(b"b".to_vec())),
                KeyRange::new(Some(b"c".to_vec()), None),
            ]
        );
        assert_eq!(
            merge(vec![KeyRange::default(), r(b"a", b"b")]),
            vec![KeyRange::default()]
        );
    }

    proptest! {
        /// Merging keeps exactly the keys of the ranges (checked on every
        /// short key), and leaves sorted ranges with gaps between them.
        #[test]
        fn merging_keeps_exactly_the_covered_keys(
            spans in proptest::collection::vec(
                (proptest::option::of(0u8..12), proptest::option::of(0u8..12)), 0..8),
        ) {
            let ranges: Vec<KeyRange> = spans
                .iter()
                .map(|(l, u)| KeyRange::new(l.map(|l| vec![l]), u.map(|u| vec![u])))
                .filter(|r| !r.is_empty())
                .collect();
            let merged = merge(ranges.clone());
            let keys: Vec<Vec<u8>> = std::iter::once(Vec::new())
                .chain((0u8..13).map(|a| vec![a]))
                .chain((0u8..13).map(|a| vec![a, 0]))
                .collect();
            for k in &keys {
                let want = ranges.iter().any(|r| r.contains(k));
                let got = merged.iter().filter(|r| r.contains(k)).count();
                prop_assert_eq!(got, usize::from(want), "key {:?}", k);
            }
            for pair in merged.windows(2) {
                let (end, start) = (pair[0].upper(), pair[1].lower());
                prop_assert!(matches!((end, start), (Some(e), Some(s)) if e < s));
            }
            let distinct: BTreeSet<_> = merged.iter().map(|r| r.lower().map(<[u8]>::to_vec)).collect();
            prop_assert_eq!(distinct.len(), merged.len());
        }
    }
}
