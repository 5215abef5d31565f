//! Single-key atomic updates without a transaction object:
//! [`Db::compare_and_swap`] and [`Db::fetch_update`]. Each reads the key at
//! a snapshot, then writes with the same commit check as a transaction
//! (the key unwritten since that snapshot), and reads again if someone got
//! in between, so no mutex outside the store is needed.

use crate::batch::WriteBatch;
use crate::db::{write_checked, Db, Precondition};
use crate::error::{ErrorKind, Result};

/// What [`Db::compare_and_swap`] found instead of the expected value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasMismatch {
    /// The key's value when it was compared (`None`: absent).
    pub current: Option<Vec<u8>>,
}

impl std::fmt::Display for CasMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.current {
            Some(v) => write!(
                f,
                "compare-and-swap: the key holds a different value ({} bytes)",
                v.len()
            ),
            None => f.write_str("compare-and-swap: the key is absent"),
        }
    }
}

impl std::error::Error for CasMismatch {}

/// The write of `new` to `key`: a put, or a delete for `None`.
fn batch_for(key: &[u8], new: Option<&[u8]>) -> Result<WriteBatch> {
    let mut batch = WriteBatch::with_capacity(key.len() + new.map_or(0, <[u8]>::len) + 16);
    match new {
        Some(value) => batch.put(key, value)?,
        None => batch.delete(key)?,
    }
    Ok(batch)
}

impl Db {
    /// Sets `key` to `new` if its value is `expected`, atomically with
    /// respect to every other write; `None` as `expected` means "absent",
    /// `None` as `new` deletes the key. Not synced, like [`Db::put`].
    ///
    /// Returns `Ok(Ok(()))` if it swapped, and `Ok(Err(mismatch))` if the
    /// value was not `expected`, with the value it found in
    /// [`CasMismatch::current`] (so a retry loop needs no extra read). It
    /// writes even when `new` equals the current value.
    ///
    /// ```
    /// # fn main() -> quietkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = quietkv::Db::open(dir.path(), quietkv::Options::default())?;
    /// // Create only if absent.
    /// assert!(db.compare_and_swap(b"lock", None, Some(b"owner-1".as_slice()))?.is_ok());
    /// let taken = db.compare_and_swap(b"lock", None, Some(b"owner-2".as_slice()))?;
    /// assert_eq!(taken.unwrap_err().current, Some(b"owner-1".to_vec()));
    /// // Release (delete) only if still ours.
    /// assert!(db.compare_and_swap(b"lock", Some(b"owner-1".as_slice()), None)?.is_ok());
    /// assert_eq!(db.get(b"lock")?, None);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Db::put`] (the outer `Result`); a mismatch is not an error of
    /// the store but the inner `Err`.
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<std::result::Result<(), CasMismatch>> {
        let key = key.as_ref();
        let batch = batch_for(key, new)?;
        loop {
            let snapshot = self.snapshot();
            let current = snapshot.get(key)?;
            if current.as_deref() != expected {
                return Ok(Err(CasMismatch { current }));
            }
            if self.write_unless_changed(key, batch.clone(), snapshot.seq())? {
                return Ok(Ok(()));
            }
            // Written by someone else since the read: compare again.
        }
    }

    /// Replaces the value of `key` with `f(current)` atomically with
    /// respect to every other write (`None` in or out: absent or delete),
    /// and returns the value it replaced. Not synced, like [`Db::put`].
    ///
    /// `f` may be called more than once: when another write to the key
    /// lands between the read and the write, it is called again with the
    /// newer value. Keep it free of side effects.
    ///
    /// ```
    /// # fn main() -> quietkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = quietkv::Db::open(dir.path(), quietkv::Options::default())?;
    /// let incr = |v: Option<&[u8]>| {
    ///     let n = v.map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
    ///     Some((n + 1).to_le_bytes().to_vec())
    /// };
    /// assert_eq!(db.fetch_update(b"hits", incr)?, None);
    /// assert_eq!(db.fetch_update(b"hits", incr)?, Some(1u64.to_le_bytes().to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Db::put`], also for a new value over
    /// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN).
    pub fn fetch_update<F>(&self, key: impl AsRef<[u8]>, mut f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let key = key.as_ref();
        crate::batch::check_key(key)?;
        loop {
            let snapshot = self.snapshot();
            let current = snapshot.get(key)?;
            let new = f(current.as_deref());
            let batch = batch_for(key, new.as_deref())?;
            if self.write_unless_changed(key, batch, snapshot.seq())? {
                return Ok(current);
            }
        }
    }

    /// Writes `batch` if nobody wrote `key` after sequence number `seq`:
    /// `Ok(false)` if somebody did. The caller holds a snapshot at `seq`
    /// until this returns, so compaction keeps every newer version.
    fn write_unless_changed(&self, key: &[u8], batch: WriteBatch, seq: u64) -> Result<bool> {
        let check = Precondition {
            snapshot: seq,
            keys: vec![key.to_vec()],
            keyspace_keys: Vec::new(),
            ranges: Vec::new(),
        };
        match write_checked(self.inner(), batch, false, check) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::Conflict => Ok(false),
            Err(e) => Err(e),
        }
    }
}
