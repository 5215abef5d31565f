//! `WriteBatch`: a group of puts and deletes applied atomically, kept in
//! the encoded form that goes into one WAL record.
//!
//! # Encoding
//!
//! ```text
//! seq: u64 LE | count: u32 LE | entry * count
//! entry = kind: u8 (0 = Delete, 1 = Put, 2 = RangeDelete)
//!         | varint32 key_len | key
//!         [ | varint32 value_len | value ]   (Put and RangeDelete)
//!       | 16: u8 | varint32 keyspace_id       (keyspace marker)
//! ```
//!
//! A keyspace marker is not an operation (`count` does not include it and
//! it takes no sequence number): the entries after it, up to the next
//! marker, belong to keyspace `keyspace_id`; those before the first marker
//! to the default keyspace (0). A batch that writes only the default
//! keyspace has no marker, so it is encoded as before keyspaces existed;
//! a build that does not know markers refuses one as an unknown kind.
//!
//! A RangeDelete entry deletes the user keys `[key, value)`: its key is
//! the range's first key, its value the key after the range, which must
//! sort after the first.
//!
//! `seq` is the sequence number of the first entry; entry `i` gets `seq + i`.
//!
//! # Limits
//!
//! Empty keys are allowed (they sort before every other key). Keys are at
//! most [`MAX_KEY_LEN`] bytes, values at most [`MAX_VALUE_LEN`] bytes and the
//! whole encoded batch at most [`MAX_BATCH_LEN`] bytes (so it fits in one log
//! record); exceeding a limit is `InvalidArgument` when building and
//! `Corruption` when decoding.

use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind, MAX_SEQ};
use crate::varint::{self, put_u32, MAX_LEN_U32};

/// Size of the `seq | count` header.
pub const BATCH_HEADER_LEN: usize = 12;
/// Longest key, in bytes (64 KiB): a longer one is refused with
/// `InvalidArgument` by every write.
pub const MAX_KEY_LEN: usize = 64 * 1024;
/// Longest value, in bytes (256 MiB): a longer one is refused with
/// `InvalidArgument` by every write.
pub const MAX_VALUE_LEN: usize = 256 << 20;
/// Largest encoded batch, in bytes: what one log record can hold (keys,
/// values and a few bytes per entry); a larger batch is refused with
/// `InvalidArgument`.
pub const MAX_BATCH_LEN: usize = crate::record_log::MAX_RECORD_LEN;

/// One operation of a batch. `value` is empty for deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    pub kind: ValueKind,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// The kind byte of a keyspace marker (see the module docs).
const KEYSPACE_MARKER: u8 = 16;
/// A marker's longest encoding.
const MAX_MARKER_LEN: usize = 1 + MAX_LEN_U32;

