//! Offline verification of a database directory: every table block and
//! every WAL record, without opening the database.
//!
//! [`check_dir`] never goes through `Db::open`, so it works on a database
//! that cannot be opened, and it never writes to the directory (no LOCK file
//! is created, no probe files, nothing is repaired). It reads files with
//! plain `std::fs` I/O.
//!
//! What it does:
//! 1. reads CURRENT and replays the manifest it names (decode + the same
//!    consistency rules recovery applies); damage is a problem, a torn last
//!    edit is a note (recovery drops it too);
//! 2. lists tables the manifest names that are missing from the directory,
//!    and live tables whose size differs from what the manifest recorded or
//!    whose properties name another table or another database (a file
//!    copied over it; see [`crate::table::identity`]);
//! 3. opens every `*.sst` (footer, properties, filter and index blocks) and
//!    streams all its data blocks through [`TableScanner`], which verifies
//!    each block's checksum; keys must be in increasing internal-key order
//!    and the entry count must match the table properties;
//! 4. reads every `*.log` with [`LogReader`] and decodes every record as a
//!    [`WriteBatch`]. A WAL the manifest recorded as sealed (closed with a
//!    known length: after a memtable switch or a clean close) is read
//!    strictly to that length; a WAL the manifest requires (sealed, or the
//!    live one) but the directory lacks is a problem. Otherwise a torn or
//!    zero-padded tail (the unsynced end of the live WAL after a crash) is
//!    a note, not a problem.
//!
//! Damage in a file the (readable) manifest shows to be unused — a table it
//! does not name, a WAL older than its log number — is reported as a note:
//! recovery ignores those files and deletes them at the next open. If the
//! manifest cannot be read, every file counts.
//!
//! The lock: the check takes a *shared* `flock` on an existing LOCK file for
//! its duration, so `Db::open` (which wants it exclusively) fails with Busy
//! while a check runs. If a live database holds the lock, files may change
//! under the check (compaction deletes tables, the WAL grows), so by default
//! [`check_dir`] refuses with [`ErrorKind::Busy`];
//! [`CheckOptions::ignore_lock`] checks anyway and sets
//! [`CheckReport::lock_held`].

use std::fs::{self, File};
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::creation::{self, Creation};
use crate::error::{Error, ErrorKind, Result};
use crate::filenames::{self, FileKind, CURRENT};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::record_log::{LogReader, TailState};
use crate::table::{
    ExpectedTable, RandomSource, SeqSource, TableProperties, TableReader, TableScanner,
};
use crate::version::{FileMeta, Version, VersionBuilder, VersionEdit};
use crate::wal::WalSet;

/// One finding: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file the finding is about.
    pub file: PathBuf,
    /// Byte offset in `file` (a block, record or footer) when known.
    pub offset: Option<u64>,
    /// What is wrong (or worth noting) there.
    pub message: String,
}

/// What [`check_dir`] verified and what it found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// The database directory checked.
    pub dir: PathBuf,
    /// The manifest CURRENT names, if CURRENT could be read.
    pub manifest: Option<PathBuf>,
    /// Manifest edits decoded and applied.
    pub manifest_edits: u64,
    /// Tables the manifest names (0 if it could not be read).
    pub live_tables: u64,
    /// `*.sst` files opened and scanned.
    pub tables: u64,
    /// Data blocks read and checksum-verified.
    pub blocks: u64,
    /// Table entries read.
    pub entries: u64,
    /// `*.log` files read.
    pub wal_files: u64,
    /// WAL records read and decoded as write batches.
    pub wal_records: u64,
    /// A database process held the LOCK while the check ran (only with
    /// [`CheckOptions::ignore_lock`]).
    pub lock_held: bool,
    /// Damage that matters: data the database needs is unreadable or wrong.
    pub problems: Vec<Finding>,
    /// Benign or informational: torn WAL tails, damage in files recovery
    /// ignores.
    pub notes: Vec<Finding>,
}

impl CheckReport {
    /// No problems found (notes do not count).
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// How to check.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Check even if another process holds the database LOCK.
    pub ignore_lock: bool,
}

