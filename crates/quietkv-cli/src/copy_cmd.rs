//! `quietkv checkpoint`, `backup`, `restore` and `verify-backup`: copies of
//! a database and the way back, each printing one summary line.
//!
//! `checkpoint` and `backup` open the database read-only (nothing in its
//! directory is written), so they need it not to be open for writing by
//! another process. Exit codes as for the key-value commands: 1 for a
//! user error (a target that is not empty, no backup point), 2 for damage
//! found in a backup.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use quietkv::{BackupOptions, CheckpointOptions, Db};

use crate::failure::Failure;

/// Writes a checkpoint of `db` into `out`.
pub fn checkpoint(db: &Db, out: &Path, copy: bool) -> Result<(), Failure> {
    let info = db.checkpoint_with(out, CheckpointOptions { link_tables: !copy })?;
    writeln!(
        io::stdout().lock(),
        "checkpoint {}: sequence {}, {} tables linked, {} copied ({} bytes), {} written from memtables ({} bytes with the manifest)",
        info.dir.display(),
        info.sequence,
        info.tables_linked,
        info.tables_copied,
        info.bytes_copied,
        info.tables_written,
        info.bytes_written
    )?;
    Ok(())
}

/// Adds a backup point of `db` to `backup_dir`.
pub fn backup(db: &Db, backup_dir: &Path, keep: usize) -> Result<(), Failure> {
    let info = db.backup_with(backup_dir, BackupOptions { keep_points: keep })?;
    writeln!(
        io::stdout().lock(),
        "backup point {} in {}: sequence {}, {} tables copied ({} bytes), {} already stored, {} written from memtables ({} bytes with the manifest), {} old points removed",
        info.point,
        backup_dir.display(),
        info.sequence,
        info.tables_copied,
        info.bytes_copied,
        info.tables_reused,
        info.tables_written,
        info.bytes_written,
        info.points_removed
    )?;
    Ok(())
}

/// Restores the newest point of `backup_dir`, or `point`, into `target`.
pub fn restore(backup_dir: &Path, target: &Path, point: Option<u64>) -> ExitCode {
    let result = match point {
        Some(p) => quietkv::restore_point(backup_dir, p, target),
        None => quietkv::restore(backup_dir, target),
    };
    finish(result.map_err(Failure::from).and_then(|info| {
        writeln!(
            io::stdout().lock(),
            "restored point {} (sequence {}) into {}: {} tables, {} bytes",
            info.point,
            info.sequence,
            info.dir.display(),
            info.tables,
            info.bytes_copied
        )?;
        Ok(())
    }))
}

/// Checks every file of every point of `backup_dir`.
pub fn verify(backup_dir: &Path) -> ExitCode {
    finish(
        quietkv::verify_backup(backup_dir)
            .map_err(Failure::from)
            .and_then(|points| {
                let mut out = io::stdout().lock();
                for p in &points {
                    writeln!(
                        out,
                        "point {}: sequence {}, {} tables, {} bytes",
                        p.point, p.sequence, p.tables, p.bytes
                    )?;
                }
                writeln!(out, "ok: {} backup points verified", points.len())?;
                Ok(())
            }),
    )
}

fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) if f.code == 0 => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("quietkv: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
