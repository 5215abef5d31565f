//! A read-only bind mount for a test, unmounted however the test ends.
//! quietio and quietkv each keep a copy, so that their published packages'
//! tests stay inside the package; quietkv-cli's tests include quietio's by
//! its path.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct RoBindMount(PathBuf);

impl RoBindMount {
    /// Mounts `src` at `target` (an existing directory) read-only. Needs
    /// root; panics if `mount` fails.
    pub fn new(src: &Path, target: &Path) -> RoBindMount {
        let mount = |args: &[&str]| {
            let ok = Command::new("mount").args(args).status().unwrap().success();
            assert!(ok, "mount {args:?}");
        };
        mount(&["--bind", src.to_str().unwrap(), target.to_str().unwrap()]);
        let guard = RoBindMount(target.to_path_buf());
        mount(&["-o", "remount,bind,ro", target.to_str().unwrap()]);
        guard
    }
}

impl Drop for RoBindMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
