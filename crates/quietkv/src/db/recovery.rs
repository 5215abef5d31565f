//! Opening a database: lock, manifest replay, WAL replay, and a fresh
//! manifest and WAL to continue from.

use std::collections::{HashSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};
use quietio::{IoClass, IoEnv};

use super::counters::Counters;
use super::manifest::set_current;
use super::state::{Immutable, Inner, State, SuperVersion, Wal};
use crate::batch::WriteBatch;
use crate::compaction::picker::BusyFiles;
use crate::creation::{self, Creation};
use crate::error::{Error, ErrorKind, Result};
use crate::fileio::{LogFile, TableFile};
use crate::filenames::{self, manifest_name, table_path, wal_path, FileKind, CURRENT};
use crate::iter::InternalIterator;
use crate::key::SeqNo;
use crate::lockfile::DirLock;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::record_log::{LogReader, LogWriter, TailState};
use crate::snapshot_list::SnapshotList;
use crate::table::TableCache;
use crate::table::{BlockCache, TableBuilder};
use crate::version::{FileMeta, Version, VersionEdit};
use crate::wal::{RequiredWal, WalSet};

pub(crate) fn open(dir: &Path, opts: Options) -> Result<Arc<Inner>> {
    opts.validate()?;
    refuse_incomplete_copy(dir)?;
    if !dir.exists() {
        if !opts.create_if_missing {
            return Err(Error::invalid(
                "database directory does not exist (create_if_missing is off)",
            )
            .with_file(dir));
        }
        fs::create_dir_all(dir)
            .map_err(|e| Error::io(e, "cannot create database directory").with_file(dir))?;
    }
    let env =
        Arc::new(IoEnv::open(dir, opts.io_options())?.with_fault_layer(opts.fault_layer.clone()));
    let dir = env.dir().to_path_buf();
    let lock = crate::lockfile::lock_exclusive_in(&env)?;

    let current = dir.join(CURRENT);
    let recovered = if current.exists() {
        if opts.error_if_exists {
            return Err(
                Error::invalid("database already exists (error_if_exists is on)").with_file(&dir),
            );
        }
        read_manifest(&env, &dir)?
    } else {
        // Never create a new database over the remains of an old one (its
        // tables would be garbage to the new manifest and deleted): only
        // over what a creation cut short before CURRENT leaves, which held
        // no data and is removed first. Anything else is Corruption.
        let leftovers = match creation::inspect(&dir)? {
            Creation::NotCreated { leftovers } => leftovers,
            // We hold the LOCK, so no quietkv process made it.
            Creation::Complete => {
                return Err(Error::new(
                    ErrorKind::Busy,
                    "CURRENT appeared while the database was being created: something else writes to this directory",
                )
                .with_file(current))
            }
        };
        if !opts.create_if_missing {
            return Err(Error::invalid(
                "no database here (no CURRENT file) and create_if_missing is off",
            )
            .with_file(&dir));
        }
        if !leftovers.is_empty() {
            log::warn!(
                "quietkv: {}: removing {} file(s) left by a creation that never finished",
                dir.display(),
                leftovers.len()
            );
            creation::remove_leftovers(&env, &leftovers)?;
            env.sync_dir()?;
        }
        Recovered {
            db_id: new_db_id()?,
            ..Recovered::default()
        }
    };
    check_tables_present(&dir, &recovered.version)?;
    // 0 for a database created before ids existed: it keeps having none
    // (its tables may record one its manifest lost, so a new one would
    // make them foreign), and its WALs' identity records name only the
    // file.
    let db_id = recovered.db_id;

    // Replay every WAL the manifest does not cover, oldest first. Data that
    // outgrows a memtable is written to L0 as it goes.
    let wals = wals_to_replay(&dir, &recovered)?;
    // Tables written during the replay get numbers no WAL has.
    let mut next_file = recovered
        .next_file
        .max(2)
        .max(wals.last().map_or(0, |n| n + 1));
    let mut edit = VersionEdit::new();
    let replayed = replay_wals(&env, &dir, &recovered, &wals, opts.memtable_size, |mem| {
        let number = next_file;
        next_file += 1;
        if let Some(meta) = write_l0(&env, &dir, &opts, &mem, number, db_id, opts.io_depth)? {
            edit.add_file(0, meta);
        }
        Ok(())
    })?;
    let last_seq = replayed.last_seq;
    next_file = next_file.max(replayed.next_file);
    // The rest of the replayed data: its WALs are deleted once the new
    // manifest is installed, so it must be in a table first.
    if !replayed.mem.is_empty() {
        let number = next_file;
        next_file += 1;
        if let Some(meta) = write_l0(
            &env,
            &dir,
            &opts,
            &replayed.mem,
            number,
            db_id,
            opts.io_depth,
        )? {
            edit.add_file(0, meta);
        }
    }
    let mut version = recovered.version;
    version = version.apply(&edit)?;

    // A fresh manifest holding the whole version, then CURRENT, then the
    // new WAL: a crash at any point leaves either the old state or the new.
    let wal_number = next_file;
    let manifest_number = next_file + 1;
    next_file += 2;
    let wals = WalSet::starting_at(wal_number);
    let snapshot = super::manifest::snapshot_edit(&version, &wals, next_file, last_seq, db_id);
    let manifest = super::manifest::write_new(&env, &dir, manifest_number, &snapshot)?;
    let manifest_snapshot_bytes = manifest.bytes_written();
    let wal_file = LogFile::create_wal(&env, &wal_path(&dir, wal_number), opts.wal_segment_size)?;
    set_current(&env, &dir, manifest_number)?;

    let wal = super::state::new_wal_writer(&opts, wal_file, wal_number, db_id);
    let inner = build_inner(
        dir,
        opts,
        env,
        Some(lock),
        Some(Writable {
            manifest,
            manifest_number,
            wal,
            wal_number,
        }),
        version,
        db_id,
        Arc::new(Memtable::new()),
        next_file,
        last_seq,
    );
    {
        let mut st = inner.state.lock();
        st.wals = wals;
        st.manifest_snapshot_bytes = manifest_snapshot_bytes;
    }
    inner.delete_obsolete_files_at_open();
    Ok(inner)
}

