//! Memory and cpuacct cgroups for the measured process, PSI directories, and the
//! interrupt flag that lets the runner clean them up on Ctrl-C.
//!
//! Only directories this module created are ever written to (besides moving
//! our own child processes back into the cgroup they came from), and every
//! one is removed on drop: pids still inside are moved back to the parent
//! first, then the directory is removed, retrying briefly while the kernel
//! finishes tearing down an exited process.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Prefix of every directory the benchmark creates; followed by the
/// creating process's pid and a counter.
pub const DIR_PREFIX: &str = "quietkv-bench-";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// SIGINT and SIGTERM set a flag instead of killing the process; the runner
/// checks [`interrupted`] and cleans up.
pub fn install_interrupt_handler() {
    crate::process::catch_interrupts();
}

/// Whether SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    crate::process::interrupted()
}

/// Which cgroup interface a directory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Mount points of the cgroup hierarchies, from `/proc/self/mountinfo`.
#[derive(Debug, Default, Clone)]
pub struct Mounts {
    /// The v1 hierarchy holding the memory controller.
    pub v1_memory: Option<PathBuf>,
    /// The v1 hierarchy holding the cpuacct controller.
    pub v1_cpuacct: Option<PathBuf>,
    /// Whether that hierarchy also holds the cpu controller (systemd's
    /// `cpu,cpuacct`): a child there is also a CFS group of its own.
    pub v1_cpuacct_with_cpu: bool,
    /// The cgroup2 hierarchy (unified, or the only one on a v2 system).
    pub v2: Option<PathBuf>,
}

pub fn parse_mountinfo(text: &str) -> Mounts {
    let mut m = Mounts::default();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split_whitespace().nth(4);
        let mut r = right.split_whitespace();
        let (fstype, _src, opts) = (r.next(), r.next(), r.next().unwrap_or(""));
        let (Some(fstype), Some(mp)) = (fstype, mount_point) else {
            continue;
        };
        let has = |c: &str| opts.split(',').any(|o| o == c);
        // A v1 hierarchy may hold several controllers: check each.
        if fstype == "cgroup" && has("memory") {
            m.v1_memory = Some(PathBuf::from(mp));
        }
        if fstype == "cgroup" && has("cpuacct") {
            m.v1_cpuacct = Some(PathBuf::from(mp));
            m.v1_cpuacct_with_cpu = has("cpu");
        }
        if fstype == "cgroup2" && m.v2.is_none() {
            m.v2 = Some(PathBuf::from(mp));
        }
    }
    m
}

/// From `/proc/PID/cgroup`: the v1 memory cgroup path and the v2 path.
pub fn parse_proc_cgroup(text: &str) -> (Option<String>, Option<String>) {
    let (mut v1, mut v2) = (None, None);
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_id, ctrls, path) = (f.next(), f.next().unwrap_or(""), f.next());
        if ctrls.is_empty() {
            v2 = path.map(str::to_string);
        } else if ctrls.split(',').any(|c| c == "memory") {
            v1 = path.map(str::to_string);
        }
    }
    (v1, v2)
}

/// From `/proc/PID/cgroup`: the path of the v1 hierarchy that holds
/// `controller`.
pub fn parse_proc_cgroup_v1(text: &str, controller: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_id, ctrls, path) = (f.next(), f.next().unwrap_or(""), f.next()?);
        ctrls
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    })
}

/// Whether the cgroup directory `dir` lists `pid` in its `cgroup.procs`.
pub fn lists_pid(dir: &Path, pid: u32) -> bool {
    let pid = pid.to_string();
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.split_whitespace().any(|p| p == pid))
        .unwrap_or(false)
}

fn mounts() -> Mounts {
    parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

fn own_paths() -> (Option<String>, Option<String>) {
    parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default())
}

/// The `memory.stat` of the memory cgroup this process is in now (v1 where
/// the memory controller is mounted there, else cgroup2); `None` where
/// there is none.
pub fn own_memory_stat_file() -> Option<PathBuf> {
    let m = mounts();
    let (v1, v2) = own_paths();
    let v1 = m.v1_memory.zip(v1).map(|(mnt, p)| join_cg(&mnt, &p));
    let v2 = m.v2.zip(v2).map(|(mnt, p)| join_cg(&mnt, &p));
    [v1, v2]
        .into_iter()
        .flatten()
        .map(|d| d.join("memory.stat"))
        .find(|f| f.exists())
}

