use proptest::prelude::*;

use super::*;
use crate::error::{Error, ErrorKind, Result};

const PATH: &str = "/db/000007.log";

fn build(records: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
    let mut w = LogWriter::new(Vec::new());
    let mut offsets = Vec::new();
    for r in records {
        offsets.push(w.bytes_written());
        w.add_record(r).unwrap();
    }
    w.sync().unwrap();
    assert_eq!(w.bytes_written(), w.sink().len() as u64);
    (w.into_inner(), offsets)
}

/// Reads every record; returns them and the tail, or the error.
fn read_all(data: &[u8]) -> Result<(Vec<Vec<u8>>, TailState)> {
    let mut r = LogReader::new(PATH, data);
    let mut out = Vec::new();
    while let Some(rec) = r.read_record()? {
        out.push(rec.to_vec());
    }
    // Fused after the end.
    assert!(r.read_record()?.is_none());
    Ok((out, r.tail()))
}

fn sample() -> Vec<Vec<u8>> {
    vec![
        b"first".to_vec(),
        Vec::new(),
        vec![0u8; 40],
        (0..100_000u32).map(|i| (i % 251) as u8).collect(),
        b"last".to_vec(),
    ]
}

fn expect_corruption(data: &[u8], offset: u64) -> Error {
    let e = read_all(data).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.offset(), Some(offset), "{e}");
    assert_eq!(e.file(), Some(std::path::Path::new(PATH)));
    e
}

#[test]
fn crc_mask_round_trips() {
    for c in [0u32, 1, 0xdead_beef, u32::MAX] {
        assert_eq!(unmask_crc(mask_crc(c)), c);
        assert_ne!(mask_crc(c), c);
    }
}

#[test]
fn empty_log_is_clean() {
    let (recs, tail) = read_all(&[]).unwrap();
    assert!(recs.is_empty());
    assert_eq!(tail, TailState::Clean);
}

#[test]
fn round_trip_with_offsets() {
    let records = sample();
    let (data, offsets) = build(&records);
    let mut r = LogReader::new(PATH, &data);
    for (rec, off) in records.iter().zip(&offsets) {
        assert_eq!(r.read_record().unwrap().unwrap(), &rec[..]);
        assert_eq!(r.last_record_offset(), *off);
    }
    assert!(r.read_record().unwrap().is_none());
    assert_eq!(r.tail(), TailState::Clean);
    assert_eq!(r.valid_len(), data.len() as u64);
    // The iterator yields the same records.
    let via_iter: Vec<&[u8]> = LogReader::new(PATH, &data).collect::<Result<_>>().unwrap();
    assert_eq!(via_iter.len(), records.len());
}

#[test]
fn record_of_64_mib_round_trips() {
    let big: Vec<u8> = (0..64usize << 20).map(|i| (i >> 12) as u8).collect();
    let (data, _) = build(&[b"a".to_vec(), big.clone(), b"b".to_vec()]);
    let mut r = LogReader::new(PATH, &data);
    assert_eq!(r.read_record().unwrap().unwrap(), b"a");
    assert!(r.read_record().unwrap().unwrap() == &big[..]);
    assert_eq!(r.read_record().unwrap().unwrap(), b"b");
    assert!(r.read_record().unwrap().is_none());
}

#[test]
fn writer_appends_with_offset_and_records_stay_readable() {
    let (mut data, _) = build(&[b"one".to_vec()]);
    let len = data.len() as u64;
    let mut w = LogWriter::with_offset(&mut data, len);
    w.add_record(b"two").unwrap();
    assert_eq!(w.bytes_written(), len + HEADER_LEN as u64 + 3);
    let (recs, tail) = read_all(&data).unwrap();
    assert_eq!(recs, vec![b"one".to_vec(), b"two".to_vec()]);
    assert_eq!(tail, TailState::Clean);
}

struct FailingSink {
    fail_after: usize,
    written: Vec<u8>,
}

