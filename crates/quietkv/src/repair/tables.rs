//! Writing tables during a repair: salvaging the intact blocks of a damaged
//! table, and merging tables whose levels are unknown into one sorted run.
//! Each is written with its keyspace's table options, which record the
//! keyspace in the table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use quietio::{IoClass, IoEnv};

use crate::check::FileSource;
use crate::error::{Error, Result};
use crate::fileio::TableFile;
use crate::filenames::table_path;
use crate::iter::InternalIterator;
use crate::key::{compare_internal, parse_internal_key, user_key};
use crate::merge::MergingIterator;
use crate::options::Options;
use crate::range_tombstone::OutputSplitter;
use crate::table::block::BlockIter;
use crate::table::{RandomSource, TableBuilder, TableOptions, TableReader};
use crate::version::FileMeta;

/// One table being written, with the file removed again if it fails.
struct Output {
    number: u64,
    path: PathBuf,
    builder: TableBuilder<TableFile>,
}

impl Output {
    /// Table `number`, written at `path` (its final name, or a temporary
    /// one the caller renames).
    fn create(
        env: &IoEnv,
        path: &Path,
        opts: TableOptions,
        number: u64,
        db_id: u64,
    ) -> Result<Output> {
        let file = env.create(path, IoClass::FlushWrite)?;
        let builder = TableBuilder::new(TableFile(file), opts).with_identity(number, db_id);
        Ok(Output {
            number,
            path: path.to_path_buf(),
            builder,
        })
    }

    /// Finishes and syncs the table; `None` (and no file) if it is empty.
    fn finish(self, env: &IoEnv) -> Result<Option<FileMeta>> {
        if self.builder.num_entries() == 0 && !self.builder.has_range_tombstones() {
            drop(self.builder);
            let _ = std::fs::remove_file(&self.path);
            return Ok(None);
        }
        let (summary, sink) = self.builder.finish()?;
        sink.0.finish(true)?;
        env.sync_dir()?;
        Ok(Some(crate::db::meta_from(self.number, &summary)))
    }
}

/// What salvaging a damaged table kept.
pub(super) struct Salvage {
    /// `None` when no block was readable (no table is written).
    pub meta: Option<FileMeta>,
    pub blocks_lost: u64,
    /// Entries the damaged table's properties promised.
    pub entries_expected: u64,
}

