//! Snapshot files: the state machine's data at one applied log id, as the
//! bytes openraft ships to a follower, and the directory that keeps the
//! current one.
//!
//! A snapshot is built by iterating a quietkv [`Snapshot`](quietkv::Snapshot)
//! of the state machine's key range into a file (the raft log is not in
//! it). A quietkv checkpoint was the other candidate, but it copies the
//! whole database, raft log included, as a directory, while openraft ships
//! one byte stream: it would have to be packed into a file and filtered on
//! the receiving side anyway. The file lives on disk, so neither building,
//! sending nor receiving a snapshot holds the state in memory.
//!
//! Layout (numbers little-endian):
//!
//! ```text
//! magic "QKVRAFTSNAP1" | meta length u32 | meta (JSON SnapshotMeta)
//! record*: 1u8 | key length u32 | value length u32 | key | value
//! end:     0u8 | record count u64 | crc32c u32 of every byte before it
//! ```
//!
//! A file that is short, has a bad tag, an oversized length or a checksum
//! that does not match is an error naming the file and offset.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::types::SnapshotMeta;

const MAGIC: &[u8; 12] = b"QKVRAFTSNAP1";
const TAG_RECORD: u8 = 1;
const TAG_END: u8 = 0;
/// A snapshot's description is a few hundred bytes; a larger length is
/// damage, refused before anything is allocated for it.
const MAX_META_LEN: u32 = 16 << 20;
/// The name of the current snapshot in the snapshot directory.
const CURRENT: &str = "current.snap";
/// Files being built or received end with this; what a crash leaves of
/// them is removed when the directory is opened.
const TEMP_SUFFIX: &str = ".tmp";

/// A damaged or unreadable snapshot file, or one that could not be written.
#[derive(Debug)]
pub struct SnapshotFileError {
    /// The file.
    pub path: PathBuf,
    /// Where in the file, for damage.
    pub offset: Option<u64>,
    /// What went wrong.
    pub detail: String,
}

impl std::fmt::Display for SnapshotFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "snapshot file {}", self.path.display())?;
        if let Some(o) = self.offset {
            write!(f, " at offset {o}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

impl std::error::Error for SnapshotFileError {}

fn io_err(path: &Path, e: std::io::Error) -> SnapshotFileError {
    SnapshotFileError {
        path: path.to_path_buf(),
        offset: None,
        detail: e.to_string(),
    }
}

/// One key and its value, as a snapshot file holds them.
pub type Record = (Vec<u8>, Vec<u8>);

/// Writes a snapshot file record by record.
pub struct SnapshotWriter {
    path: PathBuf,
    out: BufWriter<File>,
    crc: u32,
    count: u64,
}

impl SnapshotWriter {
    /// Starts `file` (at `path`, for messages) with the header for `meta`.
    pub fn new(path: &Path, file: File, meta: &SnapshotMeta) -> Result<Self, SnapshotFileError> {
        let meta = serde_json::to_vec(meta).map_err(|e| SnapshotFileError {
            path: path.to_path_buf(),
            offset: None,
            detail: format!("cannot encode the snapshot's description: {e}"),
        })?;
        let mut w = SnapshotWriter {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            crc: 0,
            count: 0,
        };
        w.put(MAGIC)?;
        w.put(&(meta.len() as u32).to_le_bytes())?;
        w.put(&meta)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), SnapshotFileError> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.out.write_all(bytes).map_err(|e| io_err(&self.path, e))
    }

    /// Adds one key and its value.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<(), SnapshotFileError> {
        if key.len() > quietkv::MAX_KEY_LEN || value.len() > quietkv::MAX_VALUE_LEN {
            return Err(SnapshotFileError {
                path: self.path.clone(),
                offset: None,
                detail: format!(
                    "a record of {} + {} bytes is too long",
                    key.len(),
                    value.len()
                ),
            });
        }
        self.put(&[TAG_RECORD])?;
        self.put(&(key.len() as u32).to_le_bytes())?;
        self.put(&(value.len() as u32).to_le_bytes())?;
        self.put(key)?;
        self.put(value)?;
        self.count += 1;
        Ok(())
    }

    /// Ends the file and syncs it to disk; returns the file.
    pub fn finish(mut self) -> Result<File, SnapshotFileError> {
        self.put(&[TAG_END])?;
        let count = self.count;
        self.put(&count.to_le_bytes())?;
        let crc = self.crc;
        self.out
            .write_all(&crc.to_le_bytes())
            .map_err(|e| io_err(&self.path, e))?;
        let file = self
            .out
            .into_inner()
            .map_err(|e| io_err(&self.path, e.into_error()))?;
        file.sync_all().map_err(|e| io_err(&self.path, e))?;
        Ok(file)
    }
}

