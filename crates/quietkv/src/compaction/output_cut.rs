//! Where a compaction cuts its output into tables.
//!
//! A table is finished when it reaches the target size, and also earlier,
//! from half the target on, where the keys pass the end of a table of the
//! level below the output (a "grandparent"). An output that ends where a
//! grandparent ends overlaps whole grandparent tables only: when it is
//! compacted down later, it rewrites no table of which it covers a sliver.
//! Cutting only by size leaves almost every output straddling one
//! grandparent boundary at each end, and each of those later merges
//! rewrites that straddled table whole. RocksDB cuts at grandparent
//! boundaries for the same reason.

/// Decides, key by key, where a compaction's output tables end.
#[derive(Debug)]
pub(crate) struct OutputCutter<'a> {
    /// Largest user keys of the grandparent tables, ascending.
    bounds: &'a [Vec<u8>],
    /// The first bound not yet passed.
    next: usize,
    target: u64,
}

impl<'a> OutputCutter<'a> {
    pub(crate) fn new(bounds: &'a [Vec<u8>], target: u64) -> Self {
        OutputCutter {
            bounds,
            next: 0,
            target,
        }
    }

    /// Called with each entry's user key, in order, before the entry is
    /// added. `open_table_size` is the size of the table being written
    /// (`None` when none is), `same_user_key` whether the key equals the
    /// previous entry's (a user key never spans two tables of a level).
    /// Returns whether to finish the open table before this entry.
    pub(crate) fn cut_before(
        &mut self,
        user_key: &[u8],
        same_user_key: bool,
        open_table_size: Option<u64>,
    ) -> bool {
        let mut passed_a_bound = false;
        while self
            .bounds
            .get(self.next)
            .is_some_and(|b| b.as_slice() < user_key)
        {
            self.next += 1;
            passed_a_bound = true;
        }
        let Some(size) = open_table_size else {
            return false;
        };
        !same_user_key && (size >= self.target || (passed_a_bound && size >= self.target / 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(keys: &[&str]) -> Vec<Vec<u8>> {
        keys.iter().map(|k| k.as_bytes().to_vec()).collect()
    }

    #[test]
    fn cuts_at_a_grandparent_boundary_once_half_full_and_always_at_the_target() {
        let b = bounds(&["c", "f", "k"]);
        let mut c = OutputCutter::new(&b, 100);
        assert!(!c.cut_before(b"a", false, None), "no open table");
        assert!(!c.cut_before(b"b", false, Some(10)));
        assert!(
            !c.cut_before(b"d", false, Some(40)),
            "past 'c' but under half"
        );
        assert!(
            !c.cut_before(b"e", false, Some(60)),
            "half full, no bound passed"
        );
        assert!(
            c.cut_before(b"g", false, Some(70)),
            "past 'f' and half full"
        );
        assert!(!c.cut_before(b"h", false, Some(5)));
        assert!(c.cut_before(b"i", false, Some(100)), "the target, no bound");
        // A key equal to a bound has not passed it.
        assert!(!c.cut_before(b"k", false, Some(60)));
        assert!(c.cut_before(b"l", false, Some(60)));
        // Past the last bound only the target cuts.
        assert!(!c.cut_before(b"m", false, Some(99)));
        assert!(c.cut_before(b"n", false, Some(100)));
    }

    #[test]
    fn never_cuts_inside_a_user_key_and_passes_several_bounds_at_once() {
        let b = bounds(&["b", "c", "d"]);
        let mut c = OutputCutter::new(&b, 100);
        assert!(!c.cut_before(b"a", true, Some(200)), "same user key");
        assert!(c.cut_before(b"z", false, Some(50)), "past three bounds");
        assert!(!c.cut_before(b"z", true, Some(60)), "same user key");
        let none: Vec<Vec<u8>> = Vec::new();
        let mut c = OutputCutter::new(&none, 100);
        assert!(!c.cut_before(b"a", false, Some(99)));
        assert!(c.cut_before(b"b", false, Some(100)));
    }
}
