//! Opening a database: lock, manifest replay, WAL replay, and a fresh
//! manifest and WAL to continue from.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use quietio::{AccessMode, IoClass, IoEnv};

use super::counters::Counters;
use super::manifest::set_current;
use super::manifest::FIRST_KEYSPACE_ID;
use super::state::{Immutable, Inner, State, Wal};
use crate::batch::WriteBatch;
use crate::compaction::drop_rules::DropRules;
use crate::creation::{self, Creation};
use crate::error::{Error, ErrorKind, Result};
use crate::fileio::{LogFile, TableFile};
use crate::filenames::{self, manifest_name, table_path, wal_path, FileKind, CURRENT};
use crate::iter::InternalIterator;
use crate::key::SeqNo;
use crate::keyspace::def::KeyspaceDef;
use crate::keyspace::tree::{new_handle, Tree};
use crate::lockfile::DirLock;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::record_log::{LogReader, LogWriter, TailState};
use crate::snapshot_list::SnapshotList;
use crate::table::TableCache;
use crate::table::{BlockCache, TableBuilder, TableOptions};
use crate::version::{FileMeta, KeyspaceEdit, Version, VersionBuilder, VersionEdit};
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
    check_tables_present(&dir, &recovered)?;
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
    // Each keyspace's new L0 tables.
    let mut edits: BTreeMap<u32, VersionEdit> = BTreeMap::new();
    let table_options = |id: u32| TableOptions {
        keyspace_id: id,
        ..match recovered.keyspaces.get(&id) {
            Some(k) => k.def.table_options(opts.table_options()),
            None => opts.table_options(),
        }
    };
    let mut write = |id: u32, mem: &Arc<Memtable>, next_file: &mut u64| -> Result<()> {
        let number = *next_file;
        *next_file += 1;
        let topts = table_options(id);
        if let Some(meta) = write_l0(
            &env,
            &dir,
            &opts,
            topts,
            mem,
            &[],
            number,
            db_id,
            opts.io_depth,
            None,
        )? {
            edits.entry(id).or_default().add_file(0, meta);
        }
        Ok(())
    };
    let replayed = replay_wals(
        &env,
        &dir,
        &recovered,
        &wals,
        opts.memtable_size,
        |id, mem| write(id, &mem, &mut next_file),
    )?;
    let last_seq = replayed.last_seq;
    next_file = next_file.max(replayed.next_file);
    // The rest of the replayed data: its WALs are deleted once the new
    // manifest is installed, so it must be in a table first.
    for (id, mem) in &replayed.mems {
        if !mem.is_empty() {
            write(*id, mem, &mut next_file)?;
        }
    }
    let Recovered {
        version,
        keyspaces,
        next_keyspace_id,
        ..
    } = recovered;
    let empty = VersionEdit::new();
    let version = version.apply(edits.get(&0).unwrap_or(&empty))?;
    let mut others = Vec::new();
    for (id, k) in keyspaces {
        let v = k.version.apply(edits.get(&id).unwrap_or(&empty))?;
        others.push((id, k.def, v));
    }

    // A fresh manifest holding the whole version, then CURRENT, then the
    // new WAL: a crash at any point leaves either the old state or the new.
    let wal_number = next_file;
    let manifest_number = next_file + 1;
    next_file += 2;
    let wals = WalSet::starting_at(wal_number);
    // Every keyspace needs the new WAL on only: the replayed data is in
    // tables now.
    let mut parts: Vec<KeyspaceEdit> = others
        .iter()
        .map(|(id, def, v)| KeyspaceEdit {
            id: *id,
            create: Some(def.clone()),
            log_number: Some(wal_number),
            edit: super::manifest::files_edit(v),
        })
        .collect();
    if !parts.is_empty() {
        parts.insert(
            0,
            KeyspaceEdit {
                id: 0,
                log_number: Some(wal_number),
                ..KeyspaceEdit::default()
            },
        );
    }
    let snapshot = super::manifest::snapshot_edit(
        &version,
        parts,
        next_keyspace_id,
        &wals,
        next_file,
        last_seq,
        db_id,
    );
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
        others,
        next_keyspace_id,
        db_id,
        BTreeMap::new(),
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
    check_tables_present(&dir, &recovered)?;
    let wals = wals_to_replay(&dir, &recovered)?;
    let mut frozen = Vec::new();
    let replayed = replay_wals(
        &env,
        &dir,
        &recovered,
        &wals,
        opts.memtable_size,
        |id, mem| {
            frozen.push((id, mem));
            Ok(())
        },
    )?;
    let next_file = recovered.next_file.max(replayed.next_file);
    let others = recovered
        .keyspaces
        .into_iter()
        .map(|(id, k)| (id, k.def, k.version))
        .collect();
    let inner = build_inner(
        dir,
        opts,
        env,
        lock,
        None,
        recovered.version,
        others,
        recovered.next_keyspace_id,
        recovered.db_id,
        replayed.mems,
        next_file,
        replayed.last_seq,
    );
    {
        // Full memtables from the replay stay in memory, as frozen ones.
        let mut st = inner.state.lock();
        for (id, mem) in frozen {
            if let Some(t) = st.tree_mut(id) {
                t.imms.push_back(Immutable { mem, wal_number: 0 });
            }
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

fn check_tables_present(dir: &Path, recovered: &Recovered) -> Result<()> {
    let versions =
        std::iter::once(&recovered.version).chain(recovered.keyspaces.values().map(|k| &k.version));
    for number in versions.flat_map(Version::all_file_numbers) {
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
    /// Each keyspace's memtable holding its last records (may be empty).
    mems: BTreeMap<u32, Arc<Memtable>>,
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
/// about it (sealed ones strictly to their length), each entry into its
/// keyspace's memtable unless the keyspace's log number says its tables
/// already hold it, or the keyspace was dropped. Each memtable that reaches
/// `memtable_size` is handed to `full` with its keyspace and a new one
/// started.
fn replay_wals(
    env: &IoEnv,
    dir: &Path,
    recovered: &Recovered,
    wals: &[u64],
    memtable_size: usize,
    mut full: impl FnMut(u32, Arc<Memtable>) -> Result<()>,
) -> Result<Replayed> {
    let mut last_seq = recovered.last_seq;
    let mut mems: BTreeMap<u32, Arc<Memtable>> = std::iter::once(0)
        .chain(recovered.keyspaces.keys().copied())
        .map(|id| (id, Arc::new(Memtable::new())))
        .collect();
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
            if !batch.has_keyspaces() {
                if n >= recovered.log_number(0) {
                    mems.get(&0)
                        .expect("the default keyspace")
                        .insert_batch(&batch)?;
                }
            } else {
                let first = batch.sequence();
                for (i, (id, e)) in batch.iter_scoped().enumerate() {
                    let Some(mem) = mems.get(&id) else {
                        if id < recovered.next_keyspace_id {
                            // Dropped since: its writes go with it.
                            continue;
                        }
                        return Err(Error::corruption(format!(
                            "WAL record writes keyspace {id}, which the manifest never created \
                             (the next keyspace id is {})",
                            recovered.next_keyspace_id
                        ))
                        .with_file(&path)
                        .with_offset(offset));
                    };
                    if n >= recovered.log_number(id) {
                        mem.add(first + i as u64, e.kind, e.key, e.value)?;
                    }
                }
            }
            last_seq = last_seq.max(batch.sequence() + batch.len() as u64 - 1);
            let ids: Vec<u32> = mems
                .iter()
                .filter(|(_, m)| m.approximate_bytes() >= memtable_size)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                let mem = mems.insert(id, Arc::new(Memtable::new())).expect("listed");
                full(id, mem)?;
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
        mems,
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
    keyspaces: Vec<(u32, KeyspaceDef, Version)>,
    next_keyspace_id: u32,
    db_id: u64,
    mut mems: BTreeMap<u32, Arc<Memtable>>,
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
    let mut mem_of = |id: u32| {
        mems.remove(&id)
            .unwrap_or_else(|| Arc::new(Memtable::new()))
    };
    let (manifest, manifest_number, wal, wal_number) = match writable {
        None => (None, 0, None, 0),
        Some(w) => (
            Some(w.manifest),
            w.manifest_number,
            Some(Wal { writer: w.wal }),
            w.wal_number,
        ),
    };
    let default_handle = new_handle(
        0,
        crate::keyspace::def::DEFAULT_KEYSPACE.to_string(),
        Arc::new(version),
        mem_of(0),
        opts.table_options(),
        opts.compaction_filter.clone(),
    );
    let mut trees = vec![Tree::new(default_handle.clone(), None, wal_number)];
    for (id, def, version) in keyspaces {
        let handle = new_handle(
            id,
            def.name.clone(),
            Arc::new(version),
            mem_of(id),
            def.table_options(opts.table_options()),
            None,
        );
        trees.push(Tree::new(handle, Some(def), wal_number));
    }
    Arc::new(Inner {
        popts: opts.picker_options(),
        dir: dir.clone(),
        db_id,
        opts,
        env,
        lock: Mutex::new(lock),
        read_only: manifest.is_none(),
        table_cache,
        state: Mutex::new(State {
            trees,
            retired_versions: Vec::new(),
            next_keyspace_id,
            live_wal: wal_number,
            manifest,
            manifest_number,
            manifest_snapshot_bytes: 0,
            wals: WalSet::default(),
            next_file,
            pending_outputs: HashSet::new(),
            compactions_running: 0,
            manual: None,
            bg_error: None,
            wal_pool: VecDeque::new(),
            first_own_wal: wal_number,
        }),
        bg_cv: Condvar::new(),
        done_cv: Condvar::new(),
        super_version: default_handle.super_version.clone(),
        default_handle,
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
    /// The keyspaces besides the default one, by id.
    pub(crate) keyspaces: BTreeMap<u32, RecoveredKeyspace>,
    /// The default keyspace's own log number, recorded while there were
    /// other keyspaces.
    pub(crate) default_log: Option<u64>,
    pub(crate) next_keyspace_id: u32,
    /// Ids of keyspaces this manifest dropped: ids are never reused, so a
    /// later edit creating one of them again is corruption.
    pub(crate) dropped_keyspaces: BTreeSet<u32>,
}

/// A keyspace the manifest describes.
pub(crate) struct RecoveredKeyspace {
    pub(crate) def: KeyspaceDef,
    pub(crate) version: Version,
    pub(crate) log_number: Option<u64>,
}

impl Default for Recovered {
    fn default() -> Self {
        Recovered {
            version: Version::new(),
            wals: WalSet::default(),
            next_file: 0,
            last_seq: 0,
            db_id: 0,
            wals_have_identity: false,
            keyspaces: BTreeMap::new(),
            default_log: None,
            next_keyspace_id: FIRST_KEYSPACE_ID,
            dropped_keyspaces: BTreeSet::new(),
        }
    }
}

impl Recovered {
    /// WALs older than this hold none of keyspace `id`'s data that is not
    /// in its tables. A keyspace's recorded log number may be older than
    /// the database's (recorded while another keyspace held older WALs,
    /// which are deleted since): the database's is then the one that holds.
    pub(crate) fn log_number(&self, id: u32) -> u64 {
        let own = if id == 0 {
            self.default_log
        } else {
            self.keyspaces.get(&id).and_then(|k| k.log_number)
        };
        own.unwrap_or(0).max(self.wals.log_number())
    }

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
    let mut keyspaces: BTreeMap<u32, (KeyspaceDef, VersionBuilder, Option<u64>)> = BTreeMap::new();
    let mut r = Recovered::default();
    let mut edits = 0;
    while let Some(record) = reader.read_record()? {
        let offset = reader.last_record_offset();
        let edit = VersionEdit::decode(&record)
            .and_then(|e| builder.apply(&e).map(|_| e))
            .and_then(|e| {
                apply_keyspaces(&e, &mut keyspaces, &mut r)?;
                Ok(e)
            })
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
    let invalid = |e: Error| {
        Error::corruption(format!(
            "manifest describes an invalid tree: {}",
            e.message()
        ))
        .with_file(path)
    };
    r.version = builder.build().map_err(invalid)?;
    for (id, (def, b, log_number)) in keyspaces {
        let version = b
            .build()
            .map_err(|e| invalid(e.context(&format!("keyspace {id}"))))?;
        r.keyspaces.insert(
            id,
            RecoveredKeyspace {
                def,
                version,
                log_number,
            },
        );
    }
    Ok(r)
}

/// Applies the keyspace parts of `e` (creations, drops, their tables and
/// log numbers) to `keyspaces`, and its next keyspace id and the default
/// keyspace's log number to `r`. An edit for a keyspace that does not
/// exist, a creation of one that does or was dropped (ids are never
/// reused), or an id at or past the next one is corruption.
pub(crate) fn apply_keyspaces(
    e: &VersionEdit,
    keyspaces: &mut BTreeMap<u32, (KeyspaceDef, VersionBuilder, Option<u64>)>,
    r: &mut Recovered,
) -> Result<()> {
    if let Some(n) = e.next_keyspace_id {
        if n < r.next_keyspace_id {
            return Err(Error::corruption(format!(
                "next keyspace id goes back from {} to {n}",
                r.next_keyspace_id
            )));
        }
        r.next_keyspace_id = n;
    }
    for k in &e.keyspaces {
        if k.id == 0 {
            if k.create.is_some() || k.edit != VersionEdit::default() {
                return Err(Error::corruption(
                    "the default keyspace's part holds more than its log number",
                ));
            }
            r.default_log = k.log_number.or(r.default_log);
            continue;
        }
        if k.id >= r.next_keyspace_id {
            return Err(Error::corruption(format!(
                "keyspace {} is at or past the next keyspace id {}",
                k.id, r.next_keyspace_id
            )));
        }
        if let Some(def) = &k.create {
            if r.dropped_keyspaces.contains(&k.id) {
                return Err(Error::corruption(format!(
                    "keyspace {} ({:?}) is created again after it was dropped (ids are never reused)",
                    k.id, def.name
                )));
            }
            if keyspaces.contains_key(&k.id) || keyspaces.values().any(|(d, ..)| d.name == def.name)
            {
                return Err(Error::corruption(format!(
                    "keyspace {} ({:?}) is created twice",
                    k.id, def.name
                )));
            }
            let b = VersionBuilder::new(&Version::new());
            keyspaces.insert(k.id, (def.clone(), b, None));
        }
        let Some((_, b, log)) = keyspaces.get_mut(&k.id) else {
            return Err(Error::corruption(format!(
                "edit for keyspace {}, which does not exist",
                k.id
            )));
        };
        b.apply(&k.edit)
            .map_err(|err| err.context(&format!("keyspace {}", k.id)))?;
        *log = k.log_number.or(*log);
    }
    for &id in &e.dropped_keyspaces {
        if keyspaces.remove(&id).is_none() {
            return Err(Error::corruption(format!(
                "drops keyspace {id}, which does not exist"
            )));
        }
        r.dropped_keyspaces.insert(id);
    }
    Ok(())
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
/// class, in `mode` if given, else the class's; at most `depth` writes in
/// flight), synced, and returns its metadata (None for an empty memtable).
/// Of each key's versions in the memtable the table keeps only those a
/// reader can still see: the newest, and the newest below each live
/// snapshot in `snapshots` (a memtable updated in place many times, as
/// zipfian updates do, would otherwise write every overwritten version once
/// more). Tombstones are kept: older versions of their keys may lie in
/// tables below.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_l0(
    env: &IoEnv,
    dir: &Path,
    opts: &Options,
    table_options: TableOptions,
    mem: &Arc<Memtable>,
    snapshots: &[SeqNo],
    number: u64,
    db_id: u64,
    depth: usize,
    mode: Option<AccessMode>,
) -> Result<Option<FileMeta>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let path = table_path(dir, number);
    let result = (|| {
        let file = env.create_at_depth_in(&path, IoClass::FlushWrite, depth, mode)?;
        let mut builder =
            TableBuilder::new(TableFile(file), table_options).with_identity(number, db_id);
        let mut it = mem.iter();
        it.seek_to_first()?;
        let mut cpu_yield = crate::cpu_yield::CpuYield::every_micros(opts.background_yield_micros);
        for t in mem.range_tombstones() {
            builder.add_range_tombstone(&t)?;
        }
        let mut visible = DropRules::new(snapshots, false);
        while it.valid() {
            if visible.keep(it.key())? {
                builder.add(it.key(), it.value())?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn create(id: u32, name: &str) -> VersionEdit {
        VersionEdit {
            next_keyspace_id: Some(id + 1),
            keyspaces: vec![KeyspaceEdit {
                id,
                create: Some(KeyspaceDef {
                    name: name.into(),
                    block_size: 4096,
                    bloom_bits_per_key: 10,
                    compression: crate::table::Compression::None,
                }),
                ..KeyspaceEdit::default()
            }],
            ..Default::default()
        }
    }

    fn drop(id: u32) -> VersionEdit {
        VersionEdit {
            dropped_keyspaces: vec![id],
            ..Default::default()
        }
    }

    fn replay(edits: &[VersionEdit]) -> Result<Recovered> {
        let mut keyspaces = BTreeMap::new();
        let mut r = Recovered::default();
        for e in edits {
            apply_keyspaces(e, &mut keyspaces, &mut r)?;
        }
        Ok(r)
    }

    /// Ids are never reused: a dropped keyspace's id is known only as
    /// dropped, so its WAL entries are skipped, not replayed into a new
    /// keyspace. A manifest that creates one again was not written by us.
    #[test]
    fn a_dropped_keyspace_id_created_again_is_corruption() {
        let mut recreate = create(1, "again");
        recreate.next_keyspace_id = None;
        let err = replay(&[create(1, "sessions"), create(2, "users"), drop(1), recreate])
            .err()
            .expect("re-creating dropped id 1 must be refused");
        assert_eq!(err.kind(), ErrorKind::Corruption);
        assert!(
            err.message().contains("created again after it was dropped"),
            "{err}"
        );

        // A new id, and the dropped keyspace's name under it, are fine.
        let r = replay(&[create(1, "sessions"), drop(1), create(2, "sessions")]).unwrap();
        assert_eq!(r.dropped_keyspaces.iter().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(r.next_keyspace_id, 3);
    }
}
