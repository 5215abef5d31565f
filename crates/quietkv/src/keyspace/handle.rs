//! [`Keyspace`]: a handle on one keyspace, with the read and write methods
//! of [`Db`](crate::Db) for its keys.

use std::ops::RangeBounds;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::tree::TreeHandle;
use crate::batch::WriteBatch;
use crate::db::estimates::{approximate_len_of, approximate_size_of};
use crate::db::iter::DbIter;
use crate::db::key_range::KeyRange;
use crate::db::read_view::{get_at, get_vec_at, iter_at};
use crate::db::state::Inner;
use crate::db::stats::LevelStats;
use crate::db::{background, flush_wait, range_delete_bounds, write};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::options::WriteOptions;
use crate::value::Value;

/// A keyspace of a database, from [`Db::keyspace`](crate::Db::keyspace):
/// its methods read and write its keys as [`Db`](crate::Db)'s do the
/// default keyspace's, with the same signatures and errors. Cheap to
/// clone, `Send + Sync + 'static`. Once the keyspace is dropped
/// ([`Db::drop_keyspace`](crate::Db::drop_keyspace)) every call fails
/// with `InvalidArgument`; after the database is closed, writes fail with
/// `Closed` and reads work as a snapshot's do.
///
/// A batch built with [`WriteBatch::put_in`] and the other `_in` methods
/// names the keyspace by its id: write it to the database the keyspace
/// belongs to.
///
/// ```
/// use quietkv::{Db, KeyspaceOptions, Options, WriteBatch, WriteOptions};
/// # fn main() -> quietkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default())?;
/// let users = db.keyspace("users", KeyspaceOptions::default())?;
/// let index = db.keyspace("by-email", KeyspaceOptions::default().block_size(16 << 10))?;
///
/// // One atomic write across both, also after a crash.
/// let mut batch = WriteBatch::new();
/// batch.put_in(&users, b"1", b"alice")?;
/// batch.put_in(&index, b"alice@example.com", b"1")?;
/// db.write(batch, WriteOptions::default())?;
///
/// let snap = db.snapshot();
/// assert_eq!(snap.get_in(&users, b"1")?, Some(b"alice".to_vec()));
/// assert_eq!(db.get(b"1")?, None); // the default keyspace is another one
/// assert_eq!(db.keyspace_names(), ["default", "users", "by-email"]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Keyspace {
    pub(crate) inner: Arc<Inner>,
    pub(crate) tree: Arc<TreeHandle>,
}

impl Keyspace {
    /// Its name (`"default"` for the default keyspace).
    pub fn name(&self) -> &str {
        &self.tree.name
    }

    /// The id the WAL and manifest know it by (0: the default keyspace).
    pub(crate) fn id(&self) -> u32 {
        self.tree.id
    }

    /// `InvalidArgument` once the keyspace is dropped.
    #[inline]
    pub(crate) fn live(&self) -> Result<()> {
        if self.tree.dropped.load(Ordering::Acquire) {
            return Err(Error::invalid(format!(
                "keyspace {:?} was dropped",
                self.tree.name
            )));
        }
        Ok(())
    }

    /// Whether this handle belongs to the database `inner`.
    pub(crate) fn check_db(&self, inner: &Arc<Inner>) -> Result<()> {
        if !Arc::ptr_eq(&self.inner, inner) {
            return Err(Error::invalid(format!(
                "keyspace {:?} belongs to another database",
                self.tree.name
            )));
        }
        Ok(())
    }

    fn latest(&self) -> SeqNo {
        self.inner.visible_seq.load(Ordering::Acquire)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.live()?;
        write::write(&self.inner, batch, WriteOptions::default().sync, false)
    }

