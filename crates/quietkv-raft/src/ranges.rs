//! Deleting a range of keys with batches of point deletes (quietkv has no
//! range delete yet): the log's truncate and purge, and dropping a state
//! machine generation.

use quietkv::{Db, WriteBatch, WriteOptions};

/// How many keys one delete batch removes: small enough that a batch stays
/// far below quietkv's batch limit, large enough that a long range costs
/// few writes.
const KEYS_PER_BATCH: usize = 1024;

/// Which end of a range [`delete_range`] deletes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Lowest keys first: a crash part way leaves the range's upper part.
    LowestFirst,
    /// Highest keys first: a crash part way leaves the range's lower part.
    HighestFirst,
}

/// Deletes every key in `[start, end)`, [`KEYS_PER_BATCH`] keys per write,
/// each write synced when `sync` is set, from the end `order` says. Returns
/// how many keys it deleted.
///
/// A crash part way leaves one end of the range deleted and the other not:
/// callers pick the end so that the leftover is harmless (a log truncated
/// from its end never has a hole) and finish it later.
///
/// # Errors
///
/// What quietkv returns for the scan or a write.
pub fn delete_range(
    db: &Db,
    start: &[u8],
    end: &[u8],
    order: Order,
    sync: bool,
) -> quietkv::Result<u64> {
    if order == Order::HighestFirst {
        return delete_from_end(db, start, end, sync);
    }
    let mut deleted = 0;
    let mut from = start.to_vec();
    loop {
        let mut batch = WriteBatch::new();
        let mut last = None;
        for item in db.range(&from[..]..end)?.take(KEYS_PER_BATCH) {
            let (key, _) = item?;
            batch.delete(&key)?;
            last = Some(key);
        }
        let Some(last) = last else {
            return Ok(deleted);
        };
        deleted += batch.len() as u64;
        db.write(batch, WriteOptions { sync })?;
        // Resume after the last key deleted rather than rescanning the
        // tombstones just written.
        from = last;
        from.push(0);
    }
}

/// [`delete_range`] from the highest key down.
fn delete_from_end(db: &Db, start: &[u8], end: &[u8], sync: bool) -> quietkv::Result<u64> {
    let mut deleted = 0;
    let mut to = end.to_vec();
    loop {
        let mut batch = WriteBatch::new();
        let mut last = None;
        for item in db.range(start..&to[..])?.rev().take(KEYS_PER_BATCH) {
            let (key, _) = item?;
            batch.delete(&key)?;
            last = Some(key);
        }
        let Some(last) = last else {
            return Ok(deleted);
        };
        deleted += batch.len() as u64;
        db.write(batch, WriteOptions { sync })?;
        // The range's exclusive end moves down to the lowest key deleted.
        to = last;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_exactly_the_range_across_several_batches() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), quietkv::Options::default()).unwrap();
        for i in 0..3000u32 {
            db.put(format!("k{i:05}"), b"v").unwrap();
        }
        let n = delete_range(&db, b"k00100", b"k01100", Order::LowestFirst, false).unwrap();
        assert_eq!(n, 1000);
        let n = delete_range(&db, b"k00100", b"k02600", Order::HighestFirst, false).unwrap();
        assert_eq!(n, 1500);
        let left: Vec<_> = db
            .iter()
            .unwrap()
            .map(|r| String::from_utf8(r.unwrap().0).unwrap())
            .collect();
        assert_eq!(left.len(), 500);
        assert_eq!(left[99], "k00099");
        assert_eq!(left[100], "k02600");
        for order in [Order::LowestFirst, Order::HighestFirst] {
            assert_eq!(
                delete_range(&db, b"k00100", b"k02600", order, true).unwrap(),
                0
            );
        }
    }
}
