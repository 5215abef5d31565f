//! Replaying WALs leniently into new level-0 tables, for `repair`.
//!
//! Every intact record is salvaged, including records after a damaged one
//! (the scanner resynchronises on the record checksums, see
//! [`crate::record_log::salvage`]): repair keeps the most data, at the price that
//! the result may miss a write in the middle of the history (the damaged
//! record) while keeping later ones. Each record is a whole write batch, so
//! batches stay atomic. Each entry goes to its keyspace's new level-0
//! tables. An entry in a WAL older than its keyspace's log number is in
//! that keyspace's tables already; one whose sequence number is at most
//! the newest of its keyspace's kept tables must be in one of them (tables
//! only ever hold data of WALs older than the live ones); both are skipped
//! so that no entry is stored twice. An entry of a dropped keyspace is
//! skipped; one of a keyspace nobody records is adopted or reported (see
//! [`super::keyspaces`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use quietio::IoEnv;

use super::keyspaces::{Catalogue, Owner};
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
use crate::table::{TableOptions, TableReader};
use crate::version::FileMeta;

pub(super) struct Replay<'a> {
    pub env: &'a IoEnv,
    pub dir: &'a Path,
    pub opts: &'a Options,
    pub db_id: u64,
    pub next_file: &'a mut u64,
    /// Largest sequence number seen in any intact record.
    pub last_seq: SeqNo,
    /// The new tables, each with its keyspace.
    pub tables: Vec<(u32, FileMeta)>,
    /// Keyspaces no usable manifest records that WAL entries were
    /// replayed into: the caller adds them to the catalogue.
    pub adopted: BTreeSet<u32>,
    /// Entries of dropped keyspaces, skipped.
    pub dropped_entries: u64,
    targets: BTreeMap<u32, Target>,
    /// Ids below this that are no target were dropped.
    dropped_below: u32,
    /// Whether an id that is no target and not dropped is adopted (the
    /// catalogue may be incomplete) rather than damage.
    adopt: bool,
}

/// Where one keyspace's entries go.
struct Target {
    mem: Arc<Memtable>,
    /// WALs below this hold none of its data that is not in its tables.
    log_number: u64,
    /// The newest sequence number of its kept tables.
    covered_seq: SeqNo,
    table_options: TableOptions,
}

