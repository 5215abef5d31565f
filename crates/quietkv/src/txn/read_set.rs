//! What a transaction read from its snapshot in one keyspace: the keys of
//! its point reads and the keys its iterators returned, and the key ranges
//! those iterators covered (see `scanned`). Its commit fails if any of the
//! keys, or any key in the ranges, was written since the snapshot.

use std::collections::BTreeSet;

use parking_lot::Mutex;

use super::scanned::Scan;
use crate::db::KeyRange;

/// Shared by the transaction and its iterators, which borrow it while
/// they run (reads take `&Transaction`), hence the lock.
#[derive(Debug, Default)]
pub(crate) struct ReadSet {
    state: Mutex<Reads>,
}

#[derive(Debug, Default)]
struct Reads {
    keys: BTreeSet<Vec<u8>>,
    /// One per iterator made, in the order they were made.
    scans: Vec<Scan>,
}

/// An iterator's place in its read set's scans.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScanId(usize);

impl ReadSet {
    pub(crate) fn record(&self, key: &[u8]) {
        let mut state = self.state.lock();
        if !state.keys.contains(key) {
            state.keys.insert(key.to_vec());
        }
    }

    /// Starts tracking an iterator over `range`; it covers nothing yet.
    pub(crate) fn start_scan(&self, range: KeyRange) -> ScanId {
        let mut state = self.state.lock();
        state.scans.push(Scan::new(range));
        ScanId(state.scans.len() - 1)
    }

    /// Iterator `scan` returned `key` from the front (`forward`) or the
    /// back; a key that came from the snapshot (not the transaction's own
    /// write) also joins the keys read.
    pub(crate) fn returned(&self, scan: ScanId, forward: bool, key: &[u8], from_snapshot: bool) {
        let mut state = self.state.lock();
        state.scans[scan.0].returned(forward, key);
        if from_snapshot && !state.keys.contains(key) {
            state.keys.insert(key.to_vec());
        }
    }

    /// Iterator `scan` ran out: it covered its whole range.
    pub(crate) fn ran_out(&self, scan: ScanId) {
        self.state.lock().scans[scan.0].ran_out();
    }

    /// Number of keys read.
    pub(crate) fn len(&self) -> usize {
        self.state.lock().keys.len()
    }

    /// A copy of the keys read and the covered ranges (for a set an
    /// iterator may still share).
    pub(crate) fn parts(&self) -> (BTreeSet<Vec<u8>>, Vec<KeyRange>) {
        let state = self.state.lock();
        (state.keys.clone(), covered(&state.scans))
    }

    /// The keys read and the covered ranges.
    pub(crate) fn into_parts(self) -> (BTreeSet<Vec<u8>>, Vec<KeyRange>) {
        let state = self.state.into_inner();
        let ranges = covered(&state.scans);
        (state.keys, ranges)
    }
}

/// What the scans covered, merged.
fn covered(scans: &[Scan]) -> Vec<KeyRange> {
    super::scanned::merge(scans.iter().flat_map(Scan::covered).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_kept_once_and_sorted() {
        let reads = ReadSet::default();
        reads.record(b"b");
        reads.record(b"a");
        reads.record(b"b");
        assert_eq!(reads.len(), 2);
        let (keys, ranges) = reads.into_parts();
        let keys: Vec<_> = keys.into_iter().collect();
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(ranges.is_empty());
    }

    #[test]
    fn scans_add_the_snapshot_keys_they_return_and_their_merged_coverage() {
        let reads = ReadSet::default();
        let range = |l: &[u8], u: &[u8]| KeyRange::new(Some(l.to_vec()), Some(u.to_vec()));
        let first = reads.start_scan(range(b"a", b"m"));
        let second = reads.start_scan(range(b"c", b"z"));
        // An iterator made and dropped unused covers nothing.
        reads.start_scan(range(b"x", b"y"));
        reads.returned(first, true, b"b", true);
        reads.returned(first, true, b"d", false);
        reads.ran_out(second);
        let (keys, ranges) = reads.parts();
        assert_eq!(keys.into_iter().collect::<Vec<_>>(), vec![b"b".to_vec()]);
        assert_eq!(ranges, vec![range(b"a", b"z")]);
    }
}