fn join_cg(mount: &Path, path: &str) -> PathBuf {
    mount.join(path.trim_start_matches('/'))
}

fn write_file(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value)
        .map_err(|e| format!("cannot write '{value}' to {}: {e}", path.display()))
}

fn make_child(parent: &Path) -> Result<PathBuf, String> {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = parent.join(format!("{DIR_PREFIX}{}-{n}", std::process::id()));
    std::fs::create_dir(&dir)
        .map_err(|e| format!("cannot create cgroup {}: {e}", dir.display()))?;
    Ok(dir)
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
                    .unwrap_or(false)
            })
            .unwrap_or(true)
}

/// Moves our pids back to `parent`, then removes `dir`, retrying while the
/// kernel still counts an exiting task.
fn teardown(dir: &Path, parent: &Path, pids: &[u32]) {
    for &pid in pids {
        if pid_alive(pid) {
            if let Err(e) = write_file(&parent.join("cgroup.procs"), &pid.to_string()) {
                eprintln!("quietkv bench: {e}");
            }
        }
    }
    let mut last = None;
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => last = Some(e),
        }
        // Anything still inside that we did not put there (a grandchild)
        // is moved out too: the directory is ours and must go.
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = std::fs::write(parent.join("cgroup.procs"), pid);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "quietkv bench: could not remove cgroup {}: {}",
        dir.display(),
        last.map(|e| e.to_string()).unwrap_or_default()
    );
}

/// The `oom_kill` count of a memory cgroup's `memory.oom_control` (v1) or
/// `memory.events` (v2).
pub fn parse_oom_kills(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|v| v.trim().parse().ok())
}

/// A memory cgroup that limits how much memory (and so page cache) its
/// processes may use: a v1 child of our own memory cgroup with
/// `memory.limit_in_bytes`, or a v2 child with `memory.max`.
#[derive(Debug)]
pub struct MemoryCgroup {
    dir: PathBuf,
    parent: PathBuf,
    version: CgroupVersion,
    limit: u64,
    pids: Vec<u32>,
}

impl MemoryCgroup {
    pub fn create(limit_bytes: u64) -> Result<MemoryCgroup, String> {
        let m = mounts();
        let (v1, v2) = own_paths();
        if let (Some(mount), Some(path)) = (&m.v1_memory, &v1) {
            let parent = join_cg(mount, path);
            let dir = make_child(&parent)?;
            let cg = MemoryCgroup {
                dir,
                parent,
                version: CgroupVersion::V1,
                limit: limit_bytes,
                pids: Vec::new(),
            };
            write_file(
                &cg.dir.join("memory.limit_in_bytes"),
                &limit_bytes.to_string(),
            )?;
            return Ok(cg);
        }
        if let (Some(mount), Some(path)) = (&m.v2, &v2) {
            let parent = join_cg(mount, path);
            let ctrls =
                std::fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
            if !ctrls.split_whitespace().any(|c| c == "memory") {
                return Err(format!(
                    "the memory controller is not available in cgroup {}",
                    parent.display()
                ));
            }
            let sub =
                std::fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
            if !sub.split_whitespace().any(|c| c == "memory") {
                write_file(&parent.join("cgroup.subtree_control"), "+memory").map_err(|e| {
                    format!("{e} (a v2 cgroup that holds processes cannot delegate the memory controller to a child)")
                })?;
            }
            let dir = make_child(&parent)?;
            let cg = MemoryCgroup {
                dir,
                parent,
                version: CgroupVersion::V2,
                limit: limit_bytes,
                pids: Vec::new(),
            };
            write_file(&cg.dir.join("memory.max"), &limit_bytes.to_string())?;
            return Ok(cg);
        }
        Err("no memory cgroup controller found (neither a v1 memory hierarchy nor cgroup2)".into())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn limit_bytes(&self) -> u64 {
        self.limit
    }

    pub fn add_pid(&mut self, pid: u32) -> Result<(), String> {
        write_file(&self.dir.join("cgroup.procs"), &pid.to_string())?;
        self.pids.push(pid);
        Ok(())
    }

    /// How many processes the kernel's OOM killer has killed in this
    /// cgroup for going over its limit; `None` if the count cannot be read.
    pub fn oom_kills(&self) -> Option<u64> {
        let file = match self.version {
            CgroupVersion::V1 => "memory.oom_control",
            CgroupVersion::V2 => "memory.events",
        };
        parse_oom_kills(&std::fs::read_to_string(self.dir.join(file)).ok()?)
    }

    /// On cgroup v2 the memory cgroup has its own `memory.pressure`.
    pub fn pressure_file(&self) -> Option<PathBuf> {
        let p = self.dir.join("memory.pressure");
        (self.version == CgroupVersion::V2 && p.exists()).then_some(p)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        teardown(&self.dir, &self.parent, &self.pids);
    }
}

/// A cgroup2 directory that exists only for its `memory.pressure` (PSI of
/// the processes in it), for machines whose memory controller is on v1.
#[derive(Debug)]
pub struct PsiCgroup {
    dir: PathBuf,
    parent: PathBuf,
    pids: Vec<u32>,
}

impl PsiCgroup {
    pub fn create() -> Result<PsiCgroup, String> {
        let m = mounts();
        let (_, v2) = own_paths();
        let (Some(mount), Some(path)) = (m.v2, v2) else {
            return Err("no cgroup2 hierarchy mounted".into());
        };
        let parent = join_cg(&mount, &path);
        let dir = make_child(&parent)?;
        let cg = PsiCgroup {
            dir,
            parent,
            pids: Vec::new(),
        };
        if !cg.pressure_file().exists() {
            return Err(format!(
                "{} has no memory.pressure (kernel without PSI, or psi=0)",
                cg.dir.display()
            ));
        }
        Ok(cg)
    }