/// A group of writes, stored encoded so writing it to the WAL is a copy.
///
/// Writes to other keyspaces than the default one go in with
/// [`put_in`](Self::put_in), [`delete_in`](Self::delete_in) and
/// [`delete_range_in`](Self::delete_range_in); the batch is applied
/// atomically across all the keyspaces it writes, also after a crash (it
/// is one WAL record).
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// The keyspace the entries added next belong to without a marker.
    scope: u32,
    /// Whether the batch holds a keyspace marker.
    keyspaces: bool,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("sequence", &self.sequence())
            .field("len", &self.len())
            .field("bytes", &self.rep.len())
            .finish()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// A batch whose buffer can hold `bytes` of entries without growing.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(BATCH_HEADER_LEN + bytes);
        rep.resize(BATCH_HEADER_LEN, 0);
        WriteBatch {
            rep,
            scope: 0,
            keyspaces: false,
        }
    }

    /// Adds a put of `key` = `value`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the key is longer than [`MAX_KEY_LEN`], the
    /// value longer than [`MAX_VALUE_LEN`], or the batch would grow past
    /// [`MAX_BATCH_LEN`]; the batch is then unchanged.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.put_scoped(0, key, value)
    }

    /// Adds a put to keyspace `id`.
    pub(crate) fn put_scoped(&mut self, id: u32, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(value)?;
        self.set_scope(id)?;
        let entry_len = 1 + MAX_LEN_U32 + key.len() + MAX_LEN_U32 + value.len();
        self.reserve_entry(entry_len)?;
        self.rep.push(ValueKind::Put as u8);
        put_u32(&mut self.rep, key.len() as u32);
        self.rep.extend_from_slice(key);
        put_u32(&mut self.rep, value.len() as u32);
        self.rep.extend_from_slice(value);
        self.set_count(self.count() + 1);
        Ok(())
    }

    /// Adds a delete of `key`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the key is longer than [`MAX_KEY_LEN`] or the
    /// batch would grow past [`MAX_BATCH_LEN`]; the batch is then unchanged.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_scoped(0, key.as_ref())
    }

    /// Adds a delete of `key` in keyspace `id`.
    pub(crate) fn delete_scoped(&mut self, id: u32, key: &[u8]) -> Result<()> {
        check_key(key)?;
        self.set_scope(id)?;
        self.reserve_entry(1 + MAX_LEN_U32 + key.len())?;
        self.rep.push(ValueKind::Delete as u8);
        put_u32(&mut self.rep, key.len() as u32);
        self.rep.extend_from_slice(key);
        self.set_count(self.count() + 1);
        Ok(())
    }

    /// Adds a delete of every key in `[begin, end)`: one entry however many
    /// keys the range holds. It deletes the keys written before it (in this
    /// batch or earlier), not those written after. An empty range
    /// (`begin == end`) adds nothing.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `begin` sorts after `end` (a reversed range),
    /// if a key is longer than [`MAX_KEY_LEN`], or if the batch would grow
    /// past [`MAX_BATCH_LEN`]; the batch is then unchanged.
    pub fn delete_range(&mut self, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_scoped(0, begin.as_ref(), end.as_ref())
    }

    /// Adds a range delete in keyspace `id`.
    pub(crate) fn delete_range_scoped(&mut self, id: u32, begin: &[u8], end: &[u8]) -> Result<()> {
        check_key(begin)?;
        check_key(end)?;
        if begin > end {
            return Err(Error::invalid(format!(
                "range delete's first key sorts after its end ({} and {} bytes): a reversed range",
                begin.len(),
                end.len()
            )));
        }
        if begin == end {
            return Ok(());
        }
        self.set_scope(id)?;
        self.reserve_entry(1 + 2 * MAX_LEN_U32 + begin.len() + end.len())?;
        self.rep.push(ValueKind::RangeDelete as u8);
        put_u32(&mut self.rep, begin.len() as u32);
        self.rep.extend_from_slice(begin);
        put_u32(&mut self.rep, end.len() as u32);
        self.rep.extend_from_slice(end);
        self.set_count(self.count() + 1);
        Ok(())
    }

    /// Appends every entry of `other` (for group commit). The sequence
    /// number of `self` is kept.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the batch would grow past [`MAX_BATCH_LEN`]; the
    /// batch is then unchanged.
    pub fn append(&mut self, other: &WriteBatch) -> Result<()> {
        let entries = &other.rep[BATCH_HEADER_LEN..];
        self.reserve_entry(entries.len() + MAX_MARKER_LEN)?;
        let count = self.count().checked_add(other.count());
        let count = count.ok_or_else(|| Error::invalid("write batch has too many entries"))?;
        // `other` starts in the default keyspace.
        self.set_scope(0)?;
        self.rep.extend_from_slice(entries);
        self.set_count(count);
        self.scope = other.scope;
        self.keyspaces |= other.keyspaces;
        Ok(())
    }

    /// Makes the entries added next belong to keyspace `id`, adding a
    /// marker if the last ones belong to another.
    #[inline]
    fn set_scope(&mut self, id: u32) -> Result<()> {
        if id == self.scope {
            return Ok(());
        }
        self.add_marker(id)
    }

    #[cold]
    fn add_marker(&mut self, id: u32) -> Result<()> {
        self.reserve_entry(MAX_MARKER_LEN)?;
        self.rep.push(KEYSPACE_MARKER);
        put_u32(&mut self.rep, id);
        self.scope = id;
        self.keyspaces = true;
        Ok(())
    }

    /// Whether some entry belongs to another keyspace than the default
    /// one (the batch holds a keyspace marker).
    #[inline]
    pub(crate) fn has_keyspaces(&self) -> bool {
        self.keyspaces
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count() as usize
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Removes every operation and resets the sequence number to 0,
    /// keeping the buffer.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_LEN, 0);
        self.scope = 0;
        self.keyspaces = false;
    }

    /// Encoded size in bytes (what the WAL record will hold).
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Sequence number of the first operation.
    pub(crate) fn sequence(&self) -> SeqNo {
        u64::from_le_bytes(self.rep[0..8].try_into().expect("8 bytes"))
    }

    /// Sets the sequence number of the first operation; operation `i` gets
    /// `seq + i`. The memtable rejects batches whose last sequence number
    /// would exceed [`MAX_SEQ`].
    pub(crate) fn set_sequence(&mut self, seq: SeqNo) {
        self.rep[0..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The encoded batch: the payload of one WAL record.
    pub(crate) fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Parses and fully validates an encoded batch (from a WAL record).
    /// Damaged input is `Corruption`, never a panic; the caller adds the
    /// file and offset.
    pub(crate) fn decode(data: &[u8]) -> Result<WriteBatch> {
        if data.len() < BATCH_HEADER_LEN {
            return Err(Error::corruption(format!(
                "write batch of {} bytes is shorter than its {BATCH_HEADER_LEN}-byte header",
                data.len()
            )));
        }
        if data.len() > MAX_BATCH_LEN {
            return Err(Error::corruption(format!(
                "write batch of {} bytes exceeds the {MAX_BATCH_LEN}-byte limit",
                data.len()
            )));
        }
        let seq = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
        let count = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
        let end = seq.checked_add(count as u64);
        if !matches!(end, Some(end) if end <= MAX_SEQ + 1) {
            return Err(Error::corruption(format!(
                "write batch sequence {seq} with {count} entries exceeds the largest sequence number"
            )));
        }
        let mut rest = &data[BATCH_HEADER_LEN..];
        let mut found = 0u64;
        let (mut scope, mut keyspaces) = (0, false);
        while !rest.is_empty() {
            let at = data.len() - rest.len();
            if rest[0] == KEYSPACE_MARKER {
                let (id, used) = varint::decode_u32(&rest[1..]).map_err(|e| {
                    Error::corruption(format!(
                        "write batch keyspace marker at byte {at}: bad keyspace id: {e}"
                    ))
                })?;
                rest = &rest[1 + used..];
                (scope, keyspaces) = (id, true);
                continue;
            }
            let (_, used) = parse_entry(rest).map_err(|what| {
                Error::corruption(format!("write batch entry {found} at byte {at}: {what}"))
            })?;
            rest = &rest[used..];
            found += 1;
        }
        if found != count as u64 {
            return Err(Error::corruption(format!(
                "write batch header says {count} entries but it holds {found}"
            )));
        }
        Ok(WriteBatch {
            rep: data.to_vec(),
            scope,
            keyspaces,
        })
    }

    /// The operations in the order they were added, whatever keyspace
    /// they belong to (see [`Self::iter_scoped`]).
    pub(crate) fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            rest: &self.rep[BATCH_HEADER_LEN..],
            keyspace: 0,
        }
    }

    /// The operations with the keyspace each belongs to.
    pub(crate) fn iter_scoped(&self) -> ScopedIter<'_> {
        ScopedIter(self.iter())
    }

    fn count(&self) -> u32 {
        u32::from_le_bytes(self.rep[8..12].try_into().expect("4 bytes"))
    }

    fn set_count(&mut self, count: u32) {
        self.rep[8..12].copy_from_slice(&count.to_le_bytes());
    }

    fn reserve_entry(&mut self, max_entry_len: usize) -> Result<()> {
        if self.count() == u32::MAX || self.rep.len().saturating_add(max_entry_len) > MAX_BATCH_LEN
        {
            return Err(Error::invalid(format!(
                "write batch would exceed {MAX_BATCH_LEN} bytes or {} entries",
                u32::MAX
            )));
        }
        self.rep.reserve(max_entry_len);
        Ok(())
    }
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = BatchEntry<'a>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

