//! Sorted key/value blocks with prefix compression and restart points.
//!
//! Layout of a (decompressed) block:
//!
//! ```text
//! entry*  restart_offset: u32 LE * n  n: u32 LE
//! entry = varint shared, varint unshared, varint value_len,
//!         key[shared..] (unshared bytes), value
//! ```
//!
//! Every `restart_interval`-th entry stores its whole key (`shared == 0`) and
//! its offset is listed in the restart array, so a seek is a binary search
//! over restart keys followed by a short linear scan.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::block_cache::Cache;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::table::format::{read_u32_le, Decoder};
use crate::value::{PinnedMemory, Value};
use crate::varint::put_u64;

pub const DEFAULT_RESTART_INTERVAL: usize = 16;

/// Builds one block in memory.
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    counter: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            counter: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Size of the block if finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Appends an entry; the caller guarantees keys arrive in order and the
    /// block stays below 4 GiB.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.restart_interval && self.entries > 0 {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        put_u64(&mut self.buf, shared as u64);
        put_u64(&mut self.buf, (key.len() - shared) as u64);
        put_u64(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.counter += 1;
        self.entries += 1;
    }

    /// Returns the finished block bytes and resets the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.counter = 0;
        self.entries = 0;
        self.last_key.clear();
        out
    }
}

/// A parsed, decompressed block whose restart array has been validated.
pub struct Block {
    data: Vec<u8>,
    /// Where the restart array starts (= end of the entries).
    restarts_off: usize,
    num_restarts: usize,
}

// SAFETY: a block's bytes are only written while it is decoded, in
// `Block::new`; after that a `Block` has no way to change them.
unsafe impl PinnedMemory for Block {
    fn pinned_bytes(&self) -> usize {
        self.size()
    }
}

/// The cache of parsed blocks the table reader reads through, each block
/// charged its decompressed size.
pub type BlockCache = Cache<Block>;

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("size", &self.data.len())
            .field("restarts", &self.num_restarts)
            .finish()
    }
}

impl Block {
    /// Validates the restart array (Corruption on any inconsistency).
    pub fn new(data: Vec<u8>) -> Result<Block> {
        let len = data.len();
        let n = len
            .checked_sub(4)
            .and_then(|at| read_u32_le(&data, at))
            .ok_or_else(|| Error::corruption(format!("block of {len} bytes is too short")))?
            as usize;
        let restarts_off = n
            .checked_mul(4)
            .and_then(|b| len.checked_sub(4)?.checked_sub(b))
            .ok_or_else(|| {
                Error::corruption(format!(
                    "block of {len} bytes cannot hold {n} restart points"
                ))
            })?;
        if n == 0 && restarts_off != 0 {
            return Err(Error::corruption("block has entries but no restart points"));
        }
        let mut prev: Option<usize> = None;
        for i in 0..n {
            let r = read_u32_le(&data, restarts_off + 4 * i).unwrap_or(u32::MAX) as usize;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p,
            } && r < restarts_off;
            if !ok {
                return Err(Error::corruption(format!(
                    "bad restart array: restart {i} at offset {r} (entries end at {restarts_off})"
                )));
            }
            prev = Some(r);
        }
        Ok(Block {
            data,
            restarts_off,
            num_restarts: n,
        })
    }

    /// Decompressed size in bytes (the block cache charge).
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// The decoded bytes (entries, then the restart array).
    pub(crate) fn data(&self) -> &[u8] {
        &self.data
    }

    fn restart(&self, i: usize) -> usize {
        // Validated in `new`.
        read_u32_le(&self.data, self.restarts_off + 4 * i).unwrap_or(0) as usize
    }
}

/// The decoded header of one entry.
struct EntryHeader {
    shared: usize,
    unshared: usize,
    value_len: usize,
    /// Offset of the unshared key bytes.
    key_at: usize,
}

impl EntryHeader {
    fn value_at(&self) -> usize {
        self.key_at + self.unshared
    }
    fn end(&self) -> usize {
        self.key_at + self.unshared + self.value_len
    }
}

