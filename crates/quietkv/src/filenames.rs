//! Names of the files in a database directory.

use std::path::{Path, PathBuf};

pub const CURRENT: &str = "CURRENT";
pub const LOCK: &str = "LOCK";
/// Present in a directory a checkpoint or restore is still writing (see
/// `checkpoint::staging`): such a directory is not a database yet.
pub const INCOMPLETE_COPY: &str = "COPY-INCOMPLETE";

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
        return file_number(n).map(FileKind::Manifest);
    }
    if let Some(n) = name.strip_suffix(".sst") {
        return file_number(n).map(FileKind::Table);
    }
    if let Some(n) = name.strip_suffix(".log") {
        return file_number(n).map(FileKind::Wal);
    }
    None
}

/// The number in a file name, only if it is written the way this crate
/// writes it (at least six digits, zero-padded). `u64::from_str` alone
/// also takes "+5", "5" and "0000005": such a name is someone else's file,
/// yet cleanup would delete it as an obsolete table or WAL, and a CURRENT
/// naming "MANIFEST-5" would make recovery read that file while repair
/// reads MANIFEST-000005.
fn file_number(digits: &str) -> Option<u64> {
    let n: u64 = digits.parse().ok()?;
    (format!("{n:06}") == digits).then_some(n)
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

    #[test]
    fn only_canonical_numbers_are_database_files() {
        for name in [
            "+5.sst",
            "5.sst",
            "00005.sst",
            "0000005.sst",
            "+00005.log",
            "12.log",
            "MANIFEST-5",
            "MANIFEST-+00005",
            "MANIFEST-0000005",
        ] {
            assert_eq!(parse(name), None, "{name}");
        }
        assert_eq!(parse("1234567.sst"), Some(FileKind::Table(1_234_567)));
        assert_eq!(parse("000000.log"), Some(FileKind::Wal(0)));
    }
}