/// Opens the database in `dir` for reading only: nothing in the directory
/// is created, written, renamed or deleted (no probe file, no LOCK file if
/// there is none, no manifest, WAL or table). WALs are replayed into
/// memory; writes, flushes and compactions are refused with
/// [`ErrorKind::ReadOnly`](crate::ErrorKind::ReadOnly). A shared lock keeps a
/// writer from opening the database meanwhile (and a writer that holds it
/// makes this open fail with Busy).
pub(crate) fn open_read_only(dir: &Path, opts: Options) -> Result<Arc<Inner>> {
    opts.validate()?;
    refuse_incomplete_copy(dir)?;
    let current = dir.join(CURRENT);
    if !current.exists() {
        // Corruption (naming the manifest) if a database lost its CURRENT.
        creation::inspect(dir)?;
        return Err(if dir.is_dir() {
            Error::invalid("no database here (no CURRENT file)").with_file(dir)
        } else {
            Error::invalid("database directory does not exist").with_file(dir)
        });
    }
    let lock = Some(crate::lockfile::lock_shared(dir)?);
    let env = Arc::new(
        IoEnv::open_read_only(dir, &current, opts.io_options())?
            .with_fault_layer(opts.fault_layer.clone()),
    );
    let dir = env.dir().to_path_buf();
    let recovered = read_manifest(&env, &dir)?;
    check_tables_present(&dir, &recovered.version)?;
    let wals = wals_to_replay(&dir, &recovered)?;
    let mut frozen = Vec::new();
    let replayed = replay_wals(&env, &dir, &recovered, &wals, opts.memtable_size, |mem| {
        frozen.push(mem);
        Ok(())
    })?;
    let next_file = recovered.next_file.max(replayed.next_file);
    let inner = build_inner(
        dir,
        opts,
        env,
        lock,
        None,
        recovered.version,
        recovered.db_id,
        replayed.mem,
        next_file,
        replayed.last_seq,
    );
    {
        // Full memtables from the replay stay in memory, as frozen ones.
        let mut st = inner.state.lock();
        for mem in frozen {
            st.imms.push_back(Immutable { mem, wal_number: 0 });
        }
        inner.refresh_super_version(&mut st);
    }
    Ok(inner)
}

