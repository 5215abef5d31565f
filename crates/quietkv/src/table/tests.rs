//! Table-level tests: round trips against a model, scanner, cache
//! interaction, corruption handling.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::builder::{MAX_FILLER, PAGE};
use super::format::{Footer, FOOTER_LEN, FORMAT_VERSION_PADDED, FORMAT_VERSION_PLAIN};
use super::*;
use crate::error::{ErrorKind, Result};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, make_internal_key, seek_key, user_key, InternalKey, ValueKind};

const PATH: &str = "/db/000042.sst";

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn opts(compression: Compression, block_size: usize) -> TableOptions {
    TableOptions {
        block_size,
        compression,
        ..TableOptions::default()
    }
}

fn build(entries: &[(Vec<u8>, Vec<u8>)], o: TableOptions) -> (Vec<u8>, TableSummary) {
    let mut b = TableBuilder::new(Vec::new(), o);
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    assert_eq!(b.num_entries(), entries.len() as u64);
    let (summary, bytes) = b.finish().unwrap();
    assert_eq!(summary.file_size, bytes.len() as u64);
    (bytes, summary)
}

fn open(bytes: &[u8], cache: Option<Arc<BlockCache>>) -> Result<Arc<TableReader>> {
    let src = Arc::new(MemSource::new(bytes.to_vec(), PATH));
    TableReader::open(src, 42, cache).map(Arc::new)
}

fn drain(it: &mut dyn InternalIterator) -> Result<Entries> {
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn collect(it: &mut dyn InternalIterator) -> Result<Entries> {
    it.seek_to_first()?;
    drain(it)
}

/// Newest version of `uk` with seq <= snapshot, from a sorted entry list.
fn model_get(entries: &[(Vec<u8>, Vec<u8>)], uk: &[u8], snap: u64) -> Option<(ValueKind, Vec<u8>)> {
    let target = seek_key(uk, snap);
    let i = entries.partition_point(|(k, _)| compare_internal(k, &target).is_lt());
    let (k, v) = entries.get(i)?;
    let p = crate::key::parse_internal_key(k).unwrap();
    (p.user_key == uk).then(|| (p.kind, v.clone()))
}

/// ~`n` user keys with 1-3 versions each, some deletes, varied value sizes.
fn sample_entries(n: usize) -> Entries {
    let mut m = BTreeMap::new();
    let mut seq = 1;
    for i in 0..n {
        let uk = format!("user{:06}", i * 3);
        for v in 0..(i % 3 + 1) {
            seq += 1;
            let kind = if (i + v) % 7 == 3 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = if kind == ValueKind::Delete {
                Vec::new()
            } else {
                format!("{uk}-v{v}-").repeat(1 + i % 5).into_bytes()
            };
            m.insert(InternalKey::new(uk.as_bytes(), seq, kind), value);
        }
    }
    m.into_iter().map(|(k, v)| (k.0, v)).collect()
}

fn check_table(entries: &Entries, t: &Arc<TableReader>) {
    let got = collect(&mut t.iter()).unwrap();
    assert_eq!(&got, entries);
    let max_seq = t.properties().largest_seq;
    let uks: Vec<&[u8]> = entries.iter().map(|(k, _)| user_key(k)).collect();
    for uk in uks.iter().step_by(1 + uks.len() / 200) {
        for snap in [
            0,
            1,
            max_seq / 3,
            max_seq / 2,
            max_seq,
            crate::key::MAX_SEQ,
            u64::MAX,
        ] {
            assert_eq!(
                t.get(uk, snap).unwrap(),
                model_get(entries, uk, snap.min(crate::key::MAX_SEQ)),
                "get {:?} @ {snap}",
                String::from_utf8_lossy(uk)
            );
        }
    }
    // Absent keys, before first and after last.
    for uk in [&b""[..], b"a", b"user000001", b"user0000010", b"zzz"] {
        assert_eq!(t.get(uk, u64::MAX).unwrap(), None);
    }
    // Seeks: present keys, absent keys, before first, after last.
    let mut it = t.iter();
    for i in (0..entries.len()).step_by(1 + entries.len() / 100) {
        it.seek(&entries[i].0).unwrap();
        assert_eq!(it.key(), &entries[i].0[..]);
        let absent = make_internal_key(
            &[user_key(&entries[i].0), b"\0"].concat(),
            5,
            ValueKind::Put,
        );
        it.seek(&absent).unwrap();
        match entries
            .get(i + 1..)
            .and_then(|r| r.iter().find(|(k, _)| compare_internal(k, &absent).is_ge()))
        {
            Some((k, _)) => assert_eq!(it.key(), &k[..]),
            None => assert!(!it.valid()),
        }
    }
    it.seek(&seek_key(b"", u64::MAX >> 8)).unwrap();
    assert_eq!(it.valid(), !entries.is_empty());
    if let Some((k, _)) = entries.first() {
        assert_eq!(it.key(), &k[..]);
    }
    it.seek(&seek_key(b"zzzz", 1)).unwrap();
    assert!(!it.valid());
}

#[test]
fn round_trip_every_compression_and_size() {
    for n in [0, 1, 2, 700] {
        let entries = sample_entries(n);
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            for block_size in [64, 4096] {
                let (bytes, summary) = build(&entries, opts(c, block_size));
                let t = open(&bytes, None).unwrap();
                check_table(&entries, &t);
                let p = t.properties();
                assert_eq!(p.num_entries, entries.len() as u64);
                assert_eq!(summary.num_entries, p.num_entries);
                assert_eq!(summary.num_deletes, p.num_deletes);
                assert_eq!(
                    p.num_deletes as usize,
                    entries
                        .iter()
                        .filter(|(k, _)| k[k.len() - 8] == ValueKind::Delete as u8)
                        .count()
                );
                let (first, last) = (entries.first(), entries.last());
                assert_eq!(
                    p.smallest_key,
                    first.map(|e| e.0.clone()).unwrap_or_default()
                );
                assert_eq!(p.largest_key, last.map(|e| e.0.clone()).unwrap_or_default());
                assert_eq!(summary.smallest_key, p.smallest_key);
                assert_eq!(summary.largest_key, p.largest_key);
                assert_eq!(
                    (summary.smallest_seq, summary.largest_seq),
                    (p.smallest_seq, p.largest_seq)
                );
                assert_eq!(
                    p.raw_value_bytes,
                    entries.iter().map(|e| e.1.len() as u64).sum::<u64>()
                );
                assert_eq!(p.num_data_blocks as usize, t.index().len());
                if n > 100 && block_size == 4096 && c != Compression::None {
                    let (plain, _) = build(&entries, opts(Compression::None, block_size));
                    assert!(bytes.len() < plain.len(), "{c:?} did not shrink the table");
                }
            }
        }
    }
}

