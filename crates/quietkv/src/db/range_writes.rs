//! Whether anything was written into a key range after a sequence number:
//! what a transaction's commit asks of each range its iterators covered.
//!
//! Versions newer than a registered snapshot are never compacted away (nor
//! range tombstones newer than it), so for a caller holding one, a write
//! into the range since the snapshot is still there as an entry with a
//! higher sequence number: a put or delete of a key in the range, or a
//! range tombstone overlapping it. Only sources that can hold one are
//! read: a memtable or table whose highest sequence number is at or below
//! the snapshot is skipped without being read (for a table, the manifest
//! says so), so a range nobody wrote near costs no I/O. A memtable or table
//! that has a newer entry somewhere is read over the range, every version
//! in it, old ones too: the cost is the size of the range in the sources
//! written since the snapshot (the memtables, and the tables flushed or
//! compacted since), not in the whole database.

use std::sync::Arc;

use super::key_range::KeyRange;
use super::state::SuperVersion;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, seek_key, SeqNo, MAX_SEQ};
use crate::memtable::Memtable;
use crate::range_tombstone::RangeTombstone;
use crate::table::TableCache;
use crate::version::{FileMeta, NUM_LEVELS};

/// A write into a range after the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RangeWrite {
    /// A put or a delete of `key`.
    Key { key: Vec<u8>, seq: SeqNo },
    /// A range delete of `[begin, end)` that overlaps the range.
    RangeDelete {
        begin: Vec<u8>,
        end: Vec<u8>,
        seq: SeqNo,
    },
}

/// A write into `range` with a sequence number above `snapshot` in `sv`
/// (the first one found), or `None` if there is none.
pub(crate) fn write_after(
    sv: &SuperVersion,
    cache: &TableCache,
    range: &KeyRange,
    snapshot: SeqNo,
) -> Result<Option<RangeWrite>> {
    for mem in std::iter::once(&sv.mem).chain(&sv.imms) {
        if let Some(w) = in_memtable(mem, range, snapshot)? {
            return Ok(Some(w));
        }
    }
    for level in 0..NUM_LEVELS {
        for file in files_in(sv, level, range) {
            if file.largest_seq <= snapshot {
                continue;
            }
            let table = cache.get(&file)?;
            if let Some(w) = newer_tombstone(table.range_tombstones(), range, snapshot) {
                return Ok(Some(w));
            }
            if let Some(w) = newer_entry(&mut table.iter(), range, snapshot)? {
                return Ok(Some(w));
            }
        }
    }
    Ok(None)
}

/// A write into `range` above `snapshot` in memtable `mem`.
fn in_memtable(
    mem: &Arc<Memtable>,
    range: &KeyRange,
    snapshot: SeqNo,
) -> Result<Option<RangeWrite>> {
    if mem.largest_seq() <= snapshot {
        return Ok(None);
    }
    if let Some(w) = newer_tombstone(&mem.range_tombstones(), range, snapshot) {
        return Ok(Some(w));
    }
    newer_entry(&mut mem.iter(), range, snapshot)
}

/// The files of `level` whose key range (which includes their range
/// tombstones) meets `range`.
fn files_in(sv: &SuperVersion, level: usize, range: &KeyRange) -> Vec<Arc<FileMeta>> {
    // `overlaps` takes an inclusive end: a file that starts exactly at the
    // range's (exclusive) end is read needlessly but finds nothing.
    if level == 0 {
        // L0 files overlap each other: look at each (the version's own
        // overlap search widens the range, which is for compactions).
        sv.version
            .files(0)
            .iter()
            .filter(|f| f.overlaps(range.lower(), range.upper()))
            .cloned()
            .collect()
    } else {
        sv.version
            .overlapping_files(level, range.lower(), range.upper())
    }
}

/// A range tombstone newer than `snapshot` that deletes some key of
/// `range`.
fn newer_tombstone(
    tombstones: &[RangeTombstone],
    range: &KeyRange,
    snapshot: SeqNo,
) -> Option<RangeWrite> {
    tombstones
        .iter()
        .find(|t| {
            let starts_before_end = range.upper().is_none_or(|u| t.begin.as_slice() < u);
            let ends_after_start = range.lower().is_none_or(|l| l < t.end.as_slice());
            t.seq > snapshot && starts_before_end && ends_after_start
        })
        .map(|t| RangeWrite::RangeDelete {
            begin: t.begin.clone(),
            end: t.end.clone(),
            seq: t.seq,
        })
}

