//! Write conflicts: whether any of a set of keys, or any key in a set of
//! key ranges, was written after a sequence number. A transaction's commit
//! (and compare-and-swap) hands its keys and scanned ranges to the write
//! path as a [`Precondition`], checked by the write leader right before its
//! group is written, so no other write can land between the check and the
//! apply.

use super::key_range::KeyRange;
use super::precondition::Precondition;
use super::range_writes::{self, RangeWrite};
use super::read_view;
use super::state::Inner;
use crate::error::{Error, ErrorKind, Result};
use crate::key::SeqNo;

impl Precondition {
    /// `Conflict` naming the first key written after the snapshot; `Ok`
    /// if none was. The caller makes sure no write is applied meanwhile
    /// (the write leader does this for the whole check).
    pub(crate) fn check(&self, inner: &Inner) -> Result<()> {
        self.check_keys(inner)?;
        self.check_ranges(inner)
    }

    fn check_keys(&self, inner: &Inner) -> Result<()> {
        for key in &self.keys {
            let latest = read_view::latest_seq(&inner.super_version, &inner.table_cache, key)
                .map_err(|e| e.context("checking a transaction's keys for conflicts"))?;
            if let Some(seq) = latest.filter(|&s| s > self.snapshot) {
                return Err(conflict_error(key, seq, self.snapshot));
            }
        }
        if self.keyspace_keys.is_empty() {
            return Ok(());
        }
        let handles: Vec<_> = {
            let st = inner.state.lock();
            st.trees.iter().map(|t| t.handle.clone()).collect()
        };
        for (id, key) in &self.keyspace_keys {
            let Some(tree) = handles.iter().find(|h| h.id == *id) else {
                return Err(Error::invalid(format!(
                    "the transaction used keyspace {id}, which was dropped; nothing was applied"
                )));
            };
            let latest = read_view::latest_seq(&tree.super_version, &inner.table_cache, key)
                .map_err(|e| e.context("checking a transaction's keys for conflicts"))?;
            if let Some(seq) = latest.filter(|&s| s > self.snapshot) {
                return Err(conflict_error(key, seq, self.snapshot)
                    .context(&format!("in keyspace {:?}", tree.name)));
            }
        }
        Ok(())
    }

    /// `Conflict` naming the first write found after the snapshot in a
    /// range the writer scanned.
    fn check_ranges(&self, inner: &Inner) -> Result<()> {
        if self.ranges.is_empty() {
            return Ok(());
        }
        let handles: Vec<_> = {
            let st = inner.state.lock();
            st.trees.iter().map(|t| t.handle.clone()).collect()
        };
        for (id, range) in &self.ranges {
            let (name, super_version) = if *id == 0 {
                (None, &inner.super_version)
            } else {
                let Some(tree) = handles.iter().find(|h| h.id == *id) else {
                    return Err(Error::invalid(format!(
                        "the transaction used keyspace {id}, which was dropped; nothing was applied"
                    )));
                };
                (Some(&tree.name), &tree.super_version)
            };
            // One state for the whole range: a flush or compaction that
            // finishes meanwhile moves entries between sources, and reading
            // some sources before it and some after could miss them.
            let sv = super_version.read().clone();
            let found = range_writes::write_after(&sv, &inner.table_cache, range, self.snapshot)
                .map_err(|e| {
                    e.context("checking the key ranges a transaction scanned for conflicts")
                })?;
            if let Some(write) = found {
                let err = range_conflict_error(range, &write, self.snapshot);
                return Err(match name {
                    Some(name) => err.context(&format!("in keyspace {name:?}")),
                    None => err,
                });
            }
        }
        Ok(())
    }
}

/// Longest part of a key a conflict message shows.
const SHOWN_KEY_BYTES: usize = 64;

/// `key` quoted and escaped for a message, cut if long.
fn shown(key: &[u8]) -> String {
    let cut = &key[..key.len().min(SHOWN_KEY_BYTES)];
    let more = if key.len() > SHOWN_KEY_BYTES {
        format!("... ({} bytes)", key.len())
    } else {
        String::new()
    };
    format!("\"{}{more}\"", cut.escape_ascii())
}

fn conflict_error(key: &[u8], written: SeqNo, snapshot: SeqNo) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!(
            "key {} was written at sequence {written}, after the \
             transaction's snapshot at {snapshot}; nothing was applied",
            shown(key)
        ),
    )
}

/// `[lower, upper)` for a message; a missing end shows as `..`.
fn shown_range(range: &KeyRange) -> String {
    let lower = range.lower().map_or_else(|| "..".to_string(), shown);
    let upper = range.upper().map_or_else(|| "..".to_string(), shown);
    format!("[{lower}, {upper})")
}

fn range_conflict_error(scanned: &KeyRange, write: &RangeWrite, snapshot: SeqNo) -> Error {
    let what = match write {
        RangeWrite::Key { key, seq } => {
            format!("key {} was written at sequence {seq}", shown(key))
        }
        RangeWrite::RangeDelete { begin, end, seq } => format!(
            "a range delete of [{}, {}) was written at sequence {seq}",
            shown(begin),
            shown(end)
        ),
    };
    Error::new(
        ErrorKind::Conflict,
        format!(
            "{what}, inside the range {} the transaction scanned and after \
             its snapshot at {snapshot}; nothing was applied",
            shown_range(scanned)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_messages_name_the_key_readably_and_cut_long_ones() {
        let e = conflict_error(b"user:\x01", 9, 7);
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert_eq!(
            e.to_string(),
            "conflict: key \"user:\\x01\" was written at sequence 9, after the \
             transaction's snapshot at 7; nothing was applied"
        );
        let long = vec![b'a'; 100];
        let text = conflict_error(&long, 2, 1).to_string();
        assert!(
            text.contains(&format!("{}... (100 bytes)", "a".repeat(64))),
            "{text}"
        );
    }

    #[test]
    fn range_conflict_messages_name_the_write_and_the_range_scanned() {
        let scanned = KeyRange::prefix(b"user:7:");
        let put = RangeWrite::Key {
            key: b"user:7:s3".to_vec(),
            seq: 12,
        };
        let e = range_conflict_error(&scanned, &put, 10);
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert_eq!(
            e.to_string(),
            "conflict: key \"user:7:s3\" was written at sequence 12, inside the \
             range [\"user:7:\", \"user:7;\") the transaction scanned and after \
             its snapshot at 10; nothing was applied"
        );
        let del = RangeWrite::RangeDelete {
            begin: b"a".to_vec(),
            end: b"z".to_vec(),
            seq: 11,
        };
        let text = range_conflict_error(&KeyRange::default(), &del, 10).to_string();
        assert!(
            text.contains("a range delete of [\"a\", \"z\") was written at sequence 11"),
            "{text}"
        );
        assert!(text.contains("inside the range [.., ..)"), "{text}");
    }
}
