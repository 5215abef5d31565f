//! What the manifest says about WAL files, so that recovery and `check`
//! can tell a WAL that was lost or damaged from one a crash cut short.
//!
//! Two kinds of manifest entries track WALs:
//!
//! * `live_wal`: the WAL writes now go to. It is recorded once the file's
//!   creation is durable (the directory was synced), so it must exist until
//!   the log number moves past it: a missing live WAL is corruption, not an
//!   empty log.
//! * `sealed_wals`: a WAL closed for appends with every record synced, and
//!   its exact length: at a memtable switch (the old WAL) and at a clean
//!   close (the live WAL). Recovery reads a sealed WAL strictly to that
//!   length, so truncation, deletion or a damaged record anywhere in it is
//!   corruption.
//!
//! What is left unverifiable is the unsynced tail of the live WAL after a
//! crash, which may be dropped; within it, records followed by a sync mark
//! are still checked strictly (see [`crate::record_log`]).

use std::collections::BTreeMap;

use crate::version::VersionEdit;

/// The WAL state a sequence of manifest edits describes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalSet {
    log_number: u64,
    live: Option<u64>,
    sealed: BTreeMap<u64, u64>,
}

/// A WAL the manifest says must be replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequiredWal {
    pub number: u64,
    /// `Some(len)` if it was sealed at exactly `len` bytes.
    pub sealed_len: Option<u64>,
}

impl WalSet {
    /// The state right after open: WAL `number` is live and the only one
    /// needed.
    pub fn starting_at(number: u64) -> WalSet {
        WalSet {
            log_number: number,
            live: Some(number),
            sealed: BTreeMap::new(),
        }
    }

    /// Applies one manifest edit, in order.
    pub fn apply(&mut self, edit: &VersionEdit) {
        if let Some(n) = edit.log_number {
            self.log_number = n;
        }
        if let Some(n) = edit.live_wal {
            self.live = Some(n);
        }
        for &(n, len) in &edit.sealed_wals {
            self.sealed.insert(n, len);
        }
        // WALs older than the log number are in tables: forget them so the
        // state stays small on a long-lived manifest.
        let keep = self.sealed.split_off(&self.log_number);
        self.sealed = keep;
    }

    /// WALs older than this hold nothing that is not in a table.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The WAL writes go to, as last recorded (it may have fallen behind
    /// the log number, when nothing requires it any more).
    pub fn live(&self) -> Option<u64> {
        self.live
    }

    /// The sealed WALs at or after the log number and their lengths,
    /// oldest first: with [`Self::log_number`] and [`Self::live`], all a
    /// fresh manifest must record to require the same WALs as this one.
    pub fn sealed(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.sealed.iter().map(|(&n, &len)| (n, len))
    }

    /// The length WAL `number` was sealed at, if it was.
    pub fn sealed_len(&self, number: u64) -> Option<u64> {
        self.sealed.get(&number).copied()
    }

    /// Every WAL at or after the log number that the manifest knows exists,
    /// oldest first.
    pub fn required(&self) -> Vec<RequiredWal> {
        let mut out: Vec<RequiredWal> = self
            .sealed
            .iter()
            .map(|(&number, &len)| RequiredWal {
                number,
                sealed_len: Some(len),
            })
            .collect();
        if let Some(live) = self.live.filter(|&n| n >= self.log_number) {
            if !self.sealed.contains_key(&live) {
                out.push(RequiredWal {
                    number: live,
                    sealed_len: None,
                });
            }
        }
        out.sort_by_key(|w| w.number);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(f: impl FnOnce(&mut VersionEdit)) -> VersionEdit {
        let mut e = VersionEdit::new();
        f(&mut e);
        e
    }

    #[test]
    fn tracks_live_and_sealed_wals_until_the_log_number_passes() {
        let mut w = WalSet::default();
        w.apply(&edit(|e| {
            e.log_number = Some(4);
            e.live_wal = Some(4);
        }));
        assert_eq!(
            w.required(),
            vec![RequiredWal {
                number: 4,
                sealed_len: None
            }]
        );
        // Memtable switch: 4 sealed, 7 live.
        w.apply(&edit(|e| {
            e.sealed_wals.push((4, 1000));
            e.live_wal = Some(7);
        }));
        assert_eq!(w.sealed_len(4), Some(1000));
        assert_eq!(w.required().len(), 2);
        // Flush of 4's memtable.
        w.apply(&edit(|e| e.log_number = Some(7)));
        assert_eq!(w.sealed_len(4), None);
        assert_eq!(
            w.required(),
            vec![RequiredWal {
                number: 7,
                sealed_len: None
            }]
        );
        // Clean close seals the live WAL.
        w.apply(&edit(|e| e.sealed_wals.push((7, 55))));
        assert_eq!(
            w.required(),
            vec![RequiredWal {
                number: 7,
                sealed_len: Some(55)
            }]
        );
    }

    #[test]
    fn the_accessors_rebuild_a_set_that_requires_the_same_wals() {
        let mut w = WalSet::default();
        w.apply(&edit(|e| {
            e.log_number = Some(4);
            e.live_wal = Some(4);
        }));
        w.apply(&edit(|e| {
            e.sealed_wals.push((4, 1000));
            e.live_wal = Some(7);
        }));
        w.apply(&edit(|e| {
            e.sealed_wals.push((7, 300));
            e.live_wal = Some(9);
        }));
        w.apply(&edit(|e| e.log_number = Some(7)));
        assert_eq!(w.sealed().collect::<Vec<_>>(), vec![(7, 300)]);
        assert_eq!(w.live(), Some(9));
        let mut rebuilt = WalSet::default();
        rebuilt.apply(&edit(|e| {
            e.log_number = Some(w.log_number());
            e.live_wal = w.live();
            e.sealed_wals = w.sealed().collect();
        }));
        assert_eq!(rebuilt, w);
    }

    #[test]
    fn a_manifest_without_wal_entries_requires_nothing() {
        let mut w = WalSet::default();
        w.apply(&edit(|e| e.log_number = Some(9)));
        assert!(w.required().is_empty());
        assert_eq!(w.log_number(), 9);
    }
}
