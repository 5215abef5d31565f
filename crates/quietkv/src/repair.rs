//! `repair`: salvages what is intact in a damaged database directory into a
//! consistent database, and reports what it dropped (the counterpart of
//! LevelDB's and RocksDB's `RepairDB`).
//!
//! Recovery refuses a database with any damage it cannot prove harmless
//! (a damaged WAL record or manifest edit, a missing CURRENT), because it
//! must never drop an acknowledged write silently. Repair is the explicit,
//! lossy way out: it keeps every byte that verifies and says what it lost.
//!
//! What it does, in order:
//!
//! 1. Takes the LOCK exclusively: Busy if the database is in use.
//!
//! First it reads everything it will decide from: CURRENT, the manifests,
//! every table whole and every WAL it may replay. An error that says
//! nothing about the bytes (permission denied, EIO, too many open files)
//! stops the repair there with that error, before anything was changed:
//! only bytes that were read and failed verification are ever dropped.
//!
//! 2. Reads the *usable prefix* of the old manifest: the one CURRENT names,
//!    else the newest manifest with a usable edit (see [`manifest`]); a
//!    manifest recording another database id than most tables do is
//!    another database's and is passed over. It gives the tables' levels,
//!    the WAL log number, the database id, and the keyspace catalogue:
//!    every keyspace's id, name, table options, tables and log number, the
//!    keyspaces dropped, the next keyspace id (see [`keyspaces`]).
//! 3. Verifies every table fully (footer, index, properties, every data
//!    block, key order, entry count, as `check` does). A table whose
//!    properties name another file number (a copy or rename) or another
//!    database is dropped. A table whose footer, index or properties are
//!    unreadable is dropped; one with damaged data blocks is *salvaged*:
//!    its intact blocks are rewritten as a table with the same number (so
//!    its place in the tree is unchanged; written under a temporary name
//!    and renamed over it, with its keyspace's table options) and the
//!    damaged original kept in `lost/`.
//! 4. Gives every table its keyspace: the one the manifest names it in,
//!    else the one the table records in its properties (a table without
//!    one is the default keyspace's: tables of other keyspaces record it).
//!    A table of a keyspace the manifest records as dropped is dropped
//!    (its data must not come back). A table of a keyspace no usable
//!    manifest records (none is usable, or the one used was cut short
//!    before the keyspace was created) is never put into the default
//!    keyspace: the keyspace is *adopted*, recreated under the name
//!    `recovered-<id>` with the repair's table options and reported, so
//!    its data stays readable under its own keys. (Tables of other
//!    keyspaces written by builds before tables recorded their keyspace
//!    carry no id: only a manifest that names them places them right.)
//! 5. Arranges the tables of each keyspace:
//!    * with a usable manifest whose tables are all present, the tables it
//!      names keep their levels (its tree is consistent, so their order is
//!      proven). A table it does not name is kept only if it is newer than
//!      every table it names by file number, and than every table it names
//!      in the same keyspace by sequence numbers (a flush whose edit was
//!      lost): alone in its keyspace it goes to level 0 as it is,
//!      several are merged (see below). Any other unnamed table is a
//!      leftover the manifest superseded (an obsolete compaction input, an
//!      uninstalled output) and is dropped: it could bring back deleted
//!      keys;
//!    * with no usable manifest, or one naming tables that are gone (a
//!      later compaction whose edit is lost replaced them), the order of
//!      tables from different levels cannot be known from their file
//!      numbers (a compaction output has a higher number than newer
//!      level-0 tables), so the intact tables of each keyspace are merged
//!      into new, non-overlapping level-0 tables of that keyspace ordered
//!      by internal key, each entry kept once; the originals go to
//!      `lost/`. As in LevelDB, a leftover obsolete table then contributes
//!      its entries; with no usable manifest at all, so does a table of a
//!      dropped keyspace that was not deleted yet (nothing else records
//!      the drop): it comes back adopted;
//!    * a table the manifest names that is missing from the directory is
//!      reported with what the manifest knew of it (entries, deletes, key
//!      range): its keys are lost, and keys it deleted may reappear with
//!      older values.
//! 6. Replays every WAL at or after the manifest's log number leniently
//!    (records after a damaged one are salvaged; see [`wal`]), each entry
//!    into new level-0 tables of its keyspace, and only from WALs at or
//!    after that keyspace's own log number (older ones' entries are in its
//!    tables). An entry of a dropped keyspace is skipped (and counted). An
//!    entry of a keyspace the catalogue lacks is adopted as in step 4 when
//!    the catalogue may be incomplete (no usable manifest, or one cut short
//!    by damage); with an intact manifest it is damage, and its record
//!    (a batch is kept whole or not at all) is reported as dropped, as
//!    recovery would refuse it. A WAL whose identity record names another
//!    database or another file number (or, where the manifest says every
//!    WAL has one, a WAL without one) is not this database's: it is never
//!    replayed, and kept in `lost/`. Entries whose sequence numbers are at
//!    or below the newest of their keyspace's kept tables are skipped only
//!    if one of those tables really holds them; otherwise the record does
//!    not fit the manifest and is reported as dropped (replayed into level
//!    0 it would hide newer values). WALs older than the log number are not replayed
//!    (their writes are in tables; replaying them could bring back
//!    compacted-away deletes). A WAL the manifest requires that is
//!    missing, or is another database's, is reported as lost.
//! 7. Writes a fresh manifest (every kept table in its keyspace, every
//!    keyspace with its name and table options and the new WAL as its log
//!    number, the next keyspace id, `next_file_number` and `last_sequence`
//!    beyond everything seen, the old database id or a new one, a new
//!    empty live WAL), checked to replay as recovery replays it, then
//!    CURRENT (temporary file, sync, rename, directory sync), then moves
//!    the old manifests, CURRENT, WALs and dropped tables out of the
//!    directory into `lost/`.
//!
//! Nothing is deleted: every replaced or dropped file is hard-linked into
//! `DIR/lost/` before the repair changes anything (see [`lost`]). A crash
//! during repair leaves the old files in place or in `lost/`; running
//! repair again finishes the job.

