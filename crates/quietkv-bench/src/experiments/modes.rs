//! Which engine configurations a run compares: `--modes` and `--engines`
//! parsed into [`EngineMode`]s (interleaved across engines), their names
//! in the report, and what each does to the page cache, checked before any
//! run starts.

use std::collections::BTreeMap;
use std::path::Path;

use crate::args::BenchArgs;
use crate::engines::{self, engine_count, EngineMode, PageCacheUse};

/// Each mode's page-cache use as `name = compaction read ... / ... / user
/// read ...`, joined by `; `, with what a choice left to the engine
/// resolves to in `dir`.
pub(crate) fn describe_modes(dir: &Path, modes: &[EngineMode]) -> String {
    let engines = engine_count(modes);
    modes
        .iter()
        .map(|m| {
            format!(
                "{} = {}",
                m.report_name(engines),
                m.page_cache(dir).describe()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The modes' report names, in order.
pub(crate) fn report_names(modes: &[EngineMode]) -> Vec<String> {
    let engines = engine_count(modes);
    modes.iter().map(|m| m.report_name(engines)).collect()
}

/// Each mode's page-cache use in `dir`, by report name, for the verdict.
pub(crate) fn page_cache_by_name(
    dir: &Path,
    modes: &[EngineMode],
) -> BTreeMap<String, PageCacheUse> {
    report_names(modes)
        .into_iter()
        .zip(modes.iter().map(|m| m.page_cache(dir)))
        .collect()
}

/// Parses `--modes` (`config` or `engine:config`), skipping empty names.
pub(crate) fn parse_modes(names: &[String]) -> Result<Vec<EngineMode>, String> {
    names
        .iter()
        .filter(|m| !m.trim().is_empty())
        .map(|m| EngineMode::parse(m))
        .collect()
}
/// The modes of a run: without `--engines`, `--modes` (or
/// `quietkv_default`) as given; with it, each listed engine's modes from
/// `--modes` (`engine:config`; bare names are quietkv's) or else its
/// defaults, merged round-robin across engines so that no engine's runs
/// bunch together. An engine this binary lacks is an error saying which
/// feature builds it.
pub(crate) fn engine_modes(
    args: &BenchArgs,
    quietkv_default: &[&str],
    rocksdb_default: &[&str],
) -> Result<Vec<EngineMode>, String> {
    let given = match &args.modes {
        Some(m) => parse_modes(m)?,
        None => Vec::new(),
    };
    let Some(engines) = &args.engines else {
        if args.modes.is_none() {
            if let Some(how) = engines::how_to_build_peers() {
                crate::progress_line!("quietkv bench: {how}");
            }
            return parse_modes(
                &quietkv_default
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>(),
            );
        }
        return Ok(given);
    };
    let engines: Vec<String> = engines
        .iter()
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .collect();
    if let Some(m) = given
        .iter()
        .find(|m| !engines.iter().any(|e| e == m.engine()))
    {
        return Err(format!(
            "mode {}:{} names an engine not in --engines {}",
            m.engine(),
            m.config_name(),
            engines.join(",")
        ));
    }
    let mut per_engine = Vec::new();
    for e in &engines {
        let mine: Vec<EngineMode> = given.iter().filter(|m| m.engine() == e).cloned().collect();
        per_engine.push(if mine.is_empty() {
            EngineMode::defaults_of(e, quietkv_default, rocksdb_default)?
        } else {
            mine
        });
    }
    let longest = per_engine.iter().map(Vec::len).max().unwrap_or(0);
    Ok((0..longest)
        .flat_map(|i| per_engine.iter().filter_map(move |v| v.get(i).cloned()))
        .collect())
}

/// Fails before any run if a mode cannot work in `dir`.
pub(crate) fn check_modes(dir: &Path, modes: &[EngineMode]) -> Result<(), String> {
    modes.iter().try_for_each(|m| m.check(dir))
}

/// RocksDB's configurations in the engine experiments unless --modes
/// names some: the five of PR #14743, tuned, and the seed's own recipe.
pub(crate) use crate::engines::rocksdb_names::CONFIG_NAMES as ROCKSDB_MODES;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::tests::args;

    #[test]
    fn the_modes_line_reads_as_before_the_engine_seam() {
        // The README's results quote these lines; a quietkv-only run keeps
        // its bare mode names and its per-direction wording.
        let dir = tempfile::tempdir().unwrap();
        let modes =
            parse_modes(&["buffered".into(), " ".into(), "write-direct+warm".into()]).unwrap();
        assert_eq!(report_names(&modes), ["buffered", "write-direct+warm"]);
        assert_eq!(
            describe_modes(dir.path(), &modes),
            "buffered = compaction read buffered / compaction+flush write buffered / user read buffered; write-direct+warm = compaction read buffered / compaction+flush write direct / user read buffered"
        );
        let page_cache = page_cache_by_name(dir.path(), &modes);
        assert_eq!(
            page_cache["write-direct+warm"].also,
            ["warm_compaction_output on"]
        );
        assert!(parse_modes(&["quietkv:turbo".into()]).is_err());
    }

    #[test]
    fn engines_select_modes_and_interleave_them() {
        let names = |a: &[&str]| -> Result<Vec<String>, String> {
            let m = engine_modes(&args(a), &["buffered", "auto"], &ROCKSDB_MODES)?;
            Ok(report_names(&m))
        };
        // No --engines: quietkv's modes as before, bare names.
        assert_eq!(names(&[]).unwrap(), ["buffered", "auto"]);
        assert_eq!(names(&["--modes", "dontcache"]).unwrap(), ["dontcache"]);
        assert_eq!(
            names(&["--engines", "quietkv", "--modes", "direct,auto"]).unwrap(),
            ["direct", "auto"]
        );
        // A mode of an engine left out of --engines is refused (and where
        // the engine is not built at all, that is what the error says).
        let e = names(&["--engines", "quietkv", "--modes", "fjall:buffered"]).unwrap_err();
        if cfg!(feature = "fjall") {
            assert!(e.contains("not in --engines"), "{e}");
        } else {
            assert!(e.contains("--features fjall"), "{e}");
        }
        #[cfg(not(feature = "rocksdb"))]
        {
            let e = names(&["--engines", "quietkv,rocksdb"]).unwrap_err();
            assert!(e.contains("--features rocksdb"), "{e}");
        }
        #[cfg(feature = "fjall")]
        {
            // Round-robin across engines; --modes' bare names are quietkv's.
            assert_eq!(
                names(&[
                    "--engines",
                    "quietkv,fjall",
                    "--modes",
                    "buffered,both-direct,auto"
                ])
                .unwrap(),
                [
                    "quietkv:buffered",
                    "fjall:buffered",
                    "quietkv:both-direct",
                    "quietkv:auto"
                ]
            );
            assert_eq!(
                names(&["--engines", "fjall,quietkv"]).unwrap(),
                ["fjall:buffered", "quietkv:buffered", "quietkv:auto"]
            );
        }
        #[cfg(feature = "rocksdb")]
        {
            let all = names(&["--engines", "rocksdb"]).unwrap();
            assert_eq!(all, ROCKSDB_MODES);
        }
    }

    #[test]
    fn a_quietkv_only_run_says_how_to_build_the_peers() {
        let modes = parse_modes(&["buffered".into()]).unwrap();
        let t = engines::engines_text(&modes);
        assert!(t.starts_with("quietkv ("), "{t}");
        if engines::built_engines().len() < engines::ALL_ENGINES.len() {
            assert!(t.contains("to bench the peers too, build with `cargo build --release -p quietkv-cli --features"), "{t}");
        } else {
            assert!(!t.contains("build with"), "{t}");
        }
    }
}
