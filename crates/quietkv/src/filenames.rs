//! Names of the files in a database directory.

use std::path::{Path, PathBuf};

pub const CURRENT: &str = "CURRENT";
pub const LOCK: &str = "LOCK";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Table(u64),
    Wal(u64),
    Manifest(u64),
    Current,
    Lock,
    /// A temporary file (`*.tmp`) left by a crash mid-install.
    Temp,
}

pub fn table_path(dir: &Path, number: u64) -> PathBuf {
    crate::version::table_file_name(dir, number)
}

pub fn wal_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

pub fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// What a directory entry is, if it belongs to the database.
pub fn parse(name: &str) -> Option<FileKind> {
    if name == CURRENT {
        return Some(FileKind::Current);
    }
    if name == LOCK {
        return Some(FileKind::Lock);
    }
    if name.ends_with(".tmp") {
        return Some(FileKind::Temp);
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(FileKind::Manifest);
    }
    if let Some(n) = name.strip_suffix(".sst") {
        return n.parse().ok().map(FileKind::Table);
    }
    if let Some(n) = name.strip_suffix(".log") {
        return n.parse().ok().map(FileKind::Wal);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/db");
        assert_eq!(
            parse(table_path(d, 12).file_name().unwrap().to_str().unwrap()),
            Some(FileKind::Table(12))
        );
        assert_eq!(
            parse(wal_path(d, 7).file_name().unwrap().to_str().unwrap()),
            Some(FileKind::Wal(7))
        );
        assert_eq!(parse(&manifest_name(3)), Some(FileKind::Manifest(3)));
        assert_eq!(parse("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse("CURRENT.tmp"), Some(FileKind::Temp));
        assert_eq!(parse("notes.txt"), None);
        assert_eq!(parse("x.sst"), None);
    }
}
