//! The source database of the engine experiments (E1, E2, E3).
//!
//! Building it is the slow part, so it is built once per (size, layout
//! options) into `<dir>/source-<hash>/`, fully compacted, with a
//! `bench-source.json` manifest written last. A later run reuses it when the
//! manifest's spec matches and every file it lists is there with the listed
//! size; each run then starts from a copy of it (tables hard-linked).

use std::path::{Path, PathBuf};
use std::time::Instant;

use quietkv::{AccessMode, Db, IoClass, Options, WriteBatch, WriteOptions};
use serde::{Deserialize, Serialize};

use super::cgroup::interrupted;

pub const MANIFEST: &str = "bench-source.json";
pub const KEY_SIZE: usize = 16;

/// What determines the source database's contents and layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceSpec {
    pub format: u32,
    pub quietkv_version: String,
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub block_size: usize,
    pub target_file_size: u64,
    pub level_base_bytes: u64,
    pub bloom_bits_per_key: usize,
    pub compression: String,
    /// Built with buffered I/O, then `compact_all` + `wait_idle`.
    pub fully_compacted: bool,
}

impl SourceSpec {
    /// The spec of a database of about `db_bytes` of `value_size` values.
    pub fn new(db_bytes: u64, value_size: usize) -> SourceSpec {
        let o = layout_options();
        SourceSpec {
            format: 1,
            quietkv_version: env!("CARGO_PKG_VERSION").to_string(),
            keys: (db_bytes / value_size.max(1) as u64).max(1),
            key_size: KEY_SIZE,
            value_size,
            block_size: o.block_size,
            target_file_size: o.target_file_size,
            level_base_bytes: o.level_base_bytes,
            bloom_bits_per_key: o.bloom_bits_per_key,
            compression: "none".into(),
            fully_compacted: true,
        }
    }

    /// A stable hash of the spec (FNV-1a of its JSON), for the directory
    /// name.
    pub fn hash(&self) -> String {
        let s = serde_json::to_string(self).unwrap_or_default();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in s.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }

    pub fn dir_in(&self, base: &Path) -> PathBuf {
        base.join(format!("source-{}", self.hash()))
    }
}

/// The manifest: the spec plus what was built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub spec: SourceSpec,
    /// (file name, size in bytes) of every file of the database.
    pub files: Vec<(String, u64)>,
    pub total_bytes: u64,
    pub build_seconds: f64,
}

/// Options that shape the tree on disk (the source's and every run's).
pub fn layout_options() -> Options {
    Options {
        target_file_size: 32 << 20,
        compression: quietkv::Compression::None,
        ..Options::default()
    }
}

/// The key of index `k`: 16 ASCII digits.
pub fn key(k: u64) -> [u8; KEY_SIZE] {
    let mut out = [0u8; KEY_SIZE];
    out.copy_from_slice(format!("{k:016}").as_bytes());
    out
}

/// The value of key `k` at `version` (0 = as built); its first 16 bytes
/// identify both, the rest is incompressible-looking filler.
pub fn fill_value(buf: &mut [u8], k: u64, version: u64) {
    let mut x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    for w in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        w.copy_from_slice(&b[..w.len()]);
    }
    if buf.len() >= 16 {
        buf[..8].copy_from_slice(&k.to_le_bytes());
        buf[8..16].copy_from_slice(&version.to_le_bytes());
    }
}

/// A permutation of `0..n`, so the fill writes keys in scattered order and
/// the tree goes through real compactions while it is built.
fn scatter(i: u64, n: u64) -> u64 {
    const P: u64 = 2_654_435_761; // prime
    let p = if n.is_multiple_of(P) { 1_000_003 } else { P };
    ((i % n) as u128 * (p % n) as u128 % n as u128) as u64
}

/// The files of a database directory with their sizes, sorted by name.
pub fn list_files(dir: &Path) -> Result<Vec<(String, u64)>, String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        let name = e.file_name().to_string_lossy().to_string();
        if name == MANIFEST {
            continue;
        }
        let md = e.metadata().map_err(|e| e.to_string())?;
        if md.is_file() {
            v.push((name, md.len()));
        }
    }
    v.sort();
    Ok(v)
}

/// Why the source in `dir` cannot be reused for `spec`, or `None` if it can.
pub fn mismatch(dir: &Path, spec: &SourceSpec) -> Option<String> {
    let text = match std::fs::read_to_string(dir.join(MANIFEST)) {
        Ok(t) => t,
        Err(_) => return Some("no manifest (not built, or the build did not finish)".into()),
    };
    let m: Manifest = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(e) => return Some(format!("unreadable manifest: {e}")),
    };
    if &m.spec != spec {
        return Some("manifest describes other sizes or options".into());
    }
    let files = match list_files(dir) {
        Ok(f) => f,
        Err(e) => return Some(e),
    };
    if files != m.files {
        return Some("files differ from the manifest (sizes or names)".into());
    }
    None
}

