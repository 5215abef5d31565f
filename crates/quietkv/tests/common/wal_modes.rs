//! The WAL write modes a directory supports, for tests that run every one.

use std::path::Path;

use quietkv::AccessMode;

/// Buffered and fadvise always; direct, dontcache and (with `with_mmap`)
/// mmap where the directory's probe says they work.
pub fn supported_wal_modes(dir: &Path, with_mmap: bool) -> Vec<AccessMode> {
    let env = quietio::IoEnv::open(dir, quietio::IoOptions::default()).unwrap();
    let caps = env.capabilities();
    let mut v = vec![AccessMode::Buffered, AccessMode::Fadvise];
    if caps.direct_unusable_reason(true).is_none() {
        v.push(AccessMode::Direct);
    }
    if caps.dontcache.supported {
        v.push(AccessMode::DontCache);
    }
    if with_mmap && caps.fallocate.supported {
        v.push(AccessMode::Mmap);
    }
    v
}
