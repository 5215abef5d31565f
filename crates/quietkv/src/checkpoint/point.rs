//! The metadata file of one backup point (`points/NNNNNN/META`): which
//! database it belongs to, its sequence number, and every file a restore
//! needs with its length and CRC32C. A small line-oriented text file that
//! ends with a checksum of everything before it; it is written last, so a
//! point directory without it is a backup that never finished.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{Error, Result};

/// The first line of every META file.
const HEADER: &str = "quietkv-backup-point 1";

/// One file of a backup point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PointFile {
    /// The table's number (its name is `{number:06}.sst`).
    pub number: u64,
    pub size: u64,
    pub crc: u32,
    /// For shared tables: the sequence range the source's manifest gave
    /// the table, which a later backup compares besides the number and
    /// size before it takes the stored copy for the same table.
    pub seqs: Option<(u64, u64)>,
}

/// What a backup point's META says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PointMeta {
    pub db_id: u64,
    pub sequence: u64,
    pub manifest_number: u64,
    pub manifest_size: u64,
    pub manifest_crc: u32,
    /// Tables kept once in `tables/` for every point that has them.
    pub shared: Vec<PointFile>,
    /// Tables only this point has (written from the memtables), in its
    /// own directory.
    pub own: Vec<PointFile>,
}

impl PointMeta {
    pub fn encode(&self) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(s, "{HEADER}");
        let _ = writeln!(s, "db-id {:016x}", self.db_id);
        let _ = writeln!(s, "sequence {}", self.sequence);
        let _ = writeln!(
            s,
            "manifest {} {} {:08x}",
            self.manifest_number, self.manifest_size, self.manifest_crc
        );
        for f in &self.shared {
            let (lo, hi) = f.seqs.unwrap_or((0, 0));
            let _ = writeln!(
                s,
                "shared {:06} {} {:08x} {lo} {hi}",
                f.number, f.size, f.crc
            );
        }
        for f in &self.own {
            let _ = writeln!(s, "own {:06} {} {:08x}", f.number, f.size, f.crc);
        }
        let crc = crc32c::crc32c(s.as_bytes());
        let _ = writeln!(s, "end {crc:08x}");
        s
    }

    /// Parses a META file read from `path` (named in errors, with the
    /// byte offset of the bad line).
    pub fn decode(path: &Path, data: &[u8]) -> Result<PointMeta> {
        let bad = |offset: usize, what: String| {
            Err(Error::corruption(format!("backup point metadata: {what}"))
                .with_file(path)
                .with_offset(offset as u64))
        };
        let Ok(text) = std::str::from_utf8(data) else {
            return bad(0, "not UTF-8 text".into());
        };
        let Some(end_at) = text.rfind("end ") else {
            return bad(
                text.len(),
                "no closing 'end' line: the file is cut short".into(),
            );
        };
        let (body, end) = text.split_at(end_at);
        let want = end.trim_end().strip_prefix("end ").unwrap_or("");
        match u32::from_str_radix(want, 16) {
            Ok(crc) if crc == crc32c::crc32c(body.as_bytes()) => {}
            _ => {
                return bad(
                    end_at,
                    format!(
                        "checksum line {:?} does not match the content",
                        end.trim_end()
                    ),
                )
            }
        }
        let mut meta = PointMeta {
            db_id: 0,
            sequence: 0,
            manifest_number: 0,
            manifest_size: 0,
            manifest_crc: 0,
            shared: Vec::new(),
            own: Vec::new(),
        };
        let (mut has_db, mut has_seq, mut has_manifest) = (false, false, false);
        let mut offset = 0;
        for (i, line) in body.lines().enumerate() {
            let at = offset;
            offset += line.len() + 1;
            if i == 0 {
                if line != HEADER {
                    return bad(at, format!("starts with {line:?}, expected {HEADER:?}"));
                }
                continue;
            }
            let words: Vec<&str> = line.split(' ').collect();
            let num = |k: usize| -> Result<u64> {
                words.get(k).and_then(|w| w.parse().ok()).ok_or_else(|| {
                    Error::corruption(format!(
                        "backup point metadata: field {k} of {line:?} is not a number"
                    ))
                    .with_file(path)
                    .with_offset(at as u64)
                })
            };
            let hex = |k: usize| -> Result<u64> {
                words
                    .get(k)
                    .and_then(|w| u64::from_str_radix(w, 16).ok())
                    .ok_or_else(|| {
                        Error::corruption(format!(
                            "backup point metadata: field {k} of {line:?} is not hexadecimal"
                        ))
                        .with_file(path)
                        .with_offset(at as u64)
                    })
            };
            let crc = |k: usize| -> Result<u32> {
                u32::try_from(hex(k)?).map_err(|_| {
                    Error::corruption(format!(
                        "backup point metadata: checksum in {line:?} is longer than 32 bits"
                    ))
                    .with_file(path)
                    .with_offset(at as u64)
                })
            };
            match (words[0], words.len()) {
                ("db-id", 2) => {
                    meta.db_id = hex(1)?;
                    has_db = true;
                }
                ("sequence", 2) => {
                    meta.sequence = num(1)?;
                    has_seq = true;
                }
                ("manifest", 4) => {
                    meta.manifest_number = num(1)?;
                    meta.manifest_size = num(2)?;
                    meta.manifest_crc = crc(3)?;
                    has_manifest = true;
                }
                ("shared", 6) => meta.shared.push(PointFile {
                    number: num(1)?,
                    size: num(2)?,
                    crc: crc(3)?,
                    seqs: Some((num(4)?, num(5)?)),
                }),
                ("own", 4) => meta.own.push(PointFile {
                    number: num(1)?,
                    size: num(2)?,
                    crc: crc(3)?,
                    seqs: None,
                }),
                _ => return bad(at, format!("unexpected line {line:?}")),
            }
        }
        if !(has_db && has_seq && has_manifest) {
            return bad(
                offset,
                "the db-id, sequence or manifest line is missing".into(),
            );
        }
        Ok(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PointMeta {
        PointMeta {
            db_id: 0xabc,
            sequence: 77,
            manifest_number: 12,
            manifest_size: 300,
            manifest_crc: 0xdead_beef,
            shared: vec![PointFile {
                number: 5,
                size: 4096,
                crc: 1,
                seqs: Some((1, 40)),
            }],
            own: vec![PointFile {
                number: 11,
                size: 100,
                crc: 2,
                seqs: None,
            }],
        }
    }

    #[test]
    fn metadata_round_trips() {
        let m = sample();
        let p = Path::new("META");
        assert_eq!(PointMeta::decode(p, m.encode().as_bytes()).unwrap(), m);
    }

    #[test]
    fn damaged_or_cut_metadata_is_corruption_not_a_panic() {
        let text = sample().encode();
        let p = Path::new("META");
        // Everything but the final newline, which carries nothing.
        for cut in 0..text.len() - 1 {
            let e = PointMeta::decode(p, &text.as_bytes()[..cut]).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Corruption, "cut at {cut}");
        }
        let flipped = text.replacen("4096", "4097", 1);
        let e = PointMeta::decode(p, flipped.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        let e = PointMeta::decode(p, &[0xff, 0xfe]).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Corruption);
    }
}
