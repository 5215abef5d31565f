//! The memory limit of a real cgroup: a child process is put into a fresh
//! memory cgroup with a limit, and the limit is found from the kernel's
//! own `/proc/<pid>/cgroup` of that process (needs root and a memory
//! controller).

#[path = "support/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use quietio::memory_limit_from;

/// Our memory cgroup directory: v1 memory hierarchy if present, else v2.
fn own_memory_cgroup() -> Option<(PathBuf, &'static str)> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mi = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = |v2: bool| {
        mi.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?;
            let mut r = right.split_whitespace();
            let (fs, _, opts) = (r.next()?, r.next()?, r.next().unwrap_or(""));
            let ok = if v2 {
                fs == "cgroup2"
            } else {
                fs == "cgroup" && opts.split(',').any(|o| o == "memory")
            };
            ok.then(|| PathBuf::from(point))
        })
    };
    for line in cg.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        if ctrls.split(',').any(|c| c == "memory") {
            return Some((
                mount(false)?.join(path.trim_start_matches('/')),
                "memory.limit_in_bytes",
            ));
        }
    }
    let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = mount(true)?.join(path.trim_start_matches('/'));
    let ctrls = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    ctrls
        .split_whitespace()
        .any(|c| c == "memory")
        .then_some((dir, "memory.max"))
}

struct Cleanup(PathBuf, PathBuf, Option<std::process::Child>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(c) = self.2.as_mut() {
            let _ = std::fs::write(self.1.join("cgroup.procs"), c.id().to_string());
            let _ = c.kill();
            let _ = c.wait();
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
fn limit_of_a_real_cgroup_is_found() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip::skip("creating a memory cgroup needs root");
        return;
    }
    let Some((parent, file)) = own_memory_cgroup() else {
        skip::skip("no memory cgroup controller available here");
        return;
    };
    let dir = parent.join(format!("quietio-memlimit-test-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        skip::skip(&format!("cannot create {}: {e}", dir.display()));
        return;
    }
    let mut guard = Cleanup(dir.clone(), parent.clone(), None);
    let limit: u64 = 300 << 20;
    std::fs::write(dir.join(file), limit.to_string()).unwrap();
    let child = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    guard.2 = Some(child);
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();

    let proc_cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let found = memory_limit_from(&proc_cgroup, &mountinfo)
        .unwrap_or_else(|| panic!("no limit found from {proc_cgroup:?}"));
    // An ancestor may be stricter still; ours is at most what we set.
    assert!(found.bytes <= limit, "{found:?}");
    if found.bytes == limit {
        assert_eq!(found.file, dir.join(file));
    }
    // And the process itself (not in that cgroup) does not see it.
    let own = quietio::memory_limit();
    assert!(own.as_ref().is_none_or(|l| l.file != dir.join(file)));
    assert!(Path::new(&found.file).exists());
    drop(guard);
}
