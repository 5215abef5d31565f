//! Skipping a test for a missing capability (root, tmpfs, O_DIRECT).
//! One copy for the workspace: the tests of quietkv and quietkv-cli
//! include this file by its path.

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
