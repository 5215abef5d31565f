//! Writes the seed corpora of the fuzz targets (see `fuzz/README.md`):
//! `cargo run -p quietkv --features fuzzing --example fuzz_seeds -- fuzz/corpus`.
//! Each seed is stored under `<dir>/<target>/seed-<crc32c of its bytes>`.
//! Every run writes fresh databases (new ids, new timing), so most seeds
//! differ between runs: to regenerate one target's seeds, delete its
//! directory, run this into a scratch directory and copy that target over.
//! With `--keyspaces` after the directory, only the seeds of the keyspace
//! parts of the format are written (see
//! `quietkv::fuzzing::keyspace_seed_corpora`), which adds those without
//! adding fresh copies of every other seed.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: fuzz_seeds <corpus dir>")?,
    );
    let only_keyspaces = match std::env::args().nth(2).as_deref() {
        None => false,
        Some("--keyspaces") => true,
        Some(other) => return Err(format!("unknown option {other}").into()),
    };
    let scratch = tempfile::tempdir()?;
    let seeds = if only_keyspaces {
        quietkv::fuzzing::keyspace_seed_corpora(scratch.path())?
    } else {
        quietkv::fuzzing::seed_corpora(scratch.path())?
    };
    let mut written = 0;
    for (target, bytes) in &seeds {
        let dir = out.join(target);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("seed-{:08x}", crc32c::crc32c(bytes)));
        if !path.exists() {
            std::fs::write(&path, bytes)?;
            written += 1;
        }
    }
    println!("{} seeds, {written} new, in {}", seeds.len(), out.display());
    Ok(())
}
