//! A checkpoint directory as one file, and back: what ships a database
//! over a byte stream (a Raft snapshot, a copy to another machine) without
//! reading it through the page cache the database's readers use.
//!
//! Every byte of the container is read and written in the `Backup` I/O
//! class (direct where the probe allows it). The layout, numbers
//! little-endian (also in docs/format.md, section 9.2):
//!
//! ```text
//! header:  magic "QKVPACK\0" | version u32 (1) | label length u32 | label
//!          | crc32c u32 of the header bytes before it
//! file*:   tag u8 (1) | name length u16 | name (UTF-8) | length u64
//!          | the file's bytes | crc32c u32 of the file's bytes
//! trailer: tag u8 (0) | file count u64 | container length u64
//!          | crc32c u32 of every byte of the container before it
//! ```
//!
//! A file's checksum follows its bytes, so packing reads each table once.
//! The label is the caller's (quietkv-raft keeps the snapshot's
//! description there) and has a checksum of its own, so it can be read
//! without reading the whole container. Unpacking checks every name,
//! length and checksum as it goes and builds the directory in a staged
//! sibling renamed into place at the end (see [`super::staging`]): damaged
//! input is an error naming the container and the offset, and leaves no
//! target behind.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quietio::{ClassStats, IoClass, IoEnv, IoStats, SeqReader, SeqWriter};

use super::staging::{self, Staging};
use crate::error::{Error, Result};
use crate::filenames::{self, FileKind, CURRENT, INCOMPLETE_COPY};
use crate::options::Options;

const MAGIC: &[u8; 8] = b"QKVPACK\0";
const VERSION: u32 = 1;
const TAG_FILE: u8 = 1;
const TAG_END: u8 = 0;
/// The longest label: a description of a few kilobytes at most; a longer
/// length in a header is damage, refused before anything is allocated.
pub const MAX_PACK_LABEL: usize = 64 << 10;
/// The longest file name a container holds (a database's names are short).
const MAX_NAME: usize = 255;
/// Tag, file count, container length and checksum.
const TRAILER_LEN: u64 = 1 + 8 + 8 + 4;
/// Bytes moved per step.
const CHUNK: usize = 1 << 20;

/// What [`pack_checkpoint`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackInfo {
    /// The container written.
    pub file: PathBuf,
    /// Files packed (tables, manifest, CURRENT).
    pub files: u64,
    /// Their bytes.
    pub file_bytes: u64,
    /// The container's length.
    pub bytes: u64,
    /// The container's whole-file checksum (the last four bytes).
    pub crc: u32,
    /// The I/O the packing did, per class (all of it `Backup`).
    pub io: Vec<(IoClass, ClassStats)>,
}

/// What [`unpack_checkpoint`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpackInfo {
    /// The database directory written.
    pub dir: PathBuf,
    /// Files unpacked, every one checked against its checksum.
    pub files: u64,
    /// Their bytes.
    pub file_bytes: u64,
    /// The label the container was packed with.
    pub label: Vec<u8>,
    /// The I/O the unpacking did, per class (all of it `Backup`).
    pub io: Vec<(IoClass, ClassStats)>,
}

/// Packs the checkpoint in `dir` (as [`Db::checkpoint`](crate::Db::checkpoint)
/// writes it) into one new file `out`, synced; see [`pack_checkpoint_with`].
///
/// # Errors
///
/// As [`pack_checkpoint_with`].
pub fn pack_checkpoint(dir: impl AsRef<Path>, out: impl AsRef<Path>) -> Result<PackInfo> {
    pack_checkpoint_with(dir, out, &[])
}