/// Rewrites the readable data blocks of the damaged table at `src` (the
/// copy kept in `lost/`) as table `number` of database `db_id`, with
/// `opts` (its keyspace's table options): written
/// under a temporary name and renamed over the damaged file, so a crash
/// leaves one or the other under the table's name. A block is
/// kept whole or not at all: its checksum covers it whole, and its keys must
/// parse and follow the previous kept block's. `Err` if the table's footer,
/// index or properties are unreadable (then nothing can be located).
pub(super) fn salvage(
    env: &IoEnv,
    dir: &Path,
    opts: TableOptions,
    src: &Path,
    number: u64,
    db_id: u64,
) -> Result<Salvage> {
    let source = Arc::new(FileSource::open(Some(env), src)?);
    let table = TableReader::open(source.clone(), number, None)?;
    let final_path = table_path(dir, number);
    let tmp = final_path.with_extension("sst.tmp");
    let mut out = Output::create(env, &tmp, opts, number, db_id)?;
    let mut last: Vec<u8> = Vec::new();
    let mut blocks_lost = 0;
    let result = (|| {
        // The table opened, so its range-tombstone block was intact.
        for t in table.range_tombstones() {
            out.builder.add_range_tombstone(t)?;
        }
        for entry in table.index().iter() {
            match read_block(&source, &table, entry.handle, &last) {
                Ok(entries) => {
                    for (k, v) in &entries {
                        out.builder.add(k, v)?;
                    }
                    if let Some((k, _)) = entries.last() {
                        last.clone_from(k);
                    }
                }
                Err(e) => {
                    log::warn!(
                        "quietkv: repair: dropping a block of {}: {e}",
                        src.display()
                    );
                    blocks_lost += 1;
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let meta = out.finish(env)?;
    if meta.is_some() {
        std::fs::rename(&tmp, &final_path)
            .map_err(|e| Error::io(e, "cannot install a salvaged table").with_file(&final_path))?;
        env.sync_dir()?;
    }
    Ok(Salvage {
        meta,
        blocks_lost,
        entries_expected: table.properties().num_entries,
    })
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every entry of one data block, if it is intact and sorts after `after`.
fn read_block(
    source: &Arc<FileSource>,
    table: &TableReader,
    handle: crate::table::BlockHandle,
    after: &[u8],
) -> Result<Entries> {
    let disk = source.read_at(handle.offset, handle.size_usize()?)?;
    let block = table.parse_data_block(handle, disk)?;
    let mut it = BlockIter::new(Arc::new(block));
    it.seek_to_first()?;
    let mut entries: Entries = Vec::new();
    while it.valid() {
        parse_internal_key(it.key())?;
        let prev = entries.last().map_or(after, |(k, _)| k.as_slice());
        let first = entries.is_empty() && after.is_empty();
        if !first && compare_internal(prev, it.key()) != std::cmp::Ordering::Less {
            return Err(Error::corruption("keys out of order").with_offset(handle.offset));
        }
        entries.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(entries)
}

/// Merges intact tables of one keyspace into new tables of it (written with
/// `table_options`) numbered from `*next_file` (each up to about
/// `target_file_size`, split only between user keys so they do not overlap)
/// and returns their metadata, in key order. An internal key
/// found in several inputs (a table and its copy, or a compaction's input
/// and output) is written once.
pub(super) fn merge(
    env: &IoEnv,
    dir: &Path,
    opts: &Options,
    table_options: TableOptions,
    inputs: &[u64],
    next_file: &mut u64,
    db_id: u64,
) -> Result<Vec<FileMeta>> {
    let mut children: Vec<Box<dyn InternalIterator + Send>> = Vec::new();
    let mut range_dels = Vec::new();
    for &n in inputs {
        let source = Arc::new(FileSource::open(Some(env), &table_path(dir, n))?);
        let table = Arc::new(TableReader::open(source, n, None)?);
        range_dels.extend_from_slice(table.range_tombstones());
        children.push(Box::new(table.iter()));
    }
    // Each output keeps the parts of the tombstones over its own keys: the
    // outputs all go to level 0, where a read looks for a key's tombstones
    // only in the tables whose ranges hold the key.
    let mut splitter = OutputSplitter::new(range_dels);
    let mut it = MergingIterator::new(children);
    it.seek_to_first()?;
    let mut metas = Vec::new();
    let mut out: Option<Output> = None;
    let mut prev: Vec<u8> = Vec::new();
    let new_output = |next_file: &mut u64| -> Result<Output> {
        let o = Output::create(
            env,
            &table_path(dir, *next_file),
            table_options,
            *next_file,
            db_id,
        )?;
        *next_file += 1;
        Ok(o)
    };
    while it.valid() {
        let key = it.key();
        if !prev.is_empty() && key == prev.as_slice() {
            it.next()?;
            continue;
        }
        let full = out
            .as_ref()
            .is_some_and(|o| o.builder.estimated_size() >= opts.target_file_size);
        if full && user_key(key) != user_key(&prev) {
            let mut o = out.take().expect("full output");
            for t in splitter.cut_after(user_key(&prev)) {
                o.builder.add_range_tombstone(&t)?;
            }
            if let Some(meta) = o.finish(env)? {
                metas.push(meta);
            }
        }
        if out.is_none() {
            out = Some(new_output(next_file)?);
        }
        out.as_mut()
            .expect("output just created")
            .builder
            .add(key, it.value())?;
        prev.clear();
        prev.extend_from_slice(key);
        it.next()?;
    }
    if out.is_none() && !splitter.is_empty() {
        out = Some(new_output(next_file)?);
    }
    if let Some(mut o) = out {
        for t in splitter.rest() {
            o.builder.add_range_tombstone(&t)?;
        }
        if let Some(meta) = o.finish(env)? {
            metas.push(meta);
        }
    }
    Ok(metas)
}
