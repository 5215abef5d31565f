//! Internal keys: a user key plus an 8-byte trailer holding the sequence
//! number and the kind of entry.
//!
//! Encoded form: `user_key ++ (seq << 8 | kind).to_le_bytes()`. Ordering is
//! user key ascending, then trailer *descending*, so for one user key the
//! newest entry comes first and a seek to `(key, snapshot)` lands on the
//! newest entry visible at that snapshot.

use std::cmp::Ordering;

use crate::error::{Error, Result};

pub type SeqNo = u64;

/// Sequence numbers use 56 bits; the low byte of the trailer is the kind.
pub const MAX_SEQ: SeqNo = (1 << 56) - 1;

pub const TRAILER_LEN: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ValueKind {
    Delete = 0,
    Put = 1,
    /// A range tombstone: its internal key is the range's first user key,
    /// its value the range's end (exclusive). Never stored among point
    /// entries: memtables and tables keep range tombstones apart.
    RangeDelete = 2,
}

impl ValueKind {
    /// The largest kind: used in seek keys so the seek lands before every
    /// entry with the same sequence number.
    pub const MAX: ValueKind = ValueKind::RangeDelete;

    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::RangeDelete),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
}

pub fn pack_trailer(seq: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQ);
    (seq << 8) | kind as u64
}

/// Appends the encoded internal key to `out`.
pub fn append_internal_key(out: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    out.reserve(user_key.len() + TRAILER_LEN);
    out.extend_from_slice(user_key);
    out.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

pub fn make_internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind);
    v
}

/// The key to seek to for the newest version of `user_key` visible at `snapshot`.
pub fn seek_key(user_key: &[u8], snapshot: SeqNo) -> Vec<u8> {
    make_internal_key(user_key, snapshot, ValueKind::MAX)
}

/// How long a point read's seek key may be and still stay on the stack:
/// user keys up to 56 bytes, which covers most keys people use.
const INLINE_SEEK_KEY: usize = 64;

/// The key a point read seeks to in a table (see [`seek_key`]), built
/// without a heap allocation for short user keys: a get probes one table
/// per level, and each probe would otherwise allocate and free its own.
pub struct SeekKey {
    inline: [u8; INLINE_SEEK_KEY],
    len: usize,
    /// Used only for a user key too long for `inline`.
    heap: Vec<u8>,
}

impl SeekKey {
    pub fn new(user_key: &[u8], snapshot: SeqNo) -> SeekKey {
        let len = user_key.len() + TRAILER_LEN;
        let trailer = pack_trailer(snapshot, ValueKind::MAX).to_le_bytes();
        let mut key = SeekKey {
            inline: [0; INLINE_SEEK_KEY],
            len,
            heap: Vec::new(),
        };
        if len <= INLINE_SEEK_KEY {
            key.inline[..user_key.len()].copy_from_slice(user_key);
            key.inline[user_key.len()..len].copy_from_slice(&trailer);
        } else {
            key.heap = seek_key(user_key, snapshot);
        }
        key
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.len <= INLINE_SEEK_KEY {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }
}

/// Parses an internal key; bytes from disk that are too short or carry an
/// unknown kind are corruption, never a panic.
pub fn parse_internal_key(ikey: &[u8]) -> Result<ParsedKey<'_>> {
    if ikey.len() < TRAILER_LEN {
        return Err(Error::corruption(format!(
            "internal key of {} bytes is shorter than its {TRAILER_LEN}-byte trailer",
            ikey.len()
        )));
    }
    let (user_key, trailer) = ikey.split_at(ikey.len() - TRAILER_LEN);
    let t = u64::from_le_bytes(trailer.try_into().expect("8 bytes"));
    let kind = ValueKind::from_u8((t & 0xff) as u8)
        .ok_or_else(|| Error::corruption(format!("internal key has unknown kind {}", t & 0xff)))?;
    Ok(ParsedKey {
        user_key,
        seq: t >> 8,
        kind,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short,
/// so comparisons of damaged keys stay total instead of panicking).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    if ikey.len() < TRAILER_LEN {
        ikey
    } else {
        &ikey[..ikey.len() - TRAILER_LEN]
    }
}

fn trailer(ikey: &[u8]) -> u64 {
    if ikey.len() < TRAILER_LEN {
        0
    } else {
        u64::from_le_bytes(
            ikey[ikey.len() - TRAILER_LEN..]
                .try_into()
                .expect("8 bytes"),
        )
    }
}

/// Total order on encoded internal keys: user key ascending, trailer descending.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| trailer(b).cmp(&trailer(a)))
}

/// An owned internal key whose `Ord` is [`compare_internal`]; the key of
/// the ordered-map models tests check the engine against.
#[cfg(test)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct InternalKey(pub Vec<u8>);

#[cfg(test)]
impl InternalKey {
    pub fn new(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Self {
        InternalKey(make_internal_key(user_key, seq, kind))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }
}

#[cfg(test)]
impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

#[cfg(test)]
impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
impl std::fmt::Debug for InternalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match parse_internal_key(&self.0) {
            Ok(p) => write!(
                f,
                "{:?}@{}:{:?}",
                String::from_utf8_lossy(p.user_key),
                p.seq,
                p.kind
            ),
            Err(_) => write!(f, "<bad key {:?}>", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first() {
        let old = make_internal_key(b"k", 5, ValueKind::Put);
        let new = make_internal_key(b"k", 9, ValueKind::Delete);
        assert_eq!(compare_internal(&new, &old), Ordering::Less);
        for len in [
            0,
            1,
            16,
            INLINE_SEEK_KEY - TRAILER_LEN,
            INLINE_SEEK_KEY - TRAILER_LEN + 1,
            300,
        ] {
            let user_key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for snapshot in [0, 7, MAX_SEQ] {
                assert_eq!(
                    SeekKey::new(&user_key, snapshot).as_slice(),
                    &seek_key(&user_key, snapshot)[..],
                    "user key of {len} bytes at {snapshot}"
                );
            }
        }
        let seek = seek_key(b"k", 9);
        assert_ne!(compare_internal(&seek, &new), Ordering::Greater);
        let seek = seek_key(b"k", 6);
        assert_eq!(compare_internal(&seek, &new), Ordering::Greater);
        assert_eq!(compare_internal(&seek, &old), Ordering::Less);
    }

    #[test]
    fn user_key_order_dominates_and_prefixes_work() {
        let a = make_internal_key(b"ab", 1, ValueKind::Put);
        let b = make_internal_key(b"abc", 100, ValueKind::Put);
        assert_eq!(compare_internal(&a, &b), Ordering::Less);
    }

    #[test]
    fn parse_rejects_bad_bytes() {
        assert!(parse_internal_key(b"short").is_err());
        let mut k = make_internal_key(b"k", 1, ValueKind::Put);
        let n = k.len();
        k[n - 8] = 3;
        assert!(parse_internal_key(&k).is_err());
        let k = make_internal_key(b"key", 42, ValueKind::Delete);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"key"[..], 42, ValueKind::Delete)
        );
    }
}
