//! [`KeyRange`]: the user keys `[lower, upper)` an iterator, a scan or a
//! transaction's read set covers, made from any Rust range or a prefix.

use std::ops::{Bound, RangeBounds};

/// User keys `[lower, upper)`; `None` is unbounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyRange {
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

/// The smallest key after `key` in byte order.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.extend_from_slice(key);
    k.push(0);
    k
}

impl KeyRange {
    /// Any `RangeBounds`, with inclusive ends and exclusive starts turned
    /// into `[lower, upper)` through [`successor`].
    pub(crate) fn from_bounds<K: AsRef<[u8]> + ?Sized>(range: &impl RangeBounds<K>) -> Self {
        let lower = match range.start_bound() {
            Bound::Included(k) => Some(k.as_ref().to_vec()),
            Bound::Excluded(k) => Some(successor(k.as_ref())),
            Bound::Unbounded => None,
        };
        let upper = match range.end_bound() {
            Bound::Included(k) => Some(successor(k.as_ref())),
            Bound::Excluded(k) => Some(k.as_ref().to_vec()),
            Bound::Unbounded => None,
        };
        KeyRange { lower, upper }
    }

    /// The first key in the range, if bounded.
    pub(crate) fn lower(&self) -> Option<&[u8]> {
        self.lower.as_deref()
    }

    /// The first key after the range, if bounded.
    pub(crate) fn upper(&self) -> Option<&[u8]> {
        self.upper.as_deref()
    }

    /// Every key starting with `prefix`: from the prefix up to (excluding)
    /// the first key that does not start with it, if there is one.
    pub(crate) fn prefix(prefix: &[u8]) -> Self {
        let mut upper = prefix.to_vec();
        // Drop trailing 0xff bytes, then increment the last byte: "ab\xff"
        // ends before "ac". All 0xff (or empty): no end.
        while upper.last() == Some(&0xff) {
            upper.pop();
        }
        let upper = match upper.last_mut() {
            Some(last) => {
                *last += 1;
                Some(upper)
            }
            None => None,
        };
        KeyRange {
            lower: Some(prefix.to_vec()),
            upper,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        matches!((&self.lower, &self.upper), (Some(l), Some(u)) if l >= u)
    }

    /// `[lower, upper)` (`None`: unbounded on that side).
    pub(crate) fn new(lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> Self {
        KeyRange { lower, upper }
    }

    /// The part of the range at or before `key`: from the range's start
    /// through `key` itself.
    pub(crate) fn through(&self, key: &[u8]) -> KeyRange {
        KeyRange {
            lower: self.lower.clone(),
            upper: Some(successor(key)),
        }
    }

    /// The part of the range at or after `key`: from `key` itself to the
    /// range's end.
    pub(crate) fn starting_at(&self, key: &[u8]) -> KeyRange {
        KeyRange {
            lower: Some(key.to_vec()),
            upper: self.upper.clone(),
        }
    }

    /// Whether `key` is in the range.
    #[cfg(test)]
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.lower.as_deref().is_none_or(|l| l <= key)
            && self.upper.as_deref().is_none_or(|u| key < u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(lower: Option<&[u8]>, upper: Option<&[u8]>) -> KeyRange {
        KeyRange {
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn bounds_become_half_open_ranges() {
        let a: &[u8] = b"a";
        let c: &[u8] = b"c";
        assert_eq!(KeyRange::from_bounds(&(a..c)), r(Some(b"a"), Some(b"c")));
        assert_eq!(KeyRange::from_bounds(&(a..=c)), r(Some(b"a"), Some(b"c\0")));
        assert_eq!(KeyRange::from_bounds(&(a..)), r(Some(b"a"), None));
        assert_eq!(KeyRange::from_bounds(&(..c)), r(None, Some(b"c")));
        let excluded: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Excluded(a), Bound::Unbounded);
        assert_eq!(
            KeyRange::from_bounds::<&[u8]>(&excluded),
            r(Some(b"a\0"), None)
        );
        assert!(KeyRange::from_bounds(&(c..a)).is_empty());
        assert!(KeyRange::from_bounds(&(a..a)).is_empty());
        assert!(!KeyRange::from_bounds(&(a..=a)).is_empty());
    }

    #[test]
    fn prefixes_end_at_the_next_prefix() {
        assert_eq!(KeyRange::prefix(b"ab"), r(Some(b"ab"), Some(b"ac")));
        assert_eq!(
            KeyRange::prefix(b"a\xff\xff"),
            r(Some(b"a\xff\xff"), Some(b"b"))
        );
        assert_eq!(KeyRange::prefix(b"\xff"), r(Some(b"\xff"), None));
        assert_eq!(KeyRange::prefix(b""), r(Some(b""), None));
    }

    #[test]
    fn the_parts_before_and_after_a_key_include_the_key() {
        let range = r(Some(b"b"), Some(b"f"));
        let head = range.through(b"c");
        assert_eq!(head, r(Some(b"b"), Some(b"c\0")));
        assert!(head.contains(b"c") && !head.contains(b"c\0") && !head.contains(b"a"));
        let tail = range.starting_at(b"c");
        assert_eq!(tail, r(Some(b"c"), Some(b"f")));
        assert!(tail.contains(b"c") && !tail.contains(b"bz") && !tail.contains(b"f"));
        assert!(KeyRange::default().contains(b""));
        assert_eq!(KeyRange::default().through(b"x"), r(None, Some(b"x\0")));
        assert_eq!(KeyRange::default().starting_at(b"x"), r(Some(b"x"), None));
    }
}
