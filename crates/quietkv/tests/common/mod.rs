//! Helpers shared by the engine's integration tests.

use std::path::{Path, PathBuf};

/// The table files (`*.sst`) in a database directory.
#[allow(dead_code)]
pub fn tables(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect()
}

/// The share of `files`' pages that are in the page cache now.
#[allow(dead_code)]
pub fn cached_fraction(files: &[PathBuf]) -> f64 {
    let (mut cached, mut total) = (0, 0);
    for f in files {
        let r = quietio::residency(f).unwrap();
        cached += r.cached;
        total += r.total_pages;
    }
    cached as f64 / total.max(1) as f64
}

/// The tables of `dir` that are not among `before`.
#[allow(dead_code)]
pub fn new_tables(dir: &Path, before: &[PathBuf]) -> Vec<PathBuf> {
    tables(dir)
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect()
}

/// A fresh directory under the target's scratch space.
#[allow(dead_code)]
pub fn dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Small sizes so flushes and compactions happen with little data.
#[allow(dead_code)]
pub fn small() -> quietkv::Options {
    quietkv::Options::default()
        .memtable_size(64 << 10)
        .level_base_bytes(256 << 10)
        .target_file_size(64 << 10)
        .l0_compaction_trigger(2)
        .block_cache_bytes(1 << 20)
}

/// The files in `dir` whose names end with `suffix`, sorted by name.
#[allow(dead_code)]
pub fn files_with(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// Copies every file of a database directory but its LOCK into `to`, an
/// existing directory: what a restarted process finds after a crash
/// (`std::mem::forget` standing in for one), or a copy to damage on
/// purpose while the original stays as it was.
#[allow(dead_code)]
pub fn copy_without_lock(from: &Path, to: &Path) {
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap() != "LOCK" {
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
    }
}

/// Every entry of `dir` with its contents (empty for one that cannot be
/// read as a file), sorted by name: equal listings mean nothing in the
/// directory changed.
#[allow(dead_code)]
pub fn listing(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), std::fs::read(e.path()).unwrap_or_default())
        })
        .collect();
    v.sort();
    v
}