/// Verifies the database in `dir` without opening it and without writing
/// anything: replays the manifest CURRENT names, checks that every table it
/// names is present with the recorded size and belongs to this database,
/// reads every block of every table (checksums, key order, entry counts)
/// and every record of every WAL. Damage is reported in the
/// [`CheckReport`] (problems, and notes for harmless things such as a torn
/// tail of the live WAL after a crash or damage in a file the manifest no
/// longer uses). It takes a shared lock for its duration, so a writer
/// cannot open the database while it runs.
///
/// # Errors
///
/// Only when the check cannot run at all: `Io` if `dir` cannot be read,
/// `InvalidArgument` if it holds nothing that looks like a database, `Busy`
/// if a process (this one included) has the database open for writing (see
/// [`CheckOptions::ignore_lock`]).
pub fn check_dir(dir: impl AsRef<Path>) -> Result<CheckReport> {
    check_dir_with(dir, CheckOptions::default())
}

/// [`check_dir`] with options.
///
/// # Errors
///
/// As [`check_dir`].
pub fn check_dir_with(dir: impl AsRef<Path>, opts: CheckOptions) -> Result<CheckReport> {
    let dir = dir.as_ref();
    let entries = fs::read_dir(dir)
        .map_err(|e| Error::io(e, "cannot list the database directory").with_file(dir))?;
    let mut tables = Vec::new();
    let mut wals = Vec::new();
    let mut has_current = false;
    for entry in entries {
        let entry =
            entry.map_err(|e| Error::io(e, "cannot list the database directory").with_file(dir))?;
        match entry.file_name().to_str().and_then(filenames::parse) {
            Some(FileKind::Table(n)) => tables.push(n),
            Some(FileKind::Wal(n)) => wals.push(n),
            Some(FileKind::Current) => has_current = true,
            _ => {}
        }
    }
    tables.sort_unstable();
    wals.sort_unstable();
    // Without CURRENT there is either no database (nothing, or what an
    // unfinished creation leaves: the next open starts afresh) or one that
    // lost CURRENT, which is damage.
    let lost_current = if has_current {
        None
    } else {
        match creation::inspect(dir) {
            Ok(Creation::NotCreated { .. }) => {
                return Err(Error::invalid(
                    "no quietkv database here (no CURRENT file, and no tables, WAL records or manifest edits)",
                )
                .with_file(dir))
            }
            Ok(Creation::Complete) => None,
            Err(e) if e.kind() == ErrorKind::Corruption => Some(e),
            Err(e) => return Err(e),
        }
    };

    let (_lock, lock_held) = match crate::lockfile::lock_shared(dir) {
        Ok(lock) => (Some(lock), false),
        Err(e) if e.kind() == ErrorKind::Busy => (None, true),
        Err(e) => return Err(e),
    };
    if lock_held && !opts.ignore_lock {
        return Err(Error::new(
            ErrorKind::Busy,
            "the database is in use by another process (its lock is held); files may change while they are checked",
        )
        .with_file(dir));
    }

    let mut c = Checker {
        dir,
        report: CheckReport {
            dir: dir.to_path_buf(),
            lock_held,
            ..CheckReport::default()
        },
    };
    let manifest = c.read_manifest(lost_current);
    if let Some(m) = &manifest {
        c.report.live_tables = m.versions().map(|v| v.total_files() as u64).sum();
        for f in m
            .versions()
            .flat_map(|v| (0..crate::version::NUM_LEVELS).flat_map(|l| v.files(l)))
        {
            if tables.binary_search(&f.number).is_err() {
                let path = filenames::table_path(dir, f.number);
                c.problem(
                    path,
                    None,
                    "table is named by the manifest but missing from the directory".into(),
                );
            }
        }
    }
    let db_id = manifest.as_ref().map_or(0, |m| m.db_id);
    for &n in &tables {
        let meta = manifest.as_ref().map(|m| m.live_table(n));
        c.check_table(n, meta, db_id);
    }
    if let Some(m) = &manifest {
        for required in m.wals.required() {
            if wals.binary_search(&required.number).is_err() {
                let e = crate::db::missing_wal(dir, required);
                c.error(&e, dir, true);
            }
        }
    }
    for &n in &wals {
        let (live, sealed_len) = match &manifest {
            Some(m) => (n >= m.wals.log_number(), m.wals.sealed_len(n)),
            None => (true, None),
        };
        // Without a readable manifest, a WAL is still compared with the
        // database id the tables record (and its own name).
        let rule = crate::record_log::IdentityRule {
            db_id,
            required: live && manifest.as_ref().is_some_and(|m| m.wals_have_identity),
        };
        c.check_wal(n, live, sealed_len, rule);
    }
    Ok(c.report)
}

