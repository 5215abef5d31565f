//! Record log tests: round trips, torn tails against corruption, sync
//! marks, sealed logs, compressed and recyclable records, and truncation or
//! damage anywhere (property tests).

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
    // Flushed, not synced: a sync would append a sync mark.
    w.flush().unwrap();
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
    let via_iter: Vec<std::borrow::Cow<[u8]>> =
        LogReader::new(PATH, &data).collect::<Result<_>>().unwrap();
    assert_eq!(via_iter.len(), records.len());
}

#[test]
fn record_of_64_mib_round_trips() {
    let big: Vec<u8> = (0..64usize << 20).map(|i| (i >> 12) as u8).collect();
    let (data, _) = build(&[b"a".to_vec(), big.clone(), b"b".to_vec()]);
    let mut r = LogReader::new(PATH, &data);
    assert_eq!(r.read_record().unwrap().unwrap(), &b"a"[..]);
    assert!(r.read_record().unwrap().unwrap() == &big[..]);
    assert_eq!(r.read_record().unwrap().unwrap(), &b"b"[..]);
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
    // Damage the last and the first payload byte of the last record;
    // with and without zero padding after it. (A damaged header with the
    // payload after it is corruption: see flipped_length_bit_... .)
    for pos in [data.len() - 1, last as usize + HEADER_LEN] {
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

/// A record with a valid header and payload checksum but type `ty`.
fn raw_record(ty: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = [0u8; HEADER_LEN];
    h[4..8].copy_from_slice(&record_crc(ty, payload).to_le_bytes());
    h[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[12] = ty;
    let hc = mask_crc(crc32c::crc32c(&h[4..]));
    h[0..4].copy_from_slice(&hc.to_le_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(payload);
    out
}

#[test]
fn unknown_type_on_last_record_is_torn_elsewhere_corruption() {
    let (mut data, _) = build(&[b"one".to_vec()]);
    let off = data.len() as u64;
    data.extend_from_slice(&raw_record(9, b"future"));
    let (recs, tail) = read_all(&data).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(tail, TailState::Torn { offset: off });

    let (more, _) = build(&[b"two".to_vec()]);
    data.extend_from_slice(&more);
    let e = expect_corruption(&data, off);
    assert!(e.message().contains("unknown type"), "{e}");
}

#[test]
fn damaged_type_byte_fails_the_header_checksum() {
    let records = sample();
    let (data, offsets) = build(&records);
    let mut d = data.clone();
    d[offsets[2] as usize + 12] = 9;
    let e = expect_corruption(&d, offsets[2]);
    assert!(e.message().contains("header"), "{e}");
}

/// The defect the header checksum fixes: a flipped bit in a length field
/// used to make the record look like it ran past the end of the file, so it
/// and every record after it were dropped as a torn tail.
#[test]
fn flipped_length_bit_is_corruption_not_a_torn_tail() {
    let records = sample();
    let (data, offsets) = build(&records);
    for rec in 0..records.len() - 1 {
        for byte in 8..12 {
            for bit in [0u8, 3, 7] {
                let mut d = data.clone();
                d[offsets[rec] as usize + byte] ^= 1 << bit;
                expect_corruption(&d, offsets[rec]);
            }
        }
    }
}

#[test]
fn sync_appends_a_mark_that_readers_skip() {
    let mut w = LogWriter::new(Vec::new());
    w.add_record(b"a").unwrap();
    w.add_record(b"b").unwrap();
    let before = w.bytes_written();
    w.sync().unwrap();
    assert_eq!(w.synced_len(), before);
    assert_eq!(
        w.bytes_written(),
        before + (HEADER_LEN + SYNC_MARK_LEN) as u64
    );
    // Nothing new: no second mark.
    w.sync().unwrap();
    assert_eq!(
        w.bytes_written(),
        before + (HEADER_LEN + SYNC_MARK_LEN) as u64
    );
    w.add_record(b"c").unwrap();
    let data = w.into_inner();
    let mut r = LogReader::new(PATH, &data);
    let mut got = Vec::new();
    while let Some(rec) = r.read_record().unwrap() {
        got.push(rec.to_vec());
    }
    assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(r.synced_len(), before);
    assert_eq!(r.tail(), TailState::Clean);
}

/// A sink like an O_DIRECT file: appended bytes wait in a user-space
/// buffer, and each `flush` or `sync` that finds any is one device write.
struct DeviceSink {
    pending: Vec<u8>,
    device: Vec<u8>,
    device_writes: usize,
    writes_device: bool,
}

impl DeviceSink {
    fn new(writes_device: bool) -> DeviceSink {
        DeviceSink {
            pending: Vec::new(),
            device: Vec::new(),
            device_writes: 0,
            writes_device,
        }
    }
    fn hand_off(&mut self) {
        if !self.pending.is_empty() {
            self.device.append(&mut self.pending);
            self.device_writes += 1;
        }
    }
}

impl LogSink for DeviceSink {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        self.pending.extend_from_slice(buf);
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.hand_off();
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.hand_off();
        Ok(())
    }
    fn flush_writes_device(&self) -> bool {
        self.writes_device
    }
}

/// Where handing the mark over is a device write of its own and the writer
/// defers marks (the WAL), it waits for the next sync: one device write per
/// group commit instead of two, and the log on the device still reads back
/// with every mark in place. A writer that does not defer (the manifest,
/// never sealed) hands each mark over at once.
#[test]
fn a_sync_mark_waits_for_the_next_write_where_flushing_is_a_device_write() {
    for (writes_device, defer) in [(false, true), (true, false), (true, true)] {
        let mut w = LogWriter::new(DeviceSink::new(writes_device));
        if defer {
            w = w.defer_sync_marks();
        }
        let writes_device = writes_device && defer;
        let mut mark_ends = Vec::new();
        for round in 0..3u8 {
            w.add_record(&[round; 40]).unwrap();
            w.sync().unwrap();
            mark_ends.push(w.bytes_written());
        }
        let sink = w.sink();
        if writes_device {
            assert_eq!(sink.device_writes, 3, "one write per sync");
            // The last mark is still buffered: the synced records end the
            // device's bytes, as after a power cut that lost the mark.
            assert_eq!(
                sink.device.len() as u64,
                mark_ends[2] - (HEADER_LEN + SYNC_MARK_LEN) as u64
            );
        } else {
            assert_eq!(sink.device_writes, 6, "a write for each mark");
            assert_eq!(sink.device.len() as u64, mark_ends[2]);
        }
        let (recs, tail) = read_all(&sink.device).unwrap();
        assert_eq!(recs, (0..3u8).map(|r| vec![r; 40]).collect::<Vec<_>>());
        assert_eq!(tail, TailState::Clean);
        // The earlier marks reached the device and cover their records.
        let mut r = LogReader::new(PATH, &sink.device);
        while r.read_record().unwrap().is_some() {}
        let covered = if writes_device { 1 } else { 2 };
        assert_eq!(
            r.synced_len(),
            mark_ends[covered] - (HEADER_LEN + SYNC_MARK_LEN) as u64
        );
        // Sealing writes the last mark.
        let len = w.seal().unwrap();
        assert_eq!(w.sink().device.len() as u64, len);
        assert_eq!(len, mark_ends[2]);
    }
}

/// The defect sync marks fix: damage in the last record that was synced
/// used to read as a torn tail after a crash; the mark after it makes it
/// corruption. An unsynced last record may still be dropped.
#[test]
fn damage_in_the_last_synced_record_is_corruption() {
    let mut w = LogWriter::new(Vec::new());
    w.add_record(b"first").unwrap();
    let off = w.bytes_written();
    w.add_record(b"synced and acknowledged").unwrap();
    w.sync().unwrap();
    let data = w.into_inner();
    for pos in off as usize..off as usize + HEADER_LEN + 23 {
        let mut d = data.clone();
        d[pos] ^= 0x10;
        expect_corruption(&d, off);
    }
    // Without the mark (it never reached the disk) the same damage is a
    // torn tail: nothing proves the record was synced.
    let bare = &data[..data.len() - HEADER_LEN - SYNC_MARK_LEN];
    let mut d = bare.to_vec();
    d[off as usize + HEADER_LEN + 3] ^= 0x10;
    let (recs, tail) = read_all(&d).unwrap();
    assert_eq!(recs, vec![b"first".to_vec()]);
    assert_eq!(tail, TailState::Torn { offset: off });
}

#[test]
fn bad_sync_marks_are_corruption() {
    let (mut data, _) = build(&[b"x".to_vec()]);
    let off = data.len() as u64;
    // A mark claiming more than precedes it.
    data.extend_from_slice(&raw_record(
        RecordType::SyncMark as u8,
        &1000u64.to_le_bytes(),
    ));
    data.extend_from_slice(&build(&[b"y".to_vec()]).0);
    let e = expect_corruption(&data, off);
    assert!(e.message().contains("sync mark"), "{e}");

    let (mut data, _) = build(&[b"x".to_vec()]);
    data.extend_from_slice(&raw_record(RecordType::SyncMark as u8, b"short"));
    data.extend_from_slice(&build(&[b"y".to_vec()]).0);
    expect_corruption(&data, off);
}

fn read_sealed(data: &[u8], len: u64) -> Result<Vec<Vec<u8>>> {
    let mut r = LogReader::new(PATH, data).sealed_at(len);
    let mut out = Vec::new();
    while let Some(rec) = r.read_record()? {
        out.push(rec.to_vec());
    }
    Ok(out)
}

/// A log the manifest recorded as sealed: truncation, a damaged last
/// record and data past the end are all corruption.
#[test]
fn sealed_log_is_read_strictly() {
    let records = sample();
    let (data, offsets) = build(&records);
    let len = data.len() as u64;
    assert_eq!(read_sealed(&data, len).unwrap(), records);
    // Zero padding after the sealed end (O_DIRECT) is fine.
    let mut padded = data.clone();
    padded.resize(data.len().next_multiple_of(4096), 0);
    assert_eq!(read_sealed(&padded, len).unwrap(), records);

    for cut in [0, 1, offsets[2] as usize, data.len() - 1] {
        let e = read_sealed(&data[..cut], len).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        assert!(e.message().contains("sealed"), "{e}");
    }
    let last = *offsets.last().unwrap() as usize;
    for pos in [last, last + 5, last + HEADER_LEN + 1, data.len() - 1] {
        let mut d = data.clone();
        d[pos] ^= 0x01;
        let e = read_sealed(&d, len).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        assert_eq!(e.offset(), Some(last as u64), "{e}");
    }
    let mut longer = data.clone();
    longer.extend_from_slice(&build(&[b"later".to_vec()]).0);
    let e = read_sealed(&longer, len).unwrap_err();
    assert!(e.message().contains("after it"), "{e}");
}

/// Past the sealed length the ordinary tail rules apply: a damaged or
/// incomplete record with only zeros after it ends the log, as at the end
/// of any log; with data after it, it is corruption.
#[test]
fn sealed_log_tail_rules_apply_past_its_length() {
    let records = sample();
    let (data, _) = build(&records);
    let len = data.len() as u64;
    let (next, _) = build(&[b"later".to_vec()]);
    // A record past the sealed end whose payload checksum fails, then zeros.
    let mut torn = data.clone();
    torn.extend_from_slice(&next);
    let last = torn.len() - 1;
    torn[last] ^= 0x01;
    torn.resize(torn.len() + 100, 0);
    assert_eq!(read_sealed(&torn, len).unwrap(), records);
    // A partial header past the sealed end.
    let mut partial = data.clone();
    partial.extend_from_slice(&next[..HEADER_LEN - 3]);
    assert_eq!(read_sealed(&partial, len).unwrap(), records);
    // The same damaged record with data after it.
    let mut damaged = torn.clone();
    damaged.push(0x55);
    let e = read_sealed(&damaged, len).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.offset(), Some(len), "{e}");
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
    // A valid header declaring 4 GiB - 1 bytes, and two of them present.
    let mut h = raw_record(RecordType::Full as u8, &[]);
    h[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let hc = mask_crc(crc32c::crc32c(&h[4..HEADER_LEN]));
    h[0..4].copy_from_slice(&hc.to_le_bytes());
    data.extend_from_slice(&h);
    data.extend_from_slice(&[9, 9]);
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

// ---------------------------------------------------------------- compression

use crate::table::Compression;

/// Compressible payloads of several sizes, with a small and an
/// incompressible one among them (both stay full records).
fn compressible() -> Vec<Vec<u8>> {
    let mut x: u64 = 7;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    vec![
        b"tiny".to_vec(),
        b"value-".repeat(100),
        noise,
        (0..200_000u32).map(|i| (i % 13) as u8).collect(),
        b"k".repeat(128),
    ]
}

fn build_compressed(c: Compression, records: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
    let mut w = LogWriter::new(Vec::new()).with_compression(c);
    let mut offsets = Vec::new();
    for r in records {
        offsets.push(w.bytes_written());
        w.add_record(r).unwrap();
    }
    w.flush().unwrap();
    (w.into_inner(), offsets)
}

/// The type byte of the record whose header starts at `off`.
fn type_at(data: &[u8], off: u64) -> u8 {
    data[off as usize + 12]
}

#[test]
fn compressed_records_read_back_as_written_and_only_when_smaller() {
    let records = compressible();
    for c in [Compression::Lz4, Compression::Zstd] {
        let (data, offsets) = build_compressed(c, &records);
        let (back, tail) = read_all(&data).unwrap();
        assert_eq!(back, records, "{c:?}");
        assert_eq!(tail, TailState::Clean);
        let types: Vec<u8> = offsets.iter().map(|&o| type_at(&data, o)).collect();
        // tiny (< 128 B) and noise stay full; the rest are compressed.
        assert_eq!(types, [1, 3, 1, 3, 3], "{c:?}");
        let plain: usize = records.iter().map(|r| r.len() + HEADER_LEN).sum();
        assert!(data.len() < plain / 4, "{c:?}: {} of {plain}", data.len());
        // Salvage sees the same payloads.
        let salvaged: Vec<Vec<u8>> = salvage::salvage_records(&data, None)
            .into_iter()
            .filter_map(|s| match s {
                salvage::Salvaged::Record { payload, .. } => Some(payload.to_vec()),
                salvage::Salvaged::Damaged { .. } | salvage::Salvaged::Identity { .. } => None,
            })
            .collect();
        assert_eq!(salvaged, records);
    }
}

#[test]
fn a_log_mixes_plain_and_compressed_records_across_runs() {
    // A run without compression, then one with lz4 appending, then zstd:
    // the reader takes each record as it comes.
    let records = compressible();
    let mut w = LogWriter::new(Vec::new());
    w.add_record(&records[1]).unwrap();
    let len = w.sink().len() as u64;
    let mut w = LogWriter::with_offset(w.into_inner(), len).with_compression(Compression::Lz4);
    w.add_record(&records[3]).unwrap();
    let len = w.sink().len() as u64;
    let mut w = LogWriter::with_offset(w.into_inner(), len).with_compression(Compression::Zstd);
    w.add_record(&records[1]).unwrap();
    w.sync().unwrap();
    let data = w.into_inner();
    let (back, _) = read_all(&data).unwrap();
    assert_eq!(
        back,
        [records[1].clone(), records[3].clone(), records[1].clone()]
    );
}

/// Rewrites the record at `off` with `payload` as its (compressed-type)
/// body and valid checksums: what a writer bug or deliberate damage that
/// survives the checksums would look like.
fn forge_compressed(data: &[u8], off: u64, payload: &[u8]) -> Vec<u8> {
    let off = off as usize;
    let old_len = u32::from_le_bytes(data[off + 8..off + 12].try_into().unwrap()) as usize;
    let mut out = data[..off].to_vec();
    out.extend_from_slice(&encode_header(RecordType::Compressed, payload));
    out.extend_from_slice(payload);
    out.extend_from_slice(&data[off + HEADER_LEN + old_len..]);
    out
}

#[test]
fn compressed_payloads_that_do_not_decompress_are_corruption_even_last() {
    let records = compressible();
    let (data, offsets) = build_compressed(Compression::Lz4, &records);
    let last = offsets[4];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("unknown codec", vec![9, 1, 0, 0, 0, 0]),
        ("codec none", vec![0, 1, 0, 0, 0, 0]),
        ("size over the limit", {
            let mut p = vec![2];
            p.extend_from_slice(&u32::MAX.to_le_bytes());
            p.extend_from_slice(&[0; 16]);
            p
        }),
        ("lz4 garbage", vec![1, 100, 0, 0, 0, 0xff, 0xff, 0xff]),
        ("zstd garbage", vec![2, 100, 0, 0, 0, 1, 2, 3, 4, 5]),
    ];
    for (what, payload) in cases {
        for off in [offsets[1], last] {
            let forged = forge_compressed(&data, off, &payload);
            let e = expect_corruption(&forged, off);
            assert!(
                e.to_string().contains("compressed log record")
                    || e.to_string().contains("compressed payload")
                    || e.to_string().contains("decompress"),
                "{what}: {e}"
            );
        }
    }
    // A flipped byte inside a compressed record is caught by the checksum
    // like in any record.
    let mut flipped = data.clone();
    flipped[offsets[1] as usize + HEADER_LEN + 3] ^= 0x04;
    expect_corruption(&flipped, offsets[1]);
}

/// Records of about 300 bytes after a synced prefix, as a writer leaves
/// them; returns the image, each record's offset and the synced length.
fn unsynced_tail_image(records: usize, sync_at_end: bool) -> (Vec<u8>, Vec<u64>, u64) {
    let mut w = LogWriter::new(Vec::new());
    w.add_record(b"synced").unwrap();
    w.sync().unwrap();
    let synced = w.synced_len();
    let mut offsets = Vec::new();
    for i in 0..records {
        offsets.push(w.bytes_written());
        w.add_record(&vec![b'a' + i as u8; 300]).unwrap();
    }
    if sync_at_end {
        w.sync().unwrap();
    }
    (w.into_inner(), offsets, synced)
}

/// The first sector boundary at or after `pos`, and the one after it.
fn sector_after(pos: u64) -> usize {
    (pos as usize / 512 + 1) * 512
}

/// A copy of `data` with the bytes at `lost` read back as zeros, as a
/// sector whose write never reached the disk does.
fn with_zeros(data: &[u8], lost: std::ops::Range<usize>) -> Vec<u8> {
    let mut d = data.to_vec();
    d[lost].fill(0);
    d
}

/// The last record that starts in the first sector: the first one the
/// loss of the second sector (bytes 512..1024) damages.
fn first_hit_by_second_sector(offsets: &[u64]) -> usize {
    offsets.iter().rposition(|&o| (o as usize) < 512).unwrap()
}

/// A power cut after the kernel wrote back a later page of the unsynced
/// tail but not an earlier one: the lost sector reads as zeros, later
/// records are intact. Nothing was synced past the damage, so the log ends
/// before it, like a torn tail, instead of refusing the database.
#[test]
fn an_unsynced_tail_persisted_out_of_order_ends_the_log() {
    let (data, offsets, _) = unsynced_tail_image(8, false);
    // Lose the second whole sector (bytes 512..1024): it holds parts of
    // records 1 and 2 (offsets ~ 31, 344, 657, ...).
    let d = with_zeros(&data, 512..1024);
    let first_hit = first_hit_by_second_sector(&offsets);
    let (recs, tail) = read_all(&d).unwrap();
    assert_eq!(
        recs.len(),
        1 + first_hit,
        "the records before the lost sector"
    );
    assert_eq!(
        tail,
        TailState::Unpersisted {
            offset: offsets[first_hit]
        }
    );
    // A lost first sector of a record's header: zeros from inside the
    // sector to its end, the header's start made it.
    let rec = offsets
        .iter()
        .position(|&o| o as usize % 512 > 500)
        .map_or(3, |i| i);
    let boundary = sector_after(offsets[rec]);
    let d = with_zeros(&data, boundary..boundary + 512);
    let (_, tail) = read_all(&d).unwrap();
    assert!(matches!(tail, TailState::Unpersisted { .. }), "{tail:?}");
}

/// The same lost sector with an intact sync mark after it that covers it:
/// those bytes were synced, so the damage is real.
#[test]
fn a_lost_sector_a_later_sync_mark_covers_is_corruption() {
    let (data, offsets, _) = unsynced_tail_image(8, true);
    let d = with_zeros(&data, 512..1024);
    expect_corruption(&d, offsets[first_hit_by_second_sector(&offsets)]);
    // A sync mark before the damage does not cover it.
    let (data, offsets, synced) = unsynced_tail_image(8, false);
    assert!(synced < offsets[0]);
    let d = with_zeros(&data, 1024..1536);
    assert!(matches!(
        read_all(&d).unwrap().1,
        TailState::Unpersisted { .. }
    ));
}

/// Damage that is not a lost sector stays Corruption when records follow:
/// a flipped bit, a zero run that stops short of a sector boundary, and
/// anything in a sealed log.
#[test]
fn damage_that_is_not_a_lost_sector_is_still_corruption() {
    let (data, offsets, _) = unsynced_tail_image(8, false);
    for pos in [offsets[2] as usize + 1, offsets[2] as usize + 40] {
        let mut d = data.clone();
        d[pos] ^= 0x08;
        expect_corruption(&d, offsets[2]);
    }
    let end = sector_after(offsets[2]) - 1;
    let d = with_zeros(&data, offsets[2] as usize + 20..end);
    expect_corruption(&d, offsets[2]);

    let d = with_zeros(&data, 512..1024);
    let mut r = LogReader::new(PATH, &d).sealed_at(data.len() as u64);
    let e = loop {
        match r.read_record() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("a sealed log read past a lost sector"),
            Err(e) => break e,
        }
    };
    assert_eq!(e.kind(), ErrorKind::Corruption);
}

/// Found by the power-cut test after WAL segments were preallocated: a
/// header starting 3 bytes before a sector boundary, whose first sector's
/// new version never reached the disk (those 3 bytes read as zeros) while
/// the next sector, with the rest of the header and the payload, did.
#[test]
fn a_header_straddling_a_lost_sector_tail_ends_the_log() {
    let mut w = LogWriter::new(Vec::new());
    w.add_record(b"synced").unwrap();
    w.sync().unwrap();
    // Pad with a record so that the next header starts at 509.
    let pad = 509 - w.bytes_written() as usize - HEADER_LEN;
    w.add_record(&vec![b'p'; pad]).unwrap();
    assert_eq!(w.bytes_written(), 509);
    w.add_record(&vec![b'x'; 300]).unwrap();
    w.add_record(&vec![b'y'; 300]).unwrap();
    let mut d = w.into_inner();
    d[509..512].fill(0);
    let (recs, tail) = read_all(&d).unwrap();
    assert_eq!(recs.len(), 2, "the synced record and the pad");
    assert_eq!(tail, TailState::Unpersisted { offset: 509 });
    // The same three bytes flipped instead of zeroed are damage.
    let mut d2 = d.clone();
    d2[509..512].fill(0x5a);
    expect_corruption(&d2, 509);
}

// --- Recyclable records (a WAL file reused as a later WAL) ---

/// A recyclable log `number` of `records`, with a sync (and its mark)
/// after each record whose index is in `syncs`.
fn build_recyclable(number: u64, records: &[Vec<u8>], syncs: &[usize]) -> (Vec<u8>, Vec<u64>) {
    let mut w = LogWriter::new(Vec::new()).recyclable(number);
    let mut offsets = Vec::new();
    for (i, r) in records.iter().enumerate() {
        offsets.push(w.bytes_written());
        w.add_record(r).unwrap();
        if syncs.contains(&i) {
            w.sync().unwrap();
        }
    }
    w.flush().unwrap();
    assert_eq!(w.bytes_written(), w.sink().len() as u64);
    (w.into_inner(), offsets)
}

/// The file after a new life's bytes were written over an old one's from
/// offset 0: what a recycled WAL holds.
fn overlay(old: &[u8], new: &[u8]) -> Vec<u8> {
    let mut out = new.to_vec();
    if old.len() > new.len() {
        out.extend_from_slice(&old[new.len()..]);
    }
    out
}

fn read_log(number: u64, data: &[u8]) -> Result<(Vec<Vec<u8>>, TailState)> {
    let mut r = LogReader::new(PATH, data).for_log(number);
    let mut out = Vec::new();
    while let Some(rec) = r.read_record()? {
        out.push(rec.to_vec());
    }
    assert!(r.read_record()?.is_none());
    Ok((out, r.tail()))
}

/// Many records, each synced: an earlier life whose sync marks claim far
/// more than any new life holds.
fn old_life() -> Vec<u8> {
    let records: Vec<Vec<u8>> = (0..40u8).map(|i| vec![b'A' + i % 26; 97]).collect();
    let syncs: Vec<usize> = (0..40).collect();
    build_recyclable(3, &records, &syncs).0
}

#[test]
fn recyclable_records_round_trip_with_the_log_number_in_the_header() {
    let records = sample();
    let (data, offsets) = build_recyclable(9, &records, &[1]);
    assert_eq!(
        data[offsets[0] as usize + 12],
        4,
        "a recyclable full record"
    );
    assert_eq!(
        u64::from_le_bytes(data[HEADER_LEN..RECYCLABLE_HEADER_LEN].try_into().unwrap()),
        9
    );
    let (got, tail) = read_log(9, &data).unwrap();
    assert_eq!(got, records);
    assert_eq!(tail, TailState::Clean);
}

#[test]
fn a_stale_record_of_another_log_after_the_live_tail_ends_the_log() {
    let old = old_life();
    let new_records = vec![b"new one".to_vec(), b"new two".to_vec()];
    let (new, _) = build_recyclable(9, &new_records, &[0]);
    let file = overlay(&old, &new);
    assert!(file.len() > new.len() * 4, "the old life was longer");
    let (got, tail) = read_log(9, &file).unwrap();
    assert_eq!(got, new_records, "no stale record is replayed");
    assert_eq!(
        tail,
        TailState::Recycled {
            offset: new.len() as u64
        }
    );
    // The old life read as its own log is all there.
    assert_eq!(read_log(3, &old).unwrap().0.len(), 40);
    // Before the new life wrote anything: nothing of the old one.
    assert_eq!(
        read_log(9, &old).unwrap(),
        (vec![], TailState::Recycled { offset: 0 })
    );
}

#[test]
fn a_damaged_record_a_later_sync_mark_of_the_same_log_covers_is_corruption() {
    let old = old_life();
    let new_records = vec![b"one".to_vec(), vec![7u8; 200], b"three".to_vec()];
    let (mut new, offsets) = build_recyclable(9, &new_records, &[2]);
    new[offsets[1] as usize + RECYCLABLE_HEADER_LEN + 5] ^= 0x20;
    let e = read_log(9, &overlay(&old, &new)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.offset(), Some(offsets[1]), "{e}");
}

#[test]
fn a_damaged_record_followed_only_by_stale_records_ends_the_log() {
    let old = old_life();
    // The first record synced, the second not: its tail write was cut
    // short (a flipped byte stands for the old bytes left under it).
    let new_records = vec![b"synced".to_vec(), vec![7u8; 200]];
    let (mut new, offsets) = build_recyclable(9, &new_records, &[0]);
    new[offsets[1] as usize + RECYCLABLE_HEADER_LEN + 150] ^= 0x20;
    let file = overlay(&old, &new);
    let (got, tail) = read_log(9, &file).unwrap();
    assert_eq!(got, vec![b"synced".to_vec()]);
    assert_eq!(tail, TailState::Recycled { offset: offsets[1] });
    // The same with a damaged header: the old sync marks after it (which
    // claim lengths far past it) cover nothing of this log.
    let mut file = overlay(&old, &new_records_unflipped(&new_records));
    file[offsets[1] as usize + 9] ^= 0x01;
    let (got, tail) = read_log(9, &file).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(tail, TailState::Recycled { offset: offsets[1] });
}

fn new_records_unflipped(records: &[Vec<u8>]) -> Vec<u8> {
    build_recyclable(9, records, &[0]).0
}

#[test]
fn a_new_life_cut_inside_an_old_record_ends_at_the_cut() {
    // One long old record: the new life ends in the middle of it, so the
    // bytes after are no record at all, not even a stale one.
    let (old, _) = build_recyclable(3, &[vec![0x5a; 4000]], &[0]);
    let new_records = vec![b"a".to_vec(), b"b".to_vec()];
    let (new, _) = build_recyclable(9, &new_records, &[]);
    let (got, tail) = read_log(9, &overlay(&old, &new)).unwrap();
    assert_eq!(got, new_records);
    assert_eq!(
        tail,
        TailState::Recycled {
            offset: new.len() as u64
        }
    );
}

#[test]
fn direct_io_padding_between_the_new_tail_and_stale_bytes_ends_the_log() {
    let old = old_life();
    let (mut new, _) = build_recyclable(9, &[b"padded".to_vec()], &[0]);
    let end = new.len() as u64;
    new.resize(512, 0);
    let (got, tail) = read_log(9, &overlay(&old, &new)).unwrap();
    assert_eq!(got, vec![b"padded".to_vec()]);
    assert_eq!(tail, TailState::Recycled { offset: end });
}

#[test]
fn a_sealed_recycled_log_is_strict_to_its_length_and_ends_at_stale_bytes() {
    let old = old_life();
    let new_records = vec![b"one".to_vec(), b"two".to_vec()];
    let (new, offsets) = build_recyclable(9, &new_records, &[1]);
    let file = overlay(&old, &new);
    let mut r = LogReader::new(PATH, &file)
        .for_log(9)
        .sealed_at(new.len() as u64);
    let got: Vec<Vec<u8>> = r.by_ref().map(|x| x.unwrap().to_vec()).collect();
    assert_eq!(got, new_records);
    assert!(matches!(r.tail(), TailState::Recycled { .. }));
    // A stale record inside the sealed length: the log was damaged.
    let mut short = new.clone();
    short.truncate(offsets[1] as usize);
    let file = overlay(&old, &short);
    let e = LogReader::new(PATH, &file)
        .for_log(9)
        .sealed_at(new.len() as u64)
        .collect::<Result<Vec<_>>>()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
}

#[test]
fn recyclable_records_need_the_log_number() {
    let (data, _) = build_recyclable(9, &[b"x".to_vec()], &[]);
    let e = read_all(&data).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("without its number"), "{e}");
}

#[test]
fn old_format_logs_still_read_with_a_log_number_and_stay_strict() {
    let records = sample();
    let (data, offsets) = build(&records);
    let (got, tail) = read_log(7, &data).unwrap();
    assert_eq!(got, records);
    assert_eq!(tail, TailState::Clean);
    // Damage followed by more records is still corruption in a log of
    // the old format (it cannot be a recycled one).
    let mut d = data.clone();
    d[offsets[2] as usize + HEADER_LEN + 3] ^= 0x10;
    let e = read_log(7, &d).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.offset(), Some(offsets[2]));
    // And with recyclable records of another log after the damage: a log
    // of the plain format is never a reused file, so still corruption.
    let (plain, offsets) = build(&[b"one".to_vec(), vec![3u8; 300]]);
    let mut d = overlay(&old_life(), &plain);
    d[offsets[1] as usize + HEADER_LEN + 100] ^= 0x10;
    let e = read_log(7, &d).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.offset(), Some(offsets[1]));
}

