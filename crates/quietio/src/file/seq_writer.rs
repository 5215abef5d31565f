//! [`SeqWriter`]: writes a file front to back in one access mode, with
//! write-behind through io_uring for direct files, preallocation for
//! segment files, and a failed write failing the whole file.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::config::{open_flags, FileConfig};
use super::raw::{io_err, write_fully};
use super::write_behind::WriteBehind;
use super::writeback_start::WritebackStarter;
use crate::aligned::AlignedBuf;
use crate::class::{EffectiveMode, IoClass};
use crate::error::{Error, Result};
use crate::fault::{OpKind, Tracked};
use crate::sys;
use crate::uring::Engine;

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
    /// Buffered mode with io_uring: starts write-back on the kernel's
    /// worker threads instead of this one (made at the first chunk; `None`
    /// before, or where no ring could be had).
    writeback: Option<WritebackStarter>,
    /// No ring could be had for `writeback`, or it broke: start write-back
    /// with blocking calls.
    writeback_blocking: bool,
    finished: bool,
    /// Declared last because fields are dropped in order: the
    /// write-behind's and the write-back starter's drops wait for every
    /// request they queued, and one queued but not yet handed to the kernel
    /// is submitted then; were the file closed first, it would go to a
    /// closed descriptor, or write table bytes into whatever file another
    /// thread had just opened under the same number.
    file: File,
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
        let size = cfg.write_buffer_size;
        cfg.check_buffer_size("write buffer", size, path)?;
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
            writeback: None,
            writeback_blocking: false,
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
        // The first segment is allocated by the first write, not here: a
        // log that receives nothing (the WAL opened after the last flush of
        // an idle database) then takes no space on disk.
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
        self.wait_for_writeback();
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
        self.wait_for_writeback();
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
        let fd = self.file.as_raw_fd();
        let synced = Tracked::around_sync(self.tracked.as_ref(), || sys::fdatasync(fd));
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
    /// last call. Buffered with io_uring, a kernel worker thread does it
    /// (see `writeback_start`); otherwise this thread.
    fn start_writeback_of_unkicked(&mut self) -> Result<()> {
        let (start, len) = (self.kicked_upto, self.pos - self.kicked_upto);
        let fd = self.file.as_raw_fd();
        if !self.start_writeback_on_kernel_thread(fd, start, len) {
            sys::sync_file_range(fd, start, len, false)
                .map_err(|e| io_err(&self.path, start, "sync_file_range failed", e))?;
        }
        self.kicked_upto = self.pos;
        Ok(())
    }

    /// Hands the start of write-back to io_uring; false when this writer
    /// has no ring for it (another mode, another engine, a chunk of 4 GiB
    /// or more, or a ring that could not be had or broke), and the caller
    /// starts it itself.
    fn start_writeback_on_kernel_thread(&mut self, fd: RawFd, start: u64, len: u64) -> bool {
        if self.cfg.mode != EffectiveMode::Buffered
            || self.cfg.engine != Engine::Uring
            || self.writeback_blocking
            || len > u64::from(u32::MAX)
        {
            return false;
        }
        if self.writeback.is_none() {
            match WritebackStarter::new() {
                Ok(w) => self.writeback = Some(w),
                Err(e) => {
                    self.give_up_writeback_ring("no io_uring ring", e);
                    return false;
                }
            }
        }
        let started = match &mut self.writeback {
            Some(w) => w.start(fd, start, len),
            None => return false,
        };
        match started {
            Ok(()) => true,
            Err(e) => {
                self.give_up_writeback_ring("io_uring failed", e);
                false
            }
        }
    }

    /// Waits for the write-back requests handed to io_uring: before a
    /// sync, at the end of the file, and before the file is closed (a
    /// request still queued names the file by its descriptor).
    fn wait_for_writeback(&mut self) {
        let drained = match &mut self.writeback {
            Some(w) => w.drain(),
            None => return,
        };
        if let Err(e) = drained {
            self.give_up_writeback_ring("waiting on io_uring failed", e);
        }
    }

    /// From now on this writer starts write-back with blocking calls.
    fn give_up_writeback_ring(&mut self, what: &str, e: std::io::Error) {
        log::debug!(
            "quietio: {what} ({e}) starting write-back of {}; starting it with blocking calls",
            self.path.display()
        );
        self.writeback = None;
        self.writeback_blocking = true;
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
        self.wait_for_writeback();
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