/// `InvalidArgument` for a directory a checkpoint or restore was still
/// writing when it stopped: opening it would find part of a database, or
/// create a fresh one among a copy's files.
fn refuse_incomplete_copy(dir: &Path) -> Result<()> {
    let marker = dir.join(filenames::INCOMPLETE_COPY);
    if marker.exists() {
        return Err(Error::invalid(
            "this directory is a checkpoint or restore that never finished, not a database; delete it and copy again",
        )
        .with_file(marker));
    }
    Ok(())
}

fn check_tables_present(dir: &Path, version: &Version) -> Result<()> {
    for number in version.all_file_numbers() {
        let p = table_path(dir, number);
        if !p.exists() {
            return Err(Error::corruption(format!(
                "table {number:06}.sst is listed in the manifest but missing; the database cannot be opened without it"
            ))
            .with_file(p));
        }
    }
    Ok(())
}

/// What replaying the WALs left.
struct Replayed {
    /// The memtable holding the last records (may be empty).
    mem: Arc<Memtable>,
    last_seq: SeqNo,
    /// Larger than every WAL's number.
    next_file: u64,
}

/// The WALs at or after the manifest's log number, oldest first; a WAL the
/// manifest requires (see [`crate::wal::set`]) but the directory lacks is
/// corruption.
fn wals_to_replay(dir: &Path, recovered: &Recovered) -> Result<Vec<u64>> {
    let mut wals: Vec<u64> = list(dir)?
        .into_iter()
        .filter_map(|k| match k {
            FileKind::Wal(n) if n >= recovered.wals.log_number() => Some(n),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    for required in recovered.wals.required() {
        if wals.binary_search(&required.number).is_err() {
            return Err(missing_wal(dir, required));
        }
    }
    Ok(wals)
}

/// Replays `wals` in order, each checked against what the manifest says
/// about it (sealed ones strictly to their length). Each memtable that reaches `memtable_size` is handed
/// to `full` and a new one started.
fn replay_wals(
    env: &IoEnv,
    dir: &Path,
    recovered: &Recovered,
    wals: &[u64],
    memtable_size: usize,
    mut full: impl FnMut(Arc<Memtable>) -> Result<()>,
) -> Result<Replayed> {
    let mut last_seq = recovered.last_seq;
    let mut mem = Arc::new(Memtable::new());
    for &n in wals {
        let path = wal_path(dir, n);
        let data = env
            .read_file(&path)
            .map_err(|e| Error::io(e, "cannot read WAL").with_file(&path))?;
        let mut reader = LogReader::new(&path, &data)
            .for_log(n)
            .expect_identity(recovered.identity_rule());
        if let Some(len) = recovered.wals.sealed_len(n) {
            reader = reader.sealed_at(len);
        }
        while let Some(record) = reader.read_record()? {
            let offset = reader.last_record_offset();
            let batch = WriteBatch::decode(&record).map_err(|e| {
                e.context("WAL record is not a valid write batch")
                    .with_file(&path)
                    .with_offset(offset)
            })?;
            if batch.is_empty() {
                continue;
            }
            mem.insert_batch(&batch)?;
            last_seq = last_seq.max(batch.sequence() + batch.len() as u64 - 1);
            if mem.approximate_bytes() >= memtable_size {
                full(std::mem::replace(&mut mem, Arc::new(Memtable::new())))?;
            }
        }
        match reader.tail() {
            TailState::Clean => {}
            TailState::Torn { offset } => log::warn!(
                "quietkv: {}: dropped a torn last record at offset {offset} (it was never synced)",
                path.display()
            ),
            TailState::Unpersisted { offset } => log::warn!(
                "quietkv: {}: dropped the records from offset {offset}: a sector of them never \
                 reached the disk (an unsynced tail written back out of order)",
                path.display()
            ),
            TailState::Recycled { offset } => log::info!(
                "quietkv: {}: recycled WAL, its earlier life's bytes start at offset {offset}",
                path.display()
            ),
            TailState::ZeroPadded { offset } => {
                log::info!(
                    "quietkv: {}: zero padding from offset {offset}",
                    path.display()
                )
            }
        }
    }
    Ok(Replayed {
        mem,
        last_seq,
        next_file: wals.last().map_or(0, |n| n + 1),
    })
}

/// The manifest and WAL of a database opened for writing.
struct Writable {
    manifest: LogWriter<LogFile>,
    manifest_number: u64,
    wal: LogWriter<LogFile>,
    wal_number: u64,
}

#[allow(clippy::too_many_arguments)]
fn build_inner(
    dir: PathBuf,
    opts: Options,
    env: Arc<IoEnv>,
    lock: Option<DirLock>,
    writable: Option<Writable>,
    version: Version,
    db_id: u64,
    mem: Arc<Memtable>,
    next_file: u64,
    last_seq: SeqNo,
) -> Arc<Inner> {
    let limit = quietio::memory_limit();
    let user_read = env.mode(IoClass::UserRead);
    let capacity = opts.block_cache_capacity(user_read, limit.as_ref().map(|l| l.bytes));
    if capacity != opts.block_cache_bytes {
        if let Some(l) = &limit {
            log::info!(
                "block cache {} MiB: {} of the {} MiB memory limit ({}), user reads {user_read}",
                capacity >> 20,
                opts.block_cache_limit_share,
                l.bytes >> 20,
                l.file.display()
            );
        }
    }
    // Sized from the memory limit, the capacity is a memory budget that
    // pinned index and filter blocks are charged to; given in bytes, it is
    // bytes of data blocks, as documented.
    let block_cache = if capacity == opts.block_cache_bytes {
        BlockCache::new(capacity).without_pinned_charge()
    } else {
        BlockCache::new(capacity)
    };
    let block_cache = Arc::new(block_cache);
    let table_cache = Arc::new(TableCache::new(
        dir.clone(),
        env.clone(),
        opts.max_open_tables,
        block_cache,
        db_id,
    ));
    let version = Arc::new(version);
    let (manifest, manifest_number, wal, wal_number) = match writable {
        None => (None, 0, None, 0),
        Some(w) => (
            Some(w.manifest),
            w.manifest_number,
            Some(Wal { writer: w.wal }),
            w.wal_number,
        ),
    };
    let sv = SuperVersion {
        mem: mem.clone(),
        imms: Vec::new(),
        version: version.clone(),
    };
    Arc::new(Inner {
        popts: opts.picker_options(),
        dir: dir.clone(),
        db_id,
        opts,
        env,
        lock,
        read_only: manifest.is_none(),
        table_cache,
        state: Mutex::new(State {
            mem,
            mem_wal: wal_number,
            imms: VecDeque::new(),
            version,
            live_versions: Vec::new(),
            manifest,
            manifest_number,
            manifest_snapshot_bytes: 0,
            wals: WalSet::default(),
            next_file,
            busy: BusyFiles::new(),
            pending_outputs: HashSet::new(),
            flushing: false,
            compactions_running: 0,
            manual: None,
            bg_error: None,
            wal_pool: VecDeque::new(),
            first_own_wal: wal_number,
        }),
        bg_cv: Condvar::new(),
        done_cv: Condvar::new(),
        super_version: Arc::new(RwLock::new(Arc::new(sv))),
        wal: Mutex::new(wal),
        writers: Mutex::new(VecDeque::new()),
        group_batch: Mutex::new(WriteBatch::new()),
        snapshots: Arc::new(SnapshotList::default()),
        visible_seq: AtomicU64::new(last_seq),
        shutting_down: AtomicBool::new(false),
        counters: Counters::default(),
        compaction_open_files: Arc::new(AtomicUsize::new(0)),
        deleting_obsolete: Mutex::new(()),
    })
}

/// The error for a WAL the manifest says exists but the directory lacks.
pub(crate) fn missing_wal(dir: &Path, wal: RequiredWal) -> Error {
    let what = match wal.sealed_len {
        Some(len) => format!("was sealed at {len} bytes"),
        None => "is the live WAL".to_string(),
    };
    Error::corruption(format!(
        "the WAL is missing but the manifest says it {what}: acknowledged writes in it would be lost"
    ))
    .with_file(wal_path(dir, wal.number))
}

#[derive(Default)]
pub(crate) struct Recovered {
    pub(crate) version: Version,
    pub(crate) wals: WalSet,
    pub(crate) next_file: u64,
    pub(crate) last_seq: SeqNo,
    /// 0 when the manifest has none (a database created before ids
    /// existed): table ids are then not compared.
    pub(crate) db_id: u64,
    /// Whether every WAL the manifest may replay starts with an identity
    /// record (a manifest written since WALs carry them).
    pub(crate) wals_have_identity: bool,
}

impl Recovered {
    /// What the identity records of the WALs this manifest replays must say.
    pub(crate) fn identity_rule(&self) -> crate::record_log::IdentityRule {
        crate::record_log::IdentityRule {
            db_id: self.db_id,
            required: self.wals_have_identity,
        }
    }
}

/// Replays the manifest named by CURRENT. A torn last record is an edit
/// that was never installed; damage before it is corruption.
fn read_manifest(env: &IoEnv, dir: &Path) -> Result<Recovered> {
    let current_path = dir.join(CURRENT);
    let current = env
        .read_file(&current_path)
        .map_err(|e| Error::io(e, "cannot read CURRENT").with_file(&current_path))?;
    // Damage, not an I/O error: CURRENT that is not a manifest's name, or
    // names one that is gone, is a database that lost its state.
    let name = String::from_utf8_lossy(&current);
    let name = name.trim_end_matches('\n');
    if !matches!(filenames::parse(name), Some(FileKind::Manifest(_))) {
        return Err(
            Error::corruption(format!("CURRENT does not name a manifest: {name:?}"))
                .with_file(&current_path),
        );
    }
    let path = dir.join(name);
    let data = match env.read_file(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::corruption(format!(
                "CURRENT names {name}, which is missing: the database's table list is lost"
            ))
            .with_file(&path));
        }
        Err(e) => {
            return Err(Error::io(e, "cannot read the manifest named by CURRENT").with_file(&path))
        }
    };
    replay_manifest(&path, &data)
}