/// Builds the source database into `dir` (which must not exist): fill with
/// buffered I/O in scattered order, then one full compaction, so every mode
/// starts from the same fully compacted tree.
pub fn build(dir: &Path, spec: &SourceSpec, progress: &dyn Fn(&str)) -> Result<Manifest, String> {
    let t = Instant::now();
    let tmp = dir.with_extension("building");
    let _ = std::fs::remove_dir_all(&tmp);
    let mut opts = layout_options();
    for c in [
        IoClass::UserRead,
        IoClass::CompactionRead,
        IoClass::CompactionWrite,
        IoClass::FlushWrite,
    ] {
        opts = opts.io_mode(c, AccessMode::Buffered);
    }
    opts.block_size = spec.block_size;
    opts.target_file_size = spec.target_file_size;
    opts.level_base_bytes = spec.level_base_bytes;
    opts.bloom_bits_per_key = spec.bloom_bits_per_key;
    let e = |e: quietkv::Error| e.to_string();
    let db = Db::open(&tmp, opts).map_err(e)?;
    let mut value = vec![0u8; spec.value_size];
    let per_batch = 16;
    let mut i = 0;
    let mut next_report = Instant::now();
    while i < spec.keys {
        if interrupted() {
            drop(db);
            let _ = std::fs::remove_dir_all(&tmp);
            return Err("interrupted".into());
        }
        let mut b = WriteBatch::new();
        for j in i..(i + per_batch).min(spec.keys) {
            let k = scatter(j, spec.keys);
            fill_value(&mut value, k, 0);
            b.put(&key(k), &value).map_err(e)?;
        }
        db.write(b, WriteOptions::default()).map_err(e)?;
        i += per_batch;
        if next_report.elapsed().as_secs_f64() >= 10.0 {
            progress(&format!(
                "source: {:.0}% filled ({:.0} s)",
                100.0 * i as f64 / spec.keys as f64,
                t.elapsed().as_secs_f64()
            ));
            next_report = Instant::now();
        }
    }
    progress(&format!(
        "source: filled {} keys in {:.0} s; full compaction",
        spec.keys,
        t.elapsed().as_secs_f64()
    ));
    db.flush().map_err(e)?;
    db.compact_all().map_err(e)?;
    db.wait_idle().map_err(e)?;
    db.close().map_err(e)?;
    let files = list_files(&tmp)?;
    let total_bytes = files.iter().map(|f| f.1).sum();
    let m = Manifest {
        spec: spec.clone(),
        files,
        total_bytes,
        build_seconds: t.elapsed().as_secs_f64(),
    };
    // The manifest is written last: a build cut short has none.
    let json = serde_json::to_string_pretty(&m).map_err(|e| e.to_string())?;
    std::fs::write(tmp.join(MANIFEST), json).map_err(|e| e.to_string())?;
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir).map_err(|e| format!("cannot rename {}: {e}", tmp.display()))?;
    Ok(m)
}

/// Finds a matching source in `base` or builds one. Returns its directory,
/// manifest and whether it was reused.
pub fn prepare(
    base: &Path,
    spec: &SourceSpec,
    reuse: bool,
    progress: &dyn Fn(&str),
) -> Result<(PathBuf, Manifest, bool), String> {
    let dir = spec.dir_in(base);
    if reuse {
        match mismatch(&dir, spec) {
            None => {
                let m: Manifest = serde_json::from_str(
                    &std::fs::read_to_string(dir.join(MANIFEST)).map_err(|e| e.to_string())?,
                )
                .map_err(|e| e.to_string())?;
                progress(&format!(
                    "source: reusing {} ({} keys, {:.0} MiB, manifest matches)",
                    dir.display(),
                    m.spec.keys,
                    m.total_bytes as f64 / (1 << 20) as f64
                ));
                return Ok((dir, m, true));
            }
            Some(why) if dir.exists() => {
                progress(&format!("source: rebuilding {}: {why}", dir.display()))
            }
            Some(_) => {}
        }
    }
    progress(&format!(
        "source: building {} ({} keys x {} B values, about {:.0} MiB)",
        dir.display(),
        spec.keys,
        spec.value_size,
        (spec.keys * spec.value_size as u64) as f64 / (1 << 20) as f64
    ));
    let m = build(&dir, spec, progress)?;
    progress(&format!(
        "source: built in {:.0} s, {} files, {:.0} MiB",
        m.build_seconds,
        m.files.len(),
        m.total_bytes as f64 / (1 << 20) as f64
    ));
    Ok((dir, m, false))
}

