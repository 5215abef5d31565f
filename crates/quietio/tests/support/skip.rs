//! Skipping a test for a missing capability (root, tmpfs, O_DIRECT).
//! quietio and quietkv each keep a copy, so that their published packages'
//! tests stay inside the package; quietkv-cli's tests include quietio's by
//! its path.

/// A developer's machine may lack what a test needs: say so and skip. CI
/// has all of it (root, tmpfs, O_DIRECT on ext4), so under `CI` a skip is a
/// failure: a test must not pass there by not running.
pub fn skip(reason: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must be able to run this test, but: {reason}"
    );
    eprintln!("skipping: {reason}");
}

/// A fresh directory on tmpfs (`/dev/shm`), or `None` after a [`skip`]
/// where this machine has none.
#[allow(dead_code)]
pub fn tmpfs_dir() -> Option<tempfile::TempDir> {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        skip("no /dev/shm (tmpfs) here");
        return None;
    }
    Some(tempfile::tempdir_in(shm).unwrap())
}
