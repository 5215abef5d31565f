//! The memory limit the kernel enforces on this process's cgroup, so the
//! engine can size its caches from it (a process in a 1 GiB cgroup on a
//! 24 GiB machine must not plan for 24 GiB).
//!
//! Read from `/proc/self/cgroup` (which cgroup we are in), then
//! `/proc/self/mountinfo` (where that hierarchy is mounted and which part of
//! it this mount namespace sees), then the limit file of our cgroup and of
//! every ancestor up to the mount's root: v1 `memory.limit_in_bytes`
//! (hierarchical), v2 `memory.max`. The effective limit is the smallest one
//! found; "max" and v1's "unlimited" value (a page-rounded `i64::MAX`) mean
//! no limit. Any file that is missing or unreadable is simply skipped:
//! this answers "is there a limit", it never fails.

use std::path::{Path, PathBuf};

/// Where a limit was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    /// The effective limit in bytes: the smallest one set on this
    /// process's cgroup or any of its ancestors.
    pub bytes: u64,
    /// The limit file that set it.
    pub file: PathBuf,
}

/// Values at or above this are "no limit": v1 reports an unset limit as
/// `PAGE_COUNTER_MAX * PAGE_SIZE`, just under `i64::MAX`.
const UNLIMITED_FLOOR: u64 = 1 << 62;

/// One hierarchy's place in `/proc/self/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    /// v1: the hierarchy holds the memory controller; v2: the unified one.
    v2: bool,
    path: String,
}

fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if ctrls.is_empty() {
            out.push(Membership {
                v2: true,
                path: path.to_string(),
            });
        } else if ctrls.split(',').any(|c| c == "memory") {
            out.push(Membership {
                v2: false,
                path: path.to_string(),
            });
        }
    }
    out
}

/// A cgroup mount: the part of the hierarchy it shows (`root`) and where.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    v2: bool,
    root: String,
    point: PathBuf,
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split_whitespace().collect();
        let (Some(root), Some(point)) = (l.get(3), l.get(4)) else {
            continue;
        };
        let mut r = right.split_whitespace();
        let (fstype, _src, opts) = (r.next(), r.next(), r.next().unwrap_or(""));
        let v2 = match fstype {
            Some("cgroup2") => true,
            Some("cgroup") if opts.split(',').any(|o| o == "memory") => false,
            _ => continue,
        };
        out.push(Mount {
            v2,
            root: root.to_string(),
            point: PathBuf::from(point),
        });
    }
    out
}

/// The directories from our cgroup up to the mount's root (leaf first).
fn cgroup_dirs(mount: &Mount, path: &str) -> Vec<PathBuf> {
    // A namespaced mount shows the hierarchy from `root` down; a path
    // outside it (another namespace's view) cannot be reached from here.
    let rel = if mount.root == "/" {
        path
    } else {
        match path.strip_prefix(mount.root.as_str()) {
            Some(r) if r.is_empty() || r.starts_with('/') => r,
            _ => return Vec::new(),
        }
    };
    let mut dirs = Vec::new();
    let mut dir = mount.point.join(rel.trim_start_matches('/'));
    loop {
        dirs.push(dir.clone());
        if dir == mount.point || !dir.pop() {
            break;
        }
    }
    dirs
}

/// Parses a limit file's text: a byte count, or `max`; `None` = no limit.
pub(crate) fn parse_limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    t.parse::<u64>().ok().filter(|&v| v < UNLIMITED_FLOOR)
}

/// The memory limit given the text of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`, reading the limit files they point at.
pub fn memory_limit_from(proc_cgroup: &str, mountinfo: &str) -> Option<MemoryLimit> {
    let mounts = parse_mountinfo(mountinfo);
    let mut best: Option<MemoryLimit> = None;
    for m in parse_proc_cgroup(proc_cgroup) {
        let Some(mount) = mounts.iter().find(|x| x.v2 == m.v2) else {
            continue;
        };
        let file = if m.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        for dir in cgroup_dirs(mount, &m.path) {
            let f = dir.join(file);
            let Some(bytes) = std::fs::read_to_string(&f)
                .ok()
                .and_then(|t| parse_limit(&t))
            else {
                continue;
            };
            if best.as_ref().is_none_or(|b| bytes < b.bytes) {
                best = Some(MemoryLimit { bytes, file: f });
            }
        }
    }
    best
}

