//! Reading what is intact out of a damaged log, for `repair`.
//!
//! [`LogReader`](super::LogReader) stops at the first damaged record,
//! because recovery must not silently skip acknowledged writes. Repair is
//! the opposite trade: the user asked to keep whatever can be proven
//! intact. Every record carries a header checksum and a payload checksum,
//! so after a damaged region the scanner can resynchronise: it slides one
//! byte at a time until a header whose checksum matches is followed by a
//! payload whose checksum matches. A false resync needs both 32-bit
//! checksums to match by accident over arbitrary bytes, or a value that
//! itself holds a log record image inside the damaged region (the scan
//! only looks for records there): then that inner record is salvaged as
//! if it had been written, which is why repair reports every damaged
//! region rather than only the records it lost.

use std::borrow::Cow;

use super::{decode_header, record_crc, ParsedHeader, RecordType, HEADER_LEN};

/// One thing found in a log image, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Salvaged<'a> {
    /// An intact full record, or a compressed one decompressed (sync marks
    /// are skipped).
    /// `len` is the record's length in the file (header included).
    Record {
        offset: u64,
        len: u64,
        payload: Cow<'a, [u8]>,
    },
    /// Bytes that hold no intact record: damage, or a torn tail when
    /// `to_end` is set and the scanner found nothing after it.
    Damaged { offset: u64, len: u64, to_end: bool },
    /// An intact identity record (a WAL's first): whose log this is, or
    /// why its payload does not say.
    Identity {
        offset: u64,
        identity: Result<super::LogIdentity, String>,
    },
}

/// Scans a whole log image; zero padding at the end is neither a record nor
/// damage. With `log_number` (a WAL's), intact recyclable records of
/// another log are stale bytes of the file's earlier life: skipped like
/// padding, never salvaged. Without it, recyclable records are kept.
pub(crate) fn salvage_records(data: &[u8], log_number: Option<u64>) -> Vec<Salvaged<'_>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        if data[pos..].iter().all(|&b| b == 0) {
            break; // padding or preallocated space
        }
        match record_at(data, pos) {
            Some(found) => {
                let (ty, payload) = (found.ty, found.payload);
                let len = found.len();
                if is_stale(&found, log_number) {
                    pos += len;
                    continue;
                }
                match ty {
                    RecordType::Full => out.push(Salvaged::Record {
                        offset: pos as u64,
                        len: len as u64,
                        payload: Cow::Borrowed(payload),
                    }),
                    RecordType::Compressed => match super::decompress_record(payload) {
                        Ok(raw) => out.push(Salvaged::Record {
                            offset: pos as u64,
                            len: len as u64,
                            payload: Cow::Owned(raw),
                        }),
                        // Intact checksums around bytes that do not
                        // decompress: nothing to keep from it.
                        Err(_) => out.push(Salvaged::Damaged {
                            offset: pos as u64,
                            len: len as u64,
                            to_end: false,
                        }),
                    },
                    RecordType::Identity => out.push(Salvaged::Identity {
                        offset: pos as u64,
                        identity: super::LogIdentity::decode(payload),
                    }),
                    RecordType::SyncMark => {}
                }
                pos += len;
            }
            None => {
                // Stale records are no place to resume: what follows
                // them is the earlier life too.
                let mut next = None;
                let mut q = pos + 1;
                while let Some((at, found)) = next_record(data, q) {
                    if !is_stale(&found, log_number) {
                        next = Some(at);
                        break;
                    }
                    q = at + 1;
                }
                let end = next.unwrap_or(data.len());
                out.push(Salvaged::Damaged {
                    offset: pos as u64,
                    len: (end - pos) as u64,
                    to_end: next.is_none(),
                });
                pos = end;
            }
        }
    }
    out
}

/// Whether `found` is a record of another log than `log_number`.
fn is_stale(found: &Found<'_>, log_number: Option<u64>) -> bool {
    matches!((found.log_number, log_number), (Some(a), Some(b)) if a != b)
}

/// An intact record found in a log image.
pub(super) struct Found<'a> {
    pub ty: RecordType,
    /// The log a recyclable record names.
    pub log_number: Option<u64>,
    pub header_len: usize,
    pub payload: &'a [u8],
}

impl Found<'_> {
    /// Header and payload.
    pub fn len(&self) -> usize {
        self.header_len + self.payload.len()
    }
}

/// Where a record's type byte sits in its header (either format).
const TYPE_OFFSET: usize = HEADER_LEN - 1;

