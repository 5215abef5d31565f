//! Appending to a file through a shared writable mapping: the mmap write
//! mode of the write-ahead log (Cassandra's commit-log default).
//!
//! The file is allocated a segment at a time with `fallocate` (size
//! included) and mapped; appends are copies into the mapping, a sync is
//! `msync(MS_SYNC)` of the range written since the last sync. A full
//! segment grows the file by another segment and maps it again. `finish`
//! cuts the file to the bytes written; until then (and after a crash) the
//! file ends in allocated zeros, which the log reader takes as padding.
//!
//! Through a fault layer every copy is reported as a write at its offset
//! (and may be failed or cut short by the plan, as a `pwrite` would be),
//! every msync as a sync point and a sync, and every allocation as a
//! `fallocate`: the layer's shadow model sees the mapping as it would a
//! file written with `pwrite`.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::config::FileConfig;
use super::raw::io_err;
use crate::class::EffectiveMode;
use crate::error::{Error, Result};
use crate::fault::{OpKind, Tracked, WriteVerdict};
use crate::sys::{self, WritableMap};

/// Appends to a file through a writable mapping; see the module docs.
pub struct MmapWriter {
    file: File,
    path: PathBuf,
    cfg: FileConfig,
    /// `None` once finished (or after a failed remap).
    map: Option<WritableMap>,
    /// Bytes allocated (and mapped) per growth step.
    segment_size: u64,
    /// Bytes appended so far.
    len: u64,
    /// Bytes the last successful sync covered.
    synced_len: u64,
    /// Set by a failed copy, allocation or sync: the file's tail is unknown.
    failed: bool,
    /// `finish` and drop leave the file at its mapped size.
    keep_allocation: bool,
    tracked: Option<Tracked>,
}

impl MmapWriter {
    /// Creates (or truncates) `path`, allocates `segment_size` bytes and maps
    /// them. Fails when the file system cannot `fallocate`: a write into a
    /// mapped block it could not allocate later would kill the process with
    /// SIGBUS instead of returning an error.
    pub fn create(path: &Path, cfg: FileConfig, segment_size: u64) -> Result<MmapWriter> {
        Self::open(path, cfg, segment_size, false)
    }

    /// Opens the existing file `path` to write it again from offset 0
    /// through a mapping, without truncating it: the mapping covers its
    /// old size rounded up to whole segments (allocating only what was not
    /// allocated), its old bytes stay after whatever is written, and
    /// `finish` cuts it to the bytes written. Fails as `create` does, and
    /// when the file does not exist.
    pub fn overwrite(path: &Path, cfg: FileConfig, segment_size: u64) -> Result<MmapWriter> {
        Self::open(path, cfg, segment_size, true)
    }

    fn open(path: &Path, cfg: FileConfig, segment_size: u64, existing: bool) -> Result<MmapWriter> {
        if cfg.mode != EffectiveMode::Mmap {
            return Err(Error::invalid(format!(
                "an mmap writer needs mmap mode, not {}",
                cfg.mode
            ))
            .with_file(path));
        }
        let page = sys::page_size() as u64;
        if segment_size < page || !segment_size.is_multiple_of(page) {
            return Err(Error::invalid(format!(
                "segment size must be a positive multiple of the page size {page}, got {segment_size}"
            ))
            .with_file(path));
        }
        let (file, old_len, tracked) = if existing {
            cfg.reopen_file(
                path,
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_CLOEXEC),
            )?
        } else {
            let (file, tracked) = cfg.create_file(
                path,
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .custom_flags(libc::O_CLOEXEC),
            )?;
            (file, 0, tracked)
        };
        let mut w = MmapWriter {
            file,
            path: path.to_path_buf(),
            cfg,
            map: None,
            segment_size,
            len: 0,
            synced_len: 0,
            failed: false,
            keep_allocation: false,
            tracked,
        };
        // fallocate from offset 0 (nothing is mapped yet) leaves the old
        // bytes of an existing file as they are.
        w.grow_to(old_len.div_ceil(segment_size).max(1) * segment_size)?;
        Ok(w)
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Always [`EffectiveMode::Mmap`]: the same question asked of every
    /// writer, for callers that hold any of them.
    pub fn mode(&self) -> EffectiveMode {
        EffectiveMode::Mmap
    }