/// Iterator over the operations of a [`WriteBatch`].
pub struct BatchIter<'a> {
    rest: &'a [u8],
    /// The keyspace of the entry returned last.
    keyspace: u32,
}

/// Iterator over the operations of a [`WriteBatch`] and their keyspaces.
pub(crate) struct ScopedIter<'a>(BatchIter<'a>);

impl<'a> Iterator for ScopedIter<'a> {
    type Item = (u32, BatchEntry<'a>);

    fn next(&mut self) -> Option<(u32, BatchEntry<'a>)> {
        let e = self.0.next()?;
        Some((self.0.keyspace, e))
    }
}

impl BatchIter<'_> {
    /// Steps over the keyspace markers at the front, taking the last one's
    /// keyspace. Out of line: a batch of the default keyspace has none.
    #[cold]
    fn skip_markers(&mut self) {
        while self.rest.first() == Some(&KEYSPACE_MARKER) {
            // Validated when built or decoded.
            match varint::decode_u32(&self.rest[1..]) {
                Ok((id, used)) => {
                    self.keyspace = id;
                    self.rest = &self.rest[1 + used..];
                }
                Err(_) => {
                    debug_assert!(false, "write batch invariant broken");
                    self.rest = &[];
                }
            }
        }
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = BatchEntry<'a>;

    #[inline]
    fn next(&mut self) -> Option<BatchEntry<'a>> {
        if self.rest.first() == Some(&KEYSPACE_MARKER) {
            self.skip_markers();
        }
        if self.rest.is_empty() {
            return None;
        }
        // Batches are validated when built or decoded, so this cannot fail;
        // stop rather than panic if it somehow does.
        match parse_entry(self.rest) {
            Ok((entry, used)) => {
                self.rest = &self.rest[used..];
                Some(entry)
            }
            Err(_) => {
                debug_assert!(false, "write batch invariant broken");
                self.rest = &[];
                None
            }
        }
    }
}

