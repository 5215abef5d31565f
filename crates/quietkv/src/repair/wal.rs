//! Replaying WALs leniently into new level-0 tables, for `repair`.
//!
//! Every intact record is salvaged, including records after a damaged one
//! (the scanner resynchronises on the record checksums, see
//! [`crate::record_log::salvage`]): repair keeps the most data, at the price that
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
use crate::check::FileSource;
use crate::error::Result;
use crate::filenames::wal_path;
use crate::key::{SeqNo, ValueKind, MAX_SEQ};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::record_log::salvage::{salvage_records, Salvaged};
use crate::record_log::IdentityRule;
use crate::table::TableReader;
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

    /// Replays WAL `number`, whose bytes are `data` (call in increasing
    /// order), recording what it salvaged and dropped in `report`.
    /// `Some(why)` (and nothing replayed) if the WAL is not this
    /// database's by `rule` (see the module docs).
    pub fn wal(
        &mut self,
        number: u64,
        data: &[u8],
        rule: IdentityRule,
        in_tables: &mut KeptTables<'_>,
        report: &mut RepairReport,
    ) -> Result<Option<String>> {
        let path = wal_path(self.dir, number);
        let items = salvage_records(data, Some(number));
        match items.first() {
            Some(Salvaged::Identity {
                offset: 0,
                identity: Ok(id),
            }) => {
                if let Some(why) = rule.mismatch(number, id) {
                    return Ok(Some(why));
                }
            }
            Some(Salvaged::Identity {
                offset: 0,
                identity: Err(why),
            }) => {
                return Ok(Some(format!(
                    "its first record is an identity record that names no WAL ({why})"
                )))
            }
            Some(Salvaged::Record { .. }) => {
                if let Some(why) = rule.missing() {
                    return Ok(Some(why));
                }
            }
            // Damage where the identity record would be: whose the
            // records after it are cannot be proven either way; they are
            // salvaged, and must still fit the kept tables.
            _ => {}
        }
        report.wal_files += 1;
        let mut damage_before = false;
        for item in items {
            match item {
                Salvaged::Identity { offset, .. } => {
                    if offset != 0 {
                        report.wal_damage.push(Dropped::at(
                            &path,
                            offset,
                            0,
                            "an identity record after the start of the WAL (ignored)",
                        ));
                    }
                }
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
                    match self.add(&batch, in_tables)? {
                        Fit::Added => {
                            report.wal_records_salvaged += 1;
                            if damage_before {
                                report.wal_records_after_damage += 1;
                            }
                        }
                        Fit::InTables => report.wal_records_in_tables += 1,
                        Fit::Misfit { seq } => {
                            let reason = format!(
                                "record's sequence number {seq} is at or below the newest kept table's ({}), yet no kept table holds its entry: it does not fit the manifest, and replayed into level 0 it would hide newer values",
                                self.covered_seq
                            );
                            report
                                .wal_damage
                                .push(Dropped::at(&path, offset, record_len, reason));
                        }
                    }
                }
            }
        }
        Ok(None)
    }

    /// Adds the batch's entries not already in a table. An entry at or
    /// below `covered_seq` must be in a kept table; if one is not, nothing
    /// of the batch is added.
    fn add(&mut self, batch: &WriteBatch, in_tables: &mut KeptTables<'_>) -> Result<Fit> {
        for (i, e) in batch.iter().enumerate() {
            let seq = batch.sequence() + i as u64;
            self.last_seq = self.last_seq.max(seq);
            if seq <= self.covered_seq && !in_tables.holds(e.key, seq, e.kind, e.value)? {
                return Ok(Fit::Misfit { seq });
            }
        }
        let mut added = false;
        for (i, e) in batch.iter().enumerate() {
            let seq = batch.sequence() + i as u64;
            if seq <= self.covered_seq {
                continue;
            }
            self.mem.add(seq, e.kind, e.key, e.value)?;
            added = true;
        }
        if self.mem.approximate_bytes() >= self.opts.memtable_size {
            self.flush()?;
        }
        Ok(if added { Fit::Added } else { Fit::InTables })
    }

    /// Writes what is left in memory as a table.
    pub fn flush(&mut self) -> Result<()> {
        let mem = std::mem::replace(&mut self.mem, Arc::new(Memtable::new()));
        let number = *self.next_file;
        if let Some(meta) = crate::db::write_l0(
            self.env,
            self.dir,
            self.opts,
            self.opts.table_options(),
            &mem,
            &[],
            number,
            self.db_id,
            self.opts.io_depth,
            None,
        )? {
            *self.next_file += 1;
            self.tables.push(meta);
        }
        Ok(())
    }
}

