//! What a reader at one snapshot sees of an internal stream (memtables and
//! tables merged): for each user key, the newest entry at or below the
//! snapshot, if it is a Put. [`DbIterator`] walks the keys forward,
//! [`DbRevIterator`] backward; [`DbIter`](super::DbIter) drives one of each.

use std::sync::Arc;

use crate::compaction::CompactionFilter;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, seek_key, user_key, SeqNo, ValueKind, MAX_SEQ};
use crate::range_tombstone::{Fragment, FragmentSet};

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
    /// Values it says to hide read as deletes.
    hide: Option<Arc<dyn CompactionFilter>>,
    /// Range tombstones visible at the snapshot; a Put they cover reads as
    /// a delete.
    range_dels: Option<Arc<FragmentSet>>,
    /// Deleted entries stepped through before a jump ([`JUMP_AFTER`]).
    jump_after: u32,
}

/// Deleted entries a scan steps through, between two keys it yields,
/// before the sources older than the range tombstone deleting them jump
/// past it. A jump seeks every such source, dearer than a step, so a
/// tombstone over a few keys is stepped through; past this many, the
/// deleted range is likely long and jumping pays.
const JUMP_AFTER: u32 = 8;

/// The kind of a point entry; a range tombstone among point entries is
/// damage. (A Put a range tombstone deletes is found before, by
/// [`deleting_fragment`].)
fn point_kind(kind: ValueKind) -> Result<ValueKind> {
    match kind {
        ValueKind::RangeDelete => Err(Error::corruption(
            "a range tombstone appears among point entries",
        )),
        k => Ok(k),
    }
}