    /// Bytes appended so far (the file's length once finished).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file's allocated (and mapped) size.
    pub fn allocated(&self) -> u64 {
        self.map.as_ref().map_or(self.len, |m| m.len() as u64)
    }

    /// From now on [`finish`](Self::finish) (and drop) leave the file at
    /// its allocated size instead of cutting it to the bytes written, as
    /// [`SeqWriter::keep_allocation`](crate::SeqWriter::keep_allocation)
    /// does.
    pub fn keep_allocation(&mut self) {
        self.keep_allocation = true;
    }

    /// Copies `data` to the end of the file (growing it a segment at a time).
    pub fn write_all(&mut self, data: &[u8]) -> Result<()> {
        self.check_usable()?;
        if data.is_empty() {
            return Ok(());
        }
        let end = self.len + data.len() as u64;
        if end > self.allocated() {
            let steps = end.div_ceil(self.segment_size);
            self.grow_to(steps * self.segment_size)?;
        }
        let t = Instant::now();
        let mut rest = data;
        while !rest.is_empty() {
            // A fault plan may fail this "write" or cut it short, as it
            // would a pwrite: the caller sees the same errors in every mode.
            let n = match self.tracked.as_ref().map(|t| t.write_verdict(rest.len())) {
                None | Some(WriteVerdict::Full) => rest.len(),
                Some(WriteVerdict::Short(n)) => n.clamp(1, rest.len()),
                Some(WriteVerdict::Fail(errno)) => {
                    self.failed = true;
                    return Err(io_err(
                        &self.path,
                        self.len,
                        "write failed (mmap mode)",
                        std::io::Error::from_raw_os_error(errno),
                    ));
                }
            };
            let at = self.len;
            let map = self.map.as_mut().expect("mapped while usable");
            map.copy_in(at as usize, &rest[..n]);
            if let Some(t) = &self.tracked {
                t.wrote(at, &rest[..n]);
            }
            self.len += n as u64;
            rest = &rest[n..];
        }
        self.cfg
            .stats
            .record_write(self.cfg.class, data.len(), t.elapsed());
        Ok(())
    }

    /// Nothing to do: bytes copied into a shared mapping are in the page
    /// cache already and survive the process dying.
    pub fn flush_all(&mut self) -> Result<()> {
        self.check_usable()
    }

