//! The keys a transaction read from its snapshot: point reads, and the
//! keys its iterators returned. Its commit fails if any of them was
//! written since the snapshot.

use std::collections::BTreeSet;

use parking_lot::Mutex;

/// Shared by the transaction and its iterators, which borrow it while
/// they run (reads take `&Transaction`), hence the lock.
#[derive(Debug, Default)]
pub(crate) struct ReadSet {
    keys: Mutex<BTreeSet<Vec<u8>>>,
}

impl ReadSet {
    pub(crate) fn record(&self, key: &[u8]) {
        let mut keys = self.keys.lock();
        if !keys.contains(key) {
            keys.insert(key.to_vec());
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.lock().len()
    }

    /// A copy of the keys (for a set an iterator may still share).
    pub(crate) fn keys(&self) -> BTreeSet<Vec<u8>> {
        self.keys.lock().clone()
    }

    pub(crate) fn into_keys(self) -> BTreeSet<Vec<u8>> {
        self.keys.into_inner()
    }
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
        let keys: Vec<_> = reads.into_keys().into_iter().collect();
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
    }
}
