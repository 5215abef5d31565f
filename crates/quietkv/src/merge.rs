//! Merging of sorted runs: [`MergingIterator`] merges any number of
//! [`InternalIterator`]s into one stream in [`compare_internal`] order. User
//! reads merge memtables and tables with it, compaction merges its input
//! tables with it, and repair merges salvaged tables with it.

use std::cmp::Ordering;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_internal, seek_key, user_key, SeqNo, MAX_SEQ};

/// Merges children into one stream in internal-key order, both ways.
///
/// Selection is a linear scan for the minimum (maximum when moving back),
/// which beats a heap for the handful of children (memtables + L0 files +
/// one per level) a read has. If two children are positioned on equal
/// internal keys (only possible with corrupted input, since sequence
/// numbers are unique), both entries are yielded, the child with the lower
/// index first when moving forward; pass children newest source first so
/// the newer one wins wherever a consumer keeps only the first.
///
/// Moving forward, every child is at its first entry after the current
/// key; moving back, at its last entry before it; except that a child that
/// jumped over keys a range tombstone deletes
/// ([`skip_deleted_forward`](InternalIterator::skip_deleted_forward))
/// stands further on, past entries no reader would see. Changing direction
/// repositions the other children around the current key (as LevelDB's
/// merging iterator does), which costs one seek per child and brings a
/// jumped child back next to the current key.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator + Send>>,
    /// For each child, a sequence number no entry of it is newer than
    /// ([`MAX_SEQ`] where unknown); see
    /// [`with_newest_seqs`](Self::with_newest_seqs).
    newest: Vec<SeqNo>,
    current: Option<usize>,
    forward: bool,
}

impl MergingIterator {
    pub fn new(children: Vec<Box<dyn InternalIterator + Send>>) -> Self {
        MergingIterator {
            newest: vec![MAX_SEQ; children.len()],
            children,
            current: None,
            forward: true,
        }
    }

    /// Says how new each child's entries are at most (one per child, in
    /// order), so that inside a range tombstone the children older than it
    /// can jump over the keys it deletes
    /// ([`skip_deleted_forward`](InternalIterator::skip_deleted_forward)).
    /// A bound too low would hide live entries: it must hold for every
    /// entry a reader can see.
    pub fn with_newest_seqs(mut self, newest: Vec<SeqNo>) -> Self {
        assert_eq!(newest.len(), self.children.len(), "one bound per child");
        self.newest = newest;
        self
    }

    /// Moves every child whose entries are all older than `seq` and that
    /// stands inside the deleted keys (`inside` its current user key)
    /// with `jump`; then picks the current child again if any moved.
    fn skip_deleted(
        &mut self,
        forward: bool,
        seq: SeqNo,
        inside: impl Fn(&[u8]) -> bool,
        mut jump: impl FnMut(&mut (dyn InternalIterator + Send)) -> Result<()>,
    ) -> Result<bool> {
        if self.current.is_none() || self.forward != forward {
            return Ok(false);
        }
        let mut moved = false;
        for (c, &newest) in self.children.iter_mut().zip(&self.newest) {
            if newest < seq && c.valid() && inside(user_key(c.key())) {
                if let Err(e) = jump(c.as_mut()) {
                    self.current = None;
                    return Err(e);
                }
                moved = true;
            }
        }
        if moved {
            self.pick(forward);
        }
        Ok(moved)
    }