/// Reads a snapshot file record by record, checking it as it goes.
pub struct SnapshotReader {
    path: PathBuf,
    input: BufReader<File>,
    offset: u64,
    crc: u32,
    count: u64,
    done: bool,
    meta: SnapshotMeta,
}

impl SnapshotReader {
    /// Reads the header of `file` (at `path`, for messages) from its start.
    pub fn new(path: &Path, mut file: File) -> Result<Self, SnapshotFileError> {
        file.seek(SeekFrom::Start(0)).map_err(|e| io_err(path, e))?;
        let mut r = SnapshotReader {
            path: path.to_path_buf(),
            input: BufReader::with_capacity(1 << 20, file),
            offset: 0,
            crc: 0,
            count: 0,
            done: false,
            meta: SnapshotMeta::default(),
        };
        let magic = r.take(MAGIC.len())?;
        if magic != MAGIC {
            return Err(r.damage(0, "not a quietkv-raft snapshot (bad magic)".into()));
        }
        let meta_len = r.u32()?;
        if meta_len > MAX_META_LEN {
            return Err(r.damage(
                r.offset - 4,
                format!("description length {meta_len} is too long"),
            ));
        }
        let at = r.offset;
        let meta = r.take(meta_len as usize)?;
        r.meta = serde_json::from_slice(&meta)
            .map_err(|e| r.damage(at, format!("damaged description: {e}")))?;
        Ok(r)
    }

    /// The snapshot's description from its header.
    pub fn meta(&self) -> &SnapshotMeta {
        &self.meta
    }

    fn damage(&self, offset: u64, detail: String) -> SnapshotFileError {
        SnapshotFileError {
            path: self.path.clone(),
            offset: Some(offset),
            detail,
        }
    }

    fn take(&mut self, n: usize) -> Result<Vec<u8>, SnapshotFileError> {
        let mut buf = vec![0; n];
        self.take_into(&mut buf)?;
        Ok(buf)
    }

    fn take_into(&mut self, buf: &mut [u8]) -> Result<(), SnapshotFileError> {
        self.input.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                self.damage(self.offset, "the file ends early".into())
            } else {
                io_err(&self.path, e)
            }
        })?;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        self.offset += buf.len() as u64;
        Ok(())
    }

    fn u32(&mut self) -> Result<u32, SnapshotFileError> {
        let mut b = [0; 4];
        self.take_into(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// The next key and value, or `None` after the last one once the end
    /// record's count and checksum matched.
    pub fn next_record(&mut self) -> Result<Option<Record>, SnapshotFileError> {
        if self.done {
            return Ok(None);
        }
        let at = self.offset;
        let mut tag = [0u8];
        self.take_into(&mut tag)?;
        match tag[0] {
            TAG_RECORD => {
                let klen = self.u32()? as usize;
                let vlen = self.u32()? as usize;
                if klen > quietkv::MAX_KEY_LEN || vlen > quietkv::MAX_VALUE_LEN {
                    return Err(
                        self.damage(at, format!("record lengths {klen} + {vlen} are too long"))
                    );
                }
                let key = self.take(klen)?;
                let value = self.take(vlen)?;
                self.count += 1;
                Ok(Some((key, value)))
            }
            TAG_END => {
                let mut c = [0; 8];
                self.take_into(&mut c)?;
                let count = u64::from_le_bytes(c);
                let expect = self.crc;
                let mut stored = [0; 4];
                self.input.read_exact(&mut stored).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        self.damage(self.offset, "the file ends early".into())
                    } else {
                        io_err(&self.path, e)
                    }
                })?;
                if u32::from_le_bytes(stored) != expect {
                    return Err(self.damage(self.offset, "checksum mismatch".into()));
                }
                if count != self.count {
                    return Err(self.damage(
                        at,
                        format!(
                            "end record says {count} records, the file has {}",
                            self.count
                        ),
                    ));
                }
                self.done = true;
                Ok(None)
            }
            t => Err(self.damage(at, format!("unknown record tag {t}"))),
        }
    }

    /// Reads to the end, checking every record and the checksum; returns
    /// how many records there are.
    pub fn verify(mut self) -> Result<u64, SnapshotFileError> {
        while self.next_record()?.is_some() {}
        Ok(self.count)
    }
}

