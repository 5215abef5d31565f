//! How a flush or a compaction writes its new tables when their I/O class
//! is left at `auto`: through the page cache while the whole database is
//! small next to the memory the process may use, past it (the class's
//! resolved mode, direct where the probe allows) once it is not.
//!
//! Writing past the cache protects a hot set from being evicted by bytes
//! nobody reads soon. A database that fits in memory several times over has
//! no such conflict: its tables would all be cached anyway, and a table
//! written past the cache must be read back from the device by the first
//! reads after the write. See `Options::small_database_share`.

use quietio::{AccessMode, EffectiveMode, IoClass, IoEnv};

use crate::options::Options;

/// The mode to write a new table of `class` in: `Some(Buffered)` when the
/// class is left at `auto`, resolved to a mode that keeps its bytes out of
/// the page cache, user reads go through the page cache, and the live
/// tables plus `adding` bytes fit within the small-database share of
/// `usable_memory`; `None` to write in the class's own mode.
pub(crate) fn table_write_mode(
    opts: &Options,
    env: &IoEnv,
    class: IoClass,
    table_bytes: u64,
    adding: u64,
    usable_memory: Option<u64>,
) -> Option<AccessMode> {
    if opts.io_modes.get(class) != AccessMode::Auto || opts.small_database_share <= 0.0 {
        return None;
    }
    let caches = |m| matches!(m, EffectiveMode::Buffered | EffectiveMode::Mmap);
    // Already through the cache; or user reads that never look there
    // (direct: the block cache is their only cache).
    if caches(env.mode(class)) || !caches(env.mode(IoClass::UserRead)) {
        return None;
    }
    let small = (usable_memory? as f64 * opts.small_database_share) as u64;
    (table_bytes.saturating_add(adding) <= small).then_some(AccessMode::Buffered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(dir: &std::path::Path, opts: &Options) -> IoEnv {
        IoEnv::open(dir, opts.io_options()).unwrap()
    }

    #[test]
    fn auto_writes_through_the_cache_only_while_the_database_is_small() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default();
        let env = env(dir.path(), &opts);
        let gib = 1u64 << 30;
        let mode = |tables, adding| {
            table_write_mode(
                &opts,
                &env,
                IoClass::FlushWrite,
                tables,
                adding,
                Some(4 * gib),
            )
        };
        if env.mode(IoClass::FlushWrite) == EffectiveMode::Buffered {
            // No direct I/O nor dontcache here (tmpfs): `auto` already
            // writes through the cache, nothing to change.
            assert_eq!(mode(0, 0), None);
            return;
        }
        // A quarter of 4 GiB is 1 GiB.
        assert_eq!(mode(gib / 2, gib / 2), Some(AccessMode::Buffered));
        assert_eq!(mode(gib / 2, gib / 2 + 1), None);
        assert_eq!(mode(2 * gib, 0), None);
        // Unknown memory: the class's own mode.
        assert_eq!(
            table_write_mode(&opts, &env, IoClass::CompactionWrite, 0, 0, None),
            None
        );
        // Share 0: never.
        let never = Options::default().small_database_share(0.0);
        assert_eq!(
            table_write_mode(&never, &env, IoClass::FlushWrite, 0, 0, Some(4 * gib)),
            None
        );
        // User reads that bypass the page cache gain nothing from it.
        let direct_reads = Options::default().io_mode(IoClass::UserRead, AccessMode::Direct);
        let env3 = IoEnv::open(dir.path(), direct_reads.io_options()).unwrap();
        assert_eq!(
            table_write_mode(
                &direct_reads,
                &env3,
                IoClass::FlushWrite,
                0,
                0,
                Some(4 * gib)
            ),
            None
        );
        // An explicit mode is never overridden.
        let explicit = Options::default().io_mode(IoClass::FlushWrite, AccessMode::Direct);
        let env2 = IoEnv::open(dir.path(), explicit.io_options()).unwrap();
        assert_eq!(
            table_write_mode(&explicit, &env2, IoClass::FlushWrite, 0, 0, Some(4 * gib)),
            None
        );
    }
}
