//! Write conflicts: whether any of a set of keys was written after a
//! sequence number. A transaction's commit (and compare-and-swap) hands its
//! keys to the write path as a [`Precondition`], checked by the write
//! leader right before its group is written, so no other write can land
//! between the check and the apply.

use super::precondition::Precondition;
use super::read_view;
use super::state::Inner;
use crate::error::{Error, ErrorKind, Result};
use crate::key::SeqNo;

impl Precondition {
    /// `Conflict` naming the first key written after the snapshot; `Ok`
    /// if none was. The caller makes sure no write is applied meanwhile
    /// (the write leader does this for the whole check).
    pub(crate) fn check(&self, inner: &Inner) -> Result<()> {
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
}

/// Longest part of a key a conflict message shows.
const SHOWN_KEY_BYTES: usize = 64;

fn conflict_error(key: &[u8], written: SeqNo, snapshot: SeqNo) -> Error {
    let shown = &key[..key.len().min(SHOWN_KEY_BYTES)];
    let more = if key.len() > SHOWN_KEY_BYTES {
        format!("... ({} bytes)", key.len())
    } else {
        String::new()
    };
    Error::new(
        ErrorKind::Conflict,
        format!(
            "key \"{}{more}\" was written at sequence {written}, after the \
             transaction's snapshot at {snapshot}; nothing was applied",
            shown.escape_ascii()
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
}
