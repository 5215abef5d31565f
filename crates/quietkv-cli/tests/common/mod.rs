//! Helpers shared by the benchmark's end-to-end tests.

use std::path::{Path, PathBuf};

fn find_dirs(root: &Path, prefix: &str, depth: usize, out: &mut Vec<PathBuf>) {
    if depth == 0 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if !ft.is_dir() {
            continue;
        }
        if e.file_name().to_string_lossy().starts_with(prefix) {
            out.push(e.path());
        }
        find_dirs(&e.path(), prefix, depth - 1, out);
    }
}

/// Fails if any cgroup the benchmark process `pid` created is still there.
pub fn assert_no_cgroups_left(pid: u32) {
    let mut cg = Vec::new();
    for root in [
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup",
    ] {
        find_dirs(
            Path::new(root),
            &format!("quietkv-bench-{pid}-"),
            5,
            &mut cg,
        );
    }
    assert!(cg.is_empty(), "cgroups left behind: {cg:?}");
}