#[test]
fn empty_table_is_valid() {
    let (bytes, s) = build(&[], TableOptions::default());
    assert_eq!(
        (s.num_entries, s.smallest_key.len(), s.largest_seq),
        (0, 0, 0)
    );
    let t = open(&bytes, None).unwrap();
    assert!(t.index().is_empty());
    let mut it = t.iter();
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    assert_eq!(t.get(b"x", 9).unwrap(), None);
}

#[test]
fn open_verified_checks_size_number_and_database() {
    let entries = sample_entries(200);
    let mut b = TableBuilder::new(Vec::new(), TableOptions::default()).with_identity(42, 0xfeed);
    for (k, v) in &entries {
        b.add(k, v).unwrap();
    }
    let (s, bytes) = b.finish().unwrap();
    let src = || Arc::new(MemSource::new(bytes.clone(), PATH)) as Arc<dyn RandomSource>;
    let good = ExpectedTable {
        number: 42,
        size: s.file_size,
        db_id: 0xfeed,
        largest_seq: s.largest_seq,
    };
    let t = TableReader::open_verified(src(), &good, None).unwrap();
    assert_eq!(
        (t.properties().file_number, t.properties().db_id),
        (42, 0xfeed)
    );
    check_table(&entries, &Arc::new(t));
    for (bad, expect) in [
        (
            ExpectedTable { number: 43, ..good },
            "holds table 000042.sst",
        ),
        (
            ExpectedTable {
                size: s.file_size + 1,
                ..good
            },
            "bytes but the manifest recorded",
        ),
        (
            ExpectedTable {
                db_id: 0xbeef,
                ..good
            },
            "written by database",
        ),
        (
            ExpectedTable {
                largest_seq: s.largest_seq - 1,
                ..good
            },
            "holds entries up to sequence number",
        ),
    ] {
        let e = TableReader::open_verified(src(), &bad, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption);
        assert_eq!(e.file(), Some(std::path::Path::new(PATH)));
        assert!(e.to_string().contains(expect), "{e}");
    }
    // A table built without an identity (as before identities existed)
    // passes on size alone.
    let (old, s) = build(&entries, TableOptions::default());
    let old_src = Arc::new(MemSource::new(old, PATH));
    let expected = ExpectedTable {
        size: s.file_size,
        ..good
    };
    TableReader::open_verified(old_src, &expected, None).unwrap();
}

