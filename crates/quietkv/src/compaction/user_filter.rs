//! The user's hook into compaction: a [`CompactionFilter`] sees each key's
//! newest value as compaction rewrites it and may keep it, remove it or
//! change it (expiring sessions, dropping a tenant's keys, rewriting a
//! format), without a scan and a write per key.

/// What a [`CompactionFilter`] decides for one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterDecision {
    /// Write the entry out unchanged.
    Keep,
    /// Remove the key: compaction writes a delete in its place (or, when
    /// nothing older of the key can remain anywhere, nothing at all).
    Remove,
    /// Write this value in place of the old one, under the same key and
    /// sequence number.
    ChangeValue(Vec<u8>),
}

/// A hook compaction calls for the newest value of each key it rewrites
/// ([`Options::compaction_filter`](crate::Options::compaction_filter)).
///
/// It is never called for an entry a snapshot still needs: only values
/// newer than every live snapshot are offered, so a snapshot keeps seeing
/// what it saw. It is called on background threads, possibly on several at
/// once, and only when compaction happens to rewrite the key (which may be
/// much later than the write, or never for a key that sits alone in the
/// last level): a decision that must hold for reads right away belongs in
/// [`hides`](CompactionFilter::hides) too. Deletes are not offered.
pub trait CompactionFilter: Send + Sync + std::fmt::Debug {
    /// The decision for `key`'s newest value.
    fn filter(&self, key: &[u8], value: &[u8]) -> FilterDecision;

    /// Whether reads must already treat `key` as absent when this is its
    /// newest value (an expired entry, say), before compaction removes it.
    /// Called by every get and by iterators for each visible entry, so it
    /// must be cheap. The default hides nothing.
    fn hides(&self, key: &[u8], value: &[u8]) -> bool {
        let _ = (key, value);
        false
    }
}
