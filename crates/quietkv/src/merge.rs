//! Merging of sorted runs, the compaction drop rules, and the user-facing
//! read iterator.
//!
//! * [`MergingIterator`] merges any number of [`InternalIterator`]s into one
//!   stream in [`compare_internal`] order.
//! * [`DropRules`] decides, entry by entry over such a stream, what a
//!   compaction keeps; [`CompactionIterator`] applies it to an iterator.
//! * [`DbIterator`] turns an internal stream into `(user key, value)` pairs as
//!   seen at one snapshot.

use std::cmp::Ordering;

use crate::cpu_yield::CpuYield;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{
    compare_internal, parse_internal_key, seek_key, user_key, SeqNo, ValueKind, MAX_SEQ,
};

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
/// key; moving back, at its last entry before it. Changing direction
/// repositions the other children around the current key (as LevelDB's
/// merging iterator does), which costs one seek per child.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator + Send>>,
    current: Option<usize>,
    forward: bool,
}

impl MergingIterator {
    pub fn new(children: Vec<Box<dyn InternalIterator + Send>>) -> Self {
        MergingIterator {
            children,
            current: None,
            forward: true,
        }
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
}

/// The compaction drop rules (internal; not a user hook like RocksDB's
/// `CompactionFilter`), applied entry by entry to a stream in
/// internal-key order.
///
/// Snapshots split sequence numbers into stripes: stripe `i` holds the
/// sequences `snapshots[i-1] < seq <= snapshots[i]`, and the last stripe
/// holds everything newer than the newest snapshot (what a reader without a
/// snapshot sees). For each user key, the newest entry of each stripe is
/// the one a reader of that stripe's snapshot sees; every other entry is
/// shadowed and dropped.
///
/// A tombstone is dropped too when the compaction is bottommost (no deeper
/// level holds the key) and it lies in the oldest stripe: then no snapshot
/// can see anything older, and older entries of the key are dropped as
/// shadowed. (A tombstone in a newer stripe is kept even when every older
/// kept entry is also a tombstone; that conservative rule needs no
/// look-ahead.)
#[derive(Debug, Clone)]
pub struct DropRules {
    snapshots: Vec<SeqNo>,
    bottommost: bool,
    current_key: Vec<u8>,
    has_current: bool,
    last_stripe: usize,
    dropped_shadowed: u64,
    dropped_tombstones: u64,
}

impl DropRules {
    /// `snapshots`: live snapshot sequence numbers, in any order.
    pub fn new(snapshots: &[SeqNo], is_bottommost: bool) -> Self {
        let mut snapshots = snapshots.to_vec();
        snapshots.sort_unstable();
        snapshots.dedup();
        DropRules {
            snapshots,
            bottommost: is_bottommost,
            current_key: Vec::new(),
            has_current: false,
            last_stripe: 0,
            dropped_shadowed: 0,
            dropped_tombstones: 0,
        }
    }

    /// Forgets the current user key (for a new, unrelated stream).
    pub fn reset(&mut self) {
        self.has_current = false;
    }

    /// Whether the compaction output keeps the entry with internal key
    /// `ikey`. Must be called for every entry of the stream, in order. A key
    /// that does not parse is corruption.
    pub fn keep(&mut self, ikey: &[u8]) -> Result<bool> {
        let p = parse_internal_key(ikey)?;
        let stripe = self.snapshots.partition_point(|&s| s < p.seq);
        if !self.has_current || p.user_key != self.current_key.as_slice() {
            self.current_key.clear();
            self.current_key.extend_from_slice(p.user_key);
            self.has_current = true;
        } else if stripe == self.last_stripe {
            self.dropped_shadowed += 1;
            return Ok(false);
        }
        self.last_stripe = stripe;
        if p.kind == ValueKind::Delete && self.bottommost && stripe == 0 {
            self.dropped_tombstones += 1;
            return Ok(false);
        }
        Ok(true)
    }

    /// Entries dropped because a newer entry in the same stripe shadows them.
    #[cfg(test)]
    pub fn dropped_shadowed(&self) -> u64 {
        self.dropped_shadowed
    }

    /// Tombstones dropped at the bottom.
    #[cfg(test)]
    pub fn dropped_tombstones(&self) -> u64 {
        self.dropped_tombstones
    }
}

/// Applies a [`DropRules`] to an input stream: yields exactly the
/// entries a compaction writes out, in order. Forward-only (no seek: the
/// drop rules depend on everything before in the stream).
pub struct CompactionIterator<I> {
    input: I,
    rules: DropRules,
    /// Counts every entry passed, written or dropped: a run of dropped
    /// entries (overwrites, tombstones at the bottom) is CPU time too.
    cpu_yield: CpuYield,
}

impl<I: InternalIterator> CompactionIterator<I> {
    pub fn new(input: I, snapshots: &[SeqNo], is_bottommost: bool) -> Self {
        CompactionIterator {
            input,
            rules: DropRules::new(snapshots, is_bottommost),
            cpu_yield: CpuYield::every_micros(0),
        }
    }

