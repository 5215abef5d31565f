//! A fault-injecting, crash-simulating layer under quietio's files, for
//! tests.
//!
//! Installed on an [`IoEnv`](crate::IoEnv) with
//! [`IoEnv::with_fault_layer`](crate::IoEnv::with_fault_layer), it sees
//! every operation on a file in its directory that goes through quietio:
//! creates and opens, every write (buffered, dontcache, fadvise, O_DIRECT
//! blocking and io_uring write-behind), `fdatasync`, `ftruncate`,
//! `fallocate`, renames, removes and directory syncs. The real operation
//! still runs on the real file system (direct I/O and io_uring really
//! run); the layer
//!
//! * keeps a shadow model of what is durable (the weak POSIX model: file
//!   bytes become durable at `fdatasync`, names at the directory's
//!   `fsync`), from which it builds power-cut images
//!   ([`FaultLayer::power_cut_image`], [`CutPolicy`]) at any moment, and
//!   calls a hook just before every file sync and directory sync so a test
//!   can take an image at each sync point;
//! * counts operations per [`OpKind`] and fails the one a [`FaultPlan`]
//!   names with EIO, ENOSPC or a short write ([`Fault`]). An io_uring write
//!   that is to fail is submitted as usual and its completion's result
//!   replaced by `-errno` (or a short length), so the writer goes through
//!   exactly the code a kernel error would send it through.
//!
//! Files present when the layer is created are taken as durable.
//! Without a layer nothing of this runs: each hook is one `Option` check.

mod image;
mod plan;
mod shadow;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

pub use image::{CutPolicy, ImageSummary, SECTOR};
pub use plan::{Fault, FaultPlan, Fired, OpCounts, OpKind};
pub use shadow::FileId;

pub(crate) use plan::WriteVerdict;
use shadow::{Change, Shadow};

/// Where a sync hook is called from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncPoint {
    /// 0-based, over every file and directory sync since the layer was made.
    pub index: u64,
    /// [`OpKind::Sync`] or [`OpKind::DirSync`].
    pub kind: OpKind,
    /// The file about to be synced (empty for the directory).
    pub name: String,
}

/// Called just before each sync, on the thread that syncs, without any
/// lock of the layer held (it may call [`FaultLayer::power_cut_image`]).
pub type SyncHook = Arc<dyn Fn(&FaultLayer, &SyncPoint) + Send + Sync>;

struct LayerState {
    shadow: Shadow,
    injector: plan::Injector,
    sync_points: u64,
    /// Per file, the sync point of the file sync under way.
    syncing: std::collections::HashMap<FileId, u64>,
    /// File sync points whose sync returned success.
    completed_syncs: std::collections::BTreeSet<u64>,
}

/// The fault-injecting, crash-simulating layer of one directory (tests
/// only; see the module docs).
///
/// Made with [`FaultLayer::new`] and shared: the [`IoEnv`](crate::IoEnv)
/// it is installed on sends every operation on a file directly in
/// [`dir`](Self::dir) through it, while the test arms a [`FaultPlan`],
/// installs a sync hook, reads the counters and takes power-cut images.
pub struct FaultLayer {
    dir: PathBuf,
    state: Mutex<LayerState>,
    hook: Mutex<Option<SyncHook>>,
}

impl fmt::Debug for FaultLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultLayer")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A file the layer tracks, held by a writer.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    pub layer: Arc<FaultLayer>,
    pub id: FileId,
    pub name: String,
}

