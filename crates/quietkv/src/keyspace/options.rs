//! The options a keyspace can have of its own.

use std::sync::Arc;

use crate::compaction::CompactionFilter;
use crate::error::{Error, Result};
use crate::keyspace::def::KeyspaceDef;
use crate::options::Options;
use crate::table::Compression;

/// Options of a keyspace, for [`Db::keyspace`](crate::Db::keyspace). Each
/// one left unset takes the database's [`Options`] value when the
/// keyspace is created.
///
/// The table options (block size, bloom bits per key, compression) are
/// recorded in the manifest when the keyspace is created and hold from
/// then on: opening an existing keyspace with one set to another value is
/// `InvalidArgument`. The compaction filter is code, not recorded: give it
/// each time the database is opened (it applies from that call on;
/// compactions of the keyspace before it run without one).
#[derive(Clone, Default)]
pub struct KeyspaceOptions {
    pub(crate) block_size: Option<usize>,
    pub(crate) bloom_bits_per_key: Option<usize>,
    pub(crate) compression: Option<Compression>,
    pub(crate) compaction_filter: Option<Arc<dyn CompactionFilter>>,
}

impl KeyspaceOptions {
    /// Uncompressed size of a data block of the keyspace's tables.
    #[must_use]
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = Some(bytes);
        self
    }

    /// Bloom filter bits per key of the keyspace's tables (0 = none).
    #[must_use]
    pub fn bloom_bits_per_key(mut self, bits: usize) -> Self {
        self.bloom_bits_per_key = Some(bits);
        self
    }

    /// Per-block compression of the keyspace's tables.
    #[must_use]
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = Some(c);
        self
    }

    /// The keyspace's [`CompactionFilter`] (see
    /// [`Options::compaction_filter`] for what it does).
    #[must_use]
    pub fn compaction_filter(mut self, f: Arc<dyn CompactionFilter>) -> Self {
        self.compaction_filter = Some(f);
        self
    }

    /// The definition a new keyspace `name` gets: these options, the
    /// database's for the rest.
    pub(crate) fn definition(&self, name: &str, db: &Options) -> Result<KeyspaceDef> {
        let def = KeyspaceDef {
            name: name.to_string(),
            block_size: self.block_size.unwrap_or(db.block_size) as u64,
            bloom_bits_per_key: self.bloom_bits_per_key.unwrap_or(db.bloom_bits_per_key) as u64,
            compression: self.compression.unwrap_or(db.compression),
        };
        def.validate()?;
        Ok(def)
    }

    /// `InvalidArgument` naming the first option set to another value
    /// than the existing keyspace `def` was created with.
    pub(crate) fn check_matches(&self, def: &KeyspaceDef) -> Result<()> {
        let differs = |what: &str, given: String, recorded: String| {
            Err(Error::invalid(format!(
                "keyspace {:?} was created with {what} {recorded}, not {given}: its table \
                 options cannot change",
                def.name
            )))
        };
        if let Some(b) = self.block_size.filter(|&b| b as u64 != def.block_size) {
            return differs("block_size", b.to_string(), def.block_size.to_string());
        }
        if let Some(b) = self
            .bloom_bits_per_key
            .filter(|&b| b as u64 != def.bloom_bits_per_key)
        {
            return differs(
                "bloom_bits_per_key",
                b.to_string(),
                def.bloom_bits_per_key.to_string(),
            );
        }
        if let Some(c) = self.compression.filter(|&c| c != def.compression) {
            return differs(
                "compression",
                format!("{c:?}"),
                format!("{:?}", def.compression),
            );
        }
        Ok(())
    }

    /// Whether a table option is set (the default keyspace's come from
    /// the database's [`Options`] only).
    pub(crate) fn sets_table_options(&self) -> bool {
        self.block_size.is_some() || self.bloom_bits_per_key.is_some() || self.compression.is_some()
    }
}

impl std::fmt::Debug for KeyspaceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyspaceOptions")
            .field("block_size", &self.block_size)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("compression", &self.compression)
            .field("compaction_filter", &self.compaction_filter.is_some())
            .finish()
    }
}
