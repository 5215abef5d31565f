//! Entries that expire: an expiry time stored with each entry (in the
//! first 8 bytes of the value, or the last 8 bytes of the key), an
//! [`ExpiryFilter`] that removes expired entries when compaction rewrites
//! them, and reads that never return an expired entry, even before that.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use quietkv::ttl::{self, ExpiryFilter};
//! # fn main() -> quietkv::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let opts = quietkv::Options::default()
//!     .compaction_filter(Some(Arc::new(ExpiryFilter::in_value())));
//! let db = quietkv::Db::open(dir.path(), opts)?;
//! db.put(b"session:1", ttl::with_ttl(b"alice", Duration::from_secs(3600)))?;
//! db.put(b"session:2", ttl::with_ttl(b"bob", Duration::ZERO))?; // already expired
//! let stored = db.get(b"session:1")?.unwrap();
//! assert_eq!(ttl::payload(&stored), Some(&b"alice"[..]));
//! assert_eq!(db.get(b"session:2")?, None);
//! # Ok(())
//! # }
//! ```
//!
//! The expiry is whole seconds since the Unix epoch, big-endian, so keys
//! with the expiry as their suffix still sort by the rest of the key first.
//! An entry without room for an expiry (shorter than 8 bytes) never
//! expires. Expiry follows the system clock of the process reading or
//! compacting: a clock set back makes expired entries readable again until
//! compaction removes them.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::compaction::user_filter::{CompactionFilter, FilterDecision};

/// Bytes of the stored expiry.
pub const EXPIRY_LEN: usize = 8;

fn seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `value` with `expires_at` in front, as [`ExpiryFilter::in_value`] reads
/// it.
pub fn with_expiry(value: impl AsRef<[u8]>, expires_at: SystemTime) -> Vec<u8> {
    let value = value.as_ref();
    let mut out = Vec::with_capacity(EXPIRY_LEN + value.len());
    out.extend_from_slice(&seconds(expires_at).to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// `value` expiring `ttl` from now (in whole seconds, rounded down).
pub fn with_ttl(value: impl AsRef<[u8]>, ttl: Duration) -> Vec<u8> {
    with_expiry(value, SystemTime::now() + ttl)
}

/// The expiry of a stored value written by [`with_expiry`]; `None` if it is
/// too short to hold one.
pub fn expiry(stored: &[u8]) -> Option<SystemTime> {
    let head: [u8; EXPIRY_LEN] = stored.get(..EXPIRY_LEN)?.try_into().ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(u64::from_be_bytes(head)))
}

/// The user's value inside a stored value written by [`with_expiry`].
pub fn payload(stored: &[u8]) -> Option<&[u8]> {
    stored.get(EXPIRY_LEN..)
}

/// `key` with `expires_at` appended, as [`ExpiryFilter::in_key_suffix`]
/// reads it.
pub fn key_with_expiry(key: impl AsRef<[u8]>, expires_at: SystemTime) -> Vec<u8> {
    let key = key.as_ref();
    let mut out = Vec::with_capacity(key.len() + EXPIRY_LEN);
    out.extend_from_slice(key);
    out.extend_from_slice(&seconds(expires_at).to_be_bytes());
    out
}

/// Where an entry keeps its expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    ValuePrefix,
    KeySuffix,
}

/// A source of the current time (the system clock, or a test's).
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// Removes expired entries in compaction and hides them from reads; see
/// the [module docs](self).
#[derive(Clone)]
pub struct ExpiryFilter {
    place: Place,
    clock: Clock,
}

impl std::fmt::Debug for ExpiryFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpiryFilter")
            .field("place", &self.place)
            .finish()
    }
}

impl ExpiryFilter {
    /// Expiry in the first 8 bytes of the value ([`with_expiry`]).
    pub fn in_value() -> Self {
        ExpiryFilter {
            place: Place::ValuePrefix,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// Expiry in the last 8 bytes of the key ([`key_with_expiry`]).
    pub fn in_key_suffix() -> Self {
        ExpiryFilter {
            place: Place::KeySuffix,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// The same filter reading the time from `clock` (for tests).
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    fn expired(&self, key: &[u8], value: &[u8]) -> bool {
        let stamp = match self.place {
            Place::ValuePrefix => value.get(..EXPIRY_LEN),
            Place::KeySuffix => key.len().checked_sub(EXPIRY_LEN).map(|at| &key[at..]),
        };
        let Some(stamp) = stamp else {
            return false;
        };
        let at = u64::from_be_bytes(stamp.try_into().expect("8 bytes"));
        seconds((self.clock)()) >= at
    }
}

impl CompactionFilter for ExpiryFilter {
    fn filter(&self, key: &[u8], value: &[u8]) -> FilterDecision {
        if self.expired(key, value) {
            FilterDecision::Remove
        } else {
            FilterDecision::Keep
        }
    }

    fn hides(&self, key: &[u8], value: &[u8]) -> bool {
        self.expired(key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_round_trips_in_value_and_key() {
        let t = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let v = with_expiry(b"hello", t);
        assert_eq!(expiry(&v), Some(t));
        assert_eq!(payload(&v), Some(&b"hello"[..]));
        assert_eq!(expiry(b"short"), None);
        let clock_at = |s: u64| -> Clock { Arc::new(move || UNIX_EPOCH + Duration::from_secs(s)) };
        let f = ExpiryFilter::in_value().with_clock(clock_at(999_999));
        assert!(!f.hides(b"k", &v));
        assert_eq!(f.filter(b"k", &v), FilterDecision::Keep);
        let f = f.with_clock(clock_at(1_000_000));
        assert!(f.hides(b"k", &v));
        assert_eq!(f.filter(b"k", &v), FilterDecision::Remove);
        assert!(
            !f.hides(b"k", b"short"),
            "no room for an expiry: never expires"
        );
        let k = key_with_expiry(b"user:1", t);
        let f = ExpiryFilter::in_key_suffix().with_clock(clock_at(1_000_001));
        assert!(f.hides(&k, b""));
        assert!(!f.hides(b"tiny", b"anything-long-enough"));
        // Big-endian: keys with the same prefix sort by expiry.
        assert!(key_with_expiry(b"a", t) < key_with_expiry(b"a", t + Duration::from_secs(1)));
    }
}