impl FaultLayer {
    /// A layer over `dir` (created if missing); the regular files already
    /// in it are taken as durable.
    pub fn new(dir: &Path) -> io::Result<Arc<FaultLayer>> {
        std::fs::create_dir_all(dir)?;
        let dir = std::fs::canonicalize(dir)?;
        let mut shadow = Shadow::default();
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            if e.file_type()?.is_file() {
                if let Some(name) = e.file_name().to_str() {
                    shadow.seed(name, std::fs::read(e.path())?);
                }
            }
        }
        Ok(Arc::new(FaultLayer {
            dir,
            state: Mutex::new(LayerState {
                shadow,
                injector: plan::Injector::default(),
                sync_points: 0,
                syncing: Default::default(),
                completed_syncs: Default::default(),
            }),
            hook: Mutex::new(None),
        }))
    }

    /// The directory the layer watches, canonicalised. Only files directly
    /// in it are tracked; files in subdirectories pass through untouched.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn state(&self) -> MutexGuard<'_, LayerState> {
        // A test hook that panicked must not hide the state from the rest.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arms `plan` (or disarms with `None`) and restarts the counters.
    pub fn set_plan(&self, plan: Option<FaultPlan>) {
        self.state().injector.set_plan(plan);
    }

    /// Operations seen per kind since the last [`set_plan`](Self::set_plan).
    pub fn counts(&self) -> OpCounts {
        self.state().injector.counts()
    }

    /// Faults injected since the last [`set_plan`](Self::set_plan).
    pub fn fired(&self) -> Vec<Fired> {
        self.state().injector.fired().to_vec()
    }

    /// File and directory syncs seen so far (each one a sync point).
    pub fn sync_points(&self) -> u64 {
        self.state().sync_points
    }

    /// Whether the file sync at sync point `index` has returned success (a
    /// test learns from it what a sync it saw begin has made durable).
    pub fn sync_completed(&self, index: u64) -> bool {
        self.state().completed_syncs.contains(&index)
    }

    /// Installs `hook` to run just before every file and directory sync
    /// from now on (see [`SyncHook`]), replacing any earlier one; `None`
    /// removes it.
    pub fn set_sync_hook(&self, hook: Option<SyncHook>) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// Writes into `dest` (a new or empty directory) the files a power cut
    /// now would leave under `policy`.
    pub fn power_cut_image(&self, dest: &Path, policy: CutPolicy) -> io::Result<ImageSummary> {
        let (files, summary) = image::cut(&self.state().shadow, policy);
        image::write_files(dest, &files)?;
        Ok(summary)
    }

    /// The names a power cut now would keep for sure.
    pub fn durable_names(&self) -> Vec<String> {
        self.state()
            .shadow
            .durable_names()
            .keys()
            .cloned()
            .collect()
    }

    /// The durable bytes of the file now named `name`.
    pub fn durable_content(&self, name: &str) -> Option<Vec<u8>> {
        let st = self.state();
        let id = st.shadow.lookup(name)?;
        st.shadow.file(id).map(|f| f.durable.clone())
    }

    /// The bytes of the file now named `name` as a reader sees them.
    pub fn visible_content(&self, name: &str) -> Option<Vec<u8>> {
        let st = self.state();
        st.shadow.visible(st.shadow.lookup(name)?)
    }

    /// The name of `path` if it is directly in this layer's directory.
    pub(crate) fn name_of(&self, path: &Path) -> Option<String> {
        let parent = path.parent()?;
        let parent = if parent == self.dir {
            parent.to_path_buf()
        } else {
            std::fs::canonicalize(parent).ok()?
        };
        if parent != self.dir {
            return None;
        }
        path.file_name()?.to_str().map(str::to_string)
    }

    /// Counts (and may fail) an operation other than a write or sync.
    pub(crate) fn admit(&self, kind: OpKind, name: &str) -> io::Result<()> {
        self.state().injector.admit(kind, name)
    }

    pub(crate) fn created(self: &Arc<Self>, name: &str, truncate: bool) -> Tracked {
        let id = self.state().shadow.create(name, truncate);
        Tracked {
            layer: self.clone(),
            id,
            name: name.to_string(),
        }
    }

    /// A file opened for writing without truncation (created if missing).
    pub(crate) fn noted_open(&self, name: &str) {
        self.state().shadow.create(name, false);
    }

    pub(crate) fn renamed(&self, from: &str, to: &str) {
        self.state().shadow.rename(from, to);
    }

    pub(crate) fn removed(&self, name: &str) {
        self.state().shadow.remove(name);
    }

    /// Runs the hook for a sync point, then counts (and may fail) the sync.
    pub(crate) fn before_sync(&self, kind: OpKind, name: &str) -> io::Result<()> {
        self.begin_sync(kind, name).1
    }

    /// [`before_sync`](Self::before_sync), also returning the sync point's index.
    fn begin_sync(&self, kind: OpKind, name: &str) -> (u64, io::Result<()>) {
        let index = {
            let mut st = self.state();
            st.sync_points += 1;
            st.sync_points - 1
        };
        let hook = self.hook.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(h) = hook {
            h(
                self,
                &SyncPoint {
                    index,
                    kind,
                    name: name.to_string(),
                },
            );
        }
        (index, self.admit(kind, name))
    }

    pub(crate) fn dir_synced(&self) {
        self.state().shadow.dir_synced();
    }
}

