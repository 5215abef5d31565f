//! Power-cut images: the files a power cut at this instant could leave,
//! built from the shadow model. Durable names keep their durable bytes;
//! unsynced name changes are undone (all of them, or, for a random cut,
//! all but a prefix, since a journal commits them in order).
//!
//! Unsynced bytes are cut at sector granularity: a 512-byte sector is
//! written atomically, but the sectors of a file reach the disk in any
//! order and at any time (page write-back, a torn multi-sector write). So
//! each sector holds one of its versions since the last sync: the durable
//! one or the one after some unsynced change. Two writes inside one
//! sector therefore never leave a hole between them, while a later sector
//! may be new and an earlier one old. The file's length is its length
//! after some prefix of the changes (the size is metadata, written on its
//! own).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use super::shadow::{FileState, Shadow};

/// The unit the disk writes atomically.
pub const SECTOR: u64 = 512;

/// What happens to the changes that were not made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutPolicy {
    /// Every unsynced change and name change is lost.
    DropUnsynced,
    /// Every unsynced change reached the disk; unsynced name changes are
    /// still lost.
    KeepUnsynced,
    /// A generator seeded with this picks, per file, either one moment
    /// (every sector and the length as of the same change: an in-order
    /// write-back cut short) or, per sector, any of its versions (torn and
    /// reordered write-back); and a prefix of the name changes survives.
    Random(u64),
}

/// What an image holds and how it was cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageSummary {
    /// Files in the image.
    pub files: usize,
    /// Their total length in bytes.
    pub bytes: u64,
    /// Files with unsynced changes.
    pub files_with_unsynced: usize,
    /// Sectors (of files with unsynced changes) holding a version other
    /// than the newest.
    pub sectors_behind: usize,
    /// Files whose sectors were cut at different moments.
    pub files_torn: usize,
    /// Unsynced name changes (creates, renames, removes) the cut kept: a
    /// prefix of them, for a random cut only.
    pub name_changes_kept: usize,
    /// Unsynced name changes the cut undid.
    pub name_changes_undone: usize,
}

/// splitmix64: small, seedable, good enough to pick cuts.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The files (name, bytes) a power cut leaves under `policy`.
pub(crate) fn cut(shadow: &Shadow, policy: CutPolicy) -> (Vec<(String, Vec<u8>)>, ImageSummary) {
    let mut rng = match policy {
        CutPolicy::Random(seed) => Some(Rng::new(seed)),
        _ => None,
    };
    let mut summary = ImageSummary::default();
    let mut names: BTreeMap<String, u64> = shadow.durable_names().clone();
    let changes = shadow.name_changes();
    // Unsynced name changes are undone unless a random cut keeps a prefix.
    let kept_names = match &mut rng {
        Some(r) => r.below(changes.len() as u64 + 1) as usize,
        None => 0,
    };
    for c in &changes[..kept_names] {
        c.apply(&mut names);
    }
    summary.name_changes_kept = kept_names;
    summary.name_changes_undone = changes.len() - kept_names;

    let mut files = Vec::new();
    for (name, id) in names {
        let Some(f) = shadow.file(id) else { continue };
        let content = if f.pending.is_empty() {
            f.durable.clone()
        } else {
            summary.files_with_unsynced += 1;
            cut_file(f, policy, rng.as_mut(), &mut summary)
        };
        summary.files += 1;
        summary.bytes += content.len() as u64;
        files.push((name, content));
    }
    (files, summary)
}

/// One file's bytes after a cut: see the module docs.
fn cut_file(
    f: &FileState,
    policy: CutPolicy,
    rng: Option<&mut Rng>,
    summary: &mut ImageSummary,
) -> Vec<u8> {
    // versions[i]: the content after the first i unsynced changes.
    let mut versions = Vec::with_capacity(f.pending.len() + 1);
    versions.push(f.durable.clone());
    for c in &f.pending {
        let mut next = versions.last().expect("one version at least").clone();
        c.apply(&mut next);
        versions.push(next);
    }
    let newest = versions.len() - 1;
    let (moment, per_sector) = match (policy, rng) {
        (CutPolicy::KeepUnsynced, _) => (newest, None),
        (CutPolicy::Random(_), Some(r)) => {
            let moment = r.below(versions.len() as u64) as usize;
            if r.below(2) == 0 {
                (moment, None)
            } else {
                (moment, Some(r))
            }
        }
        _ => (0, None),
    };
    let mut out = versions[moment].clone();
    let Some(r) = per_sector else {
        if moment != newest {
            summary.sectors_behind += out.len().div_ceil(SECTOR as usize);
        }
        return out;
    };
    summary.files_torn += 1;
    for (i, sector) in out.chunks_mut(SECTOR as usize).enumerate() {
        let v = &versions[r.below(versions.len() as u64) as usize];
        let start = i * SECTOR as usize;
        for (j, b) in sector.iter_mut().enumerate() {
            // Bytes a version does not have (its file was shorter) read
            // as zeros, as a hole does.
            *b = v.get(start + j).copied().unwrap_or(0);
        }
        if !std::ptr::eq(v, &versions[newest]) {
            summary.sectors_behind += 1;
        }
    }
    out
}

