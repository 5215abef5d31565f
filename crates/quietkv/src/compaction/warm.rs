//! Warming compaction output with what was hot in its inputs.
//!
//! A compaction that bypasses the page cache keeps the user's hot data
//! cached while it runs, but its output is cold in every cache: once the
//! new version is installed, every hot read misses until the hot set has
//! been read again. With one open-loop reader that backlog grows to a
//! second or more at the end of a large compaction.
//!
//! So, when warming is on, the compaction notes the key range of every input
//! data block that was hot - in the block cache, or (for an input read with
//! O_DIRECT, whose own reads cannot have put it there) in the page cache just
//! before the compaction read it and fetched by a user read since the table
//! was opened (a page holds parts of two blocks, so residency alone would
//! also count the cold neighbours of hot blocks). Before the output is installed, each
//! output data block overlapping a hot range is read once through the user
//! read path, which puts it where user reads will look for it: with
//! buffered user reads, every hot range of every output is first handed to
//! kernel readahead, so those reads overlap, and then read back to wait for
//! them; with direct user reads, the blocks go into the block cache. Cold
//! data stays out of every cache, and the extra reads are bounded by the
//! hot set.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::user_key;
use crate::table::user_reads::UserReadMarks;
use crate::table::{BlockCache, TableCache};

/// Inclusive user-key ranges of hot input blocks.
#[derive(Debug, Default)]
pub struct HotRanges {
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    sorted: bool,
}

impl HotRanges {
    pub fn add(&mut self, first: &[u8], last: &[u8]) {
        // Blocks of one input arrive in key order; extend the previous range
        // when this one continues it.
        if let Some((_, end)) = self.ranges.last_mut() {
            if end.as_slice() >= first && end.as_slice() <= last {
                *end = last.to_vec();
                return;
            }
        }
        self.ranges.push((first.to_vec(), last.to_vec()));
        self.sorted = false;
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Sorts and merges overlapping ranges so lookups can binary-search.
    fn normalize(&mut self) {
        if self.sorted {
            return;
        }
        self.ranges.sort();
        let mut merged: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(self.ranges.len());
        for (s, e) in self.ranges.drain(..) {
            match merged.last_mut() {
                Some((_, end)) if s <= *end => {
                    if e > *end {
                        *end = e;
                    }
                }
                _ => merged.push((s, e)),
            }
        }
        self.ranges = merged;
        self.sorted = true;
    }

    /// Whether any hot range meets the user keys in `(after, upto]`
    /// (`after` = None: everything up to `upto`).
    pub fn overlaps(&mut self, after: Option<&[u8]>, upto: &[u8]) -> bool {
        self.normalize();
        // The first range that ends past `after`; merged ranges are
        // disjoint, so their ends are sorted too.
        let i = match after {
            None => 0,
            Some(a) if a >= upto => return false,
            Some(a) => self.ranges.partition_point(|(_, e)| e.as_slice() <= a),
        };
        self.ranges
            .get(i)
            .is_some_and(|(s, _)| s.as_slice() <= upto)
    }
}

/// What a compaction input scanner needs to note hot blocks.
#[derive(Clone)]
pub struct HotProbe {
    pub ranges: Arc<Mutex<HotRanges>>,
    /// The user reads' block cache, if any.
    pub block_cache: Option<Arc<BlockCache>>,
    /// The user reads' table readers, which know which blocks they
    /// fetched: a block found in the page cache is hot only if a user read
    /// fetched it (see [`crate::table::user_reads`]).
    pub table_cache: Option<Arc<TableCache>>,
    /// Whether page-cache residency of this input means "hot". Not for a
    /// table written through the page cache: a buffered flush or
    /// compaction left it all resident, used or not.
    pub page_cache: bool,
}

impl HotProbe {
    pub fn new(block_cache: Option<Arc<BlockCache>>, table_cache: Option<Arc<TableCache>>) -> Self {
        HotProbe {
            ranges: Arc::new(Mutex::new(HotRanges::default())),
            block_cache,
            table_cache,
            page_cache: false,
        }
    }

    /// The blocks of table `number` user reads fetched, if its user reader
    /// is open. Without a record (a table not read since the database
    /// opened, or closed to stay within `max_open_tables`) page-cache
    /// residency alone decides.
    pub fn user_reads(&self, number: u64) -> Option<Arc<UserReadMarks>> {
        self.table_cache.as_ref()?.user_reads(number)
    }

    /// The same probe, with page-cache residency counting or not.
    pub fn with_page_cache(&self, on: bool) -> Self {
        HotProbe {
            page_cache: on,
            ..self.clone()
        }
    }