    /// Picks the child with the smallest key (`forward`) or the largest.
    fn pick(&mut self, forward: bool) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                Some(b) => {
                    let ord = compare_internal(c.key(), self.children[b].key());
                    let better = if forward {
                        ord == Ordering::Less
                    } else {
                        ord != Ordering::Less
                    };
                    Some(if better { i } else { b })
                }
                None => Some(i),
            };
        }
        self.current = best;
        self.forward = forward;
    }

    /// Runs `f` on every child, then picks the current one; on the first
    /// error the iterator becomes invalid and the error is returned.
    fn position_all(
        &mut self,
        forward: bool,
        mut f: impl FnMut(&mut (dyn InternalIterator + Send)) -> Result<()>,
    ) -> Result<()> {
        self.current = None;
        for c in &mut self.children {
            f(c.as_mut())?;
        }
        self.pick(forward);
        Ok(())
    }

    /// Puts every child but the current one on the `forward` side of the
    /// current key. The key is copied once per change of direction.
    fn turn(&mut self, current: usize, forward: bool) -> Result<()> {
        let key = self.children[current].key().to_vec();
        for (i, c) in self.children.iter_mut().enumerate() {
            if i == current {
                continue;
            }
            let r = if forward {
                c.seek(&key).and_then(|_| {
                    if c.valid() && compare_internal(c.key(), &key) == Ordering::Equal {
                        c.next()
                    } else {
                        Ok(())
                    }
                })
            } else {
                c.seek_before(&key)
            };
            if let Err(e) = r {
                self.current = None;
                return Err(e);
            }
        }
        self.forward = forward;
        Ok(())
    }

    /// Moves the current child one step and picks the next current one.
    fn step(&mut self, forward: bool) -> Result<()> {
        let Some(i) = self.current else {
            return Ok(());
        };
        if self.forward != forward {
            self.turn(i, forward)?;
        }
        let c = &mut self.children[i];
        if let Err(e) = if forward { c.next() } else { c.prev() } {
            self.current = None;
            return Err(e);
        }
        self.pick(forward);
        Ok(())
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.position_all(true, |c| c.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.position_all(false, |c| c.seek_to_last())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.position_all(true, |c| c.seek(target))
    }

    fn seek_before(&mut self, target: &[u8]) -> Result<()> {
        self.position_all(false, |c| c.seek_before(target))
    }

    fn next(&mut self) -> Result<()> {
        self.step(true)
    }

    fn prev(&mut self) -> Result<()> {
        self.step(false)
    }

    fn key(&self) -> &[u8] {
        self.children[self.current.expect("key() on invalid MergingIterator")].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.current.expect("value() on invalid MergingIterator")].value()
    }

    fn skip_deleted_forward(&mut self, end: &[u8], seq: SeqNo) -> Result<bool> {
        // The first entry of `end`: every entry before it is of a smaller
        // user key.
        let target = seek_key(end, MAX_SEQ);
        self.skip_deleted(true, seq, |k| k < end, |c| c.seek(&target))
    }

    fn skip_deleted_backward(&mut self, begin: &[u8], seq: SeqNo) -> Result<bool> {
        let target = seek_key(begin, MAX_SEQ);
        self.skip_deleted(false, seq, |k| k >= begin, |c| c.seek_before(&target))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Sorted test streams and a model reader, shared with the tests of the
    //! compaction drop rules and of the user iterators.

    use super::*;
    use crate::error::Error;
    use crate::iter::VecIterator;
    use crate::key::{make_internal_key, parse_internal_key, seek_key, SeqNo, ValueKind};
    use crate::ErrorKind;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    pub(crate) type Entry = (Vec<u8>, Vec<u8>);

    pub(crate) fn ik(k: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
        make_internal_key(k, seq, kind)
    }

    pub(crate) fn sorted(mut v: Vec<Entry>) -> Vec<Entry> {
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        v
    }

    /// Splits entries among `n` children by the given assignment.
    pub(crate) fn children(
        entries: &[Entry],
        assign: &[usize],
        n: usize,
    ) -> Vec<Box<dyn InternalIterator + Send>> {
        let mut parts: Vec<Vec<Entry>> = vec![Vec::new(); n.max(1)];
        for (i, e) in entries.iter().enumerate() {
            parts[assign.get(i).copied().unwrap_or(0) % n.max(1)].push(e.clone());
        }
        parts
            .into_iter()
            .map(|p| Box::new(VecIterator::new(sorted(p))) as Box<dyn InternalIterator + Send>)
            .collect()
    }

    pub(crate) fn drain(it: &mut impl InternalIterator) -> Vec<Entry> {
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        out
    }

    /// A child that fails after yielding `ok` entries.
    struct Failing {
        inner: VecIterator,
        left: usize,
    }

    impl InternalIterator for Failing {
        fn valid(&self) -> bool {
            self.inner.valid()
        }
        fn seek_to_first(&mut self) -> Result<()> {
            self.inner.seek_to_first()
        }
        fn seek(&mut self, t: &[u8]) -> Result<()> {
            self.inner.seek(t)
        }
        fn seek_to_last(&mut self) -> Result<()> {
            self.inner.seek_to_last()
        }
        fn prev(&mut self) -> Result<()> {
            self.inner.prev()
        }
        fn next(&mut self) -> Result<()> {
            if self.left == 0 {
                return Err(Error::corruption("bad block"));
            }
            self.left -= 1;
            self.inner.next()
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
    }

    #[test]
    fn merging_basics_and_errors() {
        let a = vec![
            (ik(b"a", 2, ValueKind::Put), b"1".to_vec()),
            (ik(b"c", 1, ValueKind::Put), b"2".to_vec()),
        ];
        let b = vec![
            (ik(b"a", 3, ValueKind::Delete), vec![]),
            (ik(b"b", 1, ValueKind::Put), b"3".to_vec()),
        ];
        let dup = vec![(ik(b"b", 1, ValueKind::Put), b"dup".to_vec())];
        let mut m = MergingIterator::new(vec![
            Box::new(VecIterator::new(a.clone())),
            Box::new(VecIterator::new(b.clone())),
            Box::new(VecIterator::new(dup)),
            Box::new(VecIterator::new(vec![])),
        ]);
        assert!(!m.valid());
        m.seek_to_first().unwrap();
        let got: Vec<Vec<u8>> = drain(&mut m).into_iter().map(|e| e.1).collect();
        // Equal keys: lower child index first.
        assert_eq!(
            got,
            vec![
                vec![],
                b"1".to_vec(),
                b"3".to_vec(),
                b"dup".to_vec(),
                b"2".to_vec()
            ]
        );
        m.next().unwrap(); // no-op when invalid
        m.seek(&seek_key(b"a", 2)).unwrap();
        assert_eq!(m.value(), b"1");
        assert!(MergingIterator::new(vec![]).seek_to_first().is_ok());

        let mut m = MergingIterator::new(vec![
            Box::new(VecIterator::new(a)),
            Box::new(Failing {
                inner: VecIterator::new(b),
                left: 0,
            }),
        ]);
        m.seek_to_first().unwrap();
        assert_eq!(m.key(), ik(b"a", 3, ValueKind::Delete).as_slice());
        let err = m.next().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corruption);
        assert!(!m.valid());
    }

    // --- Property tests against models --------------------------------------

    /// Random history: (user key, kind, value), sequence = index + 1.
    pub(crate) fn arb_history() -> impl Strategy<Value = Vec<(Vec<u8>, bool, u8)>> {
        proptest::collection::vec(
            (
                proptest::collection::vec(0u8..3, 0..3),
                proptest::bool::weighted(0.7),
                any::<u8>(),
            ),
            0..60,
        )
    }

    pub(crate) fn history_entries(h: &[(Vec<u8>, bool, u8)]) -> Vec<Entry> {
        h.iter()
            .enumerate()
            .map(|(i, (k, put, v))| {
                let kind = if *put {
                    ValueKind::Put
                } else {
                    ValueKind::Delete
                };
                let val = if *put { vec![*v, i as u8] } else { vec![] };
                (ik(k, i as u64 + 1, kind), val)
            })
            .collect()
    }

    /// For each user key below `ub`, its newest entry at or below `snap`
    /// (sequence number, kind, value), whatever its kind: what a model
    /// reader starts from before it applies deletes.
    pub(crate) fn model_newest(
        entries: &[Entry],
        snap: SeqNo,
        ub: Option<&[u8]>,
    ) -> BTreeMap<Vec<u8>, (SeqNo, ValueKind, Vec<u8>)> {
        let mut newest: BTreeMap<Vec<u8>, (SeqNo, ValueKind, Vec<u8>)> = BTreeMap::new();
        for (k, v) in entries {
            let p = parse_internal_key(k).unwrap();
            if p.seq > snap || matches!(ub, Some(u) if p.user_key >= u) {
                continue;
            }
            let e = newest
                .entry(p.user_key.to_vec())
                .or_insert((p.seq, p.kind, v.clone()));
            if p.seq > e.0 {
                *e = (p.seq, p.kind, v.clone());
            }
        }
        newest
    }

    /// Model read of the whole key space at `snap` from a list of entries.
    pub(crate) fn model_read(
        entries: &[Entry],
        snap: SeqNo,
        ub: Option<&[u8]>,
    ) -> BTreeMap<Vec<u8>, Vec<u8>> {
        model_newest(entries, snap, ub)
            .into_iter()
            .filter(|(_, (_, kind, _))| *kind == ValueKind::Put)
            .map(|(k, (_, _, v))| (k, v))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn merging_equals_sorted_union(
            h in arb_history(),
            assign in proptest::collection::vec(any::<usize>(), 60),
            n in 1usize..6,
            target in (proptest::collection::vec(0u8..3, 0..3), 0u64..70),
        ) {
            let entries = history_entries(&h);
            let mut m = MergingIterator::new(children(&entries, &assign, n));
            m.seek_to_first().unwrap();
            let all = sorted(entries.clone());
            prop_assert_eq!(drain(&mut m), all.clone());
            let t = seek_key(&target.0, target.1);
            m.seek(&t).unwrap();
            let expect: Vec<Entry> = all
                .into_iter()
                .filter(|(k, _)| compare_internal(k, &t) != Ordering::Less)
                .collect();
            prop_assert_eq!(drain(&mut m), expect);
        }

        /// Backward, from the end or before any key, and with the direction
        /// changed at every step of a random walk, the merge sees exactly
        /// the sorted union.
        #[test]
        fn merging_backward_and_turning_match_sorted_union(
            h in arb_history(),
            assign in proptest::collection::vec(any::<usize>(), 60),
            n in 1usize..6,
            target in (proptest::collection::vec(0u8..3, 0..3), 0u64..70),
            walk in proptest::collection::vec(any::<bool>(), 0..40),
        ) {
            let entries = history_entries(&h);
            let all = sorted(entries.clone());
            let mut m = MergingIterator::new(children(&entries, &assign, n));
            m.seek_to_last().unwrap();
            let mut back = Vec::new();
            while m.valid() {
                back.push((m.key().to_vec(), m.value().to_vec()));
                m.prev().unwrap();
            }
            back.reverse();
            prop_assert_eq!(&back, &all);

            let t = seek_key(&target.0, target.1);
            m.seek_before(&t).unwrap();
            let before = all.iter().rposition(|(k, _)| compare_internal(k, &t) == Ordering::Less);
            prop_assert_eq!(m.valid(), before.is_some());
            if let Some(mut pos) = before {
                prop_assert_eq!(m.key(), &all[pos].0[..]);
                for forward in walk {
                    if forward {
                        m.next().unwrap();
                        pos += 1;
                    } else {
                        m.prev().unwrap();
                        if pos == 0 {
                            prop_assert!(!m.valid());
                            break;
                        }
                        pos -= 1;
                    }
                    if pos == all.len() {
                        prop_assert!(!m.valid());
                        break;
                    }
                    prop_assert_eq!(m.key(), &all[pos].0[..]);
                }
            }
        }
    }
}