mod keyspaces;
mod lost;
mod manifest;
mod tables;
mod wal;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use quietio::{IoClass, IoEnv};

use crate::check::scan_table;
use crate::error::{Error, ErrorKind, Result};
use crate::fileio::LogFile;
use crate::filenames::{self, manifest_name, table_path, wal_path, FileKind, CURRENT};
use crate::key::SeqNo;
use crate::options::Options;
use crate::range_tombstone::RangeTombstone;
use crate::record_log::LogWriter;
use crate::table::{TableOptions, TableProperties};
use crate::version::{FileMeta, VersionEdit, NUM_LEVELS};

/// How to repair.
#[derive(Debug, Clone, Default)]
pub struct RepairOptions {
    /// Table format, sizes and I/O modes of the tables repair writes.
    pub db: Options,
}

/// A file (or part of one) that repair did not keep, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The file, at its original path.
    pub file: PathBuf,
    /// Where in the file the dropped bytes start, when only part of it is.
    pub offset: Option<u64>,
    /// Bytes dropped.
    pub bytes: u64,
    /// Why, with the damage found.
    pub reason: String,
}

impl Dropped {
    fn at(file: &Path, offset: u64, bytes: u64, reason: impl Into<String>) -> Dropped {
        Dropped {
            file: file.to_path_buf(),
            offset: Some(offset),
            bytes,
            reason: reason.into(),
        }
    }

    fn whole(file: &Path, bytes: u64, reason: impl Into<String>) -> Dropped {
        Dropped {
            file: file.to_path_buf(),
            offset: None,
            bytes,
            reason: reason.into(),
        }
    }
}

/// An intact table the repaired database holds as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptTable {
    /// The table's file number.
    pub number: u64,
    /// The id of the keyspace it belongs to (0: the default keyspace; see
    /// [`RepairReport::keyspaces`]).
    pub keyspace: u32,
    /// Its level in the repaired database (`None`: merged into the new
    /// tables listed in [`RepairReport::merged_into`]).
    pub level: Option<usize>,
    /// Entries it holds.
    pub entries: u64,
    /// Its size in bytes.
    pub bytes: u64,
}

/// A damaged table whose intact blocks were rewritten under its number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SalvagedTable {
    /// The table's file number.
    pub number: u64,
    /// The id of the keyspace it belongs to.
    pub keyspace: u32,
    /// Its level in the repaired database, as for [`KeptTable::level`].
    pub level: Option<usize>,
    /// Entries read from intact blocks and kept.
    pub entries_kept: u64,
    /// Entries its properties promised that were in damaged blocks.
    pub entries_lost: u64,
    /// Data blocks that were damaged.
    pub blocks_lost: u64,
    /// The damage found, with the file offset when known.
    pub reason: String,
}

/// A keyspace of the repaired database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairedKeyspace {
    /// Its id (0: the default keyspace).
    pub id: u32,
    /// Its name in the repaired database.
    pub name: String,
    /// `true`: no usable manifest records it, yet tables or WAL records
    /// name its id, so it was recreated under the name `recovered-<id>`
    /// with the repair's table options (its own name and options were
    /// lost with the manifest). Its data is there; copy it where it
    /// belongs.
    pub adopted: bool,
    /// Tables it holds in the repaired database.
    pub tables: usize,
}