fn decode_header(block: &Block, at: usize) -> Result<EntryHeader> {
    let entries = block.data.get(..block.restarts_off).unwrap_or(&[]);
    let rest = entries
        .get(at..)
        .ok_or_else(|| Error::corruption(format!("entry offset {at} is outside the block")))?;
    // Most entries' three lengths are each below 128, one byte apiece: a
    // point read decodes about half a restart interval of headers, so
    // this path skips the general varint decoder for them.
    let (shared, unshared, value_len, header_len) = match rest {
        [s, u, v, ..] if (s | u | v) & 0x80 == 0 => (*s as u64, *u as u64, *v as u64, 3),
        _ => {
            let mut d = Decoder::new(rest, "block entry");
            let shared = d.varint()?;
            let unshared = d.varint()?;
            let value_len = d.varint()?;
            (shared, unshared, value_len, rest.len() - d.remaining())
        }
    };
    let to_usize = |v: u64| usize::try_from(v).ok();
    let bad = || {
        Error::corruption(format!(
            "block entry at {at} runs past the end of the block"
        ))
    };
    let (shared, unshared, value_len) = (
        to_usize(shared).ok_or_else(bad)?,
        to_usize(unshared).ok_or_else(bad)?,
        to_usize(value_len).ok_or_else(bad)?,
    );
    let key_at = at + header_len;
    let end = key_at
        .checked_add(unshared)
        .and_then(|x| x.checked_add(value_len))
        .ok_or_else(bad)?;
    if end > block.restarts_off {
        return Err(bad());
    }
    Ok(EntryHeader {
        shared,
        unshared,
        value_len,
        key_at,
    })
}

/// A value inside a decoded block, and the block: a point read copies it
/// out or shares the block ([`BlockValue::into_value`]).
pub struct BlockValue {
    block: Arc<Block>,
    /// Where the value lies in the block's data (validated when the entry
    /// was parsed).
    range: std::ops::Range<usize>,
}

impl BlockValue {
    pub fn as_slice(&self) -> &[u8] {
        self.block.data.get(self.range.clone()).unwrap_or(&[])
    }

    /// The value as a [`Value`] that keeps the block alive instead of
    /// copying the bytes.
    pub fn into_value(self) -> Value {
        let range = self.range;
        Value::in_block(self.block, |block| block.data().get(range).unwrap_or(&[]))
    }
}

/// A cursor over one block.
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `restarts_off` when past the end.
    current: usize,
    /// Offset of the entry after the current one.
    next: usize,
    key: Vec<u8>,
    value: (usize, usize),
    valid: bool,
}

impl BlockIter {
    pub fn new(block: Arc<Block>) -> Self {
        let end = block.restarts_off;
        BlockIter {
            block,
            current: end,
            next: end,
            key: Vec::new(),
            value: (0, 0),
            valid: false,
        }
    }

    fn invalidate(&mut self) {
        self.valid = false;
        self.current = self.block.restarts_off;
        self.next = self.current;
        self.key.clear();
    }

    /// Decodes the entry at `at`, whose predecessor's key is in `self.key`.
    fn parse_at(&mut self, at: usize) -> Result<()> {
        if at >= self.block.restarts_off {
            self.invalidate();
            return Ok(());
        }
        let h = match decode_header(&self.block, at) {
            Ok(h) => h,
            Err(e) => {
                self.invalidate();
                return Err(e);
            }
        };
        if h.shared > self.key.len() {
            let e = Error::corruption(format!(
                "block entry at {at} shares {} bytes of a {}-byte previous key",
                h.shared,
                self.key.len()
            ));
            self.invalidate();
            return Err(e);
        }
        self.key.truncate(h.shared);
        self.key
            .extend_from_slice(self.block.data.get(h.key_at..h.value_at()).unwrap_or(&[]));
        self.value = (h.value_at(), h.end());
        self.current = at;
        self.next = h.end();
        self.valid = true;
        Ok(())
    }

    /// The current entry's value, holding the block it is in (the
    /// iterator's reference is handed over, none is taken); empty if the
    /// iterator is not on an entry.
    pub(crate) fn into_block_value(self) -> BlockValue {
        let range = if self.valid {
            self.value.0..self.value.1
        } else {
            0..0
        };
        BlockValue {
            block: self.block,
            range,
        }
    }

    fn seek_to_restart(&mut self, i: usize) -> Result<()> {
        self.key.clear();
        let at = self.block.restart(i);
        self.parse_at(at)?;
        Ok(())
    }

