//! Files opened in one access mode: the sequential writer, the sequential
//! reader and the random reader. The mode decides the open flags and which
//! system calls move the bytes; nothing above this module looks at O_DIRECT.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::aligned::{direct_io_align, note_direct_io, AlignedBuf};
use crate::class::{EffectiveMode, IoClass};
use crate::error::{Error, Result};
use crate::fault::{FaultLayer, OpKind, Tracked, WriteVerdict};
use crate::rate::RateLimiter;
use crate::read_ahead::ReadAhead;
use crate::stats::IoStats;
use crate::sys;
use crate::uring::Engine;
use crate::write_behind::WriteBehind;

/// Everything a file handle needs to know besides its path; built by
/// [`crate::IoEnv`] from the probe and the options.
#[derive(Debug, Clone)]
pub struct FileConfig {
    /// The class the file's I/O is counted under (and throttled for, when
    /// [`limiter`](Self::limiter) is set).
    pub class: IoClass,
    /// The access mode: it decides the open flags and the system calls.
    /// `Mmap` is for [`RandomReader`] only: [`SeqWriter`] refuses it and
    /// [`SeqReader`] reads buffered.
    pub mode: EffectiveMode,
    /// Direct-I/O alignment of buffer addresses, in bytes (the probe's
    /// [`DirectCaps::mem_align`](crate::DirectCaps::mem_align)). Buffers
    /// start on a page boundary anyway when that is larger.
    pub mem_align: usize,
    /// Direct-I/O alignment of file offsets and transfer lengths, in bytes
    /// ([`DirectCaps::offset_align`](crate::DirectCaps::offset_align)).
    /// `write_buffer_size` and `readahead_size` must be positive multiples
    /// of the larger of the two alignments, in every mode.
    pub offset_align: usize,
    /// Writer buffer (bytes handed to the kernel at once).
    pub write_buffer_size: usize,
    /// Sequential reader chunk (its own readahead in direct mode).
    pub readahead_size: usize,
    /// Fadvise mode: write back and drop pages every this many bytes.
    pub fadvise_chunk_size: u64,
    /// Buffered mode: start write-back (without waiting) every this many
    /// bytes; 0 leaves write-back to the kernel.
    pub writeback_chunk_size: u64,
    /// Attribute buffered random reads to page-cache hits or misses.
    pub attribute_cache_hits: bool,
    /// cachestat(2) works here (exact attribution); else RWF_NOWAIT is used.
    pub cachestat: bool,
    /// Where the file's bytes, operations, time and page-cache hits are
    /// counted (under [`class`](Self::class)).
    pub stats: Arc<IoStats>,
    /// The background rate limiter every transfer waits on, if any;
    /// [`IoEnv`](crate::IoEnv) sets it for the compaction classes only
    /// ([`IoClass::is_throttled`]).
    pub limiter: Option<Arc<RateLimiter>>,
    /// How direct sequential files move their bytes.
    pub engine: Engine,
    /// Requests a direct sequential file keeps in flight with io_uring.
    pub io_depth: usize,
    /// Tests only: in direct mode, the write of whole blocks (a full
    /// buffer or a flush, not a padded tail) that starts at this file
    /// offset is sent to the kernel one byte further on, which O_DIRECT
    /// refuses (EINVAL) without writing anything, so a real kernel error
    /// comes back through the real completion path.
    #[doc(hidden)]
    pub inject_write_fault_at: Option<u64>,
    /// Tests only: the fault-injecting, crash-simulating layer every
    /// operation on a file in its directory goes through (see
    /// [`crate::fault`]).
    #[doc(hidden)]
    pub fault: Option<Arc<FaultLayer>>,
}

impl FileConfig {
    pub(crate) fn align(&self) -> usize {
        self.offset_align.max(self.mem_align).max(1)
    }

    /// A buffer of `size` bytes for this file: page-aligned, its size a
    /// multiple of the offset alignment.
    pub(crate) fn buffer(&self, size: usize) -> Result<AlignedBuf> {
        AlignedBuf::for_direct_io(size, self.mem_align, self.align())
    }

    fn is_direct(&self) -> bool {
        self.mode == EffectiveMode::Direct
    }

    /// Direct files are pipelined with io_uring.
    fn uses_uring(&self) -> bool {
        self.is_direct() && self.engine == Engine::Uring
    }

    /// The offset a direct write meant for `at` is sent to (see
    /// `inject_write_fault_at`).
    pub(crate) fn sent_offset(&self, at: u64) -> u64 {
        if self.is_direct() && self.inject_write_fault_at == Some(at) {
            at + 1
        } else {
            at
        }
    }

    /// The layer's handle on `path` when a layer is installed and `path`
    /// is in its directory: the file's name.
    pub(crate) fn fault_name(&self, path: &Path) -> Option<(Arc<FaultLayer>, String)> {
        let layer = self.fault.as_ref()?;
        layer.name_of(path).map(|n| (layer.clone(), n))
    }

    /// Creates (truncating) `path` with `open`, through the fault layer
    /// when one is installed: the create can be failed by a fault plan,
    /// and the new file is tracked in the layer's durability model.
    pub(crate) fn create_file(
        &self,
        path: &Path,
        open: &OpenOptions,
    ) -> Result<(File, Option<Tracked>)> {
        let fault = self.fault_name(path);
        let admitted = match &fault {
            Some((layer, name)) => layer.admit(OpKind::Create, name),
            None => Ok(()),
        };
        let file = admitted.and_then(|()| open.open(path)).map_err(|e| {
            Error::io(
                e,
                format!(
                    "cannot create file for {} in {} mode",
                    self.class, self.mode
                ),
            )
            .with_file(path)
        })?;
        Ok((file, fault.map(|(layer, name)| layer.created(&name, true))))
    }

    /// Opens the existing file `path` for writing without truncating it
    /// (its old bytes stay until overwritten), through the fault layer
    /// like [`create_file`](Self::create_file); returns it, its length and
    /// the layer's handle.
    pub(crate) fn reopen_file(
        &self,
        path: &Path,
        open: &OpenOptions,
    ) -> Result<(File, u64, Option<Tracked>)> {
        let fault = self.fault_name(path);
        let admitted = match &fault {
            Some((layer, name)) => layer.admit(OpKind::Create, name),
            None => Ok(()),
        };
        let opened = admitted
            .and_then(|()| open.open(path))
            .and_then(|f| f.metadata().map(|m| (f, m.len())));
        let (file, len) = opened.map_err(|e| {
            Error::io(
                e,
                format!(
                    "cannot open existing file for {} in {} mode to overwrite it",
                    self.class, self.mode
                ),
            )
            .with_file(path)
        })?;
        Ok((
            file,
            len,
            fault.map(|(layer, name)| layer.created(&name, false)),
        ))
    }

