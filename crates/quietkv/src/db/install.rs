//! Installing a version edit: logged to the manifest (synced), then made
//! the current version for readers and background work.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::manifest;
use super::state::{read_only_error, Inner, State};
use crate::error::Result;
use crate::version::VersionEdit;

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
        let next = st.version.apply(&edit)?;
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
        let old = std::mem::replace(&mut st.version, Arc::new(next));
        st.live_versions.retain(|w| w.strong_count() > 0);
        st.live_versions.push(Arc::downgrade(&old));
        self.refresh_super_version(st);
        // The edit is durable: whatever rotation does, it stays installed.
        manifest::maybe_rotate(self, st);
        Ok(())
    }
}
