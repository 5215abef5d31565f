//! The closed set of configurations the worker process can be handed:
//! [`EngineMode`], one variant per built engine (quietkv always; RocksDB
//! and fjall behind their Cargo features `rocksdb` and `fjall`), with
//! [`dispatch!`] to call generic code for the engine of a mode, and which
//! engines this binary has and how to build the rest.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::bench_engine::{BenchEngine, EngineConfig};
#[cfg(feature = "fjall")]
use super::fjall::{FjallConfig, FjallEngine};
use super::page_cache::PageCacheUse;
use super::quietkv::{QuietkvConfig, QuietkvEngine};
#[cfg(feature = "rocksdb")]
use super::rocksdb::{RocksDbConfig, RocksDbEngine};

/// Every engine the bench knows, built or not, with the Cargo feature that
/// builds it (`None`: always built).
pub const ALL_ENGINES: [(&str, Option<&str>); 3] = [
    ("quietkv", None),
    ("rocksdb", Some("rocksdb")),
    ("fjall", Some("fjall")),
];

/// The engines this binary was built with.
pub fn built_engines() -> Vec<&'static str> {
    // Mutable only when a peer is built.
    #[allow(unused_mut)]
    let mut v = vec![QuietkvEngine::NAME];
    #[cfg(feature = "rocksdb")]
    v.push(RocksDbEngine::NAME);
    #[cfg(feature = "fjall")]
    v.push(FjallEngine::NAME);
    v
}

/// How to build the peers this binary lacks, for messages and reports;
/// `None` when every engine is built.
pub fn how_to_build_peers() -> Option<String> {
    let built = built_engines();
    let missing: Vec<&str> = ALL_ENGINES
        .iter()
        .filter(|(n, _)| !built.contains(n))
        .filter_map(|(_, f)| *f)
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "this binary runs quietkv alone; to bench the peers too, build with `cargo build --release -p quietkv-cli --features {}` (RocksDB's C++ build takes ~25 minutes on two cores and needs libclang)",
            missing.join(",")
        )
    })
}

/// A configuration of one of the built engines: what the parent hands the
/// worker process, and what names a column of the report.
// A run holds a handful of these, made once: the size difference between
// variants costs nothing worth an indirection at every use.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "engine", rename_all = "snake_case")]
pub enum EngineMode {
    Quietkv(QuietkvConfig),
    #[cfg(feature = "rocksdb")]
    #[serde(rename = "rocksdb")]
    RocksDb(RocksDbConfig),
    #[cfg(feature = "fjall")]
    Fjall(FjallConfig),
}

/// Calls `$f::<Engine>($config, args...)` for the engine of `$mode`.
macro_rules! dispatch {
    ($mode:expr, |$c:ident : $e:ident| $body:expr) => {
        match $mode {
            $crate::engines::mode::EngineMode::Quietkv($c) => {
                #[allow(dead_code)]
                type $e = $crate::engines::quietkv::QuietkvEngine;
                $body
            }
            #[cfg(feature = "rocksdb")]
            $crate::engines::mode::EngineMode::RocksDb($c) => {
                #[allow(dead_code)]
                type $e = $crate::engines::rocksdb::RocksDbEngine;
                $body
            }
            #[cfg(feature = "fjall")]
            $crate::engines::mode::EngineMode::Fjall($c) => {
                #[allow(dead_code)]
                type $e = $crate::engines::fjall::FjallEngine;
                $body
            }
        }
    };
}
pub(crate) use dispatch;

impl EngineMode {
    /// Parses `engine:config`, or a bare config name as quietkv's.
    pub fn parse(name: &str) -> Result<EngineMode, String> {
        let (engine, config) = match name.trim().split_once(':') {
            Some((e, c)) => (e.trim().to_ascii_lowercase(), c),
            None => (QuietkvEngine::NAME.to_string(), name),
        };
        match engine.as_str() {
            QuietkvEngine::NAME => Ok(EngineMode::Quietkv(QuietkvConfig::parse(config)?)),
            #[cfg(feature = "rocksdb")]
            RocksDbEngine::NAME => Ok(EngineMode::RocksDb(RocksDbConfig::parse(config)?)),
            #[cfg(feature = "fjall")]
            FjallEngine::NAME => Ok(EngineMode::Fjall(FjallConfig::parse(config)?)),
            other => Err(not_built(other, name)),
        }
    }