    pub(crate) fn throttle(&self, bytes: usize) {
        if let Some(l) = &self.limiter {
            let waited = l.request(bytes as u64);
            if !waited.is_zero() {
                self.stats.record_throttle(self.class, waited);
            }
        }
    }
}

fn open_flags(mode: EffectiveMode) -> i32 {
    libc::O_CLOEXEC
        | if mode == EffectiveMode::Direct {
            libc::O_DIRECT
        } else {
            0
        }
}

/// Opens `path` read-only with the flags of `mode`; returns it and its length.
fn open_for_reading(path: &Path, cfg: &FileConfig, mode: EffectiveMode) -> Result<(File, u64)> {
    let admitted = match cfg.fault_name(path) {
        Some((layer, name)) => layer.admit(OpKind::Open, &name),
        None => Ok(()),
    };
    let file = admitted
        .and_then(|()| {
            OpenOptions::new()
                .read(true)
                .custom_flags(open_flags(mode))
                .open(path)
        })
        .map_err(|e| {
            Error::io(
                e,
                format!("cannot open file for {} in {} mode", cfg.class, cfg.mode),
            )
            .with_file(path)
        })?;
    let len = file
        .metadata()
        .map_err(|e| Error::io(e, "cannot stat file").with_file(path))?
        .len();
    Ok((file, len))
}

pub(crate) fn io_err(path: &Path, offset: u64, what: &str, e: std::io::Error) -> Error {
    Error::io(e, what.to_string())
        .with_file(path)
        .with_offset(offset)
}

/// How far ahead a pipelined table writer allocates its file.
const PREALLOCATE_STEP: u64 = 64 << 20;

/// Writes a file front to back in one access mode.
///
/// All modes produce byte-identical files. In direct mode only whole aligned
/// blocks reach the device while the file is being written; the partial last
/// block is written zero-padded by `sync` or `finish`, and the file is then
/// truncated to its true length before it is synced, so padding never
/// becomes content, even after a crash.
///
/// With the io_uring engine a direct writer keeps up to `io_depth` full
/// buffers being written while the caller fills the next (write-behind).
/// The file counts as written only once every one of those writes has
/// completed: `flush_all`, `sync` and `finish` wait for all of them before
/// the tail is written. A failed direct write fails the whole file: the
/// file is cut back to the offset of the first failed write, so what is on
/// disk is a strict prefix of what was written, never a full-length file
/// with a hole, and every later call on the writer fails.
pub struct SeqWriter {
    file: File,
    path: PathBuf,
    cfg: FileConfig,
    buf: AlignedBuf,
    /// Write-behind (direct mode with io_uring).
    behind: Option<WriteBehind>,
    /// A direct write failed at this offset; the file is incomplete.
    failed_at: Option<u64>,
    /// The length `flush_all` last left the file at: those bytes are on
    /// disk (and durable after `sync`), so a later failed write never cuts
    /// the file below it, even when it was the rewrite of their last block.
    flushed_len: u64,
    /// The fault layer's handle on this file (tests only).
    tracked: Option<Tracked>,
    /// Write-behind of a table file: the file is allocated ahead of the
    /// writes (see `preallocate`).
    preallocating: bool,
    /// The file's size as extended by preallocation.
    preallocated_to: u64,
    /// A log allocated this many bytes at a time (see
    /// `preallocate_segments`): the allocated zeros after its data stay
    /// until `finish`.
    segment: Option<u64>,
    /// `finish` and drop leave the file at its allocated size (see
    /// `keep_allocation`).
    keep_allocation: bool,
    /// File offset where `buf[0]` belongs.
    pos: u64,
    /// Fadvise and buffered mode: bytes before this offset have had
    /// write-back started.
    kicked_upto: u64,
    /// Fadvise mode: bytes before this offset have been dropped from the cache.
    dropped_upto: u64,
    finished: bool,
}

impl SeqWriter {
    /// Creates (or truncates) `path` and returns a writer in `cfg.mode`.
    /// Fails with `InvalidArgument` for `Mmap` (a read mode) or a
    /// `write_buffer_size` that is not a positive multiple of the
    /// alignment, and with `Io` when the file cannot be created. Where an
    /// io_uring ring cannot be set up for a direct file, the writer logs a
    /// warning and uses blocking calls.
    pub fn create(path: &Path, cfg: FileConfig) -> Result<SeqWriter> {
        Self::open(path, cfg, false)
    }

    /// Opens the existing file `path` to write it again from offset 0
    /// without truncating it: its blocks stay allocated (and written), so
    /// rewriting them neither allocates nor converts unwritten extents,
    /// and its old bytes stay after whatever is written (a recycled log
    /// tells them apart itself). The file's old size counts as allocated
    /// ([`allocated`](Self::allocated)); [`finish`](Self::finish) cuts the
    /// file to the bytes written, as for a new one. Fails as `create`
    /// does, and with `Io` when the file does not exist.
    pub fn overwrite(path: &Path, cfg: FileConfig) -> Result<SeqWriter> {
        Self::open(path, cfg, true)
    }