/// The first offset at or after `from` where a record could start: its
/// type byte is a known type. A resynchronising scan checks only these.
/// Checking every offset would compute a header checksum at each byte;
/// past the end of a preallocated or recycled WAL that means tens of
/// MiB of zeros, seconds of CPU at every open of a damaged log.
fn next_candidate(data: &[u8], from: usize) -> Option<usize> {
    let types = data.get(from.checked_add(TYPE_OFFSET)?..)?;
    let at = types
        .iter()
        .position(|&b| RecordType::from_u8(b).is_some())?;
    Some(from + at)
}

/// The first intact record starting at or after `from`, and its offset:
/// what a scan resynchronising after damage looks for.
pub(super) fn next_record(data: &[u8], from: usize) -> Option<(usize, Found<'_>)> {
    let mut at = from;
    loop {
        at = next_candidate(data, at)?;
        if let Some(found) = record_at(data, at) {
            return Some((at, found));
        }
        at += 1;
    }
}

/// The intact record of a known type starting at `pos`, if there is one.
pub(super) fn record_at(data: &[u8], pos: usize) -> Option<Found<'_>> {
    let rest = data.get(pos..)?;
    if rest.len() < HEADER_LEN {
        return None;
    }
    let ParsedHeader::Intact(h) = decode_header(rest) else {
        return None;
    };
    let payload = rest.get(h.header_len..h.header_len.checked_add(h.len)?)?;
    let ty = RecordType::from_u8(h.ty)?;
    (record_crc(h.ty, payload) == h.payload_crc).then_some(Found {
        ty,
        log_number: h.log_number,
        header_len: h.header_len,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_log::LogWriter;

    fn log_of(records: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
        let mut w = LogWriter::new(Vec::new());
        let mut offsets = Vec::new();
        for r in records {
            offsets.push(w.bytes_written() as usize);
            w.add_record(r).unwrap();
        }
        (w.into_inner(), offsets)
    }

    fn payloads<'a>(s: &'a [Salvaged<'a>]) -> Vec<&'a [u8]> {
        s.iter()
            .filter_map(|x| match x {
                Salvaged::Record { payload, .. } => Some(&payload[..]),
                Salvaged::Damaged { .. } | Salvaged::Identity { .. } => None,
            })
            .collect()
    }

    #[test]
    fn an_intact_log_is_all_records() {
        let (mut data, _) = log_of(&[b"one", b"two", b"three"]);
        data.extend_from_slice(&[0; 100]);
        let s = salvage_records(&data, None);
        assert_eq!(payloads(&s), [&b"one"[..], b"two", b"three"]);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn resyncs_after_a_damaged_record() {
        let (mut data, offsets) = log_of(&[b"first", b"second record", b"third", b"fourth"]);
        // A flipped payload byte of the second and a flipped length bit of
        // the third: both dropped, the fourth found again.
        data[offsets[1] + HEADER_LEN + 2] ^= 0x10;
        data[offsets[2] + 9] ^= 0x80;
        let s = salvage_records(&data, None);
        assert_eq!(payloads(&s), [&b"first"[..], b"fourth"]);
        assert_eq!(
            s[1],
            Salvaged::Damaged {
                offset: offsets[1] as u64,
                len: (offsets[3] - offsets[1]) as u64,
                to_end: false
            }
        );
    }

    /// The candidate filter never passes over an offset where a record
    /// starts, in logs of either format cut, damaged and padded anyhow.
    #[test]
    fn candidates_include_every_record_start() {
        use proptest::prelude::*;
        let mut runner = proptest::test_runner::TestRunner::default();
        let strategy = (
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..12),
            any::<bool>(),
            proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            0usize..700,
        );
        runner
            .run(&strategy, |(records, recyclable, flips, zeros)| {
                let mut w = LogWriter::new(Vec::new());
                if recyclable {
                    w = w.recyclable(7);
                }
                for r in &records {
                    w.add_record(r).unwrap();
                }
                w.sync().unwrap();
                let mut data = w.into_inner();
                for (at, x) in flips {
                    let i = at % data.len();
                    data[i] ^= x;
                }
                data.extend(std::iter::repeat_n(0u8, zeros));
                let brute: Vec<usize> = (0..data.len())
                    .filter(|&p| record_at(&data, p).is_some())
                    .collect();
                let mut fast = Vec::new();
                let mut q = 0;
                while let Some((at, _)) = next_record(&data, q) {
                    fast.push(at);
                    q = at + 1;
                }
                prop_assert_eq!(fast, brute);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn a_torn_tail_is_damage_to_the_end() {
        let (data, offsets) = log_of(&[b"first", b"second"]);
        let torn = &data[..data.len() - 2];
        let s = salvage_records(torn, None);
        assert_eq!(payloads(&s), [&b"first"[..]]);
        assert_eq!(
            s[1],
            Salvaged::Damaged {
                offset: offsets[1] as u64,
                len: (torn.len() - offsets[1]) as u64,
                to_end: true
            }
        );
    }
}