    /// The full key stored at restart point `i` (must have shared == 0).
    fn restart_key(&self, i: usize) -> Result<&[u8]> {
        let at = self.block.restart(i);
        let h = decode_header(&self.block, at)?;
        if h.shared != 0 {
            return Err(Error::corruption(format!(
                "restart entry at {at} has a shared prefix"
            )));
        }
        Ok(self.block.data.get(h.key_at..h.value_at()).unwrap_or(&[]))
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value.0..self.value.1)
            .unwrap_or(&[])
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.block.num_restarts == 0 {
            self.invalidate();
            return Ok(());
        }
        self.seek_to_restart(0)
    }

    /// Positions at the first entry with key >= `target` (internal order).
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let n = self.block.num_restarts;
        if n == 0 {
            self.invalidate();
            return Ok(());
        }
        // Largest restart whose key is < target (or 0).
        let (mut lo, mut hi) = (0usize, n - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let k = match self.restart_key(mid) {
                Ok(k) => k,
                Err(e) => {
                    self.invalidate();
                    return Err(e);
                }
            };
            if compare_internal(k, target) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.seek_to_restart(lo)?;
        while self.valid && compare_internal(&self.key, target) == Ordering::Less {
            self.next()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let at = self.next;
        self.parse_at(at)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let n = self.block.num_restarts;
        if n == 0 {
            self.invalidate();
            return Ok(());
        }
        self.seek_to_restart(n - 1)?;
        while self.valid && self.next < self.block.restarts_off {
            self.next()?;
        }
        Ok(())
    }

    /// Entries are prefix-compressed, so the previous one is found by
    /// decoding forward from the last restart point before the current
    /// entry.
    fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let target = self.current;
        // Restart offsets strictly increase (checked in `Block::new`):
        // count those before the current entry.
        let (mut lo, mut hi) = (0usize, self.block.num_restarts);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.block.restart(mid) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let Some(i) = lo.checked_sub(1) else {
            // The current entry is the first.
            self.invalidate();
            return Ok(());
        };
        self.seek_to_restart(i)?;
        while self.valid && self.next < target {
            self.next()?;
        }
        if self.valid && self.next != target {
            let e = Error::corruption(format!(
                "block entries do not lead from restart {i} to the entry at {target}"
            ));
            self.invalidate();
            return Err(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn ik(k: &str, seq: u64) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, ValueKind::Put)
    }

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    fn build(n: usize, interval: usize) -> (Arc<Block>, Entries) {
        let mut b = BlockBuilder::new(interval);
        let mut entries = Vec::new();
        for i in 0..n {
            let k = ik(&format!("key{:05}", i * 2), 7);
            let v = format!("value-{i}").into_bytes();
            b.add(&k, &v);
            entries.push((k, v));
        }
        (Arc::new(Block::new(b.finish()).unwrap()), entries)
    }

    #[test]
    fn iterate_and_seek() {
        for (n, interval) in [(0, 16), (1, 16), (17, 16), (100, 16), (50, 1)] {
            let (block, entries) = build(n, interval);
            let mut it = BlockIter::new(block);
            it.seek_to_first().unwrap();
            let mut got = Vec::new();
            while it.valid() {
                got.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
            assert_eq!(got, entries);
            for i in 0..n * 2 + 1 {
                let target = ik(&format!("key{i:05}"), 100);
                it.seek(&target).unwrap();
                let want = entries.get(i.div_ceil(2));
                assert_eq!(it.valid(), want.is_some());
                if let Some((k, _)) = want {
                    assert_eq!(it.key(), &k[..]);
                }
            }
            it.seek(&ik("a", 1)).unwrap();
            assert_eq!(it.valid(), n > 0);
            it.seek(&ik("z", 1)).unwrap();
            assert!(!it.valid());
        }
    }

    /// Backward iteration decodes from restart points: every restart
    /// interval, including one entry per restart, walks back over exactly
    /// the entries forward iteration yields.
    #[test]
    fn iterate_backward_and_step_back_from_a_seek() {
        for (n, interval) in [(0, 16), (1, 16), (17, 16), (100, 16), (50, 1), (33, 3)] {
            let (block, entries) = build(n, interval);
            let mut it = BlockIter::new(block);
            it.seek_to_last().unwrap();
            let mut got = Vec::new();
            while it.valid() {
                got.push((it.key().to_vec(), it.value().to_vec()));
                it.prev().unwrap();
            }
            got.reverse();
            assert_eq!(got, entries);
            for i in 0..n {
                it.seek(&entries[i].0).unwrap();
                it.prev().unwrap();
                assert_eq!(it.valid(), i > 0);
                if i > 0 {
                    assert_eq!(it.key(), &entries[i - 1].0[..]);
                    it.next().unwrap();
                    assert_eq!(it.key(), &entries[i].0[..]);
                }
            }
        }
    }

    #[test]
    fn bad_restart_arrays_are_rejected() {
        assert!(Block::new(vec![]).is_err());
        assert!(Block::new(vec![1, 0, 0]).is_err());
        assert!(Block::new(vec![0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).is_ok());
        let (block, _) = build(40, 16);
        let mut raw = block.data.clone();
        let n = raw.len();
        raw[n - 7] = 0xee; // last restart points past the entries
        assert!(Block::new(raw).is_err());
    }

    #[test]
    fn damaged_entries_never_panic() {
        let (block, _) = build(40, 4);
        for pos in 0..block.restarts_off {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut raw = block.data.clone();
                raw[pos] ^= flip;
                let Ok(b) = Block::new(raw) else { continue };
                let mut it = BlockIter::new(Arc::new(b));
                let mut steps = 0;
                if it.seek_to_first().is_ok() {
                    while it.valid() && steps < 1000 {
                        if it.next().is_err() {
                            break;
                        }
                        steps += 1;
                    }
                }
                let _ = it.seek(&ik("key00033", 1));
            }
        }
    }
}