#[test]
fn builder_rejects_bad_input() {
    let mut b = TableBuilder::new(Vec::new(), TableOptions::default());
    let k5 = make_internal_key(b"k", 5, ValueKind::Put);
    b.add(&k5, b"v").unwrap();
    for bad in [
        k5.clone(),
        make_internal_key(b"k", 6, ValueKind::Put),
        make_internal_key(b"j", 1, ValueKind::Put),
        b"short".to_vec(),
    ] {
        assert_eq!(
            b.add(&bad, b"").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    let before = b.estimated_size();
    assert!(before > 0);
    b.add(&make_internal_key(b"k", 4, ValueKind::Delete), b"")
        .unwrap();
    assert!(b.estimated_size() > before);
    assert_eq!(b.num_entries(), 2);
    b.finish().unwrap();
}

struct FailingSink {
    budget: usize,
}

impl TableSink for FailingSink {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        if buf.len() > self.budget {
            return Err(crate::Error::new(ErrorKind::Io, "disk full"));
        }
        self.budget -= buf.len();
        Ok(())
    }
}

#[test]
fn sink_errors_poison_the_builder() {
    let mut b = TableBuilder::new(FailingSink { budget: 100 }, opts(Compression::None, 64));
    let mut failed = false;
    for i in 0..100u64 {
        let k = make_internal_key(format!("k{i:04}").as_bytes(), 1, ValueKind::Put);
        match b.add(&k, &[1; 40]) {
            Ok(()) => assert!(!failed),
            Err(e) => {
                assert_eq!(
                    e.kind(),
                    if failed {
                        ErrorKind::InvalidArgument
                    } else {
                        ErrorKind::Io
                    }
                );
                failed = true;
            }
        }
    }
    assert!(failed);
    assert!(b.finish().is_err());
}

#[test]
fn scanner_matches_iter_and_leaves_cache_alone() {
    let entries = sample_entries(500);
    for c in [Compression::None, Compression::Lz4] {
        let (bytes, _) = build(&entries, opts(c, 512));
        let cache = Arc::new(BlockCache::new(1 << 20));
        let t = open(&bytes, Some(Arc::clone(&cache))).unwrap();
        let src = MemSource::new(bytes.clone(), PATH);
        let before = cache.stats();
        let mut sc = TableScanner::new(Arc::clone(&t), Box::new(src.seq()));
        assert_eq!(collect(&mut sc).unwrap(), entries);
        assert_eq!(cache.stats(), before);

        // Forward seeks work (skipping blocks); backward across blocks does not.
        let mut sc = TableScanner::new(Arc::clone(&t), Box::new(src.seq()));
        let mid = &entries[entries.len() / 2].0;
        sc.seek(mid).unwrap();
        assert_eq!(sc.key(), &mid[..]);
        assert_eq!(
            drain(&mut sc).unwrap(),
            entries[entries.len() / 2..].to_vec()
        );
        assert_eq!(
            sc.seek(&entries[0].0).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(cache.stats(), before);

        // iter() fills the cache and then hits it.
        assert_eq!(collect(&mut t.iter()).unwrap(), entries);
        let s1 = cache.stats();
        assert_eq!(s1.misses - before.misses, t.index().len() as u64);
        assert_eq!(s1.inserts, t.index().len() as u64);
        assert_eq!(collect(&mut t.iter()).unwrap(), entries);
        let s2 = cache.stats();
        assert_eq!(s2.hits - s1.hits, t.index().len() as u64);
        assert_eq!(s2.misses, s1.misses);
        assert!(s2.usage > 0 && s2.usage <= 1 << 20);
        assert!(t.get(user_key(&entries[3].0), u64::MAX).unwrap().is_some());
        assert_eq!(cache.stats().hits, s2.hits + 1);
    }
}

#[test]
fn scanner_rejects_non_contiguous_layout() {
    // A source that is shifted by one byte does not line up with the index.
    let entries = sample_entries(50);
    let (bytes, _) = build(&entries, opts(Compression::None, 256));
    let t = open(&bytes, None).unwrap();
    let mut shifted = vec![0u8];
    shifted.extend_from_slice(&bytes);
    let mut sc = TableScanner::new(t, Box::new(MemSeqSource::new(shifted, PATH)));
    let e = sc.seek_to_first().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption);
    assert_eq!(e.offset(), Some(0));
}

/// Counts the reads that reach the file.
struct CountingSource {
    inner: MemSource,
    reads: std::sync::atomic::AtomicU64,
}

impl RandomSource for CountingSource {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.read_at(offset, len)
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn path(&self) -> &std::path::Path {
        self.inner.path()
    }
}

#[test]
fn index_and_filter_stay_pinned_under_block_cache_churn() {
    let entries = sample_entries(2000);
    let (bytes, _) = build(&entries, opts(Compression::None, 512));
    // Room for only a few data blocks: every get evicts something.
    let cache = Arc::new(BlockCache::with_shard_bits(64 << 10, 0));
    let src = Arc::new(CountingSource {
        inner: MemSource::new(bytes.clone(), PATH),
        reads: Default::default(),
    });
    let t = TableReader::open(src.clone(), 7, Some(cache.clone())).unwrap();
    let pinned = t.pinned_bytes();
    let index_keys: usize = t.index().iter().map(|e| e.last_key.len()).sum();
    assert!(pinned > index_keys, "{pinned} <= {index_keys}");
    assert_eq!(cache.stats().pinned, pinned as u64);
    let opened = src.reads.load(std::sync::atomic::Ordering::Relaxed);
    let mut gets = 0u64;
    for round in 0..3 {
        for (k, _) in entries.iter().step_by(7 + round) {
            t.get(user_key(k), u64::MAX >> 8).unwrap();
            gets += 1;
        }
        // Keys the filter rules out cost no read at all.
        for i in 0..200 {
            let k = format!("absent{i}");
            // A false positive may read one data block.
            gets += u64::from(t.may_contain(k.as_bytes()));
            t.get(k.as_bytes(), u64::MAX >> 8).unwrap();
        }
    }
    let reads = src.reads.load(std::sync::atomic::Ordering::Relaxed) - opened;
    // At most one (data block) read per get of a present key: the index
    // and filter are never read again, however hard the cache churns.
    assert!(reads <= gets, "{reads} reads for {gets} gets");
    assert!(cache.stats().evictions > 0);
    assert!(cache.usage() <= (64 << 10) - pinned);
    drop(t);
    assert_eq!(cache.stats().pinned, 0);
}

#[test]
fn table_bloom_filter() {
    let n = 10_000;
    let entries: Entries = (0..n)
        .map(|i| {
            (
                make_internal_key(format!("key-{i:08}").as_bytes(), 1, ValueKind::Put),
                vec![],
            )
        })
        .collect();
    let (bytes, _) = build(&entries, TableOptions::default());
    let t = open(&bytes, None).unwrap();
    for (k, _) in &entries {
        assert!(t.may_contain(user_key(k)));
    }
    let fp = (0..n)
        .filter(|i| t.may_contain(format!("other-{i:08}").as_bytes()))
        .count();
    assert!((fp as f64) / (n as f64) < 0.03, "false positives: {fp}");

    let (bytes, _) = build(
        &entries,
        TableOptions {
            bloom_bits_per_key: 0,
            ..TableOptions::default()
        },
    );
    let t = open(&bytes, None).unwrap();
    assert!(t.may_contain(b"anything"));
    assert_eq!(t.get(b"anything", 5).unwrap(), None);
    assert_eq!(
        t.get(b"key-00000007", 5).unwrap(),
        Some((ValueKind::Put, vec![]))
    );
}

#[test]
fn footer_errors_are_clear() {
    let (bytes, _) = build(&sample_entries(10), TableOptions::default());
    let n = bytes.len();
    let mut wrong = bytes.clone();
    wrong[n - 1] ^= 0x40;
    let e = open(&wrong, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption);
    assert!(e.message().contains("not a quietkv table"), "{e}");
    assert_eq!(e.file(), Some(std::path::Path::new(PATH)));
    let mut newer = bytes.clone();
    newer[n - 12..n - 8].copy_from_slice(&7u32.to_le_bytes());
    let e = open(&newer, None).unwrap_err();
    assert_eq!(
        e.message(),
        "table format version 7 is newer than this build understands (3)"
    );
    let e = open(b"tiny", None).unwrap_err();
    assert!(e.message().contains("not a quietkv table"));
}

/// Every operation on a damaged table either returns correct data or a
/// Corruption error; nothing panics.
fn exercise_damaged(bytes: &[u8], entries: &Entries) -> Vec<crate::Error> {
    let mut errors = Vec::new();
    let t = match open(bytes, None) {
        Ok(t) => t,
        Err(e) => {
            errors.push(e);
            return errors;
        }
    };
    match collect(&mut t.iter()) {
        Ok(got) => assert_eq!(&got, entries),
        Err(e) => errors.push(e),
    }
    let mut sc = TableScanner::new(
        Arc::clone(&t),
        Box::new(MemSeqSource::new(bytes.to_vec(), PATH)),
    );
    match collect(&mut sc) {
        Ok(got) => assert_eq!(&got, entries),
        Err(e) => errors.push(e),
    }
    for (k, _) in entries.iter().step_by(7) {
        let uk = user_key(k);
        match t.get(uk, u64::MAX) {
            Ok(v) => assert_eq!(v, model_get(entries, uk, crate::key::MAX_SEQ)),
            Err(e) => errors.push(e),
        }
    }
    errors
}

/// Flips one bit of the table at `pos`, checks that reading it reports
/// corruption of this file (and nothing else), and returns the errors.
fn flip_bit_and_exercise(bytes: &[u8], entries: &Entries, pos: usize) -> Vec<crate::Error> {
    let mut damaged = bytes.to_vec();
    damaged[pos] ^= 1 << (pos % 8);
    let errors = exercise_damaged(&damaged, entries);
    // CRC32C catches every single-bit flip somewhere.
    assert!(!errors.is_empty(), "flip at {pos} went unnoticed");
    for e in &errors {
        assert_eq!(e.kind(), ErrorKind::Corruption, "flip at {pos}: {e}");
        assert_eq!(e.file(), Some(std::path::Path::new(PATH)));
    }
    errors
}

#[test]
fn every_byte_flip_is_detected_or_harmless() {
    let entries = sample_entries(60);
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let (bytes, _) = build(&entries, opts(c, 300));
        let t = open(&bytes, None).unwrap();
        let data_end = t.properties().data_size as usize;
        for pos in 0..bytes.len() {
            let errors = flip_bit_and_exercise(&bytes, &entries, pos);
            if pos < data_end {
                // The damaged data block is named by its offset.
                let block = t
                    .index()
                    .iter()
                    .find(|e| {
                        (e.handle.offset..e.handle.offset + e.handle.size).contains(&(pos as u64))
                    })
                    .unwrap();
                assert!(
                    errors
                        .iter()
                        .all(|e| e.offset() == Some(block.handle.offset)),
                    "flip at {pos}: {errors:?}"
                );
                assert!(errors[0].message().contains("checksum"), "{}", errors[0]);
            }
        }
    }
}