    pub fn pressure_file(&self) -> PathBuf {
        self.dir.join("memory.pressure")
    }

    pub fn add_pid(&mut self, pid: u32) -> Result<(), String> {
        write_file(&self.dir.join("cgroup.procs"), &pid.to_string())?;
        self.pids.push(pid);
        Ok(())
    }
}

impl Drop for PsiCgroup {
    fn drop(&mut self) {
        teardown(&self.dir, &self.parent, &self.pids);
    }
}

/// A v1 cpuacct cgroup that counts the CPU time of the processes in it, as
/// the raw per-tick user and system split (`cpuacct.usage_user`,
/// `cpuacct.usage_sys`). Those are the counters the kernel does not rescale:
/// `/proc/PID/stat` and `getrusage` scale user and system time so that they
/// sum to the precise runtime and never decrease, which can hide a phase's
/// system time entirely (see `cpu`). cgroup v2's `cpu.stat` is rescaled
/// the same way, so there is no v2 counterpart.
#[derive(Debug)]
pub struct CpuacctCgroup {
    dir: PathBuf,
    parent: PathBuf,
    pids: Vec<u32>,
}

impl CpuacctCgroup {
    /// A new child of the cpuacct cgroup this process started in (not of
    /// one it was moved into since, so cgroups made while the process sits
    /// in a [`crate::process_cpu::ProcessCpu`] one are siblings, not nested).
    pub fn create() -> Result<CpuacctCgroup, String> {
        let parent = original_cpuacct_parent()?;
        let dir = make_child(&parent)?;
        let cg = CpuacctCgroup {
            dir,
            parent,
            pids: Vec::new(),
        };
        if crate::cpu::read_cpuacct(&cg.dir).is_none() {
            return Err(format!(
                "{} has no cpuacct.usage_user / cpuacct.usage_sys (kernel older than 4.7?)",
                cg.dir.display()
            ));
        }
        Ok(cg)
    }