/// `InvalidArgument` for a key longer than [`MAX_KEY_LEN`]; writers that
/// hold writes before batching them (transactions) check with it too.
/// Inlined so `put`, the hot path of every write, stays as compact as it
/// was before these checks were shared.
#[inline]
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "key of {} bytes exceeds the {MAX_KEY_LEN}-byte limit",
            key.len()
        )));
    }
    Ok(())
}

/// `InvalidArgument` for a value longer than [`MAX_VALUE_LEN`].
#[inline]
pub(crate) fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::invalid(format!(
            "value of {} bytes exceeds the {MAX_VALUE_LEN}-byte limit",
            value.len()
        )));
    }
    Ok(())
}

/// Parses one entry at the start of `buf`; returns it and its encoded length.
fn parse_entry(buf: &[u8]) -> std::result::Result<(BatchEntry<'_>, usize), String> {
    let (&kind_byte, mut rest) = buf.split_first().ok_or("empty entry")?;
    let kind = ValueKind::from_u8(kind_byte).ok_or_else(|| format!("unknown kind {kind_byte}"))?;
    let key = take_slice(&mut rest, MAX_KEY_LEN, "key")?;
    let value = match kind {
        ValueKind::Put => take_slice(&mut rest, MAX_VALUE_LEN, "value")?,
        ValueKind::Delete => &[],
        ValueKind::RangeDelete => {
            let end = take_slice(&mut rest, MAX_KEY_LEN, "range end")?;
            if end <= key {
                return Err("range delete's end does not sort after its first key".into());
            }
            end
        }
    };
    Ok((BatchEntry { kind, key, value }, buf.len() - rest.len()))
}

