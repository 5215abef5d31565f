//! Every byte flipped: a small database — tables on two levels, a
//! manifest, CURRENT and a sealed WAL with unflushed records — has one
//! byte of one file flipped at a time, then is opened, read key by key and
//! scanned. The outcome must be a Corruption error or the right
//! answer, never a wrong value, a missing key, an extra key or a panic.
//! Small files are swept byte by byte; table data blocks with a stride
//! (their checksums are tested on their own in the table tests), the
//! tables' index, filter, properties and footer byte by byte.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::{copy_without_lock, dir};
use quietkv::{check_dir, Db, ErrorKind, Options, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("v{round}-{i}-").repeat(4).into_bytes()
}

fn options() -> Options {
    Options::default().block_size(512)
}

/// Builds the database and returns what it must hold.
fn build(d: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    let db = Db::open(d, options()).unwrap();
    for round in 0..3u32 {
        for i in (round * 37..400).step_by(3) {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
        if round == 2 {
            // A range tombstone in the newest table.
            db.delete_range(key(150)..key(170)).unwrap();
            model.retain(|k, _| !(key(150) <= *k && *k < key(170)));
        }
        db.flush().unwrap();
        if round == 1 {
            db.compact_all().unwrap();
        }
    }
    for i in (0..400).step_by(11) {
        db.delete(key(i)).unwrap();
        model.remove(&key(i));
    }
    // And one only in the WAL.
    db.delete_range(key(300)..key(310)).unwrap();
    model.retain(|k, _| !(key(300) <= *k && *k < key(310)));
    let mut b = quietkv::WriteBatch::new();
    for i in 400..410 {
        b.put(key(i), value(i, 9)).unwrap();
        model.insert(key(i), value(i, 9));
    }
    db.write(b, WriteOptions { sync: true }).unwrap();
    db.close().unwrap();
    model
}

#[derive(Default, Debug)]
struct Tally {
    flips: u64,
    detected: u64,
    harmless: u64,
}

/// Opens `d` and reads everything: `Ok(true)` if damage was reported as
/// Corruption somewhere, `Ok(false)` if every answer was right, `Err`
/// describing a wrong answer.
fn outcome(d: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<bool, String> {
    let check_ok = check_dir(d).map(|r| r.is_ok()).unwrap_or(false);
    let db = match Db::open(d, options()) {
        Ok(db) => db,
        Err(e) if e.kind() == ErrorKind::Corruption => return Ok(true),
        Err(e) => return Err(format!("open failed with a non-corruption error: {e}")),
    };
    let mut detected = !check_ok;
    for i in 0..420 {
        match db.get(key(i)) {
            Ok(v) if v.as_ref() == model.get(&key(i)) => {}
            Ok(v) => {
                return Err(format!(
                    "get key{i:05}: expected {:?}, got {:?}",
                    model
                        .get(&key(i))
                        .map(|v| String::from_utf8_lossy(v).into_owned()),
                    v.map(|v| String::from_utf8_lossy(&v).into_owned())
                ))
            }
            Err(e) if e.kind() == ErrorKind::Corruption => detected = true,
            Err(e) => return Err(format!("get key{i:05}: non-corruption error {e}")),
        }
    }
    let mut expected = model.iter();
    let iter = match db.iter() {
        Ok(it) => it,
        Err(e) if e.kind() == ErrorKind::Corruption => return Ok(true),
        Err(e) => return Err(format!("scan: non-corruption error {e}")),
    };
    for item in iter {
        match item {
            Ok((k, v)) => match expected.next() {
                Some((ek, ev)) if *ek == k && *ev == v => {}
                other => {
                    return Err(format!(
                        "scan: expected {other:?}, got key {:?}",
                        String::from_utf8_lossy(&k)
                    ))
                }
            },
            Err(e) if e.kind() == ErrorKind::Corruption => {
                detected = true;
                break;
            }
            Err(e) => return Err(format!("scan: non-corruption error {e}")),
        }
    }
    if !detected && expected.next().is_some() {
        return Err("scan ended early without an error".into());
    }
    Ok(detected)
}

#[test]
fn every_flipped_byte_is_detected_or_harmless() {
    let src = dir();
    let model = build(src.path());
    let mut files: Vec<_> = fs::read_dir(src.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "LOCK")
        .collect();
    files.sort();
    let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
    let mut wrong = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_str().unwrap().to_string();
        let image = fs::read(file).unwrap();
        let (kind, positions): (&'static str, Vec<usize>) = if name.ends_with(".sst") {
            // Data blocks come first; the meta blocks and footer are the
            // last part of the file: sweep those whole, stride the rest.
            let meta_from = image.len() * 3 / 4;
            let mut p: Vec<usize> = (0..meta_from).step_by(127).collect();
            p.extend(meta_from..image.len());
            ("table", p)
        } else if name.ends_with(".log") {
            ("wal", (0..image.len()).collect())
        } else if name.starts_with("MANIFEST") {
            ("manifest", (0..image.len()).collect())
        } else {
            ("current", (0..image.len()).collect())
        };
        let tally = tallies.entry(kind).or_default();
        for pos in positions {
            let d = dir();
            copy_without_lock(src.path(), d.path());
            let mut bytes = image.clone();
            bytes[pos] ^= 0x01 << (pos % 8);
            fs::write(d.path().join(&name), &bytes).unwrap();
            tally.flips += 1;
            match outcome(d.path(), &model) {
                Ok(true) => tally.detected += 1,
                Ok(false) => tally.harmless += 1,
                Err(e) => wrong.push(format!("{name} byte {pos}: {e}")),
            }
        }
    }
    eprintln!("flip sweep: {tallies:?}");
    assert!(
        wrong.is_empty(),
        "{} wrong answers, first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}
