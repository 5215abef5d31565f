//! Kernel metrics: pure parsers of the text the kernel exports, plus the
//! small readers that find and read the right file on this machine.
//!
//! Every parser takes the file's text and returns plain numbers, so each one
//! is tested against samples captured on a real machine
//! (`tests/data/`), and the derived rates (await, queue depth, utilisation)
//! follow docs/benchmark.md exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `key value` lines (`/proc/vmstat`, `memory.stat`) into a map. Lines that do
/// not parse are skipped.
pub fn parse_key_values(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if let (Some(k), Some(v)) = (it.next(), it.next()) {
            if let Ok(v) = v.parse::<u64>() {
                out.insert(k.to_string(), v);
            }
        }
    }
    out
}

/// The `/proc/vmstat` counters the benchmark uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vmstat {
    pub nr_dirtied: u64,
    pub nr_written: u64,
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    pub pgscan_file: u64,
    pub pgsteal_file: u64,
    pub pgscan_kswapd: u64,
    pub pgscan_direct: u64,
    pub workingset_refault_file: u64,
    pub pgmajfault: u64,
}

pub fn parse_vmstat(text: &str) -> Vmstat {
    let m = parse_key_values(text);
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    Vmstat {
        nr_dirtied: g("nr_dirtied"),
        nr_written: g("nr_written"),
        nr_dirty: g("nr_dirty"),
        nr_writeback: g("nr_writeback"),
        pgscan_file: g("pgscan_file"),
        pgsteal_file: g("pgsteal_file"),
        pgscan_kswapd: g("pgscan_kswapd"),
        pgscan_direct: g("pgscan_direct"),
        // Kernels before 5.9 only had `workingset_refault`.
        workingset_refault_file: m
            .get("workingset_refault_file")
            .or_else(|| m.get("workingset_refault"))
            .copied()
            .unwrap_or(0),
        pgmajfault: g("pgmajfault"),
    }
}

/// The `memory.stat` values the benchmark uses, in bytes (sizes) or events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStat {
    pub active_file: u64,
    pub inactive_file: u64,
    /// Page-cache bytes (v1 `cache`, v2 `file`).
    pub file: u64,
    pub dirty: u64,
    pub writeback: u64,
    pub workingset_refault_file: u64,
    pub pgmajfault: u64,
}

/// Parses a cgroup's `memory.stat`, v1 or v2.
///
/// cgroup v1 lists each counter twice: the cgroup's own (`active_file`) and
/// the hierarchical total (`total_active_file`); the total is preferred, since
/// it also counts child cgroups. Older v1 kernels name the refault counter
/// `workingset_refault`. cgroup v2 has only the hierarchical names and calls
/// the page cache `file` (v1: `cache`) and dirty pages `file_dirty`.
pub fn parse_memory_stat(text: &str) -> MemoryStat {
    let m = parse_key_values(text);
    let pick = |names: &[&str]| -> u64 {
        for n in names {
            if let Some(v) = m.get(&format!("total_{n}")).or_else(|| m.get(*n)) {
                return *v;
            }
        }
        0
    };
    MemoryStat {
        active_file: pick(&["active_file"]),
        inactive_file: pick(&["inactive_file"]),
        file: pick(&["cache", "file"]),
        dirty: pick(&["dirty", "file_dirty"]),
        writeback: pick(&["writeback", "file_writeback"]),
        workingset_refault_file: pick(&["workingset_refault_file", "workingset_refault"]),
        pgmajfault: pick(&["pgmajfault"]),
    }
}

/// Pressure stall information (`memory.pressure`, `/proc/pressure/memory`):
/// the cumulative stall time in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Psi {
    pub some_total_us: u64,
    pub full_total_us: u64,
}

pub fn parse_psi(text: &str) -> Option<Psi> {
    let mut psi = Psi::default();
    let mut seen = false;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let kind = it.next();
        let total = it
            .find_map(|f| f.strip_prefix("total="))
            .and_then(|v| v.parse::<u64>().ok());
        match (kind, total) {
            (Some("some"), Some(t)) => {
                psi.some_total_us = t;
                seen = true;
            }
            (Some("full"), Some(t)) => psi.full_total_us = t,
            _ => {}
        }
    }
    seen.then_some(psi)
}

