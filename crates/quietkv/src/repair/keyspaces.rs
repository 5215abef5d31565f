//! The keyspace catalogue of a database being repaired: which keyspaces
//! the repaired database has, under which names and table options, and
//! where each table and WAL entry belongs.
//!
//! The catalogue comes from the usable manifest prefix (ids, names, table
//! options, drops, the next keyspace id, log numbers). Tables record their
//! keyspace id (see `TableProperties`), and WAL entries carry it (the
//! keyspace markers of a write batch), so data is never put into the
//! default keyspace because its keyspace is unknown. An id no usable
//! manifest records, in a table (or, with no usable manifest at all, in a
//! WAL record), is *adopted*: the keyspace is recreated under the name
//! `recovered-<id>` with the repair's table options and reported, so its
//! data stays readable and the user can copy it where it belongs. An id
//! below the manifest's next keyspace id that it no longer lists was
//! dropped: its data stays dropped.

use std::collections::BTreeMap;

use super::manifest::OldManifest;
use crate::db::FIRST_KEYSPACE_ID;
use crate::error::Result;
use crate::keyspace::def::KeyspaceDef;
use crate::keyspace::KeyspaceOptions;
use crate::options::Options;
use crate::table::TableOptions;
use crate::version::{FileMeta, KeyspaceEdit, VersionEdit};

/// A keyspace besides the default one that the repaired database has.
pub(super) struct Entry {
    pub def: KeyspaceDef,
    /// Adopted: no usable manifest records it (see the module docs).
    pub adopted: bool,
    /// WALs below this hold none of its data that is not in its tables
    /// (0: every WAL may).
    pub log_number: u64,
}

/// Whom an id found in a table or WAL entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
    /// A keyspace of the catalogue (or the default one).
    Live,
    /// A keyspace the manifest records as dropped.
    Dropped,
    /// No usable manifest records it.
    Unknown,
}

pub(super) struct Catalogue {
    pub keyspaces: BTreeMap<u32, Entry>,
    /// The default keyspace's log number.
    default_log: u64,
    /// The id the next created keyspace gets.
    pub next_id: u32,
    /// Whether a usable manifest gave the catalogue: only then is an id
    /// below `next_id` that it lacks known to be dropped.
    pub from_manifest: bool,
}

impl Catalogue {
    /// The catalogue the usable manifest `old` records; empty without one.
    pub fn new(old: Option<&OldManifest>) -> Catalogue {
        let Some(m) = old else {
            return Catalogue {
                keyspaces: BTreeMap::new(),
                default_log: 0,
                next_id: FIRST_KEYSPACE_ID,
                from_manifest: false,
            };
        };
        // A keyspace's recorded log number may be older than the
        // database's: the database's then holds (as in recovery).
        let log = |own: Option<u64>| own.unwrap_or(0).max(m.log_number);
        Catalogue {
            keyspaces: m
                .keyspaces
                .iter()
                .map(|(&id, k)| {
                    (
                        id,
                        Entry {
                            def: k.def.clone(),
                            adopted: false,
                            log_number: log(k.log_number),
                        },
                    )
                })
                .collect(),
            default_log: log(m.default_log),
            next_id: m.next_keyspace_id.max(FIRST_KEYSPACE_ID),
            from_manifest: true,
        }
    }

    pub fn owner(&self, id: u32) -> Owner {
        if id == 0 || self.keyspaces.contains_key(&id) {
            Owner::Live
        } else if self.from_manifest && id < self.next_id {
            Owner::Dropped
        } else {
            Owner::Unknown
        }
    }

    /// WALs below this hold none of keyspace `id`'s data that is not in
    /// its tables.
    pub fn log_number(&self, id: u32) -> u64 {
        if id == 0 {
            self.default_log
        } else {
            self.keyspaces.get(&id).map_or(0, |k| k.log_number)
        }
    }

    /// How keyspace `id`'s tables are written: its own table options (the
    /// repair's for the default keyspace and adopted ones), and its id.
    pub fn table_options(&self, id: u32, opts: &Options) -> TableOptions {
        let base = opts.table_options();
        TableOptions {
            keyspace_id: id,
            ..match self.keyspaces.get(&id) {
                Some(k) => k.def.table_options(base),
                None => base,
            }
        }
    }

    /// Recreates unknown keyspace `id` as `recovered-<id>` (a suffix
    /// added if a keyspace has that name) with the repair's table options;
    /// returns the name.
    pub fn adopt(&mut self, id: u32, opts: &Options) -> Result<String> {
        let taken = |name: &str| self.keyspaces.values().any(|k| k.def.name == name);
        let mut name = format!("recovered-{id}");
        let mut n = 1;
        while taken(&name) {
            n += 1;
            name = format!("recovered-{id}-{n}");
        }
        let def = KeyspaceOptions::default().definition(&name, opts)?;
        self.keyspaces.insert(
            id,
            Entry {
                def,
                adopted: true,
                log_number: 0,
            },
        );
        self.next_id = self.next_id.max(id.saturating_add(1));
        Ok(name)
    }

    /// The parts of the repaired database's manifest edit that record the
    /// keyspaces, each with its `tables` and `wal_number` (the new, empty
    /// WAL) as its log number; nothing when the database never had another
    /// keyspace, so such a database is written as before keyspaces existed.
    pub fn parts(
        &self,
        tables: &BTreeMap<u32, Vec<(usize, FileMeta)>>,
        wal_number: u64,
    ) -> (Vec<KeyspaceEdit>, Option<u32>) {
        let next = (self.next_id > FIRST_KEYSPACE_ID).then_some(self.next_id);
        if self.keyspaces.is_empty() {
            return (Vec::new(), next);
        }
        let mut parts = vec![KeyspaceEdit {
            id: 0,
            log_number: Some(wal_number),
            ..KeyspaceEdit::default()
        }];
        for (&id, k) in &self.keyspaces {
            let mut edit = VersionEdit::new();
            for (level, meta) in tables.get(&id).into_iter().flatten() {
                edit.add_file(*level, meta.clone());
            }
            parts.push(KeyspaceEdit {
                id,
                create: Some(k.def.clone()),
                log_number: Some(wal_number),
                edit,
            });
        }
        (parts, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_manifest_every_id_is_unknown_and_adoption_names_it() {
        let opts = Options::default();
        let mut c = Catalogue::new(None);
        assert_eq!(c.owner(0), Owner::Live);
        assert_eq!(c.owner(3), Owner::Unknown);
        assert_eq!(c.adopt(3, &opts).unwrap(), "recovered-3");
        assert_eq!(c.owner(3), Owner::Live);
        assert_eq!(c.next_id, 4);
        assert_eq!(c.table_options(3, &opts).keyspace_id, 3);
        // A name already taken gets a suffix.
        c.keyspaces.get_mut(&3).unwrap().def.name = "recovered-5".into();
        assert_eq!(c.adopt(5, &opts).unwrap(), "recovered-5-2");
        let (parts, next) = c.parts(&BTreeMap::new(), 9);
        assert_eq!(next, Some(6));
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].id, 0);
        assert!(parts.iter().all(|p| p.log_number == Some(9)));
    }
}
