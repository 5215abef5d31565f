//! Snapshots: a sequence number that compaction must keep readable, and
//! the read view a user holds at it.

use std::ops::RangeBounds;

use crate::db::iter::DbIter;
use crate::db::key_range::KeyRange;
use crate::db::read_view::ReadView;
use crate::error::Result;
use crate::key::SeqNo;
use crate::snapshot_list::Registration;
use crate::value::Value;

/// A consistent read view of a [`Db`](crate::Db), from
/// [`Db::snapshot`](crate::Db::snapshot): reads through it see the
/// database as it was when it was taken, whatever is written, flushed or
/// compacted since. Dropping it (its last clone) lets compaction discard
/// the old versions it kept.
///
/// A snapshot owns what it reads through (`'static`, `Send`, `Sync`,
/// cheap to clone): it can move into another thread or sit beside an
/// `Arc<Db>`. Reads through a snapshot still work after the `Db` is closed
/// (from the files as they were when it closed, as iterators do); the
/// directory lock is released at close as usual, and a table removed by
/// another process since then reads as an error, never as a wrong answer.
///
/// ```
/// # fn main() -> quietkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = quietkv::Db::open(dir.path(), quietkv::Options::default())?;
/// db.put(b"k", b"old")?;
/// let snap = db.snapshot();
/// db.put(b"k", b"new")?;
/// db.put(b"k2", b"x")?;
/// db.flush()?;
/// assert_eq!(snap.get(b"k")?, Some(b"old".to_vec()));
/// assert_eq!(snap.iter()?.count(), 1);
/// assert_eq!(db.get(b"k")?, Some(b"new".to_vec()));
/// // Owned: it moves into another thread.
/// let reader = std::thread::spawn(move || snap.get(b"k"));
/// assert_eq!(reader.join().unwrap()?, Some(b"old".to_vec()));
/// # Ok(())
/// # }
/// ```
pub struct Snapshot {
    view: ReadView,
    registration: Registration,
}

impl Snapshot {
    pub(crate) fn new(view: ReadView, registration: Registration) -> Self {
        Snapshot { view, registration }
    }

    /// What it reads the default keyspace through.
    pub(crate) fn view(&self) -> &ReadView {
        &self.view
    }

    /// The sequence number the snapshot reads at.
    pub(crate) fn seq(&self) -> SeqNo {
        self.registration.seq()
    }

    /// The keys of `range` as of the snapshot.
    pub(crate) fn iter_range(&self, range: KeyRange) -> Result<DbIter> {
        self.view.iter_at(range, self.seq())
    }

    /// The value of `key` when the snapshot was taken.
    ///
    /// # Errors
    ///
    /// As [`Db::get`](crate::Db::get).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.view.get_vec_at(key.as_ref(), self.seq())
    }

    /// The value of `key` when the snapshot was taken, read in place
    /// instead of copied; see [`Db::get_pinned`](crate::Db::get_pinned)
    /// and [`Value`] for what it keeps in memory.
    ///
    /// # Errors
    ///
    /// As [`Db::get`](crate::Db::get).
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        self.view.get_at(key.as_ref(), self.seq())
    }

    /// Every key, in order, as of the snapshot.
    ///
    /// # Errors
    ///
    /// As [`Db::get`](crate::Db::get), here and from the iterator's items.
    pub fn iter(&self) -> Result<DbIter> {
        self.view.iter_at(KeyRange::default(), self.seq())
    }

    /// The keys in `range`, as of the snapshot; see
    /// [`Db::range`](crate::Db::range).
    ///
    /// # Errors
    ///
    /// As [`Db::get`](crate::Db::get), here and from the iterator's items.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIter> {
        self.view.iter_at(KeyRange::from_bounds(&range), self.seq())
    }

    /// The keys starting with `prefix`, as of the snapshot.
    ///
    /// # Errors
    ///
    /// As [`Db::get`](crate::Db::get), here and from the iterator's items.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<DbIter> {
        self.view
            .iter_at(KeyRange::prefix(prefix.as_ref()), self.seq())
    }
}

impl Clone for Snapshot {
    /// Another handle on the same view; compaction keeps its versions
    /// until every clone is dropped.
    fn clone(&self) -> Self {
        Snapshot {
            view: self.view.clone(),
            registration: self.registration.acquire_again(),
        }
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot({})", self.seq())
    }
}
