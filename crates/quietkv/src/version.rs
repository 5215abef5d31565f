//! Table metadata, version edits and versions.
//!
//! A [`Version`] is an immutable snapshot of which table files make up the
//! tree, level by level. The manifest is a log of [`VersionEdit`]s; replaying
//! them with a [`VersionBuilder`] rebuilds the current version. The builder
//! validates every step, so a damaged or inconsistent manifest surfaces as
//! [`ErrorKind::Corruption`](crate::ErrorKind::Corruption) at recovery instead
//! of as a silently wrong tree.
//!
//! Level invariants:
//! * L0 files may overlap each other; they are kept newest first (highest
//!   file number first).
//! * L1 and deeper are sorted by smallest key and their *user-key* ranges are
//!   disjoint: two files of one level never hold versions of the same user
//!   key. (Compaction output must therefore never split one user key's
//!   versions across two output files of the same level.) This is what lets a
//!   point lookup consult a single file per level.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, user_key, SeqNo};
use crate::keyspace::def::KeyspaceDef;
use crate::varint::{self, put_u64};

/// Number of levels in the tree (L0 ..= L6).
pub const NUM_LEVELS: usize = 7;

/// Metadata of one table file, as recorded in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileMeta {
    /// File number; the file is `{number:06}.sst` (see [`table_file_name`]).
    pub number: u64,
    /// File size in bytes.
    pub size: u64,
    /// Smallest internal key in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key in the file.
    pub largest: Vec<u8>,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    pub num_entries: u64,
    pub num_deletes: u64,
    /// Range tombstones in the file (recorded with tag 12 instead of 6 when
    /// nonzero), so readers know which tables to ask for them without
    /// opening every table.
    pub num_range_deletes: u64,
}

impl FileMeta {
    pub fn smallest_user_key(&self) -> &[u8] {
        user_key(&self.smallest)
    }

    pub fn largest_user_key(&self) -> &[u8] {
        user_key(&self.largest)
    }

    /// Whether the file's user-key range intersects `[begin, end]`
    /// (`None` = unbounded on that side).
    pub fn overlaps(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> bool {
        let before = matches!(begin, Some(b) if self.largest_user_key() < b);
        let after = matches!(end, Some(e) if self.smallest_user_key() > e);
        !before && !after
    }

    /// Whether `ukey` is within the file's user-key range.
    pub fn contains_user_key(&self, ukey: &[u8]) -> bool {
        self.smallest_user_key() <= ukey && ukey <= self.largest_user_key()
    }
}

/// Path of table file `number` inside `dir`: `dir/{number:06}.sst`.
pub fn table_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

// ---------------------------------------------------------------------------
// Version edits
// ---------------------------------------------------------------------------

/// A delta between two versions: one manifest record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_sequence: Option<SeqNo>,
    /// `(level, internal key)`: where the next round-robin compaction of
    /// `level` starts (after this key).
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    /// `(level, file number)`.
    pub deleted_files: Vec<(usize, u64)>,
    pub new_files: Vec<(usize, FileMeta)>,
    /// `(WAL number, length)`: the WAL was closed for appends at exactly
    /// this length, every record synced (see [`crate::wal::set`]).
    pub sealed_wals: Vec<(u64, u64)>,
    /// The WAL now being appended to: it must exist until the log number
    /// passes it.
    pub live_wal: Option<u64>,
    /// The database's random id, written in the full-version edit that
    /// starts each manifest; tables record it to tell their database's
    /// files from another one's. `None` in every other edit (and in
    /// manifests of databases created before ids existed).
    pub db_id: Option<u64>,
    /// The manifest's own file number, written in the edit that starts
    /// it: a manifest copied or renamed to another number is Corruption.
    pub manifest_number: Option<u64>,
    /// Set in the edit that starts each manifest written since WALs carry
    /// identity records: every WAL this manifest may have replayed starts
    /// with one, so a WAL without one is not this database's.
    pub wals_have_identity: bool,
    /// Keyspaces dropped by this edit: their tables leave every version.
    pub dropped_keyspaces: Vec<u32>,
    /// The id the next created keyspace gets (ids are never reused, so a
    /// WAL entry of a dropped keyspace is told from a damaged one).
    pub next_keyspace_id: Option<u32>,
    /// Changes to keyspaces other than the default one (whose tables are
    /// the fields above, as before keyspaces existed), or to the default
    /// keyspace's own log number.
    pub keyspaces: Vec<KeyspaceEdit>,
}

/// The part of an edit that belongs to one keyspace: created here (with
/// its definition), its own log number, and its table changes (the
/// compact pointer and file fields of `edit`; its other fields are unused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyspaceEdit {
    pub id: u32,
    pub create: Option<KeyspaceDef>,
    /// WALs older than this hold none of the keyspace's data that is not
    /// in its tables.
    pub log_number: Option<u64>,
    pub edit: VersionEdit,
}

