//! What every experiment's parent side sets up and records beside its
//! runs: the scratch directory (removed however the benchmark ends), the
//! output directory, the machine and the clock for the report, and the
//! header line every open-loop experiment writes about its readers.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::args::BenchArgs;
use crate::report::Machine;
use crate::result::CommonParams;

/// Removes the scratch directory however the benchmark ends.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Now in UTC as `YYYYMMDD-HHMMSS`: the default output directory's name
/// and the report's "Finished" line.
pub(crate) fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The machine the benchmark runs on, with the file system and device
/// of `dir`, for the report's first lines.
pub(crate) fn machine(dir: &Path) -> Machine {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let mem_kb = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    let caps = quietio::probe(dir).ok();
    Machine {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        memory_bytes: mem_kb * 1024,
        filesystem: caps
            .as_ref()
            .map(|c| c.filesystem.clone())
            .unwrap_or_else(|| "unknown".into()),
        device: crate::metrics::block_device_of(dir),
        dir: dir.display().to_string(),
    }
}

/// The 1-minute load average, which the reports give at start and end:
/// other processes compete for the CPUs with the readers.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// `--out`, or `bench-results/<timestamp>/`, created.
pub(crate) fn out_dir(args: &BenchArgs) -> Result<PathBuf, String> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(timestamp()));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    Ok(out)
}

/// The header line of the user reads' load generator.
pub(crate) fn readers_text(common: &CommonParams) -> String {
    let pool = if common.reader_threads > 1 {
        format!(
            "from a pool of {} reader threads: each takes the next scheduled read, so a slow read does not hold back the ones scheduled after it",
            common.reader_threads
        )
    } else {
        "from a single reader thread (--readers 1): a slow read delays every read scheduled after it".to_string()
    };
    format!(
        "open loop at {} reads/s {pool}; latency runs from the scheduled time, and the readers' own lateness (scheduled to issued) has its own rows",
        common.read_rate
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_states_the_reader_pool() {
        let mut c = CommonParams {
            read_rate: 2000.0,
            reader_threads: 8,
            warmup_s: 1.0,
            baseline_s: 1.0,
            duration_s: 1.0,
            memory_limit_bytes: None,
        };
        let t = readers_text(&c);
        assert!(
            t.starts_with("open loop at 2000 reads/s from a pool of 8 reader threads"),
            "{t}"
        );
        c.reader_threads = 1;
        let t = readers_text(&c);
        assert!(
            t.contains("from a single reader thread (--readers 1)"),
            "{t}"
        );
        assert!(!t.contains("pool"), "{t}");
    }
}