    /// The default configurations of `engine` in an experiment: quietkv's
    /// `quietkv_default`, RocksDB's `rocksdb_default`, fjall's one.
    pub fn defaults_of(
        engine: &str,
        quietkv_default: &[&str],
        rocksdb_default: &[&str],
    ) -> Result<Vec<EngineMode>, String> {
        let names: Vec<String> = match engine {
            QuietkvEngine::NAME => quietkv_default.iter().map(|c| c.to_string()).collect(),
            #[cfg(feature = "rocksdb")]
            RocksDbEngine::NAME => rocksdb_default.iter().map(|c| c.to_string()).collect(),
            #[cfg(feature = "fjall")]
            FjallEngine::NAME => vec!["buffered".into()],
            other => {
                let _ = rocksdb_default;
                return Err(not_built(other, other));
            }
        };
        names
            .iter()
            .map(|c| EngineMode::parse(&format!("{engine}:{c}")))
            .collect()
    }

    pub fn engine(&self) -> &'static str {
        dispatch!(self, |_c: E| E::NAME)
    }

    pub fn config_name(&self) -> &str {
        dispatch!(self, |c: E| c.name())
    }

    /// The engine's name and version with its [`BenchEngine::setup_note`].
    pub fn engine_text(&self) -> String {
        dispatch!(self, |_c: E| {
            let note = E::setup_note();
            if note.is_empty() {
                format!("{} ({})", E::NAME, E::VERSION)
            } else {
                format!("{} ({}): {note}", E::NAME, E::VERSION)
            }
        })
    }

    /// See [`EngineConfig::keyspaces`].
    pub fn keyspaces(&self) -> usize {
        dispatch!(self, |c: E| c.keyspaces())
    }

    /// See [`BenchEngine::immutable_file`].
    pub fn immutable_file(&self, rel: &str) -> bool {
        dispatch!(self, |_c: E| E::immutable_file(rel))
    }

    /// The name in the report: the configuration's own when one engine
    /// runs (the README's results stay comparable), else `engine:config`.
    pub fn report_name(&self, engines: usize) -> String {
        if engines > 1 {
            format!("{}:{}", self.engine(), self.config_name())
        } else {
            self.config_name().to_string()
        }
    }

    pub fn check(&self, dir: &Path) -> Result<(), String> {
        dispatch!(self, |c: E| c.check(dir))
    }

    pub fn page_cache(&self, dir: &Path) -> PageCacheUse {
        dispatch!(self, |c: E| c.page_cache(dir))
    }

    /// The configuration reads compaction output back into the page cache
    /// (its counter is reported even when it stayed at zero).
    pub fn warms_output(&self) -> bool {
        match self {
            EngineMode::Quietkv(c) => c.warm_output,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The configuration alone, as the report's parameters list it (with
    /// its engine when that is not quietkv).
    pub fn config_json(&self) -> serde_json::Value {
        let mut v = dispatch!(self, |c: E| serde_json::to_value(c).unwrap_or_default());
        if self.engine() != QuietkvEngine::NAME {
            v["engine"] = serde_json::json!(self.engine());
        }
        v
    }
}

fn not_built(engine: &str, mode: &str) -> String {
    let built = built_engines().join(", ");
    match ALL_ENGINES.iter().find(|(n, _)| *n == engine) {
        Some((_, Some(feature))) => format!(
            "engine '{engine}' (in '{mode}') is not built into this binary (built: {built}); build with `--features {feature}`"
        ),
        _ => format!("unknown engine '{engine}' in mode '{mode}' (built engines: {built})"),
    }
}

/// The report header's line on the engines of a run: each one's version
/// and setup, or quietkv alone and how to build the peers.
pub fn engines_text(modes: &[EngineMode]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut parts = Vec::new();
    for m in modes {
        if !seen.contains(&m.engine()) {
            seen.push(m.engine());
            parts.push(m.engine_text());
        }
    }
    let mut out = parts.join("; ");
    if seen == [QuietkvEngine::NAME] {
        if let Some(how) = how_to_build_peers() {
            out.push_str(&format!("; {how}"));
        }
    }
    out
}

/// How many engines `modes` span.
pub fn engine_count(modes: &[EngineMode]) -> usize {
    let mut names: Vec<&str> = modes.iter().map(|m| m.engine()).collect();
    names.sort();
    names.dedup();
    names.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_names_carry_the_engine_only_beside_another_engine() {
        let m = EngineMode::parse("both-direct").unwrap();
        assert_eq!(m, EngineMode::parse("quietkv:both-direct").unwrap());
        assert_eq!(m.report_name(1), "both-direct");
        assert_eq!(m.report_name(2), "quietkv:both-direct");
        assert_eq!(engine_count(&[m.clone(), m]), 1);
        assert!(EngineMode::parse("leveldb:buffered")
            .unwrap_err()
            .contains("unknown engine 'leveldb'"));
    }
}