const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE_NUMBER: u64 = 2;
const TAG_LAST_SEQUENCE: u64 = 3;
const TAG_COMPACT_POINTER: u64 = 4;
const TAG_DELETED_FILE: u64 = 5;
const TAG_NEW_FILE: u64 = 6;
const TAG_SEALED_WAL: u64 = 7;
const TAG_LIVE_WAL: u64 = 8;
const TAG_DB_ID: u64 = 9;
const TAG_MANIFEST_NUMBER: u64 = 10;
const TAG_WALS_HAVE_IDENTITY: u64 = 11;
/// A new file holding range tombstones: the fields of tag 6 followed by
/// their count. A build that does not know range tombstones refuses the
/// manifest (unknown tag) instead of reading the table without them.
const TAG_NEW_FILE_WITH_RANGE_DELETES: u64 = 12;
/// Starts the part of the edit that belongs to keyspace `id`: the compact
/// pointer, file, create and log number tags after it are that keyspace's.
const TAG_KEYSPACE: u64 = 13;
/// In a keyspace's part: it is created, with this definition.
const TAG_CREATE_KEYSPACE: u64 = 14;
/// Keyspace `id` is dropped (with all its tables).
const TAG_DROP_KEYSPACE: u64 = 15;
/// In a keyspace's part: its log number.
const TAG_KEYSPACE_LOG_NUMBER: u64 = 16;
/// The id the next created keyspace gets.
const TAG_NEXT_KEYSPACE_ID: u64 = 17;

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A bounds-checked reader over an encoded edit.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn err(&self, what: &str) -> Error {
        Error::corruption(format!("version edit: {what}")).with_offset(self.pos as u64)
    }

    fn varint(&mut self, what: &str) -> Result<u64> {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        let (v, n) = varint::decode_u64(rest).map_err(|e| self.err(&format!("{e} in {what}")))?;
        self.pos += n;
        Ok(v)
    }

    fn level(&mut self, what: &str) -> Result<usize> {
        let l = self.varint(what)?;
        if l >= NUM_LEVELS as u64 {
            return Err(self.err(&format!("level {l} out of range in {what}")));
        }
        Ok(l as usize)
    }

    fn keyspace_id(&mut self, what: &str) -> Result<u32> {
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| self.err(&format!("{what} {v} is out of range")))
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.varint(what)?;
        let remaining = (self.buf.len() - self.pos) as u64;
        if len > remaining {
            return Err(self.err(&format!(
                "{what} claims {len} bytes, only {remaining} remain"
            )));
        }
        let s = &self.buf[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(s)
    }

    fn internal_key(&mut self, what: &str) -> Result<Vec<u8>> {
        let start = self.pos;
        let k = self.bytes(what)?;
        parse_internal_key(k).map_err(|e| {
            e.context(&format!("version edit: bad {what}"))
                .with_offset(start as u64)
        })?;
        Ok(k.to_vec())
    }
}