    /// Whether block `offset` of table `table_id` is in the block cache.
    pub fn in_block_cache(&self, table_id: u64, offset: u64) -> bool {
        self.block_cache
            .as_ref()
            .is_some_and(|c| c.contains(table_id, offset))
    }

    /// Notes a hot block holding internal keys `first..=last`.
    pub fn note(&self, first: &[u8], last: &[u8]) {
        let (f, l) = (user_key(first), user_key(last));
        let (f, l) = if f <= l { (f, l) } else { (l, f) };
        self.ranges.lock().add(f, l);
    }
}

/// Indexes of the data blocks of a table, given each block's last internal
/// key in order, that a point read of a key in a hot range may read.
///
/// Block `i` holds the newest versions of the user keys after the last user
/// key of block `i - 1`, up to its own last user key. It may also begin with
/// older versions of that boundary key, but a read of the key finds its
/// newest version in block `i - 1` or before and stops there. Counting the
/// boundary key in both blocks would warm the block after every scattered
/// hot key too: twice the hot set.
pub fn hot_blocks<'a>(
    last_keys: impl Iterator<Item = &'a [u8]>,
    ranges: &mut HotRanges,
) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from: Option<&[u8]> = None;
    for (i, last) in last_keys.enumerate() {
        let upto = user_key(last);
        if ranges.overlaps(from, upto) {
            out.push(i);
        }
        from = Some(upto);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn ik(k: &str, seq: u64) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, ValueKind::Put)
    }

    #[test]
    fn ranges_merge_and_answer_overlaps() {
        let mut r = HotRanges::default();
        r.add(b"m", b"p");
        r.add(b"c", b"e");
        r.add(b"d", b"g"); // overlaps c..e
        r.add(b"x", b"x");
        assert!(r.overlaps(None, b"c"));
        assert!(!r.overlaps(None, b"b"));
        assert!(r.overlaps(Some(b"f"), b"h")); // g is inside
        assert!(!r.overlaps(Some(b"h"), b"l"));
        assert!(!r.overlaps(Some(b"g"), b"l")); // g, the end of c..g, is excluded
        assert!(r.overlaps(Some(b"cz"), b"l")); // but what follows cz is in
        assert!(r.overlaps(Some(b"h"), b"m"));
        assert!(!r.overlaps(Some(b"q"), b"w"));
        assert!(r.overlaps(Some(b"q"), b"x"));
        assert!(!r.overlaps(Some(b"x"), b"z"));
        assert!(!r.overlaps(Some(b"y"), b"z"));
        // An empty interval meets nothing, even inside a range.
        assert!(!r.overlaps(Some(b"n"), b"n"));
    }

    #[test]
    fn hot_blocks_picks_the_overlapping_ones() {
        let mut r = HotRanges::default();
        r.add(b"k05", b"k12");
        let lasts = [
            ik("k03", 1),
            ik("k07", 1),
            ik("k11", 1),
            ik("k15", 1),
            ik("k20", 1),
        ];
        let got = hot_blocks(lasts.iter().map(|k| k.as_slice()), &mut r);
        // (k03, k07], (k07, k11], (k11, k15] meet k05..k12.
        assert_eq!(got, vec![1, 2, 3]);
        let mut empty = HotRanges::default();
        assert!(hot_blocks(lasts.iter().map(|k| k.as_slice()), &mut empty).is_empty());
    }

    #[test]
    fn a_user_key_split_across_blocks_warms_only_where_it_is() {
        let mut r = HotRanges::default();
        r.add(b"k07", b"k07");
        // k07 has versions in block 1 (seq 9) and block 2 (seq 3).
        let lasts = [ik("k03", 1), ik("k07", 9), ik("k07", 3), ik("k09", 1)];
        let got = hot_blocks(lasts.iter().map(|k| k.as_slice()), &mut r);
        // A read of k07 finds its newest version in block 1 and stops;
        // block 2 holds only an older version, block 3 the keys after k07.
        assert_eq!(got, vec![1]);
    }

    #[test]
    fn scattered_hot_keys_warm_one_block_each() {
        // One entry per block (4 KiB values in 4 KiB blocks); every third
        // key hot. The block after each hot key holds a cold key.
        let lasts: Vec<Vec<u8>> = (0..30).map(|i| ik(&format!("k{i:02}"), 1)).collect();
        let mut r = HotRanges::default();
        for i in (0..30).step_by(3) {
            let k = format!("k{i:02}");
            r.add(k.as_bytes(), k.as_bytes());
        }
        let got = hot_blocks(lasts.iter().map(|k| k.as_slice()), &mut r);
        assert_eq!(got, (0..30).step_by(3).collect::<Vec<_>>());
    }
}
