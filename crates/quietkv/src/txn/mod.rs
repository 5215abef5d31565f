//! Optimistic transactions with snapshot isolation: a [`Transaction`]
//! reads its snapshot with its own writes laid over, and its commit
//! applies every write as one batch only if nobody wrote, since the
//! snapshot, a key it read or wrote or any key in a range its iterators
//! covered. Compare-and-swap is built on the same check (see `cas`).

mod cas;
mod iter;
mod read_set;
mod scanned;
mod write_set;

use std::collections::{BTreeMap, BTreeSet};

use parking_lot::Mutex;
use std::ops::RangeBounds;
use std::sync::Arc;

use crate::db::state::Inner;
use crate::db::{write_checked, Db, KeyRange, Precondition};
use crate::error::Result;
use crate::keyspace::Keyspace;
use crate::options::WriteOptions;
use crate::snapshot::Snapshot;
use crate::value::Value;
pub use cas::CasMismatch;
pub use iter::TxnIter;
use read_set::ReadSet;
use write_set::WriteSet;

/// An optimistic transaction, from [`Db::transaction`].
///
/// Reads ([`get`](Self::get), [`iter`](Self::iter), [`range`](Self::range),
/// [`prefix`](Self::prefix)) see the database as it was when the
/// transaction began, with the transaction's own [`put`](Self::put)s and
/// [`delete`](Self::delete)s laid over it. Writes are held in memory until
/// [`commit`](Self::commit), which applies them all atomically as one
/// [`WriteBatch`](crate::WriteBatch) through the normal write path (WAL,
/// group commit, the same durability), or none of them.
///
/// # Conflicts
///
/// The commit fails with [`ErrorKind::Conflict`](crate::ErrorKind::Conflict)
/// if, since the transaction began, anyone (another transaction, a plain
/// [`Db::put`], [`Db::delete`], [`Db::delete_range`], [`Db::write`] or
/// [`Db::compare_and_swap`]) wrote
///
/// - a key the transaction read with `get` (found or not),
/// - a key the transaction wrote itself, or
/// - any key in the part of a range that one of its iterators covered,
///   whether the key existed at the snapshot or not: a key inserted into a
///   scanned range (a *phantom*), deleted from it or range-deleted over it
///   is a conflict.
///
/// An iterator covers its range from the start through the last key
/// `next` returned (that key included), and from the last key `next_back`
/// returned through the end; once it has returned `None` it covers its
/// whole range (for [`prefix`](Self::prefix), every key with the prefix).
/// An iterator dropped early covers only what it returned: a key written
/// beyond where it stopped is no conflict, nor is one in another keyspace
/// than the one it read. The transaction's own writes in a covered range
/// are no conflict with themselves.
///
/// (The keys read are kept in memory until the transaction ends, so a long
/// scan costs memory for each key it returned from the snapshot; a covered
/// range costs its two ends. At commit each covered range is read again in
/// the memtables and tables that hold a write newer than the snapshot,
/// every version in the range there, while writers behind the commit wait:
/// cheap when little was written since, proportional to the size of the
/// range in the newer sources otherwise.)
///
/// The check and the apply happen together in the write path, so no write
/// lands in between. On a conflict nothing is applied; run the whole
/// transaction again (a new one sees the newer state). Two transactions that
/// each read `x` and `y` and write one of them cannot both commit, so write
/// skew on keys read is prevented; and as a scan's range is checked too,
/// so is write skew through a phantom: two transactions that each count the
/// keys with a prefix and insert one if there are fewer than `n` cannot
/// both commit, so the prefix never ends up with more than `n`.
///
/// Dropping a transaction (or [`rollback`](Self::rollback)) discards its
/// writes. It is `Send` and owns what it reads through, like a
/// [`Snapshot`], which it holds until it ends: keep transactions short, as
/// compaction keeps the versions a live snapshot can see.
///
/// ```
/// # fn main() -> quietkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// use quietkv::{Db, ErrorKind, Options};
/// let db = Db::open(dir.path(), Options::default())?;
/// db.put(b"alice", b"10")?;
/// db.put(b"bob", b"0")?;
///
/// // Move 3 from alice to bob, retrying if someone else got in between.
/// loop {
///     let mut txn = db.transaction();
///     let read = |k: &[u8]| -> quietkv::Result<u64> {
///         let v = txn.get(k)?.unwrap_or_default();
///         Ok(String::from_utf8_lossy(&v).parse().unwrap_or(0))
///     };
///     let (a, b) = (read(b"alice")?, read(b"bob")?);
///     txn.put(b"alice", (a - 3).to_string())?;
///     txn.put(b"bob", (b + 3).to_string())?;
///     // The transaction reads its own writes.
///     assert_eq!(txn.get(b"bob")?, Some(b"3".to_vec()));
///     match txn.commit() {
///         Ok(()) => break,
///         Err(e) if e.kind() == ErrorKind::Conflict => continue,
///         Err(e) => return Err(e),
///     }
/// }
/// assert_eq!(db.get(b"alice")?, Some(b"7".to_vec()));
///
/// // A plain write to a key the transaction read makes its commit fail.
/// let mut txn = db.transaction();
/// txn.get(b"bob")?;
/// txn.put(b"carol", b"1")?;
/// db.put(b"bob", b"100")?;
/// assert_eq!(txn.commit().unwrap_err().kind(), ErrorKind::Conflict);
/// assert_eq!(db.get(b"carol")?, None); // nothing applied
///
/// // So does a key inserted into a range the transaction scanned.
/// db.put(b"session:u1:a", b"")?;
/// let mut txn = db.transaction();
/// let sessions = txn.prefix(b"session:u1:")?.count();
/// if sessions < 2 {
///     txn.put(b"session:u1:b", b"")?;
/// }
/// db.put(b"session:u1:c", b"")?; // someone else got in first
/// assert_eq!(txn.commit().unwrap_err().kind(), ErrorKind::Conflict);
/// # Ok(())
/// # }
/// ```
///
/// # Keyspaces
///
/// [`get_in`](Self::get_in), [`iter_in`](Self::iter_in) (and
/// `range_in`, `prefix_in`), [`put_in`](Self::put_in) and
/// [`delete_in`](Self::delete_in) read and write other keyspaces in the
/// same transaction: the commit applies the writes of every keyspace as
/// one batch, and conflicts are per keyspace and key (a write of key `k`
/// in one keyspace does not conflict with a read of `k` in another, nor
/// with a scan over `k` in another).
pub struct Transaction {
    inner: Arc<Inner>,
    snapshot: Snapshot,
    writes: WriteSet,
    reads: ReadSet,
    /// Other keyspaces' pending writes, by keyspace id.
    writes_in: BTreeMap<u32, (Keyspace, WriteSet)>,
    /// Other keyspaces' keys read, by keyspace id.
    reads_in: Mutex<BTreeMap<u32, Arc<ReadSet>>>,
}

