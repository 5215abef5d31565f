//! The user-facing iterator: a merged view of memtables and tables at one
//! sequence number, yielding the newest visible value of each key in key
//! order, from either end. Each level of L1 and deeper is read through a
//! [`LevelIter`], which opens its tables (through the table cache) as it
//! reaches them.

use std::sync::Arc;

use super::key_range::KeyRange;
use super::state::SuperVersion;
use super::visible_iter::{DbIterator, DbRevIterator};
use crate::compaction::CompactionFilter;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_internal, SeqNo, MAX_SEQ};
use crate::merge::MergingIterator;
use crate::range_tombstone::{FragmentSet, RangeTombstone};
use crate::table::{TableCache, TableIterator, TableReader};
use crate::version::FileMeta;

/// Every range tombstone that may delete a key of `range` at `seq`, from
/// the memtables, the (open) L0 tables and the deeper tables the manifest
/// says hold some; `None` when there is none, so a database that never
/// range-deleted pays nothing more per key.
fn collect_range_dels(
    sv: &SuperVersion,
    cache: &TableCache,
    l0: &[Arc<TableReader>],
    range: &KeyRange,
    seq: SeqNo,
) -> Result<Option<Arc<FragmentSet>>> {
    let mut all: Vec<RangeTombstone> = sv.mem.range_tombstones();
    for imm in &sv.imms {
        all.extend(imm.range_tombstones());
    }
    for t in l0 {
        all.extend_from_slice(t.range_tombstones());
    }
    for level in 1..crate::version::NUM_LEVELS {
        for f in sv.version.files(level) {
            if f.num_range_deletes > 0 && f.overlaps(range.lower(), range.upper()) {
                all.extend_from_slice(cache.get(f)?.range_tombstones());
            }
        }
    }
    if all.is_empty() {
        return Ok(None);
    }
    let set = FragmentSet::new(&all, seq);
    Ok((!set.is_empty()).then(|| Arc::new(set)))
}

/// Ordered `(key, value)` pairs of a database or a [`Snapshot`](crate::Snapshot),
/// from [`Db::iter`](crate::Db::iter), [`Db::range`](crate::Db::range) or
/// [`Db::prefix`](crate::Db::prefix).
///
/// It reads the state it was created from: later writes are not seen, and
/// the tables it reads are kept until it is dropped. It is double-ended:
/// [`rev`](Iterator::rev) walks the range backwards, and `next` and
/// `next_back` can be mixed; they meet in the middle, each key yielded
/// once. A read error is yielded as an `Err` item, after which the
/// iterator ends.
///
/// As an [`Iterator`] each item is an owned pair (two allocations, like
/// `Vec`-returning `get`). Items a standard iterator yields must outlive
/// the next call, so they cannot borrow the iterator's buffers, and keys
/// are prefix-compressed in their blocks, so a shared-slice item type would
/// still copy the key while pinning a whole block per item. For scans where
/// that copy matters, [`next_ref`](Self::next_ref) and
/// [`next_back_ref`](Self::next_back_ref) lend the current pair without
/// allocating; it is valid until the next call.
///
/// ```
/// # fn main() -> quietkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = quietkv::Db::open(dir.path(), quietkv::Options::default())?;
/// for k in [b"a1", b"a2", b"b1"] {
///     db.put(k, b"v")?;
/// }
/// let mut it = db.prefix(b"a")?;
/// let mut bytes = 0;
/// while let Some(item) = it.next_ref() {
///     let (key, value) = item?; // borrowed, no allocation
///     bytes += key.len() + value.len();
/// }
/// assert_eq!(bytes, 6);
/// # Ok(())
/// # }
/// ```
pub struct DbIter {
    sv: Arc<SuperVersion>,
    cache: Arc<TableCache>,
    /// L0 tables, newest first, opened when the iterator was created.
    l0: Vec<Arc<TableReader>>,
    /// The largest sequence number of each of `l0`.
    l0_newest: Vec<SeqNo>,
    seq: SeqNo,
    range: KeyRange,
    /// The cursor `next` moves; created on the first call. While it exists
    /// and is valid it stands on the last key it yielded.
    front: Option<DbIterator<MergingIterator>>,
    /// The cursor `next_back` moves, likewise.
    back: Option<DbRevIterator<MergingIterator>>,
    done: bool,
    /// Newest values the user's filter hides read as deletes.
    hide: Option<Arc<dyn CompactionFilter>>,
    /// The range tombstones over the range visible at `seq`, if any.
    range_dels: Option<Arc<FragmentSet>>,
}

impl DbIter {
    pub(crate) fn new(
        sv: Arc<SuperVersion>,
        cache: Arc<TableCache>,
        seq: SeqNo,
        range: KeyRange,
        hide: Option<Arc<dyn CompactionFilter>>,
    ) -> Result<DbIter> {
        // L0 newest first (highest file number).
        let mut files: Vec<_> = sv.version.files(0).to_vec();
        files.sort_by_key(|f| std::cmp::Reverse(f.number));
        let l0 = files
            .iter()
            .map(|f| cache.get(f))
            .collect::<Result<Vec<_>>>()?;
        let l0_newest = files.iter().map(|f| f.largest_seq).collect();
        let done = range.is_empty();
        let range_dels = collect_range_dels(&sv, &cache, &l0, &range, seq)?;
        Ok(DbIter {
            sv,
            cache,
            l0,
            l0_newest,
            seq,
            range,
            front: None,
            back: None,
            done,
            hide,
            range_dels,
        })
    }