    fn open(path: &Path, cfg: FileConfig, existing: bool) -> Result<SeqWriter> {
        if cfg.mode == EffectiveMode::Mmap {
            return Err(
                Error::invalid("mmap is a read mode; a writer cannot use it").with_file(path),
            );
        }
        let align = cfg.align();
        let size = cfg.write_buffer_size;
        if size == 0 || !size.is_multiple_of(align) {
            return Err(Error::invalid(format!(
                "write buffer size must be a positive multiple of the direct I/O alignment {align}, got {size}"
            ))
            .with_file(path));
        }
        let buf = cfg.buffer(size).map_err(|e| e.with_file(path))?;
        let (file, old_len, tracked) = if existing {
            cfg.reopen_file(
                path,
                OpenOptions::new()
                    .write(true)
                    .custom_flags(open_flags(cfg.mode)),
            )?
        } else {
            let (file, tracked) = cfg.create_file(
                path,
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .custom_flags(open_flags(cfg.mode)),
            )?;
            (file, 0, tracked)
        };
        let behind = if cfg.uses_uring() {
            match WriteBehind::new(cfg.io_depth, tracked.clone()) {
                Ok(wb) => Some(wb),
                Err(e) => {
                    // A ring can fail where the probe's worked (memory,
                    // too many rings): this file goes the blocking way.
                    log::warn!(
                        "quietio: no io_uring ring for {} ({e}); writing it with blocking calls",
                        path.display()
                    );
                    None
                }
            }
        } else {
            None
        };
        // Only table files, which count only once finished and synced: a WAL
        // or manifest cut short by a crash must not end in preallocated zeros.
        let preallocating =
            behind.is_some() && matches!(cfg.class, IoClass::CompactionWrite | IoClass::FlushWrite);
        Ok(SeqWriter {
            file,
            path: path.to_path_buf(),
            cfg,
            buf,
            behind,
            tracked,
            failed_at: None,
            flushed_len: 0,
            preallocating,
            // An overwritten file's old size is allocated already.
            preallocated_to: old_len,
            segment: None,
            keep_allocation: false,
            pos: 0,
            kicked_upto: 0,
            dropped_upto: 0,
            finished: false,
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The access mode the writer uses.
    pub fn mode(&self) -> EffectiveMode {
        self.cfg.mode
    }

    /// Allocates the file `segment` bytes at a time from now on, size
    /// included (`fallocate` mode 0), so steady appends neither allocate
    /// blocks nor extend the file: each is an overwrite inside it, which
    /// an O_DIRECT writer also needs to keep several writes in flight on
    /// ext4. (KEEP_SIZE would keep the size true, but every append would
    /// still change it, and the truncate after an O_DIRECT padded tail
    /// would free the allocation again.) The file therefore ends in
    /// allocated zeros until [`finish`](Self::finish) (or drop) cuts it to
    /// its true length, and after a crash: for a log whose reader takes
    /// zeros after the last record as padding, as quietkv's does. If the
    /// file system cannot allocate, the writer appends as usual. Only on
    /// a new, empty writer.
    pub fn preallocate_segments(&mut self, segment: u64) -> Result<()> {
        if !self.is_empty() || segment == 0 || !segment.is_multiple_of(self.cfg.align() as u64) {
            return Err(Error::invalid(format!(
                "segments of {segment} bytes on a writer of {} bytes: the segment size must be a positive multiple of {} and the writer new",
                self.len(),
                self.cfg.align()
            ))
            .with_file(&self.path));
        }
        self.segment = Some(segment);
        self.preallocating = true;
        self.preallocate(segment);
        Ok(())
    }

    /// From now on [`finish`](Self::finish) (and drop) leave the file at
    /// its allocated size instead of cutting it to the bytes written: for
    /// a log that will be written again from offset 0 (a recycled WAL),
    /// whose blocks then stay allocated, and written once a life reached
    /// them. Its reader must take what follows the data (allocated zeros,
    /// or an earlier life's bytes) as the end.
    pub fn keep_allocation(&mut self) {
        self.keep_allocation = true;
    }

    /// The file's size as allocated ahead of the data (0 if it is not).
    pub fn allocated(&self) -> u64 {
        self.preallocated_to
    }

    /// Bytes accepted so far (the file's length once finished).
    pub fn len(&self) -> u64 {
        self.pos + self.buf.len() as u64
    }

    /// Whether no byte has been accepted yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes handed to the kernel and not yet known to have completed
    /// (always 0 without write-behind).
    pub fn writes_in_flight(&self) -> usize {
        self.behind.as_ref().map_or(0, WriteBehind::in_flight)
    }

    /// Appends `data`. It is buffered and handed to the kernel one full
    /// buffer (`write_buffer_size`) at a time; none of it is durable before
    /// [`sync`](Self::sync) or [`finish`](Self::finish). An error names the
    /// file and offset; after a failed direct write the file is incomplete
    /// and this and every later call fail.
    pub fn write_all(&mut self, mut data: &[u8]) -> Result<()> {
        if self.finished {
            return Err(Error::invalid("write after finish").with_file(&self.path));
        }
        self.check_not_failed()?;
        while !data.is_empty() {
            let n = self.buf.extend_from(data);
            data = &data[n..];
            if self.buf.remaining() == 0 {
                self.write_out(self.buf.len())?;
            }
        }
        Ok(())
    }

    /// Hands buffered bytes to the kernel (whole blocks only in direct mode).
    /// With write-behind they may still be in flight when this returns.
    pub fn flush(&mut self) -> Result<()> {
        self.check_not_failed()?;
        let n = if self.cfg.is_direct() {
            self.buf.len() / self.cfg.align() * self.cfg.align()
        } else {
            self.buf.len()
        };
        if n > 0 {
            self.write_out(n)?;
        }
        Ok(())
    }

    /// Hands every accepted byte to the kernel, so it survives the process
    /// dying (not a power cut: that needs `sync`). In direct mode the
    /// partial last block is written padded and the file truncated to its
    /// true length; the block stays buffered and is rewritten later.
    pub fn flush_all(&mut self) -> Result<()> {
        self.flush()?;
        self.wait_for_writes()?;
        if self.cfg.is_direct() && !self.buf.is_empty() {
            self.write_padded_tail()?;
        }
        if self.segment.is_none() {
            self.trim_preallocation()?;
        }
        self.flushed_len = self.len();
        Ok(())
    }

    /// Makes everything written so far durable: [`flush_all`](Self::flush_all),
    /// then `fdatasync`. The file's name is durable only once its directory
    /// is synced ([`IoEnv::sync_dir`](crate::IoEnv::sync_dir)).
    pub fn sync(&mut self) -> Result<()> {
        self.flush_all()?;
        self.fdatasync()
    }

    /// Flushes, writes the tail, and with `sync` makes the file's bytes
    /// durable (`fdatasync`; the name needs a directory sync). A fadvise
    /// writer then drops what is left of the file from the page cache.
    /// Returns the file's length.
    pub fn finish(mut self, sync: bool) -> Result<u64> {
        self.flush()?;
        self.wait_for_writes()?;
        if self.cfg.is_direct() && !self.buf.is_empty() {
            self.write_padded_tail()?;
        }
        if !self.keep_allocation {
            self.trim_preallocation()?;
        }
        if sync {
            self.fdatasync()?;
        }
        if self.cfg.mode == EffectiveMode::Fadvise {
            // Whatever is left of the file in the cache goes now.
            if !sync {
                let fd = self.file.as_raw_fd();
                sys::sync_file_range(fd, 0, 0, true)
                    .map_err(|e| io_err(&self.path, 0, "sync_file_range failed", e))?;
            }
            let _ = sys::fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        self.finished = true;
        Ok(self.len())
    }

    fn check_not_failed(&self) -> Result<()> {
        match self.failed_at {
            None => Ok(()),
            Some(at) => Err(Error::io(
                std::io::Error::other("an earlier write failed"),
                "an earlier write of this file failed; the file is incomplete",
            )
            .with_file(&self.path)
            .with_offset(at)),
        }
    }

    /// Waits until every write handed to the kernel has completed; fails
    /// the file if any of them failed.
    fn wait_for_writes(&mut self) -> Result<()> {
        let Some(wb) = &mut self.behind else {
            return Ok(());
        };
        match wb.drain(&self.file, &self.path, &self.cfg) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail_file(e)),
        }
    }

    /// A direct write failed: waits for the writes still in flight, cuts the
    /// file back to the first failed offset (never below what `flush_all`
    /// already put there) and refuses any further use.
    fn fail_file(&mut self, err: Error) -> Error {
        let mut cut = err.offset().unwrap_or(self.pos);
        if let Some(wb) = &mut self.behind {
            let _ = wb.drain(&self.file, &self.path, &self.cfg);
            cut = cut.min(wb.failed_at().unwrap_or(u64::MAX));
        }
        let cut = cut.max(self.flushed_len);
        if let Err(e) = self.truncate(cut) {
            log::warn!(
                "quietio: cannot cut {} back to {cut} bytes after a failed write: {e}",
                self.path.display()
            );
        }
        self.failed_at = Some(cut);
        self.preallocated_to = self.preallocated_to.min(cut);
        err
    }

    /// `ftruncate`, through the fault layer when there is one.
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        if let Some(t) = &self.tracked {
            t.admit(OpKind::Truncate)?;
        }
        sys::ftruncate(self.file.as_raw_fd(), len)?;
        if let Some(t) = &self.tracked {
            t.set_len(len);
        }
        Ok(())
    }

    fn fdatasync(&mut self) -> Result<()> {
        let t = Instant::now();
        let synced = match &self.tracked {
            Some(tr) => tr
                .before_sync()
                .and_then(|()| sys::fdatasync(self.file.as_raw_fd())),
            None => sys::fdatasync(self.file.as_raw_fd()),
        };
        if let Some(tr) = &self.tracked {
            tr.synced(synced.is_ok());
        }
        synced.map_err(|e| io_err(&self.path, self.len(), "fdatasync failed", e))?;
        self.cfg.stats.record_sync(self.cfg.class, t.elapsed());
        Ok(())
    }

    /// Direct mode: writes the partial last block zero-padded at its aligned
    /// offset (it stays in the buffer and is rewritten when more data comes),
    /// then truncates the file to its true length.
    fn write_padded_tail(&mut self) -> Result<()> {
        let len = self.len();
        if self.segment.is_some() {
            let padded_end = self.len().next_multiple_of(self.cfg.align() as u64);
            self.preallocate(padded_end);
        }
        let t = Instant::now();
        let padded = self.buf.padded();
        let n = padded.len();
        self.cfg.throttle(n);
        if let Err(e) = write_fully(
            &self.file,
            &self.path,
            &self.cfg,
            self.tracked.as_ref(),
            padded,
            self.pos,
        ) {
            return Err(self.fail_file(e));
        }
        self.cfg.stats.record_write(self.cfg.class, n, t.elapsed());
        if self.segment.is_some() {
            // The padding lies inside the allocation, zeros like the rest
            // of it; `finish` cuts the file.
            return Ok(());
        }
        self.truncate(len)
            .map_err(|e| io_err(&self.path, len, "ftruncate to the true length failed", e))?;
        self.preallocated_to = self.preallocated_to.min(len);
        Ok(())
    }

    /// Writes the first `n` bytes of the buffer at `pos` and keeps the rest.
    fn write_out(&mut self, n: usize) -> Result<()> {
        if self.behind.is_some() {
            return self.start_write_behind(n);
        }
        self.preallocate(self.pos + n as u64);
        self.cfg.throttle(n);
        let t = Instant::now();
        let sent = self.cfg.sent_offset(self.pos);
        if let Err(e) = write_fully(
            &self.file,
            &self.path,
            &self.cfg,
            self.tracked.as_ref(),
            &self.buf.as_slice()[..n],
            sent,
        ) {
            // An injected fault is reported where the write belonged.
            let e = if sent != self.pos {
                e.with_offset(self.pos)
            } else {
                e
            };
            return Err(if self.cfg.is_direct() {
                self.fail_file(e)
            } else {
                e
            });
        }
        self.cfg.stats.record_write(self.cfg.class, n, t.elapsed());
        self.pos += n as u64;
        self.buf.consume_front(n);
        match self.cfg.mode {
            EffectiveMode::Fadvise => self.fadvise_progress()?,
            EffectiveMode::Buffered => self.writeback_progress()?,
            _ => {}
        }
        Ok(())
    }

    /// Buffered mode: once a chunk is written, start its write-back and go
    /// on. The kernel would otherwise leave the pages dirty until its
    /// flusher wakes up (seconds later) or a sync comes, and the final sync
    /// of a table or a sealed WAL would write all of it while its caller
    /// waits (RocksDB's `bytes_per_sync`).
    fn writeback_progress(&mut self) -> Result<()> {
        let chunk = self.cfg.writeback_chunk_size;
        if chunk == 0 || self.pos - self.kicked_upto < chunk {
            return Ok(());
        }
        self.start_writeback_of_unkicked()
    }

    /// Starts write-back, without waiting, of what was written since the
    /// last call.
    fn start_writeback_of_unkicked(&mut self) -> Result<()> {
        let (start, len) = (self.kicked_upto, self.pos - self.kicked_upto);
        sys::sync_file_range(self.file.as_raw_fd(), start, len, false)
            .map_err(|e| io_err(&self.path, start, "sync_file_range failed", e))?;
        self.kicked_upto = self.pos;
        Ok(())
    }

    /// Write-behind of a table file: allocates the file ahead of the writes
    /// (and extends its size). ext4 completes an O_DIRECT write that extends
    /// the file before it takes the next one, so appends get no further
    /// than one write at the device whatever the depth; writes inside the
    /// file's size run side by side. Measured on this project's virtio disk
    /// (fio, 1 MiB at depth 4): about 1.5x. If the file system cannot
    /// preallocate, the writer simply appends.
    fn preallocate(&mut self, upto: u64) {
        if !self.preallocating || upto <= self.preallocated_to {
            return;
        }
        // fallocate waits for every direct write in flight (ext4 drains
        // them before it changes the extent tree), so it must be rare: one
        // call per PREALLOCATE_STEP, about once per default-sized table.
        // Unwritten extents cost no data I/O, and what runs past the end is
        // trimmed before the file is synced.
        let end = match self.segment {
            Some(s) => upto.div_ceil(s) * s,
            None => upto + PREALLOCATE_STEP,
        };
        let from = self.preallocated_to;
        let allocated = match &self.tracked {
            Some(t) => t
                .admit(OpKind::Fallocate)
                .and_then(|()| sys::fallocate(self.file.as_raw_fd(), from, end - from)),
            None => sys::fallocate(self.file.as_raw_fd(), from, end - from),
        };
        match allocated {
            Ok(()) => {
                if let Some(t) = &self.tracked {
                    t.extended(end);
                }
                self.preallocated_to = end
            }
            Err(e) => {
                log::debug!(
                    "quietio: cannot preallocate {} ({e}); appending instead",
                    self.path.display()
                );
                self.preallocating = false;
            }
        }
    }

    /// Cuts the file back to the bytes accepted once preallocation has run
    /// past them, so the size is the true length before any sync.
    fn trim_preallocation(&mut self) -> Result<()> {
        let len = self.len();
        if self.preallocated_to > len {
            self.truncate(len)
                .map_err(|e| io_err(&self.path, len, "ftruncate to the true length failed", e))?;
            self.preallocated_to = len;
        }
        Ok(())
    }

    /// Write-behind: hands the first `n` bytes of the buffer to the kernel
    /// and goes on filling another buffer (the rest moved to its front).
    fn start_write_behind(&mut self, n: usize) -> Result<()> {
        self.preallocate(self.pos + n as u64);
        let wb = self.behind.as_mut().expect("write-behind is on");
        let result = wb
            .next_buffer(&self.file, &self.path, &self.cfg)
            .and_then(|mut next| {
                next.extend_from(&self.buf.as_slice()[n..]);
                let full = std::mem::replace(&mut self.buf, next);
                wb.start(&self.file, &self.path, &self.cfg, full, n, self.pos)
            });
        match result {
            Ok(()) => {
                self.pos += n as u64;
                Ok(())
            }
            Err(e) => Err(self.fail_file(e)),
        }
    }

    /// Fadvise mode: once a chunk is written, start its write-back; wait for
    /// the previous chunk's write-back and drop its pages. Pipelining one
    /// chunk keeps the writer from waiting on the device for every chunk.
    fn fadvise_progress(&mut self) -> Result<()> {
        let chunk = self.cfg.fadvise_chunk_size.max(1);
        if self.pos - self.kicked_upto < chunk {
            return Ok(());
        }
        let fd = self.file.as_raw_fd();
        if self.kicked_upto > self.dropped_upto {
            let (start, len) = (self.dropped_upto, self.kicked_upto - self.dropped_upto);
            sys::sync_file_range(fd, start, len, true)
                .map_err(|e| io_err(&self.path, start, "sync_file_range failed", e))?;
            sys::fadvise(fd, start, len, libc::POSIX_FADV_DONTNEED)
                .map_err(|e| io_err(&self.path, start, "POSIX_FADV_DONTNEED failed", e))?;
            self.dropped_upto = self.kicked_upto;
        }
        self.start_writeback_of_unkicked()
    }
}

impl Drop for SeqWriter {
    /// A segment-allocated writer dropped without `finish` (a database
    /// closed after sealing its WAL) still leaves its file at the length
    /// written; nothing is synced. A failed or finished writer is left alone.
    fn drop(&mut self) {
        if self.segment.is_none()
            || self.finished
            || self.failed_at.is_some()
            || self.keep_allocation
        {
            return;
        }
        if self.wait_for_writes().is_err() {
            return;
        }
        let on_disk = self.pos.max(self.flushed_len);
        if self.preallocated_to > on_disk {
            if let Err(e) = self.truncate(on_disk) {
                log::debug!(
                    "quietio: cannot cut {} to {on_disk} bytes: {e}",
                    self.path.display()
                );
            }
        }
    }
}

/// Writes all of `data` at `offset`, retrying short writes. In direct mode a
/// short write is resumed from the last aligned boundary it reached. With
/// a fault layer (`tracked`), each write system call is first offered to
/// it (which may fail it or cut it short) and what was written is
/// recorded in its shadow model.
pub(crate) fn write_fully(
    file: &File,
    path: &Path,
    cfg: &FileConfig,
    tracked: Option<&Tracked>,
    data: &[u8],
    offset: u64,
) -> Result<()> {
    let fd = file.as_raw_fd();
    let align = cfg.align();
    let mut done = 0usize;
    while done < data.len() {
        let at = offset + done as u64;
        let bounce;
        let rest = if cfg.is_direct() {
            bounce = page_aligned(&data[done..], cfg, path, at)?;
            let rest = bounce.as_ref().map_or(&data[done..], |b| b.as_slice());
            note_direct_io(rest.as_ptr(), rest.len(), align);
            rest
        } else {
            &data[done..]
        };
        let rest = match tracked.map(|t| t.write_verdict(rest.len())) {
            None | Some(WriteVerdict::Full) => Ok(rest),
            Some(WriteVerdict::Short(n)) => {
                // A direct transfer stops on an aligned boundary.
                let n = if cfg.is_direct() {
                    n / align * align
                } else {
                    n
                };
                if n == 0 {
                    Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
                } else {
                    Ok(&rest[..n])
                }
            }
            Some(WriteVerdict::Fail(errno)) => Err(std::io::Error::from_raw_os_error(errno)),
        };
        let r = rest.and_then(|rest| match cfg.mode {
            EffectiveMode::DontCache => sys::pwritev2(fd, rest, at, sys::RWF_DONTCACHE),
            _ => sys::pwrite(fd, rest, at),
        });
        let n = r.map_err(|e| io_err(path, at, &format!("write failed ({} mode)", cfg.mode), e))?;
        if let Some(t) = tracked {
            // `rest` may be a bounce copy; the bytes are the same.
            t.wrote(at, &data[done..done + n]);
        }
        if n == 0 {
            return Err(io_err(
                path,
                at,
                "write made no progress",
                std::io::Error::from(std::io::ErrorKind::WriteZero),
            ));
        }
        done += n;
        if cfg.is_direct() && !done.is_multiple_of(align) && done < data.len() {
            done = done / align * align;
        }
    }
    Ok(())
}

/// `None` when `data` starts on a page boundary, else a page-aligned copy:
/// after a short direct transfer the rest of a buffer starts inside a page,
/// and the kernel is handed a copy rather than a slow address. Short direct
/// transfers are rare (end of file, a full disk), so the copy costs nothing
/// in the common case.
fn page_aligned(data: &[u8], cfg: &FileConfig, path: &Path, at: u64) -> Result<Option<AlignedBuf>> {
    if (data.as_ptr() as usize).is_multiple_of(direct_io_align(cfg.mem_align)) {
        return Ok(None);
    }
    let mut b = cfg
        .buffer(data.len())
        .map_err(|e| e.with_file(path).with_offset(at))?;
    b.extend_from(data);
    Ok(Some(b))
}

/// Reads into all of `buf` from `offset`, retrying short reads; returns
/// fewer bytes only at end of file. `flags` go to `preadv2` (0 = `pread`).
/// In direct mode a read that ends off an alignment boundary has hit end of
/// file, so the loop stops there.
pub(crate) fn read_fully(
    file: &File,
    path: &Path,
    cfg: &FileConfig,
    buf: &mut [u8],
    offset: u64,
    flags: i32,
) -> Result<usize> {
    let fd = file.as_raw_fd();
    let mut got = 0usize;
    while got < buf.len() {
        let at = offset + got as u64;
        // A direct read resumed inside a page goes through a page-aligned
        // copy (see `page_aligned`).
        let mut bounce = if cfg.is_direct() {
            page_aligned(&buf[got..], cfg, path, at)?
        } else {
            None
        };
        let dst: &mut [u8] = match bounce.as_mut() {
            Some(b) => b.full_mut(),
            None => &mut buf[got..],
        };
        if cfg.is_direct() {
            note_direct_io(dst.as_ptr(), dst.len(), cfg.align());
        }
        let r = if flags == 0 {
            sys::pread(fd, dst, at)
        } else {
            sys::preadv2(fd, dst, at, flags)
        };
        let n = r.map_err(|e| io_err(path, at, &format!("read failed ({} mode)", cfg.mode), e))?;
        if let Some(b) = &bounce {
            buf[got..got + n].copy_from_slice(&b.full()[..n]);
        }
        if n == 0 {
            break;
        }
        got += n;
        if cfg.is_direct() && !got.is_multiple_of(cfg.align()) {
            break;
        }
    }
    Ok(got)
}

/// Reads a file front to back in one access mode, with its own readahead.
///
/// Direct mode reads aligned chunks of `readahead_size` (O_DIRECT gets no
/// kernel readahead); dontcache reads with RWF_DONTCACHE; fadvise drops the
/// pages behind the cursor as it goes; buffered asks the kernel for
/// sequential readahead. With the io_uring engine a direct reader keeps up
/// to `io_depth` chunk reads in flight ahead of the chunk being consumed.
pub struct SeqReader {
    file: File,
    path: PathBuf,
    cfg: FileConfig,
    buf: AlignedBuf,
    /// Read-ahead (direct mode with io_uring).
    ahead: Option<ReadAhead>,
    /// A read-ahead read failed at this offset: the chunks after it must
    /// not be handed out as if the file went on from there.
    failed_at: Option<u64>,
    /// Bytes of `buf` already handed out.
    consumed: usize,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    file_len: u64,
    dropped_upto: u64,
    /// Page-cache residency of the last two chunks, taken just before each
    /// was read; `None` unless [`SeqReader::track_page_cache`] is on.
    residency: Option<[ChunkResidency; 2]>,
}

/// Which pages of one chunk `[offset, offset + pages * page)` were cached.
#[derive(Default)]
struct ChunkResidency {
    offset: u64,
    pages: Vec<bool>,
}

impl ChunkResidency {
    /// Whether any page of `[offset, offset + len)` inside this chunk was
    /// cached.
    fn any_cached(&self, offset: u64, len: u64, page: u64) -> bool {
        let end = self.offset + self.pages.len() as u64 * page;
        let (lo, hi) = (offset.max(self.offset), (offset + len).min(end));
        if lo >= hi {
            return false;
        }
        let first = ((lo - self.offset) / page) as usize;
        let last = ((hi - 1 - self.offset) / page) as usize;
        self.pages[first..=last].iter().any(|&c| c)
    }
}

impl SeqReader {
    /// Opens `path` for reading front to back in `cfg.mode` (`Mmap` reads
    /// buffered: a scan gains nothing from a mapping). Reads stop at the
    /// length the file has now. Fails with `InvalidArgument` when
    /// `readahead_size` is not a positive multiple of the alignment, and
    /// with `Io` when the file cannot be opened or its length read.
    pub fn open(path: &Path, cfg: FileConfig) -> Result<SeqReader> {
        let align = cfg.align();
        let chunk = cfg.readahead_size;
        if chunk == 0 || !chunk.is_multiple_of(align) {
            return Err(Error::invalid(format!(
                "readahead size must be a positive multiple of the direct I/O alignment {align}, got {chunk}"
            ))
            .with_file(path));
        }
        let mode = if cfg.mode == EffectiveMode::Mmap {
            EffectiveMode::Buffered
        } else {
            cfg.mode
        };
        let (file, file_len) = open_for_reading(path, &cfg, mode)?;
        if mode == EffectiveMode::Buffered {
            let _ = sys::fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
        }
        let buf = cfg.buffer(chunk).map_err(|e| e.with_file(path))?;
        let ahead = if cfg.uses_uring() && file_len > 0 {
            match ReadAhead::new(cfg.io_depth, chunk, file_len) {
                Ok(ra) => Some(ra),
                Err(e) => {
                    log::warn!(
                        "quietio: no io_uring ring for {} ({e}); reading it with blocking calls",
                        path.display()
                    );
                    None
                }
            }
        } else {
            None
        };
        Ok(SeqReader {
            file,
            path: path.to_path_buf(),
            cfg,
            buf,
            ahead,
            failed_at: None,
            consumed: 0,
            buf_offset: 0,
            file_len,
            dropped_upto: 0,
            residency: None,
        })
    }