#[test]
fn truncated_tables_are_rejected() {
    let entries = sample_entries(40);
    let (bytes, _) = build(&entries, opts(Compression::Lz4, 200));
    for len in 0..bytes.len() {
        let e = open(&bytes[..len], None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "len {len}: {e}");
    }
}

/// Damages a block's payload and fixes its checksum, so the structural
/// decoders behind the checksum see the garbage.
fn damage_behind_checksum(bytes: &[u8], h: BlockHandle, at: usize, xor: u8) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let start = h.offset as usize;
    let end = start + h.size as usize;
    let payload_end = end - 5;
    let pos = start + at % (payload_end - start).max(1);
    if pos < payload_end {
        out[pos] ^= xor;
    }
    let crc = crc32c::crc32c(&out[start..end - 4]);
    out[end - 4..end].copy_from_slice(&crc.to_le_bytes());
    out
}

fn footer_handles(bytes: &[u8]) -> Vec<BlockHandle> {
    let f = format::Footer::decode(
        &bytes[bytes.len() - format::FOOTER_LEN..],
        bytes.len() as u64,
    )
    .unwrap();
    vec![f.filter, f.index, f.properties]
}

#[test]
fn garbage_behind_valid_checksums_never_panics() {
    let entries = sample_entries(60);
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let (bytes, _) = build(&entries, opts(c, 400));
        let t = open(&bytes, None).unwrap();
        let mut handles: Vec<BlockHandle> = t.index().iter().map(|e| e.handle).collect();
        handles.extend(footer_handles(&bytes));
        for h in handles {
            for at in 0..h.size as usize {
                for xor in [[0x01, 0x80, 0xff][at % 3]] {
                    let damaged = damage_behind_checksum(&bytes, h, at, xor);
                    // Data may come back wrong here (no checksum can tell), but
                    // every error must be a Corruption and nothing may panic.
                    let r = std::panic::catch_unwind(|| exercise_no_model(&damaged));
                    let errs = r.unwrap_or_else(|_| panic!("panic with {xor:#x} at {at} of {h:?}"));
                    for e in errs {
                        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
                    }
                }
            }
        }
    }
}

