//! What a configuration does to the page cache, in shared terms: per
//! direction of I/O (compaction reads, compaction writes, flush writes,
//! user reads) kept, bypassed or dropped after use, with the engine's own
//! word for it. The report and the verdict describe and recommend modes
//! from this, never from an engine's own option types.

use serde::{Deserialize, Serialize};

/// What a configuration does to the page cache in one direction of I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheUse {
    /// Through the page cache, which keeps the pages.
    Cached,
    /// Around the page cache (O_DIRECT).
    Bypassed,
    /// Through the page cache, whose pages are dropped after use
    /// (RWF_DONTCACHE, fadvise DONTNEED).
    DroppedAfterUse,
    /// Left to the engine, which could not say what it picks here.
    Unknown,
}

/// One direction: the shared effect and the engine's own word for it
/// (`direct`, `dontcache`, `auto (direct here)`), which the report prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Direction {
    pub effect: CacheUse,
    pub label: String,
}

/// What one configuration does to the page cache, per direction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCacheUse {
    pub compaction_reads: Direction,
    pub compaction_writes: Direction,
    pub flush_writes: Direction,
    pub user_reads: Direction,
    /// Further switches of the configuration that touch the cache, in the
    /// engine's words (`warm_compaction_output on`).
    pub also: Vec<String>,
    /// The configuration is the engine's defaults: nothing to configure.
    pub engine_defaults: bool,
}

impl PageCacheUse {
    /// `compaction read direct / compaction+flush write direct / user read
    /// buffered` (writes split when compaction and flush differ).
    pub fn describe(&self) -> String {
        let (cw, fw) = (&self.compaction_writes.label, &self.flush_writes.label);
        let writes = if cw == fw {
            format!("compaction+flush write {cw}")
        } else {
            format!("compaction write {cw} / flush write {fw}")
        };
        format!(
            "compaction read {} / {writes} / user read {}",
            self.compaction_reads.label, self.user_reads.label
        )
    }

    /// How to set this configuration up, for the verdict's recommendation.
    pub fn how_to_configure(&self) -> String {
        if self.engine_defaults {
            return "the engine's defaults: nothing to configure".into();
        }
        let also: String = self.also.iter().map(|a| format!("; {a}")).collect();
        format!(
            "compaction reads {}, compaction writes {}, flush writes {}; user reads stay {}{also}",
            self.compaction_reads.label,
            self.compaction_writes.label,
            self.flush_writes.label,
            self.user_reads.label
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_splits_writes_only_when_they_differ() {
        let d = |effect, label: &str| Direction {
            effect,
            label: label.into(),
        };
        let mut u = PageCacheUse {
            compaction_reads: d(CacheUse::Bypassed, "direct"),
            compaction_writes: d(CacheUse::Bypassed, "direct"),
            flush_writes: d(CacheUse::Bypassed, "direct"),
            user_reads: d(CacheUse::Cached, "buffered"),
            also: vec!["warm_compaction_output on".into()],
            engine_defaults: false,
        };
        assert_eq!(
            u.describe(),
            "compaction read direct / compaction+flush write direct / user read buffered"
        );
        assert_eq!(
            u.how_to_configure(),
            "compaction reads direct, compaction writes direct, flush writes direct; user reads stay buffered; warm_compaction_output on"
        );
        u.flush_writes = d(CacheUse::Cached, "buffered");
        assert_eq!(
            u.describe(),
            "compaction read direct / compaction write direct / flush write buffered / user read buffered"
        );
        u.engine_defaults = true;
        assert_eq!(
            u.how_to_configure(),
            "the engine's defaults: nothing to configure"
        );
    }
}