    /// From now on, note before reading each chunk which of its pages were
    /// already in the page cache (put there by someone else's reads), so
    /// [`SeqReader::was_cached`] can tell hot data from cold. Only a direct
    /// reader can: a buffered one's own readahead fills the cache ahead of
    /// the check. Returns whether tracking is on.
    pub fn track_page_cache(&mut self) -> bool {
        if self.cfg.mode == EffectiveMode::Direct {
            self.residency.get_or_insert_with(Default::default);
            if let Some(ra) = &mut self.ahead {
                ra.track_residency();
            }
            return true;
        }
        false
    }

    /// Whether any page of `[offset, offset + len)` was in the page cache
    /// just before this reader read it. Answers for the last two chunks
    /// read (enough for any block up to a chunk in size); false otherwise,
    /// and always false without [`SeqReader::track_page_cache`].
    pub fn was_cached(&self, offset: u64, len: u64) -> bool {
        let page = sys::page_size() as u64;
        self.residency
            .as_ref()
            .is_some_and(|r| r.iter().any(|c| c.any_cached(offset, len, page)))
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length in bytes when it was opened; reading ends there.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Chunk reads handed to the kernel and not yet taken (always 0 without
    /// read-ahead).
    pub fn reads_in_flight(&self) -> usize {
        self.ahead.as_ref().map_or(0, ReadAhead::in_flight)
    }

    /// Chunks requested ahead of the reader and not yet handed out, whether
    /// their reads have completed or not (always 0 without read-ahead). Set
    /// by the reader alone, so unlike [`SeqReader::reads_in_flight`] it does
    /// not depend on when the device answers.
    pub fn reads_requested_ahead(&self) -> usize {
        self.ahead.as_ref().map_or(0, ReadAhead::requested_ahead)
    }

    /// The most chunk reads this reader ever had in flight at once (always
    /// 0 without read-ahead).
    pub fn most_reads_in_flight(&self) -> usize {
        self.ahead.as_ref().map_or(0, ReadAhead::most_in_flight)
    }

    /// File offset of the next byte `read` returns.
    pub fn position(&self) -> u64 {
        self.buf_offset + self.consumed as u64
    }

    /// Reads up to `out.len()` bytes; 0 means end of file.
    pub fn read(&mut self, out: &mut [u8]) -> Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if self.consumed == self.buf.len() && !self.fill()? {
            return Ok(0);
        }
        let avail = &self.buf.as_slice()[self.consumed..];
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consumed += n;
        Ok(n)
    }

    /// Fills `out` completely or fails with an error naming the offset.
    pub fn read_exact(&mut self, out: &mut [u8]) -> Result<()> {
        let start = self.position();
        let mut done = 0;
        while done < out.len() {
            let n = self.read(&mut out[done..])?;
            if n == 0 {
                return Err(Error::io(
                    std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                    format!("file ended after {} of {} bytes", done, out.len()),
                )
                .with_file(&self.path)
                .with_offset(start));
            }
            done += n;
        }
        Ok(())
    }

    /// Loads the next chunk; false at end of file.
    fn fill(&mut self) -> Result<bool> {
        if self.ahead.is_some() {
            return self.fill_ahead();
        }
        self.buf_offset += self.buf.len() as u64;
        self.buf.clear();
        self.consumed = 0;
        if self.buf_offset >= self.file_len {
            return Ok(false);
        }
        let fd = self.file.as_raw_fd();
        let mut want = self.buf.capacity();
        if !self.cfg.is_direct() {
            want = want.min((self.file_len - self.buf_offset) as usize);
        }
        if let Some(r) = &mut self.residency {
            // Only the part of the chunk inside the file can be mapped. A
            // failed probe counts as cold: it only costs a warming.
            let len = (want as u64).min(self.file_len - self.buf_offset);
            r.swap(0, 1);
            r[1] = ChunkResidency {
                offset: self.buf_offset,
                pages: sys::resident_pages(fd, self.buf_offset, len).unwrap_or_default(),
            };
        }
        self.cfg.throttle(want);
        let t = Instant::now();
        let flags = if self.cfg.mode == EffectiveMode::DontCache {
            sys::RWF_DONTCACHE
        } else {
            0
        };
        let got = read_fully(
            &self.file,
            &self.path,
            &self.cfg,
            &mut self.buf.full_mut()[..want],
            self.buf_offset,
            flags,
        )?;
        self.cfg.stats.record_read(self.cfg.class, got, t.elapsed());
        self.buf.set_len(got);
        if self.cfg.mode == EffectiveMode::Fadvise && self.buf_offset > self.dropped_upto {
            // Drop what the cursor has passed; the chunk just read is kept
            // until it has been consumed.
            let len = self.buf_offset - self.dropped_upto;
            let _ = sys::fadvise(fd, self.dropped_upto, len, libc::POSIX_FADV_DONTNEED);
            self.dropped_upto = self.buf_offset;
        }
        Ok(got > 0)
    }
}

impl SeqReader {
    /// Read-ahead: takes the next chunk, already read or in flight.
    fn fill_ahead(&mut self) -> Result<bool> {
        if let Some(at) = self.failed_at {
            return Err(Error::io(
                std::io::Error::other("an earlier read failed"),
                "an earlier read of this file failed",
            )
            .with_file(&self.path)
            .with_offset(at));
        }
        let ra = self.ahead.as_mut().expect("read-ahead is on");
        self.consumed = 0;
        match ra.next_into(&self.file, &self.path, &self.cfg, &mut self.buf) {
            Ok(None) => {
                self.buf_offset += self.buf.len() as u64;
                self.buf.clear();
                Ok(false)
            }
            Ok(Some((offset, pages))) => {
                self.buf_offset = offset;
                if let Some(r) = &mut self.residency {
                    r.swap(0, 1);
                    r[1] = ChunkResidency { offset, pages };
                }
                Ok(!self.buf.is_empty())
            }
            Err(e) => {
                self.failed_at = Some(e.offset().unwrap_or(self.buf_offset));
                self.buf.clear();
                Err(e)
            }
        }
    }
}

impl Drop for SeqReader {
    fn drop(&mut self) {
        if self.cfg.mode == EffectiveMode::Fadvise {
            let _ = sys::fadvise(
                self.file.as_raw_fd(),
                self.dropped_upto,
                0,
                libc::POSIX_FADV_DONTNEED,
            );
        }
    }
}

impl std::io::Read for SeqReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        SeqReader::read(self, buf).map_err(|e| std::io::Error::other(e.to_string()))
    }
}