fn exercise_no_model(bytes: &[u8]) -> Vec<crate::Error> {
    let mut errors = Vec::new();
    let t = match open(bytes, None) {
        Ok(t) => t,
        Err(e) => return vec![e],
    };
    if let Err(e) = collect(&mut t.iter()) {
        errors.push(e);
    }
    let mut sc = TableScanner::new(
        Arc::clone(&t),
        Box::new(MemSeqSource::new(bytes.to_vec(), PATH)),
    );
    if let Err(e) = collect(&mut sc) {
        errors.push(e);
    }
    for k in [&b"user000030"[..], b"user000090", b"x"] {
        if let Err(e) = t.get(k, u64::MAX) {
            errors.push(e);
        }
        let mut it = t.iter();
        if let Err(e) = it.seek(&seek_key(k, 77)) {
            errors.push(e);
        }
    }
    errors
}

fn arb_entries() -> impl Strategy<Value = Entries> {
    let key = prop::collection::vec(prop::sample::select(b"abc\0\xff".to_vec()), 0..6);
    let entry = (
        key,
        0u64..50,
        prop::bool::weighted(0.2),
        prop::collection::vec(any::<u8>(), 0..40),
    );
    prop::collection::vec(entry, 0..300).prop_map(|raw| {
        let mut m = BTreeMap::new();
        for (uk, seq, del, value) in raw {
            let kind = if del {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            m.insert(InternalKey::new(&uk, seq, kind), value);
        }
        m.into_iter().map(|(k, v)| (k.0, v)).collect()
    })
}

fn arb_compression() -> impl Strategy<Value = Compression> {
    prop::sample::select(vec![Compression::None, Compression::Lz4, Compression::Zstd])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn prop_table_matches_model(
        entries in arb_entries(),
        c in arb_compression(),
        block_size in prop_oneof![16usize..1024, 4096usize..6000],
        align_blocks in any::<bool>(),
        bloom in prop::sample::select(vec![0usize, 1, 10]),
        probes in prop::collection::vec((prop::collection::vec(prop::sample::select(b"abc\0\xff".to_vec()), 0..6), 0u64..60), 40),
    ) {
        let o = TableOptions { block_size, compression: c, bloom_bits_per_key: bloom, zstd_level: 2, keyspace_id: 0, align_blocks };
        let (bytes, _) = build(&entries, o);
        let cache = Arc::new(BlockCache::with_shard_bits(2048, 1));
        let t = open(&bytes, Some(cache.clone())).unwrap();
        prop_assert_eq!(&collect(&mut t.iter()).unwrap(), &entries);
        let src = MemSource::new(bytes.clone(), PATH);
        prop_assert_eq!(&collect(&mut TableScanner::new(t.clone(), Box::new(src.seq()))).unwrap(), &entries);
        let mut it = t.iter();
        for (uk, snap) in &probes {
            prop_assert_eq!(t.get(uk, *snap).unwrap(), model_get(&entries, uk, *snap));
            // The newest entry's sequence number, whatever its kind.
            let newest = entries
                .iter()
                .find(|(k, _)| user_key(k) == &uk[..])
                .map(|(k, _)| crate::key::parse_internal_key(k).unwrap().seq);
            prop_assert_eq!(t.latest_seq(uk).unwrap(), newest);
            let target = seek_key(uk, *snap);
            it.seek(&target).unwrap();
            let i = entries.partition_point(|(k, _)| compare_internal(k, &target).is_lt());
            match entries.get(i) {
                Some((k, v)) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), &k[..]);
                    prop_assert_eq!(it.value(), &v[..]);
                }
                None => prop_assert!(!it.valid()),
            }
        }
        prop_assert!(cache.usage() <= 2048);
    }

    #[test]
    fn prop_random_damage_never_panics(
        entries in arb_entries(),
        c in arb_compression(),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        truncate in prop::option::of(any::<prop::sample::Index>()),
        block_size in prop::sample::select(vec![128usize, 4096]),
    ) {
        // 4096: uncompressed tables then have padded blocks.
        let (bytes, _) = build(&entries, opts(c, block_size));
        let mut damaged = bytes.clone();
        for (i, b) in damage {
            let p = i.index(damaged.len());
            damaged[p] = b;
        }
        if let Some(i) = truncate {
            damaged.truncate(i.index(damaged.len()));
        }
        for e in exercise_damaged(&damaged, &entries) {
            prop_assert_eq!(e.kind(), ErrorKind::Corruption);
        }
    }
}

