//! `quietkv-raftkv bench-snapshot`: what sending a full snapshot costs the
//! reads a leader serves, with the snapshot file read and written through
//! the page cache (`buffered`) or in quietkv's Backup I/O class
//! (`backup`: direct where the probe allows).
//!
//! Each run copies a filled source (see `source`), starts the leader
//! process (see `leader`) inside a fresh memory cgroup (and a cgroup2
//! directory for its PSI), lets it serve open-loop reads of a hot set for
//! a baseline phase, then starts an empty node outside the cgroup and adds
//! it as a learner, which makes the leader stream it a snapshot of the
//! whole database while the reads go on. The cgroup's refaults and stall
//! time are taken around each phase. Modes alternate (buffered, backup,
//! buffered, backup, ...); every process and cgroup is removed after each
//! run, on error and on Ctrl-C.
//!
//! From the bottom up: `spec` (what the parent and the leader process
//! tell each other), `children` (the processes), `leader` (the leader
//! process), `source` (the filled database), `report`, and this module,
//! which runs the rounds.

mod children;
mod host;
pub mod leader;
mod peak;
mod report;
mod source;
pub mod spec;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use quietkv_bench::cgroup::{cgroups_usable, install_interrupt_handler, MemoryCgroup, PsiCgroup};
use quietkv_bench::disturbance::Rule;
use quietkv_bench::metrics::{read_memory_stat, read_psi};

use children::{bounded, LeaderProcess, NodeProcess};
use report::{Counters, Phase, Run, Setup};
use spec::{LeaderLine, LeaderSpec};

use crate::snapshot_sender::SendPriority;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchSnapshotArgs {
    /// Work directory: the filled source (kept and reused by later runs of
    /// the same size) and each run's nodes (removed after the run).
    #[arg(long)]
    pub dir: PathBuf,
    /// Where report.md and report.json go. Default: <dir>/report.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The database's size, MiB of values. Default 2048 (--quick: 8).
    #[arg(long)]
    pub db_mib: Option<u64>,
    /// Bytes of each value.
    #[arg(long, default_value_t = 4096)]
    pub value_bytes: usize,
    /// The leader's memory cgroup limit, MiB. Default 512 (--quick: 160):
    /// the leader's own memory is about 210 MiB, so 256 left its hot set
    /// no room.
    #[arg(long)]
    pub cgroup_mib: Option<u64>,
    /// Hot keys the readers read, spread over the key space. Default: as
    /// many as fill a quarter of the cgroup.
    #[arg(long)]
    pub hot_keys: Option<u64>,
    /// Reads per second, over all reader threads. Default 2000 (--quick:
    /// 500).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Reader threads in the leader process.
    #[arg(long, default_value_t = 4)]
    pub readers: usize,
    /// Run the joining node on this CPU alone and the leader on every
    /// other one, as if the joiner were another machine: on one machine
    /// the joiner's receiving and writing would otherwise take CPU from the
    /// leader's readers. Default: no pinning.
    #[arg(long)]
    pub joiner_cpu: Option<usize>,
    /// Run the joining node at this niceness (19: the lowest priority, so
    /// it takes only the CPU the leader leaves): another way, on a machine
    /// too small to pin, to keep the joiner's receiving and writing, which
    /// on a real cluster run on another machine, off the leader's readers.
    /// Default 0: the same priority as the leader.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub joiner_nice: i32,
    /// Run the joining node at the idle scheduling policy: it has a CPU
    /// only when the leader's threads leave one, and gives it up the
    /// moment one of them wakes (niceness only weighs it less). On a real
    /// cluster the joiner runs on another machine; this keeps its
    /// receiving and writing, which share this machine's CPUs only because
    /// the bench has one machine, out of the leader's readers' way.
    #[arg(long)]
    pub joiner_idle: bool,
    /// Seconds of the baseline phase. Default 30 (--quick: 2).
    #[arg(long)]
    pub baseline_secs: Option<f64>,
    /// The longest the reads of the snapshot phase go on; a snapshot still
    /// streaming then is noted in the report. Default 900 (--quick: 120).
    #[arg(long)]
    pub stream_cap_secs: Option<f64>,
    /// The largest piece openraft sends a snapshot in, bytes (up to
    /// 8 MiB). Default: a node's own default, 512 KiB.
    #[arg(long, default_value_t = crate::node::DEFAULT_SNAPSHOT_CHUNK_BYTES, value_parser = clap::value_parser!(u64).range(4096..=8 << 20))]
    pub chunk_bytes: u64,
    /// The leader's snapshot send budget, MiB/s (the node's
    /// `--snapshot-send-mib-per-sec`), the same in every mode; 0, the
    /// node's default, sends as fast as the chunks go.
    #[arg(long, default_value_t = 0)]
    pub send_mib_per_sec: u64,
    /// The CPU priority the leader sends the snapshot at (the node's
    /// `--snapshot-send-priority`), the same in every mode.
    #[arg(long, value_enum, default_value_t = SendPriority::Idle)]
    pub send_priority: SendPriority,
    /// Rounds; each runs every mode once, in turn.
    #[arg(long)]
    pub repeats: Option<u32>,
    /// Modes, in the order each round runs them.
    #[arg(long, value_delimiter = ',', default_value = "buffered,backup")]
    pub modes: Vec<String>,
    /// A tiny scale for a smoke test: seconds, not minutes; its numbers
    /// mean nothing.
    #[arg(long)]
    pub quick: bool,
    /// Keep each run's node directories and logs.
    #[arg(long)]
    pub keep: bool,
    /// A run the machine disturbed (the host's CPU steal, another
    /// process's CPU, or the disk held by the host, past the engine
    /// benchmark's limits, in its baseline or its stream) is set aside and
    /// run again, up to this many times in the whole invocation.
    #[arg(long, default_value_t = 3)]
    pub max_reruns: u32,
    /// Count disturbed runs among the results (each noted with its
    /// reasons): for smoke tests on a busy machine, never for figures.
    #[arg(long)]
    pub keep_disturbed: bool,
}