    /// Makes every byte appended so far durable: `msync(MS_SYNC)` of the
    /// pages written since the last sync.
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        let (from, to) = (self.synced_len, self.len);
        let t = Instant::now();
        let map = self.map.as_ref().expect("mapped while usable");
        let synced = Tracked::around_sync(self.tracked.as_ref(), || {
            map.sync_range(from as usize, (to - from) as usize)
        });
        if let Err(e) = synced {
            // As after a failed fdatasync: the dirty pages may be gone.
            self.failed = true;
            return Err(io_err(&self.path, from, "msync failed", e));
        }
        self.synced_len = to;
        self.cfg.stats.record_sync(self.cfg.class, t.elapsed());
        Ok(())
    }

    /// Unmaps the file and cuts it to the bytes appended; with `sync` makes
    /// that durable (one `fdatasync` covers the mapped pages still dirty and
    /// the new length). Returns the file's length.
    pub fn finish(mut self, sync: bool) -> Result<u64> {
        self.check_usable()?;
        self.map = None;
        if !self.keep_allocation {
            self.truncate_to_len()?;
        }
        if sync {
            let t = Instant::now();
            let fd = self.file.as_raw_fd();
            let synced = Tracked::around_sync(self.tracked.as_ref(), || sys::fdatasync(fd));
            if let Err(e) = synced {
                self.failed = true;
                return Err(io_err(&self.path, self.len, "fdatasync failed", e));
            }
            self.cfg.stats.record_sync(self.cfg.class, t.elapsed());
        }
        Ok(self.len)
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed || self.map.is_none() {
            return Err(Error::io(
                std::io::Error::other("an earlier write, allocation or sync failed"),
                "an earlier write, allocation or sync of this mapped file failed; its tail is unknown",
            )
            .with_file(&self.path)
            .with_offset(self.len));
        }
        Ok(())
    }

    /// Allocates the file up to `size` bytes and maps all of it.
    fn grow_to(&mut self, size: u64) -> Result<()> {
        let from = self.allocated();
        let fd = self.file.as_raw_fd();
        let allocated = match &self.tracked {
            Some(t) => t
                .admit(OpKind::Fallocate)
                .and_then(|()| sys::fallocate(fd, from, size - from)),
            None => sys::fallocate(fd, from, size - from),
        };
        if let Err(e) = allocated {
            self.failed = true;
            return Err(io_err(
                &self.path,
                from,
                &format!("cannot allocate the mapped file up to {size} bytes (fallocate)"),
                e,
            ));
        }
        if let Some(t) = &self.tracked {
            t.extended(size);
        }
        // The old mapping goes first; its dirty pages stay in the page
        // cache and the new mapping covers the same file offsets.
        self.map = None;
        match WritableMap::new(fd, size) {
            Ok(m) => {
                self.map = Some(m);
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(io_err(
                    &self.path,
                    0,
                    "mmap of the allocated file failed",
                    e,
                ))
            }
        }
    }

    /// `ftruncate` to the bytes appended, through the fault layer.
    fn truncate_to_len(&mut self) -> Result<()> {
        let len = self.len;
        let cut = match &self.tracked {
            Some(t) => t.admit(OpKind::Truncate),
            None => Ok(()),
        }
        .and_then(|()| sys::ftruncate(self.file.as_raw_fd(), len));
        if let Err(e) = cut {
            self.failed = true;
            return Err(io_err(
                &self.path,
                len,
                "ftruncate to the true length failed",
                e,
            ));
        }
        if let Some(t) = &self.tracked {
            t.set_len(len);
        }
        Ok(())
    }
}

impl Drop for MmapWriter {
    /// A writer dropped without `finish` (a database closed after sealing
    /// its WAL) still leaves a file of its true length; nothing is synced.
    /// After a failure the preallocated zeros stay: the reader takes them
    /// as padding.
    fn drop(&mut self) {
        if self.failed || self.map.is_none() {
            return;
        }
        self.map = None;
        if self.keep_allocation {
            return;
        }
        if let Err(e) = self.truncate_to_len() {
            log::debug!("quietio: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{CutPolicy, Fault, FaultLayer, FaultPlan};
    use crate::{IoEnv, IoOptions};

    fn config(dir: &Path, layer: Option<std::sync::Arc<FaultLayer>>) -> FileConfig {
        let env = IoEnv::open(dir, IoOptions::default()).unwrap();
        let mut cfg = env.file_config(crate::IoClass::WalWrite, EffectiveMode::Mmap);
        cfg.fault = layer;
        cfg
    }

    #[test]
    fn appends_grow_by_segments_and_finish_cuts_to_the_true_length() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("w.log");
        let seg = sys::page_size() as u64;
        let mut w = MmapWriter::create(&path, config(d.path(), None), seg).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), seg, "preallocated");
        let data: Vec<u8> = (0..(seg as usize * 2 + 100)).map(|i| i as u8).collect();
        w.write_all(&data[..10]).unwrap();
        w.sync().unwrap();
        w.write_all(&data[10..]).unwrap();
        assert_eq!(w.allocated(), seg * 3, "grown a segment at a time");
        assert_eq!(std::fs::read(&path).unwrap()[..data.len()], data[..]);
        w.sync().unwrap();
        assert_eq!(w.finish(true).unwrap(), data.len() as u64);
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }

    #[test]
    fn overwrite_maps_the_old_file_whole_and_keeps_its_bytes_until_finish() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("w.log");
        let seg = sys::page_size() as u64;
        let old: Vec<u8> = (0..(seg as usize * 2 + 10))
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &old).unwrap();
        let layer = FaultLayer::new(d.path()).unwrap();
        let mut w =
            MmapWriter::overwrite(&path, config(d.path(), Some(layer.clone())), seg).unwrap();
        assert_eq!(w.allocated(), seg * 3, "the old size, in whole segments");
        w.write_all(b"new").unwrap();
        w.sync().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(&on_disk[..3], b"new");
        assert_eq!(on_disk[3..old.len()], old[3..], "old bytes after the new");
        // The layer sees an overwrite, not a truncation: the durable file
        // is the old one with its first bytes replaced.
        let durable = layer.durable_content("w.log").unwrap();
        assert_eq!(&durable[..3], b"new");
        assert_eq!(durable[3..old.len()], old[3..]);
        assert_eq!(w.finish(true).unwrap(), 3);
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        // Kept allocation: finish and drop leave the mapped size.
        let mut w = MmapWriter::overwrite(&path, config(d.path(), None), seg).unwrap();
        w.keep_allocation();
        w.write_all(b"again").unwrap();
        assert_eq!(w.finish(true).unwrap(), 5);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), seg);
        let mut w = MmapWriter::overwrite(&path, config(d.path(), None), seg).unwrap();
        w.keep_allocation();
        w.write_all(b"x").unwrap();
        drop(w);
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!((on_disk.len() as u64, &on_disk[..5]), (seg, &b"xgain"[..]));
        assert!(
            MmapWriter::overwrite(&d.path().join("missing"), config(d.path(), None), seg).is_err()
        );
    }

    #[test]
    fn drop_without_finish_leaves_the_true_length() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("w.log");
        let mut w = MmapWriter::create(&path, config(d.path(), None), 1 << 16).unwrap();
        w.write_all(b"hello").unwrap();
        drop(w);
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
    }

    #[test]
    fn refuses_other_modes_and_odd_segment_sizes() {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = config(d.path(), None);
        let e = MmapWriter::create(&d.path().join("a"), cfg.clone(), 1000)
            .err()
            .unwrap();
        assert!(e.to_string().contains("multiple of the page size"), "{e}");
        cfg.mode = EffectiveMode::Buffered;
        assert!(MmapWriter::create(&d.path().join("b"), cfg, 1 << 16).is_err());
    }

    #[test]
    fn the_fault_layer_sees_mapped_writes_msync_and_allocation() {
        let d = tempfile::tempdir().unwrap();
        let layer = FaultLayer::new(d.path()).unwrap();
        let path = d.path().join("w.log");
        let seg = sys::page_size() as u64;
        let mut w = MmapWriter::create(&path, config(d.path(), Some(layer.clone())), seg).unwrap();
        w.write_all(b"synced").unwrap();
        w.sync().unwrap();
        layer.before_sync(OpKind::DirSync, "").unwrap();
        layer.dir_synced();
        w.write_all(b"-unsynced").unwrap();
        assert_eq!(layer.counts().get(OpKind::Sync), 1, "msync is a sync");
        assert_eq!(layer.counts().get(OpKind::Fallocate), 1);
        // Durable: the allocation and the synced bytes; the rest is not.
        let durable = layer.durable_content("w.log").unwrap();
        assert_eq!(durable.len() as u64, seg);
        assert_eq!(&durable[..6], b"synced");
        assert!(durable[6..].iter().all(|&b| b == 0));
        assert_eq!(
            &layer.visible_content("w.log").unwrap()[..15],
            b"synced-unsynced"
        );
        let img = d.path().join("img");
        layer
            .power_cut_image(&img, CutPolicy::DropUnsynced)
            .unwrap();
        assert_eq!(&std::fs::read(img.join("w.log")).unwrap()[..7], b"synced\0");

        // A planned write failure fails the append and the writer.
        layer.set_plan(Some(FaultPlan {
            kind: OpKind::Write,
            index: 0,
            fault: Fault::Eio,
        }));
        let e = w.write_all(b"x").unwrap_err();
        assert!(e.to_string().contains("mmap"), "{e}");
        assert!(w.write_all(b"y").is_err(), "unusable after a failure");
    }
}
