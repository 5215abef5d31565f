//! Reading the readable part of an old manifest, for `repair`.
//!
//! Recovery refuses a manifest with any damaged edit; repair uses the
//! longest prefix of edits that are intact, decode and apply. Edits are
//! deltas, so nothing after the first bad one can be used. The manifest
//! CURRENT names is preferred; if CURRENT is missing, unreadable or names a
//! manifest that yields no edit, the other manifests are tried newest first.
//! The usable edits also give the keyspace catalogue: each keyspace's id,
//! name, table options, tables and log number, and the next keyspace id.

use std::collections::BTreeMap;
use std::io::ErrorKind as IoErrorKind;
use std::path::{Path, PathBuf};

use quietio::IoEnv;

use super::Dropped;
use crate::db::recovery::{apply_keyspaces, Recovered, RecoveredKeyspace};
use crate::error::{Error, Result};
use crate::filenames::{self, manifest_name, FileKind, CURRENT};
use crate::key::SeqNo;
use crate::keyspace::def::KeyspaceDef;
use crate::record_log::salvage::{salvage_records, Salvaged};
use crate::table::identity::db_id_after_edit;
use crate::version::{Version, VersionBuilder, VersionEdit};
use crate::wal::WalSet;

/// What the usable edits of one manifest say.
pub(super) struct OldManifest {
    pub path: PathBuf,
    pub edits: u64,
    pub version: Version,
    pub log_number: u64,
    pub next_file: u64,
    pub last_seq: SeqNo,
    /// 0 = the manifest records none.
    pub db_id: u64,
    /// The WALs its edits require (sealed ones and the live one).
    pub wals: WalSet,
    /// Whether every WAL it may replay starts with an identity record.
    pub wals_have_identity: bool,
    /// The first edit that could not be used, if any.
    pub damage: Option<Dropped>,
    /// The keyspaces besides the default one the usable edits leave.
    pub keyspaces: BTreeMap<u32, RecoveredKeyspace>,
    /// The default keyspace's own log number, if recorded.
    pub default_log: Option<u64>,
    /// The id the next created keyspace gets: an id below it missing from
    /// `keyspaces` is a dropped keyspace.
    pub next_keyspace_id: u32,
}

/// The tree the usable edits build, for every keyspace.
struct Trees {
    default: VersionBuilder,
    keyspaces: BTreeMap<u32, (KeyspaceDef, VersionBuilder, Option<u64>)>,
    /// Only its keyspace fields (next keyspace id, default log number) are
    /// used.
    catalogue: Recovered,
}

impl Trees {
    fn new() -> Trees {
        Trees {
            default: VersionBuilder::new(&Version::new()),
            keyspaces: BTreeMap::new(),
            catalogue: Recovered::default(),
        }
    }

    /// Applies `e` as recovery does; on error the trees are half updated
    /// and must be rebuilt.
    fn apply(&mut self, e: &VersionEdit) -> Result<()> {
        self.default.apply(e)?;
        apply_keyspaces(e, &mut self.keyspaces, &mut self.catalogue)
    }

    fn replay(edits: &[VersionEdit]) -> Result<Trees> {
        let mut t = Trees::new();
        for e in edits {
            t.apply(e)?;
        }
        Ok(t)
    }
}

/// The best manifest to guide the repair, and why others were passed over.
/// `Err` only if CURRENT or a manifest could not be read at all (an error
/// that says nothing about its bytes): the repair stops there.
/// `tables_db_id`: the database id most tables record (0: unknown); a
/// manifest recording another one is another database's and is passed
/// over.
pub(super) fn read_best(
    env: &IoEnv,
    dir: &Path,
    manifests: &[u64],
    tables_db_id: u64,
) -> Result<(Option<OldManifest>, Vec<String>)> {
    let mut notes = Vec::new();
    let mut candidates: Vec<u64> = manifests.to_vec();
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    match named_by_current(env, dir)? {
        Ok(n) if candidates.contains(&n) => {
            candidates.retain(|&c| c != n);
            candidates.insert(0, n);
        }
        Ok(n) => notes.push(format!(
            "CURRENT names {}, which is missing",
            manifest_name(n)
        )),
        Err(why) => notes.push(why),
    }
    for n in candidates {
        let path = dir.join(manifest_name(n));
        let data = match env.read_file(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == IoErrorKind::NotFound => {
                notes.push(format!("{}: vanished during the repair", path.display()));
                continue;
            }
            Err(e) => return Err(Error::io(e, "cannot read the manifest").with_file(&path)),
        };
        match read_prefix(&path, &data) {
            Ok(m) if m.db_id != 0 && tables_db_id != 0 && m.db_id != tables_db_id => {
                notes.push(format!(
                    "{}: records database {:016x}, but the tables were written by database {tables_db_id:016x}: another database's manifest, not used",
                    path.display(),
                    m.db_id
                ));
            }
            Ok(m) => return Ok((Some(m), notes)),
            Err(why) => notes.push(format!("{}: {why}", path.display())),
        }
    }
    Ok((None, notes))
}

