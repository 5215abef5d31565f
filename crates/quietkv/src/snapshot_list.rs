//! The registry of live snapshots: the sequence numbers compaction must
//! keep readable. Separate from [`crate::snapshot`] (the read view a user
//! holds), so the database state can hold it without importing readers.

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
    pub(crate) fn acquire(self: &Arc<Self>, seq: SeqNo) -> Registration {
        *self.live.lock().entry(seq).or_insert(0) += 1;
        Registration {
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

/// One entry in [`SnapshotList`], removed when dropped.
pub(crate) struct Registration {
    seq: SeqNo,
    list: Arc<SnapshotList>,
}

impl Registration {
    /// The sequence number it keeps readable.
    pub(crate) fn seq(&self) -> SeqNo {
        self.seq
    }

    /// Another registration of the same sequence number (a cloned
    /// snapshot).
    pub(crate) fn acquire_again(&self) -> Registration {
        self.list.acquire(self.seq)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.list.release(self.seq);
    }
}