/// The settings after defaults and --quick.
struct Plan {
    setup: Setup,
    dir: PathBuf,
    out: PathBuf,
    keep: bool,
}

fn plan(args: &BenchSnapshotArgs) -> Result<Plan, String> {
    let q = args.quick;
    let db_mib = args.db_mib.unwrap_or(if q { 8 } else { 2048 });
    if args.value_bytes == 0 || args.value_bytes > 1 << 20 {
        return Err(format!(
            "--value-bytes {}: give 1 to 1048576",
            args.value_bytes
        ));
    }
    let keys = (db_mib << 20) / args.value_bytes as u64;
    if keys == 0 {
        return Err("--db-mib is smaller than one value".into());
    }
    let cgroup_mib = args.cgroup_mib.unwrap_or(if q { 160 } else { 512 });
    let hot_keys = args
        .hot_keys
        .unwrap_or((cgroup_mib << 20) / 4 / args.value_bytes as u64)
        .clamp(1, keys);
    for m in &args.modes {
        m.parse::<quietkv_raft::SnapshotIo>()?;
    }
    if args.modes.is_empty() {
        return Err("--modes is empty".into());
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(c) = args.joiner_cpu {
        if c >= cpus || cpus < 2 {
            return Err(format!(
                "--joiner-cpu {c}: this machine has CPUs 0..{cpus}, and the leader needs one left"
            ));
        }
    }
    let leader_cpus: Vec<usize> = match args.joiner_cpu {
        Some(c) => (0..cpus).filter(|&x| x != c).collect(),
        None => Vec::new(),
    };
    let rate = args.rate.unwrap_or(if q { 500.0 } else { 2000.0 });
    if !(rate > 0.0 && rate.is_finite()) || args.readers == 0 {
        return Err("--rate and --readers must be positive".into());
    }
    Ok(Plan {
        setup: Setup {
            keys,
            value_bytes: args.value_bytes,
            cgroup_bytes: cgroup_mib << 20,
            hot_keys,
            rate,
            readers: args.readers,
            baseline_secs: args.baseline_secs.unwrap_or(if q { 2.0 } else { 30.0 }),
            stream_cap_secs: args
                .stream_cap_secs
                .unwrap_or(if q { 120.0 } else { 900.0 }),
            chunk_bytes: args.chunk_bytes,
            send_mib_per_sec: args.send_mib_per_sec,
            send_priority: args.send_priority,
            repeats: args.repeats.unwrap_or(if q { 1 } else { 3 }).max(1),
            modes: args.modes.clone(),
            psi_source: String::new(),
            joiner_cpu: args.joiner_cpu,
            joiner_nice: args.joiner_nice,
            joiner_idle: args.joiner_idle,
            leader_cpus,
            max_reruns: args.max_reruns,
            keep_disturbed: args.keep_disturbed,
        },
        out: args.out.clone().unwrap_or_else(|| args.dir.join("report")),
        dir: args.dir.clone(),
        keep: args.keep,
    })
}

pub async fn run(args: BenchSnapshotArgs) -> Result<(), String> {
    install_interrupt_handler();
    let mut plan = plan(&args)?;
    cgroups_usable().map_err(|why| {
        format!("bench-snapshot confines the leader in a memory cgroup, which needs root: {why}")
    })?;
    std::fs::create_dir_all(&plan.dir)
        .map_err(|e| format!("creating {}: {e}", plan.dir.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("building the HTTP client: {e}"))?;
    let source = source::prepare(
        &exe,
        &plan.dir,
        plan.setup.keys,
        plan.setup.value_bytes,
        &client,
    )
    .await?;
    eprintln!(
        "bench-snapshot: source of {} keys, snapshot {} MiB",
        source.keys,
        source.snapshot_bytes >> 20
    );
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    let rule = Rule {
        keep_disturbed: plan.setup.keep_disturbed,
        ..Rule::default()
    };
    let mut reruns_left = plan.setup.max_reruns;
    for round in 0..plan.setup.repeats {
        for mode in plan.setup.modes.clone() {
            loop {
                let (mut run, psi_source) =
                    run_and_check(&exe, &plan, &client, &mode, round, &mut notes).await?;
                plan.setup.psi_source = psi_source;
                run.disturbed = rule.host_reasons("baseline", &run.baseline.host);
                run.disturbed
                    .extend(rule.host_reasons("stream", &run.stream.host));
                let again = !run.disturbed.is_empty() && !rule.keep_disturbed && reruns_left > 0;
                if !run.disturbed.is_empty() {
                    let what = if rule.keep_disturbed {
                        "kept as asked"
                    } else if again {
                        "set aside and run again"
                    } else {
                        "set aside, no reruns left"
                    };
                    let note = format!(
                        "round {round} {mode}: disturbed ({}); {what}",
                        run.disturbed.join("; ")
                    );
                    eprintln!("bench-snapshot: {note}");
                    notes.push(note);
                }
                runs.push(run);
                if !again {
                    break;
                }
                reruns_left -= 1;
            }
        }
    }
    if plan.setup.repeats < 3 {
        notes.push(format!(
            "{} round(s): a smoke test, not a result",
            plan.setup.repeats
        ));
    }
    report::write(&plan.out, &plan.setup, &runs, &notes)?;
    println!("{}", report::markdown(&plan.setup, &runs, &notes));
    println!("report: {}", plan.out.join("report.md").display());
    Ok(())
}

/// One run of `mode` in `round`, its directory removed afterwards unless
/// asked to keep it, with notes on what it did not do as planned; and the
/// PSI source it used.
async fn run_and_check(
    exe: &Path,
    plan: &Plan,
    client: &reqwest::Client,
    mode: &str,
    round: u32,
    notes: &mut Vec<String>,
) -> Result<(Run, String), String> {
    eprintln!("bench-snapshot: round {round}, {mode}");
    let run_dir = plan.dir.join(format!("run-{round}-{mode}"));
    let result = one_run(exe, plan, client, &run_dir, mode, round).await;
    if !plan.keep {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    let (run, psi_source) = result.map_err(|e| {
        if quietkv_bench::cgroup::interrupted() {
            format!("interrupted ({e}); the run's processes, cgroups and directory are removed")
        } else {
            e
        }
    })?;
    if mode == "backup" && run.transfer_mode != "direct" {
        let note = format!(
            "backup moved the snapshot as {} here, not direct (the probe of the snapshot directory found no usable O_DIRECT)",
            run.transfer_mode
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    if run.snapshot_secs > run.stream.reads.elapsed_s + 1.0 {
        notes.push(format!(
            "round {round} {mode}: the reads stopped at --stream-cap-secs ({:.0} s) before the snapshot was done ({:.0} s)",
            run.stream.reads.elapsed_s, run.snapshot_secs
        ));
    }
    if run.stream.reads.errors > 0 || run.baseline.reads.errors > 0 {
        notes.push(format!(
            "round {round} {mode}: read errors (first: {})",
            run.stream
                .reads
                .first_error
                .as_deref()
                .or(run.baseline.reads.first_error.as_deref())
                .unwrap_or("?")
        ));
    }
    Ok((run, psi_source))
}

/// The leader's cgroups: memory (limit and counters) and, on a v1 memory
/// controller, a cgroup2 directory for PSI. Removed when dropped.
struct Confinement {
    memory: MemoryCgroup,
    psi: Option<PsiCgroup>,
    psi_file: PathBuf,
}

impl Confinement {
    fn create(limit: u64) -> Result<Confinement, String> {
        let memory = MemoryCgroup::create(limit)?;
        let (psi, psi_file) = match memory.pressure_file() {
            Some(f) => (None, f),
            None => {
                let p = PsiCgroup::create()?;
                let f = p.pressure_file();
                (Some(p), f)
            }
        };
        Ok(Confinement {
            memory,
            psi,
            psi_file,
        })
    }

    fn add(&mut self, pid: u32) -> Result<(), String> {
        self.memory.add_pid(pid)?;
        if let Some(p) = self.psi.as_mut() {
            p.add_pid(pid)?;
        }
        Ok(())
    }

    fn counters(&self) -> Result<Counters, String> {
        Ok(Counters {
            memory: read_memory_stat(self.memory.dir()).ok_or_else(|| {
                format!("cannot read {}/memory.stat", self.memory.dir().display())
            })?,
            psi: read_psi(&self.psi_file)
                .ok_or_else(|| format!("cannot read {}", self.psi_file.display()))?,
        })
    }
}

/// Generous for a busy machine.
const ANSWER_WAIT: Duration = Duration::from_secs(300);
/// The snapshot of the full scale takes a minute or two; this only stops
/// a run that hangs.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(4 * 3600);

async fn one_run(
    exe: &Path,
    plan: &Plan,
    client: &reqwest::Client,
    run_dir: &Path,
    mode: &str,
    round: u32,
) -> Result<(Run, String), String> {
    let setup = &plan.setup;
    source::copy_node(&plan.dir, &run_dir.join("leader"))?;
    let mut confinement = Confinement::create(setup.cgroup_bytes)?;
    let psi_source = if confinement.psi.is_some() {
        "memory.pressure of a cgroup2 directory holding only the leader process".to_string()
    } else {
        "memory.pressure of the leader's memory cgroup".to_string()
    };
    let leader_log = run_dir.join("leader.log");
    let mut leader = LeaderProcess::spawn(exe, &leader_log, &setup.leader_cpus)?;
    let pid = leader.pid()?;
    confinement.add(pid)?;
    let anon = peak::AnonPeak::start(confinement.memory.dir());
    let spec = LeaderSpec {
        dir: run_dir.join("leader"),
        snapshot_io: mode.to_string(),
        keys: setup.keys,
        hot_keys: setup.hot_keys,
        rate: setup.rate,
        readers: setup.readers,
        chunk_bytes: setup.chunk_bytes,
        send_mib_per_sec: setup.send_mib_per_sec,
        send_priority: setup.send_priority,
        seed: 0x5eed + u64::from(round),
    };
    let line = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
    leader.send(&line).await?;
    let ready = match leader
        .next("the leader starting", ANSWER_WAIT, &leader_log)
        .await?
    {
        LeaderLine::Ready(r) => r,
        other => return Err(format!("the leader answered {other:?}, not ready")),
    };

    let host = host::HostWatch::start(&plan.dir);
    let mut ours = vec![std::process::id(), pid];
    let h0 = host.mark(&ours);
    let c0 = confinement.counters()?;
    let start_anon_peak = anon.take();
    leader
        .send(&format!("start baseline {}", setup.baseline_secs + 5.0))
        .await?;
    bounded(
        "the baseline",
        Duration::from_secs_f64(setup.baseline_secs + 5.0),
        tokio::time::sleep(Duration::from_secs_f64(setup.baseline_secs)),
    )
    .await?;
    leader.send("end").await?;
    let baseline = phase_reads(&mut leader, &leader_log).await?;
    let c1 = confinement.counters()?;
    let h1 = host.mark(&ours);
    let baseline_anon_peak = anon.take();

    let joiner_args: Vec<String> = vec![
        "--id".into(),
        "2".into(),
        "--addr".into(),
        "127.0.0.1:0".into(),
        "--dir".into(),
        run_dir.join("joiner").display().to_string(),
        "--snapshot-every".into(),
        "0".into(),
        "--snapshot-io".into(),
        mode.into(),
        "--snapshot-chunk-bytes".into(),
        setup.chunk_bytes.to_string(),
    ];
    let joiner_cpus: Vec<usize> = setup.joiner_cpu.into_iter().collect();
    let joiner = NodeProcess::start_on(
        exe,
        &joiner_args,
        &run_dir.join("joiner.log"),
        &joiner_cpus,
        setup.joiner_nice,
        setup.joiner_idle,
    )
    .await?;
    ours.extend(joiner.pid());
    let h_stream = host.mark(&ours);
    let c_stream = confinement.counters()?;
    anon.take();
    leader
        .send(&format!("start stream {}", setup.stream_cap_secs))
        .await?;
    let started = Instant::now();
    let caught_up = bounded(
        "the learner catching up",
        SNAPSHOT_WAIT,
        catch_up(client, &ready.addr, &joiner.addr),
    )
    .await
    .and_then(|r| r);
    let snapshot_secs = started.elapsed().as_secs_f64();
    leader.send("end").await?;
    let stream = phase_reads(&mut leader, &leader_log).await?;
    let c2 = confinement.counters()?;
    let h2 = host.mark(&ours);
    let stream_anon_peak = anon.take();
    let usage_peak = peak::usage_peak_bytes(confinement.memory.dir()).unwrap_or(0);
    drop(anon);
    caught_up?;
    joiner.stop().await;
    leader.stop().await;
    drop(confinement);

    let sent = run_dir.join("leader/snapshots/current.snap");
    let received = run_dir.join("joiner/snapshots/current.snap");
    let size = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.len())
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let (snapshot_bytes, received_bytes) = (size(&sent)?, size(&received)?);
    if snapshot_bytes != received_bytes {
        return Err(format!(
            "the joiner's snapshot ({received_bytes} bytes) is not the leader's ({snapshot_bytes} bytes)"
        ));
    }
    Ok((
        Run {
            mode: mode.to_string(),
            round,
            transfer_mode: ready.transfer_mode,
            leader_transfer_read_bytes: stream
                .transfer_read_bytes
                .saturating_sub(baseline.transfer_read_bytes),
            baseline: Phase::new(baseline, &c0, &c1)
                .with_anon_peak(baseline_anon_peak)
                .with_host(host::signs(&h0, &h1)),
            stream: Phase::new(stream, &c_stream, &c2)
                .with_anon_peak(stream_anon_peak)
                .with_host(host::signs(&h_stream, &h2)),
            disturbed: Vec::new(),
            start_anon_peak_bytes: start_anon_peak,
            usage_peak_bytes: usage_peak,
            snapshot_bytes,
            snapshot_secs,
        },
        psi_source,
    ))
}

async fn metrics(client: &reqwest::Client, addr: &str) -> Option<serde_json::Value> {
    client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()
}

/// Adds the joiner as a learner of the leader and waits until it has
/// installed a snapshot and applied everything the leader had then.
/// (openraft's blocking `add_learner` may answer before the snapshot is
/// sent, so the joiner's own metrics are what says it is done.)
async fn catch_up(client: &reqwest::Client, leader: &str, joiner: &str) -> Result<(), String> {
    let added = client
        .post(format!("http://{leader}/add-learner"))
        .json(&serde_json::json!({ "id": 2, "addr": joiner }))
        .send()
        .await
        .map_err(|e| format!("adding the learner: {e}"))?;
    if !added.status().is_success() {
        let status = added.status();
        let text = added.text().await.unwrap_or_default();
        return Err(format!("adding the learner: {status}: {text}"));
    }
    let target = metrics(client, leader)
        .await
        .and_then(|m| m["last_log_index"].as_u64())
        .ok_or("the leader's metrics have no last_log_index")?;
    loop {
        if let Some(m) = metrics(client, joiner).await {
            let applied = m["last_applied"]["index"].as_u64();
            if m["snapshot"]["index"].as_u64().is_some() && applied >= Some(target) {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn phase_reads(leader: &mut LeaderProcess, log: &Path) -> Result<spec::PhaseReads, String> {
    match leader.next("a phase's reads", ANSWER_WAIT, log).await? {
        LeaderLine::Phase(p) => Ok(*p),
        other => Err(format!("the leader answered {other:?}, not a phase")),
    }
}