/// The range-tombstone fragment that deletes a Put, if one does.
fn deleting_fragment<'a>(
    kind: ValueKind,
    user_key: &[u8],
    seq: SeqNo,
    range_dels: &'a Option<Arc<FragmentSet>>,
) -> Option<Fragment<'a>> {
    if kind != ValueKind::Put {
        return None;
    }
    range_dels
        .as_deref()?
        .covering(user_key)
        .filter(|f| f.seq > seq)
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
            hide: None,
            range_dels: None,
            jump_after: JUMP_AFTER,
        }
    }

    /// Reads Puts that `range_dels` covers as deletes (`None` or an empty
    /// set: no range tombstone to honour, no cost).
    pub(crate) fn with_range_dels(mut self, range_dels: Option<Arc<FragmentSet>>) -> Self {
        self.range_dels = range_dels.filter(|r| !r.is_empty());
        self
    }

    /// Treats a newest value `hide` hides as a delete.
    pub(crate) fn hiding(mut self, hide: Option<Arc<dyn CompactionFilter>>) -> Self {
        self.hide = hide;
        self
    }

    /// Jumps after `n` deleted entries instead of [`JUMP_AFTER`].
    #[cfg(test)]
    fn jumping_after(mut self, n: u32) -> Self {
        self.jump_after = n;
        self
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
        // Deleted entries stepped through since the last jump.
        let mut stepped = 0;
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
            if let Some(f) = deleting_fragment(p.kind, p.user_key, p.seq, &self.range_dels) {
                // Deleted by a range tombstone: so is every older entry up
                // to the fragment's end; past a few, the sources that hold
                // nothing newer jump there at once.
                self.skip_key.clear();
                self.skip_key.extend_from_slice(p.user_key);
                skipping = true;
                stepped += 1;
                if stepped >= self.jump_after {
                    stepped = 0;
                    if self.inner.skip_deleted_forward(f.end, f.seq)? {
                        continue;
                    }
                }
                self.inner.next()?;
                continue;
            }
            match point_kind(p.kind)? {
                ValueKind::Delete | ValueKind::RangeDelete => {
                    self.skip_key.clear();
                    self.skip_key.extend_from_slice(p.user_key);
                    skipping = true;
                    self.inner.next()?;
                }
                ValueKind::Put => {
                    if self
                        .hide
                        .as_ref()
                        .is_some_and(|h| h.hides(p.user_key, self.inner.value()))
                    {
                        self.skip_key.clear();
                        self.skip_key.extend_from_slice(p.user_key);
                        skipping = true;
                        self.inner.next()?;
                        continue;
                    }
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
    /// Values it says to hide read as deletes.
    hide: Option<Arc<dyn CompactionFilter>>,
    /// Range tombstones visible at the snapshot; a Put they cover reads as
    /// a delete.
    range_dels: Option<Arc<FragmentSet>>,
    /// Deleted entries stepped through before a jump ([`JUMP_AFTER`]).
    jump_after: u32,
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
            hide: None,
            range_dels: None,
            jump_after: JUMP_AFTER,
        }
    }

    /// Reads Puts that `range_dels` covers as deletes (`None` or an empty
    /// set: no range tombstone to honour, no cost).
    pub(crate) fn with_range_dels(mut self, range_dels: Option<Arc<FragmentSet>>) -> Self {
        self.range_dels = range_dels.filter(|r| !r.is_empty());
        self
    }

    /// Treats a newest value `hide` hides as a delete.
    pub(crate) fn hiding(mut self, hide: Option<Arc<dyn CompactionFilter>>) -> Self {
        self.hide = hide;
        self
    }

    /// Jumps after `n` deleted entries instead of [`JUMP_AFTER`].
    #[cfg(test)]
    fn jumping_after(mut self, n: u32) -> Self {
        self.jump_after = n;
        self
    }

    fn hidden(&self) -> bool {
        self.hide
            .as_ref()
            .is_some_and(|h| h.hides(&self.key, &self.value))
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
        // Deleted entries stepped through since the last jump.
        let mut stepped = 0;
        while self.inner.valid() {
            let p = parse_internal_key(self.inner.key())?;
            if let Some(lb) = &self.lower_bound {
                if p.user_key < lb.as_slice() {
                    break;
                }
            }
            if p.seq <= self.snapshot {
                if have_put && p.user_key < self.key.as_slice() {
                    // All of `key`'s entries are read: the Put stands,
                    // unless it is hidden; then this entry starts the
                    // next key (the match below resets `have_put`).
                    if !self.hidden() {
                        break;
                    }
                }
                if let Some(f) = deleting_fragment(p.kind, p.user_key, p.seq, &self.range_dels) {
                    // As moving forward: the older sources jump below the
                    // fragment's start.
                    have_put = false;
                    stepped += 1;
                    if stepped >= self.jump_after {
                        stepped = 0;
                        if self.inner.skip_deleted_backward(f.begin, f.seq)? {
                            continue;
                        }
                    }
                    self.inner.prev()?;
                    continue;
                }
                match point_kind(p.kind)? {
                    ValueKind::Delete | ValueKind::RangeDelete => have_put = false,
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
        self.valid = have_put && !self.hidden();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIterator;
    use crate::key::{ValueKind, MAX_SEQ};
    use crate::merge::tests::{
        arb_history, children, history_entries, ik, model_newest, model_read, sorted, Entry,
    };
    use crate::merge::MergingIterator;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

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

    #[test]
    fn range_tombstones_hide_older_puts_both_ways() {
        use crate::range_tombstone::{FragmentSet, RangeTombstone};
        let entries = sorted(vec![
            (ik(b"a", 1, ValueKind::Put), b"a1".to_vec()),
            (ik(b"b", 2, ValueKind::Put), b"b2".to_vec()),
            (ik(b"b", 7, ValueKind::Put), b"b7".to_vec()),
            (ik(b"c", 3, ValueKind::Put), b"c3".to_vec()),
            (ik(b"d", 4, ValueKind::Put), b"d4".to_vec()),
        ]);
        // [b, d) at 5: hides b2 (b7 is newer: b reads b7) and c3.
        let ts = [RangeTombstone::new(b"b", b"d", 5)];
        let fwd = |snap: SeqNo, from: &[u8]| {
            let set = Some(Arc::new(FragmentSet::new(&ts, snap)));
            let mut it =
                DbIterator::new(VecIterator::new(entries.clone()), snap, None).with_range_dels(set);
            it.seek(from).unwrap();
            let mut out = Vec::new();
            while it.valid() {
                out.push(it.value().to_vec());
                it.next().unwrap();
            }
            out
        };
        let back = |snap: SeqNo| {
            let set = Some(Arc::new(FragmentSet::new(&ts, snap)));
            let mut it = DbRevIterator::new(VecIterator::new(entries.clone()), snap, None)
                .with_range_dels(set);
            it.seek_to_last().unwrap();
            let mut out = Vec::new();
            while it.valid() {
                out.push(it.value().to_vec());
                it.prev().unwrap();
            }
            out
        };
        let v = |s: &[&str]| s.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
        assert_eq!(fwd(MAX_SEQ, b""), v(&["a1", "b7", "d4"]));
        assert_eq!(fwd(MAX_SEQ, b"c"), v(&["d4"]));
        assert_eq!(back(MAX_SEQ), v(&["d4", "b7", "a1"]));
        // Between the tombstone and b7: b is deleted.
        assert_eq!(fwd(6, b""), v(&["a1", "d4"]));
        assert_eq!(back(6), v(&["d4", "a1"]));
        // Before the tombstone: everything it would hide is there.
        assert_eq!(fwd(4, b""), v(&["a1", "b2", "c3", "d4"]));
        assert_eq!(back(4), v(&["d4", "c3", "b2", "a1"]));
    }

    // --- Property tests against models --------------------------------------

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

    /// A merge of `entries` split among `n` children that each know their
    /// newest sequence number (or, where `known` says not, do not).
    fn merge_knowing_newest(
        entries: &[Entry],
        assign: &[usize],
        n: usize,
        known: &[bool],
    ) -> MergingIterator {
        let mut newest = vec![0; n];
        for (i, (k, _)) in entries.iter().enumerate() {
            let c = assign.get(i).copied().unwrap_or(0) % n;
            newest[c] = newest[c].max(crate::key::parse_internal_key(k).unwrap().seq);
        }
        for (c, bound) in newest.iter_mut().enumerate() {
            if !known.get(c).copied().unwrap_or(false) {
                *bound = MAX_SEQ;
            }
        }
        MergingIterator::new(children(entries, assign, n)).with_newest_seqs(newest)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// With range tombstones over a merge whose older children jump
        /// over what the tombstones delete, both directions read exactly
        /// what a model that checks every entry against every tombstone
        /// reads.
        #[test]
        fn range_deletes_over_a_merge_match_model(
            h in arb_history(),
            assign in proptest::collection::vec(any::<usize>(), 60),
            n in 1usize..5,
            known in proptest::collection::vec(proptest::bool::weighted(0.8), 5),
            raw in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..3), proptest::collection::vec(0u8..3, 0..3), 1u64..70),
                0..4,
            ),
            snap in 0u64..75,
            from in proptest::collection::vec(0u8..3, 0..3),
            jump_after in 1u32..4,
        ) {
            use crate::range_tombstone::{covering_seq, FragmentSet, RangeTombstone};
            let entries = history_entries(&h);
            let snap = if snap >= 70 { MAX_SEQ } else { snap };
            let ts: Vec<RangeTombstone> =
                raw.iter().map(|(b, e, seq)| RangeTombstone::new(b, e, *seq)).collect();
            let expect: Vec<Entry> = model_newest(&entries, snap, None)
                .into_iter()
                .filter(|(k, (seq, kind, _))| {
                    *kind == ValueKind::Put && covering_seq(&ts, k, snap) <= *seq
                })
                .map(|(k, (_, _, v))| (k, v))
                .collect();
            let set = || Some(Arc::new(FragmentSet::new(&ts, snap)));

            let mut it = DbIterator::new(merge_knowing_newest(&entries, &assign, n, &known), snap, None)
                .with_range_dels(set())
                .jumping_after(jump_after);
            it.seek(&from).unwrap();
            let mut fwd = Vec::new();
            while it.valid() {
                fwd.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
            let expect_from: Vec<Entry> =
                expect.iter().filter(|(k, _)| *k >= from).cloned().collect();
            prop_assert_eq!(fwd, expect_from);

            let mut it = DbRevIterator::new(merge_knowing_newest(&entries, &assign, n, &known), snap, None)
                .with_range_dels(set())
                .jumping_after(jump_after);
            it.seek_before(&from).unwrap();
            let mut back = Vec::new();
            while it.valid() {
                back.push((it.key().to_vec(), it.value().to_vec()));
                it.prev().unwrap();
            }
            back.reverse();
            let expect_before: Vec<Entry> =
                expect.iter().filter(|(k, _)| *k < from).cloned().collect();
            prop_assert_eq!(back, expect_before);
        }
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

    }
}