/// What [`repair_dir`] did.
#[derive(Debug, Clone, Default)]
pub struct RepairReport {
    /// The database directory repaired.
    pub dir: PathBuf,
    /// Where replaced and dropped files were moved.
    pub lost_dir: PathBuf,
    /// The old manifest whose edits placed the tables; `None` if no
    /// manifest was usable (tables were merged afresh).
    pub manifest: Option<PathBuf>,
    /// Edits of that manifest that were used.
    pub manifest_edits: u64,
    /// The first part of the manifest that could not be used.
    pub manifest_damage: Option<Dropped>,
    /// Why CURRENT or other manifests were not used, and where the
    /// keyspace catalogue could not come from a manifest.
    pub manifest_notes: Vec<String>,
    /// Every keyspace of the repaired database, the default one first;
    /// each holds the tables and WAL entries that belong to it.
    pub keyspaces: Vec<RepairedKeyspace>,
    /// The database id the repaired database has.
    pub db_id: u64,
    /// Whether that id was recovered (from the manifest or the tables)
    /// rather than made up.
    pub db_id_recovered: bool,
    /// Intact tables kept.
    pub tables_kept: Vec<KeptTable>,
    /// Damaged tables rewritten from their intact blocks.
    pub tables_salvaged: Vec<SalvagedTable>,
    /// Tables not kept at all.
    pub tables_dropped: Vec<Dropped>,
    /// Tables the manifest names that are missing from the directory, with
    /// what the manifest recorded of them (`bytes`: their size).
    pub tables_missing: Vec<Dropped>,
    /// New tables holding the merged data when no manifest was usable.
    pub merged_into: Vec<u64>,
    /// WAL files read.
    pub wal_files: u64,
    /// WAL records (write batches) whose entries went into new tables.
    pub wal_records_salvaged: u64,
    /// Of those, records that came after a damaged region.
    pub wal_records_after_damage: u64,
    /// WAL records whose entries were all already in a kept table.
    pub wal_records_in_tables: u64,
    /// WAL entries of keyspaces the manifest records as dropped: not
    /// replayed (they were dropped with their keyspace).
    pub wal_entries_of_dropped_keyspaces: u64,
    /// WALs older than the manifest's log number, not replayed.
    pub wals_skipped: Vec<PathBuf>,
    /// Damaged or undecodable WAL regions, and records whose sequence
    /// numbers do not fit the kept tables.
    pub wal_damage: Vec<Dropped>,
    /// Whole WALs not replayed because they are not this database's (their
    /// identity record names another database or file, or is missing where
    /// the manifest says every WAL has one).
    pub wals_dropped: Vec<Dropped>,
    /// WALs the manifest requires (sealed, or the live one) that are
    /// missing or were dropped: the acknowledged writes they held are lost.
    pub wals_missing: Vec<Dropped>,
    /// New level-0 tables holding the salvaged WAL records.
    pub wal_tables: Vec<u64>,
    /// Every file moved (or copied) into `lost/`, at its new path.
    pub moved_to_lost: Vec<PathBuf>,
    /// The manifest written for the repaired database.
    pub new_manifest: PathBuf,
    /// The newest sequence number the repaired database holds.
    pub last_sequence: SeqNo,
    /// Bytes of data the repaired database holds in tables.
    pub table_bytes: u64,
}

impl RepairReport {
    /// Whether anything was dropped or found missing (a table, part of
    /// one, a table or WAL the manifest names, WAL bytes, a whole WAL or a
    /// manifest edit), or a keyspace's name and options (an adopted
    /// keyspace).
    pub fn lost_anything(&self) -> bool {
        !self.tables_dropped.is_empty()
            || !self.tables_salvaged.is_empty()
            || !self.tables_missing.is_empty()
            || !self.wal_damage.is_empty()
            || !self.wals_dropped.is_empty()
            || !self.wals_missing.is_empty()
            || self.manifest_damage.is_some()
            || self.keyspaces.iter().any(|k| k.adopted)
    }
}

/// Salvages what is intact in a damaged database directory into a
/// consistent database that opens, and reports what it kept, salvaged and
/// dropped (the counterpart of LevelDB's and RocksDB's `RepairDB`). It reads
/// everything first (CURRENT, the manifests, every table whole, every WAL it
/// may replay), keeps every table and record that verifies and belongs to
/// this database, rewrites tables with damaged blocks from their intact
/// blocks, replays the WALs leniently into new tables, and writes a new
/// manifest. Nothing is deleted: every replaced or dropped file is moved to
/// `dir/lost/`. Only bytes that were read and failed verification are
/// dropped; a table or WAL the manifest names but the directory lacks is
/// reported as missing (its keys are lost, and keys it deleted may come
/// back).
///
/// # Errors
///
/// `Busy` if a process (this one included) has the database open;
/// `InvalidArgument` if `dir` holds no database files; `Io` (naming the
/// file) if a file could not be read for a reason other than damage
/// (permission denied, an I/O error, too many open files) - the repair then
/// stops before changing anything - or if writing the repaired database
/// failed (a full disk).
pub fn repair_dir(dir: impl AsRef<Path>, opts: &RepairOptions) -> Result<RepairReport> {
    let dir = dir.as_ref();
    opts.db.validate()?;
    if !dir.is_dir() {
        return Err(Error::invalid("database directory does not exist").with_file(dir));
    }
    let _lock = crate::lockfile::lock_exclusive(dir)?;
    let files = list(dir)?;
    if files.tables.is_empty() && files.wals.is_empty() && files.manifests.is_empty() {
        return Err(Error::invalid(
            "no quietkv database here (no table, WAL or manifest to repair)",
        )
        .with_file(dir));
    }
    let env = IoEnv::open(dir, opts.db.io_options())?.with_fault_layer(opts.db.fault_layer.clone());
    let dir = env.dir().to_path_buf();
    Repair {
        env: &env,
        dir: &dir,
        opts: &opts.db,
        lost: lost::Lost::new(&dir),
        report: RepairReport {
            dir: dir.clone(),
            lost_dir: dir.join(lost::LOST_DIR),
            ..RepairReport::default()
        },
        next_file: files.max_number + 1,
    }
    .run(&files)
}

