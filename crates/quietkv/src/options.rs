//! Database options, with validation and sensible defaults.

use quietio::{AccessMode, ClassModes, EffectiveMode, IoClass, IoEngine, IoOptions, MAX_IO_DEPTH};

use crate::compaction::picker::{CompactionPriority, PickerOptions};
use crate::error::{Error, Result};
use crate::table::{Compression, TableOptions};
use crate::wal::WalSync;

/// I/O priority of background threads (`ioprio_set`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoPriority {
    /// Best-effort class at a level 0 (highest) ..= 7 (lowest).
    BestEffort(u8),
    /// Idle class: only served when nobody else uses the disk.
    Idle,
}

/// Declares the options once: the public field (readable, documented with
/// its default), its default value, and a `#[must_use]` builder setter of
/// the same name. `Options` is `#[non_exhaustive]`, so a new option is not a
/// breaking change; outside the crate it is built with
/// `Options::default()` and the setters.
macro_rules! options {
    ($( $(#[doc = $doc:literal])* $name:ident : $ty:ty = $default:expr; )*) => {
        /// How a database is opened and run. Start from
        /// [`Options::default()`] and change what you need with the
        /// setters; [`Options::validate`] (also run by [`Db::open`](crate::Db::open))
        /// names the first option out of range.
        ///
        /// ```
        /// use quietkv::{AccessMode, IoClass, Options};
        /// let opts = Options::default()
        ///     .memtable_size(16 << 20)
        ///     .background_threads(2)
        ///     .io_mode(IoClass::CompactionRead, AccessMode::Direct);
        /// assert_eq!(opts.memtable_size, 16 << 20);
        /// opts.validate().unwrap();
        /// ```
        #[derive(Debug, Clone)]
        #[non_exhaustive]
        pub struct Options {
            $( $(#[doc = $doc])* pub $name: $ty, )*
        }

        impl Default for Options {
            fn default() -> Self {
                Options { $( $name: $default, )* }
            }
        }

        impl Options {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!("Default: `", stringify!($default), "`.")]
                #[must_use]
                pub fn $name(mut self, value: $ty) -> Self {
                    self.$name = value;
                    self
                }
            )*
        }
    };
}

options! {
    /// Create the database if the directory holds none. Default true.
    create_if_missing: bool = true;
    /// Fail if a database already exists. Default false.
    error_if_exists: bool = false;
    /// Bytes a memtable holds before it is frozen and flushed. Default 64 MiB.
    memtable_size: usize = 64 << 20;
    /// Frozen memtables waiting for flush before writers stall. Default 2.
    max_immutable_memtables: usize = 2;
    /// L0 files that trigger a compaction. Default 4.
    l0_compaction_trigger: usize = 4;
    /// L0 files at which each write is delayed. Default 20, RocksDB's: at
    /// LevelDB's 8 a bulk load spent half its time delayed while the one
    /// compaction thread merged L0 into L1 again and again; later, the same
    /// work is done in fewer, larger merges. Reads check up to this many L0
    /// tables' filters.
    l0_slowdown_trigger: usize = 20;
    /// L0 files at which writes stop until compaction catches up. Default
    /// 36 (RocksDB's).
    l0_stop_trigger: usize = 36;
    /// Target size of L1. Default 256 MiB.
    level_base_bytes: u64 = 256 << 20;
    /// Each level is this many times the one above. Default 10.
    level_multiplier: f64 = 10.0;
    /// Size at which compaction output is cut into a new table. Default 64 MiB.
    target_file_size: u64 = 64 << 20;
    /// Input bytes of one slice of a manual compaction (`compact_all`,
    /// `compact_range`): the range is compacted in slices of about this
    /// much, each installed (and its inputs deleted) before the next
    /// starts, so the extra disk space needed is about one slice, not the
    /// whole database, and readers move to the new tables slice by slice.
    /// Tables that overlap one another are never split between slices, so
    /// a slice can be larger (level-0 tables spanning every key make the
    /// whole range one slice). Default 256 MiB (4 tables of the default
    /// size): measured on a 2 GiB database, slices from 64 MiB to the whole
    /// database compacted at the same speed with the same read latency and
    /// CPU per byte, so the default keeps the extra disk space small
    /// (RocksDB's option of the same name defaults to 25 tables).
    max_compaction_bytes: u64 = 256 << 20;
    /// Which file of L1 and deeper levels a compaction takes when the level
    /// is over its target: the one that overlaps the fewest next-level
    /// bytes per byte of its own (least write amplification, RocksDB's
    /// default), or each in turn by key (LevelDB's). Default
    /// `MinOverlappingRatio`.
    compaction_priority: CompactionPriority = CompactionPriority::MinOverlappingRatio;
    /// Uncompressed size of a data block. Default 4 KiB.
    block_size: usize = 4096;
    /// End data blocks on page (4 KiB) boundaries, with at most 512 bytes
    /// of filler each: a block read then touches one page instead of two,
    /// and a cached page holds whole blocks, so the same page cache serves
    /// about twice the point reads when the database outgrows it. Applies
    /// to uncompressed tables with `block_size` of at least 4 KiB; blocks
    /// whose entries leave more slack than that stay as they are (4 KiB
    /// values get no filler). Tables it pads are format version 3, which
    /// earlier builds refuse. Default true.
    align_blocks: bool = true;
    /// Per-block compression. Default none.
    compression: Compression = Compression::None;
    /// Bloom filter bits per key (0 = no filter). Default 10.
    bloom_bits_per_key: usize = 10;
    /// Bytes of decompressed blocks cached for user reads (0 = none). Default 32 MiB.
    /// See `block_cache_limit_share` for when the cache is sized from the
    /// memory limit instead.
    block_cache_bytes: usize = 32 << 20;
    /// When user reads leave nothing in the page cache (`direct`,
    /// `dontcache`: the block cache is then their only cache) and the
    /// process runs under a memory cgroup limit, the block cache gets this
    /// share of the limit if that is more than `block_cache_bytes`. That
    /// share is a budget for data blocks *and* the pinned index and filter
    /// blocks of the open tables; the rest of the limit
    /// is left for memtables, the page cache of the WAL and of buffered
    /// classes, and the heap. 0 = always `block_cache_bytes` (bytes of data
    /// blocks; pinned blocks are then not charged to it). Default 0.5; at
    /// most 0.9.
    block_cache_limit_share: f64 = 0.5;
    /// Table readers kept open for user reads. Default 1000.
    max_open_tables: usize = 1000;
    /// Background threads doing compaction. Flushes have one more thread
    /// of their own, so a frozen memtable never waits behind a compaction
    /// (writers stall when frozen memtables pile up). Default 1.
    background_threads: usize = 1;
    /// Background (compaction) I/O limit in MiB/s; 0 = unthrottled. Default 0.
    background_rate_limit_mib: u64 = 0;
    /// Niceness added to compaction threads (0 = same CPU priority as
    /// users). The flush thread keeps the writers' priority: they wait for it.
    background_nice: i32 = 0;
    /// Flush and compaction give up the CPU (`sched_yield`) at least this
    /// often, in microseconds of merging; 0 = never. A compaction that
    /// rarely waits for the disk (direct I/O through io_uring) can
    /// otherwise keep a CPU for a whole scheduler time slice (about 1.5 ms
    /// on a 2-CPU machine) while your threads that woke up on that CPU
    /// wait, whatever their nice values. With readers of a hot set running
    /// during a full compaction, yielding every 50 us cut how late their
    /// reads started at p99 from 1.5 ms to a few microseconds, at the same
    /// compaction speed. Default 50; at most 1,000,000.
    background_yield_micros: u64 = 50;
    /// I/O priority of compaction threads (not the flush thread, which
    /// writers wait for); None leaves it alone.
    background_io_priority: Option<IoPriority> = None;
    /// Sequential writer buffer; a multiple of the direct I/O alignment.
    /// Default 2 MiB (a huge page: one request per direct write).
    direct_write_buffer_size: usize = 2 << 20;
    /// Compaction input readahead. Default 2 MiB.
    compaction_readahead_size: usize = 2 << 20;
    /// Fadvise mode drops written/read pages every this many bytes. Default 4 MiB.
    fadvise_chunk_size: u64 = 4 << 20;
    /// Buffered writers (WAL, flush, buffered compaction) start write-back
    /// every this many bytes, without waiting, so the sync that ends a
    /// table or seals a WAL has little left to write; 0 leaves write-back
    /// to the kernel. With the io_uring engine the kernel's worker threads
    /// submit the pages, not the writer (a `put` appending to the WAL).
    /// Default 1 MiB.
    writeback_chunk_size: u64 = 1 << 20;
    /// How direct (compaction) files move their bytes, and how buffered
    /// writers start write-back: `auto` uses io_uring where the kernel
    /// allows it and blocking calls elsewhere; `uring` fails to open direct
    /// files where it is refused; `sync` never uses it. Default auto.
    io_engine: IoEngine = IoEngine::Auto;
    /// Writes a direct writer keeps in flight behind the caller, and reads a
    /// direct reader keeps in flight ahead of it, with io_uring (1..=64).
    /// Each costs one buffer (`direct_write_buffer_size` or
    /// `compaction_readahead_size`) per open file. Default 4.
    io_depth: usize = 4;
    /// Requests in flight per direct file of flushes and automatic
    /// compactions while the tree keeps up with the writes, and of full
    /// compactions held to `background_rate_limit_mib` (1..=io_depth; full
    /// compactions without a rate limit, and background work once writes
    /// are slowed or frozen memtables wait, use `io_depth`). A short device queue is what
    /// user reads that miss the cache wait behind: under a steady write
    /// load with reads of a scattered hot set, depth 1 halved the device's
    /// read wait (0.45 against 0.90 ms) and cut read p99 from 1.06 to 0.69
    /// ms, with the same background work. Default 1.
    background_io_depth: usize = 1;
    /// Access mode per I/O class; all `auto` by default (compaction and
    /// flush direct where the probe allows, everything else buffered).
    io_modes: ClassModes = ClassModes::default();
    /// While the database's tables (every keyspace's) and the table being
    /// written together take at most this share of the memory the process
    /// may use (its cgroup's memory limit, else the machine's memory),
    /// flushes and compactions whose class is left at `auto` write their
    /// new tables through the page cache, as `buffered` does, instead of
    /// past it. A database that small fits in memory beside everything
    /// else: caching what it writes evicts nothing another reader needs,
    /// and the reads that follow find the new tables in memory instead of
    /// going to the device. Past the share `auto` writes past the cache
    /// again. 0 = never (`auto` always writes tables past the cache).
    /// Default 0.25; at most 0.9.
    small_database_share: f64 = 0.25;
    /// After each flush and compaction, ask the C allocator to hand the
    /// memory that job freed back to the kernel (glibc's `malloc_trim`;
    /// nothing happens with other C libraries). A job allocates tens of
    /// MiB for its buffers; glibc keeps freed memory of that size in its
    /// heaps, resident, for the next allocation, so the process stayed
    /// about 100 MiB larger than its working set - memory that under a
    /// memory limit is taken from the page cache the user reads need. At
    /// full scale (16M keys, 1 GiB cgroup) the reading process held 220
    /// MiB with this off and 134 MiB with it on, and its page cache grew
    /// from 815 to 901 MiB. The trim is process-wide (it also releases
    /// what other code in the process freed) and takes a few milliseconds
    /// of the background thread per job (`DbStats::heap_trim_micros`).
    /// A program whose Rust global allocator is not the C library's
    /// (jemalloc, mimalloc) gains little from it: the engine's memory then
    /// comes from that allocator, which returns free memory on its own
    /// schedule. Default true.
    release_heap_after_jobs: bool = true;
    /// Count page-cache hits and misses of user reads that miss the block
    /// cache (the `cache_hits` and `cache_misses` of the user read class in
    /// [`Db::stats`](crate::Db::stats)). Each such read then makes one more
    /// system call to ask the kernel what it holds, which costs a point
    /// read served from the page cache a noticeable share of its time.
    /// Default false: on for measuring what the page cache does for reads.
    attribute_cache_hits: bool = false;
    /// Before installing the output of a full compaction (`compact_all`,
    /// `compact_range`), put the output blocks whose keys were hot in its
    /// inputs (in the block cache, or in the page cache for inputs read
    /// with O_DIRECT) where user reads will look for them, so reads do not
    /// all miss at once when the new tables take over: into the page cache
    /// (kernel readahead, waited for) when user reads are buffered, into
    /// the block cache when they are direct. Costs one read of the hot part
    /// of the output. Default true: during a full compaction with direct
    /// I/O, reads of a cached hot set kept p99 at 79 us with it and 3.5 ms
    /// without.
    warm_compaction_output: bool = true;
    /// Warm the output of automatic compactions too (with
    /// `warm_compaction_output`). Off by default: under a steady write
    /// load with reads spread over the key space, each automatic compaction
    /// replaces few hot keys and warming them re-read more than it saved
    /// (read p99 4.1 ms with it, 1.1 ms without); with a hot set packed in
    /// one key range, which one compaction replaces at once, it helped.
    warm_automatic_compactions: bool = false;
    /// Bytes of hot output blocks warming keeps in flight (handed to
    /// kernel readahead, not yet read back) before it waits for the oldest.
    /// Warming's reads sit on the device's queue ahead of any user read
    /// that misses the cache meanwhile, and scattered hot blocks are one
    /// request each: with an 8 GiB database, a 400 MiB scattered hot set
    /// in 1 GiB of memory and a full compaction held to 700 MiB/s, a 1 MiB
    /// window kept a device queue of 2 and read p99 at 1.4 ms, 64 KiB a
    /// queue of 0.5 and p99 at 1.1 ms, for the same blocks warmed in the
    /// same time. At least 4 KiB. Default 64 KiB.
    warm_window_bytes: u64 = 64 << 10;
    /// Size past which the manifest is rewritten as one snapshot of the
    /// current state (a new file, switched to through CURRENT), so a
    /// long-lived database's manifest stays small. At least 1 KiB.
    /// Default 4 MiB.
    max_manifest_size: u64 = 4 << 20;
    /// When the write-ahead log is synced: only the writes that ask
    /// (`none`, the default), every write with group commit (`group`), every
    /// write alone (`per-write`), or every interval in the background
    /// (`periodic`). See [`WalSync`].
    wal_sync: WalSync = WalSync::None;
    /// Compression of WAL records (each group commit's batch): lz4 or zstd
    /// (level 1), kept only where it makes the record smaller; records
    /// under 128 bytes or over 64 MiB are never compressed. Replay reads
    /// compressed and plain records alike, so this may change between
    /// runs. Default none.
    wal_compression: Compression = Compression::None;
    /// How many bytes of sealed WALs may be kept for keyspaces whose
    /// memtables still hold their data, before the keyspaces holding the
    /// oldest one are flushed (checked at each WAL switch; only when the
    /// database has keyspaces besides the default one, whose memtables fill
    /// at their own pace). 0 = four memtables' worth. Default 0.
    max_total_wal_size: u64 = 0;
    /// How much file space a WAL takes at a time: each WAL file is
    /// allocated with `fallocate` (its size included) this many bytes at a
    /// time from its first record on (a WAL that receives nothing takes no
    /// space), so steady writes neither allocate blocks nor extend the file
    /// (in mmap mode it is also mapped a segment at a time). A WAL is cut
    /// to its true length when it is closed (not with `wal_recycle_count`); after a crash it ends in
    /// allocated zeros, which replay reads as padding. Where the file
    /// system cannot allocate, WALs are appended to as usual (mmap mode is
    /// then refused). A multiple of 4096, at least 4096. Default 64 MiB.
    wal_segment_size: u64 = 64 << 20;
    /// How many WAL files whose data is in tables are kept for reuse
    /// instead of deleted (0, the default, turns recycling off). A WAL
    /// switch then takes a kept file, renames it to the new WAL's name and
    /// overwrites it from offset 0, so the blocks it writes are already
    /// allocated and written (no unwritten-extent conversion at
    /// `fdatasync`). With recycling on, WAL records carry their log's
    /// number (record types 4-6) so that replay stops at the old records
    /// of a reused file instead of replaying them; a database written this
    /// way opens with recycling off and the other way round. Kept files
    /// live only while the database is open: after a reopen they are
    /// deleted like any obsolete WAL. WAL files then keep their whole
    /// allocation when closed (whole segments) instead of being cut to
    /// their true length, so kept files take up to this many segments of
    /// disk space. At most 64. Default 0 (off). Measured with synced writes
    /// from 32 writers sharing group commits, 818-byte values, recycling
    /// raised writes/s 13-14% on ext4 and 27-29% on xfs for the buffered
    /// and the direct WAL, and 7% for the mmap WAL on ext4. It stays off by
    /// default because a reused file gives up one check: in a fresh file a
    /// lost sector of the unsynced tail reads as zeros and anything else is
    /// corruption, while in a reused file it reads as the old life's bytes,
    /// so damage in the unsynced tail (no sync mark after it) ends the log
    /// with a note instead of being reported. Records a sync mark covers
    /// are checked as strictly either way (a direct or dontcache WAL writes
    /// the mark of its last sync with its next records, so after a crash
    /// the last synced group may have none). Also leave it off with the `fadvise`
    /// WAL mode: a write covering part of a page of a reused file that is
    /// not cached reads the old page first, and fadvise drops every page.
    wal_recycle_count: usize = 0;
    /// For tests: a fault-injecting, crash-simulating layer that every file
    /// operation of the database goes through (see [`crate::fault`]).
    /// `None` (the default) costs nothing.
    fault_layer: Option<std::sync::Arc<quietio::fault::FaultLayer>> = None;
    /// A hook compaction calls for the newest value of each key it
    /// rewrites, to keep, remove or change it; its
    /// [`hides`](crate::CompactionFilter::hides) also hides entries from
    /// reads right away. See [`CompactionFilter`](crate::CompactionFilter)
    /// and the ready-made [`ttl::ExpiryFilter`](crate::ttl::ExpiryFilter).
    compaction_filter: Option<std::sync::Arc<dyn crate::CompactionFilter>> = None;
}

/// Largest [`Options::wal_recycle_count`]: more kept files only hold disk
/// space (a switch takes one at a time).
const MAX_WAL_RECYCLE_COUNT: usize = 64;

impl Options {
    /// Sets one class's access mode.
    pub fn io_mode(mut self, class: IoClass, mode: AccessMode) -> Self {
        self.io_modes.set(class, mode);
        self
    }

    /// Checks every option; [`Db::open`](crate::Db::open) calls it.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` naming the option and the rule it breaks.
    pub fn validate(&self) -> Result<()> {
        fn bad(msg: String) -> Result<()> {
            Err(Error::invalid(msg))
        }
        self.wal_sync.validate()?;
        if self.wal_segment_size < 4096 || !self.wal_segment_size.is_multiple_of(4096) {
            return bad(format!(
                "wal_segment_size must be a positive multiple of 4096, got {}",
                self.wal_segment_size
            ));
        }
        if self.wal_recycle_count > MAX_WAL_RECYCLE_COUNT {
            return bad(format!(
                "wal_recycle_count must be at most {MAX_WAL_RECYCLE_COUNT}, got {}",
                self.wal_recycle_count
            ));
        }
        if self.memtable_size < 4096 {
            return bad(format!(
                "memtable_size must be at least 4096 bytes, got {}",
                self.memtable_size
            ));
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables must be at least 1".into());
        }
        if self.l0_compaction_trigger == 0 {
            return bad("l0_compaction_trigger must be at least 1".into());
        }
        if !(self.l0_compaction_trigger <= self.l0_slowdown_trigger
            && self.l0_slowdown_trigger <= self.l0_stop_trigger)
        {
            return bad(format!(
                "L0 triggers must satisfy compaction <= slowdown <= stop, got {} / {} / {}",
                self.l0_compaction_trigger, self.l0_slowdown_trigger, self.l0_stop_trigger
            ));
        }
        if self.level_base_bytes < 4096 {
            return bad(format!(
                "level_base_bytes must be at least 4096, got {}",
                self.level_base_bytes
            ));
        }
        if !(self.level_multiplier.is_finite() && self.level_multiplier >= 2.0) {
            return bad(format!(
                "level_multiplier must be a finite number >= 2, got {}",
                self.level_multiplier
            ));
        }
        if self.target_file_size < 4096 {
            return bad(format!(
                "target_file_size must be at least 4096, got {}",
                self.target_file_size
            ));
        }
        if self.max_compaction_bytes == 0 {
            return bad("max_compaction_bytes must be positive".to_string());
        }
        if !(256..=(4 << 20)).contains(&self.block_size) {
            return bad(format!(
                "block_size must be between 256 bytes and 4 MiB, got {}",
                self.block_size
            ));
        }
        if self.bloom_bits_per_key > 64 {
            return bad(format!(
                "bloom_bits_per_key must be at most 64, got {}",
                self.bloom_bits_per_key
            ));
        }
        if !(0.0..=0.9).contains(&self.block_cache_limit_share) {
            return bad(format!(
                "block_cache_limit_share must be between 0 and 0.9, got {}",
                self.block_cache_limit_share
            ));
        }
        if !(0.0..=0.9).contains(&self.small_database_share) {
            return bad(format!(
                "small_database_share must be between 0 and 0.9, got {}",
                self.small_database_share
            ));
        }
        if self.warm_window_bytes < 4096 {
            return bad(format!(
                "warm_window_bytes must be at least 4096, got {}",
                self.warm_window_bytes
            ));
        }
        if self.max_open_tables < 16 {
            return bad(format!(
                "max_open_tables must be at least 16, got {}",
                self.max_open_tables
            ));
        }
        if self.background_threads == 0 || self.background_threads > 64 {
            return bad(format!(
                "background_threads must be between 1 and 64, got {}",
                self.background_threads
            ));
        }
        if self.background_yield_micros > 1_000_000 {
            return bad(format!(
                "background_yield_micros must be at most 1000000 (1 s), got {}",
                self.background_yield_micros
            ));
        }
        if !(-20..=19).contains(&self.background_nice) {
            return bad(format!(
                "background_nice must be between -20 and 19, got {}",
                self.background_nice
            ));
        }
        if let Some(IoPriority::BestEffort(l)) = self.background_io_priority {
            if l > 7 {
                return bad(format!(
                    "best-effort I/O priority level must be 0..=7, got {l}"
                ));
            }
        }
        if self.background_rate_limit_mib > (1 << 30) {
            return bad(format!(
                "background_rate_limit_mib is absurd: {}",
                self.background_rate_limit_mib
            ));
        }
        if self.direct_write_buffer_size == 0 || !self.direct_write_buffer_size.is_multiple_of(512)
        {
            return bad(format!(
                "direct_write_buffer_size must be a positive multiple of 512 (and of the directory's direct I/O alignment), got {}",
                self.direct_write_buffer_size
            ));
        }
        if self.compaction_readahead_size == 0
            || !self.compaction_readahead_size.is_multiple_of(512)
        {
            return bad(format!(
                "compaction_readahead_size must be a positive multiple of 512, got {}",
                self.compaction_readahead_size
            ));
        }
        if self.fadvise_chunk_size == 0 {
            return bad("fadvise_chunk_size must be positive".into());
        }
        if !(1..=MAX_IO_DEPTH).contains(&self.io_depth) {
            return bad(format!(
                "io_depth must be between 1 and {MAX_IO_DEPTH}, got {}",
                self.io_depth
            ));
        }
        if !(1..=self.io_depth).contains(&self.background_io_depth) {
            return bad(format!(
                "background_io_depth must be between 1 and io_depth ({}), got {}",
                self.io_depth, self.background_io_depth
            ));
        }
        if self.max_manifest_size < 1024 {
            return bad(format!(
                "max_manifest_size must be at least 1024 bytes, got {}",
                self.max_manifest_size
            ));
        }
        Ok(())
    }

    /// The block cache's size for user reads in `user_read` mode under a
    /// memory limit of `limit` bytes (None: no limit known).
    pub(crate) fn block_cache_capacity(
        &self,
        user_read: EffectiveMode,
        limit: Option<u64>,
    ) -> usize {
        let only_cache = matches!(user_read, EffectiveMode::Direct | EffectiveMode::DontCache);
        match limit {
            Some(l) if only_cache && self.block_cache_limit_share > 0.0 => {
                let share = (l as f64 * self.block_cache_limit_share) as u64;
                self.block_cache_bytes
                    .max(usize::try_from(share).unwrap_or(usize::MAX))
            }
            _ => self.block_cache_bytes,
        }
    }

    pub(crate) fn io_options(&self) -> IoOptions {
        IoOptions {
            modes: self.io_modes,
            direct_write_buffer_size: self.direct_write_buffer_size,
            readahead_size: self.compaction_readahead_size,
            fadvise_chunk_size: self.fadvise_chunk_size,
            writeback_chunk_size: self.writeback_chunk_size,
            attribute_cache_hits: self.attribute_cache_hits,
            background_bytes_per_sec: self.background_rate_limit_mib << 20,
            io_engine: self.io_engine,
            io_depth: self.io_depth,
        }
    }

    pub(crate) fn picker_options(&self) -> PickerOptions {
        PickerOptions {
            l0_compaction_trigger: self.l0_compaction_trigger,
            l0_slowdown_trigger: self.l0_slowdown_trigger,
            l0_stop_trigger: self.l0_stop_trigger,
            level_base_bytes: self.level_base_bytes,
            level_multiplier: self.level_multiplier,
            target_file_size: self.target_file_size,
            priority: self.compaction_priority,
            ..PickerOptions::default()
        }
    }

    /// `max_total_wal_size` with 0 resolved.
    pub(crate) fn resolved_max_total_wal_size(&self) -> u64 {
        match self.max_total_wal_size {
            0 => 4 * self.memtable_size as u64,
            n => n,
        }
    }

    pub(crate) fn table_options(&self) -> TableOptions {
        TableOptions {
            block_size: self.block_size,
            compression: self.compression,
            bloom_bits_per_key: self.bloom_bits_per_key,
            align_blocks: self.align_blocks,
            ..TableOptions::default()
        }
    }
}

/// Options of one write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Make the write durable (WAL fdatasync) before returning. Without it a
    /// write survives a process crash but not a power cut.
    pub sync: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each setter changes its own option and nothing else.
    #[test]
    fn setters_change_one_option() {
        let o = Options::default()
            .memtable_size(1 << 20)
            .l0_stop_trigger(20)
            .background_io_priority(Some(IoPriority::Idle))
            .io_engine(IoEngine::Sync)
            .max_manifest_size(8 << 10);
        let d = Options::default();
        assert_eq!(o.memtable_size, 1 << 20);
        assert_eq!(o.l0_stop_trigger, 20);
        assert_eq!(o.background_io_priority, Some(IoPriority::Idle));
        assert_eq!(o.io_engine, IoEngine::Sync);
        assert_eq!(o.max_manifest_size, 8 << 10);
        assert_eq!(o.l0_slowdown_trigger, d.l0_slowdown_trigger);
        assert_eq!(o.block_size, d.block_size);
        assert_eq!(o.target_file_size, d.target_file_size);
        o.validate().unwrap();
    }

    #[test]
    fn block_cache_takes_a_share_of_the_limit_only_when_it_is_the_only_cache() {
        let o = Options::default();
        let gib = 1u64 << 30;
        assert_eq!(
            o.block_cache_capacity(EffectiveMode::Direct, Some(gib)),
            512 << 20
        );
        assert_eq!(
            o.block_cache_capacity(EffectiveMode::DontCache, Some(gib)),
            512 << 20
        );
        // The page cache is the cache of these: no double caching.
        for m in [
            EffectiveMode::Buffered,
            EffectiveMode::Mmap,
            EffectiveMode::Fadvise,
        ] {
            assert_eq!(o.block_cache_capacity(m, Some(gib)), 32 << 20);
        }
        // No limit known, or share 0: the explicit size.
        assert_eq!(
            o.block_cache_capacity(EffectiveMode::Direct, None),
            32 << 20
        );
        let fixed = Options {
            block_cache_limit_share: 0.0,
            ..Default::default()
        };
        assert_eq!(
            fixed.block_cache_capacity(EffectiveMode::Direct, Some(gib)),
            32 << 20
        );
        // An explicit size above the share wins.
        let big = Options {
            block_cache_bytes: 800 << 20,
            ..Default::default()
        };
        assert_eq!(
            big.block_cache_capacity(EffectiveMode::Direct, Some(gib)),
            800 << 20
        );
    }

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        Options::default().validate().unwrap();
        let cases: Vec<(Options, &str)> = vec![
            (
                Options {
                    background_yield_micros: 1_000_001,
                    ..Default::default()
                },
                "background_yield_micros",
            ),
            (
                Options {
                    wal_recycle_count: 65,
                    ..Default::default()
                },
                "wal_recycle_count",
            ),
            (
                Options {
                    memtable_size: 0,
                    ..Default::default()
                },
                "memtable_size",
            ),
            (
                Options {
                    l0_slowdown_trigger: 2,
                    ..Default::default()
                },
                "L0 triggers",
            ),
            (
                Options {
                    block_size: 10,
                    ..Default::default()
                },
                "block_size",
            ),
            (
                Options {
                    level_multiplier: f64::NAN,
                    ..Default::default()
                },
                "level_multiplier",
            ),
            (
                Options {
                    background_threads: 0,
                    ..Default::default()
                },
                "background_threads",
            ),
            (
                Options {
                    direct_write_buffer_size: 1000,
                    ..Default::default()
                },
                "direct_write_buffer_size",
            ),
            (
                Options {
                    compaction_readahead_size: 0,
                    ..Default::default()
                },
                "compaction_readahead_size",
            ),
            (
                Options {
                    io_depth: 0,
                    ..Default::default()
                },
                "io_depth",
            ),
            (
                Options {
                    io_depth: 65,
                    ..Default::default()
                },
                "io_depth",
            ),
            (
                Options {
                    background_io_priority: Some(IoPriority::BestEffort(9)),
                    ..Default::default()
                },
                "priority",
            ),
            (
                Options {
                    small_database_share: 1.5,
                    ..Default::default()
                },
                "small_database_share",
            ),
            (
                Options {
                    block_cache_limit_share: 0.95,
                    ..Default::default()
                },
                "block_cache_limit_share",
            ),
            (
                Options {
                    max_manifest_size: 1023,
                    ..Default::default()
                },
                "max_manifest_size",
            ),
            (
                Options {
                    warm_window_bytes: 4095,
                    ..Default::default()
                },
                "warm_window_bytes",
            ),
        ];
        for (o, needle) in cases {
            let e = o.validate().unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert!(
                e.to_string().contains(needle),
                "{e} should mention {needle}"
            );
        }
    }
}
