//! Replaying WALs leniently into new level-0 tables, for `repair`.
//!
//! Every intact record is salvaged, including records after a damaged one
//! (the scanner resynchronises on the record checksums, see
//! [`crate::log::salvage`]): repair keeps the most data, at the price that
//! the result may miss a write in the middle of the history (the damaged
//! record) while keeping later ones. Each record is a whole write batch, so
//! batches stay atomic. Entries whose sequence number is at most
//! `covered_seq` (the newest sequence of the tables kept) are already in a
//! table, since tables only ever hold data of WALs older than the live
//! ones, and are skipped so that no entry is stored twice.

use std::path::Path;
use std::sync::Arc;

use quietio::IoEnv;

use super::{Dropped, RepairReport};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filenames::wal_path;
use crate::key::{SeqNo, MAX_SEQ};
use crate::log::salvage::{salvage_records, Salvaged};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::version::FileMeta;

pub(super) struct Replay<'a> {
    pub env: &'a IoEnv,
    pub dir: &'a Path,
    pub opts: &'a Options,
    pub db_id: u64,
    pub covered_seq: SeqNo,
    pub next_file: &'a mut u64,
    /// Largest sequence number seen in any intact record.
    pub last_seq: SeqNo,
    pub tables: Vec<FileMeta>,
    mem: Arc<Memtable>,
}

impl<'a> Replay<'a> {
    pub fn new(
        env: &'a IoEnv,
        dir: &'a Path,
        opts: &'a Options,
        db_id: u64,
        covered_seq: SeqNo,
        next_file: &'a mut u64,
    ) -> Self {
        Replay {
            env,
            dir,
            opts,
            db_id,
            covered_seq,
            next_file,
            last_seq: 0,
            tables: Vec::new(),
            mem: Arc::new(Memtable::new()),
        }
    }

    /// Replays WAL `number` (call in increasing order), recording what it
    /// salvaged and dropped in `report`.
    pub fn wal(&mut self, number: u64, report: &mut RepairReport) -> Result<()> {
        let path = wal_path(self.dir, number);
        let data =
            std::fs::read(&path).map_err(|e| Error::io(e, "cannot read WAL").with_file(&path))?;
        report.wal_files += 1;
        let mut damage_before = false;
        for item in salvage_records(&data, Some(number)) {
            match item {
                Salvaged::Damaged {
                    offset,
                    len,
                    to_end,
                } => {
                    damage_before = true;
                    let reason = if to_end {
                        "damaged or torn record; no intact record after it"
                    } else {
                        "damaged record; the intact records after it were salvaged"
                    };
                    report
                        .wal_damage
                        .push(Dropped::at(&path, offset, len, reason));
                }
                Salvaged::Record {
                    offset,
                    len: record_len,
                    payload,
                } => {
                    let batch = match WriteBatch::decode(&payload) {
                        Ok(b) => b,
                        Err(e) => {
                            let len = record_len;
                            let reason =
                                format!("record is not a valid write batch: {}", e.message());
                            report
                                .wal_damage
                                .push(Dropped::at(&path, offset, len, reason));
                            continue;
                        }
                    };
                    if batch.is_empty() {
                        continue;
                    }
                    let in_range = batch
                        .sequence()
                        .checked_add(batch.len() as u64 - 1)
                        .is_some_and(|last| last <= MAX_SEQ);
                    if !in_range {
                        let len = record_len;
                        let reason = format!(
                            "record's sequence numbers (from {}, {} entries) exceed the largest",
                            batch.sequence(),
                            batch.len()
                        );
                        report
                            .wal_damage
                            .push(Dropped::at(&path, offset, len, reason));
                        continue;
                    }
                    if self.add(&batch)? {
                        report.wal_records_salvaged += 1;
                        if damage_before {
                            report.wal_records_after_damage += 1;
                        }
                    } else {
                        report.wal_records_in_tables += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// Adds the batch's entries not already in a table; false if there
    /// were none.
    fn add(&mut self, batch: &WriteBatch) -> Result<bool> {
        let mut added = false;
        for (i, e) in batch.iter().enumerate() {
            let seq = batch.sequence() + i as u64;
            self.last_seq = self.last_seq.max(seq);
            if seq <= self.covered_seq {
                continue;
            }
            self.mem.add(seq, e.kind, e.key, e.value)?;
            added = true;
        }
        if self.mem.approximate_bytes() >= self.opts.memtable_size {
            self.flush()?;
        }
        Ok(added)
    }

    /// Writes what is left in memory as a table.
    pub fn flush(&mut self) -> Result<()> {
        let mem = std::mem::replace(&mut self.mem, Arc::new(Memtable::new()));
        let number = *self.next_file;
        if let Some(meta) =
            crate::db::write_l0(self.env, self.dir, self.opts, &mem, number, self.db_id)?
        {
            *self.next_file += 1;
            self.tables.push(meta);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LogWriter;

    /// A record that passes its checksums but carries sequence numbers
    /// past the largest is dropped and reported, not a failed repair.
    #[test]
    fn a_record_with_sequences_out_of_range_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let env = IoEnv::open(d.path(), Options::default().io_options()).unwrap();
        let mut wal = LogWriter::new(Vec::new());
        for (seq, key) in [(1, b"a"), (MAX_SEQ, b"b"), (u64::MAX, b"c"), (2, b"d")] {
            let mut b = WriteBatch::new();
            b.put(key, b"v").unwrap();
            b.put(b"z", b"v").unwrap();
            b.set_sequence(seq);
            wal.add_record(b.data()).unwrap();
        }
        std::fs::write(wal_path(d.path(), 7), wal.into_inner()).unwrap();
        let opts = Options::default();
        let mut next = 10;
        let mut report = RepairReport::default();
        let mut replay = Replay::new(&env, d.path(), &opts, 1, 0, &mut next);
        replay.wal(7, &mut report).unwrap();
        replay.flush().unwrap();
        assert_eq!(report.wal_records_salvaged, 2);
        assert_eq!(report.wal_damage.len(), 2, "{:?}", report.wal_damage);
        assert!(report.wal_damage[0].reason.contains("exceed"));
        assert_eq!(replay.last_seq, 3);
        assert_eq!(replay.tables.len(), 1);
        assert_eq!(replay.tables[0].num_entries, 4);
    }
}
