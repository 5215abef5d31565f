//! Incremental backups into a directory of their own (possibly on another
//! file system), and restores from them.
//!
//! ```text
//! BACKUP_DIR/LOCK                 one backup writes at a time
//! BACKUP_DIR/tables/NNNNNN.sst    the database's tables, each stored once
//! BACKUP_DIR/points/PPPPPP/       one backup point:
//!     MANIFEST-NNNNNN             the point's manifest (no WAL required)
//!     NNNNNN.sst                  its memtables' data, up to its sequence
//!     META                        the point's files with lengths and
//!                                 checksums; written last
//! ```
//!
//! Tables are immutable and numbered, so a backup copies only the tables
//! no earlier point recorded (same number, length and sequence range);
//! every copied byte goes through the `Backup` I/O class. A point whose
//! META is missing is a backup that never finished: the next backup
//! removes it and restores ignore it. A restore copies one point's files
//! into a staged directory, checking every checksum, and renames it into
//! place, like a checkpoint.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use quietio::IoEnv;

use super::copy::{checksum_file, copy_file};
use super::point::{PointFile, PointMeta};
use super::staging::Staging;
use super::{image, Capture};
use crate::error::{Error, ErrorKind, Result};
use crate::filenames::{manifest_name, table_path};
use crate::options::Options;

const TABLES: &str = "tables";
const POINTS: &str = "points";
const META: &str = "META";

/// How [`Db::backup_with`](crate::Db::backup_with) keeps backup points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackupOptions {
    /// After a successful backup, keep only this many newest points and
    /// delete the stored tables no kept point needs; 0 (the default)
    /// keeps every point.
    pub keep_points: usize,
}

/// What one backup did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupInfo {
    /// The new point's number (points count up from 1).
    pub point: u64,
    /// Every write up to this sequence number is in the point, none after.
    pub sequence: u64,
    /// Tables copied because no earlier point had them.
    pub tables_copied: u64,
    /// Their bytes.
    pub bytes_copied: u64,
    /// Tables an earlier point had stored already: not copied again.
    pub tables_reused: u64,
    /// Tables written from the database's memtables.
    pub tables_written: u64,
    /// Bytes of those tables and the point's manifest and metadata.
    pub bytes_written: u64,
    /// Older points deleted by [`BackupOptions::keep_points`].
    pub points_removed: u64,
}

/// One complete backup point, as its metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupPoint {
    /// The point's number.
    pub point: u64,
    /// Its sequence number.
    pub sequence: u64,
    /// Tables a restore of it copies.
    pub tables: usize,
    /// Bytes a restore of it copies (tables and manifest).
    pub bytes: u64,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreInfo {
    /// The database directory written.
    pub dir: PathBuf,
    /// The point restored.
    pub point: u64,
    /// Its sequence number.
    pub sequence: u64,
    /// Tables copied (every one checked against its checksum).
    pub tables: u64,
    /// Bytes copied, tables and manifest.
    pub bytes_copied: u64,
}

fn point_dir(root: &Path, point: u64) -> PathBuf {
    root.join(POINTS).join(format!("{point:06}"))
}

/// The point numbers in `root`, ascending, with whether each is complete.
fn list_points(root: &Path) -> Result<Vec<(u64, bool)>> {
    let dir = root.join(POINTS);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(e, "cannot list backup points").with_file(&dir)),
    };
    let mut points = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(e, "cannot list backup points").with_file(&dir))?;
        let name = entry.file_name();
        let Some(n) = name.to_str().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        points.push((n, entry.path().join(META).exists()));
    }
    points.sort_unstable();
    Ok(points)
}

fn read_meta(root: &Path, point: u64) -> Result<PointMeta> {
    let path = point_dir(root, point).join(META);
    let data = fs::read(&path)
        .map_err(|e| Error::io(e, "cannot read a backup point's metadata").with_file(&path))?;
    PointMeta::decode(&path, &data)
}

/// Every complete point's metadata, ascending.
fn complete_points(root: &Path) -> Result<Vec<(u64, PointMeta)>> {
    list_points(root)?
        .into_iter()
        .filter(|(_, complete)| *complete)
        .map(|(n, _)| read_meta(root, n).map(|m| (n, m)))
        .collect()
}

fn create_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)
        .map_err(|e| Error::io(e, "cannot create a backup directory").with_file(dir))
}

