//! How much of a file sits in the page cache: `cachestat(2)` where the
//! kernel has it (Linux 6.5+), else `mincore` on a mapping of the file.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{Error, Result};
use crate::sys;

/// How a [`Residency`] was measured, which decides what it can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResidencyMethod {
    /// `cachestat(2)` (Linux 6.5+): cached, dirty, write-back and eviction
    /// counts, without touching the file's pages.
    Cachestat,
    /// `mincore(2)` on a read-only mapping of the file: cached pages only,
    /// on any kernel.
    Mincore,
}

/// Page-cache residency of one file, in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Residency {
    /// Pages the file spans.
    pub total_pages: u64,
    /// Pages of the file in the page cache.
    pub cached: u64,
    /// Cached pages not yet written back. The dirty, write-back and
    /// eviction counts are only known with [`ResidencyMethod::Cachestat`].
    pub dirty: Option<u64>,
    /// Pages being written back now.
    pub writeback: Option<u64>,
    /// Pages evicted from the cache that the kernel still remembers (it
    /// keeps a shadow entry to detect a refault).
    pub evicted: Option<u64>,
    /// Of the evicted pages, those evicted recently enough that reading
    /// them again would count as a refault of the working set.
    pub recently_evicted: Option<u64>,
    /// How these numbers were measured.
    pub method: ResidencyMethod,
}

impl Residency {
    /// Fraction of the file's pages that are cached, 0..=1 (0 for an empty file).
    pub fn fraction(&self) -> f64 {
        if self.total_pages == 0 {
            0.0
        } else {
            (self.cached as f64 / self.total_pages as f64).min(1.0)
        }
    }
}

/// Residency of the file at `path`, with `cachestat` where the kernel has
/// it, else `mincore`. Fails with `Io` when the file cannot be opened or
/// measured.
pub fn residency(path: &Path) -> Result<Residency> {
    let f = File::open(path)
        .map_err(|e| Error::io(e, "cannot open file for residency").with_file(path))?;
    residency_of(&f).map_err(|e| e.with_file(path))
}

/// Residency of an open file.
pub(crate) fn residency_of(file: &File) -> Result<Residency> {
    let len = file
        .metadata()
        .map_err(|e| Error::io(e, "cannot stat file"))?
        .len();
    let page = sys::page_size() as u64;
    let total_pages = len.div_ceil(page);
    match sys::cachestat(file.as_raw_fd()) {
        Ok(cs) => Ok(Residency {
            total_pages,
            cached: cs.cache,
            dirty: Some(cs.dirty),
            writeback: Some(cs.writeback),
            evicted: Some(cs.evicted),
            recently_evicted: Some(cs.recently_evicted),
            method: ResidencyMethod::Cachestat,
        }),
        Err(_) => mincore_of(file, len),
    }
}

fn mincore_of(file: &File, len: u64) -> Result<Residency> {
    let (cached, total_pages) =
        sys::mincore_resident(file.as_raw_fd(), len).map_err(|e| Error::io(e, "mincore failed"))?;
    Ok(Residency {
        total_pages,
        cached,
        dirty: None,
        writeback: None,
        evicted: None,
        recently_evicted: None,
        method: ResidencyMethod::Mincore,
    })
}

/// Residency via `mincore` only (to cross-check cachestat, and for kernels
/// without it).
pub fn residency_mincore(path: &Path) -> Result<Residency> {
    let f = File::open(path)
        .map_err(|e| Error::io(e, "cannot open file for residency").with_file(path))?;
    let len = f
        .metadata()
        .map_err(|e| Error::io(e, "cannot stat file").with_file(path))?
        .len();
    mincore_of(&f, len).map_err(|e| e.with_file(path))
}

/// Writes back and drops a file's cached pages, so a test or the doctor can
/// start each case from a cold cache without dropping every cache on the
/// machine.
pub fn evict_file(path: &Path) -> Result<()> {
    let f =
        File::open(path).map_err(|e| Error::io(e, "cannot open file to evict").with_file(path))?;
    let fd = f.as_raw_fd();
    sys::fdatasync(fd).map_err(|e| Error::io(e, "fdatasync failed").with_file(path))?;
    sys::fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED)
        .map_err(|e| Error::io(e, "POSIX_FADV_DONTNEED failed").with_file(path))
}