impl Db {
    /// Begins an optimistic [`Transaction`] at the current state.
    /// Nothing is locked: it only takes a snapshot.
    pub fn transaction(&self) -> Transaction {
        Transaction {
            inner: self.inner().clone(),
            snapshot: self.snapshot(),
            writes: WriteSet::default(),
            reads: ReadSet::default(),
            writes_in: BTreeMap::new(),
            reads_in: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Transaction {
    /// The value of `key` as the transaction sees it: its own write if it
    /// wrote the key, else the value when it began. A key read from the
    /// snapshot (even one that is absent) joins the read set.
    ///
    /// # Errors
    ///
    /// As [`Db::get`].
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if let Some(pending) = self.writes.get(key) {
            return Ok(pending.map(<[u8]>::to_vec));
        }
        let value = self.snapshot.get(key)?;
        self.reads.record(key);
        Ok(value)
    }

    /// Like [`get`](Self::get), with the value read in place instead of
    /// copied where it comes from the snapshot (see
    /// [`Db::get_pinned`](crate::Db::get_pinned) and [`Value`] for what it
    /// keeps in memory); the transaction's own write is returned as a copy
    /// that pins nothing. The key joins the read set as with `get`.
    ///
    /// # Errors
    ///
    /// As [`Db::get`].
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        let key = key.as_ref();
        if let Some(pending) = self.writes.get(key) {
            return Ok(pending.map(Value::from));
        }
        let value = self.snapshot.get_pinned(key)?;
        self.reads.record(key);
        Ok(value)
    }

    /// Every key in order, as the transaction sees it (double-ended).
    ///
    /// # Errors
    ///
    /// As [`Db::get`], here and from the iterator's items.
    pub fn iter(&self) -> Result<TxnIter<'_>> {
        self.iter_range(KeyRange::default())
    }