impl VersionEdit {
    pub fn new() -> Self {
        Self::default()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    pub fn add_file(&mut self, level: usize, meta: FileMeta) {
        self.new_files.push((level, meta));
    }

    pub fn delete_file(&mut self, level: usize, number: u64) {
        self.deleted_files.push((level, number));
    }

    /// Serializes the edit as a sequence of `varint tag, payload` records.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(v) = self.log_number {
            put_u64(&mut out, TAG_LOG_NUMBER);
            put_u64(&mut out, v);
        }
        if let Some(v) = self.next_file_number {
            put_u64(&mut out, TAG_NEXT_FILE_NUMBER);
            put_u64(&mut out, v);
        }
        if let Some(v) = self.last_sequence {
            put_u64(&mut out, TAG_LAST_SEQUENCE);
            put_u64(&mut out, v);
        }
        self.encode_files(&mut out);
        for (number, len) in &self.sealed_wals {
            put_u64(&mut out, TAG_SEALED_WAL);
            put_u64(&mut out, *number);
            put_u64(&mut out, *len);
        }
        if let Some(v) = self.live_wal {
            put_u64(&mut out, TAG_LIVE_WAL);
            put_u64(&mut out, v);
        }
        if let Some(v) = self.db_id {
            put_u64(&mut out, TAG_DB_ID);
            put_u64(&mut out, v);
        }
        if let Some(v) = self.manifest_number {
            put_u64(&mut out, TAG_MANIFEST_NUMBER);
            put_u64(&mut out, v);
        }
        if self.wals_have_identity {
            put_u64(&mut out, TAG_WALS_HAVE_IDENTITY);
        }
        for id in &self.dropped_keyspaces {
            put_u64(&mut out, TAG_DROP_KEYSPACE);
            put_u64(&mut out, u64::from(*id));
        }
        if let Some(v) = self.next_keyspace_id {
            put_u64(&mut out, TAG_NEXT_KEYSPACE_ID);
            put_u64(&mut out, u64::from(v));
        }
        for k in &self.keyspaces {
            put_u64(&mut out, TAG_KEYSPACE);
            put_u64(&mut out, u64::from(k.id));
            if let Some(def) = &k.create {
                put_u64(&mut out, TAG_CREATE_KEYSPACE);
                def.encode(&mut out);
            }
            if let Some(n) = k.log_number {
                put_u64(&mut out, TAG_KEYSPACE_LOG_NUMBER);
                put_u64(&mut out, n);
            }
            k.edit.encode_files(&mut out);
        }
        out
    }

    /// The compact pointer and file tags, top level or a keyspace's.
    fn encode_files(&self, out: &mut Vec<u8>) {
        for (level, key) in &self.compact_pointers {
            put_u64(out, TAG_COMPACT_POINTER);
            put_u64(out, *level as u64);
            put_bytes(out, key);
        }
        for (level, number) in &self.deleted_files {
            put_u64(out, TAG_DELETED_FILE);
            put_u64(out, *level as u64);
            put_u64(out, *number);
        }
        for (level, f) in &self.new_files {
            let tag = if f.num_range_deletes > 0 {
                TAG_NEW_FILE_WITH_RANGE_DELETES
            } else {
                TAG_NEW_FILE
            };
            put_u64(out, tag);
            put_u64(out, *level as u64);
            put_u64(out, f.number);
            put_u64(out, f.size);
            put_bytes(out, &f.smallest);
            put_bytes(out, &f.largest);
            put_u64(out, f.smallest_seq);
            put_u64(out, f.largest_seq);
            put_u64(out, f.num_entries);
            put_u64(out, f.num_deletes);
            if f.num_range_deletes > 0 {
                put_u64(out, f.num_range_deletes);
            }
        }
    }

    /// `edit`'s table changes as keyspace `id`'s: unchanged for the
    /// default keyspace (id 0), whose tables are the top-level fields.
    pub fn for_keyspace(id: u32, edit: VersionEdit) -> VersionEdit {
        if id == 0 {
            return edit;
        }
        VersionEdit {
            keyspaces: vec![KeyspaceEdit {
                id,
                edit,
                ..KeyspaceEdit::default()
            }],
            ..VersionEdit::default()
        }
    }

    /// Keyspace `id`'s part of the edit, if it has one.
    #[cfg(test)]
    pub fn keyspace(&self, id: u32) -> Option<&KeyspaceEdit> {
        self.keyspaces.iter().find(|k| k.id == id)
    }

    /// Parses an encoded edit. Unknown tags, truncated or inconsistent
    /// fields, out-of-range levels and malformed keys are corruption.
    pub fn decode(buf: &[u8]) -> Result<VersionEdit> {
        let mut r = Reader { buf, pos: 0 };
        let mut e = VersionEdit::default();
        fn set_once(slot: &mut Option<u64>, v: u64, r: &Reader<'_>, what: &str) -> Result<()> {
            if slot.is_some() {
                return Err(r.err(&format!("duplicate {what}")));
            }
            *slot = Some(v);
            Ok(())
        }
        // The keyspace part the tags now belong to (an index into
        // `e.keyspaces`); `None`: the top level.
        let mut section: Option<usize> = None;
        fn target(e: &mut VersionEdit, section: Option<usize>) -> &mut VersionEdit {
            match section {
                Some(i) => &mut e.keyspaces[i].edit,
                None => e,
            }
        }
        while !r.at_end() {
            let tag_pos = r.pos;
            let tag = r.varint("tag")?;
            match tag {
                TAG_LOG_NUMBER => {
                    let v = r.varint("log number")?;
                    set_once(&mut e.log_number, v, &r, "log number")?;
                }
                TAG_NEXT_FILE_NUMBER => {
                    let v = r.varint("next file number")?;
                    set_once(&mut e.next_file_number, v, &r, "next file number")?;
                }
                TAG_LAST_SEQUENCE => {
                    let v = r.varint("last sequence")?;
                    set_once(&mut e.last_sequence, v, &r, "last sequence")?;
                }
                TAG_COMPACT_POINTER => {
                    let level = r.level("compact pointer")?;
                    let key = r.internal_key("compact pointer key")?;
                    target(&mut e, section).compact_pointers.push((level, key));
                }
                TAG_DELETED_FILE => {
                    let level = r.level("deleted file")?;
                    let number = r.varint("deleted file number")?;
                    target(&mut e, section).deleted_files.push((level, number));
                }
                TAG_NEW_FILE | TAG_NEW_FILE_WITH_RANGE_DELETES => {
                    let level = r.level("new file")?;
                    let number = r.varint("new file number")?;
                    let size = r.varint("new file size")?;
                    let smallest = r.internal_key("new file smallest key")?;
                    let largest = r.internal_key("new file largest key")?;
                    let smallest_seq = r.varint("new file smallest seq")?;
                    let largest_seq = r.varint("new file largest seq")?;
                    let num_entries = r.varint("new file entry count")?;
                    let num_deletes = r.varint("new file delete count")?;
                    let num_range_deletes = if tag == TAG_NEW_FILE_WITH_RANGE_DELETES {
                        let n = r.varint("new file range tombstone count")?;
                        if n == 0 {
                            return Err(Error::corruption(
                                "new file with range tombstones records none",
                            )
                            .with_offset(tag_pos as u64));
                        }
                        n
                    } else {
                        0
                    };
                    let f = FileMeta {
                        number,
                        size,
                        smallest,
                        largest,
                        smallest_seq,
                        largest_seq,
                        num_entries,
                        num_deletes,
                        num_range_deletes,
                    };
                    check_file_meta(&f).map_err(|e| e.with_offset(tag_pos as u64))?;
                    target(&mut e, section).new_files.push((level, f));
                }
                TAG_SEALED_WAL => {
                    let number = r.varint("sealed WAL number")?;
                    let len = r.varint("sealed WAL length")?;
                    e.sealed_wals.push((number, len));
                }
                TAG_LIVE_WAL => {
                    let v = r.varint("live WAL number")?;
                    set_once(&mut e.live_wal, v, &r, "live WAL number")?;
                }
                TAG_DB_ID => {
                    let v = r.varint("database id")?;
                    set_once(&mut e.db_id, v, &r, "database id")?;
                }
                TAG_MANIFEST_NUMBER => {
                    let v = r.varint("manifest number")?;
                    set_once(&mut e.manifest_number, v, &r, "manifest number")?;
                }
                TAG_WALS_HAVE_IDENTITY => {
                    if e.wals_have_identity {
                        return Err(r.err("duplicate WAL identity flag"));
                    }
                    e.wals_have_identity = true;
                }
                TAG_KEYSPACE => {
                    let id = r.keyspace_id("keyspace id")?;
                    if e.keyspaces.iter().any(|k| k.id == id) {
                        return Err(r.err(&format!("keyspace {id} has two parts in one edit")));
                    }
                    e.keyspaces.push(KeyspaceEdit {
                        id,
                        ..KeyspaceEdit::default()
                    });
                    section = Some(e.keyspaces.len() - 1);
                }
                TAG_CREATE_KEYSPACE => {
                    let Some(i) = section else {
                        return Err(r.err("keyspace creation outside a keyspace part"));
                    };
                    let rest = r.buf.get(r.pos..).unwrap_or(&[]);
                    let (def, used) = KeyspaceDef::decode(rest).map_err(|err| {
                        let at = r.pos as u64 + err.offset().unwrap_or(0);
                        Error::corruption(format!("version edit: {}", err.message()))
                            .with_offset(at)
                    })?;
                    r.pos += used;
                    let k = &mut e.keyspaces[i];
                    if k.id == 0 || k.create.is_some() {
                        return Err(r.err(&format!("keyspace {} cannot be created here", k.id)));
                    }
                    k.create = Some(def);
                }
                TAG_KEYSPACE_LOG_NUMBER => {
                    let Some(i) = section else {
                        return Err(r.err("keyspace log number outside a keyspace part"));
                    };
                    let v = r.varint("keyspace log number")?;
                    set_once(&mut e.keyspaces[i].log_number, v, &r, "keyspace log number")?;
                }
                TAG_DROP_KEYSPACE => {
                    let id = r.keyspace_id("dropped keyspace id")?;
                    if id == 0 {
                        return Err(r.err("the default keyspace cannot be dropped"));
                    }
                    e.dropped_keyspaces.push(id);
                }
                TAG_NEXT_KEYSPACE_ID => {
                    let v = r.keyspace_id("next keyspace id")?;
                    if e.next_keyspace_id.replace(v).is_some() {
                        return Err(r.err("duplicate next keyspace id"));
                    }
                }
                other => {
                    return Err(
                        Error::corruption(format!("version edit: unknown tag {other}"))
                            .with_offset(tag_pos as u64),
                    )
                }
            }
        }
        Ok(e)
    }
}