/// The directory that keeps the current snapshot file and the files being
/// built or received.
#[derive(Debug)]
pub struct SnapshotDir {
    path: PathBuf,
    /// Held while a snapshot is published, so that comparing with the
    /// current snapshot and replacing it are one step.
    publishing: std::sync::Mutex<()>,
}

/// A temporary file in the snapshot directory, removed when dropped unless
/// it was published.
#[derive(Debug)]
pub struct TempPath(Option<PathBuf>);

impl TempPath {
    /// Where the file is.
    pub fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            // Best effort: what is left is removed at the next open.
            let _ = fs::remove_file(p);
        }
    }
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

impl SnapshotDir {
    /// Opens (creating) `path` and removes the temporary files a crash left.
    pub fn open(path: &Path) -> Result<SnapshotDir, SnapshotFileError> {
        fs::create_dir_all(path).map_err(|e| io_err(path, e))?;
        for entry in fs::read_dir(path).map_err(|e| io_err(path, e))? {
            let entry = entry.map_err(|e| io_err(path, e))?;
            let name = entry.file_name();
            if name.to_string_lossy().ends_with(TEMP_SUFFIX) {
                fs::remove_file(entry.path()).map_err(|e| io_err(&entry.path(), e))?;
            }
        }
        Ok(SnapshotDir {
            path: path.to_path_buf(),
            publishing: std::sync::Mutex::new(()),
        })
    }

    /// The current snapshot's path (which may not exist).
    pub fn current_path(&self) -> PathBuf {
        self.path.join(CURRENT)
    }

    /// A new temporary file, open for reading and writing, named after
    /// `what` it is for. It is removed when the returned [`TempPath`] is
    /// dropped, unless [`SnapshotDir::publish`] made it the current
    /// snapshot.
    pub fn create_temp(&self, what: &str) -> Result<(TempPath, File), SnapshotFileError> {
        let path = self.path.join(format!("{what}-{}{TEMP_SUFFIX}", unique()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        Ok((TempPath(Some(path)), file))
    }

    /// Makes the complete, synced file at `temp`, holding the snapshot
    /// `meta` describes, the current snapshot: renamed over the old one,
    /// and the directory synced so the rename survives a power cut. A crash
    /// leaves the old snapshot or the new. Returns `false`, and removes
    /// `temp`, if the current snapshot is newer (a build that raced with
    /// an install): the current snapshot never goes back.
    pub fn publish(
        &self,
        mut temp: TempPath,
        meta: &SnapshotMeta,
    ) -> Result<bool, SnapshotFileError> {
        let _serial = self.publishing.lock().unwrap_or_else(|p| p.into_inner());
        // A damaged current snapshot is replaced whatever it says.
        if let Ok(Some((current, _))) = self.current() {
            if current.last_log_id > meta.last_log_id {
                return Ok(false);
            }
        }
        let path = temp.0.take().expect("a temporary path is published once");
        let current = self.current_path();
        if let Err(e) = fs::rename(&path, &current) {
            temp.0 = Some(path.clone());
            return Err(io_err(&path, e));
        }
        File::open(&self.path)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err(&self.path, e))?;
        Ok(true)
    }

    /// The current snapshot's description and an open handle, if there is
    /// one.
    pub fn current(&self) -> Result<Option<(SnapshotMeta, File)>, SnapshotFileError> {
        let path = self.current_path();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, e)),
        };
        let handle = file.try_clone().map_err(|e| io_err(&path, e))?;
        let meta = SnapshotReader::new(&path, file)?.meta().clone();
        Ok(Some((meta, handle)))
    }
}

