//! `quietkv stress`: a stress and crash tool in the spirit of RocksDB's
//! `db_stress` crash test. Each cycle starts a worker process on the
//! database with randomly drawn options (access mode per I/O class, memtable
//! size, compression, filter, cache), lets its threads write, read and scan
//! against an expected state kept outside the process while flushes and
//! compactions run, kills it with SIGKILL at a random moment, then reopens
//! the database (with default options, so modes also change across
//! restarts) and checks every key: it must hold its last acknowledged
//! version, or the one a write in flight at the kill may have left. Any
//! other value, a failed open, or a worker that found a wrong answer while
//! running is a violation.

mod config;
mod expected;
mod worker;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use quietkv::{Db, Options};

use config::{Rng, StressConfig};
use expected::{allowed, key, value, Expected};

#[derive(Args, Debug)]
pub struct StressArgs {
    /// Directory for the database and the expected state (created; a
    /// previous run's state there is continued).
    #[arg(long, default_value = "quietkv-stress")]
    pub dir: PathBuf,
    /// Kill-and-verify cycles.
    #[arg(long, default_value_t = 10)]
    pub crash_cycles: u64,
    /// Total seconds of work over all cycles (each cycle runs a random
    /// share of it before the kill).
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Worker threads in the killed process.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Distinct keys.
    #[arg(long, default_value_t = 20_000)]
    pub keys: u32,
    /// Seed of every random choice (a run is replayable up to timing).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Writes the WAL in this mode in every cycle (buffered, fadvise, auto,
    /// direct, dontcache, mmap) instead of a random one; the other choices
    /// are drawn as without it.
    #[arg(long, value_name = "MODE")]
    pub wal_mode: Option<quietio::AccessMode>,
    /// Keeps this many WAL files for reuse in every cycle
    /// (`Options::wal_recycle_count`) instead of a random 0 or 2.
    #[arg(long, value_name = "N")]
    pub wal_recycle: Option<usize>,
}

/// The worker's arguments (hidden `stress-worker` command).
#[derive(Args, Debug)]
pub struct WorkerArgs {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    state: PathBuf,
    #[arg(long)]
    config: String,
    #[arg(long)]
    threads: usize,
    #[arg(long)]
    keys: u32,
    #[arg(long)]
    seed: u64,
}

/// What a run found.
#[derive(Debug, Default)]
struct Tally {
    cycles: u64,
    /// Keys checked after restarts, summed over cycles.
    keys_verified: u64,
    /// Writes acknowledged to the workers (versions committed), in total.
    acked_writes: u64,
    /// Keys found holding the version a write in flight at the kill left.
    in_flight_applied: u64,
    violations: Vec<String>,
}

pub fn run(args: StressArgs) -> Result<ExitCode, String> {
    if args.threads == 0 || args.threads > expected::THREADS {
        return Err(format!("--threads must be 1..={}", expected::THREADS));
    }
    if args.keys == 0 || args.crash_cycles == 0 || args.duration <= 0.0 {
        return Err("--keys, --crash-cycles and --duration must be positive".into());
    }
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| format!("cannot create {}: {e}", args.dir.display()))?;
    let db_dir = args.dir.join("db");
    let state = args.dir.join("expected");
    let violations_file = db_dir.with_extension("violations");
    let _ = std::fs::remove_file(&violations_file);
    let exp = Expected::open(&state, args.keys).map_err(|e| e.to_string())?;
    let acked_before = committed_total(&exp)?;
    let caps = quietio::probe(&args.dir).map_err(|e| e.to_string())?;
    let direct = caps.direct_unusable_reason(true).is_none();
    let dontcache = caps.dontcache.supported;
    let mmap_wal = caps.fallocate.supported;
    let unsupported = match args.wal_mode {
        Some(quietio::AccessMode::Direct) if !direct => Some("O_DIRECT"),
        Some(quietio::AccessMode::DontCache) if !dontcache => Some("RWF_DONTCACHE"),
        Some(quietio::AccessMode::Mmap) if !mmap_wal => Some("fallocate (the mmap WAL needs it)"),
        _ => None,
    };
    if let Some(what) = unsupported {
        return Err(format!(
            "--wal-mode: {} does not support {what}",
            args.dir.display()
        ));
    }
    let mut rng = Rng::new(args.seed);
    let mut tally = Tally::default();
    let mean_run = args.duration / args.crash_cycles as f64;
    let started = Instant::now();
    for cycle in 0..args.crash_cycles {
        let mut config = StressConfig::random(&mut rng, direct, dontcache, mmap_wal);
        config.pin_wal(args.wal_mode, args.wal_recycle);
        let run_for =
            Duration::from_secs_f64(mean_run * (0.1 + 1.8 * rng.below(1000) as f64 / 1000.0));
        let mut child = spawn_worker(&args, &db_dir, &state, &config, rng.next())?;
        let outcome = wait_then_kill(&mut child, run_for)?;
        tally.cycles += 1;
        if let Some(code) = outcome {
            tally.violations.push(format!(
                "cycle {cycle} ({config}): the worker exited by itself ({code})"
            ));
        }
        if let Ok(text) = std::fs::read_to_string(&violations_file) {
            for line in text.lines() {
                tally
                    .violations
                    .push(format!("cycle {cycle} ({config}): {line}"));
            }
            let _ = std::fs::remove_file(&violations_file);
        }
        if let Err(v) = verify(&db_dir, &exp, &mut tally) {
            tally
                .violations
                .push(format!("cycle {cycle} ({config}): {v}"));
        }
        if !tally.violations.is_empty() {
            break;
        }
    }
    tally.acked_writes = committed_total(&exp)? - acked_before;
    let ops = exp.total_ops().map_err(|e| e.to_string())?;
    println!(
        "stress: {} cycles, {} operations, {} acknowledged writes, {} keys verified after restarts ({} held an in-flight write), {} violations, {:.0} s",
        tally.cycles,
        ops,
        tally.acked_writes,
        tally.keys_verified,
        tally.in_flight_applied,
        tally.violations.len(),
        started.elapsed().as_secs_f64()
    );
    for v in &tally.violations {
        println!("VIOLATION {v}");
    }
    Ok(if tally.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// Sum of committed versions: each acknowledged write adds one.
fn committed_total(exp: &Expected) -> Result<u64, String> {
    let mut sum = 0;
    for k in 0..exp.keys() {
        sum += u64::from(exp.get(k).map_err(|e| e.to_string())?.0);
    }
    Ok(sum)
}

fn spawn_worker(
    args: &StressArgs,
    db: &Path,
    state: &Path,
    config: &StressConfig,
    seed: u64,
) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new(exe)
        .arg("stress-worker")
        .arg("--db")
        .arg(db)
        .arg("--state")
        .arg(state)
        .args(["--config", &config.to_string()])
        .args(["--threads", &args.threads.to_string()])
        .args(["--keys", &args.keys.to_string()])
        .args(["--seed", &seed.to_string()])
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the stress worker: {e}"))
}