/// Internal consistency of one file's metadata.
fn check_file_meta(f: &FileMeta) -> Result<()> {
    if compare_internal(&f.smallest, &f.largest) == Ordering::Greater {
        return Err(Error::corruption(format!(
            "table {}: smallest key sorts after largest key",
            f.number
        )));
    }
    if f.smallest_seq > f.largest_seq {
        return Err(Error::corruption(format!(
            "table {}: smallest seq {} > largest seq {}",
            f.number, f.smallest_seq, f.largest_seq
        )));
    }
    if f.num_deletes > f.num_entries {
        return Err(Error::corruption(format!(
            "table {}: {} deletes > {} entries",
            f.number, f.num_deletes, f.num_entries
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------

/// An immutable set of table files, level by level. Cheap to clone (files
/// are shared through `Arc`).
#[derive(Debug, Clone)]
pub struct Version {
    levels: Vec<Vec<Arc<FileMeta>>>,
    /// Per level: the largest internal key of the last round-robin
    /// compaction input, or empty.
    compact_pointers: Vec<Vec<u8>>,
}

impl Default for Version {
    fn default() -> Self {
        Self::new()
    }
}

impl Version {
    /// An empty version: no files at any level.
    pub fn new() -> Self {
        Version {
            levels: vec![Vec::new(); NUM_LEVELS],
            compact_pointers: vec![Vec::new(); NUM_LEVELS],
        }
    }

    /// Applies one edit, returning the resulting version.
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version> {
        let mut b = VersionBuilder::new(self);
        b.apply(edit)?;
        b.build()
    }

    /// Files of `level` (L0 newest first; L1+ by smallest key).
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        &self.levels[level]
    }

    pub fn num_files(&self, level: usize) -> usize {
        self.levels[level].len()
    }

    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.size).sum()
    }

    pub fn total_bytes(&self) -> u64 {
        (0..NUM_LEVELS).map(|l| self.level_bytes(l)).sum()
    }

    pub fn total_files(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// All live file numbers, ascending (to tell obsolete files on disk).
    pub fn all_file_numbers(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.levels.iter().flatten().map(|f| f.number).collect();
        v.sort_unstable();
        v
    }

    /// The round-robin compaction pointer of `level` (an internal key), if set.
    pub fn compact_pointer(&self, level: usize) -> Option<&[u8]> {
        let p = &self.compact_pointers[level];
        (!p.is_empty()).then_some(p.as_slice())
    }

    /// Files of `level` whose user-key range intersects `[begin, end]`
    /// (`None` = unbounded). For L0 the range is widened transitively: a file
    /// that overlaps the range extends it, so the result is closed under
    /// overlap (compacting a subset of overlapping L0 files would put newer
    /// data below older data). Result order follows [`Version::files`].
    pub fn overlapping_files(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        let files = &self.levels[level];
        if level == 0 {
            let mut begin = begin.map(<[u8]>::to_vec);
            let mut end = end.map(<[u8]>::to_vec);
            'restart: loop {
                let mut out = Vec::new();
                for f in files {
                    if !f.overlaps(begin.as_deref(), end.as_deref()) {
                        continue;
                    }
                    if let Some(b) = &begin {
                        if f.smallest_user_key() < b.as_slice() {
                            begin = Some(f.smallest_user_key().to_vec());
                            continue 'restart;
                        }
                    }
                    if let Some(e) = &end {
                        if f.largest_user_key() > e.as_slice() {
                            end = Some(f.largest_user_key().to_vec());
                            continue 'restart;
                        }
                    }
                    out.push(f.clone());
                }
                return out;
            }
        }
        // Sorted and disjoint: binary search for the first candidate.
        let start = match begin {
            Some(b) => files.partition_point(|f| f.largest_user_key() < b),
            None => 0,
        };
        files[start..]
            .iter()
            .take_while(|f| match end {
                Some(e) => f.smallest_user_key() <= e,
                None => true,
            })
            .cloned()
            .collect()
    }

    /// Files that may hold `ukey`, in search order: overlapping L0 files
    /// newest first, then at most one file per deeper level. Lazy, and
    /// borrowing: a point read usually stops at the first table that holds
    /// its key, so deeper levels are not searched and nothing is allocated.
    pub fn files_for_get<'a>(
        &'a self,
        ukey: &'a [u8],
    ) -> impl Iterator<Item = (usize, &'a Arc<FileMeta>)> + 'a {
        let l0 = self.levels[0]
            .iter()
            .filter(move |f| f.contains_user_key(ukey))
            .map(|f| (0, f));
        let deeper = (1..NUM_LEVELS).filter_map(move |level| {
            let files = &self.levels[level];
            let i = files.partition_point(|f| f.largest_user_key() < ukey);
            files
                .get(i)
                .filter(|f| f.smallest_user_key() <= ukey)
                .map(|f| (level, f))
        });
        l0.chain(deeper)
    }

    /// Whether any file of a level deeper than `level` overlaps `[begin, end]`.
    pub fn has_overlap_below(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> bool {
        (level + 1..NUM_LEVELS).any(|l| !self.overlapping_files(l, begin, end).is_empty())
    }
}

/// Applies a sequence of edits to a base version and builds the result,
/// checking consistency as it goes.
pub struct VersionBuilder {
    /// Per level: number -> file.
    levels: Vec<BTreeMap<u64, Arc<FileMeta>>>,
    /// number -> level of every live file.
    where_is: HashMap<u64, usize>,
    compact_pointers: Vec<Vec<u8>>,
}

impl VersionBuilder {
    pub fn new(base: &Version) -> Self {
        let mut levels = vec![BTreeMap::new(); NUM_LEVELS];
        let mut where_is = HashMap::new();
        for (l, files) in base.levels.iter().enumerate() {
            for f in files {
                levels[l].insert(f.number, f.clone());
                where_is.insert(f.number, l);
            }
        }
        VersionBuilder {
            levels,
            where_is,
            compact_pointers: base.compact_pointers.clone(),
        }
    }

    /// Applies one edit: compact pointers, then deletions, then additions.
    /// Deleting a file that is not live at that level, or adding a file
    /// number that is already live, is corruption. On error the builder is
    /// left partially updated and should be discarded.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<()> {
        for (level, key) in &edit.compact_pointers {
            check_level(*level)?;
            self.compact_pointers[*level] = key.clone();
        }
        for &(level, number) in &edit.deleted_files {
            check_level(level)?;
            if self.levels[level].remove(&number).is_none() {
                return Err(Error::corruption(format!(
                    "version edit deletes table {number} from L{level}, where it does not exist"
                )));
            }
            self.where_is.remove(&number);
        }
        for (level, f) in &edit.new_files {
            let level = *level;
            check_level(level)?;
            check_file_meta(f)?;
            if let Some(l) = self.where_is.get(&f.number) {
                return Err(Error::corruption(format!(
                    "version edit adds table {} to L{level}, but it already exists in L{l}",
                    f.number
                )));
            }
            self.levels[level].insert(f.number, Arc::new(f.clone()));
            self.where_is.insert(f.number, level);
        }
        Ok(())
    }

    /// Produces the version; fails if files of L1+ overlap.
    pub fn build(self) -> Result<Version> {
        let mut levels = Vec::with_capacity(NUM_LEVELS);
        for (l, map) in self.levels.into_iter().enumerate() {
            let mut files: Vec<Arc<FileMeta>> = map.into_values().collect();
            if l == 0 {
                files.sort_by_key(|f| std::cmp::Reverse(f.number));
            } else {
                files.sort_by(|a, b| {
                    compare_internal(&a.smallest, &b.smallest).then(a.number.cmp(&b.number))
                });
                for w in files.windows(2) {
                    if w[0].largest_user_key() >= w[1].smallest_user_key() {
                        return Err(Error::corruption(format!(
                            "L{l}: tables {} and {} overlap",
                            w[0].number, w[1].number
                        )));
                    }
                }
            }
            levels.push(files);
        }
        Ok(Version {
            levels,
            compact_pointers: self.compact_pointers,
        })
    }
}

fn check_level(level: usize) -> Result<()> {
    if level >= NUM_LEVELS {
        return Err(Error::corruption(format!("level {level} out of range")));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use crate::ErrorKind;
    use proptest::prelude::*;

    pub(crate) fn meta(number: u64, lo: &str, hi: &str, size: u64) -> FileMeta {
        FileMeta {
            number,
            size,
            smallest: make_internal_key(lo.as_bytes(), 100, ValueKind::Put),
            largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Put),
            smallest_seq: 1,
            largest_seq: 100,
            num_entries: 10,
            num_deletes: 1,
            num_range_deletes: 0,
        }
    }

    pub(crate) fn version_with(files: &[(usize, FileMeta)]) -> Version {
        let mut e = VersionEdit::new();
        for (l, f) in files {
            e.add_file(*l, f.clone());
        }
        Version::new().apply(&e).unwrap()
    }

    fn numbers(v: &[Arc<FileMeta>]) -> Vec<u64> {
        v.iter().map(|f| f.number).collect()
    }

    #[test]
    fn table_name() {
        assert_eq!(
            table_file_name(Path::new("/db"), 12),
            PathBuf::from("/db/000012.sst")
        );
        assert_eq!(
            table_file_name(Path::new("/db"), 1234567),
            PathBuf::from("/db/1234567.sst")
        );
    }

    #[test]
    fn keyspace_parts_round_trip_and_misplaced_tags_are_corruption() {
        let mut files = VersionEdit::new();
        files.add_file(0, meta(12, "b", "c", 100));
        files.delete_file(3, 4);
        let mut e = VersionEdit::for_keyspace(5, files.clone());
        e.keyspaces[0].log_number = Some(40);
        e.keyspaces.push(KeyspaceEdit {
            id: 6,
            create: Some(KeyspaceDef {
                name: "events".into(),
                block_size: 8192,
                bloom_bits_per_key: 0,
                compression: crate::table::Compression::None,
            }),
            ..KeyspaceEdit::default()
        });
        e.dropped_keyspaces.push(2);
        e.next_keyspace_id = Some(7);
        e.add_file(1, meta(13, "x", "y", 10));
        let enc = e.encode();
        let back = VersionEdit::decode(&enc).unwrap();
        assert_eq!(back, e);
        // Top-level tables stay the default keyspace's.
        assert_eq!(back.new_files.len(), 1);
        assert_eq!(back.keyspace(5).unwrap().edit, files);
        // The default keyspace's edits are unchanged by `for_keyspace`.
        assert_eq!(VersionEdit::for_keyspace(0, files.clone()), files);

        // A create or keyspace log number outside a part, a second part
        // for one id, a drop of the default keyspace: corruption.
        for bad in [
            vec![TAG_KEYSPACE_LOG_NUMBER as u8, 1],
            vec![TAG_CREATE_KEYSPACE as u8, 1, b'a', 0x80, 2, 0, 0],
            vec![TAG_KEYSPACE as u8, 1, TAG_KEYSPACE as u8, 1],
            vec![TAG_DROP_KEYSPACE as u8, 0],
            vec![TAG_KEYSPACE as u8, 0xff, 0xff, 0xff, 0xff, 0x7f],
        ] {
            let err = VersionEdit::decode(&bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corruption, "{bad:?}: {err}");
        }
        // A truncated definition names what was expected.
        let mut cut = Vec::new();
        put_u64(&mut cut, TAG_KEYSPACE);
        put_u64(&mut cut, 1);
        put_u64(&mut cut, TAG_CREATE_KEYSPACE);
        cut.extend_from_slice(&[3, b'a', b'b']);
        let err = VersionEdit::decode(&cut).unwrap_err();
        assert!(err.to_string().contains("name claims 3 bytes"), "{err}");
    }

    #[test]
    fn edit_round_trip_and_unknown_tag() {
        let mut e = VersionEdit {
            log_number: Some(7),
            next_file_number: Some(u64::MAX),
            last_sequence: Some(1 << 50),
            db_id: Some(0x1234_5678_9abc_def0),
            manifest_number: Some(11),
            wals_have_identity: true,
            ..Default::default()
        };
        e.compact_pointers
            .push((2, make_internal_key(b"m", 3, ValueKind::Delete)));
        e.delete_file(1, 4);
        e.add_file(6, meta(9, "a", "z", 1 << 40));
        let enc = e.encode();
        assert_eq!(VersionEdit::decode(&enc).unwrap(), e);
        assert!(VersionEdit::decode(&[]).unwrap().is_empty());

        let mut bad = enc.clone();
        bad.extend_from_slice(&[99, 0]);
        assert_eq!(
            VersionEdit::decode(&bad).unwrap_err().kind(),
            ErrorKind::Corruption
        );
        // Truncated in the middle of the last record (one with a value).
        let no_flag = VersionEdit {
            wals_have_identity: false,
            ..e.clone()
        }
        .encode();
        let err = VersionEdit::decode(&no_flag[..no_flag.len() - 1]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corruption);
        // Duplicate singleton field.
        let mut dup = enc.clone();
        dup.extend_from_slice(&[1, 5]);
        assert!(VersionEdit::decode(&dup).is_err());
        let mut dup = enc.clone();
        dup.extend_from_slice(&[TAG_DB_ID as u8, 5]);
        let err = VersionEdit::decode(&dup).unwrap_err();
        assert!(err.to_string().contains("duplicate database id"), "{err}");
        let mut dup = enc.clone();
        dup.push(TAG_WALS_HAVE_IDENTITY as u8);
        let err = VersionEdit::decode(&dup).unwrap_err();
        assert!(err.to_string().contains("duplicate WAL identity"), "{err}");
        // Level out of range.
        assert!(VersionEdit::decode(&[5, 7, 1]).is_err());
        assert!(VersionEdit::decode(&[5, 6, 1]).is_ok());
    }

    #[test]
    fn files_with_range_tombstones_use_their_own_tag() {
        let plain = meta(7, "a", "m", 10);
        let with_dels = FileMeta {
            num_range_deletes: 2,
            ..meta(8, "n", "z", 10)
        };
        let mut e = VersionEdit::default();
        e.add_file(1, plain.clone());
        e.add_file(1, with_dels.clone());
        let enc = e.encode();
        // Tag 6 for the first, 12 for the second: a build that does not
        // know range tombstones refuses the edit instead of ignoring them.
        assert_eq!(enc[0], TAG_NEW_FILE as u8);
        let second = enc
            .iter()
            .rposition(|&b| b == TAG_NEW_FILE_WITH_RANGE_DELETES as u8);
        assert!(second.is_some());
        assert_eq!(VersionEdit::decode(&enc).unwrap(), e);
        // A tag 12 that records no tombstone is damage.
        let mut zero = VersionEdit::default();
        zero.add_file(1, plain);
        let mut bytes = zero.encode();
        bytes[0] = TAG_NEW_FILE_WITH_RANGE_DELETES as u8;
        bytes.push(0);
        let err = VersionEdit::decode(&bytes).unwrap_err();
        assert!(err.to_string().contains("records none"), "{err}");
    }

    #[test]
    fn builder_validates() {
        let v = version_with(&[
            (0, meta(1, "a", "m", 10)),
            (0, meta(2, "c", "d", 10)),
            (1, meta(3, "a", "f", 10)),
            (1, meta(4, "g", "k", 10)),
        ]);
        assert_eq!(numbers(v.files(0)), vec![2, 1]);
        assert_eq!(numbers(v.files(1)), vec![3, 4]);

        // Deleting a missing file (or from the wrong level).
        let mut e = VersionEdit::new();
        e.delete_file(2, 3);
        assert_eq!(v.apply(&e).unwrap_err().kind(), ErrorKind::Corruption);
        // Overlapping L1 files.
        let mut e = VersionEdit::new();
        e.add_file(1, meta(5, "k", "p", 1));
        assert_eq!(v.apply(&e).unwrap_err().kind(), ErrorKind::Corruption);
        // Same number twice.
        let mut e = VersionEdit::new();
        e.add_file(2, meta(4, "x", "y", 1));
        assert!(v.apply(&e).is_err());
        // A move (delete + add of the same number) in one edit is fine.
        let mut e = VersionEdit::new();
        e.delete_file(1, 4);
        e.add_file(2, (*v.files(1)[1]).clone());
        let v2 = v.apply(&e).unwrap();
        assert_eq!(numbers(v2.files(2)), vec![4]);
        assert_eq!(v2.all_file_numbers(), vec![1, 2, 3, 4]);
        assert_eq!(v2.level_bytes(0), 20);
        assert_eq!(v2.total_bytes(), 40);
        assert_eq!(v2.num_files(1), 1);
        // A sequence of edits through one builder.
        let mut b = VersionBuilder::new(&v);
        let mut e1 = VersionEdit::new();
        e1.add_file(3, meta(10, "a", "b", 1));
        let mut e2 = VersionEdit::new();
        e2.delete_file(3, 10);
        b.apply(&e1).unwrap();
        b.apply(&e2).unwrap();
        assert_eq!(b.build().unwrap().num_files(3), 0);
    }

    #[test]
    fn overlap_queries() {
        let v = version_with(&[
            (0, meta(1, "a", "c", 10)),
            (0, meta(2, "b", "e", 10)),
            (0, meta(3, "x", "z", 10)),
            (0, meta(4, "e", "g", 10)),
            (2, meta(5, "a", "c", 10)),
            (2, meta(6, "d", "f", 10)),
            (2, meta(7, "h", "j", 10)),
        ]);
        // L0 expands transitively: [a,a] -> file1 [a,c] -> file2 [b,e] -> file4.
        assert_eq!(
            numbers(&v.overlapping_files(0, Some(b"a"), Some(b"a"))),
            vec![4, 2, 1]
        );
        assert_eq!(numbers(&v.overlapping_files(0, Some(b"y"), None)), vec![3]);
        assert_eq!(
            numbers(&v.overlapping_files(0, Some(b"h"), Some(b"w"))),
            Vec::<u64>::new()
        );
        assert_eq!(
            numbers(&v.overlapping_files(2, Some(b"c"), Some(b"h"))),
            vec![5, 6, 7]
        );
        assert_eq!(
            numbers(&v.overlapping_files(2, Some(b"g"), Some(b"g"))),
            Vec::<u64>::new()
        );
        assert_eq!(
            numbers(&v.overlapping_files(2, None, Some(b"d"))),
            vec![5, 6]
        );
        assert_eq!(numbers(&v.overlapping_files(2, None, None)), vec![5, 6, 7]);

        let get: Vec<(usize, u64)> = v.files_for_get(b"c").map(|(l, f)| (l, f.number)).collect();
        assert_eq!(get, vec![(0, 2), (0, 1), (2, 5)]);
        let get: Vec<(usize, u64)> = v.files_for_get(b"i").map(|(l, f)| (l, f.number)).collect();
        assert_eq!(get, vec![(2, 7)]);
        assert!(v.files_for_get(b"k").next().is_none());
        assert!(v.has_overlap_below(0, Some(b"i"), Some(b"i")));
        assert!(!v.has_overlap_below(2, None, None));
    }

    fn arb_ikey() -> impl Strategy<Value = Vec<u8>> {
        (
            proptest::collection::vec(any::<u8>(), 0..6),
            0..crate::key::MAX_SEQ,
            any::<bool>(),
        )
            .prop_map(|(k, s, put)| {
                make_internal_key(
                    &k,
                    s,
                    if put {
                        ValueKind::Put
                    } else {
                        ValueKind::Delete
                    },
                )
            })
    }

    fn arb_meta() -> impl Strategy<Value = FileMeta> {
        (
            any::<u64>(),
            any::<u64>(),
            arb_ikey(),
            arb_ikey(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(number, size, a, b, s1, s2, n1, n2)| {
                let (smallest, largest) = if compare_internal(&a, &b).is_le() {
                    (a, b)
                } else {
                    (b, a)
                };
                FileMeta {
                    number,
                    size,
                    smallest,
                    largest,
                    smallest_seq: s1.min(s2),
                    largest_seq: s1.max(s2),
                    num_entries: n1.max(n2),
                    num_deletes: n1.min(n2),
                    // Both tags: 6 without range tombstones, 12 with.
                    num_range_deletes: s1 % 3,
                }
            })
    }

    fn arb_edit() -> impl Strategy<Value = VersionEdit> {
        (
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec((0..NUM_LEVELS, arb_ikey()), 0..3),
            proptest::collection::vec((0..NUM_LEVELS, any::<u64>()), 0..4),
            proptest::collection::vec((0..NUM_LEVELS, arb_meta()), 0..4),
            proptest::collection::vec((any::<u64>(), any::<u64>()), 0..3),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec(arb_keyspace_edit(), 0..3),
        )
            .prop_map(
                |(a, b, c, cp, del, new, sealed, live, id, ks)| VersionEdit {
                    log_number: a,
                    next_file_number: b,
                    last_sequence: c,
                    compact_pointers: cp,
                    deleted_files: del,
                    new_files: new,
                    sealed_wals: sealed,
                    live_wal: live,
                    db_id: id,
                    manifest_number: id.map(|i| i % 1000),
                    wals_have_identity: a.is_some_and(|n| n % 2 == 0),
                    dropped_keyspaces: ks.iter().map(|k| k.id.wrapping_add(9)).collect(),
                    next_keyspace_id: b.map(|n| n as u32),
                    // One part per id.
                    keyspaces: ks
                        .into_iter()
                        .enumerate()
                        .map(|(i, k)| KeyspaceEdit {
                            id: i as u32 * 3 + 1,
                            ..k
                        })
                        .collect(),
                },
            )
    }

    fn arb_keyspace_edit() -> impl Strategy<Value = KeyspaceEdit> {
        (
            proptest::option::of(("[a-z]{1,12}", 256u64..65536, 0u64..64)),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec((0..NUM_LEVELS, any::<u64>()), 0..3),
            proptest::collection::vec((0..NUM_LEVELS, arb_meta()), 0..3),
        )
            .prop_map(|(create, log, del, new)| KeyspaceEdit {
                id: 0,
                create: create.map(|(name, block_size, bloom)| KeyspaceDef {
                    name,
                    block_size,
                    bloom_bits_per_key: bloom,
                    compression: crate::table::Compression::Lz4,
                }),
                log_number: log,
                edit: VersionEdit {
                    deleted_files: del,
                    new_files: new,
                    ..VersionEdit::default()
                },
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn edit_round_trips(e in arb_edit()) {
            prop_assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = VersionEdit::decode(&b);
        }

        #[test]
        fn damaged_edits_never_panic(e in arb_edit(), pos in any::<usize>(), x in any::<u8>(), cut in any::<usize>()) {
            let mut enc = e.encode();
            if !enc.is_empty() {
                let p = pos % enc.len();
                enc[p] ^= x;
                let _ = VersionEdit::decode(&enc);
                enc.truncate(cut % enc.len());
                let _ = VersionEdit::decode(&enc);
            }
        }
    }
}
