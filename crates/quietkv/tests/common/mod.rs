//! Helpers shared by the engine's integration tests.

use std::path::{Path, PathBuf};

/// The table files (`*.sst`) in a database directory.
pub fn tables(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect()
}
