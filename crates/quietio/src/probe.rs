//! What the kernel and file system under a directory really support,
//! found by trying it once and cached per directory.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::aligned::{note_direct_io, AlignedBuf};
use crate::error::{Error, Result};
use crate::sys;

/// O_DIRECT support of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectCaps {
    /// O_DIRECT opens and an aligned read works.
    pub supported: bool,
    /// Why not, when not.
    pub reason: Option<String>,
    /// Direct *writes* are safe (false on known-bad kernels even when reads work).
    pub writes_supported: bool,
    /// Why direct writes are refused although direct reads work (a kernel
    /// with a known O_DIRECT write bug, a read-only probe); `None` when
    /// they are allowed or when direct I/O does not work at all (then see
    /// [`reason`](Self::reason)).
    pub write_reason: Option<String>,
    /// Required alignment of buffer addresses.
    pub mem_align: usize,
    /// Required alignment of file offsets and lengths.
    pub offset_align: usize,
    /// Where the alignment came from: "statx", "logical_block_size" or "default".
    pub align_source: String,
}

/// RWF_DONTCACHE support of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DontCacheCaps {
    /// A `RWF_DONTCACHE` write and read-back worked on the probe file (only
    /// a read, for a read-only probe). Needs Linux 6.14+ and a file system
    /// that supports it: ext4 from 6.17, xfs from 6.15.
    pub supported: bool,
    /// Why not, when not: the errno and what the kernel or file system
    /// would need.
    pub reason: Option<String>,
}

/// Whether `fallocate` (mode 0: allocate and extend) works in a directory:
/// the mmap WAL needs it, and preallocated WAL segments use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallocateCaps {
    /// `fallocate` allocated blocks in the probe file.
    pub supported: bool,
    /// Why not, when it did not.
    pub reason: Option<String>,
}

/// The probed facts about one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// The probed directory, canonicalised (absolute, symbolic links
    /// resolved).
    pub dir: PathBuf,
    /// File-system type as the kernel names it (ext4, xfs, tmpfs, ...).
    pub filesystem: String,
    /// Block device name (vda, nvme0n1p1, loop0), when there is one.
    pub device: Option<String>,
    /// The kernel release (`uname -r`), e.g. `6.18.0`; direct writes are
    /// refused on releases known to corrupt them
    /// ([`known_bad_direct_writes`]).
    pub kernel: String,
    /// What O_DIRECT can do here, and with which alignment.
    pub direct: DirectCaps,
    /// Whether RWF_DONTCACHE works here.
    pub dontcache: DontCacheCaps,
    /// Whether fallocate(2) allocates blocks here (preallocated WAL
    /// segments, and the mmap WAL, which needs it).
    pub fallocate: FallocateCaps,
    /// The device's largest single request in KiB (sysfs
    /// `queue/max_sectors_kb`), when the directory is on a block device;
    /// direct sequential reads are capped to it
    /// ([`max_io_bytes`](Self::max_io_bytes)).
    pub max_sectors_kb: Option<u64>,
    /// The device's logical block size in bytes (sysfs
    /// `queue/logical_block_size`): the direct-I/O alignment when the
    /// kernel does not report one through statx (`STATX_DIOALIGN`).
    pub logical_block_size: Option<u64>,
    /// cachestat(2) works (else residency falls back to mincore).
    pub cachestat: bool,
}

impl Capabilities {
    /// `None` when direct I/O of this kind (write or read) can be used,
    /// else the reason it cannot.
    pub fn direct_unusable_reason(&self, write: bool) -> Option<String> {
        if !self.direct.supported {
            return Some(
                self.direct
                    .reason
                    .clone()
                    .unwrap_or_else(|| "O_DIRECT not supported".into()),
            );
        }
        if write && !self.direct.writes_supported {
            return Some(
                self.direct
                    .write_reason
                    .clone()
                    .unwrap_or_else(|| "O_DIRECT writes not safe here".into()),
            );
        }
        None
    }

    /// The largest single I/O the device takes, in bytes, if known.
    pub fn max_io_bytes(&self) -> Option<usize> {
        self.max_sectors_kb.map(|kb| (kb as usize) * 1024)
    }
}

fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<Capabilities>>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Capabilities>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Probes `dir` once per process and returns the cached result afterwards.
///
/// The probe creates a hidden file in `dir` (removed again), tries an
/// aligned O_DIRECT write and read-back and an `RWF_DONTCACHE` write and
/// read-back on it, and reads the file system type, the kernel release and
/// the device's limits. What does not work is recorded with the reason,
/// not returned as an error; errors are only for a `dir` that is missing,
/// not a directory, or not writable.
pub fn probe(dir: &Path) -> Result<Arc<Capabilities>> {
    let canon = canonical_dir(dir)?;
    if let Some(c) = cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&canon)
    {
        return Ok(c.clone());
    }
    let caps = Arc::new(probe_uncached(&canon)?);
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(canon, caps.clone());
    Ok(caps)
}