/// Makes `to` (created afresh) a copy of the source without its manifest,
/// and syncs it. Tables (`*.sst`) are hard-linked: the engine never writes
/// to a table after it is built, it only unlinks tables it replaced, so a
/// link is as good as a copy for the run and the source stays intact. That
/// spares each run an 8 GiB copy, whose write-back on this kind of
/// host-cached virtual disk went on stalling reads during the measurement.
/// Everything else (WAL, manifest, CURRENT) is copied, because opening the
/// database rewrites it. Falls back to copying a table where the filesystem
/// refuses the link.
pub fn copy_to(src: &Path, m: &Manifest, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    for (name, size) in &m.files {
        let (from, dest) = (src.join(name), to.join(name));
        if name.ends_with(".sst") && std::fs::hard_link(&from, &dest).is_ok() {
            continue;
        }
        let n = std::fs::copy(&from, &dest).map_err(|e| format!("cannot copy {name}: {e}"))?;
        if n != *size {
            return Err(format!("copied {n} bytes of {name}, expected {size}"));
        }
    }
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_is_a_permutation() {
        for n in [1u64, 7, 16, 1000, 4096] {
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                seen[scatter(i, n) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "n = {n}");
        }
    }

    #[test]
    fn spec_hash_follows_sizes_and_options() {
        let a = SourceSpec::new(16 << 20, 4096);
        assert_eq!(a.keys, 4096);
        assert_eq!(a.hash(), SourceSpec::new(16 << 20, 4096).hash());
        assert_ne!(a.hash(), SourceSpec::new(32 << 20, 4096).hash());
        let mut b = a.clone();
        b.block_size = 8192;
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn manifest_must_match_spec_and_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("src");
        std::fs::create_dir_all(&dir).unwrap();
        let spec = SourceSpec::new(16 << 20, 4096);
        assert!(mismatch(&dir, &spec).unwrap().contains("no manifest"));
        std::fs::write(dir.join("000001.sst"), b"abc").unwrap();
        let m = Manifest {
            spec: spec.clone(),
            files: list_files(&dir).unwrap(),
            total_bytes: 3,
            build_seconds: 1.0,
        };
        std::fs::write(dir.join(MANIFEST), serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(mismatch(&dir, &spec), None);
        // Other sizes or options.
        let other = SourceSpec::new(32 << 20, 4096);
        assert!(mismatch(&dir, &other).unwrap().contains("other sizes"));
        let mut v = spec.clone();
        v.quietkv_version = "0.0.0".into();
        assert!(mismatch(&dir, &v).is_some());
        // A file changed size, or one is missing.
        std::fs::write(dir.join("000001.sst"), b"abcd").unwrap();
        assert!(mismatch(&dir, &spec).unwrap().contains("files differ"));
        std::fs::remove_file(dir.join("000001.sst")).unwrap();
        assert!(mismatch(&dir, &spec).unwrap().contains("files differ"));
    }

    #[test]
    fn copy_links_tables_and_copies_the_rest() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("a");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("000007.sst"), vec![7u8; 10_000]).unwrap();
        std::fs::write(src.join("CURRENT"), b"MANIFEST-000001\n").unwrap();
        let m = Manifest {
            spec: SourceSpec::new(1 << 20, 4096),
            files: list_files(&src).unwrap(),
            total_bytes: 10_016,
            build_seconds: 0.0,
        };
        let dst = tmp.path().join("b");
        copy_to(&src, &m, &dst).unwrap();
        assert_eq!(
            std::fs::read(dst.join("000007.sst")).unwrap(),
            vec![7u8; 10_000]
        );
        let (s, d) = (
            std::fs::metadata(src.join("000007.sst")).unwrap(),
            std::fs::metadata(dst.join("000007.sst")).unwrap(),
        );
        assert_eq!(s.ino(), d.ino(), "a table is linked");
        // The rest is a real copy: rewriting it leaves the source alone.
        std::fs::write(dst.join("CURRENT"), b"MANIFEST-000009\n").unwrap();
        assert_eq!(
            std::fs::read(src.join("CURRENT")).unwrap(),
            b"MANIFEST-000001\n"
        );
        // Deleting the run's table (as a compaction does) keeps the source's.
        copy_to(&src, &m, &dst).unwrap();
        std::fs::remove_file(dst.join("000007.sst")).unwrap();
        assert_eq!(std::fs::read(src.join("000007.sst")).unwrap().len(), 10_000);
    }
}
