//! Where everything lives in the quietkv key space.
//!
//! The raft storage keeps to keys starting with `\x00raft/`, so an
//! application may share the database with keys of its own outside that
//! prefix:
//!
//! | key | value |
//! | --- | --- |
//! | `\x00raft/log/` + index (8 bytes, big-endian) | a log entry (JSON) |
//! | `\x00raft/meta/vote` | the vote (JSON) |
//! | `\x00raft/meta/committed` | the committed log id (JSON) |
//! | `\x00raft/meta/purged` | the last purged log id (JSON) |
//! | `\x00raft/meta/sm-generation` | the state machine's current generation (8 bytes, big-endian) |
//! | `\x00raft/sm/` + generation + `a` | applied log id and membership (JSON) |
//! | `\x00raft/sm/` + generation + `d` + key | the application's value of `key` |
//!
//! Big-endian numbers sort like the numbers, so log entries are in index
//! order and a range of indexes is a range of keys. The state machine's
//! data lives under a generation so that installing a snapshot can write a
//! whole new state beside the old one and switch to it with one write
//! (see [`crate::state_machine`]).

/// Every log entry's key starts with this.
pub const LOG_PREFIX: &[u8] = b"\x00raft/log/";
/// The vote.
pub const VOTE: &[u8] = b"\x00raft/meta/vote";
/// The committed log id.
pub const COMMITTED: &[u8] = b"\x00raft/meta/committed";
/// The last purged log id.
pub const PURGED: &[u8] = b"\x00raft/meta/purged";
/// The generation the state machine's data is read from.
pub const SM_GENERATION: &[u8] = b"\x00raft/meta/sm-generation";
/// Every state machine key starts with this.
pub const SM_PREFIX: &[u8] = b"\x00raft/sm/";

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

/// The first key of generation `generation` (every key of it starts with
/// this).
pub fn generation_prefix(generation: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(SM_PREFIX.len() + 8);
    k.extend_from_slice(SM_PREFIX);
    k.extend_from_slice(&generation.to_be_bytes());
    k
}

/// The key of the applied log id and membership of `generation`.
pub fn applied_key(generation: u64) -> Vec<u8> {
    let mut k = generation_prefix(generation);
    k.push(b'a');
    k
}

/// The prefix of every application key of `generation`.
pub fn data_prefix(generation: u64) -> Vec<u8> {
    let mut k = generation_prefix(generation);
    k.push(b'd');
    k
}

/// Where `generation` keeps the application's `key`.
pub fn data_key(generation: u64, key: &[u8]) -> Vec<u8> {
    let mut k = data_prefix(generation);
    k.extend_from_slice(key);
    k
}

/// Encodes a generation number as stored under [`SM_GENERATION`].
pub fn encode_generation(generation: u64) -> [u8; 8] {
    generation.to_be_bytes()
}

/// Decodes a generation number, or `None` if the value is not 8 bytes.
pub fn decode_generation(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.try_into().ok()?))
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
    fn generations_do_not_overlap_and_stay_inside_the_state_machine_prefix() {
        let a = data_key(1, b"zzz");
        let b = applied_key(2);
        assert!(a < b);
        assert!(a.starts_with(SM_PREFIX) && b.starts_with(SM_PREFIX));
        assert!(!data_key(1, b"x").starts_with(&generation_prefix(2)));
        assert!(!LOG_PREFIX.starts_with(SM_PREFIX) && !SM_PREFIX.starts_with(LOG_PREFIX));
        assert_eq!(decode_generation(&encode_generation(7)), Some(7));
        assert_eq!(decode_generation(b"abc"), None);
    }
}
