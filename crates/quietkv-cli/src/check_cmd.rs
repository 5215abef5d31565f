//! `quietkv check`: runs `quietkv::check` and prints its findings.
//!
//! Output (stdout): one `DAMAGED <file> offset <n>: <message>` line per
//! problem (`DAMAGED <file>: <message>` when the offset is unknown) and exit
//! 2; otherwise `ok: N tables, M blocks, K WAL records checked` and exit 0.
//! Notes (torn WAL tails, damage in files recovery ignores) go before the
//! verdict as `note <file> offset <n>: <message>`. A database whose LOCK is
//! held is refused (exit 1) unless `--force`.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use quietkv::{check_dir_with, CheckOptions, Finding};

use crate::failure::Failure;

pub fn run(dir: &Path, force: bool) -> Result<ExitCode, Failure> {
    let report = check_dir_with(dir, CheckOptions { ignore_lock: force }).map_err(|e| {
        if e.kind() == quietkv::ErrorKind::Busy {
            Failure::user(format!("{e}; stop it first or pass --force"))
        } else {
            Failure::user(e.to_string())
        }
    })?;
    if report.lock_held {
        eprintln!("quietkv: warning: the database is in use; findings may be caused by concurrent changes");
    }
    let mut out = io::stdout().lock();
    for n in &report.notes {
        writeln!(out, "note {}", describe(n))?;
    }
    for p in &report.problems {
        writeln!(out, "DAMAGED {}", describe(p))?;
    }
    if report.is_ok() {
        writeln!(
            out,
            "ok: {} tables, {} blocks, {} WAL records checked",
            report.tables, report.blocks, report.wal_records
        )?;
    }
    out.flush()?;
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn describe(f: &Finding) -> String {
    match f.offset {
        Some(o) => format!("{} offset {o}: {}", f.file.display(), f.message),
        None => format!("{}: {}", f.file.display(), f.message),
    }
}
