//! The key-value commands: put, get, delete, delete-range, scan, load,
//! flush, compact, stats, check, repair, checkpoint and backup.
//!
//! Keys and values are bytes: arguments are taken as given by the OS (no
//! UTF-8 requirement) and printed raw. `scan` and `load` use one
//! `key<TAB>value` line per entry, so keys must not contain a TAB or a
//! newline and values must not contain a newline to round-trip.
//!
//! Exit codes: 0 success, 1 user error (bad argument, no database, database
//! busy, `get` of a missing key, I/O error), 2 damage (a Corruption error,
//! `check` found problems, or `repair` could not install a database).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::ops::Bound;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use quietkv::{Db, Options, WriteBatch, WriteOptions};

use crate::failure::Failure;

#[derive(Subcommand)]
pub enum KvCommand {
    /// Set KEY to VALUE (creates the database if needed).
    Put { key: OsString, value: OsString },
    /// Print the value of KEY (exit 1 if absent).
    Get { key: OsString },
    /// Remove KEY.
    Delete { key: OsString },
    /// Remove every key from FROM (inclusive) to TO (exclusive), as one
    /// write however many keys that is.
    DeleteRange { from: OsString, to: OsString },
    /// Print `key<TAB>value` lines in key order.
    Scan {
        /// First key (inclusive).
        #[arg(long)]
        from: Option<OsString>,
        /// End key (exclusive).
        #[arg(long)]
        to: Option<OsString>,
        /// At most this many entries.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Apply `key<TAB>value` lines from FILE (or stdin) in batches
    /// (creates the database if needed).
    Load {
        /// Input file; stdin when absent or `-`.
        file: Option<PathBuf>,
        /// Make each batch durable before the next and print `acked N`.
        #[arg(long)]
        sync: bool,
        /// Lines per batch.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        batch: u64,
    },
    /// Write the memtable out as a table.
    Flush,
    /// Compact the whole tree into the last level.
    Compact,
    /// Print engine statistics.
    Stats {
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Verify every table block and WAL record without opening the database.
    Check {
        /// Check even if another process holds the database LOCK.
        #[arg(long)]
        force: bool,
    },
    /// Salvage what is intact into a consistent database; replaced and
    /// dropped files are kept in DIR/lost/.
    Repair,
    /// Write a consistent copy of the database into OUT (new or empty):
    /// tables hard-linked where possible, memtable data written as tables.
    Checkpoint {
        /// Directory the checkpoint is written to.
        out: PathBuf,
        /// Copy every table instead of hard-linking it.
        #[arg(long)]
        copy: bool,
    },
    /// Add a backup point to BACKUP_DIR, copying only the tables earlier
    /// points lack; restore with `quietkv restore`.
    Backup {
        /// Directory of the backups (created if missing).
        backup_dir: PathBuf,
        /// Keep only this many newest points (0: keep all).
        #[arg(long, default_value_t = 0)]
        keep: usize,
    },
}

/// Runs one command; prints the failure as `quietkv: ...`.
pub fn main(db: Option<PathBuf>, cmd: KvCommand) -> ExitCode {
    match run(db, cmd) {
        Ok(code) => code,
        Err(f) if f.code == 0 => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("quietkv: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn run(db: Option<PathBuf>, cmd: KvCommand) -> Result<ExitCode, Failure> {
    let Some(dir) = db else {
        return Err(Failure::user("--db DIR is required for this command"));
    };
    let access = match cmd {
        KvCommand::Put { .. } | KvCommand::Load { .. } => Access::Create,
        KvCommand::Delete { .. }
        | KvCommand::DeleteRange { .. }
        | KvCommand::Flush
        | KvCommand::Compact => Access::Write,
        _ => Access::Read,
    };
    if let KvCommand::Check { force } = cmd {
        return crate::check_cmd::run(&dir, force);
    }
    if let KvCommand::Repair = cmd {
        return crate::repair_cmd::run(&dir);
    }
    let db = open(&dir, access)?;
    // Copies only read the database: opened read-only above.
    match &cmd {
        KvCommand::Checkpoint { out, copy } => {
            crate::copy_cmd::checkpoint(&db, out, *copy)?;
            db.close()?;
            return Ok(ExitCode::SUCCESS);
        }
        KvCommand::Backup { backup_dir, keep } => {
            crate::copy_cmd::backup(&db, backup_dir, *keep)?;
            db.close()?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let mut out = BufWriter::new(io::stdout().lock());
    match cmd {
        KvCommand::Put { key, value } => db.put(bytes(key), bytes(value))?,
        KvCommand::Get { key } => {
            let key = bytes(key);
            match db.get(&key)? {
                Some(v) => {
                    out.write_all(&v)?;
                    out.write_all(b"\n")?;
                }
                None => {
                    db.close()?;
                    return Err(Failure::user(format!(
                        "not found: {}",
                        String::from_utf8_lossy(&key)
                    )));
                }
            }
        }
        KvCommand::Delete { key } => db.delete(bytes(key))?,
        KvCommand::DeleteRange { from, to } => db.delete_range(bytes(from)..bytes(to))?,
        KvCommand::Scan { from, to, limit } => {
            let (from, to) = (from.map(bytes), to.map(bytes));
            let lower = from.as_deref().map_or(Bound::Unbounded, Bound::Included);
            let upper = to.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let mut iter = db.range::<&[u8], _>((lower, upper))?;
            let mut left = limit.unwrap_or(u64::MAX);
            // Borrowed pairs: a long scan allocates nothing per entry.
            while left > 0 {
                let Some(item) = iter.next_ref() else { break };
                let (k, v) = item?;
                out.write_all(k)?;
                out.write_all(b"\t")?;
                out.write_all(v)?;
                out.write_all(b"\n")?;
                left -= 1;
            }
        }
        KvCommand::Load { file, sync, batch } => {
            let n = load(&db, file.as_deref(), sync, batch, &mut out)?;
            writeln!(out, "loaded {n} entries")?;
        }
        KvCommand::Flush => db.flush()?,
        KvCommand::Compact => db.compact_all()?,
        KvCommand::Stats { json } => {
            let stats = db.stats();
            if json {
                writeln!(out, "{}", crate::stats_cmd::to_json(&stats))?;
            } else {
                crate::stats_cmd::print_human(&mut out, &stats)?;
            }
        }
        KvCommand::Check { .. }
        | KvCommand::Repair
        | KvCommand::Checkpoint { .. }
        | KvCommand::Backup { .. } => unreachable!("handled above"),
    }
    out.flush()?;
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

fn bytes(s: OsString) -> Vec<u8> {
    s.into_vec()
}

/// What a command does to the database.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Reads only: opened read-only, nothing in the directory is written
    /// (works on a read-only mount or a full disk).
    Read,
    /// Writes to an existing database.
    Write,
    /// Writes, creating the database if there is none.
    Create,
}

/// Opens the database for `access`. Without CURRENT, a command finds no
/// database (exit 1) without writing to the directory, and a directory
/// that holds a database but lost CURRENT is damage (exit 2, naming the
/// manifest to restore CURRENT from).
fn open(dir: &Path, access: Access) -> Result<Db, Failure> {
    // Asked even when creating: a database that lost CURRENT is refused.
    let exists = Db::exists(dir)?;
    if !exists && access != Access::Create {
        return Err(Failure::user(format!(
            "no quietkv database in {} (no CURRENT file)",
            dir.display()
        )));
    }
    let opts = Options::default().create_if_missing(access == Access::Create);
    Ok(if access == Access::Read {
        Db::open_read_only(dir, opts)?
    } else {
        Db::open(dir, opts)?
    })
}

/// Applies `key<TAB>value` lines in batches of `batch_size`. With `sync`,
/// each batch is durable before the next and `acked N` (entries so far)
/// is printed and flushed after it. A line without a TAB, or one the batch
/// refuses (a key or value over the size limit), stops the load: the lines
/// before it are written (and acked with `sync`), then the error names the
/// line.
fn load(
    db: &Db,
    file: Option<&Path>,
    sync: bool,
    batch_size: u64,
    out: &mut impl Write,
) -> Result<u64, Failure> {
    let (name, input): (String, Box<dyn BufRead>) = match file {
        None => ("stdin".into(), Box::new(io::stdin().lock())),
        Some(p) if p == Path::new("-") => ("stdin".into(), Box::new(io::stdin().lock())),
        Some(p) => {
            let f = File::open(p)
                .map_err(|e| Failure::user(format!("cannot open {}: {e}", p.display())))?;
            (p.display().to_string(), Box::new(BufReader::new(f)))
        }
    };
    let mut input = input;
    let mut loaded = 0u64;
    let mut batch = WriteBatch::new();
    let mut line = Vec::new();
    let mut line_no = 0u64;
    let mut bad_line = None;
    loop {
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::user(format!("cannot read {name}: {e}")))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let Some(tab) = line.iter().position(|&b| b == b'\t') else {
            bad_line = Some((
                line_no,
                "expected key<TAB>value but found no TAB".to_string(),
            ));
            break;
        };
        if let Err(e) = batch.put(&line[..tab], &line[tab + 1..]) {
            bad_line = Some((line_no, e.message().to_string()));
            break;
        }
        if batch.len() as u64 >= batch_size {
            loaded += commit(db, &mut batch, sync, loaded, out)?;
        }
    }
    if !batch.is_empty() {
        loaded += commit(db, &mut batch, sync, loaded, out)?;
    }
    if let Some((n, why)) = bad_line {
        out.flush()?;
        return Err(Failure::user(format!(
            "{name} line {n}: {why} ({loaded} entries before it were loaded)"
        )));
    }
    Ok(loaded)
}

/// Writes one batch; returns how many entries it held.
fn commit(
    db: &Db,
    batch: &mut WriteBatch,
    sync: bool,
    loaded: u64,
    out: &mut impl Write,
) -> Result<u64, Failure> {
    let n = batch.len() as u64;
    db.write(std::mem::take(batch), WriteOptions { sync })?;
    if sync {
        writeln!(out, "acked {}", loaded + n)?;
        out.flush()?;
    }
    Ok(n)
}

/// Help and version go to stdout (exit 0); a usage error is one
/// `quietkv: ...` line on stderr (exit 1).
pub fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind as K;
    match e.kind() {
        K::DisplayHelp | K::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        K::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(1)
        }
        _ => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("quietkv: {first} (see quietkv --help)");
            ExitCode::from(1)
        }
    }
}
