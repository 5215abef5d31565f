//! The expected state, kept in a file outside the database so that it
//! survives the SIGKILL of the process writing both: for every key, the
//! version the database acknowledged (`committed`) and the version a write
//! in flight may have left (`pending`). Values are a pure function of key
//! and version, so a slot of two `u32`s is all a key needs.
//!
//! Layout: `THREADS` little-endian u64 operation counters (one per worker
//! thread), then per key `committed: u32, pending: u32`. Writes go through
//! `pwrite` into the page cache, which a killed process does not take with
//! it.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Room for this many worker threads' operation counters.
pub const THREADS: usize = 64;
const HEADER: u64 = (THREADS * 8) as u64;

pub struct Expected {
    file: File,
    keys: u32,
}

impl Expected {
    /// Opens (creating, all zero) the state of `keys` keys.
    pub fn open(path: &Path, keys: u32) -> std::io::Result<Expected> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = HEADER + u64::from(keys) * 8;
        if file.metadata()?.len() < len {
            file.set_len(len)?;
        }
        Ok(Expected { file, keys })
    }

    pub fn keys(&self) -> u32 {
        self.keys
    }

    fn slot(key: u32) -> u64 {
        HEADER + u64::from(key) * 8
    }

    /// `(committed, pending)` of `key`.
    pub fn get(&self, key: u32) -> std::io::Result<(u32, u32)> {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, Self::slot(key))?;
        Ok((
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        ))
    }

    pub fn set(&self, key: u32, committed: u32, pending: u32) -> std::io::Result<()> {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&committed.to_le_bytes());
        b[4..].copy_from_slice(&pending.to_le_bytes());
        self.file.write_all_at(&b, Self::slot(key))
    }

    pub fn add_ops(&self, thread: usize, n: u64) -> std::io::Result<()> {
        let at = (thread * 8) as u64;
        let total = self.ops(thread)? + n;
        self.file.write_all_at(&total.to_le_bytes(), at)
    }

    pub fn ops(&self, thread: usize) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, (thread * 8) as u64)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn total_ops(&self) -> std::io::Result<u64> {
        (0..THREADS).map(|t| self.ops(t)).sum()
    }
}

/// The database key of key index `i`.
pub fn key(i: u32) -> Vec<u8> {
    format!("k{i:08}").into_bytes()
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// What version `version` of key `i` is: `None` for never written
/// (version 0) or a delete, else the value's bytes.
pub fn value(i: u32, version: u32) -> Option<Vec<u8>> {
    if version == 0 {
        return None;
    }
    let h = mix((u64::from(i) << 32) | u64::from(version));
    if h & 7 == 0 {
        return None; // a delete
    }
    let len = 16 + (h >> 8) as usize % 300;
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&i.to_le_bytes());
    v.extend_from_slice(&version.to_le_bytes());
    let mut x = h;
    while v.len() < len {
        x = mix(x);
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    Some(v)
}

/// Whether `found` (what the database returned for key `i`) is allowed:
/// the committed version, or the pending one if a write was in flight.
pub fn allowed(i: u32, found: Option<&[u8]>, committed: u32, pending: u32) -> bool {
    let is = |v: u32| value(i, v).as_deref() == found;
    is(committed) || (pending != 0 && is(pending))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_survives_reopening_and_values_are_distinct() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state");
        let e = Expected::open(&p, 100).unwrap();
        e.set(7, 3, 4).unwrap();
        e.add_ops(2, 5).unwrap();
        e.add_ops(2, 1).unwrap();
        drop(e);
        let e = Expected::open(&p, 100).unwrap();
        assert_eq!(e.get(7).unwrap(), (3, 4));
        assert_eq!(e.get(8).unwrap(), (0, 0));
        assert_eq!(e.total_ops().unwrap(), 6);
        assert_eq!(value(1, 0), None);
        let deletes = (1..1000).filter(|v| value(5, *v).is_none()).count();
        assert!((60..200).contains(&deletes), "{deletes}");
        assert_ne!(value(5, 1), value(5, 2));
        assert_ne!(value(5, 1), value(6, 1));
        assert!(allowed(5, value(5, 2).as_deref(), 2, 0));
        assert!(allowed(5, value(5, 3).as_deref(), 2, 3));
        assert!(!allowed(5, value(5, 3).as_deref(), 2, 0));
        assert!(!allowed(5, value(5, 1).as_deref(), 2, 3));
    }
}