/// `/sys/block/DEV/stat`: the 17 fields of Documentation/block/stat.rst
/// (older kernels have 11 or 15; missing ones are 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockStat {
    pub read_ios: u64,
    pub read_merges: u64,
    pub read_sectors: u64,
    pub read_ticks_ms: u64,
    pub write_ios: u64,
    pub write_merges: u64,
    pub write_sectors: u64,
    pub write_ticks_ms: u64,
    pub in_flight: u64,
    pub io_ticks_ms: u64,
    pub time_in_queue_ms: u64,
    pub discard_ios: u64,
    pub discard_merges: u64,
    pub discard_sectors: u64,
    pub discard_ticks_ms: u64,
    pub flush_ios: u64,
    pub flush_ticks_ms: u64,
}

pub fn parse_block_stat(text: &str) -> Option<BlockStat> {
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse::<u64>())
        .collect::<Result<_, _>>()
        .ok()?;
    if v.len() < 11 {
        return None;
    }
    let g = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(BlockStat {
        read_ios: g(0),
        read_merges: g(1),
        read_sectors: g(2),
        read_ticks_ms: g(3),
        write_ios: g(4),
        write_merges: g(5),
        write_sectors: g(6),
        write_ticks_ms: g(7),
        in_flight: g(8),
        io_ticks_ms: g(9),
        time_in_queue_ms: g(10),
        discard_ios: g(11),
        discard_merges: g(12),
        discard_sectors: g(13),
        discard_ticks_ms: g(14),
        flush_ios: g(15),
        flush_ticks_ms: g(16),
    })
}

/// What iostat shows, from two block-stat readings `elapsed_s` apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceRates {
    pub r_per_s: f64,
    pub w_per_s: f64,
    pub r_mib_s: f64,
    pub w_mib_s: f64,
    /// d(read ticks) / d(reads completed), ms; 0 when nothing was read.
    pub r_await_ms: f64,
    /// d(write ticks) / d(writes completed), ms.
    pub w_await_ms: f64,
    /// d(time in queue) / d(wall ms).
    pub aqu_sz: f64,
    /// d(io ticks) / d(wall ms) * 100.
    pub util_pct: f64,
}

pub fn device_rates(a: &BlockStat, b: &BlockStat, elapsed_s: f64) -> DeviceRates {
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let ms = elapsed_s * 1000.0;
    let per = |n: f64, by: f64| if by > 0.0 { n / by } else { 0.0 };
    let reads = d(a.read_ios, b.read_ios);
    let writes = d(a.write_ios, b.write_ios);
    let mib = 512.0 / (1024.0 * 1024.0);
    DeviceRates {
        r_per_s: per(reads, elapsed_s),
        w_per_s: per(writes, elapsed_s),
        r_mib_s: per(d(a.read_sectors, b.read_sectors) * mib, elapsed_s),
        w_mib_s: per(d(a.write_sectors, b.write_sectors) * mib, elapsed_s),
        r_await_ms: per(d(a.read_ticks_ms, b.read_ticks_ms), reads),
        w_await_ms: per(d(a.write_ticks_ms, b.write_ticks_ms), writes),
        aqu_sz: per(d(a.time_in_queue_ms, b.time_in_queue_ms), ms),
        util_pct: (per(d(a.io_ticks_ms, b.io_ticks_ms), ms) * 100.0).min(100.0),
    }
}

/// CPU time of a process from `/proc/PID/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcCpu {
    pub utime_ticks: u64,
    pub stime_ticks: u64,
}

/// Parses `/proc/PID/stat`. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_proc_stat(text: &str) -> Option<ProcCpu> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state); utime is field 14, stime field 15.
    Some(ProcCpu {
        utime_ticks: f.get(11)?.parse().ok()?,
        stime_ticks: f.get(12)?.parse().ok()?,
    })
}