    /// Memtables newest first, then L0 newest first, then one lazy
    /// iterator per level, each with the newest sequence number it can
    /// hold, so that inside a range tombstone the sources older than it
    /// skip the keys it deletes instead of reading them.
    fn merged(&self) -> MergingIterator {
        let sv = &self.sv;
        let mut children: Vec<Box<dyn InternalIterator + Send>> = Vec::new();
        // The active memtable still takes writes: no bound.
        let mut newest = vec![MAX_SEQ];
        children.push(Box::new(sv.mem.iter()));
        for imm in &sv.imms {
            children.push(Box::new(imm.iter()));
            newest.push(imm.largest_seq());
        }
        for (t, &seq) in self.l0.iter().zip(&self.l0_newest) {
            children.push(Box::new(t.iter()));
            newest.push(seq);
        }
        for level in 1..crate::version::NUM_LEVELS {
            let files = sv.version.files(level);
            if !files.is_empty() {
                children.push(Box::new(LevelIter::new(files.to_vec(), self.cache.clone())));
                newest.push(files.iter().map(|f| f.largest_seq).max().unwrap_or(MAX_SEQ));
            }
        }
        MergingIterator::new(children).with_newest_seqs(newest)
    }

    fn step_front(&mut self) -> Result<bool> {
        match &mut self.front {
            Some(f) => f.next()?,
            None => {
                let mut f = DbIterator::new(
                    self.merged(),
                    self.seq,
                    self.range.upper().map(<[u8]>::to_vec),
                )
                .hiding(self.hide.clone())
                .with_range_dels(self.range_dels.clone());
                match self.range.lower() {
                    Some(k) => f.seek(k)?,
                    None => f.seek_to_first()?,
                }
                self.front = Some(f);
            }
        }
        let f = self.front.as_ref().expect("just set");
        let crossed = self
            .back
            .as_ref()
            .is_some_and(|b| b.valid() && f.valid() && f.key() >= b.key());
        Ok(f.valid() && !crossed)
    }

    fn step_back(&mut self) -> Result<bool> {
        match &mut self.back {
            Some(b) => b.prev()?,
            None => {
                let mut b = DbRevIterator::new(
                    self.merged(),
                    self.seq,
                    self.range.lower().map(<[u8]>::to_vec),
                )
                .hiding(self.hide.clone())
                .with_range_dels(self.range_dels.clone());
                match self.range.upper() {
                    Some(k) => b.seek_before(k)?,
                    None => b.seek_to_last()?,
                }
                self.back = Some(b);
            }
        }
        let b = self.back.as_ref().expect("just set");
        let crossed = self
            .front
            .as_ref()
            .is_some_and(|f| f.valid() && b.valid() && b.key() <= f.key());
        Ok(b.valid() && !crossed)
    }

    /// Runs one step; ends the iteration on the end, a crossing or an error.
    fn step(&mut self, front: bool) -> Option<Result<()>> {
        if self.done {
            return None;
        }
        let r = if front {
            self.step_front()
        } else {
            self.step_back()
        };
        match r {
            Ok(true) => Some(Ok(())),
            Ok(false) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// The next pair from the front, borrowed until the next call: no
    /// allocation per item.
    ///
    /// An item is `Err` (`Corruption` naming the table and offset, or `Io`)
    /// if a block could not be read; the iteration ends after it.
    pub fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        match self.step(true)? {
            Ok(()) => {
                let f = self.front.as_ref().expect("stepped");
                Some(Ok((f.key(), f.value())))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// The next pair from the back, borrowed until the next call.
    pub fn next_back_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        match self.step(false)? {
            Ok(()) => {
                let b = self.back.as_ref().expect("stepped");
                Some(Ok((b.key(), b.value())))
            }
            Err(e) => Some(Err(e)),
        }
    }
}

fn owned(item: Result<(&[u8], &[u8])>) -> Result<(Vec<u8>, Vec<u8>)> {
    item.map(|(k, v)| (k.to_vec(), v.to_vec()))
}

impl Iterator for DbIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_ref().map(owned)
    }
}

impl DoubleEndedIterator for DbIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_back_ref().map(owned)
    }
}

impl std::iter::FusedIterator for DbIter {}

impl std::fmt::Debug for DbIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIter")
            .field("sequence", &self.seq)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}

/// User-read iterator over a level; opens tables lazily as it reaches them.
pub(crate) struct LevelIter {
    files: Vec<Arc<FileMeta>>,
    cache: Arc<TableCache>,
    index: usize,
    current: Option<TableIterator>,
}

impl LevelIter {
    pub(crate) fn new(files: Vec<Arc<FileMeta>>, cache: Arc<TableCache>) -> Self {
        LevelIter {
            index: files.len(),
            files,
            cache,
            current: None,
        }
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.index = index;
        self.current = match self.files.get(index) {
            Some(f) => Some(self.cache.get(f)?.iter()),
            None => None,
        };
        Ok(())
    }

    /// Moves to following tables while the current one is exhausted.
    fn skip_empty(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            self.open(self.index + 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }
}

impl LevelIter {
    /// Moves to preceding tables while the current one is exhausted.
    fn skip_empty_back(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            let Some(index) = self.index.checked_sub(1) else {
                self.current = None;
                return Ok(());
            };
            self.open(index)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_empty()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .files
            .partition_point(|f| compare_internal(&f.largest, target).is_lt());
        self.open(i)?;
        if let Some(c) = self.current.as_mut() {
            c.seek(target)?;
        }
        self.skip_empty()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_empty()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let Some(last) = self.files.len().checked_sub(1) else {
            self.current = None;
            return Ok(());
        };
        self.open(last)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last()?;
        }
        self.skip_empty_back()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.skip_empty_back()
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().expect("valid").key()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().expect("valid").value()
    }
}
