//! Where everything lives in the two quietkv databases of a node.
//!
//! The **log database** (`<dir>/log`) holds the raft log and what raft
//! itself must remember; the **state machine database**
//! (`<dir>/sm-<generation>`) holds the application's state and nothing of
//! the log, so that a checkpoint of it is exactly a snapshot:
//!
//! | database | key | value |
//! | --- | --- | --- |
//! | log | `\x00raft/log/` + index (8 bytes, big-endian) | a log entry (JSON) |
//! | log | `\x00raft/meta/vote` | the vote (JSON) |
//! | log | `\x00raft/meta/committed` | the committed log id (JSON) |
//! | log | `\x00raft/meta/purged` | the last purged log id (JSON) |
//! | state | `\x00raft/sm/applied` | applied log id and membership (JSON) |
//! | state | `\x00raft/sm/d` + key | the application's value of `key` |
//!
//! Big-endian numbers sort like the numbers, so log entries are in index
//! order and a range of indexes is a range of keys.

/// Every log entry's key starts with this.
pub const LOG_PREFIX: &[u8] = b"\x00raft/log/";
/// The vote.
pub const VOTE: &[u8] = b"\x00raft/meta/vote";
/// The committed log id.
pub const COMMITTED: &[u8] = b"\x00raft/meta/committed";
/// The last purged log id.
pub const PURGED: &[u8] = b"\x00raft/meta/purged";
/// The applied log id and membership, in the state machine database.
pub const APPLIED: &[u8] = b"\x00raft/sm/applied";
/// Every application key in the state machine database starts with this.
pub const DATA_PREFIX: &[u8] = b"\x00raft/sm/d";

/// The key of the log entry at `index`.
pub fn log_key(index: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(LOG_PREFIX.len() + 8);
    k.extend_from_slice(LOG_PREFIX);
    k.extend_from_slice(&index.to_be_bytes());
    k
}

/// The index a log entry's key names, or `None` for a key that is not one.
pub fn log_index(key: &[u8]) -> Option<u64> {
    let rest = key.strip_prefix(LOG_PREFIX)?;
    Some(u64::from_be_bytes(rest.try_into().ok()?))
}

/// Where the state machine database keeps the application's `key`.
pub fn data_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(DATA_PREFIX.len() + key.len());
    k.extend_from_slice(DATA_PREFIX);
    k.extend_from_slice(key);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keys_sort_like_their_indexes_and_decode_back() {
        let idx = [0u64, 1, 255, 256, 70_000, u64::MAX];
        let keys: Vec<_> = idx.iter().map(|&i| log_key(i)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        for (k, i) in keys.iter().zip(idx) {
            assert_eq!(log_index(k), Some(i));
        }
        assert_eq!(log_index(b"\x00raft/log/short"), None);
        assert_eq!(log_index(VOTE), None);
    }

    #[test]
    fn the_applied_state_is_not_an_application_key() {
        assert!(!APPLIED.starts_with(DATA_PREFIX));
        assert!(data_key(b"k").starts_with(DATA_PREFIX));
    }
}
