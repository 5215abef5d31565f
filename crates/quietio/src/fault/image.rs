//! Power-cut images: the files a power cut at this instant could leave,
//! built from the shadow model. Durable names keep their durable bytes;
//! each unsynced change is kept, dropped, or (a write) torn at a 512-byte
//! sector boundary; unsynced name changes are undone (all of them, or, for
//! a random cut, all but a prefix, since a journal commits them in order).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use super::shadow::{Change, Shadow};

/// Sector size a torn write is cut at.
pub const SECTOR: u64 = 512;

/// What happens to the changes that were not made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutPolicy {
    /// Every unsynced change and name change is lost.
    DropUnsynced,
    /// Every unsynced change reached the disk; unsynced name changes are
    /// still lost.
    KeepUnsynced,
    /// Each unsynced change is kept, dropped or torn, and a prefix of the
    /// name changes survives, chosen by a generator seeded with this.
    Random(u64),
}

/// What an image holds and how it was cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageSummary {
    pub files: usize,
    pub bytes: u64,
    pub changes_kept: usize,
    pub changes_dropped: usize,
    pub writes_torn: usize,
    pub name_changes_kept: usize,
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
        let mut content = f.durable.clone();
        for change in &f.pending {
            let choice = match (&mut rng, policy) {
                (Some(r), _) => r.below(3),
                (None, CutPolicy::KeepUnsynced) => 1,
                (None, _) => 0,
            };
            match (choice, change) {
                (1, c) => {
                    c.apply(&mut content);
                    summary.changes_kept += 1;
                }
                (2, Change::Write { offset, data }) => {
                    let keep = torn_len(*offset, data.len() as u64, rng.as_mut().expect("random"));
                    if keep > 0 {
                        Change::Write {
                            offset: *offset,
                            data: data[..keep as usize].to_vec(),
                        }
                        .apply(&mut content);
                    }
                    summary.writes_torn += 1;
                }
                _ => summary.changes_dropped += 1,
            }
        }
        summary.files += 1;
        summary.bytes += content.len() as u64;
        files.push((name, content));
    }
    (files, summary)
}

/// How much of a write of `len` bytes at `offset` a torn write keeps: up
/// to a sector boundary strictly inside it (nothing if it has none).
pub(crate) fn torn_len(offset: u64, len: u64, rng: &mut Rng) -> u64 {
    let first = (offset / SECTOR + 1) * SECTOR;
    let end = offset + len;
    if first >= end {
        return 0;
    }
    let boundaries = (end - 1 - first) / SECTOR + 1;
    first + rng.below(boundaries) * SECTOR - offset
}

/// Writes `files` into `dest`, which must not exist yet (or be empty).
pub(crate) fn write(dest: &Path, files: &[(String, Vec<u8>)]) -> io::Result<()> {
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
    use super::*;

    fn shadow_with_unsynced_tail() -> Shadow {
        let mut s = Shadow::default();
        s.seed("log", vec![1u8; 1000]);
        let id = s.lookup("log").unwrap();
        s.change(
            id,
            Change::Write {
                offset: 1000,
                data: vec![2u8; 2000],
            },
        );
        let new = s.create("new", true);
        s.change(
            new,
            Change::Write {
                offset: 0,
                data: b"x".to_vec(),
            },
        );
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
        assert_eq!(sum.changes_dropped, 1);
        assert_eq!(sum.name_changes_undone, 1);
    }

    #[test]
    fn keeping_applies_every_change_but_no_unsynced_name() {
        let s = shadow_with_unsynced_tail();
        let (files, sum) = cut(&s, CutPolicy::KeepUnsynced);
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].1.len(), 3000);
        assert_eq!(sum.changes_kept, 1);
    }

    #[test]
    fn a_torn_write_ends_on_a_sector_boundary_inside_it() {
        let mut rng = Rng::new(7);
        for _ in 0..200 {
            let keep = torn_len(1000, 2000, &mut rng);
            assert!((1000 + keep).is_multiple_of(SECTOR), "{keep}");
            assert!(keep > 0 && keep < 2000, "{keep}");
        }
        assert_eq!(torn_len(10, 100, &mut rng), 0, "no boundary inside");
        assert_eq!(torn_len(0, 1024, &mut rng), 512, "only 512 is inside");
    }

    #[test]
    fn random_cuts_are_reproducible_and_cover_every_outcome() {
        let s = shadow_with_unsynced_tail();
        let mut lens = std::collections::BTreeSet::new();
        let mut name_counts = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let (a, _) = cut(&s, CutPolicy::Random(seed));
            let (b, _) = cut(&s, CutPolicy::Random(seed));
            assert_eq!(a, b, "seed {seed}");
            let log = &a.iter().find(|(n, _)| n == "log").unwrap().1;
            assert!(log[..1000].iter().all(|&x| x == 1), "durable bytes kept");
            assert!(log.len() == 1000 || log.len() == 3000 || log.len().is_multiple_of(512));
            lens.insert(log.len());
            name_counts.insert(a.len());
        }
        assert!(lens.contains(&1000) && lens.contains(&3000), "{lens:?}");
        assert!(lens.len() > 2, "some torn: {lens:?}");
        assert_eq!(name_counts.len(), 2, "the create kept in some cuts only");
    }

    #[test]
    fn writes_refuse_a_non_empty_destination() {
        let d = tempfile::tempdir().unwrap();
        write(&d.path().join("img"), &[("a".into(), b"1".to_vec())]).unwrap();
        assert_eq!(std::fs::read(d.path().join("img/a")).unwrap(), b"1");
        assert!(write(&d.path().join("img"), &[]).is_err());
    }
}