/// Lets the worker run for `run_for`, then SIGKILLs it. `Some(status)` if
/// it had exited on its own before that.
fn wait_then_kill(child: &mut Child, run_for: Duration) -> Result<Option<String>, String> {
    let deadline = Instant::now() + run_for;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(Some(status.to_string()));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child
        .kill()
        .map_err(|e| format!("cannot kill the worker: {e}"))?;
    child.wait().map_err(|e| e.to_string())?;
    Ok(None)
}

/// Reopens the database and checks every key against the expected state;
/// settles each in-flight write to what the database holds.
fn verify(db_dir: &Path, exp: &Expected, tally: &mut Tally) -> Result<(), String> {
    if !db_dir.join("CURRENT").exists() {
        // Killed before the database was first created: nothing acked.
        return check_nothing_acked(exp);
    }
    let db = Db::open(db_dir, Options::default()).map_err(|e| format!("reopen failed: {e}"))?;
    let mut wrong = Vec::new();
    for k in 0..exp.keys() {
        let (committed, pending) = exp.get(k).map_err(|e| e.to_string())?;
        let found = db
            .get(key(k))
            .map_err(|e| format!("get k{k:08} after restart failed: {e}"))?;
        tally.keys_verified += 1;
        if !allowed(k, found.as_deref(), committed, pending) {
            wrong.push(format!(
                "k{k:08}: expected version {committed}{}, found {}",
                if pending != 0 {
                    format!(" or {pending}")
                } else {
                    String::new()
                },
                worker::describe(k, found.as_deref())
            ));
            continue;
        }
        if pending != 0 {
            // The in-flight write either made it or did not; from now on
            // what the database holds is what is expected.
            let now = if value(k, pending).as_deref() == found.as_deref()
                && value(k, committed).as_deref() != found.as_deref()
            {
                tally.in_flight_applied += 1;
                pending
            } else {
                committed
            };
            exp.set(k, now, 0).map_err(|e| e.to_string())?;
        }
    }
    db.close()
        .map_err(|e| format!("close after verification failed: {e}"))?;
    match wrong.len() {
        0 => Ok(()),
        n => Err(format!("{n} keys wrong after restart, first: {}", wrong[0])),
    }
}

fn check_nothing_acked(exp: &Expected) -> Result<(), String> {
    for k in 0..exp.keys() {
        let (committed, pending) = exp.get(k).map_err(|e| e.to_string())?;
        if committed != 0 {
            return Err(format!(
                "no database (no CURRENT) but k{k:08} was acknowledged at version {committed}"
            ));
        }
        if pending != 0 {
            exp.set(k, 0, 0).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// The hidden `stress-worker` command.
pub fn worker_main(args: WorkerArgs) -> ExitCode {
    let config: StressConfig = match args.config.parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quietkv stress-worker: {e}");
            return ExitCode::from(1);
        }
    };
    match worker::run(
        &args.db,
        &args.state,
        &config,
        args.threads,
        args.keys,
        args.seed,
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quietkv stress-worker: {e}");
            ExitCode::from(3)
        }
    }
}