/// What the manifest says.
struct Manifest {
    /// The default keyspace's tables.
    version: Version,
    /// The other keyspaces' tables.
    keyspaces: Vec<Version>,
    wals: WalSet,
    /// 0 when the manifest records none (not compared).
    db_id: u64,
    /// Whether every WAL it may replay starts with an identity record.
    wals_have_identity: bool,
}

impl Manifest {
    /// Every keyspace's version, the default one first.
    fn versions(&self) -> impl Iterator<Item = &Version> {
        std::iter::once(&self.version).chain(&self.keyspaces)
    }

    /// `Some(Some(meta))` for a live table, `Some(None)` for one the
    /// manifest does not name.
    fn live_table(&self, number: u64) -> Option<FileMeta> {
        self.versions()
            .flat_map(|v| (0..crate::version::NUM_LEVELS).flat_map(|l| v.files(l)))
            .find(|f| f.number == number)
            .map(|f| (**f).clone())
    }
}

struct Checker<'a> {
    dir: &'a Path,
    report: CheckReport,
}

impl Checker<'_> {
    fn problem(&mut self, file: PathBuf, offset: Option<u64>, message: String) {
        self.report.problems.push(Finding {
            file,
            offset,
            message,
        });
    }

    fn note(&mut self, file: PathBuf, offset: Option<u64>, message: String) {
        self.report.notes.push(Finding {
            file,
            offset,
            message,
        });
    }

    /// Records an engine error as a problem (or a note), taking the file and
    /// offset from the error when it has them.
    fn error(&mut self, e: &Error, file: &Path, serious: bool) {
        let path = e
            .file()
            .map_or_else(|| file.to_path_buf(), Path::to_path_buf);
        let mut message = format!("{}: {}", e.kind(), e.message());
        if let Some(src) = std::error::Error::source(e) {
            message.push_str(&format!(": {src}"));
        }
        if serious {
            self.problem(path, e.offset(), message);
        } else {
            self.note(path, e.offset(), message);
        }
    }

    /// Reads CURRENT and replays its manifest; `None` (with a problem
    /// recorded) if that is impossible. `lost_current`: why CURRENT is
    /// missing from a directory that holds a database.
    fn read_manifest(&mut self, lost_current: Option<Error>) -> Option<Manifest> {
        let current_path = self.dir.join(CURRENT);
        if let Some(e) = lost_current {
            self.problem(current_path, None, e.message().to_string());
            return None;
        }
        let current = match fs::read(&current_path) {
            Ok(c) => c,
            Err(e) => {
                self.error(&Error::io(e, "cannot read CURRENT"), &current_path, true);
                return None;
            }
        };
        let name = String::from_utf8_lossy(&current);
        let name = name.trim_end_matches('\n');
        if !matches!(filenames::parse(name), Some(FileKind::Manifest(_))) {
            self.problem(
                current_path,
                Some(0),
                format!("CURRENT does not name a manifest: {name:?}"),
            );
            return None;
        }
        let path = self.dir.join(name);
        self.report.manifest = Some(path.clone());
        let data = match fs::read(&path) {
            Ok(d) => d,
            Err(e) => {
                let e = Error::io(e, "cannot read the manifest named by CURRENT");
                self.error(&e, &path, true);
                return None;
            }
        };
        let mut reader = LogReader::new(&path, &data);
        let mut builder = VersionBuilder::new(&Version::new());
        let mut wals = WalSet::default();
        let mut db_id = 0;
        let mut wals_have_identity = false;
        // Keyspaces are replayed by recovery's own code.
        let mut keyspaces = std::collections::BTreeMap::new();
        let mut ks_state = crate::db::recovery::Recovered::default();
        loop {
            let record = match reader.read_record() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    self.error(&e, &path, true);
                    return None;
                }
            };
            let offset = reader.last_record_offset();
            let edit = match VersionEdit::decode(&record)
                .and_then(|e| builder.apply(&e).map(|_| e))
                .and_then(|e| {
                    crate::db::recovery::apply_keyspaces(&e, &mut keyspaces, &mut ks_state)?;
                    Ok(e)
                }) {
                Ok(e) => e,
                Err(e) => {
                    let msg = format!("bad manifest edit: {}", e.message());
                    self.problem(path, Some(offset), msg);
                    return None;
                }
            };
            wals.apply(&edit);
            wals_have_identity |= edit.wals_have_identity;
            if let Some(named) = edit.manifest_number {
                if let Err(e) = crate::db::check_manifest_number(&path, named) {
                    self.problem(path, Some(offset), e.message().to_string());
                    return None;
                }
            }
            db_id = match crate::table::identity::db_id_after_edit(db_id, edit.db_id) {
                Ok(id) => id,
                Err(e) => {
                    let msg = format!("bad manifest edit: {}", e.message());
                    self.problem(path, Some(offset), msg);
                    return None;
                }
            };
            self.report.manifest_edits += 1;
        }
        match reader.tail() {
            TailState::Torn { offset } => self.note(
                path.clone(),
                Some(offset),
                "torn last manifest edit (never installed; recovery drops it)".into(),
            ),
            TailState::Unpersisted { offset } => self.note(
                path.clone(),
                Some(offset),
                "last manifest edit partly persisted out of order (never installed; recovery drops it)"
                    .into(),
            ),
            TailState::Recycled { offset } => self.note(
                path.clone(),
                Some(offset),
                "manifest holds bytes of another log (never installed; recovery drops them)".into(),
            ),
            TailState::Clean | TailState::ZeroPadded { .. } => {}
        }
        if self.report.manifest_edits == 0 {
            self.problem(path, None, "the manifest holds no complete edit".into());
            return None;
        }
        let mut others = Vec::new();
        for (id, (_, b, _)) in keyspaces {
            match b.build() {
                Ok(v) => others.push(v),
                Err(e) => {
                    let msg = format!(
                        "manifest describes an invalid tree for keyspace {id}: {}",
                        e.message()
                    );
                    self.problem(path, None, msg);
                    return None;
                }
            }
        }
        match builder.build() {
            Ok(version) => Some(Manifest {
                version,
                keyspaces: others,
                wals,
                db_id,
                wals_have_identity,
            }),
            Err(e) => {
                let msg = format!("manifest describes an invalid tree: {}", e.message());
                self.problem(path, None, msg);
                None
            }
        }
    }

    /// `meta`: `None` if the manifest is unreadable, `Some(None)` if it does
    /// not name this table, `Some(Some(m))` for a live table. `db_id`: the
    /// manifest's (0 = unknown).
    fn check_table(&mut self, number: u64, meta: Option<Option<FileMeta>>, db_id: u64) {
        let path = filenames::table_path(self.dir, number);
        let serious = !matches!(meta, Some(None));
        self.report.tables += 1;
        match scan_table(None, &path, number) {
            Ok(scan) => {
                self.report.blocks += scan.blocks;
                self.report.entries += scan.entries;
                if let Some(Some(m)) = meta {
                    if m.size != scan.size {
                        let msg = format!(
                            "table is {} bytes but the manifest recorded {}",
                            scan.size, m.size
                        );
                        self.problem(path.clone(), None, msg);
                    }
                    // Reads find a key's range tombstones only in tables
                    // whose recorded key range holds the key.
                    let (lo, hi) = crate::table::builder::table_bounds(
                        &scan.props.smallest_key,
                        &scan.props.largest_key,
                        &scan.range_dels,
                    );
                    let uk = crate::key::user_key;
                    if !lo.is_empty()
                        && (uk(&lo) < m.smallest_user_key() || uk(&hi) > m.largest_user_key())
                    {
                        let msg = format!(
                            "table holds keys or range tombstones from {:?} to {:?}, outside the key range the manifest recorded ({:?} to {:?})",
                            String::from_utf8_lossy(uk(&lo)),
                            String::from_utf8_lossy(uk(&hi)),
                            String::from_utf8_lossy(m.smallest_user_key()),
                            String::from_utf8_lossy(m.largest_user_key()),
                        );
                        self.problem(path.clone(), None, msg);
                    }
                    if m.num_range_deletes != scan.range_dels.len() as u64 {
                        let msg = format!(
                            "table holds {} range tombstones but the manifest recorded {}",
                            scan.range_dels.len(),
                            m.num_range_deletes
                        );
                        self.problem(path.clone(), None, msg);
                    }
                    if m.num_entries != scan.entries {
                        let msg = format!(
                            "table holds {} entries but the manifest recorded {}",
                            scan.entries, m.num_entries
                        );
                        self.problem(path.clone(), None, msg);
                    }
                    // The size was compared above, with its own message.
                    let expected = ExpectedTable::new(&m, db_id);
                    if let Err(e) = expected.verify_properties(&path, &scan.props) {
                        self.error(&e, &path, true);
                    }
                }
            }
            Err((e, blocks)) => {
                self.report.blocks += blocks;
                self.error(&e, &path, serious);
                if !serious {
                    self.note(
                        path,
                        None,
                        "the damaged table is not named by the manifest (recovery deletes it)"
                            .into(),
                    );
                }
            }
        }
    }

    /// `live`: the WAL would be replayed by recovery; `sealed_len`: the
    /// manifest recorded it as sealed at that length.
    fn check_wal(
        &mut self,
        number: u64,
        live: bool,
        sealed_len: Option<u64>,
        rule: crate::record_log::IdentityRule,
    ) {
        let path = filenames::wal_path(self.dir, number);
        self.report.wal_files += 1;
        let data = match fs::read(&path) {
            Ok(d) => d,
            Err(e) => {
                self.error(&Error::io(e, "cannot read WAL"), &path, live);
                return;
            }
        };
        let mut reader = LogReader::new(&path, &data)
            .for_log(number)
            .expect_identity(rule);
        if let Some(len) = sealed_len {
            reader = reader.sealed_at(len);
        }
        let mut damaged = false;
        loop {
            match reader.read_record() {
                Ok(Some(record)) => {
                    self.report.wal_records += 1;
                    if let Err(e) = WriteBatch::decode(&record) {
                        let offset = reader.last_record_offset();
                        let msg = format!("WAL record is not a valid write batch: {}", e.message());
                        damaged = true;
                        if live {
                            self.problem(path.clone(), Some(offset), msg);
                        } else {
                            self.note(path.clone(), Some(offset), msg);
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    damaged = true;
                    self.error(&e, &path, live);
                    break;
                }
            }
        }
        match reader.tail() {
            TailState::Torn { offset } => self.note(
                path.clone(),
                Some(offset),
                "torn last WAL record (never synced; recovery drops it)".into(),
            ),
            TailState::Unpersisted { offset } => self.note(
                path.clone(),
                Some(offset),
                "unsynced WAL tail persisted out of order: a sector is missing (never synced; \
                 recovery drops the records from here)"
                    .into(),
            ),
            TailState::Recycled { offset } => self.note(
                path.clone(),
                Some(offset),
                "recycled WAL: its records end here and the bytes after are the file's \
                 earlier life as another WAL (recovery ignores them)"
                    .into(),
            ),
            TailState::Clean | TailState::ZeroPadded { .. } => {}
        }
        if damaged && !live {
            self.note(
                path,
                None,
                "the damaged WAL is older than the manifest's log number (recovery ignores it)"
                    .into(),
            );
        }
    }
}

pub(crate) struct TableScan {
    pub(crate) size: u64,
    pub(crate) props: TableProperties,
    pub(crate) blocks: u64,
    pub(crate) entries: u64,
    /// Its range tombstones (checked when the table was opened).
    pub(crate) range_dels: Vec<crate::range_tombstone::RangeTombstone>,
}

/// Opens a table and reads every data block; on error also returns how
/// many blocks were verified before it.
/// Verifies table `number` at `path` whole (see the module docs). With
/// `env`, its files are opened through it (so a test's fault layer sees the
/// opens).
pub(crate) fn scan_table(
    env: Option<&quietio::IoEnv>,
    path: &Path,
    number: u64,
) -> std::result::Result<TableScan, (Error, u64)> {
    let source = FileSource::open(env, path).map_err(|e| (e, 0))?;
    let size = source.size;
    let table = TableReader::open(Arc::new(source), number, None).map_err(|e| (e, 0))?;
    let table = Arc::new(table);
    let num_blocks = table.index().len() as u64;
    let expected_entries = table.properties().num_entries;
    let file = open_for_verify(env, path)
        .map_err(|e| (Error::io(e, "cannot open table").with_file(path), 0))?;
    let seq = FileSeq {
        reader: BufReader::with_capacity(1 << 20, file),
        path: path.to_path_buf(),
        pos: 0,
    };
    let mut scanner = TableScanner::new(Arc::clone(&table), Box::new(seq));
    let mut entries = 0u64;
    let mut prev: Vec<u8> = Vec::new();
    let result = (|| {
        scanner.seek_to_first()?;
        while scanner.valid() {
            let key = scanner.key();
            if entries > 0 && compare_internal(&prev, key) != std::cmp::Ordering::Less {
                let block = table.index().get(scanner.current_block());
                let mut e = Error::corruption(format!(
                    "keys out of order: entry {entries} does not sort after the previous one"
                ))
                .with_file(path);
                if let Some(b) = block {
                    e = e.with_offset(b.handle.offset);
                }
                return Err(e);
            }
            prev.clear();
            prev.extend_from_slice(key);
            entries += 1;
            scanner.next()?;
        }
        if entries != expected_entries {
            return Err(Error::corruption(format!(
                "table holds {entries} entries but its properties say {expected_entries}"
            ))
            .with_file(path));
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(TableScan {
            size,
            props: table.properties().clone(),
            blocks: num_blocks,
            entries,
            range_dels: table.range_tombstones().to_vec(),
        }),
        Err(e) => Err((e, scanner.current_block() as u64)),
    }
}

/// Positional reads of a table with plain `pread`.
pub(crate) struct FileSource {
    file: File,
    path: PathBuf,
    size: u64,
}

fn open_for_verify(env: Option<&quietio::IoEnv>, path: &Path) -> std::io::Result<File> {
    match env {
        Some(env) => env.open_for_verify(path),
        None => File::open(path),
    }
}

impl FileSource {
    /// Opens a table for verification (through `env` when given).
    pub(crate) fn open(env: Option<&quietio::IoEnv>, path: &Path) -> Result<FileSource> {
        let file = open_for_verify(env, path)
            .map_err(|e| Error::io(e, "cannot open table").with_file(path))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io(e, "cannot stat table").with_file(path))?
            .len();
        Ok(FileSource {
            file,
            path: path.to_path_buf(),
            size,
        })
    }
}

impl RandomSource for FileSource {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset).map_err(|e| {
            Error::io(e, format!("cannot read {len} bytes"))
                .with_file(&self.path)
                .with_offset(offset)
        })?;
        Ok(buf)
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// Sequential reads of a table through a buffered reader.
struct FileSeq {
    reader: BufReader<File>,
    path: PathBuf,
    pos: u64,
}

impl SeqSource for FileSeq {
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.reader.read_exact(buf).map_err(|e| {
            Error::io(e, format!("cannot read {} bytes", buf.len()))
                .with_file(&self.path)
                .with_offset(self.pos)
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn small() -> Options {
        Options {
            memtable_size: 64 << 10,
            block_size: 1024,
            ..Options::default()
        }
    }

    /// A closed database with one flushed table and `wal_keys` entries left
    /// in the WAL (one batch each).
    fn make_db(path: &Path, wal_keys: u32) {
        let db = Db::open(path, small()).unwrap();
        for i in 0..500u32 {
            db.put(format!("key{i:05}").as_bytes(), [b'v'; 40]).unwrap();
        }
        db.flush().unwrap();
        for i in 0..wal_keys {
            db.put(format!("wal{i:05}").as_bytes(), b"value").unwrap();
        }
        db.close().unwrap();
    }

    fn files(path: &Path, ext: &str) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        v.sort();
        v
    }

    fn flip(path: &Path, offset: u64) {
        let mut data = fs::read(path).unwrap();
        data[offset as usize] ^= 0x40;
        fs::write(path, data).unwrap();
    }

    #[test]
    fn check_healthy_database() {
        let d = dir();
        make_db(d.path(), 10);
        let r = check_dir(d.path()).unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!(r.tables, 1);
        assert_eq!(r.live_tables, 1);
        assert!(r.blocks > 5, "{r:?}");
        assert_eq!(r.entries, 500);
        assert_eq!(r.wal_records, 10);
        assert!(r.manifest_edits >= 1);
        assert!(!r.lock_held);
    }

    #[test]
    fn check_finds_a_flipped_data_block_byte() {
        let d = dir();
        make_db(d.path(), 0);
        let sst = &files(d.path(), "sst")[0];
        flip(sst, 3000);
        let r = check_dir(d.path()).unwrap();
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        let p = &r.problems[0];
        assert_eq!(&p.file, sst);
        let off = p.offset.unwrap();
        assert!(off <= 3000 && 3000 - off < 2048, "{p:?}");
        assert!(p.message.contains("corruption"), "{p:?}");
        assert!(r.blocks >= 1);
    }

    #[test]
    fn check_finds_a_damaged_middle_wal_record() {
        let d = dir();
        make_db(d.path(), 5);
        let wal = first_wal(d.path());
        let len = fs::metadata(&wal).unwrap().len();
        // Records are equal-sized: damage the payload of the middle one.
        flip(&wal, len / 2);
        let r = check_dir(d.path()).unwrap();
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert_eq!(r.problems[0].file, wal);
        assert!(r.problems[0].offset.is_some());
        assert!(r.wal_records < 5);
    }

    /// The first WAL that holds anything.
    fn first_wal(path: &Path) -> PathBuf {
        files(path, "log")
            .into_iter()
            .find(|p| fs::metadata(p).unwrap().len() > 0)
            .unwrap()
    }

    /// The live WAL of a process that died: nothing sealed it.
    fn crashed_db(path: &Path, n: usize) -> PathBuf {
        let db = Db::open(path, small()).unwrap();
        for i in 0..n {
            db.put(format!("wal{i:05}").as_bytes(), b"value").unwrap();
        }
        // No close: the WAL stays unsealed, as after a crash. (The LOCK
        // stays held by this process, hence ignore_lock below.)
        std::mem::forget(db);
        first_wal(path)
    }

    #[test]
    fn torn_tail_of_an_unsealed_wal_is_a_note() {
        let d = dir();
        let wal = crashed_db(d.path(), 5);
        // The live WAL is allocated ahead: zeros after its last record
        // (which ends in a value byte). Cut into the record itself.
        let data = fs::read(&wal).unwrap();
        let len = data.iter().rposition(|&b| b != 0).unwrap() as u64 + 1;
        let f = fs::OpenOptions::new().write(true).open(&wal).unwrap();
        f.set_len(len - 3).unwrap();
        let r = check_dir_with(d.path(), CheckOptions { ignore_lock: true }).unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!(r.wal_records, 4);
        assert!(r.notes.iter().any(|n| n.message.contains("torn")));
    }

    /// A crashed database whose live WAL is a reused file: the old
    /// life's records after the new ones are a note, not damage.
    #[test]
    fn stale_records_after_a_recycled_wal_tail_are_a_note() {
        let d = dir();
        let opts = Options {
            wal_recycle_count: 1,
            ..small()
        };
        let db = Db::open(d.path(), opts).unwrap();
        let wait_kept = |db: &Db| {
            let t = std::time::Instant::now();
            while db.stats().wal_files_kept == 0 {
                assert!(t.elapsed().as_secs() < 60, "no WAL was kept");
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        };
        // A long first life, kept once flushed; a short second one; the
        // third WAL is the first file again.
        for i in 0..200 {
            db.put(format!("old{i:05}").as_bytes(), b"value").unwrap();
        }
        db.flush().unwrap();
        wait_kept(&db);
        db.put(b"second", b"value").unwrap();
        db.flush().unwrap();
        assert_eq!(db.stats().wal_files_recycled, 1);
        db.put(b"third-a", b"value").unwrap();
        db.put(b"third-b", b"value").unwrap();
        std::mem::forget(db);
        let r = check_dir_with(d.path(), CheckOptions { ignore_lock: true }).unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        let note = r
            .notes
            .iter()
            .find(|n| n.message.contains("recycled WAL"))
            .unwrap_or_else(|| panic!("no note of the recycled tail: {:?}", r.notes));
        assert_eq!(note.file, *files(d.path(), "log").last().unwrap());
        // Right after the two small records of this life.
        assert!(note.offset.is_some_and(|o| o > 0 && o < 200), "{note:?}");
    }

    /// After a clean close, a truncated WAL, a damaged last record and a
    /// deleted WAL are each a problem, not a note: the next open would
    /// otherwise silently drop acknowledged writes.
    #[test]
    fn truncated_damaged_or_missing_sealed_wal_is_a_problem() {
        let d = dir();
        make_db(d.path(), 5);
        let wal = first_wal(d.path());
        let data = fs::read(&wal).unwrap();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("truncated by 3", data[..data.len() - 3].to_vec()),
            ("truncated to 0", Vec::new()),
            ("last byte flipped", {
                let mut d = data.clone();
                let n = d.len();
                d[n - 30] ^= 0x01;
                d
            }),
            ("length bit flipped", {
                let mut d = data.clone();
                d[9] ^= 0x80;
                d
            }),
        ];
        for (what, bytes) in cases {
            fs::write(&wal, &bytes).unwrap();
            let r = check_dir(d.path()).unwrap();
            assert!(!r.is_ok(), "{what}: {:?}", r.notes);
            assert_eq!(r.problems[0].file, wal, "{what}");
            let e = Db::open(d.path(), small()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corruption, "{what}: {e}");
        }
        fs::remove_file(&wal).unwrap();
        let r = check_dir(d.path()).unwrap();
        assert!(
            r.problems
                .iter()
                .any(|p| p.file == wal && p.message.contains("missing")),
            "{:?}",
            r.problems
        );
        let e = Db::open(d.path(), small()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        // Put it back: all five writes are there.
        fs::write(&wal, &data).unwrap();
        let db = Db::open(d.path(), small()).unwrap();
        for i in 0..5 {
            assert!(db.get(format!("wal{i:05}").as_bytes()).unwrap().is_some());
        }
    }

    #[test]
    fn missing_table_and_bad_current_are_problems() {
        let d = dir();
        make_db(d.path(), 0);
        let sst = files(d.path(), "sst")[0].clone();
        fs::remove_file(&sst).unwrap();
        let r = check_dir(d.path()).unwrap();
        assert_eq!(r.problems.len(), 1);
        assert_eq!(r.problems[0].file, sst);
        assert!(r.problems[0].message.contains("missing"));

        fs::write(d.path().join(CURRENT), "garbage\n").unwrap();
        let r = check_dir(d.path()).unwrap();
        assert!(r.problems.iter().any(|p| p.message.contains("CURRENT")));
    }

    #[test]
    fn damaged_manifest_is_a_problem() {
        let d = dir();
        make_db(d.path(), 0);
        let name = fs::read_to_string(d.path().join(CURRENT)).unwrap();
        let manifest = d.path().join(name.trim());
        // Corrupt the length of the only record so its body is damaged but
        // not at the tail: append a second copy of the file after it.
        let mut data = fs::read(&manifest).unwrap();
        let copy = data.clone();
        data[12] ^= 0x01;
        data.extend_from_slice(&copy);
        fs::write(&manifest, data).unwrap();
        let r = check_dir(d.path()).unwrap();
        assert!(!r.is_ok());
        assert_eq!(r.problems[0].file, manifest);
        assert_eq!(r.problems[0].offset, Some(0));
    }

    #[test]
    fn orphan_damaged_table_is_a_note() {
        let d = dir();
        make_db(d.path(), 0);
        let sst = files(d.path(), "sst")[0].clone();
        let orphan = filenames::table_path(d.path(), 999_999);
        fs::copy(&sst, &orphan).unwrap();
        flip(&orphan, 100);
        let r = check_dir(d.path()).unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!(r.tables, 2);
        assert!(r.notes.iter().any(|n| n.file == orphan));
    }

    #[test]
    fn refuses_a_locked_database_and_an_empty_dir() {
        let d = dir();
        make_db(d.path(), 0);
        let db = Db::open(d.path(), small()).unwrap();
        let e = check_dir(d.path()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        let r = check_dir_with(d.path(), CheckOptions { ignore_lock: true }).unwrap();
        assert!(r.lock_held);
        drop(db);
        assert!(!check_dir(d.path()).unwrap().lock_held);

        let empty = dir();
        let e = check_dir(empty.path()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(check_dir(empty.path().join("nope")).is_err());
    }
}
