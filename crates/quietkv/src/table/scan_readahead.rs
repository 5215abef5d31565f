//! Readahead for an iterator reading a table's data blocks in order.
//!
//! User reads of a table go through a file opened for random access (no
//! kernel readahead: a point read that misses should read its block and
//! nothing more, or the pages it drags in push hot pages out of the page
//! cache). An iterator walking neighbouring blocks is the exception, so it
//! asks for readahead itself, the way RocksDB's iterators do: once three
//! neighbouring blocks in a row have been read in one direction, each block
//! that misses the block cache and lies outside what was already asked for
//! starts a window of readahead at itself; the window starts at
//! [`INITIAL_WINDOW`] and doubles with each window up to [`MAX_WINDOW`], so
//! a short scan reads little more than it uses and a long one reads in
//! large requests. Reaching the second half of a window asks for the next
//! one, so a long scan finds its blocks already read instead of waiting
//! for each window in turn. Backward scans get the same, towards the
//! start of the file (the kernel's own readahead only looks forward).

/// The first window, in bytes (two 4 KiB blocks).
pub const INITIAL_WINDOW: u64 = 8 << 10;
/// The largest window, in bytes.
pub const MAX_WINDOW: u64 = 256 << 10;
/// Neighbouring blocks read in a row, in one direction, before readahead
/// starts: the third such block is the first to start a window.
const SEQUENTIAL_BEFORE_READAHEAD: u32 = 2;

/// The readahead state of one iterator over one table.
#[derive(Debug, Clone)]
pub struct ScanReadahead {
    /// The block read last.
    last: Option<usize>,
    /// How many steps in a row went to the neighbouring block in
    /// `forward`'s direction.
    steps: u32,
    forward: bool,
    /// The next window's size.
    window: u64,
    /// The far end of what was asked for so far in the current direction
    /// (forward: the end of the last window; backward: its start), and
    /// that window's size.
    edge: Option<(u64, u64)>,
}

impl Default for ScanReadahead {
    fn default() -> Self {
        ScanReadahead {
            last: None,
            steps: 0,
            forward: true,
            window: INITIAL_WINDOW,
            edge: None,
        }
    }
}

impl ScanReadahead {
    /// Records that the iterator reads block `idx` now, from the block
    /// cache or not.
    pub fn note(&mut self, idx: usize) {
        let dir = match self.last {
            Some(l) if l.checked_add(1) == Some(idx) => Some(true),
            Some(l) if idx.checked_add(1) == Some(l) => Some(false),
            // The same block again (a seek inside it): nothing changes.
            Some(l) if l == idx => return,
            _ => None,
        };
        match dir {
            Some(forward) if forward == self.forward && self.last.is_some() => {
                self.steps = self.steps.saturating_add(1);
            }
            Some(forward) => self.restart(forward, 1),
            None => self.restart(true, 0),
        }
        self.last = Some(idx);
    }

    fn restart(&mut self, forward: bool, steps: u32) {
        self.forward = forward;
        self.steps = steps;
        self.window = INITIAL_WINDOW;
        self.edge = None;
    }

