//! A small tmpfs of its own for a test: a full disk on demand, or a file
//! system whose usage nothing else changes.

use std::path::PathBuf;
use std::process::Command;

/// A tmpfs mounted for the test at `.0`, unmounted however the test ends.
pub struct SmallFs(pub PathBuf);

impl SmallFs {
    /// Mounts a tmpfs of `size` (`mount`'s `size=` option); `None` where
    /// this machine cannot (not root).
    pub fn mount(size: &str) -> Option<SmallFs> {
        let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&d)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir(&d);
            return None;
        }
        Some(SmallFs(d))
    }

    /// Grows or shrinks the file system to `size`.
    #[allow(dead_code)]
    pub fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap()
            .success();
        assert!(ok, "remount failed");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
