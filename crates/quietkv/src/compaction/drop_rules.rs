//! What a compaction drops: [`DropRules`] decides, entry by entry over a
//! merged stream of its inputs, which entries the output keeps (the newest
//! entry of each key that some reader can still see); [`CompactionIterator`]
//! applies the rules to the stream and yields exactly what is written out.

use std::sync::Arc;

use super::user_filter::{CompactionFilter, FilterDecision};
use crate::cpu_yield::CpuYield;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, parse_internal_key, SeqNo, ValueKind, MAX_SEQ};
use crate::range_tombstone::{FragmentSet, RangeTombstone};

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
///
/// A range tombstone deletes, in the output, the entries it covers that are
/// older than it *in its own stripe*: every reader that sees the tombstone
/// would read them as deleted, and a reader of an older snapshot does not
/// see the tombstone but does not see those entries either unless they are
/// in its stripe. A range tombstone itself is dropped under the same
/// condition as a point tombstone: bottommost and in the oldest stripe.
#[derive(Debug, Clone)]
pub struct DropRules {
    snapshots: Vec<SeqNo>,
    bottommost: bool,
    current_key: Vec<u8>,
    has_current: bool,
    last_stripe: usize,
    dropped_shadowed: u64,
    dropped_tombstones: u64,
    /// Per stripe, the range tombstones with sequence numbers in it
    /// (`None` for a stripe without any; empty when there are none at all).
    range_dels: Vec<Option<FragmentSet>>,
    dropped_covered: u64,
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
            range_dels: Vec::new(),
            dropped_covered: 0,
        }
    }

    fn stripe_of(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    /// Drops the entries `range_dels` covers in their stripes.
    pub fn with_range_tombstones(mut self, range_dels: &[RangeTombstone]) -> Self {
        self.range_dels = if range_dels.is_empty() {
            Vec::new()
        } else {
            (0..=self.snapshots.len())
                .map(|stripe| {
                    let set = FragmentSet::new(
                        range_dels
                            .iter()
                            .filter(|t| self.stripe_of(t.seq) == stripe),
                        MAX_SEQ,
                    );
                    (!set.is_empty()).then_some(set)
                })
                .collect()
        };
        self
    }

    /// Whether the output keeps range tombstone `t` (see the type's docs).
    pub fn keeps_range_tombstone(&self, t: &RangeTombstone) -> bool {
        !(self.bottommost && self.stripe_of(t.seq) == 0)
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
        if let Some(Some(set)) = self.range_dels.get(stripe) {
            if set.covers(p.user_key, p.seq) {
                // Older entries of the key in this stripe are shadowed by
                // this one, so they go too.
                self.dropped_covered += 1;
                return Ok(false);
            }
        }
        if p.kind == ValueKind::Delete && self.bottommost && stripe == 0 {
            self.dropped_tombstones += 1;
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether the entry `keep` last kept is newer than every snapshot (no
    /// snapshot reads it, so a user filter may change it).
    fn last_kept_is_unseen_by_snapshots(&self) -> bool {
        self.last_stripe == self.snapshots.len()
    }

    /// Whether nothing older of the last kept key can remain below or in a
    /// snapshot: removing it then needs no tombstone.
    fn last_kept_can_vanish(&self) -> bool {
        self.bottommost && self.last_stripe == 0
    }

    /// Entries dropped because a newer entry in the same stripe shadows them.
    #[cfg(test)]
    pub fn dropped_shadowed(&self) -> u64 {
        self.dropped_shadowed
    }

    /// Entries dropped because a range tombstone of their stripe covers them.
    #[cfg(test)]
    pub fn dropped_covered(&self) -> u64 {
        self.dropped_covered
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
    /// The user's filter, offered each kept value no snapshot sees.
    filter: Option<Arc<dyn CompactionFilter>>,
    /// The current entry as the filter rewrote it (a tombstone or a new
    /// value), if it did.
    rewritten: Option<(Vec<u8>, Vec<u8>)>,
    /// Counts every entry passed, written or dropped: a run of dropped
    /// entries (overwrites, tombstones at the bottom) is CPU time too.
    cpu_yield: CpuYield,
}

impl<I: InternalIterator> CompactionIterator<I> {
    pub fn new(input: I, snapshots: &[SeqNo], is_bottommost: bool) -> Self {
        CompactionIterator {
            input,
            rules: DropRules::new(snapshots, is_bottommost),
            filter: None,
            rewritten: None,
            cpu_yield: CpuYield::every_micros(0),
        }
    }

    /// Drops the entries `range_dels` covers (see [`DropRules`]).
    pub(crate) fn with_range_tombstones(mut self, range_dels: &[RangeTombstone]) -> Self {
        self.rules = self.rules.with_range_tombstones(range_dels);
        self
    }

    /// Whether the output keeps range tombstone `t`.
    pub(crate) fn keeps_range_tombstone(&self, t: &RangeTombstone) -> bool {
        self.rules.keeps_range_tombstone(t)
    }

    /// Offers every kept value that no snapshot sees to `filter`.
    pub(crate) fn with_filter(mut self, filter: Option<Arc<dyn CompactionFilter>>) -> Self {
        self.filter = filter;
        self
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
        match &self.rewritten {
            Some((k, _)) => k,
            None => self.input.key(),
        }
    }

    pub fn value(&self) -> &[u8] {
        match &self.rewritten {
            Some((_, v)) => v,
            None => self.input.value(),
        }
    }

    #[cfg(test)]
    pub fn rules(&self) -> &DropRules {
        &self.rules
    }

    fn skip_dropped(&mut self) -> Result<()> {
        self.rewritten = None;
        while self.input.valid() {
            if self.rules.keep(self.input.key())? && self.apply_filter()? {
                return Ok(());
            }
            self.pass_entry();
            self.input.next()?;
        }
        Ok(())
    }

    /// Runs the user's filter on the entry just kept; false if the entry is
    /// to be dropped after all.
    fn apply_filter(&mut self) -> Result<bool> {
        let Some(filter) = &self.filter else {
            return Ok(true);
        };
        if !self.rules.last_kept_is_unseen_by_snapshots() {
            return Ok(true);
        }
        let p = parse_internal_key(self.input.key())?;
        if p.kind != ValueKind::Put {
            return Ok(true);
        }
        match filter.filter(p.user_key, self.input.value()) {
            FilterDecision::Keep => Ok(true),
            FilterDecision::ChangeValue(v) => {
                self.rewritten = Some((self.input.key().to_vec(), v));
                Ok(true)
            }
            FilterDecision::Remove if self.rules.last_kept_can_vanish() => Ok(false),
            FilterDecision::Remove => {
                let tombstone = make_internal_key(p.user_key, p.seq, ValueKind::Delete);
                self.rewritten = Some((tombstone, Vec::new()));
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIterator;
    use crate::key::{parse_internal_key, InternalKey, MAX_SEQ};
    use crate::merge::tests::{arb_history, history_entries, ik, model_newest, model_read, sorted};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug)]
    struct RemoveB;
    impl CompactionFilter for RemoveB {
        fn filter(&self, key: &[u8], value: &[u8]) -> FilterDecision {
            match key {
                b"b" => FilterDecision::Remove,
                b"c" => FilterDecision::ChangeValue([value, b"!"].concat()),
                _ => FilterDecision::Keep,
            }
        }
    }

    #[test]
    fn range_tombstones_drop_what_they_cover_in_their_stripe() {
        let entries = sorted(vec![
            (ik(b"a", 2, ValueKind::Put), b"a2".to_vec()),
            (ik(b"b", 3, ValueKind::Put), b"b3".to_vec()),
            (ik(b"b", 9, ValueKind::Put), b"b9".to_vec()),
            (ik(b"c", 1, ValueKind::Put), b"c1".to_vec()),
        ]);
        // [a, c) at 5: a2 and b3 are older, b9 newer, c1 outside.
        let ts = [RangeTombstone::new(b"a", b"c", 5)];
        let run = |snaps: &[SeqNo], bottom: bool| -> (Vec<Vec<u8>>, bool) {
            let mut it = CompactionIterator::new(VecIterator::new(entries.clone()), snaps, bottom)
                .with_range_tombstones(&ts);
            it.seek_to_first().unwrap();
            let mut out = Vec::new();
            while it.valid() {
                out.push(it.value().to_vec());
                it.next().unwrap();
            }
            (out, it.keeps_range_tombstone(&ts[0]))
        };
        let v = |s: &[&str]| s.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
        assert_eq!(run(&[], false), (v(&["b9", "c1"]), true));
        assert_eq!(run(&[], true), (v(&["b9", "c1"]), false));
        // A snapshot at 2 sees a2 (its stripe has no tombstone) but not b3,
        // which the tombstone deletes in its own stripe.
        assert_eq!(run(&[2], true), (v(&["a2", "b9", "c1"]), true));
        // A snapshot at 3 sees both: nothing is covered in their stripe.
        assert_eq!(run(&[3], true), (v(&["a2", "b9", "b3", "c1"]), true));
        let mut rules = DropRules::new(&[], false).with_range_tombstones(&ts);
        for (k, _) in &entries {
            rules.keep(k).unwrap();
        }
        // a2 is covered; b3 is shadowed by b9 before coverage matters.
        assert_eq!((rules.dropped_covered(), rules.dropped_shadowed()), (1, 1));
    }

    #[test]
    fn a_user_filter_removes_with_a_tombstone_unless_nothing_older_can_remain() {
        let entries = sorted(vec![
            (ik(b"a", 4, ValueKind::Put), b"a4".to_vec()),
            (ik(b"b", 6, ValueKind::Put), b"b6".to_vec()),
            (ik(b"b", 2, ValueKind::Put), b"b2".to_vec()),
            (ik(b"c", 5, ValueKind::Put), b"c5".to_vec()),
        ]);
        let run = |snaps: &[SeqNo], bottom: bool| -> Vec<(Vec<u8>, Vec<u8>)> {
            let mut it = CompactionIterator::new(VecIterator::new(entries.clone()), snaps, bottom)
                .with_filter(Some(Arc::new(RemoveB)));
            it.seek_to_first().unwrap();
            let mut out = Vec::new();
            while it.valid() {
                out.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
            out
        };
        let a = (ik(b"a", 4, ValueKind::Put), b"a4".to_vec());
        let c = (ik(b"c", 5, ValueKind::Put), b"c5!".to_vec());
        // At the bottom with no snapshot, b vanishes with its older version.
        assert_eq!(run(&[], true), vec![a.clone(), c.clone()]);
        // Above the bottom, a tombstone hides what deeper levels hold.
        let tomb = (ik(b"b", 6, ValueKind::Delete), Vec::new());
        assert_eq!(run(&[], false), vec![a.clone(), tomb.clone(), c.clone()]);
        // A snapshot at 3 keeps b2 and is never offered it; b6 becomes a
        // tombstone so current readers do not see b2 again. c5 and a4 are
        // newer than the snapshot too: offered.
        let b2 = (ik(b"b", 2, ValueKind::Put), b"b2".to_vec());
        assert_eq!(run(&[3], true), vec![a.clone(), tomb, b2.clone(), c]);
        // A snapshot at 5: a4 and c5 are what it sees, so they are kept as
        // they are; b6 is newer and still removed.
        let c5 = (ik(b"c", 5, ValueKind::Put), b"c5".to_vec());
        let tomb = (ik(b"b", 6, ValueKind::Delete), Vec::new());
        assert_eq!(run(&[5], true), vec![a, tomb, b2, c5]);
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

    /// What a reader at `r` sees of `entries` under `tombstones`: for each
    /// key the newest entry at or below `r`, if it is a Put no visible
    /// tombstone newer than it covers.
    fn read_with_tombstones(
        entries: &[(Vec<u8>, Vec<u8>)],
        tombstones: &[RangeTombstone],
        r: SeqNo,
    ) -> BTreeMap<Vec<u8>, Vec<u8>> {
        model_newest(entries, r, None)
            .into_iter()
            .filter(|(k, (s, kind, _))| {
                *kind == ValueKind::Put
                    && !tombstones
                        .iter()
                        .any(|t| t.covers(k) && t.seq > *s && t.seq <= r)
            })
            .map(|(k, (_, _, v))| (k, v))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Every reader (each snapshot, and the latest) sees the same before
        /// and after a compaction that applies range tombstones, drops what
        /// they cover and drops the tombstones it may.
        #[test]
        fn range_tombstones_keep_every_readers_view(
            h in arb_history(),
            raw in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..3), proptest::collection::vec(0u8..4, 1..3), 0u64..65),
                0..4,
            ),
            snaps in proptest::collection::vec(0u64..65, 0..4),
            bottommost in any::<bool>(),
        ) {
            let entries = sorted(history_entries(&h));
            let tombstones: Vec<RangeTombstone> = raw
                .iter()
                .filter(|(b, e, _)| b < e)
                .map(|(b, e, s)| RangeTombstone::new(b, e, *s))
                .collect();
            let mut it = CompactionIterator::new(VecIterator::new(entries.clone()), &snaps, bottommost)
                .with_range_tombstones(&tombstones);
            it.seek_to_first().unwrap();
            let mut out = Vec::new();
            while it.valid() {
                out.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
            let kept: Vec<RangeTombstone> = tombstones
                .iter()
                .filter(|t| it.keeps_range_tombstone(t))
                .cloned()
                .collect();
            let mut points: Vec<SeqNo> = snaps.clone();
            points.push(MAX_SEQ);
            for &r in &points {
                prop_assert_eq!(
                    read_with_tombstones(&out, &kept, r),
                    read_with_tombstones(&entries, &tombstones, r),
                    "reader at {}", r
                );
            }
            // Above other levels, a dropped tombstone would expose what
            // lies below: only the bottom drops them.
            if !bottommost {
                prop_assert_eq!(kept.len(), tombstones.len());
            }
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
