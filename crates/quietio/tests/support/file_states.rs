//! The state of every file in a directory, for tests that check an
//! operation left the directory exactly as it found it. quietio and quietkv
//! each keep a copy, so that their published packages' tests stay inside
//! the package; quietkv-cli's tests include quietio's by its path.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The path, size and modification time of every file in `dir`, sorted.
pub fn file_states(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            (e.path(), m.len(), m.modified().unwrap())
        })
        .collect();
    v.sort();
    v
}