/// Writes a new backup point of `capture` into `root`.
pub(crate) fn backup(capture: &Capture, root: &Path, opts: BackupOptions) -> Result<BackupInfo> {
    create_dir(root)?;
    let _lock = crate::lockfile::lock_exclusive(root)?;
    let env =
        IoEnv::open(root, capture.io_options.clone())?.with_stats(capture.source.stats().clone());
    let root = env.dir().to_path_buf();
    let tables_dir = root.join(TABLES);
    create_dir(&tables_dir)?;
    create_dir(&root.join(POINTS))?;

    let points = list_points(&root)?;
    // A point without metadata is a backup that stopped part way.
    for &(n, complete) in &points {
        if !complete {
            let dir = point_dir(&root, n);
            log::warn!(
                "quietkv: removing {}, a backup point that never finished",
                dir.display()
            );
            fs::remove_dir_all(&dir).map_err(|e| {
                Error::io(e, "cannot remove an unfinished backup point").with_file(&dir)
            })?;
        }
    }
    let earlier = complete_points(&root)?;
    if let Some((n, other)) = earlier.iter().find(|(_, m)| m.db_id != capture.db_id) {
        return Err(Error::invalid(format!(
            "the backup directory holds backups of another database (point {n} has database id {:016x}, this one is {:016x}); use a directory of its own for each database",
            other.db_id, capture.db_id
        ))
        .with_file(&root));
    }
    // The stored tables earlier points vouch for, by number.
    let mut stored: BTreeMap<u64, PointFile> = BTreeMap::new();
    for (_, m) in &earlier {
        for f in &m.shared {
            stored.insert(f.number, f.clone());
        }
    }
    let point = points.last().map_or(1, |(n, _)| n + 1);
    let pdir = point_dir(&root, point);
    create_dir(&pdir)?;
    let mut info = BackupInfo {
        point,
        sequence: capture.seq,
        tables_copied: 0,
        bytes_copied: 0,
        tables_reused: 0,
        tables_written: 0,
        bytes_written: 0,
        points_removed: 0,
    };
    let result = (|| {
        let mut meta = PointMeta {
            db_id: capture.db_id,
            sequence: capture.seq,
            manifest_number: capture.manifest_number,
            manifest_size: 0,
            manifest_crc: 0,
            shared: Vec::new(),
            own: Vec::new(),
        };
        {
            for f in &capture.files() {
                let seqs = Some((f.smallest_seq, f.largest_seq));
                let dest = table_path(&tables_dir, f.number);
                let same = stored.get(&f.number).filter(|s| {
                    s.size == f.size
                        && s.seqs == seqs
                        && fs::metadata(&dest).is_ok_and(|m| m.len() == f.size)
                });
                if let Some(s) = same {
                    info.tables_reused += 1;
                    meta.shared.push(s.clone());
                    continue;
                }
                // Through a temporary name: a stored table is complete or
                // absent, whatever a crash interrupts.
                let tmp = tables_dir.join(format!("{:06}.sst.tmp", f.number));
                let (bytes, crc) = copy_file(
                    &capture.source,
                    &capture.source_table(f.number),
                    &env,
                    &tmp,
                    Some(f.size),
                )?;
                env.rename(&tmp, &dest)
                    .map_err(|e| Error::io(e, "cannot store a backed-up table").with_file(&tmp))?;
                info.tables_copied += 1;
                info.bytes_copied += bytes;
                meta.shared.push(PointFile {
                    number: f.number,
                    size: bytes,
                    crc,
                    seqs,
                });
            }
        }
        super::staging::sync_dir(&tables_dir)?;
        let mut edit = capture.snapshot.clone();
        for cm in &capture.memtables {
            let written = image::write_memtable(
                &env,
                &pdir,
                &cm.mem,
                capture.seq,
                cm.number,
                capture.db_id,
                cm.table_options,
            )?;
            if let Some(m) = written {
                let (size, crc) = checksum_file(&env, &table_path(&pdir, m.number))?;
                meta.own.push(PointFile {
                    number: m.number,
                    size,
                    crc,
                    seqs: None,
                });
                info.tables_written += 1;
                info.bytes_written += size;
                cm.add_to(&mut edit, m);
            }
        }
        image::write_manifest(&env, &pdir, capture.manifest_number, &edit)?;
        let (size, crc) = checksum_file(&env, &pdir.join(manifest_name(capture.manifest_number)))?;
        meta.manifest_size = size;
        meta.manifest_crc = crc;
        info.bytes_written += size;
        let text = meta.encode();
        let tmp = pdir.join("META.tmp");
        let mut w = env.create(&tmp, quietio::IoClass::Backup)?;
        w.write_all(text.as_bytes())?;
        w.finish(true)?;
        super::staging::sync_dir(&pdir)?;
        // The point exists from this rename on.
        env.rename(&tmp, &pdir.join(META))
            .map_err(|e| Error::io(e, "cannot complete a backup point").with_file(&tmp))?;
        super::staging::sync_dir(&pdir)?;
        info.bytes_written += text.len() as u64;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_dir_all(&pdir);
        return Err(e);
    }
    if opts.keep_points > 0 {
        info.points_removed = purge(&root, opts.keep_points)?;
    }
    Ok(info)
}

/// Deletes all but the `keep` newest complete points, then the stored
/// tables no remaining point lists. Returns how many points went.
fn purge(root: &Path, keep: usize) -> Result<u64> {
    let points = complete_points(root)?;
    let drop_count = points.len().saturating_sub(keep);
    for (n, _) in &points[..drop_count] {
        let dir = point_dir(root, *n);
        // Metadata first: a crash part way leaves an unfinished point,
        // which the next backup removes, never a point missing files.
        let meta = dir.join(META);
        fs::remove_file(&meta)
            .map_err(|e| Error::io(e, "cannot delete an old backup point").with_file(&meta))?;
        super::staging::sync_dir(&dir)?;
        fs::remove_dir_all(&dir)
            .map_err(|e| Error::io(e, "cannot delete an old backup point").with_file(&dir))?;
    }
    let needed: HashSet<u64> = points[drop_count..]
        .iter()
        .flat_map(|(_, m)| m.shared.iter().map(|f| f.number))
        .collect();
    let tables_dir = root.join(TABLES);
    let entries = fs::read_dir(&tables_dir)
        .map_err(|e| Error::io(e, "cannot list backed-up tables").with_file(&tables_dir))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let number = name
            .to_str()
            .and_then(|n| {
                n.strip_suffix(".sst")
                    .or_else(|| n.strip_suffix(".sst.tmp"))
            })
            .and_then(|n| n.parse::<u64>().ok());
        if number.is_some_and(|n| !needed.contains(&n)) {
            fs::remove_file(entry.path()).map_err(|e| {
                Error::io(e, "cannot delete an unneeded backed-up table").with_file(entry.path())
            })?;
        }
    }
    super::staging::sync_dir(&tables_dir)?;
    super::staging::sync_dir(&root.join(POINTS))?;
    Ok(drop_count as u64)
}