fn take_slice<'a>(
    rest: &mut &'a [u8],
    limit: usize,
    what: &str,
) -> std::result::Result<&'a [u8], String> {
    let (len, used) = varint::decode_u32(rest).map_err(|e| format!("bad {what} length: {e}"))?;
    *rest = &rest[used..];
    let len = len as usize;
    if len > limit {
        return Err(format!(
            "{what} length {len} exceeds the {limit}-byte limit"
        ));
    }
    if len > rest.len() {
        return Err(format!(
            "{what} length {len} runs past the end ({} bytes left)",
            rest.len()
        ));
    }
    let (s, tail) = rest.split_at(len);
    *rest = tail;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::error::ErrorKind;

    #[derive(Debug, Clone, PartialEq)]
    enum Op {
        Put(Vec<u8>, Vec<u8>),
        Delete(Vec<u8>),
        DeleteRange(Vec<u8>, Vec<u8>),
    }

    fn build(ops: &[Op]) -> WriteBatch {
        let mut b = WriteBatch::new();
        for op in ops {
            match op {
                Op::Put(k, v) => b.put(k, v).unwrap(),
                Op::Delete(k) => b.delete(k).unwrap(),
                Op::DeleteRange(x, y) => b.delete_range(x, y).unwrap(),
            }
        }
        b
    }

    fn ops_of(b: &WriteBatch) -> Vec<Op> {
        b.iter()
            .map(|e| match e.kind {
                ValueKind::Put => Op::Put(e.key.to_vec(), e.value.to_vec()),
                ValueKind::Delete => {
                    assert!(e.value.is_empty());
                    Op::Delete(e.key.to_vec())
                }
                ValueKind::RangeDelete => Op::DeleteRange(e.key.to_vec(), e.value.to_vec()),
            })
            .collect()
    }

    #[test]
    fn bad_length_varints_are_corruption() {
        let header = |count: u32| {
            let mut d = 5u64.to_le_bytes().to_vec();
            d.extend_from_slice(&count.to_le_bytes());
            d
        };
        // A key length that overflows 32 bits, and one cut off by the end.
        for (tail, why) in [
            (
                &[1u8, 0xff, 0xff, 0xff, 0xff, 0x1f][..],
                "overflows 32 bits",
            ),
            (&[1u8, 0x80][..], "truncated varint"),
        ] {
            let mut d = header(1);
            d.extend_from_slice(tail);
            let e = WriteBatch::decode(&d).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corruption);
            assert!(e.message().contains("bad key length"), "{e}");
            assert!(e.message().contains(why), "{e}");
        }
        // A two-byte length decodes and is bounds-checked against the rest.
        let mut d = header(1);
        d.extend_from_slice(&[0, 0x80, 0x01]);
        let e = WriteBatch::decode(&d).unwrap_err();
        assert!(
            e.message().contains("key length 128 runs past the end"),
            "{e}"
        );
    }

    #[test]
    fn basic_operations() {
        let mut b = WriteBatch::new();
        assert!(b.is_empty());
        assert_eq!(b.approximate_size(), BATCH_HEADER_LEN);
        b.put(b"k1", b"v1").unwrap();
        b.delete(b"k2").unwrap();
        b.put(b"", b"empty key is allowed").unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(b.sequence(), 0);
        b.set_sequence(42);
        assert_eq!(b.sequence(), 42);
        assert_eq!(
            ops_of(&b),
            vec![
                Op::Put(b"k1".to_vec(), b"v1".to_vec()),
                Op::Delete(b"k2".to_vec()),
                Op::Put(Vec::new(), b"empty key is allowed".to_vec()),
            ]
        );
        assert_eq!(b.approximate_size(), b.data().len());
        let d = WriteBatch::decode(b.data()).unwrap();
        assert_eq!(d, b);
        assert_eq!(d.sequence(), 42);
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.sequence(), 0);
        assert_eq!(b.iter().count(), 0);
    }

    #[test]
    fn exact_encoding() {
        let mut b = WriteBatch::new();
        b.set_sequence(0x0102);
        b.put(b"ab", b"c").unwrap();
        b.delete(b"d").unwrap();
        let mut want = vec![0x02, 0x01, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0];
        want.extend_from_slice(&[1, 2, b'a', b'b', 1, b'c', 0, 1, b'd']);
        assert_eq!(b.data(), &want[..]);
    }

    #[test]
    fn limits_are_invalid_argument() {
        let mut b = WriteBatch::new();
        let big_key = vec![0u8; MAX_KEY_LEN + 1];
        assert_eq!(
            b.put(&big_key, b"v").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            b.delete(&big_key).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        b.put(&big_key[..MAX_KEY_LEN], b"v").unwrap();
        let big_value = vec![0u8; MAX_VALUE_LEN + 1];
        assert_eq!(
            b.put(b"k", &big_value).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        // Failed calls leave the batch untouched.
        assert_eq!(b.len(), 1);
        assert!(WriteBatch::decode(b.data()).is_ok());
    }

    #[test]
    fn keyspace_markers_scope_entries_and_survive_append_and_decode() {
        let mut b = WriteBatch::new();
        b.put(b"d", b"0").unwrap();
        b.put_scoped(3, b"k", b"3").unwrap();
        b.delete_scoped(3, b"x").unwrap();
        b.delete_range_scoped(7, b"a", b"c").unwrap();
        assert!(b.has_keyspaces());
        assert_eq!(b.len(), 4, "markers are not entries");
        // A default-keyspace batch appended after it stays in the default
        // keyspace.
        let mut plain = WriteBatch::new();
        plain.put(b"p", b"1").unwrap();
        assert!(!plain.has_keyspaces());
        let mut group = WriteBatch::new();
        group.append(&b).unwrap();
        group.append(&plain).unwrap();
        group.put(b"q", b"2").unwrap();
        let scoped = |b: &WriteBatch| -> Vec<(u32, Vec<u8>)> {
            b.iter_scoped().map(|(k, e)| (k, e.key.to_vec())).collect()
        };
        let want: Vec<(u32, Vec<u8>)> = vec![
            (0, b"d".to_vec()),
            (3, b"k".to_vec()),
            (3, b"x".to_vec()),
            (7, b"a".to_vec()),
            (0, b"p".to_vec()),
            (0, b"q".to_vec()),
        ];
        assert_eq!(scoped(&group), want);
        let back = WriteBatch::decode(group.data()).unwrap();
        assert_eq!(scoped(&back), want);
        assert!(back.has_keyspaces());
        // Without a marker the encoding is the one before keyspaces.
        assert_eq!(plain.data()[BATCH_HEADER_LEN], ValueKind::Put as u8);
        // A marker whose id is cut off is corruption, not a panic.
        let mut cut = WriteBatch::new().data().to_vec();
        cut.extend_from_slice(&[KEYSPACE_MARKER, 0x80]);
        assert_eq!(
            WriteBatch::decode(&cut).unwrap_err().kind(),
            ErrorKind::Corruption
        );
    }

    #[test]
    fn append_concatenates() {
        let mut a = build(&[Op::Put(b"a".to_vec(), b"1".to_vec())]);
        a.set_sequence(7);
        let b = build(&[Op::Delete(b"b".to_vec()), Op::Put(b"c".to_vec(), vec![])]);
        a.append(&b).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a.sequence(), 7);
        assert_eq!(ops_of(&a)[1], Op::Delete(b"b".to_vec()));
        assert_eq!(WriteBatch::decode(a.data()).unwrap(), a);
    }

    #[test]
    fn decode_rejects_damage() {
        let mut b = build(&[
            Op::Put(b"key".to_vec(), b"value".to_vec()),
            Op::Delete(b"gone".to_vec()),
        ]);
        b.set_sequence(5);
        let good = b.data().to_vec();
        let corrupt = |d: &[u8]| {
            let e = WriteBatch::decode(d).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
            e
        };
        corrupt(&good[..11]);
        for cut in BATCH_HEADER_LEN..good.len() {
            corrupt(&good[..cut]);
        }
        let mut d = good.clone();
        d[8] = 3; // count too high
        assert!(corrupt(&d).message().contains("3 entries"));
        let mut d = good.clone();
        d[8] = 1; // count too low
        corrupt(&d);
        let mut d = good.clone();
        d[BATCH_HEADER_LEN] = 9; // bad kind
        assert!(corrupt(&d).message().contains("unknown kind"));
        let mut d = good.clone();
        d.push(0); // trailing byte is a partial entry
        corrupt(&d);
        let mut d = good.clone();
        d[0..8].copy_from_slice(&MAX_SEQ.to_le_bytes()); // seq + count overflows
        assert!(corrupt(&d).message().contains("sequence"));
        // An empty batch at the largest sequence is fine.
        let mut e = WriteBatch::new();
        e.set_sequence(MAX_SEQ + 1);
        assert!(WriteBatch::decode(e.data()).is_ok());
    }

    #[test]
    fn range_deletes_encode_and_validate() {
        let mut b = WriteBatch::new();
        b.delete_range(b"a", b"c").unwrap();
        b.delete_range(b"x", b"x").unwrap(); // empty: nothing added
        assert_eq!(b.len(), 1);
        let e = b.delete_range(b"z", b"a").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = b
            .delete_range(b"a", vec![0u8; MAX_KEY_LEN + 1])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(b.len(), 1);
        b.set_sequence(4);
        let mut want = vec![4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
        want.extend_from_slice(&[2, 1, b'a', 1, b'c']);
        assert_eq!(b.data(), &want[..]);
        assert_eq!(
            ops_of(&WriteBatch::decode(&want).unwrap()),
            vec![Op::DeleteRange(b"a".to_vec(), b"c".to_vec())]
        );
        // A stored range whose end does not sort after its start is damage.
        let n = want.len();
        want[n - 1] = b'a';
        let e = WriteBatch::decode(&want).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption);
        assert!(e.message().contains("range delete"), "{e}");
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        let bytes = || prop::collection::vec(any::<u8>(), 0..200);
        prop_oneof![
            (bytes(), bytes()).prop_map(|(k, v)| Op::Put(k, v)),
            bytes().prop_map(Op::Delete),
            (bytes(), bytes())
                .prop_filter("a nonempty range", |(a, b)| a < b)
                .prop_map(|(a, b)| Op::DeleteRange(a, b)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn round_trip(ops in prop::collection::vec(op_strategy(), 0..20),
                      seq in 0..=MAX_SEQ - 20) {
            let mut b = build(&ops);
            b.set_sequence(seq);
            prop_assert_eq!(b.len(), ops.len());
            let d = WriteBatch::decode(b.data()).unwrap();
            prop_assert_eq!(d.sequence(), seq);
            prop_assert_eq!(d.len(), ops.len());
            prop_assert_eq!(ops_of(&d), ops);
        }

        #[test]
        fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(b) = WriteBatch::decode(&data) {
                prop_assert_eq!(b.iter().count(), b.len());
            }
        }

        #[test]
        fn damaged_batches_never_panic(ops in prop::collection::vec(op_strategy(), 1..6),
                                       pos in any::<prop::sample::Index>(),
                                       byte in any::<u8>(),
                                       cut in any::<prop::sample::Index>()) {
            let b = build(&ops);
            let mut d = b.data().to_vec();
            let i = pos.index(d.len());
            d[i] = byte;
            d.truncate(cut.index(d.len() + 1));
            if let Ok(b) = WriteBatch::decode(&d) {
                prop_assert_eq!(b.iter().count(), b.len());
            }
        }
    }
}
