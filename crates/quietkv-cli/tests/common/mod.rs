//! Helpers shared by the command-line tool's end-to-end tests.
//! Each test file uses the helpers it needs, so the others are unused there.
#![allow(dead_code)]

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

/// Runs `quietkv bench ARGS --dir DIR --out OUT`, fails the test unless it
/// succeeds, and returns its output and process id (for the cgroup check).
/// One run of each mode unless ARGS says `--repeats`, and disturbed runs
/// kept: these tests check what a run reports, not its figures, and must
/// pass on a busy machine.
pub fn run_bench(args: &[&str], dir: &Path, out: &Path) -> (std::process::Output, u32) {
    let once: &[&str] = if args.contains(&"--repeats") {
        &["--keep-disturbed"]
    } else {
        &["--repeats", "1", "--keep-disturbed"]
    };
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_quietkv"))
        .arg("bench")
        .args(args)
        .args(once)
        .arg("--dir")
        .arg(dir)
        .arg("--out")
        .arg(out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let res = child.wait_with_output().unwrap();
    assert!(
        res.status.success(),
        "bench {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    (res, pid)
}

/// A temporary directory for one bench run: `scratch` (created, for
/// `--dir`) and `out` (for `--out`) inside it, all removed when dropped.
pub struct BenchDirs {
    pub tmp: tempfile::TempDir,
    pub scratch: PathBuf,
    pub out: PathBuf,
}

/// A fresh [`BenchDirs`].
pub fn bench_dirs() -> BenchDirs {
    let tmp = tempfile::tempdir().unwrap();
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let out = tmp.path().join("out");
    BenchDirs { tmp, scratch, out }
}

/// The run's `report.md` in `out`.
pub fn report_md(out: &Path) -> String {
    std::fs::read_to_string(out.join("report.md")).unwrap()
}

/// The run's `report.json` in `out`.
pub fn report_json(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

/// Fails unless `md` (a report.md) contains every one of `texts`.
pub fn assert_report_has<S: AsRef<str>>(md: &str, texts: impl IntoIterator<Item = S>) {
    for s in texts {
        let s = s.as_ref();
        assert!(md.contains(s), "report.md lacks {s:?}:\n{md}");
    }
}

/// Fails if the run left anything in `dir` (its scratch directory).
pub fn assert_nothing_left(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A command line's arguments, written as one line (`"--experiment E0
/// --duration 2"`) so that each flag reads beside its value.
pub fn args(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The files in `dir` with extension `ext`, sorted by name.
pub fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}
