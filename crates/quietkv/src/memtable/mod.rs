//! The in-memory write buffer: a skiplist ordered by internal key whose
//! nodes, keys and values live in one arena, freed in one piece when the
//! memtable is dropped.
//!
//! Writers must be serialized by the caller (one `insert_batch`/`add` at a
//! time; a second concurrent writer would wait on an internal lock, never
//! corrupt anything); any number of readers (`get`, iterators) may run
//! concurrently with the writer, without locks. Entries of a batch become
//! visible one by one, so callers make a batch atomic by publishing its
//! sequence numbers to readers only after `insert_batch` returns and
//! reading at a snapshot no newer than that.
//!
//! Range tombstones are kept apart from the skiplist, in a short list
//! behind a lock that only readers of a memtable holding some take: point
//! entries stay a plain ordered stream, and a memtable without range
//! tombstones costs its readers one atomic load.

mod arena;
mod iter;
mod skiplist;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::{pack_trailer, SeqNo, ValueKind, MAX_SEQ};
use crate::range_tombstone::{covering_seq, RangeTombstone};
use crate::value::{PinnedMemory, Value};

pub use iter::MemtableIter;
use skiplist::{SearchKey, SkipList};

/// A value found in a memtable, borrowed from it: a point read copies it,
/// or pins the memtable to share it ([`MemValue::pin`]). Only the memtable
/// makes one, from a node's value bytes, which is what makes pinning safe.
pub struct MemValue<'a> {
    mem: &'a Arc<Memtable>,
    bytes: &'a [u8],
}

impl<'a> MemValue<'a> {
    pub fn as_slice(&self) -> &'a [u8] {
        self.bytes
    }

    /// The bytes as a [`Value`] that keeps the memtable alive instead of
    /// copying them.
    pub fn pin(self) -> Value {
        // SAFETY: `bytes` is a node's value block (or empty) in this
        // memtable's arena (`get_entry` is the only maker of a `MemValue`),
        // which is freed only when the memtable is dropped (the `Arc`
        // handed over keeps it), and never written once published:
        // replacing a value writes a new block.
        unsafe { Value::in_memtable(Arc::clone(self.mem), self.bytes) }
    }
}

pub struct Memtable {
    list: SkipList,
    /// Range tombstones, sorted by first key, so a lookup looks only at
    /// those that start at or before its key.
    range_dels: RwLock<Vec<RangeTombstone>>,
    /// `range_dels.len()`, read without the lock.
    num_range_dels: AtomicUsize,
    /// Bytes of the range tombstones' keys.
    range_del_bytes: AtomicUsize,
    /// The highest sequence number of any entry (0 when empty), so a
    /// transaction's commit can skip a memtable written to only before its
    /// snapshot.
    largest_seq: AtomicU64,
}

// SAFETY: the bytes a memtable hands out (keys and values in its arena)
// are never written once published, and the arena is freed only when the
// memtable is dropped.
unsafe impl PinnedMemory for Memtable {
    fn pinned_bytes(&self) -> usize {
        self.approximate_bytes()
    }
}

impl Default for Memtable {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Memtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memtable")
            .field("len", &self.len())
            .field("approximate_bytes", &self.approximate_bytes())
            .finish()
    }
}

impl Memtable {
    pub fn new() -> Self {
        Memtable {
            list: SkipList::new(),
            range_dels: RwLock::new(Vec::new()),
            num_range_dels: AtomicUsize::new(0),
            range_del_bytes: AtomicUsize::new(0),
            largest_seq: AtomicU64::new(0),
        }
    }

