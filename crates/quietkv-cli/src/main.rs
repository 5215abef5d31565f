//! The `quietkv` command: parses the command line and hands each
//! subcommand (the key-value commands, `check`, `repair`, `stats`,
//! checkpoints and backups, `doctor`, `bench`, `stress`) to its module;
//! a failure becomes an exit code and a one-line message (`failure.rs`).

mod check_cmd;
mod copy_cmd;
mod doctor;
mod failure;
mod kv;
mod logger;
mod repair_cmd;
mod stats_cmd;
mod stress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "quietkv",
    version,
    about = "An LSM key-value store whose background work leaves the page cache alone"
)]
struct Cli {
    /// Database directory (required by the key-value commands).
    #[arg(long, global = true, value_name = "DIR")]
    db: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Probe a directory: O_DIRECT, RWF_DONTCACHE, the mode each I/O class
    /// gets under `auto`, and a self-test of every mode.
    Doctor {
        /// Directory to examine (default: the current directory).
        dir: Option<PathBuf>,
        /// Print one JSON object instead of the human report.
        #[arg(long)]
        json: bool,
        /// Size of the self-test file in MiB.
        #[arg(long, default_value_t = 64)]
        size: u64,
        /// Engine of direct sequential files: auto, uring or sync.
        #[arg(long, default_value = "auto")]
        io_engine: quietio::IoEngine,
        /// Requests a direct sequential file keeps in flight (io_uring).
        #[arg(long, default_value_t = 4)]
        io_depth: usize,
    },
    #[command(flatten)]
    Kv(kv::KvCommand),
    /// Restore a backup point (the newest by default) from BACKUP_DIR into
    /// TARGET, a new or empty directory; needs no --db.
    Restore {
        /// Directory `quietkv backup` wrote.
        backup_dir: PathBuf,
        /// Database directory to create.
        target: PathBuf,
        /// The point to restore instead of the newest.
        #[arg(long)]
        point: Option<u64>,
    },
    /// Check every file of every backup point in BACKUP_DIR against its
    /// recorded length and checksum (exit 2 on damage).
    VerifyBackup {
        /// Directory `quietkv backup` wrote.
        backup_dir: PathBuf,
    },
    /// Benchmark: user-read latency beside background I/O in each mode,
    /// in a memory cgroup (see docs/benchmark.md).
    #[cfg(feature = "bench")]
    Bench(Box<quietkv_bench::BenchArgs>),
    /// Internal: one benchmark run, started by `quietkv bench`.
    #[cfg(feature = "bench")]
    #[command(name = "bench-worker", hide = true)]
    BenchWorker,
    /// Stress and crash test: worker processes with random options write,
    /// read and scan against an expected state and are killed with SIGKILL
    /// at random moments; every restart checks every key. Prints one
    /// summary line; exit 2 on any violation.
    Stress(stress::StressArgs),
    /// Internal: the process `quietkv stress` kills.
    #[command(name = "stress-worker", hide = true)]
    StressWorker(stress::WorkerArgs),
}

fn main() -> ExitCode {
    logger::init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return kv::usage_error(e),
    };
    let result = match cli.command {
        Command::Doctor {
            dir,
            json,
            size,
            io_engine,
            io_depth,
        } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            doctor::run(&dir, size, io_engine, io_depth).map(|report| {
                if json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&report).expect("serializable")
                    );
                } else {
                    doctor::print_human(&report);
                }
            })
        }
        Command::Kv(cmd) => return kv::main(cli.db, cmd),
        Command::Restore {
            backup_dir,
            target,
            point,
        } => return copy_cmd::restore(&backup_dir, &target, point),
        Command::VerifyBackup { backup_dir } => return copy_cmd::verify(&backup_dir),
        #[cfg(feature = "bench")]
        Command::Bench(args) => quietkv_bench::run(*args),
        #[cfg(feature = "bench")]
        Command::BenchWorker => return quietkv_bench::worker_main(),
        Command::Stress(args) => match stress::run(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::StressWorker(args) => return stress::worker_main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("quietkv: {msg}");
            ExitCode::from(1)
        }
    }
}
