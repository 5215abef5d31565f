//! What a checked write (a transaction's commit, compare-and-swap) asks
//! of the write leader: the keys nobody may have written since its
//! snapshot. Checked in [`super::conflict`].

use crate::key::SeqNo;

/// Keys that nobody may have written after `snapshot` for a write to go
/// ahead.
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
}
