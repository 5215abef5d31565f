//! The user-facing iterator: a merged view of memtables and tables at one
//! sequence number, yielding the newest visible value of each key in order.

use std::sync::Arc;

use super::level_iter::LevelIter;
use super::{Inner, SuperVersion};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::SeqNo;
use crate::merge::{DbIterator, MergingIterator};

/// Ordered `(key, value)` pairs. Holds the state it was created from, so
/// the tables it reads are not deleted under it, and sees no later writes.
pub struct DbIter {
    inner: DbIterator<MergingIterator>,
    /// Keeps the memtables and the version alive while iterating.
    _sv: Arc<SuperVersion>,
    started: bool,
    failed: bool,
}

impl DbIter {
    pub(crate) fn new(
        db: &Arc<Inner>,
        sv: Arc<SuperVersion>,
        seq: SeqNo,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
    ) -> Result<DbIter> {
        let mut children: Vec<Box<dyn InternalIterator + Send>> = Vec::new();
        children.push(Box::new(sv.mem.iter()));
        for imm in &sv.imms {
            children.push(Box::new(imm.iter()));
        }
        // L0 newest first (highest file number), then one lazy iterator per level.
        let mut l0: Vec<_> = sv.version.files(0).to_vec();
        l0.sort_by_key(|f| std::cmp::Reverse(f.number));
        for f in l0 {
            children.push(Box::new(db.table_cache.get(&f)?.iter()));
        }
        for level in 1..crate::version::NUM_LEVELS {
            let files = sv.version.files(level);
            if !files.is_empty() {
                children.push(Box::new(LevelIter::new(
                    files.to_vec(),
                    db.table_cache.clone(),
                )));
            }
        }
        let mut inner =
            DbIterator::new(MergingIterator::new(children), seq, to.map(<[u8]>::to_vec));
        match from {
            Some(k) => inner.seek(k)?,
            None => inner.seek_to_first()?,
        }
        Ok(DbIter {
            inner,
            _sv: sv,
            started: false,
            failed: false,
        })
    }

    /// Repositions at the first key >= `key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.started = false;
        self.inner.seek(key)
    }
}

impl Iterator for DbIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.started {
            if let Err(e) = self.inner.next() {
                self.failed = true;
                return Some(Err(e));
            }
        }
        self.started = true;
        if !self.inner.valid() {
            return None;
        }
        Some(Ok((self.inner.key().to_vec(), self.inner.value().to_vec())))
    }
}