impl LogSink for FailingSink {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        let room = self.fail_after.saturating_sub(self.written.len());
        if buf.len() > room {
            self.written.extend_from_slice(&buf[..room]);
            return Err(Error::io(std::io::Error::other("disk full"), "append"));
        }
        self.written.extend_from_slice(buf);
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn writer_refuses_records_after_a_failed_write() {
    let mut w = LogWriter::new(FailingSink {
        fail_after: 20,
        written: Vec::new(),
    });
    w.add_record(b"ok").unwrap();
    let e = w.add_record(b"this one does not fit").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert_eq!(w.add_record(b"x").unwrap_err().kind(), ErrorKind::Io);
    assert_eq!(w.sync().unwrap_err().kind(), ErrorKind::Io);
    assert_eq!(w.bytes_written(), (HEADER_LEN + 2) as u64);
    // What did reach the sink reads back as one record and a torn tail.
    let sink = w.into_inner();
    let (recs, tail) = read_all(&sink.written).unwrap();
    assert_eq!(recs, vec![b"ok".to_vec()]);
    assert_eq!(
        tail,
        TailState::Torn {
            offset: (HEADER_LEN + 2) as u64
        }
    );
}

#[test]
fn partial_header_is_torn() {
    let (mut data, offsets) = build(&sample());
    let last = *offsets.last().unwrap() as usize;
    data.truncate(last + 5);
    let (recs, tail) = read_all(&data).unwrap();
    assert_eq!(recs.len(), 4);
    assert_eq!(
        tail,
        TailState::Torn {
            offset: last as u64
        }
    );
    assert_eq!(tail.valid_len(data.len() as u64), last as u64);
}

#[test]
fn partial_payload_is_torn() {
    let (mut data, offsets) = build(&sample());
    data.truncate(offsets[3] as usize + HEADER_LEN + 1000);
    let (recs, tail) = read_all(&data).unwrap();
    assert_eq!(recs, sample()[..3].to_vec());
    assert_eq!(tail, TailState::Torn { offset: offsets[3] });
}

#[test]
fn zero_padding_after_records() {
    let records = sample();
    let (mut data, _) = build(&records);
    let end = data.len() as u64;
    data.resize(data.len().next_multiple_of(4096), 0);
    let (recs, tail) = read_all(&data).unwrap();
    assert_eq!(recs, records);
    assert_eq!(tail, TailState::ZeroPadded { offset: end });

    // Fewer zero bytes than a header are padding too.
    let (mut data, _) = build(&records);
    data.extend_from_slice(&[0; 3]);
    assert_eq!(
        read_all(&data).unwrap().1,
        TailState::ZeroPadded { offset: end }
    );

    // A preallocated, never written log.
    let (recs, tail) = read_all(&[0u8; 4096]).unwrap();
    assert!(recs.is_empty());
    assert_eq!(tail, TailState::ZeroPadded { offset: 0 });
}

#[test]
fn zero_header_followed_by_data_is_corruption() {
    let (first, _) = build(&[b"a".to_vec()]);
    let (second, _) = build(&[b"b".to_vec()]);
    let mut data = first.clone();
    data.extend_from_slice(&[0; 100]);
    data.extend_from_slice(&second);
    let e = expect_corruption(&data, first.len() as u64);
    assert!(e.message().contains("zero record header"), "{e}");
}

#[test]
fn bad_checksum_on_last_record_is_torn() {
    let records = sample();
    let (data, offsets) = build(&records);
    let last = *offsets.last().unwrap();
    // Damage the payload, then the stored crc, of the last record; with
    // and without zero padding after it.
    for pos in [data.len() - 1, last as usize] {
        for pad in [0usize, 512] {
            let mut d = data.clone();
            d[pos] ^= 0x40;
            d.resize(d.len() + pad, 0);
            let (recs, tail) = read_all(&d).unwrap();
            assert_eq!(recs, records[..4].to_vec());
            assert_eq!(tail, TailState::Torn { offset: last });
        }
    }
}

#[test]
fn partially_persisted_page_is_torn() {
    // The last record's page made it to disk only up to some sector: the
    // rest of the payload reads back as zeros.
    let records = vec![b"x".to_vec(), vec![7u8; 2000]];
    let (mut data, offsets) = build(&records);
    for b in &mut data[offsets[1] as usize + 600..] {
        *b = 0;
    }
    let (recs, tail) = read_all(&data).unwrap();
    assert_eq!(recs, records[..1].to_vec());
    assert_eq!(tail, TailState::Torn { offset: offsets[1] });
}

#[test]
fn unknown_type_on_last_record_is_torn_elsewhere_corruption() {
    let records = sample();
    let (data, offsets) = build(&records);
    let mut d = data.clone();
    d[*offsets.last().unwrap() as usize + 8] = 9;
    let (recs, tail) = read_all(&d).unwrap();
    assert_eq!(recs.len(), 4);
    assert_eq!(
        tail,
        TailState::Torn {
            offset: *offsets.last().unwrap()
        }
    );

    let mut d = data.clone();
    d[offsets[2] as usize + 8] = 0;
    let e = expect_corruption(&d, offsets[2]);
    assert!(e.message().contains("unknown type"), "{e}");
}

#[test]
fn flipped_byte_in_middle_record_is_corruption_at_its_offset() {
    let records = sample();
    let (data, offsets) = build(&records);
    // Payload byte, crc byte, and a byte of a large record.
    for (rec, delta) in [(2usize, HEADER_LEN + 10), (2, 1), (3, HEADER_LEN + 50_000)] {
        let mut d = data.clone();
        d[offsets[rec] as usize + delta] ^= 0x01;
        let e = expect_corruption(&d, offsets[rec]);
        assert!(e.message().contains("checksum"), "{e}");
        assert!(e.to_string().contains(PATH), "{e}");

        // Records before the damage are still delivered, then the error,
        // which repeats.
        let mut r = LogReader::new(PATH, &d);
        for want in &records[..rec] {
            assert_eq!(r.read_record().unwrap().unwrap(), &want[..]);
        }
        assert!(r.read_record().is_err());
        assert_eq!(r.read_record().unwrap_err().offset(), Some(offsets[rec]));
        // The iterator yields the error once and then ends.
        let items: Vec<_> = LogReader::new(PATH, &d).collect();
        assert_eq!(items.len(), rec + 1);
        assert!(items.last().unwrap().is_err());
    }
}

#[test]
fn garbage_after_a_bad_last_record_is_corruption() {
    let (mut data, offsets) = build(&sample());
    let last = *offsets.last().unwrap();
    let n = data.len();
    data[n - 1] ^= 0xff;
    data.extend_from_slice(&[0, 0, 0x55, 0]);
    expect_corruption(&data, last);
}

#[test]
fn huge_declared_length_is_torn_without_allocating() {
    let (mut data, _) = build(&[b"ok".to_vec()]);
    let off = data.len() as u64;
    data.extend_from_slice(&[1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff, 1, 9, 9]);
    let (recs, tail) = read_all(&data).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(tail, TailState::Torn { offset: off });
}

fn records_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            prop::collection::vec(0u8..3, 0..300),
        ],
        0..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A crash can cut the log anywhere: the reader must return exactly the
    /// records that were completely written, without error.
    #[test]
    fn truncation_anywhere_yields_a_prefix(records in records_strategy()) {
        let (data, offsets) = build(&records);
        for cut in 0..=data.len() {
            let (got, tail) = read_all(&data[..cut]).unwrap();
            let complete = offsets
                .iter()
                .zip(&records)
                .take_while(|(off, r)| **off as usize + HEADER_LEN + r.len() <= cut)
                .count();
            prop_assert_eq!(&got[..], &records[..complete]);
            let valid_end = offsets.get(complete).map_or(data.len(), |o| *o as usize);
            if cut == valid_end {
                prop_assert_eq!(tail, TailState::Clean);
            } else {
                prop_assert_eq!(tail.valid_len(cut as u64), valid_end as u64);
            }
        }
    }

    /// Same, when the cut tail is zero-padded to a 512-byte boundary (O_DIRECT):
    /// the reader returns a prefix (a cut record may come back whole if the
    /// bytes it lost were zeros) and never errors.
    #[test]
    fn truncation_with_zero_padding_yields_a_prefix(records in records_strategy()) {
        let (data, _) = build(&records);
        for cut in 0..=data.len() {
            let mut d = data[..cut].to_vec();
            d.resize(cut.next_multiple_of(512), 0);
            let (got, _) = read_all(&d).unwrap();
            prop_assert!(got.len() <= records.len());
            prop_assert_eq!(&got[..], &records[..got.len()]);
        }
    }

    /// Arbitrary bytes never panic the reader.
    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = read_all(&data);
    }
}