    /// The range to read ahead, if any, now that the block just noted, at
    /// `[offset, offset + len)`, missed the block cache; `data_end` is
    /// where the table's data blocks end (nothing past it is read ahead).
    pub fn on_miss(&mut self, offset: u64, len: u64, data_end: u64) -> Option<(u64, u64)> {
        if self.steps < SEQUENTIAL_BEFORE_READAHEAD {
            return None;
        }
        let end = offset.saturating_add(len);
        let (start, stop) = if self.forward {
            let from = match self.edge {
                // Outside what was asked for: a window from this block.
                None => offset,
                Some((e, _)) if e < end => offset,
                // In the second half of the last window: the next one.
                Some((e, w)) if end.saturating_add(w / 2) > e => e,
                Some(_) => return None,
            };
            (from, from.saturating_add(self.window).min(data_end))
        } else {
            let to = match self.edge {
                None => end,
                Some((e, _)) if offset < e => end,
                Some((e, w)) if offset < e.saturating_add(w / 2) => e,
                Some(_) => return None,
            };
            (to.saturating_sub(self.window), to.min(data_end))
        };
        if stop <= start {
            return None;
        }
        self.edge = Some((if self.forward { stop } else { start }, stop - start));
        self.window = (self.window * 2).min(MAX_WINDOW);
        Some((start, stop - start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: u64 = 4096;

    /// Reads blocks `idxs` of a table of 4 KiB blocks ending at
    /// `data_end`, every one missing the block cache, and returns the
    /// readahead asked for.
    fn walk(idxs: impl IntoIterator<Item = usize>, data_end: u64) -> Vec<(u64, u64)> {
        let mut r = ScanReadahead::default();
        let mut asked = Vec::new();
        for i in idxs {
            r.note(i);
            asked.extend(r.on_miss(i as u64 * BLOCK, BLOCK, data_end));
        }
        asked
    }

    #[test]
    fn a_forward_scan_reads_ahead_from_its_third_block_in_doubling_windows() {
        let asked = walk(0..400, 400 * BLOCK);
        // Blocks 0 and 1 read alone; block 2 starts the first window.
        assert_eq!(asked[0], (2 * BLOCK, INITIAL_WINDOW));
        // Each window starts where the last ended, twice as large, up to
        // the largest.
        for w in asked.windows(2) {
            assert_eq!(w[1].0, w[0].0 + w[0].1, "{asked:?}");
            assert!(w[1].1 == (w[0].1 * 2).min(MAX_WINDOW) || w[1].0 + w[1].1 == 400 * BLOCK);
        }
        assert!(asked.iter().any(|&(_, l)| l == MAX_WINDOW));
        // Every block from the third on was asked for before it was read,
        // and nothing past the data blocks.
        let last = asked.last().unwrap();
        assert_eq!(last.0 + last.1, 400 * BLOCK);
    }

    #[test]
    fn a_window_is_asked_for_before_the_scan_reaches_it() {
        let mut r = ScanReadahead::default();
        let mut covered_to = 0;
        for i in 0..200usize {
            r.note(i);
            let at = i as u64 * BLOCK;
            if let Some((s, l)) = r.on_miss(at, BLOCK, u64::MAX) {
                covered_to = s + l;
            }
            // From the third block on, the block read is always covered,
            // and once windows are large, more than the block itself.
            if i >= 2 {
                assert!(covered_to >= at + BLOCK, "block {i}");
            }
            // Once the windows are the largest, at least half of one lies
            // ahead of every block read.
            if i >= 64 {
                assert!(covered_to >= at + BLOCK + MAX_WINDOW / 2, "block {i}");
            }
        }
    }

    #[test]
    fn a_backward_scan_reads_ahead_towards_the_start() {
        let n = 300usize;
        let asked = walk((0..n).rev(), n as u64 * BLOCK);
        // The third block from the end starts the first window, which ends
        // with it.
        assert_eq!(
            asked[0],
            ((n as u64 - 2) * BLOCK - INITIAL_WINDOW, INITIAL_WINDOW)
        );
        for w in asked.windows(2) {
            assert_eq!(w[1].0 + w[1].1, w[0].0, "{asked:?}");
        }
        assert_eq!(asked.last().unwrap().0, 0);
    }

    #[test]
    fn point_reads_and_jumps_read_nothing_ahead() {
        // Scattered blocks: never two neighbours in a row.
        assert!(walk([7, 3, 90, 12, 40, 41, 5, 6, 100], 1 << 30).is_empty());
        // A scan that jumps (a seek elsewhere) starts over: two more
        // neighbouring blocks before readahead again, from the initial
        // window.
        let asked = walk([0, 1, 2, 3, 50, 51, 52], 1 << 30);
        assert_eq!(asked.last(), Some(&(52 * BLOCK, INITIAL_WINDOW)));
        assert_eq!(asked.len(), 3, "{asked:?}");
        // The same block noted twice (a seek inside it) changes nothing.
        let twice = walk([0, 1, 1, 2], 1 << 30);
        assert_eq!(twice, vec![(2 * BLOCK, INITIAL_WINDOW)]);
    }

    #[test]
    fn a_turn_starts_over_in_the_new_direction() {
        let asked = walk([10, 11, 12, 13, 12, 11, 10, 9], 1 << 30);
        // Forward from block 12; after the turn at 13, backward from block
        // 11 (13, 12, 11: the third block of the backward run), a window
        // that ends with it.
        assert_eq!(asked[0], (12 * BLOCK, INITIAL_WINDOW));
        assert!(
            asked.contains(&(12 * BLOCK - INITIAL_WINDOW, INITIAL_WINDOW)),
            "{asked:?}"
        );
    }

    #[test]
    fn a_block_cache_hit_moves_the_scan_without_asking() {
        // Blocks the block cache holds are noted but never miss; the first
        // miss after them starts a window at the missing block.
        let mut r = ScanReadahead::default();
        for i in 0..=10 {
            r.note(i);
        }
        assert_eq!(
            r.on_miss(10 * BLOCK, BLOCK, 1 << 30),
            Some((10 * BLOCK, INITIAL_WINDOW))
        );
    }
}
