//! How far compaction is behind, and what writers should do about it: the
//! estimated bytes compaction still has to rewrite, and from it and the L0
//! file count, whether writes proceed, slow down or stop.

use crate::version::Version;

use super::picker::PickerOptions;

/// Write throttling advice from [`write_pressure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteStall {
    /// Writes proceed.
    None,
    /// Each write is delayed a little, so compaction can catch up.
    Slowdown,
    /// Writes wait until compaction catches up.
    Stop,
}

/// Estimated bytes compaction must rewrite to bring every level within
/// target. L0 at or over its trigger contributes its bytes plus L1's (it
/// merges into L1); each Ln over target contributes its excess times
/// `(1 + multiplier)` (the excess plus the share of Ln+1 it merges with),
/// and the excess is carried into Ln+1's size, as in RocksDB's estimate.
pub fn pending_compaction_bytes(version: &Version, opts: &PickerOptions) -> u64 {
    let last = opts.num_levels() - 1;
    let mut pending: u64 = 0;
    let mut carry: u64 = 0;
    if version.num_files(0) >= opts.l0_compaction_trigger.max(1) {
        carry = version.level_bytes(0);
        pending = carry.saturating_add(version.level_bytes(1));
    }
    for level in 1..last {
        let bytes = version.level_bytes(level).saturating_add(carry);
        let excess = bytes.saturating_sub(opts.target_bytes(level));
        let cost = excess as f64 * (1.0 + opts.level_multiplier.max(1.0));
        pending = pending.saturating_add(if cost >= u64::MAX as f64 {
            u64::MAX
        } else {
            cost as u64
        });
        carry = excess;
    }
    pending
}

/// Whether writes should proceed, slow down or stop, from the L0 file count
/// and the estimated pending compaction bytes.
pub fn write_pressure(version: &Version, opts: &PickerOptions) -> WriteStall {
    let l0 = version.num_files(0);
    let pending = pending_compaction_bytes(version, opts);
    if l0 >= opts.l0_stop_trigger || pending >= opts.hard_pending_compaction_bytes {
        WriteStall::Stop
    } else if l0 >= opts.l0_slowdown_trigger || pending >= opts.soft_pending_compaction_bytes {
        WriteStall::Slowdown
    } else {
        WriteStall::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::tests::{meta, version_with};
    use crate::version::FileMeta;

    #[test]
    fn write_pressure_thresholds() {
        let o = PickerOptions {
            soft_pending_compaction_bytes: 1000,
            hard_pending_compaction_bytes: 5000,
            level_base_bytes: 100,
            level_multiplier: 10.0,
            target_file_size: 10,
            ..Default::default()
        };
        let l0 = |n: u64| -> Vec<(usize, FileMeta)> {
            (1..=n).map(|i| (0, meta(i, "a", "b", 1))).collect()
        };
        assert_eq!(write_pressure(&version_with(&l0(7)), &o), WriteStall::None);
        assert_eq!(
            write_pressure(&version_with(&l0(8)), &o),
            WriteStall::Slowdown
        );
        assert_eq!(write_pressure(&version_with(&l0(12)), &o), WriteStall::Stop);
        let v = version_with(&[(1, meta(1, "a", "b", 100))]);
        assert_eq!(pending_compaction_bytes(&v, &o), 0);
        let v = version_with(&[(1, meta(1, "a", "b", 200))]);
        // 100 over L1's target, times (1 + 10).
        assert_eq!(pending_compaction_bytes(&v, &o), 1100);
        assert_eq!(write_pressure(&v, &o), WriteStall::Slowdown);
        let v = version_with(&[(1, meta(1, "a", "b", 600))]);
        assert_eq!(write_pressure(&v, &o), WriteStall::Stop);
    }
}