/// A point entry (put or delete) in `range` newer than `snapshot`, read
/// from `it` (a memtable's or a table's entries).
fn newer_entry(
    it: &mut dyn InternalIterator,
    range: &KeyRange,
    snapshot: SeqNo,
) -> Result<Option<RangeWrite>> {
    match range.lower() {
        // The newest entry of the first key sorts first.
        Some(lower) => it.seek(&seek_key(lower, MAX_SEQ))?,
        None => it.seek_to_first()?,
    }
    while it.valid() {
        let p = parse_internal_key(it.key())?;
        if range.upper().is_some_and(|u| p.user_key >= u) {
            break;
        }
        if p.seq > snapshot {
            return Ok(Some(RangeWrite::Key {
                key: p.user_key.to_vec(),
                seq: p.seq,
            }));
        }
        it.next()?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ValueKind;

    fn range(lower: &[u8], upper: &[u8]) -> KeyRange {
        KeyRange::new(Some(lower.to_vec()), Some(upper.to_vec()))
    }

    fn key(key: &[u8], seq: SeqNo) -> Option<RangeWrite> {
        Some(RangeWrite::Key {
            key: key.to_vec(),
            seq,
        })
    }

    #[test]
    fn only_entries_in_the_range_and_above_the_snapshot_count() {
        let mem = Arc::new(Memtable::new());
        mem.add(5, ValueKind::Put, b"b", b"old").unwrap();
        mem.add(9, ValueKind::Put, b"a", b"new").unwrap();
        mem.add(10, ValueKind::Delete, b"d", b"").unwrap();
        mem.add(11, ValueKind::Put, b"f", b"new").unwrap();
        let at = |r: &KeyRange, s| in_memtable(&mem, r, s).unwrap();
        // "b" is old, "a" and "f" are outside.
        assert_eq!(at(&range(b"b", b"d"), 8), None);
        // The delete of "d" is a write; the range's start is included.
        assert_eq!(at(&range(b"d", b"f"), 8), key(b"d", 10));
        assert_eq!(at(&range(b"b", b"f"), 8), key(b"d", 10));
        assert_eq!(at(&range(b"b", b"f"), 10), None);
        // Unbounded on either side.
        assert_eq!(
            at(&KeyRange::new(None, Some(b"b".to_vec())), 8),
            key(b"a", 9)
        );
        assert_eq!(
            at(&KeyRange::new(Some(b"e".to_vec()), None), 8),
            key(b"f", 11)
        );
        // Nothing newer than the snapshot anywhere: skipped unread.
        assert_eq!(at(&KeyRange::default(), 11), None);
    }

    #[test]
    fn an_old_version_of_a_key_does_not_hide_a_newer_one_behind_it() {
        // Entries of one key sort newest first: the scan must not stop at
        // the first key's old version when a later key is new.
        let mem = Arc::new(Memtable::new());
        mem.add(3, ValueKind::Put, b"a", b"old").unwrap();
        mem.add(2, ValueKind::Put, b"a", b"older").unwrap();
        mem.add(12, ValueKind::Put, b"a\0", b"new").unwrap();
        assert_eq!(
            in_memtable(&mem, &range(b"a", b"b"), 5).unwrap(),
            key(b"a\0", 12)
        );
    }

    #[test]
    fn a_newer_range_delete_overlapping_the_range_counts() {
        let mem = Arc::new(Memtable::new());
        mem.add(4, ValueKind::RangeDelete, b"a", b"c").unwrap();
        mem.add(9, ValueKind::RangeDelete, b"m", b"p").unwrap();
        let at = |r: &KeyRange| in_memtable(&mem, r, 5).unwrap();
        let newer = Some(RangeWrite::RangeDelete {
            begin: b"m".to_vec(),
            end: b"p".to_vec(),
            seq: 9,
        });
        assert_eq!(at(&range(b"o", b"z")), newer);
        assert_eq!(at(&range(b"a", b"n")), newer);
        assert_eq!(at(&KeyRange::default()), newer);
        // Touching only at the exclusive ends is no overlap.
        assert_eq!(at(&range(b"p", b"z")), None);
        assert_eq!(at(&range(b"a", b"m")), None, "the one at 4 is older");
    }
}
