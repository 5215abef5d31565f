//! The system-call loops every file type shares: writing or reading a
//! whole range while retrying short transfers (a misaligned direct
//! transfer goes through a page-aligned copy), and the I/O error that
//! names the file and the offset.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use super::config::FileConfig;
use crate::aligned::{direct_io_align, note_direct_io, AlignedBuf};
use crate::class::EffectiveMode;
use crate::error::{Error, Result};
use crate::fault::{Tracked, WriteVerdict};
use crate::sys;

pub(crate) fn io_err(path: &Path, offset: u64, what: &str, e: std::io::Error) -> Error {
    Error::io(e, what.to_string())
        .with_file(path)
        .with_offset(offset)
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
