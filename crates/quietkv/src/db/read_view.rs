//! What a read at a sequence number needs, and nothing more: the current
//! memtables and tables (the super version, swapped by flushes and
//! compactions) and the table cache. The database reads through it, and a
//! [`Snapshot`](crate::Snapshot) holds its own copy, so a snapshot can move
//! to another thread or outlive the borrow of the `Db` it came from.

use std::sync::Arc;

use parking_lot::RwLock;

use super::iter::DbIter;
use super::key_range::KeyRange;
use super::state::{Inner, SuperVersion};
use crate::compaction::CompactionFilter;
use crate::error::Result;
use crate::key::{SeqNo, ValueKind};
use crate::memtable::MemValue;
use crate::table::block::BlockValue;
use crate::table::TableCache;
use crate::value::Value;

/// Shared handles to the state reads consult.
#[derive(Clone)]
pub(crate) struct ReadView {
    pub(crate) super_version: Arc<RwLock<Arc<SuperVersion>>>,
    pub(crate) table_cache: Arc<TableCache>,
    /// The user's filter, whose `hides` reads honour.
    pub(crate) filter: Option<Arc<dyn CompactionFilter>>,
}

impl ReadView {
    pub(crate) fn get_at(&self, key: &[u8], seq: SeqNo) -> Result<Option<Value>> {
        get_at(
            &self.super_version,
            &self.table_cache,
            self.filter.as_deref(),
            key,
            seq,
        )
    }

    pub(crate) fn get_vec_at(&self, key: &[u8], seq: SeqNo) -> Result<Option<Vec<u8>>> {
        get_vec_at(
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

/// The newest value of `key` at sequence number `seq`, read in place: it
/// shares the memtable or the table block it was found in.
pub(crate) fn get_at(
    super_version: &RwLock<Arc<SuperVersion>>,
    table_cache: &TableCache,
    filter: Option<&dyn CompactionFilter>,
    key: &[u8],
    seq: SeqNo,
) -> Result<Option<Value>> {
    lookup(super_version, table_cache, filter, key, seq, |found| {
        found.pin()
    })
}

/// The newest value of `key` at sequence number `seq`, copied once into a
/// `Vec` straight from where it was found: a memtable's value is copied out
/// of its arena without taking a reference on the memtable, which many
/// readers of one memtable would otherwise all contend on.
pub(crate) fn get_vec_at(
    super_version: &RwLock<Arc<SuperVersion>>,
    table_cache: &TableCache,
    filter: Option<&dyn CompactionFilter>,
    key: &[u8],
    seq: SeqNo,
) -> Result<Option<Vec<u8>>> {
    lookup(super_version, table_cache, filter, key, seq, |found| {
        found.bytes().to_vec()
    })
}

/// Where a point read found its entry, the value still in place.
enum Found<'a> {
    Memtable(MemValue<'a>),
    /// A table's entry, with the block it is in.
    Table(BlockValue),
}

impl Found<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Found::Memtable(m) => m.as_slice(),
            Found::Table(v) => v.as_slice(),
        }
    }

    /// The value, sharing what it is in.
    fn pin(self) -> Value {
        match self {
            Found::Memtable(m) => m.pin(),
            Found::Table(v) => v.into_value(),
        }
    }
}

/// The one point-read path, whatever the caller makes of the value: finds
/// the newest entry of `key` at `seq` (borrowing the handles), applies
/// range deletes and the filter's `hides` exactly once for every kind of
/// read, and hands a visible value, still in place, to `take`, which
/// copies or pins it.
fn lookup<T>(
    super_version: &RwLock<Arc<SuperVersion>>,
    table_cache: &TableCache,
    filter: Option<&dyn CompactionFilter>,
    key: &[u8],
    seq: SeqNo,
    take: impl FnOnce(Found<'_>) -> T,
) -> Result<Option<T>> {
    // The caller read the sequence number first, then this reads the
    // state: the state is at least as new, so nothing visible is missed.
    let sv = super_version.read().clone();
    let Some((kind, found_seq, found, tomb)) = newest_entry(&sv, table_cache, key, seq)? else {
        return Ok(None);
    };
    let visible = match kind {
        _ if tomb > found_seq => false,
        ValueKind::Put => !filter.is_some_and(|f| f.hides(key, found.bytes())),
        ValueKind::Delete | ValueKind::RangeDelete => false,
    };
    Ok(visible.then(|| take(found)))
}

/// The newest entry of `key` at `seq` in `sv` (memtables, then tables
/// level by level), and the newest range tombstone at `seq` covering the
/// key in the sources searched.
fn newest_entry<'a>(
    sv: &'a SuperVersion,
    table_cache: &TableCache,
    key: &[u8],
    seq: SeqNo,
) -> Result<Option<(ValueKind, SeqNo, Found<'a>, SeqNo)>> {
    // A version is deleted when a range tombstone covering the key is
    // newer than it; tombstones live in the same sources as versions and,
    // like them, newer sources first, so by the time a version is found
    // every tombstone that may be newer than it has been seen.
    let mut tomb = sv.mem.range_del_seq(key, seq);
    if let Some((kind, found_seq, value)) = sv.mem.get_entry(key, seq) {
        return Ok(Some((kind, found_seq, Found::Memtable(value), tomb)));
    }
    for imm in &sv.imms {
        tomb = tomb.max(imm.range_del_seq(key, seq));
        if let Some((kind, found_seq, value)) = imm.get_entry(key, seq) {
            return Ok(Some((kind, found_seq, Found::Memtable(value), tomb)));
        }
    }
    for (_, file) in sv.version.files_for_get(key) {
        let table = table_cache.get(file)?;
        tomb = tomb.max(table.range_del_seq(key, seq));
        if let Some((kind, found_seq, value)) = table.get_entry(key, seq)? {
            return Ok(Some((kind, found_seq, Found::Table(value), tomb)));
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
        let table = table_cache.get(file)?;
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

impl Inner {
    /// Handles to what reads consult, for the database and its snapshots.
    pub(crate) fn read_view(&self) -> ReadView {
        ReadView {
            super_version: self.super_version.clone(),
            table_cache: self.table_cache.clone(),
            filter: self.opts.compaction_filter.clone(),
        }
    }
}
