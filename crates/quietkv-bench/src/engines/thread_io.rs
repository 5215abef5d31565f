//! Bytes a thread moved through read/write system calls
//! (`/proc/thread-self/io`, `/proc/self/task/<tid>/io`: `rchar`, `wchar`),
//! for engines that keep no byte counters of their own background work
//! (fjall): what its flush and compaction threads read and wrote, page-cache
//! hits included, which is what quietkv's and RocksDB's counters count too.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use crate::metrics::{parse_proc_io, ProcIo};

/// The calling thread's counters; `None` without task I/O accounting.
pub fn this_thread() -> Option<ProcIo> {
    std::fs::read_to_string("/proc/thread-self/io")
        .ok()
        .map(|t| parse_proc_io(&t))
}

/// Held while an engine starts its threads, so that the threads that
/// appear meanwhile are that engine's and not another's started at the same
/// moment (tests open several databases in one process at once).
static SPAWNING: Mutex<()> = Mutex::new(());

/// The threads named `name` that one engine started, and the highest
/// counters seen for each: a thread that has ended keeps its last counts,
/// so the totals never go backwards, and another engine's threads (started
/// before or after, ending whenever) are never counted.
#[derive(Debug)]
pub struct ThreadSet {
    name: String,
    seen: Mutex<BTreeMap<u64, ProcIo>>,
}

impl ThreadSet {
    /// Runs `start` (which starts the engine's threads) and keeps the
    /// threads that were not there before it; of those, only the ones named
    /// `name` are counted. A new thread names itself once it runs, so its
    /// name is checked when it is counted, not here.
    pub fn started_by<T>(name: &str, start: impl FnOnce() -> T) -> (T, ThreadSet) {
        let _one_at_a_time = lock(&SPAWNING);
        let before = tids();
        let out = start();
        let seen = tids()
            .difference(&before)
            .map(|&tid| (tid, ProcIo::default()))
            .collect();
        (
            out,
            ThreadSet {
                name: name.to_string(),
                seen: Mutex::new(seen),
            },
        )
    }

    /// The sum over the set's threads of the highest counters seen.
    pub fn totals(&self) -> ProcIo {
        let mut seen = lock(&self.seen);
        let mut sum = ProcIo::default();
        for (tid, last) in seen.iter_mut() {
            // A thread that ended (or whose id now names another thread)
            // keeps the counts it had.
            if let Some(now) = read_task(*tid, &self.name) {
                last.rchar = last.rchar.max(now.rchar);
                last.wchar = last.wchar.max(now.wchar);
                last.read_bytes = last.read_bytes.max(now.read_bytes);
                last.write_bytes = last.write_bytes.max(now.write_bytes);
            }
            add(&mut sum, last);
        }
        sum
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data is counters; a panic elsewhere leaves them usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The ids of this process's threads.
fn tids() -> BTreeSet<u64> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return BTreeSet::new();
    };
    tasks
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse().ok())
        .collect()
}

/// Thread `tid`'s counters, if it runs under `name` (`/proc/self/task/<tid>/comm`).
fn read_task(tid: u64, name: &str) -> Option<ProcIo> {
    let dir = format!("/proc/self/task/{tid}");
    let comm = std::fs::read_to_string(format!("{dir}/comm")).ok()?;
    if comm.trim_end() != name {
        return None;
    }
    let text = std::fs::read_to_string(format!("{dir}/io")).ok()?;
    Some(parse_proc_io(&text))
}

fn add(sum: &mut ProcIo, x: &ProcIo) {
    sum.rchar += x.rchar;
    sum.wchar += x.wchar;
    sum.read_bytes += x.read_bytes;
    sum.write_bytes += x.write_bytes;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::thread::JoinHandle;

    /// A thread named `name` that writes and reads back `bytes` bytes each
    /// time it is told to, and ends when its sender is dropped.
    fn io_thread(
        name: &str,
        dir: &std::path::Path,
        bytes: usize,
    ) -> (Sender<()>, Receiver<()>, JoinHandle<()>) {
        let (go_tx, go_rx) = channel::<()>();
        let (done_tx, done_rx) = channel::<()>();
        let path = dir.join(name);
        let h = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                while go_rx.recv().is_ok() {
                    let mut f = std::fs::File::create(&path).unwrap();
                    f.write_all(&vec![7u8; bytes]).unwrap();
                    let mut back = Vec::new();
                    std::fs::File::open(&path)
                        .unwrap()
                        .read_to_end(&mut back)
                        .unwrap();
                    done_tx.send(()).unwrap();
                }
            })
            .unwrap();
        (go_tx, done_rx, h)
    }

    #[test]
    fn a_set_counts_its_own_threads_only_and_never_goes_back() {
        if this_thread().is_none() {
            // No task I/O accounting in this kernel: nothing to count.
            return;
        }
        let before = this_thread().unwrap();
        let dir = tempfile::tempdir().unwrap();
        // Another engine's thread of the same name, started first.
        let (other_go, other_done, other) = io_thread("qkv-io-test", dir.path(), 50_000);
        let (mine, set) = ThreadSet::started_by("qkv-io-test", || {
            io_thread("qkv-io-test", dir.path(), 100_000)
        });
        let (go, done, h) = mine;

        go.send(()).unwrap();
        done.recv().unwrap();
        other_go.send(()).unwrap();
        other_done.recv().unwrap();
        let t = set.totals();
        assert!((100_000..150_000).contains(&t.wchar), "{t:?}");
        assert!((100_000..150_000).contains(&t.rchar), "{t:?}");

        // The other thread ending changes nothing; this one ending keeps
        // its counts.
        drop(other_go);
        other.join().unwrap();
        assert_eq!(set.totals().wchar, t.wchar);
        drop(go);
        h.join().unwrap();
        assert_eq!(set.totals().wchar, t.wchar);

        // The writes were the other threads', not this one's.
        let after = this_thread().unwrap();
        assert!(after.wchar - before.wchar < 100_000);
        let (_, none) = ThreadSet::started_by("no-such-thread", || ());
        assert_eq!(none.totals(), ProcIo::default());
    }
}
