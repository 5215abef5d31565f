//! `IoEnv`: one directory's probed capabilities, the resolved mode of every
//! class, shared counters and the background rate limiter. The engine opens
//! every file through it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::class::{resolve, AccessMode, ClassModes, EffectiveMode, IoClass, Resolution};
use crate::error::{Error, Result};
use crate::fault::{FaultLayer, OpKind};
use crate::file::{FileConfig, MmapWriter, PositionalFile, RandomReader, SeqReader, SeqWriter};
use crate::probe::{probe, Capabilities};
use crate::rate::RateLimiter;
use crate::stats::IoStats;
use crate::uring::{resolve_engine, uring_unavailable_reason, Engine, EngineResolution, IoEngine};

/// How files in a directory are accessed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoOptions {
    /// Requested mode per class (`Auto` by default).
    pub modes: ClassModes,
    /// Bytes the sequential writer hands to the kernel at once; in direct
    /// mode a positive multiple of the alignment. Default 2 MiB: a huge
    /// page, so a direct write is one physically contiguous segment and
    /// reaches the device as one request (see [`crate::AlignedBuf`]).
    pub direct_write_buffer_size: usize,
    /// The sequential reader's chunk, its own readahead in direct mode;
    /// capped at the device's largest I/O. Default 2 MiB.
    pub readahead_size: usize,
    /// Fadvise mode writes back and drops pages every this many bytes.
    /// Default 4 MiB.
    pub fadvise_chunk_size: u64,
    /// Buffered writers start write-back (`sync_file_range`, without
    /// waiting) every this many bytes, so the device works while they go
    /// on and a final sync has little left to write; the pages stay
    /// cached. 0 leaves write-back to the kernel. Default 1 MiB.
    pub writeback_chunk_size: u64,
    /// Attribute buffered random reads to page-cache hits and misses: one
    /// more system call per read (`cachestat` over its range, or a
    /// `preadv2(RWF_NOWAIT)` first), which a read served from the page
    /// cache in a few microseconds feels. Default off; on for measuring
    /// what the page cache does for the reads.
    pub attribute_cache_hits: bool,
    /// Background (compaction) bytes per second; 0 = unlimited.
    pub background_bytes_per_sec: u64,
    /// How direct sequential files move their bytes: io_uring with several
    /// requests in flight, or blocking calls. Default `auto` (io_uring where
    /// the kernel allows it).
    pub io_engine: IoEngine,
    /// Requests a direct sequential writer or reader keeps in flight with
    /// io_uring (writes behind the caller, reads ahead of it); 1..=64.
    /// Each costs one buffer of `direct_write_buffer_size` (writers) or
    /// `readahead_size` (readers). Default 4.
    pub io_depth: usize,
}

/// Largest accepted `io_depth`: beyond it only memory grows.
pub const MAX_IO_DEPTH: usize = 64;

impl Default for IoOptions {
    fn default() -> Self {
        IoOptions {
            modes: ClassModes::default(),
            direct_write_buffer_size: 2 << 20,
            readahead_size: 2 << 20,
            fadvise_chunk_size: 4 << 20,
            writeback_chunk_size: 1 << 20,
            attribute_cache_hits: false,
            background_bytes_per_sec: 0,
            io_engine: IoEngine::Auto,
            io_depth: 4,
        }
    }
}

/// The I/O environment of one directory: what the probe found there, the
/// mode every [`IoClass`] resolved to, the shared counters ([`IoStats`]) and
/// the background [`RateLimiter`]. Every file of the directory is opened
/// through it, so its mode, counting and throttling follow its class.
#[derive(Debug)]
pub struct IoEnv {
    dir: PathBuf,
    caps: Arc<Capabilities>,
    resolved: Vec<Resolution>,
    opts: IoOptions,
    engine: EngineResolution,
    stats: Arc<IoStats>,
    limiter: Arc<RateLimiter>,
    /// Opened with [`IoEnv::open_read_only`]: creating files is refused.
    read_only: bool,
    /// Tests only: see [`IoEnv::with_fault_layer`].
    fault: Option<Arc<FaultLayer>>,
}