    /// Yields the CPU as `y` says while moving over the input.
    pub(crate) fn with_cpu_yield(mut self, y: CpuYield) -> Self {
        self.cpu_yield = y;
        self
    }

    /// How many times it yielded the CPU.
    pub(crate) fn cpu_yields(&self) -> u64 {
        self.cpu_yield.yields()
    }

    fn pass_entry(&mut self) {
        let bytes = self.input.key().len() + self.input.value().len();
        self.cpu_yield.entry(bytes);
    }

    pub fn seek_to_first(&mut self) -> Result<()> {
        self.rules.reset();
        self.input.seek_to_first()?;
        self.skip_dropped()
    }

    pub fn valid(&self) -> bool {
        self.input.valid()
    }

    // Named like `InternalIterator::next` on purpose: same cursor protocol.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        if !self.input.valid() {
            return Ok(());
        }
        self.pass_entry();
        self.input.next()?;
        self.skip_dropped()
    }

    pub fn key(&self) -> &[u8] {
        self.input.key()
    }

    pub fn value(&self) -> &[u8] {
        self.input.value()
    }

    #[cfg(test)]
    pub fn rules(&self) -> &DropRules {
        &self.rules
    }

    fn skip_dropped(&mut self) -> Result<()> {
        while self.input.valid() && !self.rules.keep(self.input.key())? {
            self.pass_entry();
            self.input.next()?;
        }
        Ok(())
    }
}

/// The user's view of an internal stream at one snapshot: for each user key
/// in order, the newest entry with `seq <= snapshot`, if it is a Put;
/// deleted keys and newer versions are skipped. An optional exclusive upper
/// bound ends the iteration early.
pub struct DbIterator<I> {
    inner: I,
    snapshot: SeqNo,
    upper_bound: Option<Vec<u8>>,
    valid: bool,
    /// User key whose remaining (older) entries are being skipped.
    skip_key: Vec<u8>,
}

impl<I: InternalIterator> DbIterator<I> {
    /// `snapshot` is clamped to [`MAX_SEQ`]; use `MAX_SEQ` for "latest".
    pub fn new(inner: I, snapshot: SeqNo, upper_bound: Option<Vec<u8>>) -> Self {
        DbIterator {
            inner,
            snapshot: snapshot.min(MAX_SEQ),
            upper_bound,
            valid: false,
            skip_key: Vec::new(),
        }
    }

    pub fn valid(&self) -> bool {
        self.valid
    }

    pub fn seek_to_first(&mut self) -> Result<()> {
        self.valid = false;
        self.inner.seek_to_first()?;
        self.find_next(false)
    }

    /// Positions at the first visible key `>= user_key`.
    pub fn seek(&mut self, user_key: &[u8]) -> Result<()> {
        self.valid = false;
        if let Some(ub) = &self.upper_bound {
            if user_key >= ub.as_slice() {
                return Ok(());
            }
        }
        self.inner.seek(&seek_key(user_key, self.snapshot))?;
        self.find_next(false)
    }

