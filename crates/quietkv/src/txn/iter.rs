//! Reading through a transaction: its pending writes laid over its
//! snapshot. [`Overlay`] merges the two sorted streams (a pending write
//! replaces the snapshot's value of its key; a pending delete hides it) from
//! either end; [`TxnIter`] is the public iterator, which also records in
//! the transaction's read set the keys the snapshot supplied and the part
//! of its range it covered.

use std::cmp::Ordering;

use super::read_set::{ReadSet, ScanId};
use super::write_set::{Pending, PendingRange};
use std::sync::Arc;

use crate::db::{DbIter, KeyRange};
use crate::error::Result;

/// A double-ended iterator with one item of look-ahead at each end. An
/// item taken from one end but not yet used stays available to the other
/// end once the middle is exhausted, so every item is handed out once.
struct Ends<I: DoubleEndedIterator> {
    inner: I,
    front: Option<I::Item>,
    back: Option<I::Item>,
}

impl<I: DoubleEndedIterator> Ends<I> {
    fn new(inner: I) -> Self {
        Ends {
            inner,
            front: None,
            back: None,
        }
    }

    fn peek_front(&mut self) -> Option<&I::Item> {
        if self.front.is_none() {
            self.front = self.inner.next().or_else(|| self.back.take());
        }
        self.front.as_ref()
    }

    fn peek_back(&mut self) -> Option<&I::Item> {
        if self.back.is_none() {
            self.back = self.inner.next_back().or_else(|| self.front.take());
        }
        self.back.as_ref()
    }

    fn pop_front(&mut self) -> Option<I::Item> {
        self.peek_front();
        self.front.take()
    }

    fn pop_back(&mut self) -> Option<I::Item> {
        self.peek_back();
        self.back.take()
    }
}

/// A key and its value, and whether the snapshot supplied it (`false`:
/// the transaction's own write).
pub(crate) type OverlayItem = (Vec<u8>, Vec<u8>, bool);

/// The merge of a snapshot stream `S` and a pending-write stream `W`, both
/// sorted by key: each key once, the pending write winning, pending
/// deletes skipped. A snapshot error is passed on and ends the iteration.
pub(crate) struct Overlay<S: DoubleEndedIterator, W: DoubleEndedIterator> {
    snapshot: Ends<S>,
    pending: Ends<W>,
    done: bool,
}

/// Which stream the next key comes from.
enum Source {
    Snapshot,
    Pending,
    /// Both hold the key: the pending write wins, the snapshot's is dropped.
    Both,
}

impl<'a, S, W> Overlay<S, W>
where
    S: DoubleEndedIterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    W: DoubleEndedIterator<Item = Pending<'a>>,
{
    pub(crate) fn new(snapshot: S, pending: W) -> Self {
        Overlay {
            snapshot: Ends::new(snapshot),
            pending: Ends::new(pending),
            done: false,
        }
    }

    /// The next item from the front (`forward`) or the back.
    fn step(&mut self, forward: bool) -> Option<Result<OverlayItem>> {
        while !self.done {
            let (snap, pending) = if forward {
                (self.snapshot.peek_front(), self.pending.peek_front())
            } else {
                (self.snapshot.peek_back(), self.pending.peek_back())
            };
            if let Some(Err(_)) = snap {
                self.done = true;
                let err = if forward {
                    self.snapshot.pop_front()
                } else {
                    self.snapshot.pop_back()
                };
                return err.map(|r| r.map(|(k, v)| (k, v, true)));
            }
            let snap_key = snap
                .and_then(|r| r.as_ref().ok())
                .map(|(k, _)| k.as_slice());
            let pending_key = pending.map(|(k, _)| k.as_slice());
            let source = match (snap_key, pending_key) {
                (None, None) => {
                    self.done = true;
                    return None;
                }
                (Some(_), None) => Source::Snapshot,
                (None, Some(_)) => Source::Pending,
                (Some(s), Some(p)) => match (s.cmp(p), forward) {
                    (Ordering::Equal, _) => Source::Both,
                    (Ordering::Less, true) | (Ordering::Greater, false) => Source::Snapshot,
                    _ => Source::Pending,
                },
            };
            if matches!(source, Source::Snapshot) {
                let item = if forward {
                    self.snapshot.pop_front()
                } else {
                    self.snapshot.pop_back()
                };
                return item.map(|r| r.map(|(k, v)| (k, v, true)));
            }
            if matches!(source, Source::Both) {
                if forward {
                    self.snapshot.pop_front();
                } else {
                    self.snapshot.pop_back();
                }
            }
            let pending = if forward {
                self.pending.pop_front()
            } else {
                self.pending.pop_back()
            };
            if let Some((key, Some(value))) = pending {
                return Some(Ok((key.clone(), value.clone(), false)));
            }
            // A pending delete: the key is not there; look further.
        }
        None
    }
}

