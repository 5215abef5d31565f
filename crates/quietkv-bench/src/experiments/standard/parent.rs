//! `quietkv bench --experiment standard`: the scale, the configurations
//! (every built engine unless `--engines` or `--modes` says otherwise),
//! one campaign per value size, and report.md / report.json.

use super::one_run::{Params, Run, RunParams, BLOCK_CACHE_BYTES, MEMTABLE_BYTES};
use super::tables::{section_json, section_markdown};
use super::ycsb::RECORD_BYTES;
use crate::args::BenchArgs;
use crate::campaign::{self, Eta, Filed};
use crate::cgroup::cgroups_usable;
use crate::engines::BenchEngine;
use crate::engines::{built_engines, dispatch, engines_text, EngineMode, QuietkvEngine};
use crate::experiments::modes::{describe_modes, engine_modes, report_names};
use crate::experiments::setup::{machine, out_dir, Scratch};
use crate::keys::KEY_SIZE;
use crate::report::write_plain_report;
use crate::result::{CommonParams, WorkerSpec};
use crate::runner::{Runner, RunnerOptions};
use crate::sampler::SamplerConfig;

/// The sizes of `--scale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// Bytes of keys and values of the db_bench database: the key count
    /// of a value size is this over (key + value).
    pub user_bytes: u64,
    pub phase_seconds: f64,
    /// The memory cgroup each run is in, MiB (0: none).
    pub memory_limit_mib: u64,
}

impl Scale {
    /// quick: 1,000,000 keys of 100-byte values (116 MB), 4 s per read
    /// phase, no memory limit (the database fits in the page cache);
    /// full: 16,000,000 (1.9 GB), 30 s per read phase, each run in a
    /// 1 GiB memory cgroup (as E1's full scale): the database is about
    /// three times the page cache left beside the process's own memory
    /// (memtables, block cache, filters: a few hundred MiB).
    pub fn parse(name: &str) -> Result<Scale, String> {
        match name {
            "quick" => Ok(Scale {
                user_bytes: 1_000_000 * (KEY_SIZE as u64 + 100),
                phase_seconds: 4.0,
                memory_limit_mib: 0,
            }),
            "full" => Ok(Scale {
                user_bytes: 16_000_000 * (KEY_SIZE as u64 + 100),
                phase_seconds: 30.0,
                memory_limit_mib: 1024,
            }),
            other => Err(format!("--scale must be quick or full, got '{other}'")),
        }
    }

    pub fn keys_for(&self, value_size: usize) -> u64 {
        (self.user_bytes / (KEY_SIZE + value_size) as u64).max(1)
    }
}

/// YCSB's records: as many bytes as the db_bench database of `keys` keys
/// of `value_size`, at least 100.
pub fn ycsb_records(keys: u64, value_size: usize) -> u64 {
    (keys * (KEY_SIZE + value_size) as u64 / (KEY_SIZE + RECORD_BYTES) as u64).max(100)
}

/// The configurations: `--engines`/`--modes` as the other experiments
/// take them (quietkv `auto`, its defaults; RocksDB and fjall `buffered`),
/// and every engine of this binary when neither is given.
pub fn standard_modes(args: &BenchArgs) -> Result<Vec<EngineMode>, String> {
    let mut a = args.clone();
    if a.engines.is_none() && a.modes.is_none() {
        a.engines = Some(built_engines().iter().map(|e| e.to_string()).collect());
    }
    engine_modes(&a, &["auto"], &["buffered"])
}