/// A name no other snapshot file of this process or an earlier one has.
pub fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{nanos:x}-{}-{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: &str, index: Option<u64>) -> SnapshotMeta {
        SnapshotMeta {
            snapshot_id: id.into(),
            last_log_id: index
                .map(|i| openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), i)),
            ..Default::default()
        }
    }

    fn write_sample(dir: &SnapshotDir, meta: &SnapshotMeta) -> TempPath {
        let (temp, file) = dir.create_temp("test").unwrap();
        let mut w = SnapshotWriter::new(temp.path(), file, meta).unwrap();
        w.add(b"a", b"1").unwrap();
        w.add(b"b", &[7u8; 1000]).unwrap();
        w.finish().unwrap();
        temp
    }

    #[test]
    fn a_written_file_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(tmp.path()).unwrap();
        let temp = write_sample(&dir, &meta("s1", None));
        let path = temp.path();
        let mut r = SnapshotReader::new(path, File::open(path).unwrap()).unwrap();
        assert_eq!(r.meta().snapshot_id, "s1");
        assert_eq!(
            r.next_record().unwrap(),
            Some((b"a".to_vec(), b"1".to_vec()))
        );
        assert_eq!(r.next_record().unwrap().unwrap().1.len(), 1000);
        assert_eq!(r.next_record().unwrap(), None);
    }

    #[test]
    fn every_flipped_byte_and_every_truncation_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(tmp.path()).unwrap();
        let temp = write_sample(&dir, &meta("s1", None));
        let good = fs::read(temp.path()).unwrap();
        let bad = tmp.path().join("bad");
        for i in (0..good.len()).step_by(7) {
            let mut b = good.clone();
            b[i] ^= 0x40;
            fs::write(&bad, &b).unwrap();
            let r = SnapshotReader::new(&bad, File::open(&bad).unwrap()).and_then(|r| r.verify());
            assert!(r.is_err(), "flipping byte {i} went unnoticed");
        }
        for len in [0, 5, 20, good.len() / 2, good.len() - 1] {
            fs::write(&bad, &good[..len]).unwrap();
            let r = SnapshotReader::new(&bad, File::open(&bad).unwrap()).and_then(|r| r.verify());
            let e = r.unwrap_err();
            assert!(e.to_string().contains("bad"), "{e}");
        }
    }

    #[test]
    fn opening_the_directory_removes_leftover_temporary_files_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(tmp.path()).unwrap();
        let temp = write_sample(&dir, &meta("s1", None));
        assert!(dir.publish(temp, &meta("s1", None)).unwrap());
        let (left, _) = dir.create_temp("receive").unwrap();
        let left_path = left.path().to_path_buf();
        std::mem::forget(left); // as a crash would leave it
        let dir = SnapshotDir::open(tmp.path()).unwrap();
        assert!(!left_path.exists());
        assert_eq!(dir.current().unwrap().unwrap().0.snapshot_id, "s1");
    }

    #[test]
    fn the_current_snapshot_never_goes_back_and_unpublished_files_go_away() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(tmp.path()).unwrap();
        let newer = write_sample(&dir, &meta("newer", Some(10)));
        assert!(dir.publish(newer, &meta("newer", Some(10))).unwrap());
        let older = write_sample(&dir, &meta("older", Some(5)));
        let older_path = older.path().to_path_buf();
        assert!(!dir.publish(older, &meta("older", Some(5))).unwrap());
        assert!(!older_path.exists());
        assert_eq!(dir.current().unwrap().unwrap().0.snapshot_id, "newer");
        let same = write_sample(&dir, &meta("same", Some(10)));
        assert!(dir.publish(same, &meta("same", Some(10))).unwrap());
        assert_eq!(dir.current().unwrap().unwrap().0.snapshot_id, "same");
        let files = fs::read_dir(tmp.path()).unwrap().count();
        assert_eq!(files, 1, "only current.snap is left");
    }
}
