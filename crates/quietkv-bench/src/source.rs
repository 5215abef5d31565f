//! The source database of the experiments that read an engine's database
//! (E1, E2, E3, E5).
//!
//! Building it is the slow part, so it is built once per (size, layout
//! options) into `<dir>/source-<hash>/`, fully compacted, with a
//! `bench-source.json` manifest written last. A later run reuses it when the
//! manifest's spec matches and every file it lists is there with the listed
//! size; each run then starts from a copy of it (tables hard-linked).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::cgroup::interrupted;
use crate::engines::{dispatch, Batch, BenchEngine, EngineMode, Layout, Tuning};
use crate::keys::{fill_value, key, scatter, KEY_SIZE};

pub const MANIFEST: &str = "bench-source.json";

fn quietkv() -> String {
    "quietkv".into()
}

fn is_quietkv(s: &str) -> bool {
    s == "quietkv"
}

/// What determines the source database's contents and layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceSpec {
    pub format: u32,
    /// The engine that built it; left out of quietkv's manifest, so that
    /// sources built before engines were named keep their hash.
    #[serde(default = "quietkv", skip_serializing_if = "is_quietkv")]
    pub engine: String,
    /// The engine's version (the field's name predates other engines).
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
    /// Keyspaces the keys are spread over by key range (quietkv's
    /// `+ks=N`); left out of the manifest when 1, so that sources built
    /// before keyspaces were measured keep their hash.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub keyspaces: usize,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl SourceSpec {
    /// The spec of an `E` database of about `db_bytes` of `value_size`
    /// values.
    pub fn new<E: BenchEngine>(db_bytes: u64, value_size: usize) -> SourceSpec {
        let l = E::bench_layout();
        SourceSpec {
            format: 1,
            engine: E::NAME.to_string(),
            quietkv_version: E::VERSION.to_string(),
            keys: (db_bytes / value_size.max(1) as u64).max(1),
            key_size: KEY_SIZE,
            value_size,
            block_size: l.block_size,
            target_file_size: l.target_file_size,
            level_base_bytes: l.level_base_bytes,
            bloom_bits_per_key: l.bloom_bits_per_key,
            compression: l.compression,
            fully_compacted: true,
            keyspaces: 1,
        }
    }

    /// The tree's shape the spec asks for.
    pub fn layout(&self) -> Layout {
        Layout {
            block_size: self.block_size,
            target_file_size: self.target_file_size,
            level_base_bytes: self.level_base_bytes,
            bloom_bits_per_key: self.bloom_bits_per_key,
            compression: self.compression.clone(),
            // Not part of the contents: how a full compaction is installed.
            max_compaction_bytes: 25 * self.target_file_size,
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

/// The files of a database directory with their sizes, sorted by name;
/// files in subdirectories (fjall keeps its tables there) by their path
/// relative to `dir`, `/`-separated.
pub fn list_files(dir: &Path) -> Result<Vec<(String, u64)>, String> {
    let mut v = Vec::new();
    list_into(dir, "", &mut v)?;
    v.sort();
    Ok(v)
}

fn list_into(dir: &Path, prefix: &str, v: &mut Vec<(String, u64)>) -> Result<(), String> {
    for e in std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))? {
        let e = e.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if name == MANIFEST {
            continue;
        }
        let md = e
            .metadata()
            .map_err(|err| format!("cannot stat {}: {err}", e.path().display()))?;
        if md.is_dir() {
            list_into(&e.path(), &format!("{name}/"), v)?;
        } else if md.is_file() {
            v.push((name, md.len()));
        }
    }
    Ok(())
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

/// Builds the source database into `dir` (which must not exist) with
/// `buffered`, `E`'s configuration that keeps the page cache: fill in
/// scattered order, then one full compaction, so every mode starts from the
/// same fully compacted tree.
pub fn build<E: BenchEngine>(
    dir: &Path,
    spec: &SourceSpec,
    buffered: &E::Config,
    progress: &dyn Fn(&str),
) -> Result<Manifest, String> {
    let t = Instant::now();
    let tmp = dir.with_extension("building");
    let _ = std::fs::remove_dir_all(&tmp);
    let tuning = Tuning {
        layout: Some(spec.layout()),
        // The keys written below: 0..keys.
        key_span: Some(spec.keys),
        ..Tuning::engine_defaults()
    };
    let db = E::open(&tmp, buffered, &tuning)?;
    let mut value = vec![0u8; spec.value_size];
    let mut batch = Batch::new();
    let per_batch = 16;
    let mut i = 0;
    let mut next_report = Instant::now();
    while i < spec.keys {
        if interrupted() {
            drop(db);
            let _ = std::fs::remove_dir_all(&tmp);
            return Err("interrupted".into());
        }
        batch.clear();
        for j in i..(i + per_batch).min(spec.keys) {
            let k = scatter(j, spec.keys);
            fill_value(&mut value, k, 0);
            batch.put(&key(k), &value);
        }
        db.put_batch(&batch)?;
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
    db.flush()?;
    db.compact_all()?;
    db.wait_idle()?;
    db.close()?;
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
    quietio::sys::sync_all();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir).map_err(|e| format!("cannot rename {}: {e}", tmp.display()))?;
    Ok(m)
}

/// Finds a matching source in `base` or builds one (with `buffered`).
/// Returns its directory, manifest and whether it was reused.
pub fn prepare<E: BenchEngine>(
    base: &Path,
    spec: &SourceSpec,
    buffered: &E::Config,
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
    let m = build::<E>(&dir, spec, buffered, progress)?;
    progress(&format!(
        "source: built in {:.0} s, {} files, {:.0} MiB",
        m.build_seconds,
        m.files.len(),
        m.total_bytes as f64 / (1 << 20) as f64
    ));
    Ok((dir, m, false))
}

/// Finds or builds the source database of the engine of `mode`, about
/// `db_bytes` of `value_size` values, in `base` (see [`prepare`]): each
/// engine builds its own from the same keys and values, with its
/// [`BenchEngine::source_config_for`] the mode (its keys spread over as
/// many keyspaces as the mode spreads them).
pub fn prepare_source(
    mode: &EngineMode,
    base: &Path,
    db_bytes: u64,
    value_size: usize,
    reuse: bool,
    progress: &dyn Fn(&str),
) -> Result<(PathBuf, Manifest, bool), String> {
    dispatch!(mode, |c: E| {
        let spec = SourceSpec {
            keyspaces: mode.keyspaces(),
            ..SourceSpec::new::<E>(db_bytes, value_size)
        };
        prepare::<E>(base, &spec, &E::source_config_for(c), reuse, progress)
    })
}

/// Makes `to` (created afresh) a copy of the source without its manifest,
/// and syncs it. Tables (the files `immutable` says are never written
/// again: quietkv's and RocksDB's `*.sst`) are hard-linked: the engine never writes
/// to a table after it is built, it only unlinks tables it replaced, so a
/// link is as good as a copy for the run and the source stays intact. That
/// spares each run an 8 GiB copy, whose write-back on this kind of
/// host-cached virtual disk went on stalling reads during the measurement.
/// Everything else (WAL, manifest, CURRENT) is copied, because opening the
/// database rewrites it. Falls back to copying a table where the filesystem
/// refuses the link.
pub fn copy_to(
    src: &Path,
    m: &Manifest,
    to: &Path,
    immutable: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    for (name, size) in &m.files {
        let (from, dest) = (src.join(name), to.join(name));
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        if immutable(name) && std::fs::hard_link(&from, &dest).is_ok() {
            continue;
        }
        let n = std::fs::copy(&from, &dest).map_err(|e| format!("cannot copy {name}: {e}"))?;
        if n != *size {
            return Err(format!("copied {n} bytes of {name}, expected {size}"));
        }
    }
    quietio::sys::sync_all();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::QuietkvEngine;

    fn quietkv_spec(db_bytes: u64) -> SourceSpec {
        SourceSpec::new::<QuietkvEngine>(db_bytes, 4096)
    }

    #[test]
    fn spec_hash_follows_sizes_and_options() {
        let a = quietkv_spec(16 << 20);
        assert_eq!(a.keys, 4096);
        assert_eq!(a.hash(), quietkv_spec(16 << 20).hash());
        assert_ne!(a.hash(), quietkv_spec(32 << 20).hash());
        let mut b = a.clone();
        b.block_size = 8192;
        assert_ne!(a.hash(), b.hash());
        // quietkv's manifest reads as before engines were named, so the
        // sources kept on disk keep their hash; another engine's differs.
        assert!(!serde_json::to_string(&a).unwrap().contains("engine"));
        let mut other = a.clone();
        other.engine = "rocksdb".into();
        assert_ne!(a.hash(), other.hash());
        let back: SourceSpec = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back, a);
        // One keyspace reads as before keyspaces were measured; keys spread
        // over four make another source.
        assert!(!serde_json::to_string(&a).unwrap().contains("keyspaces"));
        let spread = SourceSpec {
            keyspaces: 4,
            ..a.clone()
        };
        assert_ne!(a.hash(), spread.hash());
        let back: SourceSpec =
            serde_json::from_str(&serde_json::to_string(&spread).unwrap()).unwrap();
        assert_eq!(back, spread);
    }

    #[test]
    fn manifest_must_match_spec_and_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("src");
        std::fs::create_dir_all(&dir).unwrap();
        let spec = quietkv_spec(16 << 20);
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
        let other = quietkv_spec(32 << 20);
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
            spec: quietkv_spec(1 << 20),
            files: list_files(&src).unwrap(),
            total_bytes: 10_016,
            build_seconds: 0.0,
        };
        let dst = tmp.path().join("b");
        let sst = |n: &str| n.ends_with(".sst");
        copy_to(&src, &m, &dst, &sst).unwrap();
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
        copy_to(&src, &m, &dst, &sst).unwrap();
        std::fs::remove_file(dst.join("000007.sst")).unwrap();
        assert_eq!(std::fs::read(src.join("000007.sst")).unwrap().len(), 10_000);
    }

    #[test]
    fn subdirectories_are_listed_and_copied_with_their_paths() {
        use std::os::unix::fs::MetadataExt;
        // fjall's layout: tables in nested directories, named by number.
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("a");
        std::fs::create_dir_all(src.join("keyspaces/1/tables")).unwrap();
        std::fs::write(src.join("keyspaces/1/tables/7"), vec![1u8; 300]).unwrap();
        std::fs::write(src.join("keyspaces/1/meta"), b"m").unwrap();
        std::fs::write(src.join("version"), b"v1").unwrap();
        let files = list_files(&src).unwrap();
        assert_eq!(
            files,
            vec![
                ("keyspaces/1/meta".to_string(), 1),
                ("keyspaces/1/tables/7".to_string(), 300),
                ("version".to_string(), 2)
            ]
        );
        let m = Manifest {
            spec: quietkv_spec(1 << 20),
            files,
            total_bytes: 303,
            build_seconds: 0.0,
        };
        let dst = tmp.path().join("b");
        copy_to(&src, &m, &dst, &|n: &str| n.contains("/tables/")).unwrap();
        assert_eq!(std::fs::read(dst.join("version")).unwrap(), b"v1");
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(
            ino(&src.join("keyspaces/1/tables/7")),
            ino(&dst.join("keyspaces/1/tables/7"))
        );
        assert_ne!(
            ino(&src.join("keyspaces/1/meta")),
            ino(&dst.join("keyspaces/1/meta"))
        );
    }
}
