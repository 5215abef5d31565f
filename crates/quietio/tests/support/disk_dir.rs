//! The scratch directory of quietio's integration tests.

/// A scratch directory on the disk the repository lives on (under the
/// target directory), not /tmp, which may be a tmpfs: the access modes
/// behave differently there.
pub fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}