/// Positional reads of an immutable file in one access mode.
///
/// Buffered reads can attribute each read to a page-cache hit or miss:
/// with `cachestat(2)` over the exact range where the kernel has it, else
/// with `preadv2(RWF_NOWAIT)` first (success is a hit, EAGAIN a miss, and
/// the read is then done normally). Fadvise mode marks the file random (no
/// readahead) but drops nothing: pages of a randomly read file may be hot
/// for someone else.
pub struct RandomReader {
    file: File,
    path: PathBuf,
    cfg: FileConfig,
    len: u64,
    map: Option<sys::ReadOnlyMap>,
}

impl RandomReader {
    /// Opens `path` for positional reads in `cfg.mode`: direct opens it
    /// O_DIRECT, fadvise turns readahead off (`POSIX_FADV_RANDOM`), mmap
    /// maps the whole file (only for files nobody changes or shrinks while
    /// they are open, as table files are). Reads stop at the length the
    /// file has now. Fails with `Io` when the file cannot be opened, its
    /// length read or mapped.
    pub fn open(path: &Path, cfg: FileConfig) -> Result<RandomReader> {
        let (file, len) = open_for_reading(path, &cfg, cfg.mode)?;
        let fd = file.as_raw_fd();
        let mut map = None;
        match cfg.mode {
            EffectiveMode::Fadvise => {
                let _ = sys::fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM);
            }
            EffectiveMode::Mmap if len > 0 => {
                // Table files are immutable: see `sys::ReadOnlyMap` for why
                // that is what makes mapping them sound.
                let m = sys::ReadOnlyMap::whole_file(fd, len)
                    .map_err(|e| Error::io(e, "mmap failed").with_file(path))?;
                // Positional reads are random reads: no read-around. A
                // failure leaves the default policy, which is still correct.
                let _ = m.advise_random();
                map = Some(m);
            }
            _ => {}
        }
        Ok(RandomReader {
            file,
            path: path.to_path_buf(),
            cfg,
            len,
            map,
        })
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length in bytes when it was opened; reads end there.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The access mode the reader uses.
    pub fn mode(&self) -> EffectiveMode {
        self.cfg.mode
    }

