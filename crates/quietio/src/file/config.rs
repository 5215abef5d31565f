//! What a file handle knows besides its path ([`FileConfig`]: class, mode,
//! alignment, buffer sizes, where it is counted and throttled), and
//! creating or opening a file with the flags of its mode, through the
//! fault layer when one is installed.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use crate::aligned::AlignedBuf;
use crate::class::{EffectiveMode, IoClass};
use crate::error::{Error, Result};
use crate::fault::{FaultLayer, OpKind, Tracked};
use crate::rate::RateLimiter;
use crate::stats::IoStats;
use crate::uring::Engine;

/// Everything a file handle needs to know besides its path; built by
/// [`crate::IoEnv`] from the probe and the options.
#[derive(Debug, Clone)]
pub struct FileConfig {
    /// The class the file's I/O is counted under (and throttled for, when
    /// [`limiter`](Self::limiter) is set).
    pub class: IoClass,
    /// The access mode: it decides the open flags and the system calls.
    /// `Mmap` is for [`RandomReader`](crate::RandomReader) only:
    /// [`SeqWriter`](crate::SeqWriter) refuses it and
    /// [`SeqReader`](crate::SeqReader) reads buffered.
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

    /// Checks that `size` (the file's `what`: its write buffer, its
    /// readahead) is a positive multiple of [`align`](Self::align), as a
    /// direct file's buffers must be; `InvalidArgument` naming `path` if
    /// not.
    pub(crate) fn check_buffer_size(&self, what: &str, size: usize, path: &Path) -> Result<()> {
        let align = self.align();
        if size == 0 || !size.is_multiple_of(align) {
            return Err(Error::invalid(format!(
                "{what} size must be a positive multiple of the direct I/O alignment {align}, got {size}"
            ))
            .with_file(path));
        }
        Ok(())
    }

    /// A buffer of `size` bytes for this file: page-aligned, its size a
    /// multiple of the offset alignment.
    pub(crate) fn buffer(&self, size: usize) -> Result<AlignedBuf> {
        AlignedBuf::for_direct_io(size, self.mem_align, self.align())
    }

    pub(super) fn is_direct(&self) -> bool {
        self.mode == EffectiveMode::Direct
    }

    /// Direct files are pipelined with io_uring.
    pub(super) fn uses_uring(&self) -> bool {
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

pub(super) fn open_flags(mode: EffectiveMode) -> i32 {
    libc::O_CLOEXEC
        | if mode == EffectiveMode::Direct {
            libc::O_DIRECT
        } else {
            0
        }
}

/// Opens `path` read-only with the flags of `mode`; returns it and its length.
pub(super) fn open_for_reading(
    path: &Path,
    cfg: &FileConfig,
    mode: EffectiveMode,
) -> Result<(File, u64)> {
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
