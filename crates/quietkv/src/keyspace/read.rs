//! Reading a keyspace through a [`Snapshot`]: every keyspace at the
//! snapshot's one sequence number, so a batch written across keyspaces is
//! seen whole or not at all.

use std::ops::RangeBounds;
use std::sync::Arc;

use super::handle::Keyspace;
use crate::db::iter::DbIter;
use crate::db::key_range::KeyRange;
use crate::error::{Error, Result};
use crate::snapshot::Snapshot;
use crate::value::Value;

impl Snapshot {
    fn check_keyspace(&self, ks: &Keyspace) -> Result<()> {
        if !Arc::ptr_eq(&self.view().table_cache, &ks.inner.table_cache) {
            return Err(Error::invalid(format!(
                "keyspace {:?} belongs to another database than the snapshot",
                ks.name()
            )));
        }
        Ok(())
    }

    /// The value of `key` in keyspace `ks` when the snapshot was taken.
    ///
    /// # Errors
    ///
    /// As [`Db::get`](crate::Db::get); `InvalidArgument` if `ks` was
    /// dropped or is another database's.
    pub fn get_in(&self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.check_keyspace(ks)?;
        ks.get_at(key.as_ref(), self.seq())
    }

    /// [`get_in`](Self::get_in), read in place (see [`Value`]).
    ///
    /// # Errors
    ///
    /// As [`Snapshot::get_in`].
    pub fn get_pinned_in(&self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        self.check_keyspace(ks)?;
        ks.get_pinned_at(key.as_ref(), self.seq())
    }

    /// Every key of keyspace `ks`, as of the snapshot.
    ///
    /// # Errors
    ///
    /// As [`Snapshot::get_in`], here and from the iterator's items.
    pub fn iter_in(&self, ks: &Keyspace) -> Result<DbIter> {
        self.range_in_keys(ks, KeyRange::default())
    }

    /// The keys of keyspace `ks` in `range`, as of the snapshot.
    ///
    /// # Errors
    ///
    /// As [`Snapshot::get_in`], here and from the iterator's items.
    pub fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        ks: &Keyspace,
        range: R,
    ) -> Result<DbIter> {
        self.range_in_keys(ks, KeyRange::from_bounds(&range))
    }

    /// The keys of keyspace `ks` starting with `prefix`, as of the snapshot.
    ///
    /// # Errors
    ///
    /// As [`Snapshot::get_in`], here and from the iterator's items.
    pub fn prefix_in(&self, ks: &Keyspace, prefix: impl AsRef<[u8]>) -> Result<DbIter> {
        self.range_in_keys(ks, KeyRange::prefix(prefix.as_ref()))
    }

    pub(crate) fn range_in_keys(&self, ks: &Keyspace, range: KeyRange) -> Result<DbIter> {
        self.check_keyspace(ks)?;
        ks.iter_at(range, self.seq())
    }
}
