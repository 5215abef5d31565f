//! The files of a copied database that the source has no file for: the
//! memtables' data (range deletes included) up to the copy's sequence
//! number as level-0 tables, a manifest describing the copy and its
//! CURRENT. All written in the `Backup` I/O class and synced.

use std::path::Path;
use std::sync::Arc;

use quietio::{IoClass, IoEnv};

use crate::error::Result;
use crate::fileio::{LogFile, TableFile};
use crate::filenames::{manifest_name, table_path, CURRENT};
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, SeqNo};
use crate::memtable::Memtable;
use crate::record_log::LogWriter;
use crate::table::{TableBuilder, TableOptions};
use crate::version::{FileMeta, VersionEdit};

/// Writes the entries of `mem` with sequence numbers up to `seq` as table
/// `number` of database `db_id` in `dir`, synced: what a flush of the
/// memtable at that moment would have written. `None` (and no file) when
/// no entry is that old.
pub(crate) fn write_memtable(
    env: &IoEnv,
    dir: &Path,
    mem: &Arc<Memtable>,
    seq: SeqNo,
    number: u64,
    db_id: u64,
    opts: TableOptions,
) -> Result<Option<FileMeta>> {
    let mut builder: Option<TableBuilder<TableFile>> = None;
    let path = table_path(dir, number);
    let start = |builder: &mut Option<TableBuilder<TableFile>>| -> Result<()> {
        if builder.is_none() {
            let file = env.create(&path, IoClass::Backup)?;
            *builder = Some(TableBuilder::new(TableFile(file), opts).with_identity(number, db_id));
        }
        Ok(())
    };
    // Entries and range deletes newer than the copy's sequence number were
    // written after it was taken: they belong to the source only.
    for t in mem.range_tombstones() {
        if t.seq <= seq {
            start(&mut builder)?;
            if let Some(b) = &mut builder {
                b.add_range_tombstone(&t)?;
            }
        }
    }
    let mut it = mem.iter();
    it.seek_to_first()?;
    while it.valid() {
        if parse_internal_key(it.key())?.seq <= seq {
            start(&mut builder)?;
            if let Some(b) = &mut builder {
                b.add(it.key(), it.value())?;
            }
        }
        it.next()?;
    }
    let Some(builder) = builder else {
        return Ok(None);
    };
    let (s, sink) = builder.finish()?;
    sink.0.finish(true)?;
    Ok(Some(FileMeta {
        number,
        size: s.file_size,
        smallest: s.smallest_key,
        largest: s.largest_key,
        smallest_seq: s.smallest_seq,
        largest_seq: s.largest_seq,
        num_entries: s.num_entries,
        num_deletes: s.num_deletes,
        num_range_deletes: s.num_range_deletes,
    }))
}

/// Writes manifest `number` into `dir` holding only `snapshot`, synced;
/// returns its length.
pub(crate) fn write_manifest(
    env: &IoEnv,
    dir: &Path,
    number: u64,
    snapshot: &VersionEdit,
) -> Result<u64> {
    let path = dir.join(manifest_name(number));
    let mut w = LogWriter::new(LogFile::Seq(env.create(&path, IoClass::Backup)?));
    w.add_record(&snapshot.encode())?;
    w.sync()?;
    w.into_inner().finish(true)
}

/// Writes CURRENT naming manifest `number` into `dir`, synced. Not through
/// a temporary file: the whole directory becomes visible at once.
pub(crate) fn write_current(env: &IoEnv, dir: &Path, number: u64) -> Result<u64> {
    let mut w = env.create(&dir.join(CURRENT), IoClass::Backup)?;
    w.write_all(format!("{}\n", manifest_name(number)).as_bytes())?;
    Ok(w.finish(true)?)
}
