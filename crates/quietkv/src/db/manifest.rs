//! Manifest snapshots and rotation.
//!
//! A manifest starts with one edit describing the whole state (the
//! snapshot) and grows by one edit per install. Open writes a fresh one;
//! while the database runs, [`Inner::install`](super::Inner::install)
//! calls [`maybe_rotate`] so a long-lived database does not grow its
//! manifest without bound: once the manifest passes
//! `Options::max_manifest_size`, a new manifest holding only a snapshot is
//! written and synced, CURRENT is switched to it (temporary file, rename,
//! directory sync), and the old one becomes obsolete.
//!
//! A crash before CURRENT names the new manifest leaves the old one in
//! charge (the new file is a leftover with a higher number, deleted at the
//! next open); after, the new one, which holds the same state.

use std::path::Path;

use quietio::{IoClass, IoEnv};

use super::state::{Inner, State};
use crate::error::{Error, Result};
use crate::fileio::LogFile;
use crate::filenames::{manifest_name, CURRENT};
use crate::key::SeqNo;
use crate::keyspace::tree::Tree;
use crate::record_log::LogWriter;
use crate::version::{KeyspaceEdit, Version, VersionEdit, NUM_LEVELS};
use crate::wal::WalSet;

/// One edit that, replayed alone, gives `version`, the WAL state `wals`,
/// the file number and sequence counters and the database id: what a
/// manifest must start with so a reopen from it finds (and verifies) the
/// same tables and WALs as a reopen from the manifest it replaces.
///
/// `keyspaces` are the other keyspaces' parts ([`keyspace_parts`]); with
/// none, and no keyspace ever created, the edit is the one written before
/// keyspaces existed.
pub(crate) fn snapshot_edit(
    version: &Version,
    keyspaces: Vec<KeyspaceEdit>,
    next_keyspace_id: u32,
    wals: &WalSet,
    next_file: u64,
    last_seq: SeqNo,
    db_id: u64,
) -> VersionEdit {
    let mut edit = files_edit(version);
    edit.keyspaces = keyspaces;
    edit.next_keyspace_id = (next_keyspace_id > FIRST_KEYSPACE_ID).then_some(next_keyspace_id);
    edit.log_number = Some(wals.log_number());
    edit.live_wal = wals.live();
    edit.sealed_wals = wals.sealed().collect();
    edit.next_file_number = Some(next_file);
    edit.last_sequence = Some(last_seq);
    // 0: a database created before ids existed keeps having none.
    edit.db_id = (db_id != 0).then_some(db_id);
    edit
}

/// The id of the first keyspace created (0 is the default keyspace).
pub(crate) const FIRST_KEYSPACE_ID: u32 = 1;

/// An edit that adds every table of `version` and its compact pointers.
pub(crate) fn files_edit(version: &Version) -> VersionEdit {
    let mut edit = VersionEdit::new();
    for level in 0..NUM_LEVELS {
        for f in version.files(level) {
            edit.add_file(level, (**f).clone());
        }
        if let Some(p) = version.compact_pointer(level) {
            edit.compact_pointers.push((level, p.to_vec()));
        }
    }
    edit
}

/// What a snapshot records about the keyspaces of `trees` besides the
/// default one's tables: each other keyspace's creation, log number and
/// tables, and the default keyspace's own log number when there are
/// others (alone, it is the database's).
pub(crate) fn keyspace_parts(trees: &[Tree]) -> Vec<KeyspaceEdit> {
    if trees.len() <= 1 {
        return Vec::new();
    }
    trees
        .iter()
        .map(|t| KeyspaceEdit {
            id: t.id(),
            create: t.def.clone(),
            log_number: Some(t.min_live_wal()),
            edit: if t.id() == 0 {
                VersionEdit::new()
            } else {
                files_edit(&t.version)
            },
        })
        .collect()
}

