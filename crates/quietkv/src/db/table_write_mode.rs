//! How a flush or a compaction writes its new tables when their I/O class
//! is left at `auto`: past the page cache (the class's resolved mode,
//! direct where the probe allows), except in two cases where caching what
//! is written evicts nothing a reader needs:
//!
//! - the whole database is small next to the memory the process may use
//!   (`Options::small_database_share`): its tables would all be cached
//!   anyway, and a table written past the cache must be read back from
//!   the device by the first reads after the write;
//! - when asked for (`Options::free_memory_reserve`, off by default), the
//!   memory the process can still take without the kernel evicting
//!   anything has room for the table and the reserve: the reads after a
//!   bulk load find the newest tables cached, as a buffered engine's
//!   would be, for the price of memory that fills and then reclaims.
//!
//! Writing past the cache protects a hot set from being evicted by bytes
//! nobody reads soon, and keeps the memory it leaves free from filling
//! with pages that must be reclaimed later.

use quietio::{AccessMode, EffectiveMode, IoClass, IoEnv};

use crate::options::Options;

/// Why a table of a class left at `auto` is written through the page
/// cache after all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CachedWrite {
    /// The database is small next to the usable memory.
    SmallDatabase,
    /// The table fits in memory that holds nothing.
    FreeMemory,
}

impl CachedWrite {
    /// The mode the table is written in.
    pub(crate) fn mode(self) -> AccessMode {
        AccessMode::Buffered
    }
}

/// The process's memory as a table writer sees it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Memory {
    /// What the process may use: its cgroup's limit, else the machine's.
    pub usable: Option<u64>,
    /// What it can still take before the kernel must evict something.
    pub room: Option<u64>,
}

impl Memory {
    /// Reads both now (a few small files under /proc and /sys: call it
    /// outside locks).
    pub(crate) fn now() -> Memory {
        Memory {
            usable: quietio::usable_memory(),
            room: quietio::memory_room(),
        }
    }
}

/// The sizes a table write is judged by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableWrite {
    /// Bytes of the database's live tables (every keyspace's).
    pub database: u64,
    /// Bytes the flush or compaction adds before its inputs go.
    pub adding: u64,
    /// Bytes of the table about to be written.
    pub table: u64,
}

/// Whether a new table of `class` is written through the page cache
/// although the class is left at `auto` and resolved to a mode that keeps
/// its bytes out of it; `None` to write in the class's own mode. Only
/// when user reads go through the page cache: direct ones never look
/// there.
pub(crate) fn table_write_mode(
    opts: &Options,
    env: &IoEnv,
    class: IoClass,
    write: TableWrite,
    memory: Memory,
) -> Option<CachedWrite> {
    if opts.io_modes.get(class) != AccessMode::Auto {
        return None;
    }
    let caches = |m| matches!(m, EffectiveMode::Buffered | EffectiveMode::Mmap);
    // Already through the cache; or user reads that never look there
    // (direct: the block cache is their only cache).
    if caches(env.mode(class)) || !caches(env.mode(IoClass::UserRead)) {
        return None;
    }
    let usable = memory.usable?;
    let small = (usable as f64 * opts.small_database_share) as u64;
    if opts.small_database_share > 0.0 && write.database.saturating_add(write.adding) <= small {
        return Some(CachedWrite::SmallDatabase);
    }
    let reserve = (usable as f64 * opts.free_memory_reserve) as u64;
    if opts.free_memory_reserve < 1.0 && memory.room? >= write.table.saturating_add(reserve) {
        return Some(CachedWrite::FreeMemory);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn env(dir: &std::path::Path, opts: &Options) -> IoEnv {
        IoEnv::open(dir, opts.io_options()).unwrap()
    }

    fn write(database: u64, adding: u64, table: u64) -> TableWrite {
        TableWrite {
            database,
            adding,
            table,
        }
    }

    fn memory(usable: u64, room: u64) -> Memory {
        Memory {
            usable: Some(usable),
            room: Some(room),
        }
    }

    #[test]
    fn auto_writes_through_the_cache_while_the_database_is_small_or_memory_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default().free_memory_reserve(0.125);
        let env = env(dir.path(), &opts);
        let mode = |w, m| table_write_mode(&opts, &env, IoClass::FlushWrite, w, m);
        if env.mode(IoClass::FlushWrite) == EffectiveMode::Buffered {
            // No direct I/O nor dontcache here (tmpfs): `auto` already
            // writes through the cache, nothing to change.
            assert_eq!(mode(write(0, 0, 0), memory(4 * GIB, 4 * GIB)), None);
            return;
        }
        let no_room = memory(4 * GIB, 0);
        // A quarter of 4 GiB is 1 GiB.
        let small = Some(CachedWrite::SmallDatabase);
        assert_eq!(mode(write(GIB / 2, GIB / 2, 64 << 20), no_room), small);
        assert_eq!(mode(write(GIB / 2, GIB / 2 + 1, 64 << 20), no_room), None);
        assert_eq!(mode(write(2 * GIB, 0, 64 << 20), no_room), None);
        // Past the share, with a reserve of an eighth of 4 GiB (512 MiB),
        // a table that fits in the free memory beside it still goes
        // through the cache.
        let free = Some(CachedWrite::FreeMemory);
        let big = write(8 * GIB, 64 << 20, 64 << 20);
        assert_eq!(mode(big, memory(4 * GIB, 576 << 20)), free);
        assert_eq!(mode(big, memory(4 * GIB, (576 << 20) - 1)), None);
        // Unknown memory: the class's own mode.
        assert_eq!(mode(write(0, 0, 0), Memory::default()), None);
        let unknown_room = Memory {
            usable: Some(4 * GIB),
            room: None,
        };
        assert_eq!(mode(big, unknown_room), None);
        // Share 0 and reserve 1 (the default): never.
        let never = Options::default().small_database_share(0.0);
        assert_eq!(
            table_write_mode(
                &never,
                &env,
                IoClass::FlushWrite,
                write(0, 0, 0),
                memory(4 * GIB, 4 * GIB)
            ),
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
                write(0, 0, 0),
                memory(4 * GIB, 4 * GIB)
            ),
            None
        );
        // An explicit mode is never overridden.
        let explicit = Options::default().io_mode(IoClass::FlushWrite, AccessMode::Direct);
        let env2 = IoEnv::open(dir.path(), explicit.io_options()).unwrap();
        assert_eq!(
            table_write_mode(
                &explicit,
                &env2,
                IoClass::FlushWrite,
                write(0, 0, 0),
                memory(4 * GIB, 4 * GIB)
            ),
            None
        );
    }
}