/// The database files in the directory.
struct Files {
    tables: Vec<u64>,
    wals: Vec<u64>,
    manifests: Vec<u64>,
    has_current: bool,
    max_number: u64,
}

fn list(dir: &Path) -> Result<Files> {
    let entries = fs::read_dir(dir)
        .map_err(|e| Error::io(e, "cannot list the database directory").with_file(dir))?;
    let mut f = Files {
        tables: Vec::new(),
        wals: Vec::new(),
        manifests: Vec::new(),
        has_current: false,
        max_number: 0,
    };
    for entry in entries {
        let entry =
            entry.map_err(|e| Error::io(e, "cannot list the database directory").with_file(dir))?;
        let n = match entry.file_name().to_str().and_then(filenames::parse) {
            Some(FileKind::Table(n)) => {
                f.tables.push(n);
                n
            }
            Some(FileKind::Wal(n)) => {
                f.wals.push(n);
                n
            }
            Some(FileKind::Manifest(n)) => {
                f.manifests.push(n);
                n
            }
            Some(FileKind::Current) => {
                f.has_current = true;
                0
            }
            _ => 0,
        };
        f.max_number = f.max_number.max(n);
    }
    f.tables.sort_unstable();
    f.wals.sort_unstable();
    f.manifests.sort_unstable();
    Ok(f)
}

/// One table file after verification.
enum Scanned {
    Intact {
        size: u64,
        props: TableProperties,
        range_dels: Vec<RangeTombstone>,
    },
    /// Footer, index and properties read, but a data block (or the key
    /// order or entry count) is damaged.
    Damaged {
        props: TableProperties,
        why: String,
    },
    Unreadable {
        why: String,
    },
}

/// A table the repaired database lists: its keyspace and level.
pub(super) struct Kept {
    pub keyspace: u32,
    pub level: usize,
    pub meta: FileMeta,
}

/// A table the manifest does not name that is newer than every table it
/// names: kept.
struct Orphan {
    number: u64,
    size: u64,
    props: TableProperties,
    range_dels: Vec<RangeTombstone>,
}

struct Repair<'a> {
    env: &'a IoEnv,
    dir: &'a Path,
    opts: &'a Options,
    lost: lost::Lost,
    report: RepairReport,
    next_file: u64,
}