    /// Starts reading `[offset, offset + len)` into the page cache in the
    /// background (`POSIX_FADV_WILLNEED`) where this reader reads through
    /// it; a no-op for direct and dontcache readers, which would not keep it.
    /// Returns whether the range is now being read into the page cache.
    pub fn prefetch(&self, offset: u64, len: u64) -> bool {
        matches!(
            self.mode(),
            EffectiveMode::Buffered | EffectiveMode::Mmap | EffectiveMode::Fadvise
        ) && sys::fadvise(
            self.file.as_raw_fd(),
            offset,
            len,
            libc::POSIX_FADV_WILLNEED,
        )
        .is_ok()
    }

    /// Reads up to `out.len()` bytes at `offset`; fewer only at end of file.
    pub fn read_at(&self, offset: u64, out: &mut [u8]) -> Result<usize> {
        self.read_at_counted(offset, out, self.cfg.attribute_cache_hits)
    }

    /// Reads exactly `len` bytes at `offset` without counting a page-cache
    /// hit or miss: for reads made on the engine's own behalf (warming, a
    /// table's metadata at open), so the hit counters keep describing what
    /// the user's reads found. Its bytes and time still count in the class.
    pub fn read_vec_unattributed(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        let n = self.read_at_counted(offset, &mut v, false)?;
        if n < len {
            return Err(Error::io(
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                format!(
                    "read of {len} bytes past end of file ({} bytes long)",
                    self.len
                ),
            )
            .with_file(&self.path)
            .with_offset(offset));
        }
        Ok(v)
    }

