//! When the write-ahead log is made durable: the database-wide sync policy.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// When the write-ahead log is synced (`fdatasync`, or what the WAL's access
/// mode uses instead).
///
/// Whatever the policy, a write is handed to the kernel before it returns,
/// so a *process* crash loses nothing that was acknowledged; the policy
/// decides what a *power cut* (or kernel crash) may lose. A write with
/// [`WriteOptions::sync`](crate::WriteOptions::sync) set is synced before it
/// returns under every policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalSync {
    /// The engine syncs only the writes that ask for it (`WriteOptions::sync`);
    /// a group commit that holds one such write syncs once for all its
    /// writes. A power cut may lose any write not followed by a synced one.
    /// RocksDB's and LevelDB's default.
    #[default]
    None,
    /// Every write is durable before it returns; writers that arrive while a
    /// sync runs are committed together with one sync (group commit).
    Group,
    /// Every write is durable before it returns, each with a sync of its own:
    /// writers never share a sync. The slowest policy; the baseline of what
    /// group commit saves.
    PerWrite,
    /// A background thread syncs the WAL every interval; writes return
    /// before they are durable. A power cut loses at most the writes of the
    /// last interval (plus the time one sync takes). Cassandra's default
    /// (`commitlog_sync: periodic`).
    Periodic(Duration),
}

/// Shortest accepted periodic interval.
pub const MIN_PERIODIC_INTERVAL: Duration = Duration::from_millis(1);
/// Longest accepted periodic interval: beyond it `None` says what is meant.
pub const MAX_PERIODIC_INTERVAL: Duration = Duration::from_secs(3600);

impl WalSync {
    /// Whether every write is synced before it returns.
    pub fn syncs_every_write(self) -> bool {
        matches!(self, WalSync::Group | WalSync::PerWrite)
    }

    /// Whether writers may share one WAL record and sync.
    pub fn groups_writers(self) -> bool {
        self != WalSync::PerWrite
    }

    /// The background sync interval, for [`WalSync::Periodic`].
    pub fn interval(self) -> Option<Duration> {
        match self {
            WalSync::Periodic(d) => Some(d),
            _ => None,
        }
    }

    pub(crate) fn validate(self) -> Result<()> {
        if let WalSync::Periodic(d) = self {
            if !(MIN_PERIODIC_INTERVAL..=MAX_PERIODIC_INTERVAL).contains(&d) {
                return Err(Error::invalid(format!(
                    "wal_sync periodic interval must be between {} ms and {} s, got {d:?}",
                    MIN_PERIODIC_INTERVAL.as_millis(),
                    MAX_PERIODIC_INTERVAL.as_secs()
                )));
            }
        }
        Ok(())
    }
}

impl fmt::Display for WalSync {
    /// `none`, `group`, `per-write`, `periodic:MS`: what [`FromStr`] takes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalSync::None => f.write_str("none"),
            WalSync::Group => f.write_str("group"),
            WalSync::PerWrite => f.write_str("per-write"),
            WalSync::Periodic(d) => write!(f, "periodic:{}", d.as_millis()),
        }
    }
}

impl FromStr for WalSync {
    type Err = Error;

    fn from_str(s: &str) -> Result<WalSync> {
        let policy = match s {
            "none" => WalSync::None,
            "group" => WalSync::Group,
            "per-write" => WalSync::PerWrite,
            _ => {
                let ms = s.strip_prefix("periodic:").ok_or_else(|| {
                    Error::invalid(format!(
                        "unknown WAL sync policy {s:?}: expected none, group, per-write or periodic:MS"
                    ))
                })?;
                let ms: u64 = ms.parse().map_err(|_| {
                    Error::invalid(format!(
                        "WAL sync policy {s:?}: the interval must be whole milliseconds"
                    ))
                })?;
                WalSync::Periodic(Duration::from_millis(ms))
            }
        };
        policy.validate()?;
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_ones_say_what_is_expected() {
        for p in [
            WalSync::None,
            WalSync::Group,
            WalSync::PerWrite,
            WalSync::Periodic(Duration::from_millis(100)),
        ] {
            assert_eq!(p.to_string().parse::<WalSync>().unwrap(), p);
        }
        let e = "always".parse::<WalSync>().unwrap_err().to_string();
        assert!(e.contains("per-write or periodic:MS"), "{e}");
        let e = "periodic:0".parse::<WalSync>().unwrap_err().to_string();
        assert!(e.contains("between 1 ms"), "{e}");
        assert!("periodic:1.5".parse::<WalSync>().is_err());
    }

    #[test]
    fn what_each_policy_promises() {
        assert!(!WalSync::None.syncs_every_write());
        assert!(WalSync::Group.syncs_every_write() && WalSync::Group.groups_writers());
        assert!(WalSync::PerWrite.syncs_every_write() && !WalSync::PerWrite.groups_writers());
        let p = WalSync::Periodic(Duration::from_millis(5));
        assert!(!p.syncs_every_write() && p.interval() == Some(Duration::from_millis(5)));
    }
}
