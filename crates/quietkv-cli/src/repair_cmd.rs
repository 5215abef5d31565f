//! `quietkv repair`: runs `quietkv::repair` and prints what it kept and
//! dropped.
//!
//! Output (stdout), one line each: `manifest ...` (which manifest placed
//! the tables, or that none was usable), `note ...` (why CURRENT or a
//! manifest was passed over), `DROPPED <file> [offset <n>] (<bytes> bytes):
//! <reason>` for every table, WAL region, whole WAL or manifest edit not
//! kept, `MISSING <file> (<bytes> bytes): <reason>` for every table or WAL
//! the manifest names that is gone (with what that can mean),
//! `SALVAGED <file>: ...` for every damaged table rewritten from its intact
//! blocks, `keyspace <id> <name>: <n> tables` for every keyspace of the
//! repaired database when it has more than the default one (`ADOPTED` in
//! front when no usable manifest recorded it, so it was recreated as
//! `recovered-<id>`), then the counts (`tables`, `wal`, `lost`) and the verdict
//! `repaired: <dir> ...`. Exit 0 when a consistent database was installed;
//! 1 if the repair was refused (the database is in use, no database
//! there) or stopped on a file it could not read (nothing changed); 2 if
//! it failed.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use quietkv::ErrorKind;
use quietkv::{repair_dir, Dropped, RepairOptions};

use crate::failure::Failure;

pub fn run(dir: &Path) -> Result<ExitCode, Failure> {
    let report = repair_dir(dir, &RepairOptions::default()).map_err(|e| match e.kind() {
        ErrorKind::Busy => Failure::user(format!("{e}; stop it first")),
        ErrorKind::InvalidArgument => Failure::user(e.to_string()),
        // A file that could not be read at all is not damage: nothing was
        // changed, so the user can fix access and run repair again.
        ErrorKind::Io => Failure::user(format!(
            "repair stopped before changing anything: {e}; a file that cannot be read is not damage, so fix its access (permissions, the device, open-file limits) and run repair again"
        )),
        _ => Failure {
            code: 2,
            message: format!("repair failed: {e}"),
        },
    })?;
    let mut out = io::stdout().lock();
    match &report.manifest {
        Some(m) => writeln!(
            out,
            "manifest {}: {} edits used",
            m.display(),
            report.manifest_edits
        )?,
        None => writeln!(
            out,
            "manifest: none usable; the intact tables were merged into new ones"
        )?,
    }
    for n in &report.manifest_notes {
        writeln!(out, "note {n}")?;
    }
    let dropped = report
        .manifest_damage
        .iter()
        .chain(&report.tables_dropped)
        .chain(&report.wals_dropped)
        .chain(&report.wal_damage);
    for d in dropped {
        writeln!(out, "DROPPED {}", describe(d))?;
    }
    for d in report.tables_missing.iter().chain(&report.wals_missing) {
        writeln!(out, "MISSING {}", describe(d))?;
    }
    for s in &report.tables_salvaged {
        writeln!(
            out,
            "SALVAGED {:06}.sst: kept {} entries, lost {} entries in {} damaged blocks: {}",
            s.number, s.entries_kept, s.entries_lost, s.blocks_lost, s.reason
        )?;
    }
    if report.keyspaces.len() > 1 {
        for k in &report.keyspaces {
            writeln!(
                out,
                "{}keyspace {} {:?}: {} tables",
                if k.adopted { "ADOPTED " } else { "" },
                k.id,
                k.name,
                k.tables
            )?;
        }
    }
    writeln!(
        out,
        "tables: {} kept, {} salvaged, {} dropped, {} missing, {} merged into {} new, {} new from WALs ({} bytes in all)",
        report.tables_kept.len(),
        report.tables_salvaged.len(),
        report.tables_dropped.len(),
        report.tables_missing.len(),
        report.tables_kept.iter().filter(|t| t.level.is_none()).count(),
        report.merged_into.len(),
        report.wal_tables.len(),
        report.table_bytes
    )?;
    writeln!(
        out,
        "wal: {} records salvaged ({} after damage), {} found in tables, {} entries of dropped keyspaces skipped, {} damaged or not fitting, from {} files ({} older WALs not replayed, {} not this database's, {} missing)",
        report.wal_records_salvaged,
        report.wal_records_after_damage,
        report.wal_records_in_tables,
        report.wal_entries_of_dropped_keyspaces,
        report.wal_damage.len(),
        report.wal_files,
        report.wals_skipped.len(),
        report.wals_dropped.len(),
        report.wals_missing.len()
    )?;
    if !report.moved_to_lost.is_empty() {
        writeln!(
            out,
            "lost: {} replaced or dropped files kept in {}",
            report.moved_to_lost.len(),
            report.lost_dir.display()
        )?;
    }
    writeln!(
        out,
        "repaired: {} (manifest {}, last sequence {}{})",
        report.dir.display(),
        report
            .new_manifest
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        report.last_sequence,
        if report.lost_anything() {
            "; some data was dropped or is missing, see above"
        } else {
            "; nothing was dropped"
        }
    )?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn describe(d: &Dropped) -> String {
    match d.offset {
        Some(o) => format!(
            "{} offset {o} ({} bytes): {}",
            d.file.display(),
            d.bytes,
            d.reason
        ),
        None => format!("{} ({} bytes): {}", d.file.display(), d.bytes, d.reason),
    }
}
