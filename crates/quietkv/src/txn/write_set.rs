//! A transaction's pending writes: the newest put or delete of each key,
//! sorted, so reads can overlay them on the snapshot and the commit can
//! turn them into one batch.

use std::collections::{btree_map, BTreeMap};
use std::ops::Bound;

use crate::batch::{check_key, check_value, WriteBatch};
use crate::db::KeyRange;
use crate::error::Result;

/// Key to its pending value (`None`: deleted).
#[derive(Debug, Default)]
pub(crate) struct WriteSet {
    entries: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

/// One pending write, borrowed: a key and its value (`None`: deleted).
pub(crate) type Pending<'a> = (&'a Vec<u8>, &'a Option<Vec<u8>>);

/// The pending writes of a key range, in key order.
pub(crate) type PendingRange<'a> =
    std::iter::Flatten<std::option::IntoIter<btree_map::Range<'a, Vec<u8>, Option<Vec<u8>>>>>;

impl WriteSet {
    /// Records a put, replacing any earlier write of the key. The limits
    /// are checked now, so a bad key or value fails where it is written,
    /// not at commit.
    pub(crate) fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(value)?;
        self.entries.insert(key.to_vec(), Some(value.to_vec()));
        Ok(())
    }

    /// Records a delete, replacing any earlier write of the key.
    pub(crate) fn delete(&mut self, key: &[u8]) -> Result<()> {
        check_key(key)?;
        self.entries.insert(key.to_vec(), None);
        Ok(())
    }

    /// The pending write of `key`: `Some(None)` if the transaction
    /// deleted it, `None` if it did not write it.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.entries.get(key).map(Option::as_deref)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.entries.keys()
    }

    /// The pending writes in `range`, in key order (double-ended).
    pub(crate) fn range(&self, range: &KeyRange) -> PendingRange<'_> {
        // `BTreeMap::range` panics on a start after its end; such a range
        // holds nothing.
        let entries = (!range.is_empty()).then(|| {
            let lower = range.lower().map_or(Bound::Unbounded, Bound::Included);
            let upper = range.upper().map_or(Bound::Unbounded, Bound::Excluded);
            self.entries.range::<[u8], _>((lower, upper))
        });
        entries.into_iter().flatten()
    }

    /// Every pending write, in key order.
    pub(crate) fn iter(&self) -> btree_map::Iter<'_, Vec<u8>, Option<Vec<u8>>> {
        self.entries.iter()
    }

    /// Every pending write as one batch, in key order.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the writes together exceed
    /// [`MAX_BATCH_LEN`](crate::MAX_BATCH_LEN).
    pub(crate) fn to_batch(&self) -> Result<WriteBatch> {
        let bytes = self
            .entries
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + 12)
            .sum();
        let mut batch = WriteBatch::with_capacity(bytes);
        for (key, value) in &self.entries {
            match value {
                Some(v) => batch.put(key, v)?,
                None => batch.delete(key)?,
            }
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn keys(ws: &WriteSet, range: KeyRange) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        ws.range(&range)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    #[test]
    fn later_writes_replace_earlier_ones_and_ranges_are_half_open() {
        let mut ws = WriteSet::default();
        ws.put(b"b", b"1").unwrap();
        ws.put(b"a", b"1").unwrap();
        ws.delete(b"b").unwrap();
        ws.put(b"c", b"2").unwrap();
        assert_eq!(ws.get(b"a"), Some(Some(&b"1"[..])));
        assert_eq!(ws.get(b"b"), Some(None));
        assert_eq!(ws.get(b"z"), None);
        assert_eq!(ws.len(), 3);
        let a: &[u8] = b"a";
        let c: &[u8] = b"c";
        assert_eq!(
            keys(&ws, KeyRange::from_bounds(&(a..c))),
            vec![(b"a".to_vec(), Some(b"1".to_vec())), (b"b".to_vec(), None)]
        );
        assert_eq!(
            ws.range(&KeyRange::default()).next_back().unwrap().0,
            &b"c".to_vec()
        );
        // A start after the end is empty, not a panic.
        assert!(keys(&ws, KeyRange::from_bounds(&(c..a))).is_empty());
        assert_eq!(keys(&ws, KeyRange::prefix(b"b")).len(), 1);
    }

    #[test]
    fn limits_are_checked_when_writing() {
        let mut ws = WriteSet::default();
        let long_key = vec![0u8; crate::MAX_KEY_LEN + 1];
        assert_eq!(
            ws.put(&long_key, b"v").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            ws.delete(&long_key).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert!(ws.is_empty());
    }

    #[test]
    fn the_batch_holds_every_pending_write_once() {
        let mut ws = WriteSet::default();
        ws.put(b"x", b"1").unwrap();
        ws.put(b"x", b"2").unwrap();
        ws.delete(b"y").unwrap();
        let batch = ws.to_batch().unwrap();
        let entries: Vec<_> = batch
            .iter()
            .map(|e| (e.kind, e.key.to_vec(), e.value.to_vec()))
            .collect();
        use crate::key::ValueKind;
        assert_eq!(
            entries,
            vec![
                (ValueKind::Put, b"x".to_vec(), b"2".to_vec()),
                (ValueKind::Delete, b"y".to_vec(), Vec::new()),
            ]
        );
    }
}