    fn add_range_del(&self, begin: &[u8], end: &[u8], seq: SeqNo) {
        let t = RangeTombstone::new(begin, end, seq);
        let bytes = std::mem::size_of::<RangeTombstone>() + begin.len() + end.len();
        let mut list = self.range_dels.write();
        let at = list.partition_point(|x| x.begin <= t.begin);
        list.insert(at, t);
        self.num_range_dels.store(list.len(), Ordering::Release);
        self.range_del_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Number of range tombstones.
    pub fn num_range_tombstones(&self) -> usize {
        self.num_range_dels.load(Ordering::Acquire)
    }

    /// A copy of the range tombstones (empty, without taking the lock, when
    /// there are none).
    pub fn range_tombstones(&self) -> Vec<RangeTombstone> {
        if self.num_range_tombstones() == 0 {
            return Vec::new();
        }
        self.range_dels.read().clone()
    }

    /// The highest sequence number, at most `snapshot`, of the range
    /// tombstones covering `user_key` (0 if none does).
    pub fn range_del_seq(&self, user_key: &[u8], snapshot: SeqNo) -> SeqNo {
        if self.num_range_tombstones() == 0 {
            return 0;
        }
        let list = self.range_dels.read();
        let starts_before = list.partition_point(|t| t.begin.as_slice() <= user_key);
        covering_seq(&list[..starts_before], user_key, snapshot)
    }

    /// Adds one entry. `seq` must be at most [`MAX_SEQ`] (else
    /// InvalidArgument). Adding the same (key, seq, kind) twice replaces the
    /// value; the engine never does that.
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) -> Result<()> {
        if seq > MAX_SEQ {
            return Err(Error::invalid(format!(
                "sequence number {seq} exceeds the largest ({MAX_SEQ})"
            )));
        }
        match kind {
            ValueKind::RangeDelete => self.add_range_del(user_key, value, seq),
            _ => self.list.insert(user_key, pack_trailer(seq, kind), value),
        }
        self.largest_seq.fetch_max(seq, Ordering::Release);
        Ok(())
    }

    /// Adds every operation of `batch`, the `i`th with sequence number
    /// `batch.sequence() + i`. The whole range is checked before anything
    /// is inserted.
    pub fn insert_batch(&self, batch: &WriteBatch) -> Result<()> {
        let first = batch.sequence();
        let count = batch.len() as u64;
        if count == 0 {
            return Ok(());
        }
        match first.checked_add(count - 1) {
            Some(last) if last <= MAX_SEQ => {}
            _ => {
                return Err(Error::invalid(format!(
                    "write batch at sequence {first} with {count} entries exceeds the largest \
                     sequence number ({MAX_SEQ})"
                )))
            }
        }
        for (i, e) in batch.iter().enumerate() {
            let seq = first + i as u64;
            match e.kind {
                ValueKind::RangeDelete => self.add_range_del(e.key, e.value, seq),
                _ => self.list.insert(e.key, pack_trailer(seq, e.kind), e.value),
            }
        }
        self.largest_seq
            .fetch_max(first + (count - 1), Ordering::Release);
        Ok(())
    }

    /// The highest sequence number of any entry, point or range tombstone
    /// (0 when empty). A batch's entries count once `insert_batch` returns.
    pub fn largest_seq(&self) -> SeqNo {
        self.largest_seq.load(Ordering::Acquire)
    }

    /// The newest entry for `user_key` with sequence number <= `snapshot`:
    /// `(Put, value)`, `(Delete, empty)`, or `None` if the memtable has no
    /// visible entry for the key.
    #[cfg(test)]
    pub fn get(self: &Arc<Self>, user_key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
        self.get_entry(user_key, snapshot)
            .map(|(kind, _, value)| (kind, value.as_slice().to_vec()))
    }