    /// The keys in `range`, as the transaction sees them; see
    /// [`Db::range`].
    ///
    /// # Errors
    ///
    /// As [`Db::get`], here and from the iterator's items.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<TxnIter<'_>> {
        self.iter_range(KeyRange::from_bounds(&range))
    }

    /// The keys starting with `prefix`, as the transaction sees them.
    ///
    /// # Errors
    ///
    /// As [`Db::get`], here and from the iterator's items.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<TxnIter<'_>> {
        self.iter_range(KeyRange::prefix(prefix.as_ref()))
    }

    fn iter_range(&self, range: KeyRange) -> Result<TxnIter<'_>> {
        let snapshot = self.snapshot.iter_range(range.clone())?;
        let pending = self.writes.range(&range);
        Ok(TxnIter::new(snapshot, pending, &self.reads, range))
    }

    /// Sets `key` to `value` in the transaction; applied at commit.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a key longer than
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) or a value longer than
    /// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN); the transaction is then
    /// unchanged.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.writes.put(key.as_ref(), value.as_ref())
    }

    /// Deletes `key` in the transaction; applied at commit.
    ///
    /// # Errors
    ///
    /// As [`Transaction::put`].
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.writes.delete(key.as_ref())
    }

    /// Applies every write of the transaction atomically (not synced; see
    /// [`commit_with`](Self::commit_with)), or none if it conflicts.
    ///
    /// # Errors
    ///
    /// [`Conflict`](crate::ErrorKind::Conflict), naming the key (and the
    /// range scanned, for a key in one), if a key the transaction read or
    /// wrote, or a key in a range its iterators covered (see
    /// [`Transaction`]), was written by anyone since it began; nothing is
    /// applied. `InvalidArgument` if its writes together
    /// exceed [`MAX_BATCH_LEN`](crate::MAX_BATCH_LEN); `ReadOnly` if it
    /// writes to a database opened read-only; `Closed` if the database was
    /// closed; otherwise as [`Db::write`] (and as [`Db::get`] for the
    /// reads the check makes).
    pub fn commit(self) -> Result<()> {
        self.commit_with(WriteOptions::default())
    }

    /// [`commit`](Self::commit) with write options (`sync: true` makes the
    /// commit durable before it returns, as for [`Db::write`]).
    ///
    /// # Errors
    ///
    /// As [`Transaction::commit`].
    pub fn commit_with(self, opts: WriteOptions) -> Result<()> {
        let Transaction {
            inner,
            snapshot,
            writes,
            reads,
            writes_in,
            reads_in,
        } = self;
        let (read_keys, scanned) = reads.into_parts();
        let mut ranges: Vec<(u32, KeyRange)> = scanned.into_iter().map(|r| (0, r)).collect();
        let mut keyspace_keys: BTreeSet<(u32, Vec<u8>)> = BTreeSet::new();
        // By keyspace id, so the ranges come out sorted by keyspace too.
        for (id, r) in reads_in.into_inner() {
            let (keys, scanned) = r.parts();
            keyspace_keys.extend(keys.into_iter().map(|k| (id, k)));
            ranges.extend(scanned.into_iter().map(|r| (id, r)));
        }
        let no_writes = writes.is_empty() && writes_in.values().all(|(_, w)| w.is_empty());
        let no_reads = read_keys.is_empty() && keyspace_keys.is_empty() && ranges.is_empty();
        if no_writes && (no_reads || inner.read_only) {
            // Nothing to check against: no reads, or nobody can write.
            return Ok(());
        }
        let mut batch = writes.to_batch()?;
        for (id, (ks, w)) in &writes_in {
            ks.live()?;
            for (key, value) in w.iter() {
                match value {
                    Some(v) => batch.put_scoped(*id, key, v)?,
                    None => batch.delete_scoped(*id, key)?,
                }
                keyspace_keys.insert((*id, key.clone()));
            }
        }
        let mut keys: BTreeSet<Vec<u8>> = read_keys;
        keys.extend(writes.keys().cloned());
        let check = Precondition {
            snapshot: snapshot.seq(),
            keys: keys.into_iter().collect(),
            keyspace_keys: keyspace_keys.into_iter().collect(),
            ranges,
        };
        let result = write_checked(&inner, batch, opts.sync, check);
        // The snapshot stays registered until the check is done, so
        // compaction could not drop a version newer than it.
        drop(snapshot);
        result
    }

    /// The value of `key` in keyspace `ks` as the transaction sees it: its
    /// own write if it wrote the key there, else the value when it began.
    /// The (keyspace, key) joins the read set.
    ///
    /// # Errors
    ///
    /// As [`Snapshot::get_in`].
    pub fn get_in(&self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if ks.id() == 0 {
            ks.check_db(&self.inner)?;
            return self.get(key);
        }
        if let Some(pending) = self.pending_in(ks, key) {
            return Ok(pending.map(<[u8]>::to_vec));
        }
        let value = self.snapshot.get_in(ks, key)?;
        self.reads_of(ks).record(key);
        Ok(value)
    }

    /// [`get_in`](Self::get_in), with the value read in place where it
    /// comes from the snapshot.
    ///
    /// # Errors
    ///
    /// As [`Snapshot::get_in`].
    pub fn get_pinned_in(&self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        let key = key.as_ref();
        if ks.id() == 0 {
            ks.check_db(&self.inner)?;
            return self.get_pinned(key);
        }
        if let Some(pending) = self.pending_in(ks, key) {
            return Ok(pending.map(Value::from));
        }
        let value = self.snapshot.get_pinned_in(ks, key)?;
        self.reads_of(ks).record(key);
        Ok(value)
    }

    /// Every key of keyspace `ks` in order, as the transaction sees it
    /// (its own writes there laid over its snapshot); the keys returned
    /// from the snapshot and the part of `ks` covered join the read set,
    /// as with [`iter`](Self::iter).
    ///
    /// # Errors
    ///
    /// As [`Snapshot::get_in`], here and from the iterator's items.
    pub fn iter_in(&self, ks: &Keyspace) -> Result<TxnIter<'_>> {
        self.iter_range_in(ks, KeyRange::default())
    }

    /// The keys of keyspace `ks` in `range`, as the transaction sees them.
    ///
    /// # Errors
    ///
    /// As [`Transaction::iter_in`].
    pub fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        ks: &Keyspace,
        range: R,
    ) -> Result<TxnIter<'_>> {
        self.iter_range_in(ks, KeyRange::from_bounds(&range))
    }

    /// The keys of keyspace `ks` starting with `prefix`, as the
    /// transaction sees them.
    ///
    /// # Errors
    ///
    /// As [`Transaction::iter_in`].
    pub fn prefix_in(&self, ks: &Keyspace, prefix: impl AsRef<[u8]>) -> Result<TxnIter<'_>> {
        self.iter_range_in(ks, KeyRange::prefix(prefix.as_ref()))
    }

    fn iter_range_in(&self, ks: &Keyspace, range: KeyRange) -> Result<TxnIter<'_>> {
        if ks.id() == 0 {
            ks.check_db(&self.inner)?;
            return self.iter_range(range);
        }
        let snapshot = self.snapshot.range_in_keys(ks, range.clone())?;
        let pending = match self.writes_in.get(&ks.id()) {
            Some((_, w)) => w.range(&range),
            None => None.into_iter().flatten(),
        };
        Ok(TxnIter::new_shared(
            snapshot,
            pending,
            self.reads_of(ks),
            range,
        ))
    }

    /// Keyspace `ks`'s read set.
    fn reads_of(&self, ks: &Keyspace) -> Arc<ReadSet> {
        self.reads_in.lock().entry(ks.id()).or_default().clone()
    }

    fn pending_in(&self, ks: &Keyspace, key: &[u8]) -> Option<Option<&[u8]>> {
        self.writes_in.get(&ks.id()).and_then(|(_, w)| w.get(key))
    }

    /// Sets `key` to `value` in keyspace `ks`; applied at commit.
    ///
    /// # Errors
    ///
    /// As [`Transaction::put`]; `InvalidArgument` if `ks` was dropped or
    /// is another database's.
    pub fn put_in(
        &mut self,
        ks: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        ks.check_db(&self.inner)?;
        ks.live()?;
        if ks.id() == 0 {
            return self.put(key, value);
        }
        let entry = self.writes_in.entry(ks.id());
        let (_, w) = entry.or_insert_with(|| (ks.clone(), WriteSet::default()));
        w.put(key.as_ref(), value.as_ref())
    }

    /// Deletes `key` in keyspace `ks`; applied at commit.
    ///
    /// # Errors
    ///
    /// As [`Transaction::put_in`].
    pub fn delete_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        ks.check_db(&self.inner)?;
        ks.live()?;
        if ks.id() == 0 {
            return self.delete(key);
        }
        let entry = self.writes_in.entry(ks.id());
        let (_, w) = entry.or_insert_with(|| (ks.clone(), WriteSet::default()));
        w.delete(key.as_ref())
    }

    /// Discards the transaction and its writes (as dropping it does).
    pub fn rollback(self) {}
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("snapshot", &self.snapshot.seq())
            .field("writes", &self.writes.len())
            .field("reads", &self.reads.len())
            .finish()
    }
}