    /// Whether `pid` is in this cgroup now.
    pub fn holds(&self, pid: u32) -> bool {
        lists_pid(&self.dir, pid)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves `pid` (every thread of it) into the cgroup.
    pub fn add_pid(&mut self, pid: u32) -> Result<(), String> {
        write_file(&self.dir.join("cgroup.procs"), &pid.to_string())?;
        self.pids.push(pid);
        Ok(())
    }
}

/// The directory of the v1 cpuacct cgroup this process was in when it
/// first asked, once it is known to give raw user/system times.
fn original_cpuacct_parent() -> Result<PathBuf, String> {
    static PARENT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    PARENT
        .get_or_init(|| {
            let m = mounts();
            let mount = m.v1_cpuacct.ok_or("no v1 cpuacct hierarchy mounted")?;
            if m.v1_cpuacct_with_cpu {
                // A child would be a CFS group of its own, competing as one
                // entity against kswapd and write-back: it would change
                // what the benchmark measures.
                return Err(format!(
                    "cpuacct shares the hierarchy {} with the cpu controller, where a child cgroup would change CPU scheduling",
                    mount.display()
                ));
            }
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            if !cpuacct_split_is_raw(&release) {
                return Err(format!(
                    "kernel {} is older than 5.16, whose cpuacct.usage_sys missed most system time",
                    release.trim()
                ));
            }
            let own = parse_proc_cgroup_v1(
                &std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
                "cpuacct",
            )
            .ok_or("this process is in no v1 cpuacct cgroup")?;
            Ok(join_cg(&mount, &own))
        })
        .clone()
}

/// Whether kernel `release` (`uname -r`) splits cpuacct's usage into user
/// and system from the scheduler's tick counts. Before 5.16 ("sched/cpuacct:
/// Fix user/system in shown cpuacct.usage*") the split followed the mode of
/// the saved user registers, so time in system calls counted as user.
pub fn cpuacct_split_is_raw(release: &str) -> bool {
    let mut v = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|x| x.parse::<u32>().ok());
    match (v.next().flatten(), v.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (5, 16),
        _ => false,
    }
}

impl Drop for CpuacctCgroup {
    fn drop(&mut self) {
        teardown(&self.dir, &self.parent, &self.pids);
    }
}

/// Whether this process may create cgroups at all (root), with the reason
/// when not.
pub fn cgroups_usable() -> Result<(), String> {
    if quietio::sys::effective_uid() != 0 {
        return Err("not running as root".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::read_cpuacct;
    use crate::metrics::{parse_memory_stat, parse_psi};

    /// The pids in the cgroup directory `dir` now.
    fn procs(dir: &Path) -> Vec<u32> {
        std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }
    use std::process::{Command, Stdio};

    #[test]
    fn parses_mountinfo_and_proc_cgroup() {
        let mi = "35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n\
                  36 25 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                  37 25 0:32 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n";
        let m = parse_mountinfo(mi);
        assert_eq!(m.v1_memory.unwrap(), PathBuf::from("/sys/fs/cgroup/memory"));
        assert_eq!(m.v2.unwrap(), PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(m.v1_cpuacct, None);
        let both = "38 25 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let m = parse_mountinfo(both);
        assert_eq!(
            m.v1_cpuacct.unwrap(),
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
        );
        assert!(m.v1_cpuacct_with_cpu);
        let alone = "38 25 0:33 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n\
                     39 25 0:34 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory,cpuset\n";
        let m = parse_mountinfo(alone);
        assert!(m.v1_cpuacct.is_some() && !m.v1_cpuacct_with_cpu);
        assert_eq!(m.v1_memory.unwrap(), PathBuf::from("/sys/fs/cgroup/memory"));
        // One hierarchy with both memory and cpuacct is found for both.
        let shared = "40 25 0:35 / /cg rw - cgroup cgroup rw,memory,cpuacct\n";
        let m = parse_mountinfo(shared);
        assert_eq!(m.v1_memory, m.v1_cpuacct);
        assert!(m.v1_memory.is_some());
        let pc = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n";
        let (v1, v2) = parse_proc_cgroup(pc);
        assert_eq!(v1.as_deref(), Some("/process_api/abc"));
        assert_eq!(v2.as_deref(), Some("/"));
        assert_eq!(parse_proc_cgroup_v1(pc, "cpu").as_deref(), Some("/"));
        assert!(cpuacct_split_is_raw("6.18.0-rc1\n"));
        assert!(cpuacct_split_is_raw("5.16.0"));
        assert!(!cpuacct_split_is_raw("5.15.120-generic"));
        assert!(!cpuacct_split_is_raw("4.19.0"));
        assert!(!cpuacct_split_is_raw("weird"));
        assert_eq!(parse_proc_cgroup_v1(pc, "cpuacct"), None);
        let shared = "3:cpu,cpuacct:/user.slice\n";
        assert_eq!(
            parse_proc_cgroup_v1(shared, "cpuacct").as_deref(),
            Some("/user.slice")
        );
    }

    fn skip_reason() -> Option<String> {
        if let Err(e) = cgroups_usable() {
            return Some(e);
        }
        let m = mounts();
        if m.v1_memory.is_none() && m.v2.is_none() {
            return Some("no cgroup hierarchy".into());
        }
        None
    }

    /// CI has root and cgroups: a test that needs them must not pass there
    /// by not running.
    fn skip(reason: &str) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to run this test, but: {reason}"
        );
        eprintln!("skipping: {reason}");
    }

    /// `sh -c script` with its stdin piped: the scripts start with
    /// `read go`, so nothing runs until the test has placed the child in
    /// its cgroup and written the line.
    fn shell_waiting_for_go(script: &str) -> std::process::Child {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// A memory cgroup of `limit` bytes for a test, or `None` (said, and
    /// refused under CI) where this machine cannot make one.
    fn memory_cgroup_for_test(limit: u64) -> Option<MemoryCgroup> {
        if let Some(why) = skip_reason() {
            skip(&why);
            return None;
        }
        match MemoryCgroup::create(limit) {
            Ok(cg) => Some(cg),
            Err(e) => {
                skip(&format!("no memory cgroup here: {e}"));
                None
            }
        }
    }

    /// The limit the kernel holds for the cgroup, read back from its file.
    fn kernel_limit(cg: &MemoryCgroup) -> u64 {
        let file = match cg.version {
            CgroupVersion::V1 => "memory.limit_in_bytes",
            CgroupVersion::V2 => "memory.max",
        };
        std::fs::read_to_string(cg.dir.join(file))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn memory_cgroup_holds_a_child_and_leaves_nothing() {
        const LIMIT: u64 = 64 << 20;
        let Some(mut cg) = memory_cgroup_for_test(LIMIT) else {
            return;
        };
        let dir = cg.dir.clone();
        assert!(dir.exists());
        assert_eq!(kernel_limit(&cg), LIMIT);
        // The child writes 4x the limit through the page cache only once it
        // is in the cgroup (it waits for a line on stdin), so the cgroup's
        // page cache must rise, and stay under the limit.
        let scratch = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let data = scratch.path().join("data");
        let done = scratch.path().join("done");
        let script = format!(
            "read go; head -c {} /dev/zero > '{}'; touch '{}'; sleep 30",
            4 * LIMIT,
            data.display(),
            done.display()
        );
        let mut child = shell_waiting_for_go(&script);
        let pid = child.id();
        cg.add_pid(pid).unwrap();
        assert!(procs(&cg.dir).contains(&pid));
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin, "go").unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !done.exists() {
            assert!(std::time::Instant::now() < deadline, "child never wrote");
            std::thread::sleep(Duration::from_millis(20));
        }
        let stat =
            std::fs::read_to_string(cg.dir.join("memory.stat")).expect("memory.stat readable");
        let file_pages = parse_memory_stat(&stat).file;
        assert!(
            (4 << 20..=LIMIT).contains(&file_pages),
            "the child's page cache ({file_pages} bytes) is not charged to the cgroup under its {LIMIT}-byte limit"
        );
        assert_eq!(std::fs::metadata(&data).unwrap().len(), 4 * LIMIT);
        let mut psi = match PsiCgroup::create() {
            Ok(p) => Some(p),
            Err(e) => {
                skip(&format!("no PSI cgroup: {e}"));
                None
            }
        };
        if let Some(p) = psi.as_mut() {
            p.add_pid(pid).unwrap();
            assert!(procs(&p.dir).contains(&pid));
            let pressure = std::fs::read_to_string(p.pressure_file()).unwrap();
            assert!(parse_psi(&pressure).is_some(), "unparsable PSI: {pressure}");
        }
        let psi_dir = psi.as_ref().map(|p| p.dir.clone());
        // Dropped while the child still runs: it is moved back, then the
        // directories go.
        drop(cg);
        drop(psi);
        assert!(!dir.exists(), "{} left behind", dir.display());
        if let Some(d) = psi_dir {
            assert!(!d.exists(), "{} left behind", d.display());
        }
        assert!(pid_alive(pid));
        child.kill().unwrap();
        child.wait().unwrap();

        // And with a child that has exited before the drop.
        let mut cg = MemoryCgroup::create(64 << 20).unwrap();
        let dir = cg.dir.clone();
        let mut child = Command::new("true").spawn().unwrap();
        let _ = cg.add_pid(child.id());
        child.wait().unwrap();
        drop(cg);
        assert!(!dir.exists());
    }

    #[test]
    fn parses_the_oom_kill_count_of_both_versions() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(parse_oom_kills(v1), Some(2));
        let v2 = "low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(parse_oom_kills(v2), Some(1));
        assert_eq!(parse_oom_kills("oom_kill_disable 0\n"), None);
    }

    /// A child that holds more anonymous memory than its cgroup allows is
    /// killed, and the cgroup counts it: what the runner reads to name the
    /// cause when a worker dies without a result.
    #[test]
    fn a_memory_cgroup_counts_the_processes_it_kills() {
        use std::io::Write;
        const LIMIT: u64 = 32 << 20;
        let Some(mut cg) = memory_cgroup_for_test(LIMIT) else {
            return;
        };
        assert_eq!(cg.oom_kills(), Some(0));
        // `tail -c` keeps the last N bytes of a pipe in memory: 4x the limit.
        let script = format!(
            "read go; head -c {} /dev/zero | tail -c {} > /dev/null",
            8 * LIMIT,
            4 * LIMIT
        );
        let mut child = shell_waiting_for_go(&script);
        cg.add_pid(child.id()).unwrap();
        writeln!(child.stdin.take().unwrap(), "go").unwrap();
        child.wait().unwrap();
        assert!(
            cg.oom_kills().is_some_and(|n| n >= 1),
            "no OOM kill counted: {:?}",
            cg.oom_kills()
        );
    }

    /// A child that first spins in user space, then copies /dev/zero to
    /// /dev/null: the raw counters of its cgroup see the second phase as
    /// system time and the first as user time. The phases are a child's, so
    /// the test harness's other threads do not count.
    #[test]
    fn a_cgroup_sees_a_kernel_heavy_phase_as_system_time() {
        use std::io::{BufRead, Write};
        use std::process::{Command, Stdio};
        if let Err(why) = cgroups_usable() {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root: {why}");
            return;
        }
        let mut cg = match CpuacctCgroup::create() {
            Ok(cg) => cg,
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI has a v1 cpuacct hierarchy: {e}"
                );
                return;
            }
        };
        // Fixed amounts of work, not fixed wall time, so a loaded machine
        // (tests run in parallel) only makes the phases slower. Copying
        // zeros runs at tens of GB/s: 20 GB is about half a second of
        // system time, enough 4 ms ticks to sample the split.
        let script = "read go; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo spun; \
                      dd if=/dev/zero of=/dev/null bs=1M count=20000 2>/dev/null; echo copied";
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        cg.add_pid(child.id()).unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let a = read_cpuacct(cg.dir()).unwrap();
        writeln!(child.stdin.take().unwrap(), "go").unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "spun");
        let b = read_cpuacct(cg.dir()).unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "copied");
        let c = read_cpuacct(cg.dir()).unwrap();
        child.wait().unwrap();
        let (spin, copy) = (b.since(&a), c.since(&b));
        // Each phase is a few hundred ms of CPU; ticks are sampled, so only
        // the split is checked, with a wide margin.
        assert!(
            spin.user_s > 0.05 && spin.user_s > 3.0 * spin.sys_s,
            "the spinning phase read as {spin:?}"
        );
        assert!(
            copy.sys_s > 0.05 && copy.sys_s > 3.0 * copy.user_s,
            "the copying phase read as {copy:?}"
        );
        // The tick-sampled times and the scheduler's exact runtime are
        // read in the same unit and count the same process. How closely
        // the ticks match depends on how the phase's CPU time falls
        // between ticks, which a busy machine changes (the phase then runs
        // in short slices between other processes), so the bound is only
        // a factor of two: mixing up the units, or counting another
        // process, is off by far more than that.
        for p in [spin, copy] {
            let ticks = p.user_s + p.sys_s;
            assert!(
                ticks <= 2.0 * p.run_s + 0.05 && p.run_s <= 2.0 * ticks + 0.05,
                "ticks {ticks} s against runtime {} s",
                p.run_s
            );
        }
        let dir = cg.dir().to_path_buf();
        drop(cg);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}
