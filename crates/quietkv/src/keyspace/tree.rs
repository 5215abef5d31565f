//! One keyspace's part of the database state: its memtables, its version
//! (its levels of tables) and what flush and compaction track for it.
//! Every keyspace, the default one included, is a `Tree` in the state;
//! they share the WAL, the manifest, the file numbers and the caches.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;

use super::def::KeyspaceDef;
use crate::compaction::picker::BusyFiles;
use crate::compaction::CompactionFilter;
use crate::memtable::Memtable;
use crate::table::TableOptions;
use crate::version::Version;

/// What readers need to see one consistent state of a keyspace: the
/// memtables and the table version. Cloning the `Arc` is all a reader
/// does under a lock.
pub(crate) struct SuperVersion {
    pub mem: Arc<Memtable>,
    /// Frozen memtables, newest first.
    pub imms: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
}

/// A frozen memtable waiting for flush, with the oldest WAL that holds
/// its data.
pub(crate) struct Immutable {
    pub mem: Arc<Memtable>,
    pub wal_number: u64,
}

/// What a keyspace's handles share with the state: reads go through it
/// without the state lock.
pub(crate) struct TreeHandle {
    /// 0 for the default keyspace.
    pub id: u32,
    /// Empty for the default keyspace.
    pub name: String,
    pub super_version: Arc<RwLock<Arc<SuperVersion>>>,
    /// The user's compaction filter for this keyspace (its `hides` is
    /// honoured by reads too).
    pub filter: RwLock<Option<Arc<dyn CompactionFilter>>>,
    /// How its tables are written.
    pub table_options: TableOptions,
    /// Set once the drop is in the manifest: handles refuse every call.
    pub dropped: AtomicBool,
}

impl TreeHandle {
    pub fn filter(&self) -> Option<Arc<dyn CompactionFilter>> {
        self.filter.read().clone()
    }
}

/// A keyspace's mutable state, guarded by the state lock.
pub(crate) struct Tree {
    pub handle: Arc<TreeHandle>,
    /// What the manifest records for it; `None` for the default keyspace.
    pub def: Option<KeyspaceDef>,
    pub mem: Arc<Memtable>,
    /// The oldest WAL that may hold data of `mem` (the live WAL when it
    /// was started, or when it was last seen empty at a WAL switch).
    pub mem_wal: u64,
    /// Oldest first.
    pub imms: VecDeque<Immutable>,
    pub version: Arc<Version>,
    /// Versions handed to readers, to know which tables are still in use.
    pub live_versions: Vec<Weak<Version>>,
    pub busy: BusyFiles,
    /// Its oldest frozen memtable is being written out.
    pub flushing: bool,
}

impl Tree {
    pub fn new(handle: Arc<TreeHandle>, def: Option<KeyspaceDef>, wal: u64) -> Tree {
        let sv = handle.super_version.read().clone();
        Tree {
            handle,
            def,
            mem: sv.mem.clone(),
            mem_wal: wal,
            imms: VecDeque::new(),
            version: sv.version.clone(),
            live_versions: Vec::new(),
            busy: BusyFiles::new(),
            flushing: false,
        }
    }

    pub fn id(&self) -> u32 {
        self.handle.id
    }

    /// WAL files older than this hold none of this keyspace's data that
    /// is not in its tables.
    pub fn min_live_wal(&self) -> u64 {
        self.imms
            .front()
            .map(|i| i.wal_number)
            .unwrap_or(self.mem_wal)
    }

    /// The WAL the keyspace needs from once its oldest frozen memtable is
    /// in a table.
    pub fn log_after_flush(&self) -> u64 {
        self.imms
            .get(1)
            .map(|i| i.wal_number)
            .unwrap_or(self.mem_wal)
    }

    /// Publishes a new reader view of the keyspace.
    pub fn refresh_super_version(&self) {
        let sv = SuperVersion {
            mem: self.mem.clone(),
            imms: self.imms.iter().rev().map(|i| i.mem.clone()).collect(),
            version: self.version.clone(),
        };
        *self.handle.super_version.write() = Arc::new(sv);
    }

    /// Freezes the memtable (keeping its oldest WAL with it) and starts a
    /// new one whose data goes to WAL `wal` on.
    pub fn freeze(&mut self, wal: u64) {
        let frozen = std::mem::replace(&mut self.mem, Arc::new(Memtable::new()));
        let frozen_wal = std::mem::replace(&mut self.mem_wal, wal);
        self.imms.push_back(Immutable {
            mem: frozen,
            wal_number: frozen_wal,
        });
    }
}

/// A handle for a keyspace with an empty memtable and `version`.
pub(crate) fn new_handle(
    id: u32,
    name: String,
    version: Arc<Version>,
    mem: Arc<Memtable>,
    table_options: TableOptions,
    filter: Option<Arc<dyn CompactionFilter>>,
) -> Arc<TreeHandle> {
    let sv = SuperVersion {
        mem,
        imms: Vec::new(),
        version,
    };
    Arc::new(TreeHandle {
        id,
        name,
        super_version: Arc::new(RwLock::new(Arc::new(sv))),
        filter: RwLock::new(filter),
        // Every table of the keyspace records it (see `TableProperties`).
        table_options: TableOptions {
            keyspace_id: id,
            ..table_options
        },
        dropped: AtomicBool::new(false),
    })
}