fn canonical_dir(dir: &Path) -> Result<PathBuf> {
    let meta = fs::metadata(dir).map_err(|e| {
        Error::io(e, "cannot use directory: it is missing or not accessible").with_file(dir)
    })?;
    if !meta.is_dir() {
        return Err(Error::invalid("not a directory").with_file(dir));
    }
    fs::canonicalize(dir).map_err(|e| Error::io(e, "cannot resolve directory").with_file(dir))
}

/// Removes the probe file however the probe ends.
struct ProbeFile(PathBuf);

impl Drop for ProbeFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Probes without consulting the cache (the doctor uses it to re-check).
pub fn probe_uncached(dir: &Path) -> Result<Capabilities> {
    let dir = canonical_dir(dir)?;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!(
        ".quietio-probe-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| {
            Error::io(e, "directory is not writable (cannot create a probe file)").with_file(&dir)
        })?;
    let _cleanup = ProbeFile(path.clone());
    // A full file system fails every probe write with ENOSPC, which must not
    // read as "O_DIRECT does not work here": say what it is, and cache
    // nothing (the next open, after space is freed, probes again).
    if let Err(e) = sys::pwrite(file.as_raw_fd(), &[0u8; 4096], 0) {
        if sys::is_out_of_space(&e) {
            return Err(Error::io(
                e,
                "the file system is full: cannot write a probe file to learn its I/O modes",
            )
            .with_file(&dir));
        }
    }

    let fallocate = probe_fallocate(&file);
    capabilities(dir, &file, fallocate, |filesystem, kernel, lbs| {
        let direct = probe_direct(&path, &file, filesystem, kernel, lbs);
        (direct, probe_dontcache(&file))
    })
}

/// Probes `dir` without writing to it, through `sample`, an existing file
/// in it: O_DIRECT and RWF_DONTCACHE *reads* are tried on that file, and
/// writes are reported unsupported (the caller opened read-only). Not
/// cached: a writable open of the same directory probes for real.
pub fn probe_read_only(dir: &Path, sample: &Path) -> Result<Capabilities> {
    let dir = canonical_dir(dir)?;
    let file = File::open(sample)
        .map_err(|e| Error::io(e, "cannot open a file to probe the directory").with_file(sample))?;
    let fallocate = FallocateCaps {
        supported: false,
        reason: Some("the directory was opened read-only".into()),
    };
    capabilities(dir, &file, fallocate, |filesystem, _kernel, lbs| {
        let mut direct = probe_direct_read(sample, &file, filesystem, lbs);
        direct.writes_supported = false;
        direct.write_reason = Some("the directory was opened read-only".into());
        (direct, probe_dontcache_read(&file))
    })
}

/// The facts every probe gathers, plus what `modes` finds out about
/// O_DIRECT and RWF_DONTCACHE (given file system, kernel and the device's
/// logical block size).
fn capabilities(
    dir: PathBuf,
    file: &File,
    fallocate: FallocateCaps,
    modes: impl FnOnce(&str, &str, Option<u64>) -> (DirectCaps, DontCacheCaps),
) -> Result<Capabilities> {
    let kernel = sys::kernel_release();
    let (filesystem, _) = filesystem_of(&dir, file);
    let dev = fs::metadata(&dir).map(|m| m.dev()).unwrap_or(0);
    let (device, queue) = block_device(dev);
    let read_queue = |name: &str| -> Option<u64> {
        let q = queue.as_ref()?;
        fs::read_to_string(q.join(name)).ok()?.trim().parse().ok()
    };
    let max_sectors_kb = read_queue("max_sectors_kb");
    let logical_block_size = read_queue("logical_block_size");

    let (direct, dontcache) = modes(&filesystem, &kernel, logical_block_size);
    let cachestat = match sys::cachestat(file.as_raw_fd()) {
        Ok(_) => true,
        Err(e) => {
            log::debug!("cachestat unavailable ({e}); residency will use mincore");
            false
        }
    };

    Ok(Capabilities {
        dir,
        filesystem,
        device,
        kernel,
        direct,
        dontcache,
        fallocate,
        max_sectors_kb,
        logical_block_size,
        cachestat,
    })
}

fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EINVAL) => "EINVAL".into(),
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP".into(),
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::EACCES) => "EACCES".into(),
        Some(libc::EIO) => "EIO".into(),
        Some(libc::ENOSPC) => "ENOSPC".into(),
        Some(n) => format!("errno {n}"),
        None => e.to_string(),
    }
}

/// Alignment O_DIRECT needs: (memory, offset, where it came from), or why
/// there is no direct I/O.
fn direct_alignment(
    file: &File,
    filesystem: &str,
    logical_block_size: Option<u64>,
) -> std::result::Result<(usize, usize, &'static str), String> {
    if matches!(filesystem, "tmpfs" | "ramfs" | "hugetlbfs") {
        // Linux 6.6+ accepts O_DIRECT on tmpfs, but the file's data lives in
        // the page cache itself: there is nothing to bypass.
        return Err(format!(
            "{filesystem} keeps file data in memory (its pages are the page cache), so O_DIRECT cannot bypass the cache there"
        ));
    }
    Ok(match sys::statx_dio_align(file.as_raw_fd()) {
        Some((0, 0)) => {
            return Err(format!(
                "{filesystem} reports no direct I/O support for regular files (statx STATX_DIOALIGN = 0)"
            ))
        }
        Some((m, o)) => (m as usize, o as usize, "statx"),
        None => match logical_block_size {
            Some(b) if b.is_power_of_two() => (b as usize, b as usize, "logical_block_size"),
            _ => (4096, 4096, "default"),
        },
    })
}

fn unsupported_direct(reason: String) -> DirectCaps {
    DirectCaps {
        supported: false,
        reason: Some(reason),
        writes_supported: false,
        write_reason: None,
        mem_align: 4096,
        offset_align: 4096,
        align_source: "default".into(),
    }
}

/// A file opened with O_DIRECT and the alignment its transfers need.
struct OpenDirect {
    file: File,
    mem_align: usize,
    offset_align: usize,
    align_source: &'static str,
}

/// Opens `path` with O_DIRECT, for reading and, when `write`, writing, once
/// [`direct_alignment`] has found the alignment; or why direct I/O cannot
/// work there. Both probes start here, so they refuse for the same reasons
/// in the same words.
fn open_direct(
    path: &Path,
    buffered: &File,
    filesystem: &str,
    logical_block_size: Option<u64>,
    write: bool,
) -> std::result::Result<OpenDirect, String> {
    let (mem_align, offset_align, align_source) =
        direct_alignment(buffered, filesystem, logical_block_size)?;
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| format!("{filesystem} rejects O_DIRECT at open ({})", errno_name(&e)))?;
    Ok(OpenDirect {
        file,
        mem_align,
        offset_align,
        align_source,
    })
}

impl OpenDirect {
    /// The size of the probe's one aligned transfer.
    fn block(&self) -> usize {
        self.offset_align.max(self.mem_align).max(512)
    }

    /// What a probe whose aligned transfers worked reports.
    fn caps(&self, writes_supported: bool, write_reason: Option<String>) -> DirectCaps {
        DirectCaps {
            supported: true,
            reason: None,
            writes_supported,
            write_reason,
            mem_align: self.mem_align,
            offset_align: self.offset_align,
            align_source: self.align_source.into(),
        }
    }
}

/// O_DIRECT on an existing file, reading only: it opens and an aligned read
/// at offset 0 succeeds.
fn probe_direct_read(
    path: &Path,
    buffered: &File,
    filesystem: &str,
    logical_block_size: Option<u64>,
) -> DirectCaps {
    let direct = match open_direct(path, buffered, filesystem, logical_block_size, false) {
        Ok(d) => d,
        Err(why) => return unsupported_direct(why),
    };
    let read = AlignedBuf::new(direct.block(), direct.mem_align.max(1).next_power_of_two())
        .map_err(|e| e.to_string())
        .and_then(|mut buf| {
            sys::pread(direct.file.as_raw_fd(), buf.full_mut(), 0)
                .map_err(|e| format!("an aligned O_DIRECT read failed ({})", errno_name(&e)))
        });
    if let Err(why) = read {
        return unsupported_direct(format!("{filesystem}: {why}"));
    }
    direct.caps(false, None)
}

