//! Repair does not yet handle databases with keyspaces: it rebuilds one
//! tree from the tables and WALs it finds, and would move every
//! keyspace's data into the default one. This finds such a database (any
//! manifest edit or WAL record that mentions a keyspace) before anything
//! is changed, so the repair refuses it instead.

use std::path::Path;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filenames::{manifest_name, wal_path};
use crate::record_log::salvage::{salvage_records, Salvaged};
use crate::version::VersionEdit;

/// `InvalidArgument`, naming the file and offset, if a manifest or WAL
/// of the directory mentions a keyspace. Files that cannot be read are
/// left to the repair, which reports them.
pub(super) fn refuse_keyspaces(dir: &Path, manifests: &[u64], wals: &[u64]) -> Result<()> {
    let refuse = |path: &Path, offset: u64, what: &str| {
        Err(Error::invalid(format!(
            "{what}: repair does not handle databases with keyspaces yet, and would move \
             their data into the default keyspace; nothing was changed"
        ))
        .with_file(path)
        .with_offset(offset))
    };
    for &n in manifests {
        let path = dir.join(manifest_name(n));
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        for item in salvage_records(&data, None) {
            if let Salvaged::Record {
                offset, payload, ..
            } = item
            {
                let Ok(e) = VersionEdit::decode(&payload) else {
                    continue;
                };
                if !e.keyspaces.is_empty()
                    || !e.dropped_keyspaces.is_empty()
                    || e.next_keyspace_id.is_some()
                {
                    return refuse(&path, offset, "the manifest records keyspaces");
                }
            }
        }
    }
    for &n in wals {
        let path = wal_path(dir, n);
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        for item in salvage_records(&data, Some(n)) {
            if let Salvaged::Record {
                offset, payload, ..
            } = item
            {
                if WriteBatch::decode(&payload).is_ok_and(|b| b.has_keyspaces()) {
                    return refuse(&path, offset, "a WAL record writes a keyspace");
                }
            }
        }
    }
    Ok(())
}