pub fn clock_ticks_per_sec() -> f64 {
    // 100 is what Linux uses everywhere it does not say.
    crate::process::clock_ticks_per_sec().map_or(100.0, |t| t as f64)
}

/// `/proc/PID/io`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcIo {
    pub rchar: u64,
    pub wchar: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

pub fn parse_proc_io(text: &str) -> ProcIo {
    let m: BTreeMap<String, u64> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().parse().ok()?))
        })
        .collect();
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    ProcIo {
        rchar: g("rchar"),
        wchar: g("wchar"),
        read_bytes: g("read_bytes"),
        write_bytes: g("write_bytes"),
    }
}

/// The whole disk under `dir`, named as in `/sys/block` (a partition maps to
/// its parent disk). `None` for file systems without a block device (tmpfs,
/// overlay, NFS).
pub fn block_device_of(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (maj, min) = device_numbers(dev);
    if maj == 0 {
        return None;
    }
    let link = std::fs::canonicalize(format!("/sys/dev/block/{maj}:{min}")).ok()?;
    disk_name_from_sysfs(&link, link.join("partition").exists())
}

/// The major and minor numbers of a device id (`st_dev`).
fn device_numbers(dev: u64) -> (u32, u32) {
    (libc::major(dev), libc::minor(dev))
}

/// `/sys/devices/.../vda/vda1` (a partition) -> `vda`; `.../vda` -> `vda`.
pub fn disk_name_from_sysfs(link: &Path, is_partition: bool) -> Option<String> {
    let node = if is_partition { link.parent()? } else { link };
    Some(node.file_name()?.to_string_lossy().into_owned())
}

pub fn read_block_stat(dev: &str) -> Option<BlockStat> {
    parse_block_stat(&std::fs::read_to_string(format!("/sys/block/{dev}/stat")).ok()?)
}

pub fn read_vmstat() -> Vmstat {
    parse_vmstat(&std::fs::read_to_string("/proc/vmstat").unwrap_or_default())
}

pub fn read_psi(path: &Path) -> Option<Psi> {
    parse_psi(&std::fs::read_to_string(path).ok()?)
}

pub fn read_memory_stat(cgroup_dir: &Path) -> Option<MemoryStat> {
    Some(parse_memory_stat(
        &std::fs::read_to_string(cgroup_dir.join("memory.stat")).ok()?,
    ))
}

/// Clock ticks the host took from this machine's CPUs (the `steal` column
/// of `/proc/stat`'s `cpu` line, summed over CPUs): time a virtual CPU was
/// ready to run the guest but the hypervisor ran something else. Nothing
/// inside the guest can run meanwhile, so every thread's wake-up waits.
pub fn parse_steal_ticks(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

/// [`parse_steal_ticks`] of this machine's `/proc/stat`.
pub fn read_steal_ticks() -> Option<u64> {
    parse_steal_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// CPU clock ticks used so far by every user-space process on the machine
/// except `skip` (the measured process and the benchmark that started
/// it): `utime + stime + cutime + cstime` of each `/proc/PID/stat`, so a
/// short-lived process counts once its parent has waited for it (a
/// compiler under `cargo`, a command under a shell). Kernel threads
/// (flag `PF_KTHREAD`) are left out: kswapd and write-back work for the
/// measured process. What it misses: a process that starts and ends, with
/// its whole lineage, between two readings.
pub fn read_other_processes_cpu_ticks(skip: &[u32]) -> Option<u64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if skip.contains(&pid) {
            continue;
        }
        if let Some(ticks) = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| parse_user_process_ticks(&s))
        {
            total += ticks;
        }
    }
    Some(total)
}

/// `utime + stime + cutime + cstime` of one `/proc/PID/stat` line, `None`
/// for a kernel thread or an unreadable line.
pub fn parse_user_process_ticks(stat: &str) -> Option<u64> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    // The command name may hold spaces and parentheses: fields start after
    // the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); flags is field 9, utime..cstime 14..17.
    let flags: u64 = f.get(6)?.parse().ok()?;
    if flags & PF_KTHREAD != 0 {
        return None;
    }
    let mut sum = 0u64;
    for i in 11..15 {
        sum += f.get(i)?.parse::<i64>().ok()?.max(0) as u64;
    }
    Some(sum)
}

