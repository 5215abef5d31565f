//! [`RandomReader`]: positional reads of an immutable file in one access
//! mode, attributing buffered reads to page-cache hits or misses.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::config::{open_for_reading, FileConfig};
use super::raw::{io_err, read_fully};
use crate::aligned::AlignedBuf;
use crate::class::EffectiveMode;
use crate::error::{Error, Result};
use crate::sys;

/// Positional reads of an immutable file in one access mode.
///
/// Buffered reads can attribute each read to a page-cache hit or miss:
/// with `cachestat(2)` over the exact range where the kernel has it, else
/// with `preadv2(RWF_NOWAIT)` first (success is a hit, EAGAIN a miss, and
/// the read is then done normally). Buffered and fadvise modes both mark
/// the file random (`POSIX_FADV_RANDOM`: no kernel readahead), since a
/// positional read that misses should bring in its own pages and no more:
/// readahead around a point read fills the page cache with pages nobody
/// asked for, pushing out pages that are hot. A caller reading neighbouring
/// ranges asks for readahead itself ([`RandomReader::prefetch`]). Neither
/// mode drops anything: pages of a randomly read file may be hot for
/// someone else.
pub struct RandomReader {
    file: File,
    path: PathBuf,
    cfg: FileConfig,
    len: u64,
    map: Option<sys::ReadOnlyMap>,
}

impl RandomReader {
    /// Opens `path` for positional reads in `cfg.mode`: direct opens it
    /// O_DIRECT, buffered and fadvise turn readahead off
    /// (`POSIX_FADV_RANDOM`, for this open file only), mmap
    /// maps the whole file (only for files nobody changes or shrinks while
    /// they are open, as table files are). Reads stop at the length the
    /// file has now. Fails with `Io` when the file cannot be opened, its
    /// length read or mapped.
    pub fn open(path: &Path, cfg: FileConfig) -> Result<RandomReader> {
        let (file, len) = open_for_reading(path, &cfg, cfg.mode)?;
        let fd = file.as_raw_fd();
        let mut map = None;
        match cfg.mode {
            EffectiveMode::Buffered | EffectiveMode::Fadvise => {
                // A failure leaves the default policy, which is still
                // correct, only less frugal.
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
            return Err(self.past_end(offset, len));
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
            return Err(self.past_end(offset, out.len()));
        }
        Ok(())
    }

    /// The error of an exact read of `len` bytes at `offset` that the end
    /// of the file cut short.
    fn past_end(&self, offset: u64, len: usize) -> Error {
        Error::io(
            std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            format!(
                "read of {len} bytes past end of file ({} bytes long)",
                self.len
            ),
        )
        .with_file(&self.path)
        .with_offset(offset)
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