/// Replays the manifest image `data` (read from `path`, which only names
/// it in errors): split from [`read_manifest`] so the fuzzer runs the same
/// code on bytes without a directory.
pub(crate) fn replay_manifest(path: &Path, data: &[u8]) -> Result<Recovered> {
    let mut reader = LogReader::new(path, data);
    let mut builder = crate::version::VersionBuilder::new(&Version::new());
    let mut r = Recovered::default();
    let mut edits = 0;
    while let Some(record) = reader.read_record()? {
        let offset = reader.last_record_offset();
        let edit = VersionEdit::decode(&record)
            .and_then(|e| builder.apply(&e).map(|_| e))
            .map_err(|e| {
                e.context("bad manifest edit")
                    .with_file(path)
                    .with_offset(offset)
            })?;
        r.wals.apply(&edit);
        if let Some(n) = edit.next_file_number {
            r.next_file = n;
        }
        if let Some(n) = edit.last_sequence {
            r.last_seq = n;
        }
        r.db_id = crate::table::identity::db_id_after_edit(r.db_id, edit.db_id)
            .map_err(|e| e.with_file(path).with_offset(offset))?;
        if let Some(named) = edit.manifest_number {
            check_manifest_number(path, named).map_err(|e| e.with_offset(offset))?;
        }
        r.wals_have_identity |= edit.wals_have_identity;
        edits += 1;
    }
    if edits == 0 {
        return Err(Error::corruption("the manifest holds no complete edit").with_file(path));
    }
    r.version = builder.build().map_err(|e| {
        Error::corruption(format!(
            "manifest describes an invalid tree: {}",
            e.message()
        ))
        .with_file(path)
    })?;
    Ok(r)
}