impl Tracked {
    pub(crate) fn write_verdict(&self, len: usize) -> WriteVerdict {
        self.layer.state().injector.admit_write(&self.name, len)
    }

    pub(crate) fn wrote(&self, offset: u64, data: &[u8]) {
        self.layer.state().shadow.change(
            self.id,
            Change::Write {
                offset,
                data: data.to_vec(),
            },
        );
    }

    pub(crate) fn admit(&self, kind: OpKind) -> io::Result<()> {
        self.layer.admit(kind, &self.name)
    }

    pub(crate) fn set_len(&self, len: u64) {
        self.layer
            .state()
            .shadow
            .change(self.id, Change::SetLen(len));
    }

    pub(crate) fn extended(&self, upto: u64) {
        self.layer
            .state()
            .shadow
            .change(self.id, Change::Extend(upto));
    }

    pub(crate) fn before_sync(&self) -> io::Result<()> {
        let (index, admitted) = self.layer.begin_sync(OpKind::Sync, &self.name);
        self.layer.state().syncing.insert(self.id, index);
        admitted
    }

    /// Runs `sync` (an `fdatasync` or `msync` of the file) as a sync
    /// point of the layer when the file is tracked: the layer may refuse
    /// it, and records whether it made the file's bytes durable.
    pub(crate) fn around_sync(
        tracked: Option<&Tracked>,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(tr) = tracked else {
            return sync();
        };
        let synced = tr.before_sync().and_then(|()| sync());
        tr.synced(synced.is_ok());
        synced
    }

    pub(crate) fn synced(&self, ok: bool) {
        let mut st = self.layer.state();
        let index = st.syncing.remove(&self.id);
        if ok {
            if let Some(i) = index {
                st.completed_syncs.insert(i);
            }
            st.shadow.sync(self.id);
        } else {
            st.shadow.sync_failed(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_existing_files_as_durable_and_names_files_in_its_directory_only() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("old"), b"kept").unwrap();
        let layer = FaultLayer::new(d.path()).unwrap();
        assert_eq!(layer.durable_names(), vec!["old".to_string()]);
        assert_eq!(layer.durable_content("old").unwrap(), b"kept");
        assert_eq!(layer.name_of(&d.path().join("x")).as_deref(), Some("x"));
        assert_eq!(layer.name_of(Path::new("/dev/urandom")), None);
    }

    #[test]
    fn the_hook_runs_before_each_sync_and_sees_the_state_before_it() {
        let d = tempfile::tempdir().unwrap();
        let layer = FaultLayer::new(d.path()).unwrap();
        let f = layer.created("f", true);
        f.wrote(0, b"abc");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        layer.set_sync_hook(Some(Arc::new(move |l: &FaultLayer, p: &SyncPoint| {
            s2.lock()
                .unwrap()
                .push((p.index, p.kind, l.durable_content("f").unwrap()));
        })));
        f.before_sync().unwrap();
        assert!(!layer.sync_completed(0), "not before it returns");
        f.synced(true);
        assert!(layer.sync_completed(0));
        layer.before_sync(OpKind::DirSync, "").unwrap();
        layer.dir_synced();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (0, OpKind::Sync, Vec::new()),
                (1, OpKind::DirSync, b"abc".to_vec())
            ]
        );
        assert_eq!(layer.sync_points(), 2);
        let img = d.path().join("img");
        layer
            .power_cut_image(&img, CutPolicy::DropUnsynced)
            .unwrap();
        assert_eq!(std::fs::read(img.join("f")).unwrap(), b"abc");
    }

    #[test]
    fn a_planned_sync_failure_is_counted_reported_and_loses_the_changes() {
        let d = tempfile::tempdir().unwrap();
        let layer = FaultLayer::new(d.path()).unwrap();
        layer.set_plan(Some(FaultPlan {
            kind: OpKind::Sync,
            index: 0,
            fault: Fault::Eio,
        }));
        let f = layer.created("w", true);
        f.wrote(0, b"lost");
        let e = f.before_sync().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        f.synced(false);
        assert!(!layer.sync_completed(0), "a failed sync never completes");
        assert_eq!(layer.visible_content("w").unwrap(), b"", "dropped pages");
        assert_eq!(layer.fired()[0].name, "w");
        assert_eq!(layer.counts().get(OpKind::Sync), 1);
    }
}