    fn read_at_counted(&self, offset: u64, out: &mut [u8], attribute: bool) -> Result<usize> {
        if out.is_empty() || offset >= self.len {
            return Ok(0);
        }
        let want = out.len().min((self.len - offset) as usize);
        let out = &mut out[..want];
        let t = Instant::now();
        let n = match self.cfg.mode {
            EffectiveMode::Direct => self.read_direct(offset, out)?,
            EffectiveMode::Mmap => {
                let map = self.map.as_ref().expect("mapped when non-empty");
                // `offset + want <= self.len`, the mapped length (above).
                map.copy_to(offset as usize, out);
                want
            }
            EffectiveMode::DontCache => self.read_loop(offset, out, sys::RWF_DONTCACHE)?,
            EffectiveMode::Buffered | EffectiveMode::Fadvise => {
                if attribute {
                    self.read_attributed(offset, out)?
                } else {
                    self.read_loop(offset, out, 0)?
                }
            }
        };
        self.cfg.stats.record_read(self.cfg.class, n, t.elapsed());
        Ok(n)
    }

    /// Reads exactly `out.len()` bytes at `offset` or fails naming the offset.
    pub fn read_exact_at(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let n = self.read_at(offset, out)?;
        if n < out.len() {
            return Err(Error::io(
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                format!(
                    "read of {} bytes past end of file ({} bytes long)",
                    out.len(),
                    self.len
                ),
            )
            .with_file(&self.path)
            .with_offset(offset));
        }
        Ok(())
    }