/// Restores the newest backup point in `backup_dir` into `target`, a
/// database directory that must not exist or be empty.
///
/// The copy is staged in a hidden sibling of `target` and renamed into
/// place only when every file is written, checked against the checksum
/// the backup recorded, and synced: after a crash `target` is either a
/// complete database or absent. Files are read and written in the
/// [`Backup`](crate::IoClass::Backup) I/O class (`auto`: direct where
/// the file system allows it).
///
/// # Errors
///
/// `InvalidArgument` if `backup_dir` has no complete backup point or
/// `target` is not empty; `Corruption` (naming the file) if a stored file
/// has another length or checksum than the point's metadata records, or
/// the metadata itself is damaged; `Busy` while a backup writes to
/// `backup_dir` or another restore to `target` is being written; `Io`
/// for an I/O error.
pub fn restore(backup_dir: impl AsRef<Path>, target: impl AsRef<Path>) -> Result<RestoreInfo> {
    restore_from(backup_dir.as_ref(), None, target.as_ref())
}

/// [`restore`] of backup point `point` instead of the newest one.
///
/// # Errors
///
/// As [`restore`], and `InvalidArgument` if there is no complete point
/// `point`.
pub fn restore_point(
    backup_dir: impl AsRef<Path>,
    point: u64,
    target: impl AsRef<Path>,
) -> Result<RestoreInfo> {
    restore_from(backup_dir.as_ref(), Some(point), target.as_ref())
}

/// Picks a complete point of `root`: `point`, or the newest.
fn chosen_point(root: &Path, point: Option<u64>) -> Result<(u64, PointMeta)> {
    let points = list_points(root)?;
    let n =
        match point {
            Some(p) if points.contains(&(p, true)) => p,
            Some(p) => {
                return Err(Error::invalid(format!(
                    "the backup directory has no complete backup point {p}"
                ))
                .with_file(root))
            }
            None => match points.iter().rev().find(|(_, complete)| *complete) {
                Some((n, _)) => *n,
                None => return Err(Error::invalid(
                    "no complete backup point here: not a backup directory, or no backup finished",
                )
                .with_file(root)),
            },
        };
    Ok((n, read_meta(root, n)?))
}