impl Repair<'_> {
    fn run(mut self, files: &Files) -> Result<RepairReport> {
        // Read everything first: an error here changes nothing.
        let scanned: Vec<(u64, Scanned)> = files
            .tables
            .iter()
            .map(|&n| self.scan(n).map(|s| (n, s)))
            .collect::<Result<_>>()?;
        let tables_db_id = majority_db_id(&scanned);
        let (old, notes) = manifest::read_best(self.env, self.dir, &files.manifests, tables_db_id)?;
        let log_number = old.as_ref().map_or(0, |m| m.log_number);
        let mut wal_images: Vec<(u64, Vec<u8>)> = Vec::new();
        for &n in files.wals.iter().filter(|&&n| n >= log_number) {
            let path = wal_path(self.dir, n);
            let data = self
                .env
                .read_file(&path)
                .map_err(|e| Error::io(e, "cannot read WAL").with_file(&path))?;
            wal_images.push((n, data));
        }

        self.report.manifest_notes = notes;
        if let Some(m) = &old {
            self.report.manifest = Some(m.path.clone());
            self.report.manifest_edits = m.edits;
            self.report.manifest_damage = m.damage.clone();
            self.next_file = self.next_file.max(m.next_file);
        }
        self.next_file = self.next_file.max(2);

        let (db_id, recovered) = match old.as_ref().map_or(0, |m| m.db_id) {
            0 => match tables_db_id {
                0 => match wal::majority_db_id(&wal_images) {
                    0 => (crate::db::new_db_id()?, false),
                    id => (id, true),
                },
                id => (id, true),
            },
            id => (id, true),
        };
        self.report.db_id = db_id;
        self.report.db_id_recovered = recovered;
        let mut cat = keyspaces::Catalogue::new(old.as_ref());

        // Tables: everything the new manifest will list.
        let mut kept: Vec<Kept> = Vec::new();
        // Per keyspace, tables whose order is unknown, to merge.
        let mut to_merge: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        let mut max_seq_seen: SeqNo = old.as_ref().map_or(0, |m| m.last_seq);
        // Every table the manifest names: number -> (keyspace, level, meta).
        let named: HashMap<u64, (u32, usize, FileMeta)> = old
            .as_ref()
            .map(|m| {
                std::iter::once((0, &m.version))
                    .chain(m.keyspaces.iter().map(|(&id, k)| (id, &k.version)))
                    .flat_map(|(id, v)| {
                        (0..NUM_LEVELS).flat_map(move |l| {
                            v.files(l)
                                .iter()
                                .map(move |f| (f.number, (id, l, (**f).clone())))
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        // A named table that is gone was most likely replaced by a
        // compaction whose edit is in the unusable part of the manifest:
        // the manifest's levels then describe a tree that no longer
        // exists, so the tables are merged as if there were no manifest.
        let mut missing: Vec<u64> = named
            .keys()
            .copied()
            .filter(|n| files.tables.binary_search(n).is_err())
            .collect();
        missing.sort_unstable();
        let placed = old.is_some() && missing.is_empty();
        for n in &missing {
            let (_, level, meta) = &named[n];
            self.report
                .tables_missing
                .push(missing_table(self.dir, *level, meta));
        }
        if !missing.is_empty() {
            self.report.manifest_notes.push(format!(
                "the manifest names {} table(s) missing from the directory ({}): its levels cannot be trusted, so the intact tables were merged afresh",
                missing.len(),
                missing.iter().map(|n| format!("{n:06}.sst")).collect::<Vec<_>>().join(", ")
            ));
        }
        // A table the manifest does not name is only kept if it is newer
        // than every table it names, by file number, and than every table
        // it names in the same keyspace, by sequence numbers: an output of
        // a flush whose edit was lost. (The manifest's last_sequence cannot
        // serve: a memtable switch records it before the data is flushed.
        // Another keyspace's tables cannot either: a keyspace written
        // rarely flushes old sequence numbers after others flushed newer
        // ones.)
        let mut named_seq: HashMap<u32, SeqNo> = HashMap::new();
        for (ks, _, f) in named.values() {
            let s = named_seq.entry(*ks).or_default();
            *s = (*s).max(f.largest_seq);
        }
        let named_number = named.keys().copied().max().unwrap_or(0);
        let mut newer_orphans: BTreeMap<u32, Vec<Orphan>> = BTreeMap::new();
        for (n, scan) in scanned {
            let path = table_path(self.dir, n);
            let props = match &scan {
                Scanned::Intact { props, .. } | Scanned::Damaged { props, .. } => Some(props),
                Scanned::Unreadable { .. } => None,
            };
            // Its keyspace: the manifest's if it names the table, else the
            // one the table records (0 for a table of the default keyspace,
            // or written before tables recorded it).
            let ks = match named.get(&n) {
                Some((ks, ..)) => *ks,
                None => props.map_or(0, |p| p.keyspace_id),
            };
            if let Some(p) = props {
                max_seq_seen = max_seq_seen.max(p.largest_seq);
                if let Some(why) = foreign(n, p, db_id) {
                    self.drop_table(&path, why)?;
                    continue;
                }
                if cat.owner(ks) == keyspaces::Owner::Dropped {
                    self.drop_table(
                        &path,
                        format!("a table of keyspace {ks}, which the manifest records as dropped: its data must not come back"),
                    )?;
                    continue;
                }
            }
            let level = if placed {
                match named.get(&n) {
                    Some((_, l, _)) => Some(*l),
                    None => {
                        match scan {
                            Scanned::Intact {
                                size,
                                props,
                                range_dels,
                            } if (props.num_entries > 0 || props.num_range_deletes > 0)
                                && props.smallest_seq
                                    > named_seq.get(&ks).copied().unwrap_or(0)
                                && n > named_number =>
                            {
                                newer_orphans.entry(ks).or_default().push(Orphan {
                                    number: n,
                                    size,
                                    props,
                                    range_dels,
                                });
                            }
                            _ => self.drop_table(
                                &path,
                                "not named by the manifest and not newer than every table it names (a leftover the manifest superseded, or damaged)".into(),
                            )?,
                        }
                        continue;
                    }
                }
            } else {
                None
            };
            match scan {
                Scanned::Intact {
                    size,
                    props,
                    range_dels,
                } => {
                    self.report.tables_kept.push(KeptTable {
                        number: n,
                        keyspace: ks,
                        level,
                        entries: props.num_entries,
                        bytes: size,
                    });
                    match level {
                        Some(l) => kept.push(Kept {
                            keyspace: ks,
                            level: l,
                            meta: meta_of(n, size, &props, &range_dels),
                        }),
                        None => to_merge.entry(ks).or_default().push(n),
                    }
                }
                Scanned::Damaged { props: _, why } => {
                    let topts = cat.table_options(ks, self.opts);
                    if let Some(meta) = self.salvage(n, ks, level, why, topts, db_id)? {
                        match level {
                            Some(l) => kept.push(Kept {
                                keyspace: ks,
                                level: l,
                                meta,
                            }),
                            None => to_merge.entry(ks).or_default().push(n),
                        }
                    }
                }
                Scanned::Unreadable { why } => self.drop_table(&path, why)?,
            }
        }
        // Several tables of a keyspace newer than the manifest: their
        // relative order is not proven by their numbers (one may be a
        // compaction output), so they are merged; one alone goes to level 0
        // as it is.
        for (ks, orphans) in newer_orphans {
            let alone = orphans.len() == 1;
            for o in orphans {
                self.report.tables_kept.push(KeptTable {
                    number: o.number,
                    keyspace: ks,
                    level: alone.then_some(0),
                    entries: o.props.num_entries,
                    bytes: o.size,
                });
                if alone {
                    kept.push(Kept {
                        keyspace: ks,
                        level: 0,
                        meta: meta_of(o.number, o.size, &o.props, &o.range_dels),
                    });
                } else {
                    to_merge.entry(ks).or_default().push(o.number);
                }
            }
        }
        // Keyspaces of kept tables that no usable manifest records.
        let unknown: BTreeSet<u32> = kept
            .iter()
            .map(|k| k.keyspace)
            .chain(to_merge.keys().copied())
            .filter(|&ks| cat.owner(ks) == keyspaces::Owner::Unknown)
            .collect();
        for ks in unknown {
            let name = cat.adopt(ks, self.opts)?;
            self.report.manifest_notes.push(format!(
                "tables of keyspace {ks}, which no usable manifest records, were kept in a keyspace recreated as {name:?}"
            ));
        }
        for (ks, inputs) in &to_merge {
            for &n in inputs {
                self.lost.move_later(&table_path(self.dir, n))?;
            }
            let merged = tables::merge(
                self.env,
                self.dir,
                self.opts,
                cat.table_options(*ks, self.opts),
                inputs,
                &mut self.next_file,
                db_id,
            )?;
            self.report
                .merged_into
                .extend(merged.iter().map(|m| m.number));
            kept.extend(merged.into_iter().map(|meta| Kept {
                keyspace: *ks,
                level: 0,
                meta,
            }));
        }

        // WALs: everything newer than each keyspace's kept tables.
        let mut covered: BTreeMap<u32, SeqNo> = BTreeMap::new();
        for k in &kept {
            let s = covered.entry(k.keyspace).or_default();
            *s = (*s).max(k.meta.largest_seq);
        }
        let rule = crate::record_log::IdentityRule {
            db_id,
            required: old.as_ref().is_some_and(|m| m.wals_have_identity),
        };
        // With no usable manifest, or one cut short by damage, the
        // catalogue may lack a keyspace created later: its WAL entries are
        // adopted. An intact manifest knows every keyspace, so an unknown
        // id in a WAL is damage (as recovery says).
        let adopt = old.as_ref().is_none_or(|m| m.damage.is_some());
        let mut in_tables = wal::KeptTables::new(self.env, self.dir, &kept);
        let mut next_file = self.next_file;
        let mut replay = wal::Replay::new(
            self.env,
            self.dir,
            self.opts,
            db_id,
            &mut next_file,
            &cat,
            &covered,
            adopt,
        );
        let mut dropped_wals = Vec::new();
        for &n in &files.wals {
            let path = wal_path(self.dir, n);
            if n < log_number {
                self.report.wals_skipped.push(path.clone());
            } else {
                let data = wal_images
                    .iter()
                    .find(|(m, _)| *m == n)
                    .map(|(_, d)| d.as_slice())
                    .expect("every WAL at or after the log number was read");
                if let Some(why) = replay.wal(n, data, rule, &mut in_tables, &mut self.report)? {
                    let bytes = data.len() as u64;
                    self.report
                        .wals_dropped
                        .push(Dropped::whole(&path, bytes, why));
                    dropped_wals.push(n);
                }
            }
            self.lost.move_later(&path)?;
        }
        replay.flush()?;
        if let Some(m) = &old {
            for required in m.wals.required() {
                let present = files.wals.binary_search(&required.number).is_ok();
                if present && !dropped_wals.contains(&required.number) {
                    continue;
                }
                let what = match required.sealed_len {
                    Some(len) => format!("a WAL sealed at {len} bytes"),
                    None => "the live WAL".to_string(),
                };
                let how = if present {
                    "but the file there is not this database's (see the dropped WALs)"
                } else {
                    "but it is missing"
                };
                let path = wal_path(self.dir, required.number);
                self.report.wals_missing.push(Dropped::whole(
                    &path,
                    required.sealed_len.unwrap_or(0),
                    format!(
                        "the manifest names it as {what}, {how}: the acknowledged writes it held are lost"
                    ),
                ));
            }
        }
        let wal_seq = replay.last_seq;
        let wal_tables = std::mem::take(&mut replay.tables);
        let adopted = std::mem::take(&mut replay.adopted);
        self.report.wal_entries_of_dropped_keyspaces = replay.dropped_entries;
        drop(replay);
        for ks in adopted {
            let name = cat.adopt(ks, self.opts)?;
            self.report.manifest_notes.push(format!(
                "WAL records write keyspace {ks}, which no usable manifest records: they were replayed into a keyspace recreated as {name:?}"
            ));
        }
        self.next_file = next_file;
        self.report.wal_tables = wal_tables.iter().map(|(_, m)| m.number).collect();
        kept.extend(wal_tables.into_iter().map(|(keyspace, meta)| Kept {
            keyspace,
            level: 0,
            meta,
        }));

        let last_seq = max_seq_seen.max(wal_seq);
        let last_seq = kept.iter().fold(last_seq, |s, k| s.max(k.meta.largest_seq));
        self.install(&kept, &cat, files, last_seq, db_id)?;
        self.report.keyspaces = std::iter::once((0, crate::keyspace::DEFAULT_KEYSPACE, false))
            .chain(
                cat.keyspaces
                    .iter()
                    .map(|(&id, k)| (id, k.def.name.as_str(), k.adopted)),
            )
            .map(|(id, name, adopted)| RepairedKeyspace {
                id,
                name: name.to_string(),
                adopted,
                tables: kept.iter().filter(|k| k.keyspace == id).count(),
            })
            .collect();
        self.report.table_bytes = kept.iter().map(|k| k.meta.size).sum();
        self.report.last_sequence = last_seq;
        self.report.moved_to_lost = std::mem::take(&mut self.lost.kept);
        Ok(self.report)
    }

    /// Verifies table `n` whole. `Err` only for an error that says nothing
    /// about its bytes (see [`cannot_read`]): the repair stops.
    fn scan(&self, n: u64) -> Result<Scanned> {
        let path = table_path(self.dir, n);
        Ok(match scan_table(Some(self.env), &path, n) {
            Ok(s) => Scanned::Intact {
                size: s.size,
                props: s.props,
                range_dels: s.range_dels,
            },
            Err((e, _)) if cannot_read(&e) => return Err(e),
            Err((e, _)) => {
                let why = describe(&e);
                // Can its blocks be located at all?
                match crate::check::FileSource::open(Some(self.env), &path).and_then(|src| {
                    crate::table::TableReader::open(std::sync::Arc::new(src), n, None)
                }) {
                    Ok(t) => Scanned::Damaged {
                        props: t.properties().clone(),
                        why,
                    },
                    Err(e) if cannot_read(&e) => return Err(e),
                    Err(_) => Scanned::Unreadable { why },
                }
            }
        })
    }

    fn drop_table(&mut self, path: &Path, reason: String) -> Result<()> {
        let bytes = fs::metadata(path).map_or(0, |m| m.len());
        self.lost.move_later(path)?;
        self.report
            .tables_dropped
            .push(Dropped::whole(path, bytes, reason));
        Ok(())
    }

    /// Replaces damaged table `n` by its intact blocks (same number); the
    /// original goes to `lost/`.
    fn salvage(
        &mut self,
        n: u64,
        keyspace: u32,
        level: Option<usize>,
        why: String,
        table_options: TableOptions,
        db_id: u64,
    ) -> Result<Option<FileMeta>> {
        let path = table_path(self.dir, n);
        let copy = self.lost.preserve(&path)?;
        let s = match tables::salvage(self.env, self.dir, table_options, &copy, n, db_id) {
            Ok(s) => s,
            Err(e) => {
                let bytes = fs::metadata(&copy).map_or(0, |m| m.len());
                self.lost.retire_later(&path);
                let reason = format!("{why}; nothing could be salvaged: {}", describe(&e));
                self.report
                    .tables_dropped
                    .push(Dropped::whole(&path, bytes, reason));
                return Ok(None);
            }
        };
        let Some(meta) = s.meta else {
            self.lost.retire_later(&path);
            let bytes = fs::metadata(&copy).map_or(0, |m| m.len());
            let reason = format!("{why}; no data block was intact");
            self.report
                .tables_dropped
                .push(Dropped::whole(&path, bytes, reason));
            return Ok(None);
        };
        self.report.tables_salvaged.push(SalvagedTable {
            number: n,
            keyspace,
            level,
            entries_kept: meta.num_entries,
            entries_lost: s.entries_expected.saturating_sub(meta.num_entries),
            blocks_lost: s.blocks_lost,
            reason: why,
        });
        Ok(Some(meta))
    }

    /// Writes the new manifest and WAL, points CURRENT at them, then moves
    /// the old state into `lost/`.
    fn install(
        &mut self,
        kept: &[Kept],
        cat: &keyspaces::Catalogue,
        files: &Files,
        last_seq: SeqNo,
        db_id: u64,
    ) -> Result<()> {
        let wal_number = self.next_file;
        let manifest_number = self.next_file + 1;
        self.next_file += 2;
        let mut edit = VersionEdit::new();
        let mut others: BTreeMap<u32, Vec<(usize, FileMeta)>> = BTreeMap::new();
        for k in kept {
            if k.keyspace == 0 {
                edit.add_file(k.level, k.meta.clone());
            } else {
                others
                    .entry(k.keyspace)
                    .or_default()
                    .push((k.level, k.meta.clone()));
            }
        }
        (edit.keyspaces, edit.next_keyspace_id) = cat.parts(&others, wal_number);
        edit.log_number = Some(wal_number);
        edit.live_wal = Some(wal_number);
        edit.next_file_number = Some(self.next_file);
        edit.last_sequence = Some(last_seq);
        edit.db_id = Some(db_id);
        edit.manifest_number = Some(manifest_number);
        edit.wals_have_identity = true;
        // The manifest must be one recovery accepts (every keyspace's tree
        // valid) before anything is replaced.
        let manifest_path = self.dir.join(manifest_name(manifest_number));
        let mut image = LogWriter::new(Vec::new());
        image.add_record(&edit.encode())?;
        image.sync()?;
        crate::db::recovery::replay_manifest(&manifest_path, &image.into_inner()).map_err(|e| {
            Error::caused_by(
                ErrorKind::Corruption,
                "repair could not arrange the kept tables into a valid tree",
                e,
            )
        })?;

        for &n in &files.manifests {
            self.lost.move_later(&self.dir.join(manifest_name(n)))?;
        }
        if files.has_current {
            // Renaming the new CURRENT over it unlinks this name; the copy
            // in lost/ keeps the old contents.
            self.lost.preserve(&self.dir.join(CURRENT))?;
        }

        let mut manifest = LogWriter::new(LogFile::Seq(
            self.env.create(&manifest_path, IoClass::Manifest)?,
        ));
        manifest.add_record(&edit.encode())?;
        manifest.sync()?;
        manifest.into_inner().finish(true)?;
        LogFile::create_wal(
            self.env,
            &wal_path(self.dir, wal_number),
            self.opts.wal_segment_size,
        )?
        .finish(true)?;
        crate::db::set_current(self.env, self.dir, manifest_number)?;
        self.lost.retire_all()?;
        self.env.sync_dir()?;
        self.report.new_manifest = manifest_path;
        Ok(())
    }
}

/// Why table `n` is not this database's table, if it is not.
fn foreign(n: u64, props: &TableProperties, db_id: u64) -> Option<String> {
    if props.file_number != 0 && props.file_number != n {
        return Some(format!(
            "its properties say it is table {:06}.sst: a copy or rename of another table",
            props.file_number
        ));
    }
    if props.db_id != 0 && props.db_id != db_id {
        return Some(format!(
            "written by database {:016x}, not this one ({db_id:016x})",
            props.db_id
        ));
    }
    None
}

/// Whether `e` is an error that says nothing about a file's bytes: it
/// could not be opened or read at all (permission denied, EIO, too many
/// open files, ...). A file shorter than its own structure says is damage,
/// not this.
pub(crate) fn cannot_read(e: &Error) -> bool {
    e.kind() == ErrorKind::Io && e.io_error_kind() != Some(std::io::ErrorKind::UnexpectedEof)
}

/// The report of a table the manifest names at `level` but the directory
/// lacks: what the manifest knew of it, and what losing it can mean.
fn missing_table(dir: &Path, level: usize, meta: &FileMeta) -> Dropped {
    let deletes = if meta.num_deletes > 0 {
        format!(
            "; {} of them were deletes, so keys they deleted may reappear with older values",
            meta.num_deletes
        )
    } else {
        String::new()
    };
    let reason = format!(
        "named by the manifest (level {level}) but missing from the directory: its {} entries (sequence numbers {}..={}, keys {:?}..={:?}) are lost{deletes}",
        meta.num_entries,
        meta.smallest_seq,
        meta.largest_seq,
        String::from_utf8_lossy(meta.smallest_user_key()),
        String::from_utf8_lossy(meta.largest_user_key()),
    );
    Dropped::whole(&table_path(dir, meta.number), meta.size, reason)
}

/// The database id most intact tables record (0 if none records one).
fn majority_db_id(scanned: &[(u64, Scanned)]) -> u64 {
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for (_, s) in scanned {
        if let Scanned::Intact { props, .. } | Scanned::Damaged { props, .. } = s {
            if props.db_id != 0 {
                *counts.entry(props.db_id).or_default() += 1;
            }
        }
    }
    counts
        .into_iter()
        .max_by_key(|&(id, c)| (c, std::cmp::Reverse(id)))
        .map_or(0, |(id, _)| id)
}

/// What the manifest records of an intact table: its bounds cover its
/// range tombstones too, as when it was written.
fn meta_of(number: u64, size: u64, p: &TableProperties, range_dels: &[RangeTombstone]) -> FileMeta {
    let (smallest, largest) =
        crate::table::builder::table_bounds(&p.smallest_key, &p.largest_key, range_dels);
    FileMeta {
        number,
        size,
        smallest,
        largest,
        smallest_seq: p.smallest_seq,
        largest_seq: p.largest_seq,
        num_entries: p.num_entries,
        num_deletes: p.num_deletes,
        num_range_deletes: range_dels.len() as u64,
    }
}

/// An error as one line with its offset, for the report.
fn describe(e: &Error) -> String {
    let mut s = e.message().to_string();
    if let Some(src) = std::error::Error::source(e) {
        s.push_str(&format!(": {src}"));
    }
    if let Some(o) = e.offset() {
        s.push_str(&format!(" (offset {o})"));
    }
    s
}