/// A table with range tombstones: its own block, format version 2, bounds
/// that cover the tombstones, and every damage to the block refused.
#[test]
fn range_tombstones_round_trip_in_their_own_block() {
    use crate::range_tombstone::RangeTombstone;
    let entries = sample_entries(50);
    // Unpadded blocks, so the version says only whether there are tombstones.
    let o = TableOptions {
        align_blocks: false,
        ..TableOptions::default()
    };
    let (plain, _) = build(&entries, o);
    let n = plain.len();
    assert_eq!(
        &plain[n - 12..n - 8],
        &1u32.to_le_bytes(),
        "version 1 without tombstones"
    );
    assert_eq!(open(&plain, None).unwrap().range_tombstones(), &[]);

    let tombs = [
        RangeTombstone::new(b"a", b"user000010", 500),
        RangeTombstone::new(b"user000090", b"zz", 501),
        RangeTombstone::new(b"user000090", b"user0001", 3),
    ];
    let mut b = TableBuilder::new(Vec::new(), o);
    for t in &tombs {
        b.add_range_tombstone(t).unwrap();
    }
    for (k, v) in &entries {
        b.add(k, v).unwrap();
    }
    let (summary, bytes) = b.finish().unwrap();
    let n = bytes.len();
    assert_eq!(
        &bytes[n - 12..n - 8],
        &2u32.to_le_bytes(),
        "version 2 with them"
    );
    assert_eq!(summary.num_range_deletes, 3);
    assert_eq!(summary.num_entries, entries.len() as u64);
    assert_eq!(user_key(&summary.smallest_key), b"a");
    assert_eq!(user_key(&summary.largest_key), b"zz");
    assert_eq!(summary.largest_seq, 501);
    let t = open(&bytes, None).unwrap();
    // In internal-key order: begin ascending, newer first.
    assert_eq!(
        t.range_tombstones(),
        &[tombs[0].clone(), tombs[1].clone(), tombs[2].clone()]
    );
    assert_eq!(t.range_del_seq(b"b", u64::MAX), 500);
    assert_eq!(t.range_del_seq(b"b", 499), 0);
    assert_eq!(t.range_del_seq(b"user000095", u64::MAX), 501);
    assert_eq!(t.range_del_seq(b"user000095", 100), 3);
    // Point reads and iteration see only the point entries.
    assert_eq!(collect(&mut t.iter()).unwrap(), entries);
    let (k0, v0) = &entries[0];
    let p0 = crate::key::parse_internal_key(k0).unwrap();
    assert_eq!(
        t.get_entry(p0.user_key, u64::MAX)
            .unwrap()
            .map(|(kind, seq, v)| (kind, seq, v.as_slice().to_vec())),
        Some((p0.kind, p0.seq, v0.clone()))
    );

    // Every flipped byte of the tombstone block is refused at open.
    let props = t.properties().clone();
    let (at, len) = (
        props.range_del_offset as usize,
        props.range_del_size as usize,
    );
    for i in at..at + len {
        let mut bad = bytes.clone();
        bad[i] ^= 0x10;
        let e = open(&bad, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "byte {i}: {e}");
        assert_eq!(e.file(), Some(std::path::Path::new(PATH)));
    }
    // A version 1 footer over the same bytes: a table that claims range
    // tombstones it may not hold.
    let mut v1 = bytes.clone();
    let footer = crate::table::format::Footer::decode(&bytes[n - 64..], n as u64).unwrap();
    let mut f = footer;
    f.version = 1;
    v1[n - 64..].copy_from_slice(&f.encode());
    let e = open(&v1, None).unwrap_err();
    assert!(e.message().contains("cannot hold range tombstones"), "{e}");

    // A table of tombstones only.
    let mut b = TableBuilder::new(Vec::new(), TableOptions::default());
    b.add_range_tombstone(&tombs[1]).unwrap();
    let (summary, bytes) = b.finish().unwrap();
    assert_eq!((summary.num_entries, summary.num_range_deletes), (0, 1));
    assert_eq!((summary.smallest_seq, summary.largest_seq), (501, 501));
    let t = open(&bytes, None).unwrap();
    assert_eq!(t.range_tombstones(), &tombs[1..2]);
    assert!(collect(&mut t.iter()).unwrap().is_empty());
}