    /// Sets `key` to `value`; see [`Db::put`](crate::Db::put).
    ///
    /// # Errors
    ///
    /// As [`Db::put`](crate::Db::put); `InvalidArgument` once dropped.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let mut b = WriteBatch::with_capacity(key.len() + value.len() + 24);
        b.put_scoped(self.id(), key, value)?;
        self.write(b)
    }

    /// Deletes `key`; see [`Db::delete`](crate::Db::delete).
    ///
    /// # Errors
    ///
    /// As [`Keyspace::put`].
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let mut b = WriteBatch::with_capacity(key.len() + 24);
        b.delete_scoped(self.id(), key)?;
        self.write(b)
    }

    /// Deletes every key in `range`; see
    /// [`Db::delete_range`](crate::Db::delete_range).
    ///
    /// # Errors
    ///
    /// As [`Db::delete_range`](crate::Db::delete_range); `InvalidArgument`
    /// once dropped.
    pub fn delete_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.live()?;
        let Some((begin, end)) = range_delete_bounds(&range)? else {
            return Ok(());
        };
        let mut b = WriteBatch::with_capacity(begin.len() + end.len() + 24);
        b.delete_range_scoped(self.id(), &begin, &end)?;
        self.write(b)
    }

    /// The value of `key`; see [`Db::get`](crate::Db::get).
    ///
    /// # Errors
    ///
    /// As [`Db::get`](crate::Db::get); `InvalidArgument` once dropped.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_at(key.as_ref(), self.latest())
    }

    /// The value of `key`, read in place; see
    /// [`Db::get_pinned`](crate::Db::get_pinned).
    ///
    /// # Errors
    ///
    /// As [`Keyspace::get`].
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        self.get_pinned_at(key.as_ref(), self.latest())
    }

    pub(crate) fn get_at(&self, key: &[u8], seq: SeqNo) -> Result<Option<Vec<u8>>> {
        self.live()?;
        let filter = self.tree.filter();
        get_vec_at(
            &self.tree.super_version,
            &self.inner.table_cache,
            filter.as_deref(),
            key,
            seq,
        )
    }

    pub(crate) fn get_pinned_at(&self, key: &[u8], seq: SeqNo) -> Result<Option<Value>> {
        self.live()?;
        let filter = self.tree.filter();
        get_at(
            &self.tree.super_version,
            &self.inner.table_cache,
            filter.as_deref(),
            key,
            seq,
        )
    }

    pub(crate) fn iter_at(&self, range: KeyRange, seq: SeqNo) -> Result<DbIter> {
        self.live()?;
        iter_at(
            &self.tree.super_version,
            &self.inner.table_cache,
            &self.tree.filter(),
            range,
            seq,
        )
    }

    /// Every key in order; see [`Db::iter`](crate::Db::iter).
    ///
    /// # Errors
    ///
    /// As [`Keyspace::get`], here and from the iterator's items.
    pub fn iter(&self) -> Result<DbIter> {
        self.iter_at(KeyRange::default(), self.latest())
    }

    /// The keys in `range`; see [`Db::range`](crate::Db::range).
    ///
    /// # Errors
    ///
    /// As [`Keyspace::get`], here and from the iterator's items.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIter> {
        self.iter_at(KeyRange::from_bounds(&range), self.latest())
    }

    /// The keys that start with `prefix`; see [`Db::prefix`](crate::Db::prefix).
    ///
    /// # Errors
    ///
    /// As [`Keyspace::get`], here and from the iterator's items.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<DbIter> {
        self.iter_at(KeyRange::prefix(prefix.as_ref()), self.latest())
    }

    /// An estimate of its number of keys; see
    /// [`Db::approximate_len`](crate::Db::approximate_len).
    pub fn approximate_len(&self) -> u64 {
        approximate_len_of(&self.tree.super_version)
    }

    /// An estimate of the bytes on disk its keys in `range` take; see
    /// [`Db::approximate_size`](crate::Db::approximate_size).
    ///
    /// # Errors
    ///
    /// As [`Keyspace::get`].
    pub fn approximate_size<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<u64> {
        self.live()?;
        approximate_size_of(
            &self.tree.super_version,
            &self.inner.table_cache,
            KeyRange::from_bounds(&range),
        )
    }

    /// Writes its memtable out as a table and waits until none of its
    /// frozen memtables is left; see [`Db::flush`](crate::Db::flush).
    ///
    /// # Errors
    ///
    /// As [`Db::flush`](crate::Db::flush); `InvalidArgument` once dropped.
    pub fn flush(&self) -> Result<()> {
        self.live()?;
        write::switch_for_flush(&self.inner, self.id())?;
        flush_wait(&self.inner, self.id())
    }

    /// A full compaction of the keyspace; see
    /// [`Db::compact_all`](crate::Db::compact_all).
    ///
    /// # Errors
    ///
    /// As [`Keyspace::flush`]; a failed compaction also stops background
    /// work.
    pub fn compact_all(&self) -> Result<()> {
        self.compact_range(None, None)
    }

    /// Compacts its tables overlapping `[begin, end]`; see
    /// [`Db::compact_range`](crate::Db::compact_range).
    ///
    /// # Errors
    ///
    /// As [`Keyspace::compact_all`].
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        background::run_manual(
            &self.inner,
            self.id(),
            begin.map(<[u8]>::to_vec),
            end.map(<[u8]>::to_vec),
        )
    }

    /// The shape of its tree, as of now.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` once dropped.
    pub fn stats(&self) -> Result<KeyspaceStats> {
        self.live()?;
        let sv = self.tree.super_version.read().clone();
        Ok(KeyspaceStats {
            levels: (0..crate::version::NUM_LEVELS)
                .map(|l| LevelStats {
                    files: sv.version.num_files(l),
                    bytes: sv.version.level_bytes(l),
                    ..LevelStats::default()
                })
                .collect(),
            memtable_bytes: sv.mem.approximate_bytes(),
            immutable_memtables: sv.imms.len(),
        })
    }
}

/// One keyspace's part of [`DbStats`](crate::DbStats), from
/// [`Keyspace::stats`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct KeyspaceStats {
    /// Its levels, L0 first: tables and bytes in each. (Compaction work
    /// is counted for the whole database, in
    /// [`DbStats::levels`](crate::DbStats::levels); it is zero here.)
    pub levels: Vec<LevelStats>,
    /// Bytes in its memtable.
    pub memtable_bytes: usize,
    /// Its frozen memtables waiting for flush.
    pub immutable_memtables: usize,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.tree.name)
            .field("id", &self.tree.id)
            .finish()
    }
}