/// Creates manifest `number` holding `snapshot` (stamped with the
/// manifest's own number), synced. On failure the file is removed (best
/// effort): nothing names it yet.
pub(crate) fn write_new(
    env: &IoEnv,
    dir: &Path,
    number: u64,
    snapshot: &VersionEdit,
) -> Result<LogWriter<LogFile>> {
    let path = dir.join(manifest_name(number));
    // Every manifest names itself, and says that the WALs it may replay
    // (all written by this version) start with identity records.
    let snapshot = VersionEdit {
        manifest_number: Some(number),
        wals_have_identity: true,
        ..snapshot.clone()
    };
    let result = (|| {
        let mut w = LogWriter::new(LogFile::Seq(env.create(&path, IoClass::Manifest)?));
        w.add_record(&snapshot.encode())?;
        w.sync()?;
        Ok(w)
    })();
    if result.is_err() {
        let _ = env.remove_file(&path);
    }
    result
}

/// Whether CURRENT (as the file system shows it now, durable or not) names
/// manifest `number`.
fn current_names(env: &IoEnv, dir: &Path, number: u64) -> bool {
    env.read_file(&dir.join(crate::filenames::CURRENT))
        .is_ok_and(|c| c.strip_suffix(b"\n").unwrap_or(&c) == manifest_name(number).as_bytes())
}

/// The size past which the manifest is rotated: the option, or twice the
/// snapshot it started with if that is larger, so a version whose snapshot
/// alone outgrows the option is not rewritten on every install.
fn rotation_threshold(max_manifest_size: u64, snapshot_bytes: u64) -> u64 {
    max_manifest_size.max(snapshot_bytes.saturating_mul(2))
}

/// Rotates the manifest if it has passed its size limit. Called with the
/// state lock held, after an edit is durable in the current manifest, so
/// the edit stays installed whatever happens here:
///
/// * the new manifest cannot be written: it is removed, the old one stays
///   in charge and the next install tries again;
/// * CURRENT cannot be switched and still names the old manifest (the
///   rename did not happen): as above;
/// * CURRENT names the new manifest but the switch failed (the directory
///   sync): whether the rename reached the disk is unknown, so both
///   manifests are kept (the newer is not obsolete to
///   [`Inner::delete_obsolete_files`]), the old one is closed, and writes
///   and installs are refused until reopen.
pub(crate) fn maybe_rotate(inner: &Inner, st: &mut State) {
    let Some(current) = st.manifest.as_ref() else {
        return;
    };
    let threshold = rotation_threshold(inner.opts.max_manifest_size, st.manifest_snapshot_bytes);
    if current.bytes_written() <= threshold {
        return;
    }
    let number = st.new_file_number();
    let snapshot = snapshot_edit(
        &st.default_tree().version,
        keyspace_parts(&st.trees),
        st.next_keyspace_id,
        &st.wals,
        st.next_file,
        inner.visible_seq.load(std::sync::atomic::Ordering::Acquire),
        inner.db_id,
    );
    let writer = match write_new(&inner.env, &inner.dir, number, &snapshot) {
        Ok(w) => w,
        Err(e) => {
            log::warn!(
                "quietkv: {}: cannot rotate the manifest, keeping MANIFEST-{:06}: {e}",
                inner.dir.display(),
                st.manifest_number
            );
            return;
        }
    };
    if let Err(e) = set_current(&inner.env, &inner.dir, number) {
        if current_names(&inner.env, &inner.dir, st.manifest_number) {
            // The rename did not happen: the old manifest is still in
            // charge, and stays so after a crash.
            log::warn!(
                "quietkv: {}: cannot switch CURRENT to a rotated manifest, keeping MANIFEST-{:06}: {e}",
                inner.dir.display(),
                st.manifest_number
            );
            let _ = inner
                .env
                .remove_file(&inner.dir.join(manifest_name(number)));
            return;
        }
        // The rename happened (or CURRENT cannot be read) but may not be
        // durable: both manifests describe the state as it is now, and
        // which one a crash leaves in charge is unknown, so neither may
        // take another edit: `install` fails from here on with this error.
        inner.set_bg_error(st, &e);
        st.manifest = None;
        return;
    }
    st.manifest_snapshot_bytes = writer.bytes_written();
    st.manifest = Some(writer);
    st.manifest_number = number;
    inner.counters.record_manifest_rotation();
}