#[test]
fn a_record_of_the_other_format_ends_the_log() {
    let (mut data, _) = build_recyclable(9, &[b"new".to_vec()], &[]);
    let end = data.len() as u64;
    data.extend_from_slice(&build(&[b"plain".to_vec()]).0);
    assert_eq!(
        read_log(9, &data).unwrap(),
        (vec![b"new".to_vec()], TailState::Recycled { offset: end })
    );
    let (mut data, _) = build(&[b"plain".to_vec()]);
    let end = data.len() as u64;
    data.extend_from_slice(&build_recyclable(9, &[b"new".to_vec()], &[]).0);
    assert_eq!(
        read_log(9, &data).unwrap(),
        (vec![b"plain".to_vec()], TailState::Recycled { offset: end })
    );
}

#[test]
fn compressed_recyclable_records_round_trip() {
    let records = compressible();
    let mut w = LogWriter::new(Vec::new())
        .recyclable(9)
        .with_compression(crate::table::Compression::Lz4);
    for r in &records {
        w.add_record(r).unwrap();
    }
    let data = w.into_inner();
    assert!(data.windows(1).any(|b| b[0] == 6), "some compressed");
    assert_eq!(read_log(9, &data).unwrap().0, records);
}

#[test]
fn salvage_skips_stale_records_of_another_log() {
    let old = old_life();
    let new_records = vec![b"one".to_vec(), b"two".to_vec()];
    let (new, _) = build_recyclable(9, &new_records, &[]);
    let file = overlay(&old, &new);
    let found: Vec<Vec<u8>> = salvage::salvage_records(&file, Some(9))
        .into_iter()
        .filter_map(|s| match s {
            salvage::Salvaged::Record { payload, .. } => Some(payload.to_vec()),
            salvage::Salvaged::Damaged { .. } | salvage::Salvaged::Identity { .. } => None,
        })
        .collect();
    assert_eq!(found, new_records);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A new life of any length written over an old one of any length and
    /// cut anywhere (a crash) reads as a prefix of the new life's records:
    /// never an old record, never an error.
    #[test]
    fn a_recycled_log_cut_anywhere_reads_a_prefix_of_its_own_records(
        old in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..30),
        new in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..30),
        cut_frac in 0.0f64..=1.0,
    ) {
        let old_syncs: Vec<usize> = (0..old.len()).step_by(3).collect();
        let (old_img, _) = build_recyclable(3, &old, &old_syncs);
        let (new_img, offsets) = build_recyclable(9, &new, &[]);
        let cut = (new_img.len() as f64 * cut_frac) as usize;
        let file = overlay(&old_img, &new_img[..cut]);
        let (got, tail) = read_log(9, &file).unwrap();
        // A record is whole when every byte of it is in the file: written
        // before the cut, or (for the bytes past the cut) left there by the
        // old life with the very same value, which a reader cannot tell
        // from a record written to its end.
        let whole = offsets
            .iter()
            .zip(&new)
            .take_while(|(off, r)| {
                let (start, end) = (**off as usize, **off as usize + RECYCLABLE_HEADER_LEN + r.len());
                end <= file.len() && file[start..end] == new_img[start..end]
            })
            .count();
        prop_assert_eq!(&got[..], &new[..whole]);
        let whole_end = match whole {
            0 => 0,
            n => offsets[n - 1] as usize + RECYCLABLE_HEADER_LEN + new[n - 1].len(),
        };
        prop_assert!(tail.valid_len(file.len() as u64) <= cut.max(whole_end) as u64);
    }

    /// Damage anywhere in a recycled file (a flipped byte, or a byte set
    /// to a recyclable type code) never panics, and what is returned is a
    /// prefix of the new life's records.
    #[test]
    fn damaged_recycled_logs_never_panic_and_never_replay_old_records(
        new in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..12),
        at_frac in 0.0f64..1.0,
        byte in prop_oneof![Just(4u8), Just(5), Just(6), any::<u8>()],
        sealed in any::<bool>(),
    ) {
        let old = old_life();
        let syncs: Vec<usize> = (0..new.len()).step_by(4).collect();
        let (new_img, _) = build_recyclable(9, &new, &syncs);
        let mut file = overlay(&old, &new_img);
        let at = (file.len() as f64 * at_frac) as usize;
        file[at] = byte;
        let mut r = LogReader::new(PATH, &file).for_log(9);
        if sealed {
            r = r.sealed_at(new_img.len() as u64);
        }
        let got: Vec<Vec<u8>> = r.by_ref().filter_map(|x| x.ok()).map(|x| x.to_vec()).collect();
        prop_assert!(got.len() <= new.len());
        prop_assert_eq!(&got[..], &new[..got.len()]);
    }

    #[test]
    fn random_bytes_read_as_a_numbered_log_never_panic(
        data in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let _ = read_log(9, &data);
        let _ = salvage::salvage_records(&data, Some(9));
    }
}