fn restore_from(root: &Path, point: Option<u64>, target: &Path) -> Result<RestoreInfo> {
    if !root.is_dir() {
        return Err(Error::invalid("the backup directory does not exist").with_file(root));
    }
    let _lock = crate::lockfile::lock_shared(root)?;
    let (point, meta) = chosen_point(root, point)?;
    let io = Options::default().io_options();
    // Reads only: an environment that writes no probe file, so a backup
    // on a read-only medium restores too.
    let sample = point_dir(root, point).join(META);
    let from = IoEnv::open_read_only(root, &sample, io.clone())?;
    let staging = Staging::begin(target)?;
    let to = IoEnv::open(&staging.dir, io)?.with_stats(from.stats().clone());
    let dir = to.dir().to_path_buf();
    let pdir = point_dir(from.dir(), point);
    let mut info = RestoreInfo {
        dir: target.to_path_buf(),
        point,
        sequence: meta.sequence,
        tables: 0,
        bytes_copied: 0,
    };
    let shared = meta
        .shared
        .iter()
        .map(|f| (table_path(&from.dir().join(TABLES), f.number), f));
    let own = meta.own.iter().map(|f| (table_path(&pdir, f.number), f));
    for (src, f) in shared.chain(own) {
        let dest = table_path(&dir, f.number);
        let (bytes, crc) = copy_file(&from, &src, &to, &dest, Some(f.size))?;
        check_crc(&src, crc, f.crc)?;
        info.tables += 1;
        info.bytes_copied += bytes;
    }
    let name = manifest_name(meta.manifest_number);
    let (bytes, crc) = copy_file(
        &from,
        &pdir.join(&name),
        &to,
        &dir.join(&name),
        Some(meta.manifest_size),
    )?;
    check_crc(&pdir.join(&name), crc, meta.manifest_crc)?;
    info.bytes_copied += bytes;
    image::write_current(&to, &dir, meta.manifest_number)?;
    to.sync_dir()?;
    drop(to);
    staging.publish()?;
    Ok(info)
}

fn check_crc(path: &Path, got: u32, want: u32) -> Result<()> {
    if got != want {
        return Err(Error::corruption(format!(
            "the backed-up file's checksum is {got:08x}, but the backup recorded {want:08x}"
        ))
        .with_file(path));
    }
    Ok(())
}

/// Reads every file of every complete backup point in `backup_dir` and
/// checks its length and checksum against the point's metadata, without
/// restoring anything; returns the points, oldest first. Files are read
/// in the [`Backup`](crate::IoClass::Backup) I/O class.
///
/// # Errors
///
/// `Corruption` naming the first file whose length or checksum differs
/// from what was recorded, or damaged metadata; `InvalidArgument` if
/// there is no complete point; `Busy` while a backup writes to
/// `backup_dir`; `Io` for an I/O error (a missing file among them).
pub fn verify_backup(backup_dir: impl AsRef<Path>) -> Result<Vec<BackupPoint>> {
    let root = backup_dir.as_ref();
    if !root.is_dir() {
        return Err(Error::invalid("the backup directory does not exist").with_file(root));
    }
    let _lock = crate::lockfile::lock_shared(root)?;
    let points = complete_points(root)?;
    let Some((last, _)) = points.last() else {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "no complete backup point here: not a backup directory, or no backup finished",
        )
        .with_file(root));
    };
    let sample = point_dir(root, *last).join(META);
    let env = IoEnv::open_read_only(root, &sample, Options::default().io_options())?;
    let mut checked: HashSet<u64> = HashSet::new();
    let mut out = Vec::new();
    for (n, meta) in &points {
        let pdir = point_dir(root, *n);
        let mut bytes = 0;
        let shared = meta
            .shared
            .iter()
            .map(|f| (table_path(&root.join(TABLES), f.number), f, true));
        let own = meta
            .own
            .iter()
            .map(|f| (table_path(&pdir, f.number), f, false));
        for (path, f, is_shared) in shared.chain(own) {
            bytes += f.size;
            // A table several points share is read once.
            if is_shared && !checked.insert(f.number) {
                continue;
            }
            verify_file(&env, &path, f.size, f.crc)?;
        }
        let manifest = pdir.join(manifest_name(meta.manifest_number));
        verify_file(&env, &manifest, meta.manifest_size, meta.manifest_crc)?;
        bytes += meta.manifest_size;
        out.push(BackupPoint {
            point: *n,
            sequence: meta.sequence,
            tables: meta.shared.len() + meta.own.len(),
            bytes,
        });
    }
    Ok(out)
}

fn verify_file(env: &IoEnv, path: &Path, size: u64, crc: u32) -> Result<()> {
    let (len, got) = checksum_file(env, path)?;
    if len != size {
        return Err(Error::corruption(format!(
            "the backed-up file is {len} bytes long, but the backup recorded {size}"
        ))
        .with_file(path));
    }
    check_crc(path, got, crc)
}