/// Points CURRENT at a manifest: write a temporary file, sync it, rename
/// it over CURRENT, sync the directory.
pub(crate) fn set_current(env: &IoEnv, dir: &Path, manifest_number: u64) -> Result<()> {
    let tmp = dir.join(format!("CURRENT.{manifest_number}.tmp"));
    let mut w = env.create(&tmp, IoClass::Manifest)?;
    w.write_all(format!("{}\n", manifest_name(manifest_number)).as_bytes())?;
    w.finish(true)?;
    env.rename(&tmp, &dir.join(CURRENT))
        .map_err(|e| Error::io(e, "cannot install CURRENT").with_file(&tmp))?;
    env.sync_dir()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::FileMeta;

    fn table(number: u64, lo: &str, hi: &str) -> FileMeta {
        FileMeta {
            number,
            size: 100 * number,
            smallest: crate::key::make_internal_key(lo.as_bytes(), 5, crate::key::ValueKind::Put),
            largest: crate::key::make_internal_key(hi.as_bytes(), 3, crate::key::ValueKind::Put),
            smallest_seq: 3,
            largest_seq: 5,
            num_entries: 2,
            num_deletes: 0,
            num_range_deletes: 0,
        }
    }

    #[test]
    fn a_snapshot_replayed_alone_gives_the_same_version_wals_and_counters() {
        let mut history = vec![VersionEdit::new(); 4];
        history[0].add_file(0, table(10, "a", "c"));
        history[0].add_file(2, table(11, "d", "f"));
        history[0].log_number = Some(12);
        history[0].live_wal = Some(12);
        history[0].db_id = Some(77);
        history[1].sealed_wals.push((12, 4096));
        history[1].live_wal = Some(13);
        history[1].compact_pointers.push((
            2,
            crate::key::make_internal_key(b"e", 4, crate::key::ValueKind::Put),
        ));
        history[2].sealed_wals.push((13, 512));
        history[2].live_wal = Some(15);
        history[2].add_file(1, table(14, "g", "h"));
        history[2].delete_file(0, 10);
        history[3].log_number = Some(13);

        let mut version = Version::new();
        let mut wals = WalSet::default();
        for e in &history {
            version = version.apply(e).unwrap();
            wals.apply(e);
        }
        let snap = snapshot_edit(&version, Vec::new(), FIRST_KEYSPACE_ID, &wals, 16, 900, 77);
        let decoded = VersionEdit::decode(&snap.encode()).unwrap();
        let rebuilt = Version::new().apply(&decoded).unwrap();
        let mut rebuilt_wals = WalSet::default();
        rebuilt_wals.apply(&decoded);

        for level in 0..NUM_LEVELS {
            let numbers = |v: &Version| v.files(level).iter().map(|f| f.number).collect::<Vec<_>>();
            assert_eq!(numbers(&rebuilt), numbers(&version), "level {level}");
            assert_eq!(
                rebuilt.compact_pointer(level),
                version.compact_pointer(level)
            );
        }
        assert_eq!(rebuilt_wals, wals);
        assert_eq!(rebuilt_wals.sealed_len(13), Some(512));
        assert_eq!(
            rebuilt_wals.sealed_len(12),
            None,
            "12 is below the log number"
        );
        assert_eq!(decoded.next_file_number, Some(16));
        assert_eq!(decoded.last_sequence, Some(900));
        assert_eq!(decoded.db_id, Some(77));
        assert_eq!(
            snapshot_edit(&version, Vec::new(), FIRST_KEYSPACE_ID, &wals, 16, 900, 0).db_id,
            None
        );
    }

    #[test]
    fn the_threshold_grows_with_a_snapshot_larger_than_the_option() {
        assert_eq!(rotation_threshold(4096, 100), 4096);
        assert_eq!(rotation_threshold(4096, 3000), 6000);
        assert_eq!(rotation_threshold(4096, u64::MAX), u64::MAX);
    }
}
