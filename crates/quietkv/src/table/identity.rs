//! Which table a file is, and whether it is the one the manifest names.
//!
//! A table's checksums only prove its blocks are intact, not that the file
//! is the right table: an older table copied over a newer one (or a table
//! from another database) is internally perfect and would serve stale
//! values. So every table records its own file number and its database's
//! id in its properties block, and whoever opens a table for the engine
//! (user reads, compaction input, warming, `check`) compares the file's
//! size and those two fields, and the newest sequence number it holds,
//! against the manifest before using it.

use std::path::Path;

use crate::error::{Error, Result};
use crate::filenames::table_path;
use crate::key::SeqNo;
use crate::table::properties::TableProperties;
use crate::version::FileMeta;

/// What the manifest says a table file must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpectedTable {
    pub number: u64,
    /// Bytes, as recorded when the table was installed.
    pub size: u64,
    /// The database's id; 0 = unknown (a database created before ids
    /// existed), which skips the comparison.
    pub db_id: u64,
    /// The newest sequence number the manifest says the table holds. A
    /// scan inside a range tombstone skips a table's keys when this is
    /// older than the tombstone, so a table holding newer entries than
    /// recorded would have live keys skipped: it is refused instead.
    pub largest_seq: SeqNo,
}

impl ExpectedTable {
    pub fn new(meta: &FileMeta, db_id: u64) -> Self {
        ExpectedTable {
            number: meta.number,
            size: meta.size,
            db_id,
            largest_seq: meta.largest_seq,
        }
    }

    /// Corruption naming `path` if the file's size or recorded identity
    /// differ from what is expected.
    #[cfg(test)]
    pub fn verify(&self, path: &Path, file_size: u64, props: &TableProperties) -> Result<()> {
        self.verify_size(path, file_size)?;
        self.verify_properties(path, props)
    }

    /// Checked before the footer is read: a file of another size is
    /// another file, whatever its footer says.
    pub fn verify_size(&self, path: &Path, file_size: u64) -> Result<()> {
        if file_size != self.size {
            return Err(Error::corruption(format!(
                "table {:06}.sst is {file_size} bytes but the manifest recorded {} bytes: it is not the table the manifest names",
                self.number, self.size
            ))
            .with_file(path));
        }
        Ok(())
    }

    /// The number and database id the table recorded when it was written.
    /// A table written before identities were recorded (number or id 0) is
    /// only checked for what it has.
    pub fn verify_properties(&self, path: &Path, props: &TableProperties) -> Result<()> {
        if props.file_number != 0 && props.file_number != self.number {
            let found = table_path(Path::new(""), props.file_number);
            return Err(Error::corruption(format!(
                "the file holds table {} (its properties say so) but the manifest expects table {:06}.sst here: it was copied or renamed over",
                found.display(),
                self.number
            ))
            .with_file(path));
        }
        if props.db_id != 0 && self.db_id != 0 && props.db_id != self.db_id {
            return Err(Error::corruption(format!(
                "table {:06}.sst was written by database {:016x}, not by this database ({:016x})",
                self.number, props.db_id, self.db_id
            ))
            .with_file(path));
        }
        if props.largest_seq > self.largest_seq {
            return Err(Error::corruption(format!(
                "table {:06}.sst holds entries up to sequence number {} but the manifest recorded {}: it is not the table the manifest names",
                self.number, props.largest_seq, self.largest_seq
            ))
            .with_file(path));
        }
        Ok(())
    }
}

/// The database id after a manifest edit that may record one (`known` 0 =
/// none seen yet). Only a manifest's first edit records it, so a different
/// id later means edits of two databases were mixed: Corruption (the
/// caller adds the manifest's name and the edit's offset).
pub fn db_id_after_edit(known: u64, recorded: Option<u64>) -> Result<u64> {
    match recorded {
        None => Ok(known),
        Some(id) if known == 0 || id == known => Ok(id),
        Some(id) => Err(Error::corruption(format!(
            "manifest edit changes the database id from {known:016x} to {id:016x}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn props(file_number: u64, db_id: u64) -> TableProperties {
        TableProperties {
            file_number,
            db_id,
            ..Default::default()
        }
    }

    const EXPECTED: ExpectedTable = ExpectedTable {
        number: 10,
        size: 4096,
        db_id: 0xabc,
        largest_seq: 500,
    };

    #[test]
    fn a_manifest_keeps_one_database_id() {
        assert_eq!(db_id_after_edit(0, None).unwrap(), 0);
        assert_eq!(db_id_after_edit(0, Some(5)).unwrap(), 5);
        assert_eq!(db_id_after_edit(5, None).unwrap(), 5);
        assert_eq!(db_id_after_edit(5, Some(5)).unwrap(), 5);
        let e = db_id_after_edit(5, Some(6)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption);
        assert!(e.to_string().contains("changes the database id"), "{e}");
    }

    #[test]
    fn matching_and_unknown_identities_pass() {
        let p = Path::new("/db/000010.sst");
        EXPECTED.verify(p, 4096, &props(10, 0xabc)).unwrap();
        // An old table (no identity) and an old database (no id).
        EXPECTED.verify(p, 4096, &props(0, 0)).unwrap();
        let no_id = ExpectedTable {
            db_id: 0,
            ..EXPECTED
        };
        no_id.verify(p, 4096, &props(10, 0x123)).unwrap();
    }

    #[test]
    fn each_mismatch_is_corruption_naming_the_file() {
        let p = Path::new("/db/000010.sst");
        for (size, pr, expect) in [
            (
                4000,
                props(10, 0xabc),
                "4000 bytes but the manifest recorded 4096",
            ),
            (4096, props(7, 0xabc), "holds table 000007.sst"),
            (
                4096,
                props(10, 0x123),
                "database 0000000000000123, not by this database (0000000000000abc)",
            ),
            (
                4096,
                TableProperties {
                    largest_seq: 501,
                    ..props(10, 0xabc)
                },
                "holds entries up to sequence number 501 but the manifest recorded 500",
            ),
        ] {
            let e = EXPECTED.verify(p, size, &pr).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corruption);
            assert_eq!(e.file(), Some(p));
            assert!(e.to_string().contains(expect), "{e}");
        }
    }
}