/// What the header says every engine is given, and what each keyspace
/// gets in the modes that spread the keys over several.
fn settings_text(modes: &[EngineMode]) -> String {
    let l = QuietkvEngine::bench_layout();
    let mut spreads: Vec<usize> = modes
        .iter()
        .map(EngineMode::keyspaces)
        .filter(|&n| n > 1)
        .collect();
    spreads.sort_unstable();
    spreads.dedup();
    let spread_text = if spreads.is_empty() {
        String::new()
    } else {
        format!(
            " A quietkv mode `+ks=N` spreads the keys over N keyspaces of one database by key range (the default keyspace and N - 1 named ones; keyspace i holds the i-th of N equal parts of each workload's key numbers, so scans go on from one keyspace into the next), each keyspace with a memtable of 1/N of the budget ({}), one block cache, WAL and set of background threads for all; a batch across keyspaces is one atomic write.",
            spreads
                .iter()
                .map(|n| {
                    // As the engine divides it, in whole bytes.
                    let each = (MEMTABLE_BYTES / n) as f64 / (1 << 20) as f64;
                    let each = if each.fract() == 0.0 {
                        format!("{each:.0}")
                    } else {
                        format!("{each:.1}")
                    };
                    format!("ks={n}: {each} MiB each, {} MiB in all", MEMTABLE_BYTES >> 20)
                })
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    format!(
        "Every engine: memtable (write buffer) {} MiB and block cache {} MiB (db_bench's), the bench's shared tree shape ({} MiB tables, L1 {} MiB, {} KiB blocks, {} bloom bits per key, no compression: the values are random), its own defaults otherwise (each engine's setup note below says what the bench sets beyond that). \
         Durability, the same for all: WAL on, no sync per write; an acknowledged write survives a crash of the process, not of the machine (quietkv `wal_sync = none`; RocksDB default `WriteOptions`: WAL, `sync = false`; fjall: its journal handed to the OS at every write, `PersistMode::Buffer`).{}",
        MEMTABLE_BYTES >> 20,
        BLOCK_CACHE_BYTES >> 20,
        l.target_file_size >> 20,
        l.level_base_bytes >> 20,
        l.block_size >> 10,
        l.bloom_bits_per_key,
        spread_text
    )
}

const FIGURES_TEXT: &str = "Figures per workload: ops/s over the operations alone; latency per operation (HdrHistogram, every thread's merged); CPU per operation = the process's CPU time over the whole phase (`CLOCK_PROCESS_CPUTIME_ID`: the scheduler's exact runtime of every thread, the engine's background threads included, flush and catch-up of write phases included) over the operations; write amplification = bytes the process wrote to the device (`/proc/self/io` `write_bytes`, from the first write to the end of the flush and compaction catch-up) over keys x (key + value) written; space amplification = the database directory's allocated bytes after the fill and its catch-up over keys x (key + value); space amplification counts every allocated file, WAL files kept for reuse or preallocated included; peak memory = `VmHWM` of the whole process (engine and benchmark), reset at the start of each workload through `/proc/self/clear_refs`, so the peak resident set during that workload, which includes what the run's earlier workloads left in the allocator; memory added = that peak less the resident set at the workload's start (`VmRSS`). Device reads per operation = bytes the process read from the device over the phase (`/proc/self/io` `read_bytes`: page-cache misses, readahead and O_DIRECT reads) over the operations; page cache = the file pages charged to the process's memory cgroup at the phase's end (`memory.stat` `total_cache` or `file`): under a memory limit, what the engine's own memory left for the database's pages. \
Protocol: one run per configuration and round, each in a worker process of its own, so that no run inherits what another left in the allocator (page cache not dropped between runs: each run writes its own databases; at quick scale no cgroup and the database fits in memory; at full scale, or with --memory-limit, the worker is placed in a fresh memory cgroup before it starts, so that everything it allocates is charged there and the database is several times the page cache it gets), configurations interleaved and the order rotated each round; each run does every workload in order on its own databases: fillseq on one, fillrandom, overwrite, then a full compaction and a wait until idle (every engine reads the same shape: one sorted run), then the reads on a second, YCSB on a third. The same seeded requests for every configuration of a round. Columns: median (min..max) over the repeats; the ratio columns divide quietkv's median by the peer's (above 1: quietkv higher, which is better for ops/s and worse for the other figures).";

/// What the header says of phases the machine disturbed.
fn disturbance_text(keep: bool) -> String {
    format!(
        "Phases the machine disturbed: each phase is judged when its run ends, by what the machine showed during it: CPU steal above {:.0} ms/s (`/proc/stat`, summed over CPUs; throughput loses what the host takes: in the full-scale campaign of 2026-11-29 phases at 100-150 ms/s ran at 0.86x of their cell's quieter phases, at 0-50 ms/s at 1.01x), other processes' CPU above {:.0} ms/s, or the disk holding requests, beyond what its own queue explains, for more than {:.0}% of the phase (at least {:.0} ms). {} A run's phases follow each other on the same databases, so a disturbed phase is not run again; a ratio is shown only when both sides kept at least two phases (one with a single repeat), \"n/r\" otherwise. The rule is in `docs/disturbed-runs.md`.",
        super::phase::MAX_THROUGHPUT_STEAL_MS_PER_S,
        crate::disturbance::MAX_OTHER_CPU_MS_PER_S,
        super::phase::MAX_THROUGHPUT_STALL_SHARE * 100.0,
        crate::disturbance::MAX_DEVICE_STALL_MS,
        if keep {
            "Disturbed phases are kept in the medians as asked (--keep-disturbed), each listed under its section: for checking the bench on a busy machine, not for figures."
        } else {
            "A disturbed phase is listed under its section with its reasons and left out of the medians."
        }
    )
}

/// The worker spec of one run of `mode` (named `name` in the report).
fn worker_spec(
    mode: &EngineMode,
    name: &str,
    repeat: u32,
    repeats: u32,
    run: &RunParams,
) -> Result<WorkerSpec, String> {
    Ok(WorkerSpec {
        experiment: "STANDARD".into(),
        mode: mode.clone(),
        name: name.to_string(),
        repeat,
        repeats,
        dir: run.params.dir.clone(),
        // The open-loop readers' parameters of the other experiments; the
        // standard workloads' own are in `params`.
        common: CommonParams {
            read_rate: 0.0,
            reader_threads: 0,
            warmup_s: 0.0,
            baseline_s: 0.0,
            duration_s: run.params.phase_seconds,
            memory_limit_bytes: run.params.memory_limit_bytes,
        },
        params: serde_json::to_value(run).map_err(|e| e.to_string())?,
        sampler: SamplerConfig::default(),
    })
}

/// `quietkv bench --experiment standard`.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    let modes = standard_modes(args)?;
    if modes.is_empty() {
        return Err("no modes given".into());
    }
    let scale = Scale::parse(&args.scale)?;
    let sizes = args.value_size.clone().unwrap_or_else(|| vec![100]);
    if sizes.is_empty() || sizes.iter().any(|&v| v < 16) {
        return Err(format!(
            "--value-size must be at least 16 bytes (a value names its key and version), got {sizes:?}"
        ));
    }
    if args.repeats == 0 || args.keys == Some(0) {
        return Err("--keys and --repeats must be positive".into());
    }
    let phase_seconds = args.duration.unwrap_or(scale.phase_seconds);
    if !(phase_seconds > 0.0 && phase_seconds.is_finite()) {
        return Err(format!("--duration must be positive, got {phase_seconds}"));
    }
    let limit_mib = args.memory_limit_mib.unwrap_or(scale.memory_limit_mib);
    if limit_mib > 0 {
        cgroups_usable().map_err(|e| {
            format!("each run goes in a memory cgroup of {limit_mib} MiB (--memory-limit, the full scale's default), which needs root: {e}; pass --memory-limit 0 to run without one")
        })?;
    }
    let memory_limit_bytes = (limit_mib > 0).then_some(limit_mib << 20);
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    let scratch = Scratch(base.join(format!("quietkv-standard-scratch-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| format!("cannot create {}: {e}", scratch.0.display()))?;
    crate::experiments::modes::check_modes(&scratch.0, &modes)?;
    let out = out_dir(args)?;
    let names = report_names(&modes);
    // Each run in a worker process of its own, placed in a fresh memory
    // cgroup (at the limit) before it starts: no run inherits what another
    // left in the allocator, and whatever a run allocates is charged to its
    // own limit. The page cache is not dropped between runs: each run
    // writes its own databases.
    let mut runner = Runner::new(RunnerOptions {
        memory_limit: memory_limit_bytes,
        drop_caches: false,
    });
    let mut eta = Eta {
        seconds: 0.0,
        runs: modes.len() as u32 * args.repeats * sizes.len() as u32,
    };
    let mut sections = Vec::new();
    for (si, &value_size) in sizes.iter().enumerate() {
        let keys = args.keys.unwrap_or_else(|| scale.keys_for(value_size));
        let params = Params {
            keys,
            value_size,
            phase_seconds,
            // YCSB's records do not depend on the value size: once.
            ycsb_records: if si == 0 && !args.no_ycsb {
                ycsb_records(keys, value_size)
            } else {
                0
            },
            memory_limit_bytes,
            dir: scratch.0.clone(),
        };
        let mut runs: Vec<Run> = Vec::new();
        campaign::run(modes.len(), args.repeats, 0.0, &mut eta, |slot, eta| {
            let mi = slot.mode;
            let name = &names[mi];
            let run = RunParams {
                params: params.clone(),
                // The same requests for every configuration of a round.
                seed: 0x5EED_0000 + u64::from(slot.repeat),
                repeat: slot.repeat - 1,
            };
            let spec = worker_spec(&modes[mi], name, slot.repeat, args.repeats, &run)?;
            let status = format!("[standard] {name} #{}", slot.repeat - 1);
            let mut run: Run = campaign::in_worker_as(&mut runner, spec, status, eta)?;
            for p in &mut run.phases {
                p.judge(args.keep_disturbed);
            }
            let disturbed: Vec<&str> = run
                .phases
                .iter()
                .filter(|p| !p.disturbed.is_empty())
                .map(|p| p.workload.as_str())
                .collect();
            if !disturbed.is_empty() {
                crate::progress_line!(
                    "[standard] {name} #{}: the machine disturbed {}{}",
                    slot.repeat - 1,
                    disturbed.join(", "),
                    if args.keep_disturbed {
                        " (kept as asked)"
                    } else {
                        " (left out of the medians)"
                    }
                );
            }
            runs.push(run);
            Ok(Filed::Counted)
        })?;
        sections.push((params, runs));
    }

    let mach = machine(&scratch.0);
    let mut md = format!(
        "# quietkv standard workloads (db_bench, YCSB)\n\nMachine: {}\n\nEngines: {}\n\nConfigurations: {}\n\n{}\n\n{}\n\n{}\n\n",
        serde_json::to_string(&mach).unwrap_or_default(),
        engines_text(&modes),
        describe_modes(&scratch.0, &modes),
        settings_text(&modes),
        FIGURES_TEXT,
        disturbance_text(args.keep_disturbed)
    );
    let mut json_sections = Vec::new();
    for (p, runs) in &sections {
        let refs: Vec<&Run> = runs.iter().collect();
        let title = format!(
            "{}-byte values, {} keys ({:.0} MiB of keys and values){}, {} s per read phase, {}, {} repeat(s)",
            p.value_size,
            p.keys,
            (p.keys * (KEY_SIZE + p.value_size) as u64) as f64 / (1 << 20) as f64,
            if p.ycsb_records > 0 {
                format!("; YCSB {} records of {RECORD_BYTES} B", p.ycsb_records)
            } else {
                String::new()
            },
            p.phase_seconds,
            match p.memory_limit_bytes {
                Some(l) => format!("each run in a {} MiB memory cgroup (page cache and the process's memory)", l >> 20),
                None => "no memory limit".to_string(),
            },
            args.repeats
        );
        md.push_str(&section_markdown(&refs, &names, &title, &|w| {
            super::describe(w)
        }));
        json_sections.push(serde_json::json!({
            "value_size": p.value_size,
            "keys": p.keys,
            "ycsb_records": p.ycsb_records,
            "phase_seconds": p.phase_seconds,
            "memory_limit_bytes": p.memory_limit_bytes,
            "workloads": section_json(&refs, &names),
        }));
    }
    let json = serde_json::json!({
        "machine": mach,
        "experiment": "standard",
        "modes": names.iter().zip(&modes).map(|(n, m)| serde_json::json!({
            "name": n,
            "engine": m.engine(),
            "setup": dispatch!(m, |_c: E| E::setup_note()),
        })).collect::<Vec<_>>(),
        "settings": settings_text(&modes),
        "figures": FIGURES_TEXT,
        "disturbance_rule": disturbance_text(args.keep_disturbed),
        "repeats": args.repeats,
        "sections": json_sections,
        "runs": sections.iter().flat_map(|(_, r)| r.iter()).collect::<Vec<_>>(),
    });
    write_plain_report(&out, &md, &json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::tests::args;

    #[test]
    fn scales_and_ycsb_records_hold_the_same_bytes() {
        let q = Scale::parse("quick").unwrap();
        assert_eq!(q.keys_for(100), 1_000_000);
        assert_eq!(q.keys_for(4096), 116_000_000 / 4112);
        assert!(Scale::parse("full").unwrap().keys_for(100) > 10 * q.keys_for(100));
        assert!(Scale::parse("huge").is_err());
        assert_eq!(q.memory_limit_mib, 0);
        assert_eq!(Scale::parse("full").unwrap().memory_limit_mib, 1024);
        assert_eq!(ycsb_records(1_000_000, 100), 116_000_000 / 1040);
        assert_eq!(ycsb_records(10, 100), 100);
    }

    #[test]
    fn the_settings_say_what_each_keyspace_gets() {
        use crate::experiments::modes::parse_modes;
        let plain = parse_modes(&["auto".into()]).unwrap();
        assert!(!settings_text(&plain).contains("keyspace"));
        let spread = parse_modes(&["auto".into(), "auto+ks=4".into(), "auto+ks=3".into()]).unwrap();
        let t = settings_text(&spread);
        assert!(
            t.contains("ks=3: 21.3 MiB each, 64 MiB in all; ks=4: 16 MiB each, 64 MiB in all"),
            "{t}"
        );
    }

    #[test]
    fn every_built_engine_runs_unless_told_otherwise() {
        let m = report_names(&standard_modes(&args(&[])).unwrap());
        let built = built_engines();
        if built.len() == 1 {
            assert_eq!(m, ["auto"]);
        } else {
            assert_eq!(m.len(), built.len());
            assert_eq!(m[0], "quietkv:auto");
        }
        let m = report_names(&standard_modes(&args(&["--engines", "quietkv"])).unwrap());
        assert_eq!(m, ["auto"]);
        let a = args(&["--value-size", "100,4096", "--keys", "5"]);
        assert_eq!(a.value_size, Some(vec![100, 4096]));
        assert_eq!(a.keys, Some(5));
        assert!(!a.no_ycsb);
        assert!(args(&["--no-ycsb"]).no_ycsb);
    }
}
