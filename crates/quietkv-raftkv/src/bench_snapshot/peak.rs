//! The leader's peak memory during each phase. Its cgroup's limit counts
//! page cache and anonymous memory together, but only anonymous memory
//! (heaps, buffers) cannot be dropped under pressure: a phase whose
//! anonymous peak nears the limit is one the kernel ends by killing the
//! leader. The counters give no peak of it, so it is sampled.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

/// How often the anonymous memory is read: a chunk of a snapshot lives
/// for tens of milliseconds, a heap that grows stays.
const EVERY: Duration = Duration::from_millis(50);

/// The anonymous memory of the processes in a memory cgroup, bytes: v1
/// `total_rss` (or `rss`), v2 `anon`, from `memory.stat`.
pub fn anon_bytes(cgroup_dir: &Path) -> Option<u64> {
    anon_of(&std::fs::read_to_string(cgroup_dir.join("memory.stat")).ok()?)
}

fn anon_of(memory_stat: &str) -> Option<u64> {
    let get = |name: &str| {
        memory_stat.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.trim().parse().ok()).flatten()
        })
    };
    get("total_rss")
        .or_else(|| get("rss"))
        .or_else(|| get("anon"))
}

/// The highest the cgroup's whole usage (page cache included) has been
/// since it was made: v1 `memory.max_usage_in_bytes`, v2 `memory.peak`.
pub fn usage_peak_bytes(cgroup_dir: &Path) -> Option<u64> {
    ["memory.max_usage_in_bytes", "memory.peak"]
        .iter()
        .find_map(|f| std::fs::read_to_string(cgroup_dir.join(f)).ok())
        .and_then(|t| t.trim().parse().ok())
}

/// Samples a cgroup's anonymous memory in the background, keeping the
/// highest value since the last [`take`](Self::take). Stops when dropped.
pub struct AnonPeak {
    dir: PathBuf,
    peak: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl AnonPeak {
    pub fn start(cgroup_dir: &Path) -> AnonPeak {
        let peak = Arc::new(AtomicU64::new(0));
        let dir = cgroup_dir.to_path_buf();
        let task = tokio::spawn({
            let (peak, dir) = (peak.clone(), dir.clone());
            async move {
                loop {
                    if let Some(b) = anon_bytes(&dir) {
                        peak.fetch_max(b, Ordering::Relaxed);
                    }
                    tokio::time::sleep(EVERY).await;
                }
            }
        });
        AnonPeak { dir, peak, task }
    }

    /// The highest value seen since the last call (or the start), this
    /// instant's included; the next period starts from now.
    pub fn take(&self) -> u64 {
        let now = anon_bytes(&self.dir).unwrap_or(0);
        self.peak.swap(now, Ordering::Relaxed).max(now)
    }
}

impl Drop for AnonPeak {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_memory_is_read_from_either_cgroup_version() {
        let v1 = "cache 100\nrss 7\nrss_huge 0\ntotal_cache 300\ntotal_rss 9\n";
        assert_eq!(anon_of(v1), Some(9));
        assert_eq!(anon_of("cache 1\nrss 7\n"), Some(7));
        assert_eq!(anon_of("anon 5\nfile 10\nanon_thp 0\n"), Some(5));
        assert_eq!(anon_of("file 10\n"), None);
    }
}