/// Corruption if the manifest at `path` records another number than its
/// name's: an older manifest copied over, or one renamed.
pub(crate) fn check_manifest_number(path: &Path, recorded: u64) -> Result<()> {
    let name = path.file_name().and_then(|n| n.to_str());
    match name.and_then(filenames::parse) {
        Some(FileKind::Manifest(n)) if n != recorded => Err(Error::corruption(format!(
            "the manifest says it is {}, not {}: it was copied or renamed over",
            manifest_name(recorded),
            manifest_name(n)
        ))
        .with_file(path)),
        _ => Ok(()),
    }
}

fn list(dir: &Path) -> Result<Vec<FileKind>> {
    let entries = fs::read_dir(dir)
        .map_err(|e| Error::io(e, "cannot list the database directory").with_file(dir))?;
    Ok(entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(filenames::parse))
        .collect())
}

/// Writes a memtable as table `number` of database `db_id` (FlushWrite
/// class, at most `depth` writes in flight), synced, and returns its
/// metadata (None for an empty memtable).
pub(crate) fn write_l0(
    env: &IoEnv,
    dir: &Path,
    opts: &Options,
    mem: &Arc<Memtable>,
    number: u64,
    db_id: u64,
    depth: usize,
) -> Result<Option<FileMeta>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let path = table_path(dir, number);
    let result = (|| {
        let file = env.create_at_depth(&path, IoClass::FlushWrite, depth)?;
        let mut builder =
            TableBuilder::new(TableFile(file), opts.table_options()).with_identity(number, db_id);
        let mut it = mem.iter();
        it.seek_to_first()?;
        let mut cpu_yield = crate::cpu_yield::CpuYield::every_micros(opts.background_yield_micros);
        for t in mem.range_tombstones() {
            builder.add_range_tombstone(&t)?;
        }
        while it.valid() {
            builder.add(it.key(), it.value())?;
            cpu_yield.entry(it.key().len() + it.value().len());
            it.next()?;
        }
        let (summary, sink) = builder.finish()?;
        sink.0.finish(true)?;
        env.sync_dir()?;
        Ok(meta_from(number, &summary))
    })();
    if result.is_err() {
        let _ = env.remove_file(&path);
    }
    result.map(Some)
}

pub(crate) fn meta_from(number: u64, s: &crate::table::TableSummary) -> FileMeta {
    FileMeta {
        number,
        size: s.file_size,
        smallest: s.smallest_key.clone(),
        largest: s.largest_key.clone(),
        smallest_seq: s.smallest_seq,
        largest_seq: s.largest_seq,
        num_entries: s.num_entries,
        num_deletes: s.num_deletes,
        num_range_deletes: s.num_range_deletes,
    }
}

/// A random, nonzero id for a new database (0 means "unknown"), from the
/// kernel's random source.
pub(crate) fn new_db_id() -> Result<u64> {
    let path = Path::new("/dev/urandom");
    let mut f = fs::File::open(path).map_err(|e| {
        Error::io(e, "cannot open the random source for a database id").with_file(path)
    })?;
    loop {
        let mut b = [0u8; 8];
        std::io::Read::read_exact(&mut f, &mut b)
            .map_err(|e| Error::io(e, "cannot read a database id").with_file(path))?;
        let id = u64::from_le_bytes(b);
        if id != 0 {
            return Ok(id);
        }
    }
}