impl IoEnv {
    /// Probes `dir` (once per process) and resolves every class's mode.
    /// An explicit mode that cannot work here fails now, not at first use.
    ///
    /// Errors: `Io` when `dir` is missing or not writable (the probe creates
    /// a file in it; see [`open_read_only`](Self::open_read_only));
    /// `InvalidArgument` for options that cannot work (buffer sizes that are
    /// not multiples of the direct-I/O alignment, `io_depth` outside
    /// 1..=[`MAX_IO_DEPTH`], mmap for a write class); `NotSupported` for an
    /// explicit mode or `io_engine = uring` the kernel or file system
    /// cannot do here.
    pub fn open(dir: &Path, opts: IoOptions) -> Result<IoEnv> {
        Self::with_capabilities(probe(dir)?, opts, false)
    }

    /// An environment that never writes to `dir`: the probe reads
    /// `sample`, an existing file there, instead of writing a probe file
    /// (see [`probe_read_only`](crate::probe_read_only)), and [`create`](Self::create)
    /// is refused. Write classes resolve as if direct writes were
    /// unavailable; nothing uses them.
    pub fn open_read_only(dir: &Path, sample: &Path, opts: IoOptions) -> Result<IoEnv> {
        let caps = Arc::new(crate::probe::probe_read_only(dir, sample)?);
        Self::with_capabilities(caps, opts, true)
    }

    fn with_capabilities(
        caps: Arc<Capabilities>,
        opts: IoOptions,
        read_only: bool,
    ) -> Result<IoEnv> {
        let align = caps.direct.offset_align.max(caps.direct.mem_align);
        for (name, v) in [
            ("direct_write_buffer_size", opts.direct_write_buffer_size),
            ("readahead_size", opts.readahead_size),
        ] {
            if v == 0 || v % align != 0 {
                return Err(Error::invalid(format!(
                    "{name} must be a positive multiple of the direct I/O alignment of {} ({align} bytes), got {v}",
                    caps.dir.display()
                )));
            }
        }
        if opts.fadvise_chunk_size == 0 {
            return Err(Error::invalid("fadvise_chunk_size must be positive"));
        }
        if !(1..=MAX_IO_DEPTH).contains(&opts.io_depth) {
            return Err(Error::invalid(format!(
                "io_depth must be between 1 and {MAX_IO_DEPTH}, got {}",
                opts.io_depth
            )));
        }
        // Sync needs no probe: a process told not to use io_uring never
        // touches it.
        let refused = match opts.io_engine {
            IoEngine::Sync => None,
            _ => uring_unavailable_reason(),
        };
        let engine = resolve_engine(opts.io_engine, refused)?;
        if let Some(why) = &engine.fallback {
            log_engine_fallback_once(why);
        }
        let mut resolved = Vec::with_capacity(IoClass::COUNT);
        let mut fallbacks = Vec::new();
        for class in IoClass::ALL {
            if read_only && class == IoClass::Backup {
                // Copies out of a read-only directory only read it: they
                // get the mode the probe allows, and a mode that cannot
                // work here must not fail the open.
                let r =
                    resolve(class, opts.modes.get(class), &caps).unwrap_or_else(|e| Resolution {
                        mode: EffectiveMode::Buffered,
                        fallback: Some(format!("{e}; using buffered")),
                    });
                if let Some(why) = &r.fallback {
                    fallbacks.push((class, why.clone()));
                }
                resolved.push(r);
                continue;
            }
            if read_only && !class.is_read() {
                // Nothing is written: the write classes' requested modes do
                // not matter and must not fail the open.
                resolved.push(Resolution {
                    mode: EffectiveMode::Buffered,
                    fallback: None,
                });
                continue;
            }
            let r = resolve(class, opts.modes.get(class), &caps)?;
            if let Some(why) = &r.fallback {
                fallbacks.push((class, why.clone()));
            }
            resolved.push(r);
        }
        log_fallbacks_once(&caps.dir, &fallbacks);
        Ok(IoEnv {
            dir: caps.dir.clone(),
            limiter: Arc::new(RateLimiter::new(opts.background_bytes_per_sec)),
            caps,
            resolved,
            opts,
            engine,
            stats: Arc::new(IoStats::new()),
            read_only,
            fault: None,
        })
    }