    // Named like `InternalIterator::next` on purpose: same cursor protocol.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.valid = false;
        self.skip_key.clear();
        self.skip_key.extend_from_slice(user_key(self.inner.key()));
        self.inner.next()?;
        self.find_next(true)
    }

    /// The current user key.
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "key() on invalid DbIterator");
        user_key(self.inner.key())
    }

    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "value() on invalid DbIterator");
        self.inner.value()
    }

    fn find_next(&mut self, mut skipping: bool) -> Result<()> {
        while self.inner.valid() {
            let p = parse_internal_key(self.inner.key())?;
            if let Some(ub) = &self.upper_bound {
                if p.user_key >= ub.as_slice() {
                    return Ok(());
                }
            }
            if p.seq > self.snapshot || (skipping && p.user_key == self.skip_key.as_slice()) {
                self.inner.next()?;
                continue;
            }
            match p.kind {
                ValueKind::Delete => {
                    self.skip_key.clear();
                    self.skip_key.extend_from_slice(p.user_key);
                    skipping = true;
                    self.inner.next()?;
                }
                ValueKind::Put => {
                    self.valid = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// [`DbIterator`] backwards: for each user key in descending order, the
/// newest entry with `seq <= snapshot`, if it is a Put. An optional
/// inclusive lower bound ends the iteration early.
///
/// Moving back, a key's entries arrive oldest first, so the cursor reads
/// all of them (keeping the newest visible one in its own buffers, reused
/// from key to key) and stops on the first entry of the key before; that
/// is where the next step starts.
pub struct DbRevIterator<I> {
    inner: I,
    snapshot: SeqNo,
    lower_bound: Option<Vec<u8>>,
    valid: bool,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl<I: InternalIterator> DbRevIterator<I> {
    /// `snapshot` is clamped to [`MAX_SEQ`]; use `MAX_SEQ` for "latest".
    pub fn new(inner: I, snapshot: SeqNo, lower_bound: Option<Vec<u8>>) -> Self {
        DbRevIterator {
            inner,
            snapshot: snapshot.min(MAX_SEQ),
            lower_bound,
            valid: false,
            key: Vec::new(),
            value: Vec::new(),
        }
    }

    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Positions at the last visible key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.valid = false;
        self.inner.seek_to_last()?;
        self.find_prev()
    }

    /// Positions at the last visible key `< user_key`.
    pub fn seek_before(&mut self, user_key: &[u8]) -> Result<()> {
        self.valid = false;
        // The smallest internal key of `user_key`: everything before it
        // belongs to smaller user keys.
        self.inner.seek_before(&seek_key(user_key, MAX_SEQ))?;
        self.find_prev()
    }

    /// Moves to the previous visible key (invalid past the lower bound).
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.valid = false;
        self.find_prev()
    }

    /// The current user key.
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "key() on invalid DbRevIterator");
        &self.key
    }

    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "value() on invalid DbRevIterator");
        &self.value
    }

    fn find_prev(&mut self) -> Result<()> {
        // Whether `key`/`value` hold a Put that is the newest visible
        // entry of `key` seen so far.
        let mut have_put = false;
        while self.inner.valid() {
            let p = parse_internal_key(self.inner.key())?;
            if let Some(lb) = &self.lower_bound {
                if p.user_key < lb.as_slice() {
                    break;
                }
            }
            if p.seq <= self.snapshot {
                if have_put && p.user_key < self.key.as_slice() {
                    // All of `key`'s entries are read: the Put stands.
                    break;
                }
                match p.kind {
                    ValueKind::Delete => have_put = false,
                    ValueKind::Put => {
                        have_put = true;
                        self.key.clear();
                        self.key.extend_from_slice(p.user_key);
                        self.value.clear();
                        self.value.extend_from_slice(self.inner.value());
                    }
                }
            }
            self.inner.prev()?;
        }
        self.valid = have_put;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::iter::VecIterator;
    use crate::key::{make_internal_key, InternalKey};
    use crate::ErrorKind;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    type Entry = (Vec<u8>, Vec<u8>);

    fn ik(k: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
        make_internal_key(k, seq, kind)
    }

    fn sorted(mut v: Vec<Entry>) -> Vec<Entry> {
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        v
    }

    /// Splits entries among `n` children by the given assignment.
    fn children(
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

    fn drain(it: &mut impl InternalIterator) -> Vec<Entry> {
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

    #[test]
    fn compaction_filter_examples() {
        // a@9 Put, a@7 Del, a@5 Put, a@3 Put, a@1 Del; snapshots 4 and 6.
        let keys = [
            ik(b"a", 9, ValueKind::Put),
            ik(b"a", 7, ValueKind::Delete),
            ik(b"a", 5, ValueKind::Put),
            ik(b"a", 3, ValueKind::Put),
            ik(b"a", 1, ValueKind::Delete),
            ik(b"b", 2, ValueKind::Delete),
        ];
        let run = |snaps: &[SeqNo], bottom: bool| -> Vec<bool> {
            let mut f = DropRules::new(snaps, bottom);
            keys.iter().map(|k| f.keep(k).unwrap()).collect()
        };
        assert_eq!(
            run(&[], false),
            vec![true, false, false, false, false, true]
        );
        assert_eq!(
            run(&[], true),
            vec![true, false, false, false, false, false]
        );
        // Stripes: (6,inf) {9,7}  (4,6] {5}  [0,4] {3,1}
        assert_eq!(
            run(&[6, 4], false),
            vec![true, false, true, true, false, true]
        );
        assert_eq!(
            run(&[4, 6], true),
            vec![true, false, true, true, false, false]
        );
        // Snapshot 8 needs the tombstone at 7 (it hides a@5 from it); the
        // oldest stripe's tombstones go at the bottom.
        assert_eq!(
            run(&[8, 2], true),
            vec![true, true, false, false, false, false]
        );
        assert_eq!(
            run(&[8, 2], false),
            vec![true, true, false, false, true, true]
        );
        let mut f = DropRules::new(&[], true);
        assert!(f.keep(b"short").is_err());
        for k in &keys {
            f.keep(k).unwrap();
        }
        assert_eq!((f.dropped_shadowed(), f.dropped_tombstones()), (4, 1));
    }

    #[test]
    fn db_iterator_examples() {
        let entries = sorted(vec![
            (ik(b"a", 1, ValueKind::Put), b"a1".to_vec()),
            (ik(b"a", 5, ValueKind::Delete), vec![]),
            (ik(b"b", 2, ValueKind::Put), b"b2".to_vec()),
            (ik(b"b", 6, ValueKind::Put), b"b6".to_vec()),
            (ik(b"c", 3, ValueKind::Put), b"c3".to_vec()),
        ]);
        let scan = |snap: SeqNo, ub: Option<&[u8]>| -> Vec<(Vec<u8>, Vec<u8>)> {
            let mut it = DbIterator::new(
                VecIterator::new(entries.clone()),
                snap,
                ub.map(<[u8]>::to_vec),
            );
            it.seek_to_first().unwrap();
            let mut out = Vec::new();
            while it.valid() {
                out.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
            out
        };
        let kv = |k: &str, v: &str| (k.as_bytes().to_vec(), v.as_bytes().to_vec());
        assert_eq!(scan(MAX_SEQ, None), vec![kv("b", "b6"), kv("c", "c3")]);
        assert_eq!(scan(u64::MAX, None), vec![kv("b", "b6"), kv("c", "c3")]);
        assert_eq!(
            scan(4, None),
            vec![kv("a", "a1"), kv("b", "b2"), kv("c", "c3")]
        );
        assert_eq!(scan(4, Some(b"c")), vec![kv("a", "a1"), kv("b", "b2")]);
        assert_eq!(scan(0, None), vec![]);
        let mut it = DbIterator::new(VecIterator::new(entries), 5, Some(b"c".to_vec()));
        it.seek(b"a").unwrap();
        assert_eq!(it.key(), b"b");
        assert_eq!(it.value(), b"b2");
        it.seek(b"c").unwrap();
        assert!(!it.valid());
        it.seek(b"bb").unwrap();
        assert!(!it.valid());
        it.next().unwrap();
    }

    // --- Property tests against models --------------------------------------

    /// Random history: (user key, kind, value), sequence = index + 1.
    fn arb_history() -> impl Strategy<Value = Vec<(Vec<u8>, bool, u8)>> {
        proptest::collection::vec(
            (
                proptest::collection::vec(0u8..3, 0..3),
                proptest::bool::weighted(0.7),
                any::<u8>(),
            ),
            0..60,
        )
    }

    fn history_entries(h: &[(Vec<u8>, bool, u8)]) -> Vec<Entry> {
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

    /// Model read of the whole key space at `snap` from a list of entries.
    fn model_read(entries: &[Entry], snap: SeqNo, ub: Option<&[u8]>) -> BTreeMap<Vec<u8>, Vec<u8>> {
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
            .into_iter()
            .filter(|(_, (_, kind, _))| *kind == ValueKind::Put)
            .map(|(k, (_, _, v))| (k, v))
            .collect()
    }

    fn db_scan(
        entries: &[Entry],
        assign: &[usize],
        n: usize,
        snap: SeqNo,
        ub: Option<&[u8]>,
        from: Option<&[u8]>,
    ) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut m = MergingIterator::new(children(entries, assign, n));
        m.seek_to_first().unwrap();
        let mut it = DbIterator::new(m, snap, ub.map(<[u8]>::to_vec));
        match from {
            Some(k) => it.seek(k).unwrap(),
            None => it.seek_to_first().unwrap(),
        }
        let mut out = BTreeMap::new();
        let mut last: Option<Vec<u8>> = None;
        while it.valid() {
            assert!(last.as_deref() < Some(it.key()), "keys strictly ascending");
            last = Some(it.key().to_vec());
            out.insert(it.key().to_vec(), it.value().to_vec());
            it.next().unwrap();
        }
        out
    }

    /// Scans backwards from before `ub` (or the end) down to `lb`.
    fn db_scan_back(
        entries: &[Entry],
        assign: &[usize],
        n: usize,
        snap: SeqNo,
        ub: Option<&[u8]>,
        lb: Option<&[u8]>,
    ) -> Vec<Entry> {
        let m = MergingIterator::new(children(entries, assign, n));
        let mut it = DbRevIterator::new(m, snap, lb.map(<[u8]>::to_vec));
        match ub {
            Some(k) => it.seek_before(k).unwrap(),
            None => it.seek_to_last().unwrap(),
        }
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().unwrap();
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn db_rev_iterator_matches_model(
            h in arb_history(),
            assign in proptest::collection::vec(any::<usize>(), 60),
            n in 1usize..5,
            snap in 0u64..70,
            ub in proptest::option::of(proptest::collection::vec(0u8..3, 0..3)),
            lb in proptest::option::of(proptest::collection::vec(0u8..3, 0..3)),
        ) {
            let entries = history_entries(&h);
            let snap = if snap >= 65 { MAX_SEQ } else { snap };
            let expect: Vec<Entry> = model_read(&entries, snap, ub.as_deref())
                .into_iter()
                .rev()
                .filter(|(k, _)| match &lb {
                    Some(l) => k >= l,
                    None => true,
                })
                .collect();
            prop_assert_eq!(
                db_scan_back(&entries, &assign, n, snap, ub.as_deref(), lb.as_deref()),
                expect
            );
        }

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

        #[test]
        fn db_iterator_matches_model(
            h in arb_history(),
            assign in proptest::collection::vec(any::<usize>(), 60),
            n in 1usize..5,
            snap in 0u64..70,
            ub in proptest::option::of(proptest::collection::vec(0u8..3, 0..3)),
            from in proptest::collection::vec(0u8..3, 0..3),
        ) {
            let entries = history_entries(&h);
            let snap = if snap >= 65 { MAX_SEQ } else { snap };
            let expect = model_read(&entries, snap, ub.as_deref());
            prop_assert_eq!(db_scan(&entries, &assign, n, snap, ub.as_deref(), None), expect.clone());
            let expect_from: BTreeMap<_, _> = expect.into_iter().filter(|(k, _)| *k >= from).collect();
            prop_assert_eq!(db_scan(&entries, &assign, n, snap, ub.as_deref(), Some(&from)), expect_from);
        }

        #[test]
        fn compaction_filter_matches_model(
            h in arb_history(),
            snaps in proptest::collection::vec(0u64..65, 0..4),
            bottommost in any::<bool>(),
        ) {
            let entries = sorted(history_entries(&h));
            let mut it = CompactionIterator::new(VecIterator::new(entries.clone()), &snaps, bottommost);
            it.seek_to_first().unwrap();
            let mut out = Vec::new();
            while it.valid() {
                out.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }

            // Model: keep the newest entry visible at each read point...
            let mut points: Vec<SeqNo> = snaps.clone();
            points.push(MAX_SEQ);
            let oldest_snapshot = snaps.iter().min().copied();
            let mut by_key: BTreeMap<Vec<u8>, Vec<(SeqNo, ValueKind)>> = BTreeMap::new();
            for (k, _) in &entries {
                let p = parse_internal_key(k).unwrap();
                by_key.entry(p.user_key.to_vec()).or_default().push((p.seq, p.kind));
            }
            let mut expect_keys: Vec<InternalKey> = Vec::new();
            for (k, versions) in &by_key {
                let mut needed: Vec<(SeqNo, ValueKind)> = Vec::new();
                for &r in &points {
                    if let Some(&v) = versions.iter().filter(|(s, _)| *s <= r).max_by_key(|(s, _)| *s) {
                        if !needed.contains(&v) {
                            needed.push(v);
                        }
                    }
                }
                // ...minus tombstones no snapshot can see past, at the bottom.
                for (s, kind) in needed {
                    let droppable = bottommost
                        && kind == ValueKind::Delete
                        && match oldest_snapshot {
                            Some(o) => s <= o,
                            None => true,
                        };
                    if !droppable {
                        expect_keys.push(InternalKey::new(k, s, kind));
                    }
                }
            }
            expect_keys.sort();
            let got_keys: Vec<InternalKey> = out.iter().map(|(k, _)| InternalKey(k.clone())).collect();
            prop_assert_eq!(&got_keys, &expect_keys);

            // And every reader sees the same thing before and after, when
            // nothing lies below; above other levels, tombstones stay exact.
            for &r in &points {
                prop_assert_eq!(model_read(&out, r, None), model_read(&entries, r, None));
            }
            let f = it.rules();
            prop_assert_eq!(
                f.dropped_shadowed() + f.dropped_tombstones() + out.len() as u64,
                entries.len() as u64
            );
        }
    }
}