    /// Like [`Self::get`], with the entry's sequence number, and the value
    /// borrowed in place: the caller copies it or pins the memtable to
    /// share it. Range tombstones are not consulted (see
    /// [`Self::range_del_seq`]).
    pub fn get_entry<'a>(
        self: &'a Arc<Self>,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Option<(ValueKind, SeqNo, MemValue<'a>)> {
        let trailer = pack_trailer(snapshot.min(MAX_SEQ), ValueKind::MAX);
        let node = self.list.seek(SearchKey::new(user_key, trailer))?;
        let parsed = crate::key::parse_internal_key(node.key()).ok()?;
        if parsed.user_key != user_key {
            return None;
        }
        let bytes = match parsed.kind {
            ValueKind::Put => node.value(),
            ValueKind::Delete | ValueKind::RangeDelete => &[],
        };
        Some((parsed.kind, parsed.seq, MemValue { mem: self, bytes }))
    }

    /// The sequence number of the newest write to `user_key` (a put, a
    /// delete, or a range delete covering it), without copying its value:
    /// what a transaction's commit compares with its snapshot.
    pub fn latest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        let trailer = pack_trailer(MAX_SEQ, ValueKind::MAX);
        let point = self
            .list
            .seek(SearchKey::new(user_key, trailer))
            .and_then(|node| crate::key::parse_internal_key(node.key()).ok())
            .filter(|parsed| parsed.user_key == user_key)
            .map(|parsed| parsed.seq);
        let range = Some(self.range_del_seq(user_key, MAX_SEQ)).filter(|&seq| seq > 0);
        point.max(range)
    }

    /// Memory used by the entries: the arena bytes taken by their keys,
    /// values and skiplist nodes (not the unused rest of the current
    /// arena chunk); grows monotonically.
    pub fn approximate_bytes(&self) -> usize {
        self.list.used_bytes() + self.range_del_bytes.load(Ordering::Relaxed)
    }

    /// Number of point entries (every version of every key counts; range
    /// tombstones are counted by [`Self::num_range_tombstones`]).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether it holds neither point entries nor range tombstones.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.num_range_tombstones() == 0
    }

    /// An iterator over all entries in internal-key order. It keeps the
    /// memtable alive, so it can outlive the caller's handle (e.g. while a
    /// flush or a long scan runs after the memtable was rotated out). It
    /// starts unpositioned: call `seek_to_first` or `seek`. Entries inserted
    /// after it was created may or may not be seen.
    pub fn iter(self: &std::sync::Arc<Self>) -> MemtableIter {
        MemtableIter::new(std::sync::Arc::clone(self))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicU64;

    use proptest::prelude::*;

    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::*;
    use crate::error::ErrorKind;
    use crate::iter::InternalIterator;
    use crate::key::{make_internal_key, parse_internal_key, seek_key, InternalKey};

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn memtable_and_iterator_are_send_sync() {
        assert_send_sync::<Memtable>();
        assert_send_sync::<MemtableIter>();
    }

    fn sample() -> Arc<Memtable> {
        let m = Arc::new(Memtable::new());
        let mut b = WriteBatch::new();
        b.put(b"a", b"a1").unwrap(); // 10
        b.put(b"b", b"b1").unwrap(); // 11
        b.set_sequence(10);
        m.insert_batch(&b).unwrap();
        m.add(12, ValueKind::Delete, b"a", b"").unwrap();
        m.add(13, ValueKind::Put, b"a", b"a3").unwrap();
        m.add(14, ValueKind::Put, b"c", b"").unwrap();
        m
    }

    #[test]
    fn get_respects_snapshots() {
        let m = sample();
        assert_eq!(m.len(), 5);
        assert!(!m.is_empty());
        assert_eq!(m.get(b"a", 9), None);
        assert_eq!(m.get(b"a", 10), Some((ValueKind::Put, b"a1".to_vec())));
        assert_eq!(m.get(b"a", 11), Some((ValueKind::Put, b"a1".to_vec())));
        assert_eq!(m.get(b"a", 12), Some((ValueKind::Delete, Vec::new())));
        assert_eq!(m.get(b"a", 13), Some((ValueKind::Put, b"a3".to_vec())));
        assert_eq!(
            m.get(b"a", u64::MAX),
            Some((ValueKind::Put, b"a3".to_vec()))
        );
        assert_eq!(m.get(b"b", 10), None);
        assert_eq!(m.get(b"b", 11), Some((ValueKind::Put, b"b1".to_vec())));
        assert_eq!(m.get(b"c", MAX_SEQ), Some((ValueKind::Put, Vec::new())));
        // Neighbouring and prefix keys do not match.
        assert_eq!(m.get(b"", MAX_SEQ), None);
        assert_eq!(m.get(b"aa", MAX_SEQ), None);
        assert_eq!(m.get(b"d", MAX_SEQ), None);
    }

    #[test]
    fn largest_seq_is_the_newest_entry_of_any_kind() {
        let m = Memtable::new();
        assert_eq!(m.largest_seq(), 0);
        let mut b = WriteBatch::new();
        b.put(b"a", b"1").unwrap();
        b.delete_range(b"b", b"c").unwrap();
        b.set_sequence(20);
        m.insert_batch(&b).unwrap();
        assert_eq!(m.largest_seq(), 21, "the range delete is the batch's last");
        // Recovery may add entries out of order: the highest stays.
        m.add(7, ValueKind::Put, b"z", b"").unwrap();
        assert_eq!(m.largest_seq(), 21);
        m.add(30, ValueKind::RangeDelete, b"x", b"y").unwrap();
        assert_eq!(m.largest_seq(), 30);
    }

    #[test]
    fn latest_seq_is_the_newest_entry_of_the_key_put_or_delete() {
        let m = sample();
        assert_eq!(m.latest_seq(b"a"), Some(13));
        assert_eq!(m.latest_seq(b"b"), Some(11));
        m.add(15, ValueKind::Delete, b"b", b"").unwrap();
        assert_eq!(m.latest_seq(b"b"), Some(15));
        assert_eq!(m.latest_seq(b"aa"), None);
        assert_eq!(m.latest_seq(b""), None);
    }

    #[test]
    fn range_tombstones_are_kept_apart() {
        let m = sample();
        assert_eq!(m.range_del_seq(b"a", MAX_SEQ), 0);
        let mut b = WriteBatch::new();
        b.delete_range(b"a", b"c").unwrap();
        b.put(b"b", b"b2").unwrap();
        b.set_sequence(20);
        let before = m.approximate_bytes();
        m.insert_batch(&b).unwrap();
        assert!(m.approximate_bytes() > before);
        // One tombstone, not one entry per covered key.
        assert_eq!((m.len(), m.num_range_tombstones()), (6, 1));
        assert_eq!(
            m.range_tombstones(),
            vec![RangeTombstone::new(b"a", b"c", 20)]
        );
        assert_eq!(m.range_del_seq(b"a", MAX_SEQ), 20);
        assert_eq!(m.range_del_seq(b"b", 19), 0);
        assert_eq!(m.range_del_seq(b"c", MAX_SEQ), 0);
        // Added out of key order, found all the same.
        m.add(30, ValueKind::RangeDelete, b"", b"aa").unwrap();
        m.add(31, ValueKind::RangeDelete, b"b", b"bb").unwrap();
        assert_eq!(m.range_del_seq(b"a", MAX_SEQ), 30);
        assert_eq!(m.range_del_seq(b"b", MAX_SEQ), 31);
        assert_eq!(m.range_del_seq(b"b", 30), 20);
        assert_eq!(m.range_del_seq(b"", MAX_SEQ), 30);
        assert_eq!(m.get_entry(b"b", MAX_SEQ).map(|e| e.1), Some(21));
        assert_eq!(m.num_range_tombstones(), 3);
        // The point stream never shows the tombstone.
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let kinds: Vec<ValueKind> = collect(&mut it)
            .iter()
            .map(|(k, _)| parse_internal_key(k).unwrap().kind)
            .collect();
        assert!(!kinds.contains(&ValueKind::RangeDelete));
        let only = Memtable::new();
        only.add(1, ValueKind::RangeDelete, b"x", b"y").unwrap();
        assert!(!only.is_empty());
        assert_eq!(only.len(), 0);
    }

    #[test]
    fn sequence_limits_are_invalid_argument() {
        let m = Arc::new(Memtable::new());
        let e = m.add(MAX_SEQ + 1, ValueKind::Put, b"k", b"v").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let mut b = WriteBatch::new();
        b.put(b"x", b"1").unwrap();
        b.put(b"y", b"2").unwrap();
        b.set_sequence(MAX_SEQ);
        let e = m.insert_batch(&b).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(m.is_empty(), "nothing of a rejected batch is inserted");
        b.set_sequence(MAX_SEQ - 1);
        m.insert_batch(&b).unwrap();
        assert_eq!(m.get(b"y", MAX_SEQ), Some((ValueKind::Put, b"2".to_vec())));
        m.insert_batch(&WriteBatch::new()).unwrap();
    }

    #[test]
    fn approximate_bytes_grows() {
        let m = Memtable::new();
        assert_eq!(m.approximate_bytes(), 0);
        m.add(1, ValueKind::Put, b"key", &[0; 1000]).unwrap();
        let one = m.approximate_bytes();
        assert!(one >= 1000 + 3 + 8, "{one}");
        m.add(2, ValueKind::Delete, b"key", b"").unwrap();
        assert!(m.approximate_bytes() > one);
    }

    fn collect(it: &mut MemtableIter) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        out
    }

    #[test]
    fn iteration_and_seek() {
        let m = sample();
        let mut it = m.iter();
        assert!(!it.valid());
        it.next().unwrap(); // harmless while unpositioned
        it.seek_to_first().unwrap();
        let all = collect(&mut it);
        let keys: Vec<Vec<u8>> = all.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            keys,
            vec![
                make_internal_key(b"a", 13, ValueKind::Put),
                make_internal_key(b"a", 12, ValueKind::Delete),
                make_internal_key(b"a", 10, ValueKind::Put),
                make_internal_key(b"b", 11, ValueKind::Put),
                make_internal_key(b"c", 14, ValueKind::Put),
            ]
        );
        assert_eq!(all[0].1, b"a3");
        assert_eq!(all[1].1, b"");

        // Seek to the newest version visible at a snapshot.
        it.seek(&seek_key(b"a", 12)).unwrap();
        assert_eq!(
            it.key(),
            &make_internal_key(b"a", 12, ValueKind::Delete)[..]
        );
        it.seek(&seek_key(b"a", 11)).unwrap();
        assert_eq!(it.key(), &make_internal_key(b"a", 10, ValueKind::Put)[..]);
        // Older than every version of "a": lands on the next user key.
        it.seek(&seek_key(b"a", 5)).unwrap();
        assert_eq!(it.key(), &make_internal_key(b"b", 11, ValueKind::Put)[..]);
        // Between user keys, before the first, after the last.
        it.seek(&seek_key(b"bb", MAX_SEQ)).unwrap();
        assert_eq!(it.key(), &make_internal_key(b"c", 14, ValueKind::Put)[..]);
        it.seek(&seek_key(b"", MAX_SEQ)).unwrap();
        assert_eq!(it.key(), &make_internal_key(b"a", 13, ValueKind::Put)[..]);
        it.seek(&seek_key(b"c", 13)).unwrap();
        assert!(!it.valid());
        it.seek(&seek_key(b"zzz", MAX_SEQ)).unwrap();
        assert!(!it.valid());
        it.next().unwrap();
        assert!(!it.valid());
        // Exact internal key.
        it.seek(&make_internal_key(b"b", 11, ValueKind::Put))
            .unwrap();
        assert_eq!(it.value(), b"b1");

        assert!(!Arc::new(Memtable::new()).iter().valid());
        let empty = Arc::new(Memtable::new());
        let mut it = empty.iter();
        it.seek_to_first().unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn iterator_outlives_the_handle() {
        let m = sample();
        let mut it = m.iter();
        drop(m);
        it.seek_to_first().unwrap();
        assert_eq!(collect(&mut it).len(), 5);
        // Boxed as a trait object, as a merging iterator would hold it.
        let mut boxed: Box<dyn InternalIterator + Send> = Box::new(sample().iter());
        boxed.seek_to_first().unwrap();
        assert!(boxed.valid());
    }

    #[test]
    fn concurrent_readers_while_a_writer_inserts() {
        const N: u64 = 20_000;
        let m = Arc::new(Memtable::new());
        let visible = Arc::new(AtomicU64::new(0));
        let key = |i: u64| format!("key{:06}", i % 5000).into_bytes();
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let m = Arc::clone(&m);
                let visible = Arc::clone(&visible);
                std::thread::spawn(move || {
                    let mut checks = 0u64;
                    loop {
                        let v = visible.load(Ordering::Acquire);
                        if v > 0 {
                            // Every published write is found at its snapshot
                            // with the value of the newest version <= v.
                            let i = (v * 7919 + r) % v + 1;
                            let want = (0..=4).map(|k| i + k * 5000).filter(|s| *s <= v).max();
                            let got = m.get(&key(i - 1), v);
                            let want_seq = want.map(|s| s.to_string().into_bytes());
                            assert_eq!(got.map(|(_, val)| val), want_seq);
                            // A scan sees internal-key order.
                            let mut it = m.iter();
                            it.seek(&seek_key(&key(i), MAX_SEQ)).unwrap();
                            let mut prev: Option<Vec<u8>> = None;
                            for _ in 0..50 {
                                if !it.valid() {
                                    break;
                                }
                                if let Some(p) = &prev {
                                    assert!(crate::key::compare_internal(p, it.key()).is_lt());
                                }
                                prev = Some(it.key().to_vec());
                                it.next().unwrap();
                            }
                            checks += 1;
                        }
                        if v == N {
                            return checks;
                        }
                    }
                })
            })
            .collect();
        for seq in 1..=N {
            // Sequence `seq` writes key (seq - 1) % 5000 with value "seq".
            m.add(
                seq,
                ValueKind::Put,
                &key(seq - 1),
                seq.to_string().as_bytes(),
            )
            .unwrap();
            visible.store(seq, Ordering::Release);
        }
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_eq!(m.len(), N as usize);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, Vec<u8>),
        Delete(u8),
    }

    fn user_key_of(k: u8) -> Vec<u8> {
        // Includes the empty key and prefixes of each other.
        vec![b'k'; (k % 4) as usize]
            .into_iter()
            .chain(std::iter::once(k / 4))
            .take((k % 5) as usize)
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn matches_a_btreemap_model(
            batches in prop::collection::vec(
                prop::collection::vec(
                    prop_oneof![
                        (any::<u8>(), prop::collection::vec(any::<u8>(), 0..8))
                            .prop_map(|(k, v)| Op::Put(k % 24, v)),
                        any::<u8>().prop_map(|k| Op::Delete(k % 24)),
                    ],
                    0..6,
                ),
                0..12,
            ),
            queries in prop::collection::vec((any::<u8>(), any::<u64>()), 1..40),
        ) {
            let m = Arc::new(Memtable::new());
            let mut model: BTreeMap<InternalKey, Vec<u8>> = BTreeMap::new();
            let mut seq = 1u64;
            for ops in &batches {
                let mut b = WriteBatch::new();
                b.set_sequence(seq);
                for op in ops {
                    let (kind, k, v) = match op {
                        Op::Put(k, v) => (ValueKind::Put, *k, v.clone()),
                        Op::Delete(k) => (ValueKind::Delete, *k, Vec::new()),
                    };
                    match kind {
                        ValueKind::Put => b.put(user_key_of(k), &v).unwrap(),
                        ValueKind::Delete => b.delete(user_key_of(k)).unwrap(),
                        ValueKind::RangeDelete => unreachable!("the model writes no ranges"),
                    }
                    model.insert(InternalKey::new(&user_key_of(k), seq, kind), v);
                    seq += 1;
                }
                m.insert_batch(&b).unwrap();
            }
            prop_assert_eq!(m.len(), model.len());

            for (k, snap) in queries {
                let uk = user_key_of(k % 24);
                let snap = snap % (seq + 2);
                let target = InternalKey(seek_key(&uk, snap));
                let want = model
                    .range(target..)
                    .next()
                    .filter(|(ik, _)| ik.user_key() == uk)
                    .map(|(ik, v)| (parse_internal_key(ik.as_bytes()).unwrap().kind, v.clone()));
                prop_assert_eq!(m.get(&uk, snap), want);

                // Seek agrees with the model's lower bound.
                let mut it = m.iter();
                it.seek(&seek_key(&uk, snap)).unwrap();
                let want = model.range(InternalKey(seek_key(&uk, snap))..).next();
                prop_assert_eq!(it.valid(), want.is_some());
                if let Some((ik, v)) = want {
                    prop_assert_eq!(it.key(), ik.as_bytes());
                    prop_assert_eq!(it.value(), &v[..]);
                }
            }

            let mut it = m.iter();
            it.seek_to_first().unwrap();
            let got = collect(&mut it);
            let want: Vec<(Vec<u8>, Vec<u8>)> =
                model.into_iter().map(|(k, v)| (k.0, v)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn iterator_moves_match_the_model(
            entries in prop::collection::vec(
                (any::<u8>(), any::<bool>(), prop::collection::vec(any::<u8>(), 0..6)),
                0..40,
            ),
            moves in prop::collection::vec((0u8..6, any::<u8>(), any::<u64>()), 1..60),
        ) {
            let m = Arc::new(Memtable::new());
            let mut model: BTreeMap<InternalKey, Vec<u8>> = BTreeMap::new();
            for (i, (k, put, v)) in entries.iter().enumerate() {
                let seq = i as u64 + 1;
                let (kind, v) = if *put {
                    (ValueKind::Put, v.clone())
                } else {
                    (ValueKind::Delete, Vec::new())
                };
                m.add(seq, kind, &user_key_of(k % 24), &v).unwrap();
                model.insert(InternalKey::new(&user_key_of(k % 24), seq, kind), v);
            }
            let sorted: Vec<(Vec<u8>, Vec<u8>)> =
                model.into_iter().map(|(k, v)| (k.0, v)).collect();
            let lower_bound = |t: &[u8]| {
                sorted.partition_point(|(k, _)| crate::key::compare_internal(k, t).is_lt())
            };
            // The model's position: an index into `sorted`, `None` = not valid.
            let mut at: Option<usize> = None;
            let mut it = m.iter();
            for (op, k, snap) in moves {
                let target = seek_key(&user_key_of(k % 24), snap % (sorted.len() as u64 + 3));
                match op {
                    0 => {
                        it.seek_to_first().unwrap();
                        at = (!sorted.is_empty()).then_some(0);
                    }
                    1 => {
                        it.seek_to_last().unwrap();
                        at = sorted.len().checked_sub(1);
                    }
                    2 => {
                        it.seek(&target).unwrap();
                        at = Some(lower_bound(&target)).filter(|i| *i < sorted.len());
                    }
                    3 => {
                        it.seek_before(&target).unwrap();
                        at = lower_bound(&target).checked_sub(1);
                    }
                    4 => {
                        it.next().unwrap();
                        at = at.map(|i| i + 1).filter(|i| *i < sorted.len());
                    }
                    _ => {
                        it.prev().unwrap();
                        at = at.and_then(|i| i.checked_sub(1));
                    }
                }
                prop_assert_eq!(it.valid(), at.is_some(), "after move {}", op);
                if let Some(i) = at {
                    prop_assert_eq!(it.key(), &sorted[i].0[..]);
                    prop_assert_eq!(it.value(), &sorted[i].1[..]);
                }
            }
        }
    }

    #[test]
    fn adding_the_same_internal_key_replaces_the_value() {
        let m = Arc::new(Memtable::new());
        m.add(7, ValueKind::Put, b"k", b"first").unwrap();
        m.add(8, ValueKind::Put, b"l", b"other").unwrap();
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let before = m.approximate_bytes();
        m.add(7, ValueKind::Put, b"k", b"second, longer").unwrap();
        assert!(m.approximate_bytes() > before);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m.get(b"k", 7),
            Some((ValueKind::Put, b"second, longer".to_vec()))
        );
        // An iterator already on the entry sees the new value too.
        assert_eq!(it.value(), b"second, longer");
        it.next().unwrap();
        assert_eq!(it.value(), b"other");
    }

    #[test]
    fn large_values_and_many_entries_survive_arena_chunk_boundaries() {
        let m = Arc::new(Memtable::new());
        let big = vec![0x5a; 300 << 10];
        let n: u64 = if cfg!(miri) { 300 } else { 20_000 };
        for i in 0..n {
            let v: &[u8] = if i % 97 == 0 { &big } else { b"small value" };
            m.add(i + 1, ValueKind::Put, format!("key{i:08}").as_bytes(), v)
                .unwrap();
        }
        assert_eq!(m.len(), n as usize);
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        for i in 0..n {
            assert!(it.valid());
            assert_eq!(
                it.key(),
                &make_internal_key(format!("key{i:08}").as_bytes(), i + 1, ValueKind::Put)[..]
            );
            assert_eq!(it.value().len(), if i % 97 == 0 { big.len() } else { 11 });
            it.next().unwrap();
        }
        assert!(!it.valid());
    }

    /// One writer inserts keys in a scrambled order and announces how many
    /// it has inserted; several readers check, while it runs, that every
    /// announced key is found and that scans both ways are sorted.
    #[test]
    fn stress_one_writer_many_readers_see_sorted_published_keys() {
        let n: u64 = if cfg!(miri) { 200 } else { 50_000 };
        // Insert order: a permutation of 0..n (n is not a multiple of 7919).
        let key_of = move |i: u64| format!("k{:010}", (i * 7919) % n).into_bytes();
        let m = Arc::new(Memtable::new());
        let published = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..3u64)
            .map(|r| {
                let m = Arc::clone(&m);
                let published = Arc::clone(&published);
                std::thread::spawn(move || {
                    let mut rng = 0x1234_5678_9abc_def1u64 ^ r;
                    loop {
                        let p = published.load(Ordering::Acquire);
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        if p > 0 {
                            let i = rng % p;
                            let got = m.get(&key_of(i), MAX_SEQ);
                            assert_eq!(
                                got,
                                Some((ValueKind::Put, (i + 1).to_le_bytes().to_vec())),
                                "key #{i} of {p}"
                            );
                            // A scan from a random point, forward or back,
                            // sees strictly ordered keys.
                            let mut it = m.iter();
                            it.seek(&seek_key(&key_of(i), MAX_SEQ)).unwrap();
                            assert!(it.valid(), "published key #{i} is found by seek");
                            let forward = rng & 1 == 0;
                            let mut last = it.key().to_vec();
                            for _ in 0..64 {
                                if forward {
                                    it.next().unwrap()
                                } else {
                                    it.prev().unwrap()
                                }
                                if !it.valid() {
                                    break;
                                }
                                let ord = crate::key::compare_internal(&last, it.key());
                                assert_eq!(
                                    ord,
                                    if forward {
                                        std::cmp::Ordering::Less
                                    } else {
                                        std::cmp::Ordering::Greater
                                    }
                                );
                                assert_eq!(it.value().len(), 8);
                                last = it.key().to_vec();
                            }
                        }
                        if p == n {
                            // A full scan after the end sees every key once, in order.
                            let mut it = m.iter();
                            it.seek_to_first().unwrap();
                            let mut count = 0;
                            while it.valid() {
                                let uk = crate::key::user_key(it.key());
                                assert_eq!(uk, format!("k{count:010}").as_bytes());
                                count += 1;
                                it.next().unwrap();
                            }
                            assert_eq!(count, n);
                            return;
                        }
                    }
                })
            })
            .collect();
        for i in 0..n {
            m.add(i + 1, ValueKind::Put, &key_of(i), &(i + 1).to_le_bytes())
                .unwrap();
            published.store(i + 1, Ordering::Release);
        }
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(m.len(), n as usize);
    }
}