impl<'a> Replay<'a> {
    /// Replays into the keyspaces of `cat`, skipping in each what its kept
    /// tables hold (`covered`: the newest sequence number of each
    /// keyspace's kept tables). `adopt`: whether an id `cat` does not
    /// know (and does not record as dropped) is adopted rather than
    /// damage.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        env: &'a IoEnv,
        dir: &'a Path,
        opts: &'a Options,
        db_id: u64,
        next_file: &'a mut u64,
        cat: &Catalogue,
        covered: &BTreeMap<u32, SeqNo>,
        adopt: bool,
    ) -> Self {
        let targets = std::iter::once(0)
            .chain(cat.keyspaces.keys().copied())
            .map(|id| {
                let t = Target {
                    mem: Arc::new(Memtable::new()),
                    log_number: cat.log_number(id),
                    covered_seq: covered.get(&id).copied().unwrap_or(0),
                    table_options: cat.table_options(id, opts),
                };
                (id, t)
            })
            .collect();
        Replay {
            env,
            dir,
            opts,
            db_id,
            next_file,
            last_seq: 0,
            tables: Vec::new(),
            adopted: BTreeSet::new(),
            dropped_entries: 0,
            targets,
            dropped_below: if cat.from_manifest { cat.next_id } else { 0 },
            adopt,
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
                    match self.add(number, &batch, in_tables)? {
                        Fit::Added => {
                            report.wal_records_salvaged += 1;
                            if damage_before {
                                report.wal_records_after_damage += 1;
                            }
                        }
                        Fit::InTables => report.wal_records_in_tables += 1,
                        Fit::Dropped => {}
                        Fit::Misfit {
                            seq,
                            keyspace,
                            covered,
                        } => {
                            let reason = format!(
                                "record's sequence number {seq} (keyspace {keyspace}) is at or below the newest of its keyspace's kept tables ({covered}), yet none of them holds its entry: it does not fit the manifest, and replayed into level 0 it would hide newer values"
                            );
                            report
                                .wal_damage
                                .push(Dropped::at(&path, offset, record_len, reason));
                        }
                        Fit::UnknownKeyspace { keyspace } => {
                            let reason = format!(
                                "record writes keyspace {keyspace}, which the manifest never created (its next keyspace id is {}): not replayed, as recovery would refuse it",
                                self.dropped_below
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

    /// Whom keyspace `id`'s entries go to.
    fn owner(&self, id: u32) -> Owner {
        if self.targets.contains_key(&id) {
            Owner::Live
        } else if id < self.dropped_below {
            Owner::Dropped
        } else {
            Owner::Unknown
        }
    }

    /// Adds the entries of the batch (read from WAL `wal`) not already in
    /// a table, each to its keyspace. Every entry is checked before any
    /// is added, so the batch stays atomic: an entry at or below the
    /// newest sequence number of its keyspace's kept tables must be in one
    /// of them, and an entry of a keyspace nobody records must be adopted;
    /// otherwise nothing of the batch is added.
    fn add(&mut self, wal: u64, batch: &WriteBatch, in_tables: &mut KeptTables<'_>) -> Result<Fit> {
        let first = batch.sequence();
        for (i, (id, e)) in batch.iter_scoped().enumerate() {
            let seq = first + i as u64;
            self.last_seq = self.last_seq.max(seq);
            match self.owner(id) {
                Owner::Live => {
                    let t = &self.targets[&id];
                    if wal >= t.log_number
                        && seq <= t.covered_seq
                        && !in_tables.holds(id, e.key, seq, e.kind, e.value)?
                    {
                        return Ok(Fit::Misfit {
                            seq,
                            keyspace: id,
                            covered: t.covered_seq,
                        });
                    }
                }
                Owner::Dropped => {}
                Owner::Unknown if self.adopt => {}
                Owner::Unknown => return Ok(Fit::UnknownKeyspace { keyspace: id }),
            }
        }
        let (mut added, mut held) = (false, false);
        for (i, (id, e)) in batch.iter_scoped().enumerate() {
            let seq = first + i as u64;
            match self.owner(id) {
                Owner::Live => {}
                Owner::Dropped => {
                    self.dropped_entries += 1;
                    continue;
                }
                Owner::Unknown => {
                    self.adopted.insert(id);
                    let t = Target {
                        mem: Arc::new(Memtable::new()),
                        log_number: 0,
                        covered_seq: 0,
                        table_options: TableOptions {
                            keyspace_id: id,
                            ..self.opts.table_options()
                        },
                    };
                    self.targets.insert(id, t);
                }
            }
            let t = &self.targets[&id];
            if wal < t.log_number || seq <= t.covered_seq {
                held = true;
                continue;
            }
            t.mem.add(seq, e.kind, e.key, e.value)?;
            added = true;
        }
        let full: Vec<u32> = self
            .targets
            .iter()
            .filter(|(_, t)| t.mem.approximate_bytes() >= self.opts.memtable_size)
            .map(|(&id, _)| id)
            .collect();
        for id in full {
            self.flush_one(id)?;
        }
        Ok(if added {
            Fit::Added
        } else if held {
            Fit::InTables
        } else {
            Fit::Dropped
        })
    }

    /// Writes what is left in memory as tables.
    pub fn flush(&mut self) -> Result<()> {
        let ids: Vec<u32> = self.targets.keys().copied().collect();
        for id in ids {
            self.flush_one(id)?;
        }
        Ok(())
    }

    /// Writes keyspace `id`'s memtable as a table of that keyspace.
    fn flush_one(&mut self, id: u32) -> Result<()> {
        let t = self.targets.get_mut(&id).expect("a target");
        let mem = std::mem::replace(&mut t.mem, Arc::new(Memtable::new()));
        let table_options = t.table_options;
        let number = *self.next_file;
        if let Some(meta) = crate::db::write_l0(
            self.env,
            self.dir,
            self.opts,
            table_options,
            &mem,
            &[],
            number,
            self.db_id,
            self.opts.io_depth,
            None,
        )? {
            *self.next_file += 1;
            self.tables.push((id, meta));
        }
        Ok(())
    }
}

/// How a WAL record relates to the kept tables.
enum Fit {
    /// Some of its entries were new and went into the memtable.
    Added,
    /// Nothing was new: its entries are in kept tables (or of dropped
    /// keyspaces).
    InTables,
    /// Every entry is of a dropped keyspace.
    Dropped,
    /// The entry at `seq` of `keyspace` is at or below the newest sequence
    /// number of that keyspace's kept tables (`covered`), yet none of them
    /// holds it.
    Misfit {
        seq: SeqNo,
        keyspace: u32,
        covered: SeqNo,
    },
    /// An entry of a keyspace the manifest never created.
    UnknownKeyspace { keyspace: u32 },
}

/// The tables a repair keeps, opened on demand to ask whether they hold a
/// WAL entry.
pub(super) struct KeptTables<'a> {
    /// Each with its keyspace.
    tables: Vec<(u32, FileMeta, Option<Arc<TableReader>>)>,
    dir: &'a Path,
    env: &'a IoEnv,
}

impl<'a> KeptTables<'a> {
    pub(super) fn new(env: &'a IoEnv, dir: &'a Path, kept: &[super::Kept]) -> Self {
        KeptTables {
            tables: kept
                .iter()
                .map(|k| (k.keyspace, k.meta.clone(), None))
                .collect(),
            dir,
            env,
        }
    }

    /// Whether a kept table of keyspace `ks` holds `key` with this kind and
    /// value as of `seq` (the entry itself, or an older one that reads the
    /// same).
    fn holds(
        &mut self,
        ks: u32,
        key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        value: &[u8],
    ) -> Result<bool> {
        for (id, meta, reader) in &mut self.tables {
            if *id != ks || !meta.contains_user_key(key) || meta.smallest_seq > seq {
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

    /// Entries go to their keyspaces, from WALs at or after each one's log
    /// number; a dropped keyspace's are skipped, and a record writing a
    /// keyspace an intact manifest never created is damage.
    #[test]
    fn entries_go_to_their_keyspace_as_the_catalogue_says() {
        use super::super::keyspaces::Entry;
        use crate::keyspace::def::KeyspaceDef;
        let d = tempfile::tempdir().unwrap();
        let env = IoEnv::open(d.path(), Options::default().io_options()).unwrap();
        let wal = |batches: Vec<WriteBatch>| {
            let mut w = LogWriter::new(Vec::new());
            for b in batches {
                w.add_record(b.data()).unwrap();
            }
            w.into_inner()
        };
        let batch = |seq: u64, puts: &[(u32, &[u8])]| {
            let mut b = WriteBatch::new();
            for (id, k) in puts {
                b.put_scoped(*id, k, b"v").unwrap();
            }
            b.set_sequence(seq);
            b
        };
        // Keyspace 1 lives (its data in WALs before 8 is in its tables);
        // 2 was dropped; 5 was never created.
        let mut cat = Catalogue::new(None);
        cat.keyspaces.insert(
            1,
            Entry {
                def: KeyspaceDef {
                    name: "a".into(),
                    block_size: 1024,
                    bloom_bits_per_key: 0,
                    compression: crate::table::Compression::None,
                },
                adopted: false,
                log_number: 8,
            },
        );
        cat.next_id = 3;
        cat.from_manifest = true;
        let opts = Options::default();
        let mut next = 20;
        let mut report = RepairReport::default();
        let mut kept = KeptTables::new(&env, d.path(), &[]);
        let mut replay = Replay::new(
            &env,
            d.path(),
            &opts,
            1,
            &mut next,
            &cat,
            &BTreeMap::new(),
            false,
        );
        let rule = IdentityRule {
            db_id: 1,
            required: false,
        };
        let seven = wal(vec![
            batch(1, &[(0, b"d"), (1, b"a-old"), (2, b"dropped")]),
            batch(4, &[(0, b"d2"), (5, b"never-created")]),
        ]);
        let nine = wal(vec![batch(6, &[(1, b"a-new"), (2, b"dropped2")])]);
        for (n, data) in [(7, &seven), (9, &nine)] {
            assert_eq!(
                replay.wal(n, data, rule, &mut kept, &mut report).unwrap(),
                None
            );
        }
        replay.flush().unwrap();
        assert_eq!(report.wal_damage.len(), 1, "{:?}", report.wal_damage);
        assert!(report.wal_damage[0].reason.contains("keyspace 5"));
        assert_eq!(replay.dropped_entries, 2);
        assert_eq!(report.wal_records_salvaged, 2);
        assert_eq!(replay.last_seq, 7);
        let tables: Vec<(u32, u64)> = replay
            .tables
            .iter()
            .map(|(id, m)| (*id, m.num_entries))
            .collect();
        // "d" in the default keyspace; only "a-new" in keyspace 1.
        assert_eq!(tables, [(0, 1), (1, 1)]);
        let a = &replay.tables[1].1;
        assert_eq!(a.smallest_user_key(), b"a-new");
    }

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
        let cat = Catalogue::new(None);
        let mut replay = Replay::new(
            &env,
            d.path(),
            &opts,
            1,
            &mut next,
            &cat,
            &BTreeMap::new(),
            true,
        );
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
        assert_eq!(replay.tables[0].0, 0);
        assert_eq!(replay.tables[0].1.num_entries, 3);
    }
}