fn probe_direct(
    path: &Path,
    buffered: &File,
    filesystem: &str,
    kernel: &str,
    logical_block_size: Option<u64>,
) -> DirectCaps {
    let direct = match open_direct(path, buffered, filesystem, logical_block_size, true) {
        Ok(d) => d,
        Err(why) => return unsupported_direct(why),
    };
    // Some file systems accept the flag at open and fail only at the first
    // I/O, so an aligned write and read-back must really succeed.
    let block = direct.block();
    let check = || -> std::result::Result<(), String> {
        let mut buf = AlignedBuf::for_direct_io(block, direct.mem_align, direct.offset_align)
            .map_err(|e| e.to_string())?;
        for (i, b) in buf.full_mut().iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        buf.set_len(block);
        note_direct_io(buf.full().as_ptr(), block, direct.offset_align);
        let n = sys::pwrite(direct.file.as_raw_fd(), buf.as_slice(), 0)
            .map_err(|e| format!("an aligned O_DIRECT write failed ({})", errno_name(&e)))?;
        if n != block {
            return Err(format!(
                "an aligned O_DIRECT write was short ({n} of {block} bytes)"
            ));
        }
        let expected = buf.as_slice().to_vec();
        buf.full_mut().fill(0);
        note_direct_io(buf.full().as_ptr(), block, direct.offset_align);
        let n = sys::pread(direct.file.as_raw_fd(), buf.full_mut(), 0)
            .map_err(|e| format!("an aligned O_DIRECT read failed ({})", errno_name(&e)))?;
        if n != block || buf.full()[..block] != expected[..] {
            return Err("an O_DIRECT read did not return what was written".into());
        }
        Ok(())
    };
    if let Err(reason) = check() {
        return unsupported_direct(format!("{filesystem}: {reason}"));
    }
    let (writes_supported, write_reason) = match known_bad_direct_writes(filesystem, kernel) {
        Some(why) => (false, Some(why)),
        None => (true, None),
    };
    direct.caps(writes_supported, write_reason)
}

/// ext4 on Linux 6.1.64 and 6.1.65 corrupts data written with O_DIRECT
/// (Debian bug 1057843); direct writes are refused there.
pub fn known_bad_direct_writes(filesystem: &str, kernel: &str) -> Option<String> {
    let version: Vec<u32> = kernel
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    if filesystem == "ext4" && (version == [6, 1, 64] || version == [6, 1, 65]) {
        return Some(format!(
            "Linux {kernel} has an ext4 O_DIRECT write corruption bug (Debian bug 1057843); direct writes are refused, upgrade the kernel"
        ));
    }
    None
}

fn dontcache_failure(e: &std::io::Error, op: &str) -> String {
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => format!(
            "{op} with RWF_DONTCACHE returned EOPNOTSUPP: this file system does not support uncached buffered I/O (ext4 needs Linux 6.17+, xfs 6.15+)"
        ),
        Some(libc::EINVAL) => format!(
            "{op} with RWF_DONTCACHE returned EINVAL: the kernel does not know the flag (needs Linux 6.14+)"
        ),
        _ => format!("{op} with RWF_DONTCACHE failed ({})", errno_name(e)),
    }
}

/// RWF_DONTCACHE on an existing file, reading only.
fn probe_dontcache_read(file: &File) -> DontCacheCaps {
    let mut buf = [0u8; 4096];
    match sys::preadv2(file.as_raw_fd(), &mut buf, 0, sys::RWF_DONTCACHE) {
        Ok(_) => DontCacheCaps {
            supported: true,
            reason: None,
        },
        Err(e) => DontCacheCaps {
            supported: false,
            reason: Some(dontcache_failure(&e, "preadv2")),
        },
    }
}

/// Allocates a few blocks past the probe file's end, then cuts it back.
fn probe_fallocate(file: &File) -> FallocateCaps {
    let fd = file.as_raw_fd();
    let r = sys::fallocate(fd, 0, 64 << 10).and_then(|()| sys::ftruncate(fd, 0));
    match r {
        Ok(()) => FallocateCaps {
            supported: true,
            reason: None,
        },
        Err(e) => FallocateCaps {
            supported: false,
            reason: Some(format!("fallocate failed: {}", errno_name(&e))),
        },
    }
}

fn probe_dontcache(file: &File) -> DontCacheCaps {
    let fd = file.as_raw_fd();
    let data = [0x5Au8; 4096];
    let why = dontcache_failure;
    if let Err(e) = sys::pwritev2(fd, &data, 8192, sys::RWF_DONTCACHE) {
        return DontCacheCaps {
            supported: false,
            reason: Some(why(&e, "pwritev2")),
        };
    }
    let mut back = [0u8; 4096];
    match sys::preadv2(fd, &mut back, 8192, sys::RWF_DONTCACHE) {
        Ok(4096) if back == data => DontCacheCaps {
            supported: true,
            reason: None,
        },
        Ok(_) => DontCacheCaps {
            supported: false,
            reason: Some("preadv2 with RWF_DONTCACHE did not return what was written".into()),
        },
        Err(e) => DontCacheCaps {
            supported: false,
            reason: Some(why(&e, "preadv2")),
        },
    }
}

