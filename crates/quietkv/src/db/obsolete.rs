//! Deleting the files no version, reader or WAL replay needs any more:
//! replaced tables, WALs whose data is in tables, old manifests, and the
//! WALs kept for reuse instead.

use std::collections::HashSet;
use std::sync::Weak;

use super::state::Inner;
use crate::filenames::{self, FileKind};

impl Inner {
    /// Whether obsolete WAL `number` is (now) kept for reuse instead of
    /// deleted: recycling is on, the pool has room, and the file is one
    /// this process wrote (so every record in it names its log) whose data
    /// the manifest says is in tables.
    fn keep_wal_for_reuse(&self, number: u64) -> bool {
        let limit = self.opts.wal_recycle_count;
        if limit == 0 {
            return false;
        }
        let mut st = self.state.lock();
        if st.wal_pool.contains(&number) {
            return true;
        }
        if number < st.first_own_wal
            || number >= st.wals.log_number()
            || st.wal_pool.len() >= limit
            || st.bg_error.is_some()
            // Taken and renamed by a switch since the caller listed it
            // (switches rename under the state lock held here).
            || !filenames::wal_path(&self.dir, number).exists()
        {
            return false;
        }
        st.wal_pool.push_back(number);
        true
    }

    /// Deletes tables no version uses any more, WALs whose data is in
    /// tables and old manifests. Files a reader or iterator still holds
    /// (through an old version) are kept.
    pub(crate) fn delete_obsolete_files(&self) {
        self.remove_obsolete(false)
    }

    /// [`Inner::delete_obsolete_files`], and the temporary files a crash
    /// left mid-install: only at open, when no install can be writing one.
    pub(crate) fn delete_obsolete_files_at_open(&self) {
        self.remove_obsolete(true)
    }

    fn remove_obsolete(&self, temporary_files_too: bool) {
        let _one_at_a_time = self.deleting_obsolete.lock();
        // The directory is listed after the lock is let go, while the
        // flush and compaction threads go on creating files: a table
        // numbered from `unallocated` on did not exist when `live` was
        // taken, so it is not known to be obsolete.
        let (live_tables, unallocated, min_wal, manifest_number) = {
            let mut st = self.state.lock();
            let mut live: HashSet<u64> = st.pending_outputs.clone();
            for t in &mut st.trees {
                t.live_versions.retain(|w| w.strong_count() > 0);
                live.extend(t.version.all_file_numbers());
                for v in t.live_versions.iter().filter_map(Weak::upgrade) {
                    live.extend(v.all_file_numbers());
                }
            }
            st.retired_versions.retain(|w| w.strong_count() > 0);
            for v in st.retired_versions.iter().filter_map(Weak::upgrade) {
                live.extend(v.all_file_numbers());
            }
            // Never past what the manifest says is in tables: it requires
            // the WALs from its log number on.
            let min_wal = st.min_live_wal().min(st.wals.log_number());
            (live, st.next_file, min_wal, st.manifest_number)
        };
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(kind) = name.to_str().and_then(filenames::parse) else {
                continue;
            };
            let obsolete = match kind {
                FileKind::Table(n) => n < unallocated && !live_tables.contains(&n),
                FileKind::Wal(n) => n < min_wal && !self.keep_wal_for_reuse(n),
                // Only older ones: a newer one is a rotation in progress
                // (this listing may race with it) or one whose CURRENT
                // switch failed and might be in charge after a crash.
                FileKind::Manifest(n) => n < manifest_number,
                // At run time a manifest rotation (under the lock, in
                // another thread) may be between writing one and renaming it.
                FileKind::Temp => temporary_files_too,
                FileKind::Current | FileKind::Lock => false,
            };
            if obsolete {
                if let FileKind::Table(n) = kind {
                    self.table_cache.evict(n);
                }
                if let Err(e) = self.env.remove_file(&entry.path()) {
                    if matches!(kind, FileKind::Wal(_)) && e.kind() == std::io::ErrorKind::NotFound
                    {
                        // A kept WAL a switch took (renamed) since the listing.
                        continue;
                    }
                    log::warn!(
                        "quietkv: cannot delete obsolete {}: {e}",
                        entry.path().display()
                    );
                }
            }
        }
    }
}