    /// Reads exactly `len` bytes at `offset` into a new vector.
    pub fn read_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read_exact_at(offset, &mut v)?;
        Ok(v)
    }

    fn read_loop(&self, offset: u64, out: &mut [u8], flags: i32) -> Result<usize> {
        read_fully(&self.file, &self.path, &self.cfg, out, offset, flags)
    }

    fn read_attributed(&self, offset: u64, out: &mut [u8]) -> Result<usize> {
        let fd = self.file.as_raw_fd();
        if self.cfg.cachestat {
            // Asking cachestat about the exact range has no side effects. A
            // RWF_NOWAIT read on a miss still starts the read-ahead I/O, and
            // on a fast (or host-cached) device that I/O can finish before
            // the kernel looks again, turning misses into "hits".
            if let Ok(cs) = sys::cachestat_range(fd, offset, out.len() as u64) {
                let page = sys::page_size() as u64;
                let first = offset / page;
                let last = (offset + out.len() as u64 - 1) / page;
                self.cfg
                    .stats
                    .record_hit(self.cfg.class, cs.cache > last - first);
                return self.read_loop(offset, out, 0);
            }
        }
        match sys::preadv2(fd, out, offset, sys::RWF_NOWAIT) {
            Ok(n) if n == out.len() => {
                self.cfg.stats.record_hit(self.cfg.class, true);
                Ok(n)
            }
            Ok(n) => {
                // Partly cached: the rest must come from the device.
                self.cfg.stats.record_hit(self.cfg.class, false);
                Ok(n + self.read_loop(offset + n as u64, &mut out[n..], 0)?)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.cfg.stats.record_hit(self.cfg.class, false);
                self.read_loop(offset, out, 0)
            }
            Err(e)
                if e.raw_os_error() == Some(libc::EOPNOTSUPP)
                    || e.raw_os_error() == Some(libc::EINVAL) =>
            {
                // RWF_NOWAIT not supported here: read without attribution.
                self.read_loop(offset, out, 0)
            }
            Err(e) => Err(io_err(&self.path, offset, "read failed (buffered mode)", e)),
        }
    }

    fn read_direct(&self, offset: u64, out: &mut [u8]) -> Result<usize> {
        let align = self.cfg.align() as u64;
        let start = offset / align * align;
        let end = (offset + out.len() as u64).next_multiple_of(align);
        let span = (end - start) as usize;
        let mut buf = AlignedBuf::for_direct_io_once(span, self.cfg.mem_align, self.cfg.align())
            .map_err(|e| e.with_file(&self.path))?;
        let got = read_fully(&self.file, &self.path, &self.cfg, buf.full_mut(), start, 0)?;
        let skip = (offset - start) as usize;
        let avail = got.saturating_sub(skip).min(out.len());
        out[..avail].copy_from_slice(&buf.full()[skip..skip + avail]);
        Ok(avail)
    }
}