/// Writes `files` into `dest`, which must not exist yet (or be empty).
pub(crate) fn write_files(dest: &Path, files: &[(String, Vec<u8>)]) -> io::Result<()> {
    std::fs::create_dir_all(dest)?;
    if std::fs::read_dir(dest)?.next().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} is not empty", dest.display()),
        ));
    }
    for (name, bytes) in files {
        std::fs::write(dest.join(name), bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::shadow::Change;
    use super::*;

    fn write(s: &mut Shadow, id: u64, offset: u64, data: Vec<u8>) {
        s.change(id, Change::Write { offset, data });
    }

    /// A durable 1000-byte log with two unsynced appends, and a synced
    /// file whose creation is not durable.
    fn shadow_with_unsynced_tail() -> Shadow {
        let mut s = Shadow::default();
        s.seed("log", vec![1u8; 1000]);
        let id = s.lookup("log").unwrap();
        write(&mut s, id, 1000, vec![2u8; 1000]);
        write(&mut s, id, 2000, vec![3u8; 1000]);
        let new = s.create("new", true);
        write(&mut s, new, 0, b"x".to_vec());
        s.sync(new);
        s
    }

    #[test]
    fn dropping_keeps_durable_bytes_and_names_only() {
        let s = shadow_with_unsynced_tail();
        let (files, sum) = cut(&s, CutPolicy::DropUnsynced);
        assert_eq!(files.len(), 1, "the unsynced create is undone");
        assert_eq!(files[0].0, "log");
        assert_eq!(files[0].1, vec![1u8; 1000]);
        assert_eq!(sum.name_changes_undone, 1);
        assert_eq!(sum.files_with_unsynced, 1);
    }

    #[test]
    fn keeping_applies_every_change_but_no_unsynced_name() {
        let s = shadow_with_unsynced_tail();
        let (files, sum) = cut(&s, CutPolicy::KeepUnsynced);
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].1.len(), 3000);
        assert_eq!(sum.sectors_behind, 0);
    }

    #[test]
    fn random_cuts_keep_durable_bytes_and_give_each_sector_one_of_its_versions() {
        let s = shadow_with_unsynced_tail();
        let mut lens = std::collections::BTreeSet::new();
        let mut name_counts = std::collections::BTreeSet::new();
        let mut torn = 0;
        for seed in 0..200 {
            let (a, sum) = cut(&s, CutPolicy::Random(seed));
            let (b, _) = cut(&s, CutPolicy::Random(seed));
            assert_eq!(a, b, "seed {seed}: reproducible");
            torn += sum.files_torn;
            let log = &a.iter().find(|(n, _)| n == "log").unwrap().1;
            assert!([1000, 2000, 3000].contains(&log.len()), "{}", log.len());
            assert!(log[..1000].iter().all(|&x| x == 1), "durable bytes kept");
            for (i, sector) in log.chunks(512).enumerate() {
                // Every byte of a sector comes from the same version.
                let start = i * 512;
                let version = |v: usize| -> Vec<u8> {
                    let mut c = vec![1u8; 1000];
                    if v >= 1 {
                        c.resize(2000, 2);
                    }
                    if v >= 2 {
                        c.resize(3000, 3);
                    }
                    c.resize(3000, 0);
                    c[start..start + sector.len()].to_vec()
                };
                assert!(
                    (0..3).any(|v| version(v) == sector),
                    "seed {seed} sector {i}"
                );
            }
            lens.insert(log.len());
            name_counts.insert(a.len());
        }
        assert_eq!(lens.len(), 3, "every length: {lens:?}");
        assert!(torn > 50, "{torn} torn cuts");
        assert_eq!(name_counts.len(), 2, "the create kept in some cuts only");
    }

    #[test]
    fn two_writes_inside_one_sector_never_leave_a_hole_between_them() {
        let mut s = Shadow::default();
        let id = s.create("m", true);
        s.dir_synced();
        write(&mut s, id, 0, vec![7u8; 100]);
        write(&mut s, id, 100, vec![8u8; 100]);
        for seed in 0..100 {
            let (files, _) = cut(&s, CutPolicy::Random(seed));
            let m = &files[0].1;
            let ok = m.is_empty()
                || m[..] == [7u8; 100][..]
                || (m[..100] == [7u8; 100][..] && m[100..] == [8u8; 100][..])
                || (m.len() == 100 && m.iter().all(|&b| b == 0))
                || (m.len() == 200
                    && m[..100] == [7u8; 100][..]
                    && m[100..].iter().all(|&b| b == 0))
                || (m.len() == 200 && m.iter().all(|&b| b == 0));
            assert!(ok, "seed {seed}: {:?}", &m[..m.len().min(8)]);
            assert!(
                !(m.len() == 200 && m[0] == 0 && m[150] == 8),
                "seed {seed}: a hole before a later write in the same sector"
            );
        }
    }

    #[test]
    fn writes_refuse_a_non_empty_destination() {
        let d = tempfile::tempdir().unwrap();
        write_files(&d.path().join("img"), &[("a".into(), b"1".to_vec())]).unwrap();
        assert_eq!(std::fs::read(d.path().join("img/a")).unwrap(), b"1");
        assert!(write_files(&d.path().join("img"), &[]).is_err());
    }
}
