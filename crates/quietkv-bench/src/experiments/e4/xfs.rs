//! The loop-mounted xfs image E4 writes its xfs configurations to: made
//! in the scratch directory, trimmed between runs, unmounted, detached and
//! deleted on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A loop-mounted xfs image, removed (unmounted, detached, deleted) on drop.
pub struct XfsMount {
    image: PathBuf,
    loop_dev: String,
    mount: PathBuf,
}

/// Runs a system tool, its stdout or what it said on failure.
fn run_tool(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl XfsMount {
    /// Why xfs cannot be used here, if it cannot.
    pub fn unavailable_reason() -> Option<String> {
        if quietio::sys::effective_uid() != 0 {
            return Some("mounting an xfs image needs root".into());
        }
        if run_tool(Command::new("mkfs.xfs").arg("-V")).is_err() {
            return Some("mkfs.xfs is missing (install xfsprogs)".into());
        }
        None
    }

    pub fn create(scratch: &Path, bytes: u64) -> Result<XfsMount, String> {
        if let Some(why) = Self::unavailable_reason() {
            return Err(why);
        }
        let image = scratch.join("e4-xfs.img");
        let f = std::fs::File::create(&image)
            .map_err(|e| format!("cannot create {}: {e}", image.display()))?;
        f.set_len(bytes)
            .map_err(|e| format!("cannot size {}: {e}", image.display()))?;
        drop(f);
        let cleanup_image = |e: String| {
            let _ = std::fs::remove_file(&image);
            e
        };
        run_tool(Command::new("mkfs.xfs").args(["-q", "-f"]).arg(&image)).map_err(cleanup_image)?;
        let loop_dev = run_tool(
            Command::new("losetup")
                .args(["--find", "--show"])
                .arg(&image),
        )
        .map_err(cleanup_image)?;
        let mount = scratch.join("e4-xfs");
        let m = XfsMount {
            image,
            loop_dev,
            mount,
        };
        std::fs::create_dir_all(&m.mount)
            .map_err(|e| format!("cannot create {}: {e}", m.mount.display()))?;
        run_tool(Command::new("mount").arg(&m.loop_dev).arg(&m.mount))?;
        Ok(m)
    }

    pub fn dir(&self) -> &Path {
        &self.mount
    }

    /// Hands the file system's free blocks back to the image (`fstrim`,
    /// which the loop device turns into holes), so a run's deleted
    /// database does not stay allocated in the image: xfs places each
    /// run's new directory in another allocation group, and without this
    /// a full-scale E4 grows the sparse image to its whole size.
    /// The file system is synced first, but xfs may still hold extents
    /// freed moments ago (an `fstrim` right after a run's delete found
    /// almost nothing to trim; one a run later trimmed it all), so this
    /// bounds the image to about the last runs' data, not to one run's.
    pub fn trim(&self) -> Result<(), String> {
        run_tool(Command::new("sync").arg("-f").arg(&self.mount))?;
        run_tool(Command::new("fstrim").arg(&self.mount)).map(|_| ())
    }
}

impl Drop for XfsMount {
    fn drop(&mut self) {
        if let Err(e) = run_tool(Command::new("umount").arg(&self.mount)) {
            eprintln!("quietkv bench: {e}");
        }
        if let Err(e) = run_tool(Command::new("losetup").arg("-d").arg(&self.loop_dev)) {
            eprintln!("quietkv bench: {e}");
        }
        let _ = std::fs::remove_dir(&self.mount);
        let _ = std::fs::remove_file(&self.image);
    }
}