/// `n` entries of 16-byte keys and 100-byte values, as db_bench writes them.
fn small_value_entries(n: usize) -> Entries {
    (0..n)
        .map(|i| {
            let k = InternalKey::new(format!("{:016}", i * 7).as_bytes(), 1, ValueKind::Put);
            (k.0, vec![(i % 251) as u8; 100])
        })
        .collect()
}

/// Whether data block `h` lies within one page.
fn within_one_page(h: BlockHandle) -> bool {
    h.offset / PAGE as u64 == (h.offset + h.size - 1) / PAGE as u64
}

/// With small entries every data block ends on a page boundary (so none
/// straddles two pages), the filler stays under its bound, the table is
/// format version 3 and reads back whole; without alignment most blocks
/// straddle.
#[test]
fn aligned_blocks_each_fit_in_one_page() {
    let entries = small_value_entries(5000);
    let (bytes, _) = build(&entries, opts(Compression::None, 4096));
    let t = open(&bytes, None).unwrap();
    check_table(&entries, &t);
    let blocks: Vec<BlockHandle> = t.index().iter().map(|e| e.handle).collect();
    assert!(blocks.len() > 100, "{}", blocks.len());
    let last = blocks.len() - 1;
    for (i, h) in blocks.iter().enumerate() {
        assert!(within_one_page(*h), "block {i}: {h:?}");
        if i < last {
            assert_eq!(h.end().unwrap() % PAGE as u64, 0, "block {i}: {h:?}");
            // Full but for less than one entry and the filler's bound.
            assert!(h.size as usize > PAGE - MAX_FILLER, "block {i}: {h:?}");
        }
    }
    assert_eq!(
        Footer::decode(&bytes[bytes.len() - FOOTER_LEN..], bytes.len() as u64)
            .unwrap()
            .version,
        FORMAT_VERSION_PADDED
    );
    let plain = TableOptions {
        align_blocks: false,
        ..opts(Compression::None, 4096)
    };
    let (unaligned, _) = build(&entries, plain);
    let t2 = open(&unaligned, None).unwrap();
    let straddling = t2
        .index()
        .iter()
        .filter(|e| !within_one_page(e.handle))
        .count();
    assert!(straddling > t2.index().len() / 2, "{straddling}");
    // What alignment costs in space: under 5% with 100-byte values.
    assert!(
        bytes.len() * 100 < unaligned.len() * 105,
        "{} against {}",
        bytes.len(),
        unaligned.len()
    );
}

