//! Bytes a thread moved through read/write system calls
//! (`/proc/thread-self/io`, `/proc/self/task/<tid>/io`: `rchar`, `wchar`),
//! for engines that keep no byte counters of their own background work
//! (fjall): what its flush and compaction threads read and wrote, page-cache
//! hits included, which is what quietkv's and RocksDB's counters count too.

use crate::metrics::{parse_proc_io, ProcIo};

/// The calling thread's counters; `None` without task I/O accounting.
pub fn this_thread() -> Option<ProcIo> {
    std::fs::read_to_string("/proc/thread-self/io")
        .ok()
        .map(|t| parse_proc_io(&t))
}

/// The sum of the counters of this process's threads whose name
/// (`/proc/self/task/<tid>/comm`) is `name`.
pub fn threads_named(name: &str) -> ProcIo {
    let mut sum = ProcIo::default();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return sum;
    };
    for t in tasks.flatten() {
        let dir = t.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(dir.join("io")) {
            add(&mut sum, &parse_proc_io(&text));
        }
    }
    sum
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

    #[test]
    fn a_named_thread_s_writes_and_reads_are_counted_and_others_are_not() {
        let Some(before) = this_thread() else {
            // No task I/O accounting in this kernel: nothing to count.
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let p = path.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::Builder::new()
            .name("qkv-io-test".into())
            .spawn(move || {
                let mut f = std::fs::File::create(&p).unwrap();
                f.write_all(&[7u8; 100_000]).unwrap();
                let mut back = Vec::new();
                std::fs::File::open(&p)
                    .unwrap()
                    .read_to_end(&mut back)
                    .unwrap();
                tx.send(()).unwrap();
                // Stay alive until counted: a finished thread leaves the list.
                done_rx.recv().unwrap();
            })
            .unwrap();
        rx.recv().unwrap();
        let t = threads_named("qkv-io-test");
        assert!(t.wchar >= 100_000, "{t:?}");
        assert!(t.rchar >= 100_000, "{t:?}");
        assert_eq!(threads_named("no-such-thread"), ProcIo::default());
        done_tx.send(()).unwrap();
        h.join().unwrap();
        // The writes were the other thread's, not this one's.
        let after = this_thread().unwrap();
        assert!(after.wchar - before.wchar < 100_000);
    }
}