    /// Tests only: every file operation in this directory from now on goes
    /// through `layer` (see [`crate::fault`]), which records what is
    /// durable and may inject faults. `None` leaves the environment as it
    /// is.
    pub fn with_fault_layer(mut self, layer: Option<Arc<FaultLayer>>) -> IoEnv {
        if layer.is_some() {
            self.fault = layer;
        }
        self
    }

    /// Counts every file opened through this environment in `stats`
    /// instead of counters of its own: an environment opened on another
    /// directory only to copy files there (a checkpoint, a backup) then
    /// shows its bytes in the counters of the database that made the copy.
    pub fn with_stats(mut self, stats: Arc<IoStats>) -> IoEnv {
        self.stats = stats;
        self
    }

    /// The layer's name for `path`, when a layer is installed and `path`
    /// is in its directory.
    fn fault_name(&self, path: &Path) -> Option<(&FaultLayer, String)> {
        let layer = self.fault.as_deref()?;
        layer.name_of(path).map(|n| (layer, n))
    }

    /// Whether this environment refuses to create files.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn check_writable(&self, path: &Path) -> Result<()> {
        if self.read_only {
            return Err(
                Error::invalid("cannot create a file: the directory was opened read-only")
                    .with_file(path),
            );
        }
        Ok(())
    }

    /// The directory, as the probe canonicalised it (absolute, symbolic
    /// links resolved).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the probe found in the directory: O_DIRECT and its alignment,
    /// RWF_DONTCACHE, the device's limits.
    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// The options the environment was opened with (validated: buffer sizes
    /// are multiples of the alignment, `io_depth` is in range).
    pub fn options(&self) -> &IoOptions {
        &self.opts
    }

    /// The engine direct sequential files use, and why `auto` fell back.
    pub fn engine(&self) -> &EngineResolution {
        &self.engine
    }

    /// Requests in flight per direct sequential file: `io_depth` with
    /// io_uring, 1 with blocking calls.
    pub fn effective_io_depth(&self) -> usize {
        match self.engine.engine {
            Engine::Uring => self.opts.io_depth,
            Engine::Sync => 1,
        }
    }

    /// The mode `class` really uses here.
    pub fn mode(&self, class: IoClass) -> EffectiveMode {
        self.resolved[class.index()].mode
    }

    /// The mode plus the reason `auto` fell back, if it did.
    pub fn resolution(&self, class: IoClass) -> &Resolution {
        &self.resolved[class.index()]
    }

    /// The per-class counters of every file opened through this
    /// environment, readable while the files are in use.
    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }

    /// The limiter shared by every background reader and writer.
    pub fn rate_limiter(&self) -> &Arc<RateLimiter> {
        &self.limiter
    }

    /// The handle configuration for `class` in `mode`.
    pub fn file_config(&self, class: IoClass, mode: EffectiveMode) -> FileConfig {
        let d = &self.caps.direct;
        let align = d.offset_align.max(d.mem_align);
        let mut readahead = self.opts.readahead_size;
        if mode == EffectiveMode::Direct {
            if let Some(max) = self.caps.max_io_bytes() {
                // One direct read larger than the device takes is split by
                // the block layer anyway; keep each read whole.
                readahead = readahead.min(max.max(align)) / align * align;
            }
        }
        FileConfig {
            class,
            mode,
            mem_align: d.mem_align,
            offset_align: d.offset_align,
            write_buffer_size: self.opts.direct_write_buffer_size,
            readahead_size: readahead.max(align),
            fadvise_chunk_size: self.opts.fadvise_chunk_size,
            writeback_chunk_size: self.opts.writeback_chunk_size,
            attribute_cache_hits: self.opts.attribute_cache_hits,
            cachestat: self.caps.cachestat,
            stats: self.stats.clone(),
            limiter: class.is_throttled().then(|| self.limiter.clone()),
            engine: self.engine.engine,
            io_depth: self.opts.io_depth,
            inject_write_fault_at: None,
            fault: self.fault.clone(),
        }
    }

    /// Resolves an explicitly requested mode for one file (doctor, tests,
    /// benchmarks that compare modes side by side).
    pub fn resolve_explicit(&self, class: IoClass, mode: AccessMode) -> Result<EffectiveMode> {
        Ok(resolve(class, mode, &self.caps)?.mode)
    }

    /// Creates (or truncates) `path` for writing front to back in `class`'s
    /// mode. Refused (`InvalidArgument`) in a read-only environment.
    pub fn create(&self, path: &Path, class: IoClass) -> Result<SeqWriter> {
        SeqWriter::create(path, self.writer_config(path, class, None)?)
    }

    /// Creates `path` like [`create`](Self::create), but in `mode` instead
    /// of the class's resolved mode; the bytes are still counted (and
    /// throttled) under `class`. `mode` is resolved here as
    /// [`resolve`] does, so a mode that cannot work in this
    /// directory is a `NotSupported` error (`InvalidArgument` for `Mmap`).
    /// Refused in a read-only environment, as `create` is.
    pub fn create_with_mode(
        &self,
        path: &Path,
        class: IoClass,
        mode: AccessMode,
    ) -> Result<SeqWriter> {
        SeqWriter::create(path, self.writer_config(path, class, Some(mode))?)
    }

    /// Creates `path` to be appended to through a writable mapping (the
    /// mmap WAL), allocated `segment_size` bytes at a time, whatever mode
    /// `class` is set to. Fails as an explicit mmap request for `class`
    /// would: only the WAL, and only where `fallocate` works.
    pub fn create_mapped(
        &self,
        path: &Path,
        class: IoClass,
        segment_size: u64,
    ) -> Result<MmapWriter> {
        let cfg = self.writer_config(path, class, Some(AccessMode::Mmap))?;
        MmapWriter::create(path, cfg, segment_size)
    }

    /// Opens the existing file `path` to write it again from offset 0 in
    /// `class`'s mode, without truncating it (see
    /// [`SeqWriter::overwrite`]): a recycled log. Refused in a read-only
    /// environment.
    pub fn overwrite(&self, path: &Path, class: IoClass) -> Result<SeqWriter> {
        SeqWriter::overwrite(path, self.writer_config(path, class, None)?)
    }

    /// [`overwrite`](Self::overwrite) in `mode` instead of the class's mode
    /// (resolved as for [`create_with_mode`](Self::create_with_mode)).
    pub fn overwrite_with_mode(
        &self,
        path: &Path,
        class: IoClass,
        mode: AccessMode,
    ) -> Result<SeqWriter> {
        SeqWriter::overwrite(path, self.writer_config(path, class, Some(mode))?)
    }

    /// Like [`create_mapped`](Self::create_mapped), for an existing file
    /// written again from offset 0 without truncating it (see
    /// [`MmapWriter::overwrite`]).
    pub fn overwrite_mapped(
        &self,
        path: &Path,
        class: IoClass,
        segment_size: u64,
    ) -> Result<MmapWriter> {
        let cfg = self.writer_config(path, class, Some(AccessMode::Mmap))?;
        MmapWriter::overwrite(path, cfg, segment_size)
    }

    /// What every writer constructor checks and resolves first: the
    /// environment must be writable, and the mode is the class's own
    /// (`None`) or an explicit request resolved for this directory.
    fn writer_config(
        &self,
        path: &Path,
        class: IoClass,
        mode: Option<AccessMode>,
    ) -> Result<FileConfig> {
        self.check_writable(path)?;
        let m = match mode {
            None => self.mode(class),
            Some(mode) => self.resolve_explicit(class, mode)?,
        };
        Ok(self.file_config(class, m))
    }

    /// Opens `path` for reading front to back in `class`'s mode.
    pub fn open_sequential(&self, path: &Path, class: IoClass) -> Result<SeqReader> {
        SeqReader::open(path, self.file_config(class, self.mode(class)))
    }

    /// [`open_sequential`](Self::open_sequential) with at most `depth`
    /// chunk reads in flight (direct files with io_uring; 1..=`io_depth`):
    /// background work that need not hurry keeps the device queue short.
    pub fn open_sequential_at_depth(
        &self,
        path: &Path,
        class: IoClass,
        depth: usize,
    ) -> Result<SeqReader> {
        let mut cfg = self.file_config(class, self.mode(class));
        cfg.io_depth = depth.clamp(1, cfg.io_depth.max(1));
        SeqReader::open(path, cfg)
    }

    /// [`create`](Self::create) with at most `depth` writes in flight (see
    /// [`open_sequential_at_depth`](Self::open_sequential_at_depth)).
    pub fn create_at_depth(&self, path: &Path, class: IoClass, depth: usize) -> Result<SeqWriter> {
        self.create_at_depth_in(path, class, depth, None)
    }

    /// [`create_at_depth`](Self::create_at_depth) in `mode` instead of the
    /// class's resolved mode when one is given (resolved and counted as for
    /// [`create_with_mode`](Self::create_with_mode)).
    pub fn create_at_depth_in(
        &self,
        path: &Path,
        class: IoClass,
        depth: usize,
        mode: Option<AccessMode>,
    ) -> Result<SeqWriter> {
        let mut cfg = self.writer_config(path, class, mode)?;
        cfg.io_depth = depth.clamp(1, cfg.io_depth.max(1));
        SeqWriter::create(path, cfg)
    }

    /// Opens `path` like [`open_sequential`](Self::open_sequential), but in
    /// `mode` (resolved as for [`create_with_mode`](Self::create_with_mode));
    /// counted under `class`.
    pub fn open_sequential_with_mode(
        &self,
        path: &Path,
        class: IoClass,
        mode: AccessMode,
    ) -> Result<SeqReader> {
        let m = self.resolve_explicit(class, mode)?;
        SeqReader::open(path, self.file_config(class, m))
    }

    /// Opens `path` for positional reads in `class`'s mode.
    pub fn open_random(&self, path: &Path, class: IoClass) -> Result<RandomReader> {
        RandomReader::open(path, self.file_config(class, self.mode(class)))
    }

    /// Opens `path` like [`open_random`](Self::open_random), but in `mode`
    /// (resolved as for [`create_with_mode`](Self::create_with_mode));
    /// counted under `class`.
    pub fn open_random_with_mode(
        &self,
        path: &Path,
        class: IoClass,
        mode: AccessMode,
    ) -> Result<RandomReader> {
        let m = self.resolve_explicit(class, mode)?;
        RandomReader::open(path, self.file_config(class, m))
    }

    /// Creates `path`, which must not exist, to be written and read at any
    /// offset in `class`'s mode (see [`PositionalFile`]). Refused in a
    /// read-only environment.
    pub fn create_positional(&self, path: &Path, class: IoClass) -> Result<PositionalFile> {
        PositionalFile::create_new(path, self.writer_config(path, class, None)?)
    }

    /// [`create_positional`](Self::create_positional) in `mode` (resolved
    /// as for [`create_with_mode`](Self::create_with_mode)); counted under
    /// `class`.
    pub fn create_positional_with_mode(
        &self,
        path: &Path,
        class: IoClass,
        mode: AccessMode,
    ) -> Result<PositionalFile> {
        PositionalFile::create_new(path, self.writer_config(path, class, Some(mode))?)
    }

    /// Opens the existing file `path` for reads at any offset in `class`'s
    /// mode, as a [`PositionalFile`] that refuses writes.
    pub fn open_positional(&self, path: &Path, class: IoClass) -> Result<PositionalFile> {
        PositionalFile::open(path, self.file_config(class, self.mode(class)))
    }

    /// [`open_positional`](Self::open_positional) in `mode`; counted under
    /// `class`.
    pub fn open_positional_with_mode(
        &self,
        path: &Path,
        class: IoClass,
        mode: AccessMode,
    ) -> Result<PositionalFile> {
        let m = self.resolve_explicit(class, mode)?;
        PositionalFile::open(path, self.file_config(class, m))
    }

    /// Makes creations, renames and deletions in the directory durable.
    pub fn sync_dir(&self) -> Result<()> {
        self.check_writable(&self.dir)?;
        let Some(layer) = &self.fault else {
            return sync_dir(&self.dir);
        };
        let synced = layer
            .before_sync(OpKind::DirSync, "")
            .map_err(|e| Error::io(e, "directory fsync failed").with_file(&self.dir))
            .and_then(|()| sync_dir(&self.dir));
        if synced.is_ok() {
            layer.dir_synced();
        }
        synced
    }

    /// Renames `from` to `to` (both in this directory); durable once the
    /// directory is synced.
    pub fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        let names = self.fault_name(from).zip(self.fault_name(to));
        if let Some(((layer, f), _)) = &names {
            layer.admit(OpKind::Rename, f)?;
        }
        std::fs::rename(from, to)?;
        if let Some(((layer, f), (_, t))) = &names {
            layer.renamed(f, t);
        }
        Ok(())
    }

    /// Deletes `path`; durable once the directory is synced.
    pub fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        let name = self.fault_name(path);
        if let Some((layer, n)) = &name {
            layer.admit(OpKind::Remove, n)?;
        }
        std::fs::remove_file(path)?;
        if let Some((layer, n)) = &name {
            layer.removed(n);
        }
        Ok(())
    }

    /// Reads a whole (small) file: CURRENT, a manifest, a WAL.
    pub fn read_file(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        if let Some((layer, n)) = self.fault_name(path) {
            layer.admit(OpKind::Open, &n)?;
        }
        std::fs::read(path)
    }

    /// Opens `path` for plain reading outside any I/O class: what `check`
    /// and `repair` verify a whole file through (the fault layer sees the
    /// open).
    pub fn open_for_verify(&self, path: &Path) -> std::io::Result<File> {
        if let Some((layer, n)) = self.fault_name(path) {
            layer.admit(OpKind::Open, &n)?;
        }
        File::open(path)
    }

    /// Opens (creating it if missing, never truncating) a file that is
    /// locked, not written: the LOCK file.
    pub fn open_lock_file(&self, path: &Path) -> std::io::Result<File> {
        let name = self.fault_name(path);
        if let Some((layer, n)) = &name {
            layer.admit(OpKind::Create, n)?;
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if let Some((layer, n)) = &name {
            // Opening an existing file changes nothing; a new one is a
            // name to make durable.
            layer.noted_open(n);
        }
        Ok(f)
    }
}