pub fn read_self_cpu() -> Option<ProcCpu> {
    parse_proc_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

pub fn read_self_io() -> Option<ProcIo> {
    Some(parse_proc_io(
        &std::fs::read_to_string("/proc/self/io").ok()?,
    ))
}

/// The system-wide memory pressure file.
pub fn system_psi_path() -> PathBuf {
    PathBuf::from("/proc/pressure/memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    const VMSTAT: &str = include_str!("../tests/data/vmstat");
    const MEMSTAT_V1: &str = include_str!("../tests/data/memory.stat.v1");
    const MEMSTAT_V2: &str = include_str!("../tests/data/memory.stat.v2");
    const PSI_CG2: &str = include_str!("../tests/data/cgroup2.memory.pressure");
    const PSI_PROC: &str = include_str!("../tests/data/proc.pressure.memory");
    const PSI_BUSY: &str = include_str!("../tests/data/memory.pressure.busy");
    const BLOCK: &str = include_str!("../tests/data/block.vda.stat");

    #[test]
    fn device_numbers_split_a_device_id() {
        assert_eq!(device_numbers(libc::makedev(8, 17)), (8, 17));
    }

    #[test]
    fn other_processes_count_children_and_skip_kernel_threads() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
        // majflt cmajflt utime stime cutime cstime ...
        let user = "42 (my (odd) name) S 1 42 42 0 -1 4194304 10 0 0 0 7 3 100 20 20 0 1 0";
        assert_eq!(parse_user_process_ticks(user), Some(130));
        let kthread = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 5 9 0 0 20 0 1 0";
        assert_eq!(parse_user_process_ticks(kthread), None);
        assert_eq!(parse_user_process_ticks("garbage"), None);
        let me = std::process::id();
        let all = read_other_processes_cpu_ticks(&[]).unwrap();
        let others = read_other_processes_cpu_ticks(&[me]).unwrap();
        assert!(others <= all);
    }

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_line() {
        let stat = "cpu  2255 34 2290 22625563 6290 127 456 171 0 0\ncpu0 1132 34 1441 11311718 3675 127 438 90 0 0\n";
        assert_eq!(parse_steal_ticks(stat), Some(171));
        assert_eq!(parse_steal_ticks("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(parse_steal_ticks("cpu  1 2 3\n"), None);
        assert!(
            read_steal_ticks().is_some(),
            "/proc/stat has a steal column on Linux"
        );
    }
    const BLOCK_LATER: &str = include_str!("../tests/data/block.vda.stat.later");
    const PROC_STAT: &str = include_str!("../tests/data/proc.self.stat");
    const PROC_STAT_ODD: &str = include_str!("../tests/data/proc.stat.oddname");
    const PROC_IO: &str = include_str!("../tests/data/proc.self.io");

    #[test]
    fn vmstat_sample() {
        let v = parse_vmstat(VMSTAT);
        assert_eq!(v.nr_dirtied, 2184705);
        assert_eq!(v.workingset_refault_file, 196720);
        assert_eq!(v.pgscan_file, 0);
        assert_eq!(v.pgsteal_file, 0);
        assert_eq!(v.pgscan_kswapd, 0);
        assert!(v.nr_written > 0);
    }

    #[test]
    fn memory_stat_v1_prefers_totals() {
        let m = parse_memory_stat(MEMSTAT_V1);
        assert_eq!(m.active_file, 152670208);
        assert_eq!(m.inactive_file, 378228736);
        assert_eq!(m.workingset_refault_file, 33468);
        assert_eq!(m.file, 530903040);
        assert_eq!(m.dirty, 158179328);
        // The total is taken over the cgroup's own value.
        let own_only = "active_file 1\ntotal_active_file 7\nworkingset_refault 3\n";
        let m = parse_memory_stat(own_only);
        assert_eq!(m.active_file, 7);
        assert_eq!(m.workingset_refault_file, 3);
    }

    #[test]
    fn memory_stat_v2_names() {
        let m = parse_memory_stat(MEMSTAT_V2);
        assert_eq!(m.active_file, 104857600);
        assert_eq!(m.inactive_file, 52428800);
        assert_eq!(m.file, 157286400);
        assert_eq!(m.dirty, 4096);
        assert_eq!(m.workingset_refault_file, 1234);
    }

    #[test]
    fn psi_samples() {
        assert_eq!(
            parse_psi(PSI_CG2),
            Some(Psi {
                some_total_us: 0,
                full_total_us: 0
            })
        );
        assert_eq!(parse_psi(PSI_PROC).unwrap().some_total_us, 0);
        assert_eq!(
            parse_psi(PSI_BUSY),
            Some(Psi {
                some_total_us: 31599123,
                full_total_us: 1402117
            })
        );
        assert_eq!(parse_psi("garbage"), None);
    }

    #[test]
    fn block_stat_and_rates() {
        let a = parse_block_stat(BLOCK).unwrap();
        assert_eq!(a.read_ios, 96967);
        assert_eq!(a.read_merges, 4592);
        assert_eq!(a.read_sectors, 10267212);
        assert_eq!(a.read_ticks_ms, 216520);
        assert_eq!(a.write_ios, 186253);
        assert_eq!(a.write_ticks_ms, 101880);
        assert_eq!(a.in_flight, 0);
        assert_eq!(a.io_ticks_ms, 41804);
        assert_eq!(a.time_in_queue_ms, 326902);
        assert_eq!(a.flush_ios, 12677);
        assert_eq!(a.flush_ticks_ms, 1549);
        let b = parse_block_stat(BLOCK_LATER).unwrap();
        // later sample: +1000 reads, +2000 read ticks, +500 writes,
        // +5000 write ticks, +2048 read sectors, +409600 write sectors,
        // +800 io ticks, +3000 time in queue, over 2 s.
        let r = device_rates(&a, &b, 2.0);
        assert_eq!(r.r_await_ms, 2.0);
        assert_eq!(r.w_await_ms, 10.0);
        assert_eq!(r.aqu_sz, 1.5);
        assert_eq!(r.util_pct, 40.0);
        assert_eq!(r.r_per_s, 500.0);
        assert_eq!(r.w_per_s, 250.0);
        assert_eq!(r.r_mib_s, 0.5);
        assert_eq!(r.w_mib_s, 100.0);
        // Nothing moved: no division by zero.
        let z = device_rates(&a, &a, 1.0);
        assert_eq!(z.r_await_ms, 0.0);
        assert_eq!(parse_block_stat("1 2 3"), None);
    }

    #[test]
    fn proc_stat_cpu() {
        let c = parse_proc_stat(PROC_STAT).unwrap();
        assert_eq!(
            c,
            ProcCpu {
                utime_ticks: 0,
                stime_ticks: 0
            }
        );
        let c = parse_proc_stat(PROC_STAT_ODD).unwrap();
        assert_eq!(c.utime_ticks, 1234);
        assert_eq!(c.stime_ticks, 567);
    }

    #[test]
    fn proc_io() {
        let io = parse_proc_io(PROC_IO);
        assert_eq!(io.rchar, 6976);
        assert_eq!(io.read_bytes, 0);
        assert_eq!(io.wchar, 0);
    }

    #[test]
    fn disk_names() {
        let p = Path::new("/sys/devices/pci0000:00/virtio1/block/vda/vda1");
        assert_eq!(disk_name_from_sysfs(p, true).unwrap(), "vda");
        let p = Path::new("/sys/devices/pci0000:00/virtio1/block/vda");
        assert_eq!(disk_name_from_sysfs(p, false).unwrap(), "vda");
    }

    #[test]
    fn live_readers_work_here() {
        // Smoke: on Linux these files exist.
        assert!(read_self_cpu().is_some());
        let _ = read_vmstat();
    }
}