/// Entries too large to leave a small slack get no filler: with 4 KiB values
/// the table is the same byte for byte as without alignment; so is a
/// compressed table, whose block sizes the builder cannot know in advance.
#[test]
fn large_entries_and_compressed_tables_are_not_padded() {
    let big: Entries = (0..40)
        .map(|i| {
            let k = InternalKey::new(format!("{i:016}").as_bytes(), 1, ValueKind::Put);
            (k.0, vec![i as u8; 4096])
        })
        .collect();
    let small = small_value_entries(2000);
    for (entries, c) in [
        (&big, Compression::None),
        (&small, Compression::Lz4),
        (&small, Compression::Zstd),
    ] {
        let (aligned, _) = build(entries, opts(c, 4096));
        let plain = TableOptions {
            align_blocks: false,
            ..opts(c, 4096)
        };
        let (unaligned, _) = build(entries, plain);
        assert!(aligned == unaligned, "{c:?}");
        let footer =
            Footer::decode(&aligned[aligned.len() - FOOTER_LEN..], aligned.len() as u64).unwrap();
        assert_eq!(footer.version, FORMAT_VERSION_PLAIN, "{c:?}");
    }
}

/// After a block that cannot be aligned (one large entry) the following
/// blocks of small entries find the page boundaries again.
#[test]
fn blocks_realign_after_a_large_entry() {
    let mut entries = small_value_entries(1000);
    let at = entries.len() / 2;
    entries[at].1 = vec![9; 10_000];
    let (bytes, _) = build(&entries, opts(Compression::None, 4096));
    let t = open(&bytes, None).unwrap();
    check_table(&entries, &t);
    let blocks: Vec<BlockHandle> = t.index().iter().map(|e| e.handle).collect();
    let large = blocks.iter().position(|h| h.size > PAGE as u64).unwrap();
    // At most one block after it ends off a boundary; the rest end on one.
    let unaligned_after = blocks[large + 1..blocks.len() - 1]
        .iter()
        .filter(|h| h.end().unwrap() % PAGE as u64 != 0)
        .count();
    assert!(unaligned_after <= 1, "{blocks:?}");
    assert!(blocks.len() - large > 5);
}

/// Every single-bit flip in the first pages of a padded table (data blocks,
/// filler and filler lengths included) is caught as corruption, and none
/// panics.
#[test]
fn every_byte_flip_in_padded_blocks_is_detected() {
    let entries = small_value_entries(100);
    let (bytes, _) = build(&entries, opts(Compression::None, 4096));
    let t = open(&bytes, None).unwrap();
    assert!(t.index().len() >= 3);
    let end = t.index().get(1).unwrap().handle.end().unwrap() as usize;
    for pos in (0..end).step_by(3) {
        flip_bit_and_exercise(&bytes, &entries, pos);
    }
}