/// The file system type: from /proc/self/mountinfo (longest mount point that
/// contains `dir`), else from the statfs magic number.
fn filesystem_of(dir: &Path, file: &File) -> (String, Option<PathBuf>) {
    if let Ok(info) = fs::read_to_string("/proc/self/mountinfo") {
        if let Some((fs, mp)) = mountinfo_fs(&info, dir) {
            return (fs, Some(mp));
        }
    }
    let name = match sys::fs_magic(file.as_raw_fd()) {
        Ok(0xEF53) => "ext2/3/4",
        Ok(0x5846_5342) => "xfs",
        Ok(0x0102_1994) => "tmpfs",
        Ok(0x9123_683E) => "btrfs",
        Ok(0x794C_7630) => "overlay",
        Ok(0x6573_5546) => "fuse",
        Ok(0x6969) => "nfs",
        Ok(0xF2F5_2010) => "f2fs",
        Ok(0x2FC1_2FC1) => "zfs",
        Ok(0x8584_58F6) => "ramfs",
        _ => "unknown",
    };
    (name.into(), None)
}

/// Parses mountinfo text and returns (fstype, mount point) of the mount that
/// holds `dir`. Later lines win ties because later mounts shadow earlier ones.
pub(crate) fn mountinfo_fs(info: &str, dir: &Path) -> Option<(String, PathBuf)> {
    let mut best: Option<(usize, String, PathBuf)> = None;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(mp), Some(fstype)) = (fields.get(4), fields.get(sep + 1)) else {
            continue;
        };
        let mp = PathBuf::from(unescape_mountinfo(mp));
        if dir.starts_with(&mp) {
            let depth = mp.components().count();
            if best.as_ref().is_none_or(|(d, _, _)| depth >= *d) {
                best = Some((depth, fstype.to_string(), mp));
            }
        }
    }
    best.map(|(_, fs, mp)| (fs, mp))
}

fn unescape_mountinfo(s: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo octal.
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            if let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("x"), 8)
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The block device holding a file system (by `st_dev`), and the sysfs
/// `queue` directory that describes it (a partition uses its disk's queue).
fn block_device(dev: u64) -> (Option<String>, Option<PathBuf>) {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major == 0 {
        return (None, None); // tmpfs, overlay, and other virtual file systems
    }
    let sys_dev = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let Ok(real) = fs::canonicalize(&sys_dev) else {
        return (None, None);
    };
    let name = real.file_name().map(|n| n.to_string_lossy().into_owned());
    let queue = if real.join("queue").is_dir() {
        Some(real.join("queue"))
    } else {
        real.parent()
            .map(|p| p.join("queue"))
            .filter(|q| q.is_dir())
    };
    (name, queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_kernel_detection() {
        assert!(known_bad_direct_writes("ext4", "6.1.64").is_some());
        assert!(known_bad_direct_writes("ext4", "6.1.65-amd64").is_some());
        assert!(known_bad_direct_writes("ext4", "6.1.66").is_none());
        assert!(known_bad_direct_writes("xfs", "6.1.64").is_none());
        assert!(known_bad_direct_writes("ext4", "6.18.44-fc").is_none());
    }

    #[test]
    fn mountinfo_longest_prefix_wins() {
        let info = "22 27 0:21 / / rw,relatime - ext4 /dev/vda rw\n\
                    25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw\n\
                    30 22 7:0 / /mnt/my\\040xfs rw - xfs /dev/loop0 rw\n";
        assert_eq!(
            mountinfo_fs(info, Path::new("/dev/shm/x")).unwrap().0,
            "tmpfs"
        );
        assert_eq!(mountinfo_fs(info, Path::new("/work/db")).unwrap().0, "ext4");
        assert_eq!(
            mountinfo_fs(info, Path::new("/mnt/my xfs/db")).unwrap().0,
            "xfs"
        );
        assert_eq!(
            mountinfo_fs(info, Path::new("/dev/shmem")).unwrap().0,
            "ext4"
        );
    }

    #[test]
    fn missing_dir_is_a_clear_error() {
        let e = probe(Path::new("/nonexistent/quietio")).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Io);
        assert!(e.to_string().contains("/nonexistent/quietio"));
    }

    #[test]
    fn probe_leaves_no_file_behind() {
        let d = tempfile::tempdir().unwrap();
        let caps = probe_uncached(d.path()).unwrap();
        assert!(!caps.kernel.is_empty());
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