/// `fsync` of a directory.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir)
        .map_err(|e| Error::io(e, "cannot open directory to sync it").with_file(dir))?;
    use std::os::fd::AsRawFd;
    crate::sys::fsync(f.as_raw_fd())
        .map_err(|e| Error::io(e, "directory fsync failed").with_file(dir))
}

/// The engine's fallback is logged once per process.
fn log_engine_fallback_once(why: &str) {
    static SEEN: std::sync::Once = std::sync::Once::new();
    SEEN.call_once(|| log::warn!("quietio: {why}"));
}

/// The fallbacks of `auto` classes in a directory are logged once per
/// process and directory, in one line, never on every open. At info level:
/// `auto` asks for whatever works, so falling back is not a problem (an
/// explicit mode that cannot work is an error at open instead).
fn log_fallbacks_once(dir: &Path, fallbacks: &[(IoClass, String)]) {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    if fallbacks.is_empty() {
        return;
    }
    static SEEN: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(HashSet::new()));
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    if seen.insert(dir.to_path_buf()) {
        let classes: Vec<String> = fallbacks.iter().map(|(c, _)| c.to_string()).collect();
        let mut reasons: Vec<&str> = fallbacks.iter().map(|(_, why)| why.as_str()).collect();
        reasons.dedup();
        log::info!(
            "quietio: {}: auto mode of {}: {}",
            dir.display(),
            classes.join(", "),
            reasons.join("; ")
        );
    }
}
