//! The keyspace-aware writes of [`WriteBatch`].

use std::ops::RangeBounds;

use super::handle::Keyspace;
use crate::batch::WriteBatch;
use crate::db::range_delete_bounds;
use crate::error::Result;

impl WriteBatch {
    /// Adds a put of `key` = `value` in keyspace `ks`. The batch is
    /// applied atomically across every keyspace it writes.
    ///
    /// # Errors
    ///
    /// As [`WriteBatch::put`]; `InvalidArgument` if `ks` was dropped.
    pub fn put_in(
        &mut self,
        ks: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        ks.live()?;
        self.put_scoped(ks.id(), key.as_ref(), value.as_ref())
    }

    /// Adds a delete of `key` in keyspace `ks`.
    ///
    /// # Errors
    ///
    /// As [`WriteBatch::delete`]; `InvalidArgument` if `ks` was dropped.
    pub fn delete_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        ks.live()?;
        self.delete_scoped(ks.id(), key.as_ref())
    }

    /// Adds a delete of every key of `range` in keyspace `ks` (see
    /// [`Db::delete_range`](crate::Db::delete_range) for the bounds).
    ///
    /// # Errors
    ///
    /// As [`WriteBatch::delete_range`], and `InvalidArgument` for a range
    /// without an end; `InvalidArgument` if `ks` was dropped.
    pub fn delete_range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        ks: &Keyspace,
        range: R,
    ) -> Result<()> {
        ks.live()?;
        match range_delete_bounds(&range)? {
            Some((begin, end)) => self.delete_range_scoped(ks.id(), &begin, &end),
            None => Ok(()),
        }
    }
}