/// The memory limit of this process's cgroup, if any: `None` when neither
/// the cgroup nor an ancestor sets one, or the files cannot be read.
pub fn memory_limit() -> Option<MemoryLimit> {
    let read = |p: &str| std::fs::read_to_string(Path::new(p)).unwrap_or_default();
    memory_limit_from(&read("/proc/self/cgroup"), &read("/proc/self/mountinfo"))
}

/// The memory this process may use: its cgroup's limit where one is set,
/// else the machine's physical memory; `None` if neither can be read.
pub fn usable_memory() -> Option<u64> {
    if let Some(l) = memory_limit() {
        return Some(l.bytes);
    }
    // SAFETY: sysconf only reads system configuration values.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| pages as u64 * page as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_CGROUP: &str = "9:name=systemd:/\n4:memory:/jobs/a\n2:cpu,cpuacct:/\n0::/\n";

    fn mountinfo(v1: &Path, v2: &Path) -> String {
        format!(
            "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
             35 31 0:32 / {} rw,relatime - cgroup cgroup rw,memory\n\
             32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
             41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n",
            v1.display(),
            v2.display()
        )
    }

    #[test]
    fn limit_values() {
        assert_eq!(parse_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(parse_limit("max\n"), None);
        // v1's "unlimited".
        assert_eq!(parse_limit("9223372036854771712"), None);
        assert_eq!(parse_limit("garbage"), None);
    }

    #[test]
    fn proc_cgroup_and_mountinfo_lines() {
        assert_eq!(
            parse_proc_cgroup(HYBRID_CGROUP),
            vec![
                Membership {
                    v2: false,
                    path: "/jobs/a".into()
                },
                Membership {
                    v2: true,
                    path: "/".into()
                }
            ]
        );
        let m = parse_mountinfo(&mountinfo(Path::new("/m1"), Path::new("/m2")));
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].v2, m[0].point.as_path()), (false, Path::new("/m1")));
        assert_eq!((m[1].v2, m[1].point.as_path()), (true, Path::new("/m2")));
        // A namespaced mount (root /jobs) shows /jobs/a as <point>/a.
        let ns = Mount {
            v2: true,
            root: "/jobs".into(),
            point: "/sys/fs/cgroup".into(),
        };
        assert_eq!(
            cgroup_dirs(&ns, "/jobs/a"),
            vec![PathBuf::from("/sys/fs/cgroup/a"), "/sys/fs/cgroup".into()]
        );
        assert!(cgroup_dirs(&ns, "/elsewhere").is_empty());
        assert!(cgroup_dirs(&ns, "/jobsx").is_empty());
    }

    #[test]
    fn smallest_limit_of_the_cgroup_and_its_ancestors_wins() {
        let t = tempfile::tempdir().unwrap();
        let (v1, v2) = (t.path().join("v1"), t.path().join("v2"));
        std::fs::create_dir_all(v1.join("jobs/a")).unwrap();
        std::fs::create_dir_all(&v2).unwrap();
        let mi = mountinfo(&v1, &v2);
        // No files at all: no limit.
        assert_eq!(memory_limit_from(HYBRID_CGROUP, &mi), None);
        std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(v1.join("jobs/memory.limit_in_bytes"), "2147483648\n").unwrap();
        std::fs::write(v1.join("jobs/a/memory.limit_in_bytes"), "4294967296\n").unwrap();
        let l = memory_limit_from(HYBRID_CGROUP, &mi).unwrap();
        assert_eq!(l.bytes, 2 << 30);
        assert_eq!(l.file, v1.join("jobs/memory.limit_in_bytes"));
        // A smaller v2 limit on the unified hierarchy counts too.
        std::fs::write(v2.join("memory.max"), "1073741824\n").unwrap();
        assert_eq!(
            memory_limit_from(HYBRID_CGROUP, &mi).unwrap().bytes,
            1 << 30
        );
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        assert_eq!(
            memory_limit_from(HYBRID_CGROUP, &mi).unwrap().bytes,
            2 << 30
        );
    }

    #[test]
    fn usable_memory_is_the_cgroup_limit_or_the_machine_memory() {
        let usable = usable_memory().expect("sysconf reports the physical memory");
        match memory_limit() {
            Some(l) => assert_eq!(usable, l.bytes),
            None => {
                let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
                let kib: u64 = meminfo
                    .lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                    .expect("MemTotal in /proc/meminfo");
                assert_eq!(usable, kib * 1024);
            }
        }
    }
}