/// Packs the checkpoint in `dir` into one new file `out` with `label` (at
/// most [`MAX_PACK_LABEL`] bytes of the caller's own, returned by
/// [`unpack_checkpoint`] and [`read_pack_label`]). Every file is read and
/// the container written in the [`Backup`](crate::IoClass::Backup) I/O
/// class; the container is synced, and its name too.
///
/// The directory must be a checkpoint never opened as a database: its
/// tables, manifest and CURRENT (a LOCK file is skipped). It is locked
/// while it is read, so a database cannot be opened on it meanwhile.
///
/// # Errors
///
/// `InvalidArgument` if `out` exists, the label is too long, or `dir`
/// holds anything but a checkpoint's files (a WAL, which means it was
/// opened; an unfinished copy's marker; a file of another program);
/// `Busy` if a database is open on `dir`; `Corruption` if a file changed
/// length while it was packed; `Io` for an I/O error. On an error `out`
/// is removed.
pub fn pack_checkpoint_with(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    label: &[u8],
) -> Result<PackInfo> {
    let (dir, out) = (dir.as_ref(), out.as_ref());
    if label.len() > MAX_PACK_LABEL {
        return Err(Error::invalid(format!(
            "a pack label is at most {MAX_PACK_LABEL} bytes, this one is {}",
            label.len()
        )));
    }
    if fs::symlink_metadata(out).is_ok() {
        return Err(Error::invalid("the pack file already exists").with_file(out));
    }
    let _lock = crate::lockfile::lock_shared(dir)?;
    let names = checkpoint_files(dir)?;
    let stats = Arc::new(IoStats::new());
    let io = Options::default().io_options();
    let from =
        IoEnv::open_read_only(dir, &dir.join(CURRENT), io.clone())?.with_stats(stats.clone());
    let out_dir = staging_parent(out);
    let to = IoEnv::open(out_dir, io)?.with_stats(stats.clone());
    let result = write_pack(&from, dir, &names, &to, out, label);
    match result {
        Ok((files, file_bytes, bytes, crc)) => {
            staging::sync_dir(out_dir)?;
            Ok(PackInfo {
                file: out.to_path_buf(),
                files,
                file_bytes,
                bytes,
                crc,
                io: stats.snapshot(),
            })
        }
        Err(e) => {
            let _ = fs::remove_file(out);
            Err(e)
        }
    }
}

/// The directory holding `path` (`.` for a bare name).
fn staging_parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The names of the checkpoint's files in `dir`, CURRENT last; refuses a
/// directory that is not an unopened checkpoint.
fn checkpoint_files(dir: &Path) -> Result<Vec<String>> {
    let entries =
        fs::read_dir(dir).map_err(|e| Error::io(e, "cannot read the checkpoint").with_file(dir))?;
    let mut names = Vec::new();
    let mut has_current = false;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(e, "cannot read the checkpoint").with_file(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str().map(str::to_string) else {
            return Err(Error::invalid(format!(
                "the checkpoint holds {name:?}, a name that is not UTF-8 and no database file"
            ))
            .with_file(dir));
        };
        let refuse = |why: &str| {
            Err(Error::invalid(format!(
                "cannot pack this directory: it holds {name:?}, {why}"
            ))
            .with_file(dir))
        };
        if name.starts_with(".quietio") {
            continue; // a probe's file, removed by the probe itself
        }
        if name == INCOMPLETE_COPY {
            return refuse("the marker of a copy that never finished");
        }
        match filenames::parse(&name) {
            Some(FileKind::Lock) => continue,
            Some(FileKind::Table(_)) | Some(FileKind::Manifest(_)) => {}
            Some(FileKind::Current) => {
                has_current = true;
                continue;
            }
            Some(FileKind::Wal(_)) => {
                return refuse(
                    "a WAL: the checkpoint was opened as a database, and only an unopened checkpoint is packed",
                )
            }
            Some(FileKind::Temp) | None => return refuse("which no checkpoint holds"),
        }
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            return refuse("which is not a regular file");
        }
        names.push(name);
    }
    if !has_current {
        return Err(Error::invalid(
            "cannot pack this directory: it has no CURRENT, so it is not a checkpoint",
        )
        .with_file(dir));
    }
    names.sort();
    names.push(CURRENT.to_string());
    Ok(names)
}

/// A container being written, keeping the whole-file checksum.
struct Output {
    w: SeqWriter,
    crc: u32,
    len: u64,
}

impl Output {
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.len += bytes.len() as u64;
        Ok(self.w.write_all(bytes)?)
    }
}

