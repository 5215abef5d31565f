//! The fuzz targets on the stable toolchain: every committed input of every
//! target (the seed corpus in `fuzz/corpus/<target>` and the minimised
//! crashes in `fuzz/regressions/<target>`) is replayed, then each target
//! runs for a short, bounded time on deterministic mutations of those
//! inputs. The long runs use libFuzzer on nightly (see `fuzz/README.md`);
//! this test keeps CI on stable and keeps every bug they found fixed.
//!
//! `QUIETKV_FUZZ_SECS` sets the mutation budget per target (default 2 s;
//! 0 replays only). A failing input is written to
//! `target/fuzz-failures/<target>-<crc>` so it can be added to
//! `fuzz/regressions/<target>` and replayed with `cargo +nightly fuzz run`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use quietkv::fuzzing::{Target, TARGETS};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Committed inputs of `target`: seeds, then regressions.
fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for kind in ["corpus", "regressions"] {
        let dir = fuzz_dir().join(kind).join(target);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
        paths.sort();
        for p in paths {
            let bytes = std::fs::read(&p).unwrap();
            out.push((p, bytes));
        }
    }
    out
}

/// Runs `f` on `input`; on a panic saves the input and fails naming it.
fn run_one(name: &str, f: Target, input: &[u8], origin: &str) {
    if catch_unwind(AssertUnwindSafe(|| f(input))).is_ok() {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-failures");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{:08x}", crc32c::crc32c(input)));
    std::fs::write(&path, input).unwrap();
    let shown: Vec<String> = input.iter().take(64).map(|b| format!("{b:02x}")).collect();
    panic!(
        "fuzz target {name} failed on {origin} ({} bytes: {}...), saved as {}",
        input.len(),
        shown.join(""),
        path.display()
    );
}

/// xorshift64*: deterministic, so a failure found here recurs on re-run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// One to four libFuzzer-style mutations of `input`; `other` is spliced in.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    const INTERESTING: [u64; 8] = [0, 1, 0x7f, 0x80, 0xff, 0xffff, u32::MAX as u64, u64::MAX];
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(8) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            2 => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            3 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(end)..end);
            }
            4 => {
                let x = INTERESTING[rng.below(INTERESTING.len())];
                let width = [1, 2, 4, 8][rng.below(4)];
                for (k, b) in x.to_le_bytes()[..width].iter().enumerate() {
                    if let Some(slot) = v.get_mut(at + k) {
                        *slot = *b;
                    }
                }
            }
            5 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(64)).min(other.len());
                v.splice(at..at, other[from..end].iter().copied());
            }
            6 => v.truncate(at),
            _ if v.len() > 1 => {
                // Copy a range over another place: repeats structure.
                let from = rng.below(v.len());
                let end = (from + 1 + rng.below(32)).min(v.len());
                let chunk = v[from..end].to_vec();
                let to = rng.below(v.len());
                for (k, b) in chunk.into_iter().enumerate() {
                    if let Some(slot) = v.get_mut(to + k) {
                        *slot = b;
                    }
                }
            }
            _ => {}
        }
    }
    v
}

fn budget() -> Duration {
    let secs: f64 = std::env::var("QUIETKV_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    Duration::from_secs_f64(secs)
}

fn target(name: &str) -> Target {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no fuzz target {name}"))
        .1
}

/// Replays the committed inputs of `name`, then mutates them for the budget.
fn replay_and_fuzz(name: &str) {
    let f = target(name);
    let inputs = inputs(name);
    assert!(
        !inputs.is_empty(),
        "fuzz/corpus/{name} holds no seeds (regenerate with the fuzz_seeds example)"
    );
    for (path, bytes) in &inputs {
        run_one(name, f, bytes, &path.display().to_string());
    }
    let seed = name.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let mut rng = Rng(seed | 1);
    let deadline = Instant::now() + budget();
    let mut runs = 0u64;
    while Instant::now() < deadline {
        let base = &inputs[rng.below(inputs.len())].1;
        let other = &inputs[rng.below(inputs.len())].1;
        let input = mutate(&mut rng, base, other);
        run_one(name, f, &input, &format!("mutation {runs}"));
        runs += 1;
    }
    eprintln!(
        "{name}: {} committed inputs, {runs} mutations",
        inputs.len()
    );
}

macro_rules! fuzz_tests {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                replay_and_fuzz($name);
            }
        )*

        /// Every target has a test here, a libFuzzer binary and a corpus.
        #[test]
        fn every_target_is_replayed_and_has_a_fuzzer() {
            let tested: Vec<&str> = vec![$($name),*];
            let registered: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
            assert_eq!(tested, registered, "a target in quietkv::fuzzing has no test here");
            for name in registered {
                let bin = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
                assert!(bin.exists(), "{} is missing", bin.display());
            }
        }
    };
}

fuzz_tests! {
    fuzz_block => "block",
    fuzz_block_trailer => "block_trailer",
    fuzz_footer => "footer",
    fuzz_properties => "properties",
    fuzz_index => "index",
    fuzz_table => "table",
    fuzz_bloom => "bloom",
    fuzz_wal => "wal",
    fuzz_batch => "batch",
    fuzz_version_edit => "version_edit",
    fuzz_manifest => "manifest",
    fuzz_current => "current",
}

/// The regression inputs fail without their fixes: each one, replayed,
/// reaches the invariant it broke (guards against a regression input that
/// no longer exercises anything, e.g. after a format change).
#[test]
fn noncanonical_table_name_is_not_a_database_file() {
    let bytes =
        std::fs::read(fuzz_dir().join("regressions/current/noncanonical-table-name")).unwrap();
    let name = std::str::from_utf8(&bytes).unwrap();
    assert_eq!(name, "00002.sst");
    assert!(!quietkv::fuzzing::is_database_file_name(name));
    assert!(quietkv::fuzzing::is_database_file_name("000002.sst"));
}
