//! Size estimates from what the engine already keeps in memory (table
//! metadata and indexes), for dashboards and capacity planning: no data
//! block is read.

use std::ops::RangeBounds;

use super::key_range::KeyRange;
use super::state::SuperVersion;
use super::Db;
use crate::error::Result;
use crate::key::user_key;
use crate::table::TableCache;
use crate::table::TableReader;
use crate::version::NUM_LEVELS;
use parking_lot::RwLock;
use std::sync::Arc;

impl Db {
    /// An estimate of the number of keys, from table metadata and the
    /// memtables' entry counts. Every stored version counts until
    /// compaction merges it away (an overwritten key counts twice, a
    /// deleted one counts its put and subtracts its delete), so it can run
    /// ahead of the truth between compactions; after
    /// [`compact_all`](Db::compact_all) with no snapshot held and nothing
    /// written since, it is exact.
    pub fn approximate_len(&self) -> u64 {
        approximate_len_of(&self.inner.super_version)
    }

    /// An estimate of the bytes on disk the keys in `range` take: whole
    /// tables inside the range, and for a table the range cuts, the part
    /// of it between the blocks holding the range's ends (found in the
    /// table's index, which is in memory). Memtables are not counted: call
    /// [`flush`](Db::flush) first to include the latest writes.
    ///
    /// # Errors
    ///
    /// As [`Db::get`]: opening a table that is not open yet reads its
    /// footer and index.
    pub fn approximate_size<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<u64> {
        approximate_size_of(
            &self.inner.super_version,
            &self.inner.table_cache,
            KeyRange::from_bounds(&range),
        )
    }
}

/// [`Db::approximate_len`] of the keyspace whose reader view is `sv`.
pub(crate) fn approximate_len_of(sv: &RwLock<Arc<SuperVersion>>) -> u64 {
    let sv = sv.read().clone();
    let mut n: i128 = 0;
    for mem in std::iter::once(&sv.mem).chain(&sv.imms) {
        n += mem.len() as i128;
    }
    for level in 0..NUM_LEVELS {
        for f in sv.version.files(level) {
            n += f.num_entries as i128 - 2 * f.num_deletes as i128;
        }
    }
    n.max(0) as u64
}

/// [`Db::approximate_size`] of the keyspace whose reader view is `sv`.
pub(crate) fn approximate_size_of(
    sv: &RwLock<Arc<SuperVersion>>,
    table_cache: &TableCache,
    range: KeyRange,
) -> Result<u64> {
    let (lower, upper) = (range.lower(), range.upper());
    let sv = sv.read().clone();
    let mut bytes = 0;
    for level in 0..NUM_LEVELS {
        for f in sv.version.overlapping_files(level, lower, upper) {
            let inside_lower = lower.is_none_or(|l| f.smallest_user_key() >= l);
            let inside_upper = upper.is_none_or(|u| f.largest_user_key() < u);
            if inside_lower && inside_upper {
                bytes += f.size;
                continue;
            }
            let table = table_cache.get(&f)?;
            let from = lower.map_or(0, |l| offset_of(&table, l));
            let to = upper.map_or(table.index().data_end(), |u| offset_of(&table, u));
            bytes += to.saturating_sub(from);
        }
    }
    Ok(bytes)
}

/// Where the block that would hold `key` starts in the table: the first
/// block whose last key is at or after `key`; the end of the data if none.
fn offset_of(table: &TableReader, key: &[u8]) -> u64 {
    let index = table.index();
    let i = index.partition_point(|last_key| user_key(last_key) < key);
    index.handle(i).map_or(index.data_end(), |h| h.offset)
}
