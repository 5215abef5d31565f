//! Moving one file into a copy of a database: a hard link where the file
//! system allows it (no bytes move, the page cache is untouched), else a
//! copy whose reads and writes both go through the `Backup` I/O class, so
//! they bypass or drop the cache as that class's mode says.

use std::path::Path;

use quietio::{IoClass, IoEnv};

use crate::error::{Error, Result};

/// How a file got into the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placed {
    /// A new name for the same inode.
    Linked,
    /// Its bytes were copied; `crc` is the CRC32C of all of them.
    Copied { bytes: u64, crc: u32 },
}

/// Bytes read and written per step of a copy.
const CHUNK: usize = 1 << 20;

/// Links `from` to `to` when `link` is set and the file system allows it;
/// copies it otherwise (another file system, a file system without hard
/// links, a link count at its limit, or links forbidden), checking it is
/// `expected_len` bytes long.
pub(crate) fn link_or_copy(
    from_env: &IoEnv,
    from: &Path,
    to_env: &IoEnv,
    to: &Path,
    expected_len: u64,
    link: bool,
) -> Result<Placed> {
    if link {
        match std::fs::hard_link(from, to) {
            Ok(()) => return Ok(Placed::Linked),
            Err(e) if link_unsupported(&e) => {
                log::debug!(
                    "quietkv: cannot link {} to {} ({e}); copying it",
                    from.display(),
                    to.display()
                );
            }
            Err(e) => {
                return Err(
                    Error::io(e, format!("cannot link {} into the copy", from.display()))
                        .with_file(to),
                )
            }
        }
    }
    let (bytes, crc) = copy_file(from_env, from, to_env, to, Some(expected_len))?;
    Ok(Placed::Copied { bytes, crc })
}

/// Whether a failed `link(2)` means "this file system will not link these
/// files", which copying gets around, rather than a real failure.
fn link_unsupported(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc_errno::EXDEV)
            | Some(libc_errno::EPERM)
            | Some(libc_errno::EMLINK)
            | Some(libc_errno::EOPNOTSUPP)
            | Some(libc_errno::ENOSYS)
    )
}

/// The error numbers of `link(2)` that copying gets around (Linux values;
/// the crate has no libc dependency of its own).
mod libc_errno {
    pub const EPERM: i32 = 1;
    pub const EXDEV: i32 = 18;
    pub const EMLINK: i32 = 31;
    pub const ENOSYS: i32 = 38;
    pub const EOPNOTSUPP: i32 = 95;
}

/// Copies `from` (read in `from_env`) to a new file `to` (written in
/// `to_env`), both in the `Backup` class, and syncs it. Returns its length
/// and CRC32C. With `expected_len`, a file of another length is
/// corruption (a table shorter than the manifest says). On failure the
/// partial copy is removed.
pub(crate) fn copy_file(
    from_env: &IoEnv,
    from: &Path,
    to_env: &IoEnv,
    to: &Path,
    expected_len: Option<u64>,
) -> Result<(u64, u32)> {
    let result = (|| {
        let mut writer = to_env.create(to, IoClass::Backup)?;
        let (total, crc) = read_in_chunks(from_env, from, |chunk| {
            writer.write_all(chunk)?;
            Ok(())
        })?;
        if let Some(want) = expected_len.filter(|&want| want != total) {
            return Err(Error::corruption(format!(
                "the file is {total} bytes long, but {want} were expected"
            ))
            .with_file(from));
        }
        writer.finish(true)?;
        Ok((total, crc))
    })();
    if result.is_err() {
        let _ = to_env.remove_file(to);
    }
    result
}

/// The CRC32C and length of `path`, read in the `Backup` class.
pub(crate) fn checksum_file(env: &IoEnv, path: &Path) -> Result<(u64, u32)> {
    read_in_chunks(env, path, |_| Ok(()))
}

/// Reads `path` from start to end in the `Backup` class, handing each
/// chunk to `each`; returns its length and CRC32C.
fn read_in_chunks(
    env: &IoEnv,
    path: &Path,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<(u64, u32)> {
    let mut reader = env.open_sequential(path, IoClass::Backup)?;
    let mut buf = vec![0u8; CHUNK];
    let mut crc = 0u32;
    let mut total = 0u64;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| Error::from(e).with_file(path).with_offset(total))?;
        if n == 0 {
            return Ok((total, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        each(&buf[..n])?;
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_has_the_same_bytes_and_checksum_and_a_short_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let env_a = IoEnv::open(&a, Default::default()).unwrap();
        let env_b = IoEnv::open(&b, Default::default()).unwrap();
        let data: Vec<u8> = (0..(3 * CHUNK + 17))
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        std::fs::write(a.join("f"), &data).unwrap();
        let placed = link_or_copy(
            &env_a,
            &a.join("f"),
            &env_b,
            &b.join("f"),
            data.len() as u64,
            false,
        )
        .unwrap();
        assert_eq!(
            placed,
            Placed::Copied {
                bytes: data.len() as u64,
                crc: crc32c::crc32c(&data)
            }
        );
        assert_eq!(std::fs::read(b.join("f")).unwrap(), data);
        assert_eq!(
            checksum_file(&env_b, &b.join("f")).unwrap(),
            (data.len() as u64, crc32c::crc32c(&data))
        );
        // Direct writes count the zero-padded last block too.
        let backup = env_b.stats().class(IoClass::Backup);
        assert!(backup.write_bytes >= data.len() as u64, "{backup:?}");
        assert!(env_a.stats().class(IoClass::Backup).read_bytes >= data.len() as u64);

        let e = copy_file(&env_a, &a.join("f"), &env_b, &b.join("g"), Some(1)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Corruption);
        assert!(!b.join("g").exists(), "a refused copy is removed");

        let placed = link_or_copy(
            &env_a,
            &a.join("f"),
            &env_b,
            &b.join("h"),
            data.len() as u64,
            true,
        )
        .unwrap();
        assert_eq!(placed, Placed::Linked);
    }
}
