//! [`SeqReader`]: reads a file front to back in one access mode with its
//! own readahead (read-ahead through io_uring for direct files), and can
//! tell which of the bytes it handed out were in the page cache.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::config::{open_for_reading, FileConfig};
use super::raw::read_fully;
use super::read_ahead::ReadAhead;
use crate::aligned::AlignedBuf;
use crate::class::EffectiveMode;
use crate::error::{Error, Result};
use crate::sys;

/// Reads a file front to back in one access mode, with its own readahead.
///
/// Direct mode reads aligned chunks of `readahead_size` (O_DIRECT gets no
/// kernel readahead); dontcache reads with RWF_DONTCACHE; fadvise drops the
/// pages behind the cursor as it goes; buffered asks the kernel for
/// sequential readahead. With the io_uring engine a direct reader keeps up
/// to `io_depth` chunk reads in flight ahead of the chunk being consumed.
pub struct SeqReader {
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
    /// Declared last because fields are dropped in order: the read-ahead's
    /// drop waits for every read it queued, and a read queued but not yet
    /// handed to the kernel is submitted then; were the file closed first,
    /// that read would go to a closed descriptor, or to whatever file
    /// another thread had just opened under the same number.
    file: File,
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
        let chunk = cfg.readahead_size;
        cfg.check_buffer_size("readahead", chunk, path)?;
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