/// Writes the container; returns files, their bytes, the container's
/// length and checksum.
fn write_pack(
    from: &IoEnv,
    dir: &Path,
    names: &[String],
    to: &IoEnv,
    out: &Path,
    label: &[u8],
) -> Result<(u64, u64, u64, u32)> {
    let mut o = Output {
        w: to.create(out, IoClass::Backup)?,
        crc: 0,
        len: 0,
    };
    let mut header = Vec::with_capacity(16 + label.len());
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&(label.len() as u32).to_le_bytes());
    header.extend_from_slice(label);
    let header_crc = crc32c::crc32c(&header);
    o.put(&header)?;
    o.put(&header_crc.to_le_bytes())?;
    let mut buf = vec![0u8; CHUNK];
    let mut file_bytes = 0u64;
    for name in names {
        let path = dir.join(name);
        let len = fs::metadata(&path)
            .map_err(|e| Error::io(e, "cannot read a checkpoint file's length").with_file(&path))?
            .len();
        o.put(&[TAG_FILE])?;
        o.put(&(name.len() as u16).to_le_bytes())?;
        o.put(name.as_bytes())?;
        o.put(&len.to_le_bytes())?;
        let mut r = from.open_sequential(&path, IoClass::Backup)?;
        let mut crc = 0u32;
        let mut done = 0u64;
        loop {
            let n = r
                .read(&mut buf)
                .map_err(|e| Error::from(e).with_file(&path).with_offset(done))?;
            if n == 0 {
                break;
            }
            done += n as u64;
            if done > len {
                break;
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            o.put(&buf[..n])?;
        }
        if done != len {
            return Err(Error::corruption(format!(
                "the file changed while it was packed: {len} bytes long at first, then at least {done}"
            ))
            .with_file(&path));
        }
        o.put(&crc.to_le_bytes())?;
        file_bytes += len;
    }
    o.put(&[TAG_END])?;
    o.put(&(names.len() as u64).to_le_bytes())?;
    let total = o.len + 8 + 4;
    o.put(&total.to_le_bytes())?;
    let crc = o.crc;
    o.w.write_all(&crc.to_le_bytes())?;
    let written = o.w.finish(true)?;
    if written != total {
        return Err(Error::corruption(format!(
            "the pack file is {written} bytes long after writing, but {total} were written into it"
        ))
        .with_file(out));
    }
    Ok((names.len() as u64, file_bytes, total, crc))
}

/// A container being read, checked as it goes: every error names the
/// container and the offset.
struct Input {
    r: SeqReader,
    path: PathBuf,
    len: u64,
    pos: u64,
    crc: u32,
}

impl Input {
    fn damage(&self, at: u64, what: String) -> Error {
        Error::corruption(format!("checkpoint pack: {what}"))
            .with_file(&self.path)
            .with_offset(at)
    }