/// How a WAL record relates to the kept tables.
enum Fit {
    /// Some of its entries were new and went into the memtable.
    Added,
    /// Every entry is already in a kept table.
    InTables,
    /// The entry at `seq` is at or below the kept tables' newest sequence
    /// number, yet no kept table holds it.
    Misfit { seq: SeqNo },
}

/// The tables a repair keeps, opened on demand to ask whether they hold a
/// WAL entry.
pub(super) struct KeptTables<'a> {
    tables: Vec<(FileMeta, Option<Arc<TableReader>>)>,
    dir: &'a Path,
    env: &'a IoEnv,
}

impl<'a> KeptTables<'a> {
    pub(super) fn new(env: &'a IoEnv, dir: &'a Path, kept: &[(usize, FileMeta)]) -> Self {
        KeptTables {
            tables: kept.iter().map(|(_, m)| (m.clone(), None)).collect(),
            dir,
            env,
        }
    }

    /// Whether a kept table holds `key` with this kind and value as of
    /// `seq` (the entry itself, or an older one that reads the same).
    fn holds(&mut self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> Result<bool> {
        for (meta, reader) in &mut self.tables {
            if !meta.contains_user_key(key) || meta.smallest_seq > seq {
                continue;
            }
            if reader.is_none() {
                let path = crate::filenames::table_path(self.dir, meta.number);
                let src = FileSource::open(Some(self.env), &path)?;
                *reader = Some(Arc::new(TableReader::open(
                    Arc::new(src),
                    meta.number,
                    None,
                )?));
            }
            let table = reader.as_ref().expect("opened above");
            if kind == ValueKind::RangeDelete {
                // The tombstone itself, or the part of it a compaction cut
                // into the table that holds its first key.
                if table
                    .range_tombstones()
                    .iter()
                    .any(|t| t.seq == seq && t.covers(key))
                {
                    return Ok(true);
                }
                continue;
            }
            match table.get_entry(key, seq)? {
                Some((k, _, v))
                    if k == kind && (kind == ValueKind::Delete || v.as_slice() == value) =>
                {
                    return Ok(true)
                }
                _ => {}
            }
        }
        Ok(false)
    }
}

/// The database id most WALs' identity records name (0 if none names one):
/// a repair with no manifest and no table to take it from.
pub(super) fn majority_db_id(wals: &[(u64, Vec<u8>)]) -> u64 {
    let mut counts: std::collections::HashMap<u64, usize> = Default::default();
    for (n, data) in wals {
        if let Some(Salvaged::Identity {
            offset: 0,
            identity: Ok(id),
        }) = salvage_records(data, Some(*n)).first()
        {
            if id.db_id != 0 && id.number == *n {
                *counts.entry(id.db_id).or_default() += 1;
            }
        }
    }
    counts
        .into_iter()
        .max_by_key(|&(id, c)| (c, std::cmp::Reverse(id)))
        .map_or(0, |(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_log::LogWriter;

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
        let data = wal.into_inner();
        let opts = Options::default();
        let mut next = 10;
        let mut report = RepairReport::default();
        let mut kept = KeptTables::new(&env, d.path(), &[]);
        let mut replay = Replay::new(&env, d.path(), &opts, 1, 0, &mut next);
        let rule = IdentityRule {
            db_id: 1,
            required: false,
        };
        assert_eq!(
            replay.wal(7, &data, rule, &mut kept, &mut report).unwrap(),
            None
        );
        replay.flush().unwrap();
        assert_eq!(report.wal_records_salvaged, 2);
        assert_eq!(report.wal_damage.len(), 2, "{:?}", report.wal_damage);
        assert!(report.wal_damage[0].reason.contains("exceed"));
        assert_eq!(replay.last_seq, 3);
        assert_eq!(replay.tables.len(), 1);
        // a, d and the newer z: the older z is overwritten, and a table
        // keeps only what a reader can see.
        assert_eq!(replay.tables[0].num_entries, 3);
    }
}