impl<'a, S, W> Iterator for Overlay<S, W>
where
    S: DoubleEndedIterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    W: DoubleEndedIterator<Item = Pending<'a>>,
{
    type Item = Result<OverlayItem>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

impl<'a, S, W> DoubleEndedIterator for Overlay<S, W>
where
    S: DoubleEndedIterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    W: DoubleEndedIterator<Item = Pending<'a>>,
{
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

/// Ordered `(key, value)` pairs as a [`Transaction`](super::Transaction)
/// sees them: its snapshot with its own puts and deletes laid over, from
/// [`Transaction::iter`](super::Transaction::iter),
/// [`range`](super::Transaction::range) or
/// [`prefix`](super::Transaction::prefix).
///
/// Double-ended like [`DbIter`]: `rev()` walks backwards, and `next` and
/// `next_back` can be mixed. Every key it returns from the snapshot joins
/// the transaction's read set, and so does the part of its range it
/// covered: from the start of the range through the last key `next`
/// returned, and from the last key `next_back` returned to the end of the
/// range, or the whole range once it returned `None`. The commit fails if
/// any of those keys, or any key in that part of the range, was written
/// since the transaction began; a key beyond where the iterator stopped is
/// not covered. It borrows the transaction, so the transaction cannot write
/// while it exists. A read error is yielded as an `Err` item, after which
/// the iterator ends (covering only what it returned before).
pub struct TxnIter<'a> {
    merged: Overlay<DbIter, PendingRange<'a>>,
    reads: Reads<'a>,
    /// This iterator's entry in the read set's scans.
    scan: ScanId,
    /// A read error ended the iteration: the `None`s after it do not mean
    /// the range was read to its end.
    failed: bool,
}

/// The read set an iterator records into: the default keyspace's, or
/// another keyspace's (kept in a map the transaction can grow while the
/// iterator runs).
enum Reads<'a> {
    Borrowed(&'a ReadSet),
    Shared(Arc<ReadSet>),
}

impl Reads<'_> {
    fn set(&self) -> &ReadSet {
        match self {
            Reads::Borrowed(r) => r,
            Reads::Shared(r) => r,
        }
    }
}

impl<'a> TxnIter<'a> {
    /// An iterator over `range` of the default keyspace.
    pub(crate) fn new(
        snapshot: DbIter,
        pending: PendingRange<'a>,
        reads: &'a ReadSet,
        range: KeyRange,
    ) -> Self {
        Self::with_reads(snapshot, pending, Reads::Borrowed(reads), range)
    }

    /// An iterator over `range` of another keyspace than the default one.
    pub(crate) fn new_shared(
        snapshot: DbIter,
        pending: PendingRange<'a>,
        reads: Arc<ReadSet>,
        range: KeyRange,
    ) -> Self {
        Self::with_reads(snapshot, pending, Reads::Shared(reads), range)
    }

    fn with_reads(
        snapshot: DbIter,
        pending: PendingRange<'a>,
        reads: Reads<'a>,
        range: KeyRange,
    ) -> Self {
        let scan = reads.set().start_scan(range);
        TxnIter {
            merged: Overlay::new(snapshot, pending),
            reads,
            scan,
            failed: false,
        }
    }

