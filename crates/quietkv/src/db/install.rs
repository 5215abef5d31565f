//! Installing a version edit: logged to the manifest (synced), then made
//! the current version for readers and background work.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::manifest;
use super::state::{read_only_error, Inner, State, SuperVersion};
use crate::error::{Error, Result};
use crate::keyspace::tree::{new_handle, Tree};
use crate::memtable::Memtable;
use crate::version::{Version, VersionEdit};

impl Inner {
    /// Logs `edit` to the manifest (synced) and makes it the current
    /// version; rotates the manifest once it has grown past its limit.
    pub(crate) fn install(&self, st: &mut State, mut edit: VersionEdit) -> Result<()> {
        if let Err(e) = self.verify_lock() {
            self.set_bg_error(st, &e);
            return Err(e);
        }
        edit.next_file_number = Some(st.next_file);
        edit.last_sequence = Some(self.visible_seq.load(Ordering::Acquire));
        // Every version the edit makes, computed before it is logged: an
        // edit that does not fit the tree fails before it is durable.
        let next = st.default_tree().version.apply(&edit)?;
        let mut next_keyspaces = Vec::new();
        let mut created = Vec::new();
        for k in &edit.keyspaces {
            if k.id == 0 {
                // The default keyspace's part holds only its log number.
                continue;
            }
            if let Some(def) = &k.create {
                if st.tree(k.id).is_some() {
                    return Err(Error::invalid(format!("keyspace {} exists", k.id)));
                }
                created.push((k.id, def.clone(), Version::new().apply(&k.edit)?));
                continue;
            }
            let tree = st.tree(k.id).ok_or_else(|| dropped_error(k.id))?;
            next_keyspaces.push((k.id, tree.version.apply(&k.edit)?));
        }
        for &id in &edit.dropped_keyspaces {
            st.tree(id).ok_or_else(|| dropped_error(id))?;
        }
        if st.manifest.is_none() && !self.read_only {
            // Closed after a failed manifest rotation (`manifest::maybe_rotate`).
            self.check_bg_error(st)?;
        }
        let manifest = st.manifest.as_mut().ok_or_else(read_only_error)?;
        let res = manifest
            .add_record(&edit.encode())
            .and_then(|_| manifest.sync());
        if let Err(e) = res {
            self.set_bg_error(st, &e);
            return Err(e);
        }
        st.wals.apply(&edit);
        replace_version(st.default_tree_mut(), next);
        for (id, version) in next_keyspaces {
            replace_version(st.tree_mut(id).expect("checked above"), version);
        }
        for (id, def, version) in created {
            let handle = new_handle(
                id,
                def.name.clone(),
                Arc::new(version),
                Arc::new(Memtable::new()),
                def.table_options(self.opts.table_options()),
                None,
            );
            let wal = st.live_wal;
            st.trees.push(Tree::new(handle, Some(def), wal));
        }
        if let Some(n) = edit.next_keyspace_id {
            st.next_keyspace_id = st.next_keyspace_id.max(n);
        }
        for &id in &edit.dropped_keyspaces {
            let pos = st.trees.iter().position(|t| t.id() == id);
            let tree = st.trees.remove(pos.expect("checked above"));
            tree.handle.dropped.store(true, Ordering::Release);
            // Its handles may live on: they must not keep its tables.
            *tree.handle.super_version.write() = Arc::new(SuperVersion {
                mem: Arc::new(Memtable::new()),
                imms: Vec::new(),
                version: Arc::new(Version::new()),
            });
            // Readers of the dropped keyspace keep its tables until they
            // are done; nothing else does.
            let mut retired = tree.live_versions;
            retired.push(Arc::downgrade(&tree.version));
            st.retired_versions.retain(|w| w.strong_count() > 0);
            st.retired_versions.extend(retired);
        }
        self.refresh_super_version(st);
        // The edit is durable: whatever rotation does, it stays installed.
        manifest::maybe_rotate(self, st);
        Ok(())
    }
}

/// Makes `next` the keyspace's version, remembering the old one for as
/// long as readers hold it.
fn replace_version(tree: &mut Tree, next: Version) {
    let old = std::mem::replace(&mut tree.version, Arc::new(next));
    tree.live_versions.retain(|w| w.strong_count() > 0);
    tree.live_versions.push(Arc::downgrade(&old));
}

/// What an install touching keyspace `id` fails with once it is gone.
pub(crate) fn dropped_error(id: u32) -> Error {
    Error::invalid(format!("keyspace {id} was dropped"))
}