/// The manifest CURRENT names, or why it names none (`Err` if CURRENT
/// exists but cannot be read).
fn named_by_current(env: &IoEnv, dir: &Path) -> Result<std::result::Result<u64, String>> {
    let path = dir.join(CURRENT);
    let data = match env.read_file(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == IoErrorKind::NotFound => {
            return Ok(Err("CURRENT is missing".to_string()))
        }
        Err(e) => return Err(Error::io(e, "cannot read CURRENT").with_file(&path)),
    };
    let name = String::from_utf8_lossy(&data);
    Ok(match filenames::parse(name.trim_end_matches('\n')) {
        Some(FileKind::Manifest(n)) => Ok(n),
        _ => Err(format!("CURRENT does not name a manifest: {name:?}")),
    })
}

/// The usable prefix of the manifest image `data` read from `path`; `Err`
/// (why) if not even its first edit is usable.
fn read_prefix(path: &Path, data: &[u8]) -> std::result::Result<OldManifest, String> {
    let mut m = OldManifest {
        path: path.to_path_buf(),
        edits: 0,
        version: Version::new(),
        log_number: 0,
        next_file: 0,
        last_seq: 0,
        db_id: 0,
        wals: WalSet::default(),
        wals_have_identity: false,
        damage: None,
        keyspaces: BTreeMap::new(),
        default_log: None,
        next_keyspace_id: 0,
    };
    let mut trees = Trees::new();
    let mut applied: Vec<VersionEdit> = Vec::new();
    for item in salvage_records(data, None) {
        let problem = match item {
            Salvaged::Identity { offset, .. } => {
                m.damage = Some(Dropped::at(
                    path,
                    offset,
                    0,
                    "a WAL's identity record: the file is not a manifest",
                ));
                break;
            }
            Salvaged::Damaged {
                offset,
                len,
                to_end,
            } => {
                let what = if to_end {
                    "damaged or torn, with no intact edit after it"
                } else {
                    "damaged; the edits after it are not used (edits are deltas)"
                };
                m.damage = Some(Dropped::at(path, offset, len, what));
                break;
            }
            Salvaged::Record {
                offset, payload, ..
            } => {
                let result = VersionEdit::decode(&payload).and_then(|e| {
                    let id = db_id_after_edit(m.db_id, e.db_id)?;
                    if let Some(named) = e.manifest_number {
                        crate::db::check_manifest_number(path, named)?;
                    }
                    trees.apply(&e)?;
                    Ok((e, id))
                });
                match result {
                    Ok((edit, id)) => {
                        m.db_id = id;
                        m.wals.apply(&edit);
                        m.wals_have_identity |= edit.wals_have_identity;
                        if let Some(n) = edit.log_number {
                            m.log_number = n;
                        }
                        if let Some(n) = edit.next_file_number {
                            m.next_file = n;
                        }
                        if let Some(n) = edit.last_sequence {
                            m.last_seq = n;
                        }
                        applied.push(edit);
                        m.edits += 1;
                        continue;
                    }
                    Err(e) => Dropped::at(
                        path,
                        offset,
                        payload.len() as u64,
                        format!("unusable edit: {}", e.message()),
                    ),
                }
            }
        };
        // A failed apply leaves the trees half-updated: rebuild them from
        // the edits that applied.
        m.damage = Some(problem);
        trees = Trees::replay(&applied)
            .map_err(|e| format!("edits that applied once no longer apply: {e}"))?;
        break;
    }
    if m.edits == 0 {
        return Err(match &m.damage {
            Some(d) => format!(
                "no usable edit (offset {}: {})",
                d.offset.unwrap_or(0),
                d.reason
            ),
            None => "no edit".to_string(),
        });
    }
    let invalid = |e: Error| format!("its edits describe an invalid tree: {}", e.message());
    m.version = trees.default.build().map_err(invalid)?;
    for (id, (def, b, log_number)) in trees.keyspaces {
        let version = b
            .build()
            .map_err(|e| invalid(e.context(&format!("keyspace {id}"))))?;
        m.keyspaces.insert(
            id,
            RecoveredKeyspace {
                def,
                version,
                log_number,
            },
        );
    }
    m.default_log = trees.catalogue.default_log;
    m.next_keyspace_id = trees.catalogue.next_keyspace_id;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_log::LogWriter;
    use crate::version::tests::meta;
    use std::fs;

    fn read_best(dir: &Path, manifests: &[u64]) -> (Option<OldManifest>, Vec<String>) {
        let env = IoEnv::open(dir, crate::Options::default().io_options()).unwrap();
        super::read_best(&env, dir, manifests, 0).unwrap()
    }

    fn write_manifest(dir: &Path, number: u64, edits: &[VersionEdit]) -> Vec<u64> {
        let mut w = LogWriter::new(Vec::new());
        let mut offsets = Vec::new();
        for e in edits {
            offsets.push(w.bytes_written());
            w.add_record(&e.encode()).unwrap();
            w.sync().unwrap();
        }
        fs::write(dir.join(manifest_name(number)), w.into_inner()).unwrap();
        offsets
    }

    /// Flips a bit inside the record at `offset` of manifest `number`.
    fn damage_record(dir: &Path, number: u64, offset: u64) {
        let path = dir.join(manifest_name(number));
        let mut data = fs::read(&path).unwrap();
        data[offset as usize + 20] ^= 1;
        fs::write(&path, data).unwrap();
    }

    fn edits() -> Vec<VersionEdit> {
        let mut first = VersionEdit {
            log_number: Some(4),
            next_file_number: Some(6),
            last_sequence: Some(10),
            db_id: Some(42),
            ..Default::default()
        };
        first.add_file(0, meta(5, "a", "m", 100));
        let mut second = VersionEdit {
            log_number: Some(8),
            last_sequence: Some(20),
            ..Default::default()
        };
        second.add_file(0, meta(7, "b", "z", 100));
        vec![first, second]
    }

    #[test]
    fn uses_the_prefix_before_a_damaged_edit() {
        let d = tempfile::tempdir().unwrap();
        let offsets = write_manifest(d.path(), 3, &edits());
        damage_record(d.path(), 3, offsets[1]);
        fs::write(d.path().join(CURRENT), "MANIFEST-000003\n").unwrap();
        let (m, notes) = read_best(d.path(), &[3]);
        let m = m.unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(m.edits, 1);
        assert_eq!(m.version.all_file_numbers(), vec![5]);
        assert_eq!(
            (m.log_number, m.next_file, m.last_seq, m.db_id),
            (4, 6, 10, 42)
        );
        let damage = m.damage.unwrap();
        assert_eq!(damage.offset, Some(offsets[1]));
    }

    /// The keyspaces the usable edits leave: created, dropped, and the
    /// ones created after the damage unknown.
    #[test]
    fn the_prefix_gives_the_keyspace_catalogue() {
        use crate::version::KeyspaceEdit;
        let d = tempfile::tempdir().unwrap();
        let def = |name: &str| KeyspaceDef {
            name: name.into(),
            block_size: 1024,
            bloom_bits_per_key: 0,
            compression: crate::table::Compression::None,
        };
        let mut first = edits().remove(0);
        first.next_keyspace_id = Some(3);
        let mut files = VersionEdit::new();
        files.add_file(1, meta(9, "a", "c", 100));
        first.keyspaces = vec![
            KeyspaceEdit {
                id: 0,
                log_number: Some(4),
                ..KeyspaceEdit::default()
            },
            KeyspaceEdit {
                id: 1,
                create: Some(def("a")),
                log_number: Some(3),
                edit: files,
            },
            KeyspaceEdit {
                id: 2,
                create: Some(def("b")),
                ..KeyspaceEdit::default()
            },
        ];
        let drop_b = VersionEdit {
            dropped_keyspaces: vec![2],
            ..Default::default()
        };
        let create_c = VersionEdit {
            next_keyspace_id: Some(4),
            keyspaces: vec![KeyspaceEdit {
                id: 3,
                create: Some(def("a keyspace created after the damage")),
                ..KeyspaceEdit::default()
            }],
            ..Default::default()
        };
        let offsets = write_manifest(d.path(), 3, &[first, drop_b, create_c]);
        damage_record(d.path(), 3, offsets[2]);
        let (m, _) = read_best(d.path(), &[3]);
        let m = m.unwrap();
        assert_eq!(m.edits, 2);
        assert!(m.damage.is_some());
        assert_eq!((m.next_keyspace_id, m.default_log), (3, Some(4)));
        assert_eq!(m.keyspaces.keys().copied().collect::<Vec<_>>(), [1]);
        let a = &m.keyspaces[&1];
        assert_eq!((a.def.name.as_str(), a.log_number), ("a", Some(3)));
        assert_eq!(a.version.all_file_numbers(), vec![9]);
        assert_eq!(m.version.all_file_numbers(), vec![5]);
    }

    #[test]
    fn falls_back_to_the_newest_usable_manifest() {
        let d = tempfile::tempdir().unwrap();
        write_manifest(d.path(), 3, &edits()[..1]);
        write_manifest(d.path(), 9, &edits());
        // The newest one's first edit is damaged: unusable.
        let offsets = write_manifest(d.path(), 12, &edits());
        damage_record(d.path(), 12, offsets[0]);
        // CURRENT names a manifest that is gone.
        fs::write(d.path().join(CURRENT), "MANIFEST-000005\n").unwrap();
        let (m, notes) = read_best(d.path(), &[3, 9, 12]);
        let m = m.unwrap();
        assert_eq!(m.path, d.path().join(manifest_name(9)));
        assert_eq!(m.edits, 2);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("MANIFEST-000005, which is missing"));
        assert!(notes[1].contains("MANIFEST-000012"));

        // No CURRENT and no usable manifest at all.
        fs::remove_file(d.path().join(CURRENT)).unwrap();
        let (m, notes) = read_best(d.path(), &[12]);
        assert!(m.is_none());
        assert!(notes[0].contains("CURRENT is missing"), "{notes:?}");
    }
}