    /// Records what the step from the front (`forward`) or the back
    /// yielded, and hands it on.
    fn record(
        &mut self,
        forward: bool,
        item: Option<Result<OverlayItem>>,
    ) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        match item {
            None => {
                if !self.failed {
                    self.reads.set().ran_out(self.scan);
                }
                None
            }
            Some(Err(e)) => {
                self.failed = true;
                Some(Err(e))
            }
            Some(Ok((key, value, from_snapshot))) => {
                self.reads
                    .set()
                    .returned(self.scan, forward, &key, from_snapshot);
                Some(Ok((key, value)))
            }
        }
    }
}

impl Iterator for TxnIter<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.merged.next();
        self.record(true, item)
    }
}

impl DoubleEndedIterator for TxnIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let item = self.merged.next_back();
        self.record(false, item)
    }
}

impl std::iter::FusedIterator for TxnIter<'_> {}

impl std::fmt::Debug for TxnIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnIter").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::error::Error;

    type Snap = std::vec::IntoIter<Result<(Vec<u8>, Vec<u8>)>>;

    fn snap(pairs: &BTreeMap<Vec<u8>, Vec<u8>>) -> Snap {
        pairs
            .iter()
            .map(|(k, v)| Ok((k.clone(), v.clone())))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn pending_writes_replace_and_hide_snapshot_keys() {
        let base: BTreeMap<_, _> = [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")]
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        let pending: BTreeMap<Vec<u8>, Option<Vec<u8>>> = [
            (b"b".to_vec(), None),
            (b"c".to_vec(), Some(b"2".to_vec())),
            (b"d".to_vec(), Some(b"2".to_vec())),
        ]
        .into_iter()
        .collect();
        let got: Vec<_> = Overlay::new(snap(&base), pending.iter())
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), b"1".to_vec(), true),
                (b"c".to_vec(), b"2".to_vec(), false),
                (b"d".to_vec(), b"2".to_vec(), false),
            ]
        );
        let back: Vec<_> = Overlay::new(snap(&base), pending.iter())
            .rev()
            .map(|r| r.unwrap().0)
            .collect();
        assert_eq!(back, vec![b"d".to_vec(), b"c".to_vec(), b"a".to_vec()]);
    }

    #[test]
    fn a_snapshot_error_is_passed_on_and_ends_the_iteration() {
        let items: Vec<Result<(Vec<u8>, Vec<u8>)>> = vec![
            Ok((b"a".to_vec(), b"1".to_vec())),
            Err(Error::corruption("bad block")),
        ];
        let pending: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            [(b"z".to_vec(), Some(b"2".to_vec()))].into_iter().collect();
        let mut it = Overlay::new(items.into_iter(), pending.iter());
        assert!(it.next().unwrap().is_ok());
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
        assert!(it.next_back().is_none());
    }

    proptest! {
        /// Any mix of `next` and `next_back` yields the model's keys once
        /// each: the front ones ascending, the back ones descending.
        #[test]
        fn overlay_matches_a_model_from_both_ends(
            base in proptest::collection::btree_map(0u8..40, any::<u8>(), 0..30),
            pending in proptest::collection::btree_map(0u8..40, proptest::option::of(any::<u8>()), 0..30),
            steps in proptest::collection::vec(any::<bool>(), 0..80),
        ) {
            let base: BTreeMap<Vec<u8>, Vec<u8>> =
                base.into_iter().map(|(k, v)| (vec![k], vec![v])).collect();
            let pending: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
                pending.into_iter().map(|(k, v)| (vec![k], v.map(|v| vec![v]))).collect();
            let mut model = base.clone();
            for (k, v) in &pending {
                match v {
                    Some(v) => model.insert(k.clone(), v.clone()),
                    None => model.remove(k),
                };
            }
            let mut expected: std::collections::VecDeque<_> = model.into_iter().collect();
            let mut it = Overlay::new(snap(&base), pending.iter());
            for forward in steps.into_iter().chain(std::iter::repeat_n(true, 80)) {
                let want = if forward { expected.pop_front() } else { expected.pop_back() };
                let got = if forward { it.next() } else { it.next_back() };
                let got = got.map(|r| r.unwrap());
                prop_assert_eq!(got.as_ref().map(|(k, v, _)| (k.clone(), v.clone())), want.clone());
                if let Some((k, _, from_snapshot)) = got {
                    prop_assert_eq!(from_snapshot, !pending.contains_key(&k));
                }
            }
        }
    }
}
