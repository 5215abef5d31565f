//! Snapshots: a sequence number that compaction must keep readable.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::SeqNo;

/// The registry of live snapshots, consulted by compaction.
#[derive(Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    pub(crate) fn acquire(self: &Arc<Self>, seq: SeqNo) -> Snapshot {
        *self.live.lock().entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            list: self.clone(),
        }
    }

    fn release(&self, seq: SeqNo) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                live.remove(&seq);
            }
        }
    }

    /// Sequence numbers of live snapshots, ascending.
    pub(crate) fn sequences(&self) -> Vec<SeqNo> {
        self.live.lock().keys().copied().collect()
    }
}

/// A consistent read view: reads through it see the database as it was
/// when it was taken. Dropping it lets compaction discard old versions.
pub struct Snapshot {
    seq: SeqNo,
    list: Arc<SnapshotList>,
}

impl Snapshot {
    pub fn sequence(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.release(self.seq);
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot({})", self.seq)
    }
}
