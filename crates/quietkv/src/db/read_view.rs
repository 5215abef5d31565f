//! What a read at a sequence number needs, and nothing more: the current
//! memtables and tables (the super version, swapped by flushes and
//! compactions) and the table cache. The database reads through it, and a
//! [`Snapshot`](crate::Snapshot) holds its own copy, so a snapshot can move
//! to another thread or outlive the borrow of the `Db` it came from.

use std::sync::Arc;

use parking_lot::RwLock;

use super::iter::{DbIter, KeyRange};
use super::SuperVersion;
use crate::compaction::CompactionFilter;
use crate::error::Result;
use crate::key::{SeqNo, ValueKind};
use crate::table::TableCache;

/// Shared handles to the state reads consult.
#[derive(Clone)]
pub(crate) struct ReadView {
    pub(crate) super_version: Arc<RwLock<Arc<SuperVersion>>>,
    pub(crate) table_cache: Arc<TableCache>,
    /// The user's filter, whose `hides` reads honour.
    pub(crate) filter: Option<Arc<dyn CompactionFilter>>,
}

impl ReadView {
    pub(crate) fn get_at(&self, key: &[u8], seq: SeqNo) -> Result<Option<Vec<u8>>> {
        get_at(
            &self.super_version,
            &self.table_cache,
            self.filter.as_deref(),
            key,
            seq,
        )
    }

    pub(crate) fn iter_at(&self, range: KeyRange, seq: SeqNo) -> Result<DbIter> {
        iter_at(
            &self.super_version,
            &self.table_cache,
            &self.filter,
            range,
            seq,
        )
    }
}

/// The newest value of `key` at sequence number `seq` (borrowing the
/// handles, so a point read costs no reference counting beyond the super
/// version's).
pub(crate) fn get_at(
    super_version: &RwLock<Arc<SuperVersion>>,
    table_cache: &TableCache,
    filter: Option<&dyn CompactionFilter>,
    key: &[u8],
    seq: SeqNo,
) -> Result<Option<Vec<u8>>> {
    // A version is deleted when a range tombstone covering the key is
    // newer than it; tombstones live in the same sources as versions and,
    // like them, newer sources first, so by the time a version is found
    // every tombstone that may be newer than it has been seen.
    let value_of = |(kind, found_seq, value): (ValueKind, SeqNo, Vec<u8>), tomb: SeqNo| match kind {
        _ if tomb > found_seq => None,
        ValueKind::Put if filter.is_some_and(|f| f.hides(key, &value)) => None,
        ValueKind::Put => Some(value),
        ValueKind::Delete | ValueKind::RangeDelete => None,
    };
    // The caller read the sequence number first, then this reads the
    // state: the state is at least as new, so nothing visible is missed.
    let sv = super_version.read().clone();
    let mut tomb = sv.mem.range_del_seq(key, seq);
    if let Some(found) = sv.mem.get_entry(key, seq) {
        return Ok(value_of(found, tomb));
    }
    for imm in &sv.imms {
        tomb = tomb.max(imm.range_del_seq(key, seq));
        if let Some(found) = imm.get_entry(key, seq) {
            return Ok(value_of(found, tomb));
        }
    }
    for (_, file) in sv.version.files_for_get(key) {
        let table = table_cache.get(&file)?;
        tomb = tomb.max(table.range_del_seq(key, seq));
        if let Some(found) = table.get_entry(key, seq)? {
            return Ok(value_of(found, tomb));
        }
    }
    Ok(None)
}

/// The sequence number of the newest entry of `key` (put or delete) in
/// the memtables and tables, or `None` if none holds it. No value is
/// copied and the bloom filters skip most tables: cheaper than a read.
///
/// Versions newer than a registered snapshot are never compacted away, so
/// for a caller holding one, `None` or a number at or below its sequence
/// means nobody wrote the key since.
pub(crate) fn latest_seq(
    super_version: &RwLock<Arc<SuperVersion>>,
    table_cache: &TableCache,
    key: &[u8],
) -> Result<Option<SeqNo>> {
    let sv = super_version.read().clone();
    for mem in std::iter::once(&sv.mem).chain(&sv.imms) {
        if let Some(seq) = mem.latest_seq(key) {
            return Ok(Some(seq));
        }
    }
    for (_, file) in sv.version.files_for_get(key) {
        let table = table_cache.get(&file)?;
        if let Some(seq) = table.latest_seq(key)? {
            return Ok(Some(seq));
        }
    }
    Ok(None)
}

/// The keys of `range` as of sequence number `seq`.
pub(crate) fn iter_at(
    super_version: &RwLock<Arc<SuperVersion>>,
    table_cache: &Arc<TableCache>,
    filter: &Option<Arc<dyn CompactionFilter>>,
    range: KeyRange,
    seq: SeqNo,
) -> Result<DbIter> {
    let sv = super_version.read().clone();
    DbIter::new(sv, table_cache.clone(), seq, range, filter.clone())
}
