//! What a checked write (a transaction's commit, compare-and-swap) asks
//! of the write leader: the keys, and the key ranges, nobody may have
//! written since its snapshot. Checked in [`super::conflict`].

use super::key_range::KeyRange;
use crate::key::SeqNo;

/// Keys and key ranges that nobody may have written after `snapshot` for
/// a write to go ahead.
#[derive(Debug)]
pub(crate) struct Precondition {
    /// The sequence number the writer read at (its snapshot, kept
    /// registered until the check is done so compaction keeps every newer
    /// version of the keys).
    pub snapshot: SeqNo,
    /// Sorted, without duplicates (sorted keys read neighbouring blocks
    /// one after the other).
    pub keys: Vec<Vec<u8>>,
    /// Keys of other keyspaces than the default one, by keyspace id,
    /// sorted likewise.
    pub keyspace_keys: Vec<(u32, Vec<u8>)>,
    /// Key ranges the writer's iterators covered, by keyspace id (0: the
    /// default keyspace): no key in them may have got a version (a put, a
    /// delete, or a range delete over it) after `snapshot`, so a key
    /// inserted into a range the writer scanned is a conflict too.
    pub ranges: Vec<(u32, KeyRange)>,
}