    /// Fills `buf` or fails: the container ending early is damage.
    fn take(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let at = self.pos;
        let mut done = 0;
        while done < buf.len() {
            let n = self
                .r
                .read(&mut buf[done..])
                .map_err(|e| Error::from(e).with_file(&self.path).with_offset(self.pos))?;
            if n == 0 {
                return Err(self.damage(
                    at,
                    format!(
                        "the container ends after {} bytes, in the middle of {what} ({} bytes expected)",
                        self.pos,
                        buf.len()
                    ),
                ));
            }
            self.crc = crc32c::crc32c_append(self.crc, &buf[done..done + n]);
            done += n;
            self.pos += n as u64;
        }
        Ok(())
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        let mut b = [0u8; 1];
        self.take(&mut b, what)?;
        Ok(b[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        let mut b = [0u8; 2];
        self.take(&mut b, what)?;
        Ok(u16::from_le_bytes(b))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let mut b = [0u8; 4];
        self.take(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let mut b = [0u8; 8];
        self.take(&mut b, what)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Reads and checks the header; returns the label.
    fn header(&mut self) -> Result<Vec<u8>> {
        let mut magic = [0u8; 8];
        self.take(&mut magic, "the magic number")?;
        if &magic != MAGIC {
            return Err(self.damage(
                0,
                format!("not a checkpoint pack: starts with {magic:02x?}, expected {MAGIC:02x?}"),
            ));
        }
        let version = self.u32("the version")?;
        if version != VERSION {
            return Err(self.damage(
                8,
                format!("format version {version}, but this build reads version {VERSION} only"),
            ));
        }
        let label_len = self.u32("the label length")? as usize;
        if label_len > MAX_PACK_LABEL {
            return Err(self.damage(
                12,
                format!("label length {label_len} is over the limit of {MAX_PACK_LABEL}"),
            ));
        }
        let mut label = vec![0u8; label_len];
        self.take(&mut label, "the label")?;
        let want = self.crc;
        let at = self.pos;
        let got = self.u32("the header checksum")?;
        if got != want {
            return Err(self.damage(
                at,
                format!("header checksum {got:08x} does not match the header ({want:08x})"),
            ));
        }
        Ok(label)
    }
}

fn open_input(file: &Path) -> Result<(IoEnv, Input, Arc<IoStats>)> {
    let meta = fs::metadata(file)
        .map_err(|e| Error::io(e, "cannot open the checkpoint pack").with_file(file))?;
    if !meta.is_file() {
        return Err(Error::invalid("a checkpoint pack must be a regular file").with_file(file));
    }
    let stats = Arc::new(IoStats::new());
    let env = IoEnv::open_read_only(staging_parent(file), file, Options::default().io_options())?
        .with_stats(stats.clone());
    let r = env.open_sequential(file, IoClass::Backup)?;
    let input = Input {
        r,
        path: file.to_path_buf(),
        len: meta.len(),
        pos: 0,
        crc: 0,
    };
    Ok((env, input, stats))
}

/// The label of the container `file`, from its header alone (checked
/// against the header's own checksum).
///
/// # Errors
///
/// `Corruption` naming the file and offset for a damaged or cut header
/// or a file that is no container; `Io` for an I/O error.
pub fn read_pack_label(file: impl AsRef<Path>) -> Result<Vec<u8>> {
    let (_env, mut input, _) = open_input(file.as_ref())?;
    input.header()
}

/// Unpacks the container `file` (written by [`pack_checkpoint`]) into
/// `target`, a directory that must not exist or be empty, making it the
/// checkpoint that was packed: a database directory [`Db::open`](crate::Db::open)
/// opens. The container is read and the files written in the
/// [`Backup`](crate::IoClass::Backup) I/O class.
///
/// Every name, length and checksum is checked before the directory is
/// published: it is built in a hidden sibling of `target` and renamed into
/// place only once complete and synced, so a crash or an error leaves
/// either the complete target or none (the leftover is refused by
/// `Db::open` and removed by the next copy to the same target).
///
/// # Errors
///
/// `Corruption`, naming the container and the offset, for anything that
/// is not a container this build wrote: a bad magic number or version, a
/// file name that is not a database file's (a `/`, `..`, a name twice), a
/// length past the end of the container, a checksum that does not match,
/// bytes after the trailer, no CURRENT or a CURRENT naming no packed
/// manifest; `InvalidArgument` if `target` is not empty; `Busy` while
/// another copy to `target` is being written; `Io` for an I/O error.
pub fn unpack_checkpoint(file: impl AsRef<Path>, target: impl AsRef<Path>) -> Result<UnpackInfo> {
    let (file, target) = (file.as_ref(), target.as_ref());
    let (_from, mut input, stats) = open_input(file)?;
    let label = input.header()?;
    let staging = Staging::begin(target)?;
    let to = IoEnv::open(&staging.dir, Options::default().io_options())?.with_stats(stats.clone());
    let dir = to.dir().to_path_buf();
    let mut seen: HashSet<String> = HashSet::new();
    let mut manifests: HashSet<String> = HashSet::new();
    let mut current: Option<Vec<u8>> = None;
    let mut file_bytes = 0u64;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let at = input.pos;
        match input.u8("a file's tag")? {
            TAG_FILE => {}
            TAG_END => break,
            t => {
                return Err(input.damage(
                    at,
                    format!("unknown tag {t} (1 starts a file, 0 the trailer)"),
                ))
            }
        }
        let name_at = input.pos;
        let name_len = input.u16("a file name's length")? as usize;
        if name_len == 0 || name_len > MAX_NAME {
            return Err(input.damage(
                name_at,
                format!("file name length {name_len}, expected 1 to {MAX_NAME}"),
            ));
        }
        let mut raw = vec![0u8; name_len];
        input.take(&mut raw, "a file name")?;
        let name = check_name(&input, name_at, &raw)?;
        if !seen.insert(name.clone()) {
            return Err(input.damage(name_at, format!("file {name:?} is in the container twice")));
        }
        let len_at = input.pos;
        let len = input.u64("a file's length")?;
        // The file's bytes, its checksum and at least the trailer must fit.
        let room = input.len.saturating_sub(input.pos + 4 + TRAILER_LEN);
        if len > room {
            return Err(input.damage(
                len_at,
                format!(
                    "file {name:?} says it is {len} bytes long, past the end of the container ({room} bytes are left for it)"
                ),
            ));
        }
        let path = dir.join(&name);
        let is_current = name == CURRENT;
        let mut kept = Vec::new();
        let mut w = to.create(&path, IoClass::Backup)?;
        let data_at = input.pos;
        let mut crc = 0u32;
        let mut left = len;
        while left > 0 {
            let n = left.min(CHUNK as u64) as usize;
            input.take(&mut buf[..n], &format!("the bytes of {name:?}"))?;
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            if is_current && kept.len() < 256 {
                kept.extend_from_slice(&buf[..n.min(256)]);
            }
            w.write_all(&buf[..n])?;
            left -= n as u64;
        }
        let crc_at = input.pos;
        let want = input.u32("a file's checksum")?;
        if want != crc {
            return Err(input.damage(
                crc_at,
                format!(
                    "the bytes of {name:?} (from offset {data_at}) have checksum {crc:08x}, the container recorded {want:08x}"
                ),
            ));
        }
        w.finish(true)?;
        file_bytes += len;
        if is_current {
            current = Some(kept);
        } else if matches!(filenames::parse(&name), Some(FileKind::Manifest(_))) {
            manifests.insert(name);
        }
    }
    let count_at = input.pos;
    let count = input.u64("the trailer's file count")?;
    if count != seen.len() as u64 {
        return Err(input.damage(
            count_at,
            format!(
                "the trailer says {count} files, the container holds {}",
                seen.len()
            ),
        ));
    }
    let len_at = input.pos;
    let total = input.u64("the trailer's container length")?;
    if total != input.len {
        return Err(input.damage(
            len_at,
            format!(
                "the trailer says the container is {total} bytes long, the file is {}",
                input.len
            ),
        ));
    }
    let want = input.crc;
    let crc_at = input.pos;
    let got = input.u32("the container's checksum")?;
    if got != want {
        return Err(input.damage(
            crc_at,
            format!("container checksum {got:08x} does not match its bytes ({want:08x})"),
        ));
    }
    if input.pos != input.len {
        return Err(input.damage(
            input.pos,
            format!("{} bytes follow the trailer", input.len - input.pos),
        ));
    }
    let Some(current) = current else {
        return Err(input.damage(
            input.pos,
            "the container has no CURRENT: it is not a checkpoint".into(),
        ));
    };
    let named = String::from_utf8_lossy(&current).trim_end().to_string();
    if !manifests.contains(&named) {
        return Err(input.damage(
            input.pos,
            format!("CURRENT names {named:?}, which the container does not hold"),
        ));
    }
    to.sync_dir()?;
    drop(to);
    staging.publish()?;
    Ok(UnpackInfo {
        dir: target.to_path_buf(),
        files: count,
        file_bytes,
        label,
        io: stats.snapshot(),
    })
}

/// A file name read from a container, if it is one a checkpoint holds: a
/// table, a manifest or CURRENT, and so never a path (`/`, `..`).
fn check_name(input: &Input, at: u64, raw: &[u8]) -> Result<String> {
    let shown = raw.escape_ascii().to_string();
    let Ok(name) = std::str::from_utf8(raw) else {
        return Err(input.damage(at, format!("file name \"{shown}\" is not UTF-8")));
    };
    if name.contains('/') || name.contains('\\') || name.contains('\0') || name.contains("..") {
        return Err(input.damage(
            at,
            format!("file name \"{shown}\" is a path, not a name: a container holds names only"),
        ));
    }
    match filenames::parse(name) {
        Some(FileKind::Table(_)) | Some(FileKind::Manifest(_)) | Some(FileKind::Current) => {
            Ok(name.to_string())
        }
        _ => Err(input.damage(
            at,
            format!("file name \"{shown}\" is not a table, manifest or CURRENT"),
        )),
    }
}

#[cfg(test)]
mod tests;
