//! quietkv's `+ks=N` configurations: the bench's keys spread over N
//! keyspaces of one database by key range, to measure what keyspaces
//! cost. Keyspace `i` holds the `i`-th of N equal contiguous parts of the
//! workload's key numbers ([`KeyParts`]), so a seek that runs off the end
//! of one keyspace goes on at the start of the next and a full scan reads
//! every key in order; a batch whose keys fall in several keyspaces is one
//! atomic write across them ([`Spread`]).
//!
//! Part 0 is the default keyspace and parts 1..N are named keyspaces: the
//! database then has exactly N trees, each with a share of the keys, which
//! is what a user who splits data over N keyspaces runs. (N named keyspaces
//! would leave the default one empty beside them: N + 1 trees, one idle.)

use quietkv::{Db, DbIter, Keyspace, KeyspaceOptions, WriteBatch, WriteOptions};

use super::bench_engine::{Batch, ScanCount};
use crate::keys::{key, KEY_SIZE};

/// The key numbers [`crate::keys::key`] can write: 16 decimal digits.
const KEY_NUMBERS: u64 = 10_000_000_000_000_000;

/// The cut of the key numbers `0..span` into equal contiguous parts, as
/// keys: key `k` belongs to the part whose range holds it. The cut is
/// made of the bench's own keys (16 ASCII digits, which sort as their
/// numbers do), so a key's part is found by comparing it with N - 1
/// boundary keys: exact for every key, and also defined for keys that are
/// not the bench's (they fall wherever their bytes sort).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParts {
    /// The first key of parts 1..N, ascending.
    bounds: Vec<[u8; KEY_SIZE]>,
}

impl KeyParts {
    /// `parts` parts of the key numbers `0..span`: part `i` starts at
    /// number `span * i / parts`.
    pub fn new(parts: usize, span: u64) -> Result<KeyParts, String> {
        if parts == 0 {
            return Err("the keys need at least one keyspace".into());
        }
        if span < parts as u64 || span > KEY_NUMBERS {
            return Err(format!(
                "cannot cut key numbers 0..{span} into {parts} parts (the span must hold at least one number per part and at most {KEY_NUMBERS})"
            ));
        }
        let bounds = (1..parts as u128)
            .map(|i| key((span as u128 * i / parts as u128) as u64))
            .collect();
        Ok(KeyParts { bounds })
    }

    /// How many parts.
    pub fn len(&self) -> usize {
        self.bounds.len() + 1
    }

    /// Never: there is at least one part.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The part `key` belongs to: how many parts start at or before it.
    pub fn part_of(&self, key: &[u8]) -> usize {
        self.bounds.partition_point(|b| b.as_slice() <= key)
    }

    /// The keyspace of each part: `default` for part 0, then names that
    /// say where each part starts, so a database opened again is known to
    /// be cut the same way.
    pub fn keyspace_names(&self) -> Vec<String> {
        let n = self.len();
        std::iter::once(quietkv::DEFAULT_KEYSPACE.to_string())
            .chain(self.bounds.iter().enumerate().map(|(i, b)| {
                format!(
                    "part-{}-of-{n}-from-{}",
                    i + 1,
                    String::from_utf8_lossy(b.as_slice())
                )
            }))
            .collect()
    }
}

/// The keyspaces of one database the keys are spread over, with each of
/// the bench's operations done across them. A scan opens each keyspace's
/// iterator when it gets there, not all under one snapshot: no writer
/// runs beside the bench's scans (YCSB E's client does its scans and
/// inserts one after the other), and one iterator at a time is what a user
/// reading part after part pays.
pub struct Spread {
    parts: KeyParts,
    /// One per part, in key order; the default keyspace first.
    spaces: Vec<Keyspace>,
}

fn err(e: quietkv::Error) -> String {
    e.to_string()
}

impl Spread {
    /// The keyspaces of `parts` in `db`: created where `create` allows
    /// (a fresh database); otherwise the database must already be cut the
    /// same way (a run's copy of a source built with the same split), so
    /// that no key is looked for in a keyspace it was not written to.
    pub fn open(db: &Db, parts: KeyParts, create: bool) -> Result<Spread, String> {
        let want = parts.keyspace_names();
        let have = db.keyspace_names();
        if have != want && !(create && have == [quietkv::DEFAULT_KEYSPACE]) {
            return Err(format!(
                "the database's keyspaces are {have:?}, not the {want:?} this configuration spreads its keys over"
            ));
        }
        let spaces = want
            .iter()
            .map(|name| {
                db.keyspace(name, KeyspaceOptions::default())
                    .map_err(|e| format!("keyspace {name}: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Spread { parts, spaces })
    }

    fn of(&self, key: &[u8]) -> &Keyspace {
        &self.spaces[self.parts.part_of(key)]
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.of(key).get(key).map_err(err)
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.of(key).put(key, value).map_err(err)
    }

    /// One atomic write of every entry, whatever keyspaces they fall in.
    pub fn put_batch(&self, db: &Db, batch: &Batch) -> Result<(), String> {
        let mut b = WriteBatch::new();
        for (k, v) in batch.iter() {
            b.put_in(self.of(k), k, v).map_err(err)?;
        }
        db.write(b, WriteOptions::default())
            .map_err(|e| format!("write failed: {e}"))
    }

    /// Up to `n` entries from the first key at or after `from`, going on
    /// into the next keyspaces when one ends.
    pub fn seek_scan(&self, from: &[u8], n: usize) -> Result<usize, String> {
        let first = self.parts.part_of(from);
        let mut read = 0;
        for (i, ks) in self.spaces.iter().enumerate().skip(first) {
            if read == n {
                break;
            }
            // The first keyspace from `from` on, every later one whole.
            let it = if i == first {
                ks.range(from..)
            } else {
                ks.iter()
            };
            read += read_up_to(&mut it.map_err(err)?, n - read)?;
        }
        Ok(read)
    }

    /// Every entry, keyspace after keyspace in key order (or from the
    /// last one backwards).
    pub fn scan_all(&self, reverse: bool) -> Result<ScanCount, String> {
        let mut c = ScanCount::default();
        let order: Vec<&Keyspace> = if reverse {
            self.spaces.iter().rev().collect()
        } else {
            self.spaces.iter().collect()
        };
        for ks in order {
            scan_into(&mut ks.iter().map_err(err)?, reverse, &mut c)
                .map_err(|e| format!("full scan of {}: {e}", ks.name()))?;
        }
        Ok(c)
    }

    /// Flushes every keyspace's memtable.
    /// Tables in level 0, over every keyspace.
    pub fn l0_tables(&self) -> Result<u64, String> {
        let mut n = 0;
        for ks in &self.spaces {
            n += ks.stats().map_err(err)?.levels[0].files as u64;
        }
        Ok(n)
    }

    pub fn flush(&self) -> Result<(), String> {
        self.spaces.iter().try_for_each(|ks| {
            ks.flush()
                .map_err(|e| format!("flush of {}: {e}", ks.name()))
        })
    }

    /// A full compaction of every keyspace, one after the other.
    pub fn compact_all(&self) -> Result<(), String> {
        self.spaces.iter().try_for_each(|ks| {
            ks.compact_all()
                .map_err(|e| format!("full compaction of {}: {e}", ks.name()))
        })
    }
}

/// Counts every entry of `it` into `c`, front to back or back to front.
pub(super) fn scan_into(it: &mut DbIter, reverse: bool, c: &mut ScanCount) -> quietkv::Result<()> {
    loop {
        let item = if reverse {
            it.next_back_ref()
        } else {
            it.next_ref()
        };
        match item {
            Some(Ok((k, v))) => c.add(k, v),
            Some(Err(e)) => return Err(e),
            None => return Ok(()),
        }
    }
}

/// Reads up to `n` entries of `it` in place; the number read (fewer when
/// it ends first).
pub(super) fn read_up_to(it: &mut DbIter, n: usize) -> Result<usize, String> {
    let mut read = 0;
    while read < n {
        match it.next_ref() {
            Some(Ok(_)) => read += 1,
            Some(Err(e)) => return Err(format!("scan from a key: {e}")),
            None => break,
        }
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::permute;

    // The standard experiment's keys (its keygen, which sits above this
    // file): db_bench's present and absent keys, YCSB's hashed records.
    fn present(i: u64) -> [u8; KEY_SIZE] {
        key(2 * i)
    }
    fn absent(i: u64) -> [u8; KEY_SIZE] {
        key(2 * i + 1)
    }
    fn ycsb_number(i: u64) -> u64 {
        permute(i, 1 << 48)
    }

    /// Counts of `keys` in each part, checking on the way that the parts
    /// come in key order (a key never belongs to an earlier part than a
    /// smaller key).
    fn counts(p: &KeyParts, keys: impl Iterator<Item = [u8; KEY_SIZE]>) -> Vec<u64> {
        let mut sorted: Vec<[u8; KEY_SIZE]> = keys.collect();
        sorted.sort_unstable();
        let mut c = vec![0u64; p.len()];
        let mut last = 0;
        for k in &sorted {
            let part = p.part_of(k);
            assert!(part < p.len(), "{k:?} in part {part}");
            assert!(part >= last, "{k:?} in part {part} after part {last}");
            last = part;
            c[part] += 1;
        }
        c
    }

    fn about_equal(c: &[u64], total: u64, slack: f64) {
        let even = total as f64 / c.len() as f64;
        assert_eq!(c.iter().sum::<u64>(), total);
        for &n in c {
            assert!(
                (n as f64 - even).abs() <= even * slack,
                "{c:?}: not about {even} each"
            );
        }
    }

    #[test]
    fn every_key_falls_in_one_part_in_key_order_and_parts_are_about_equal() {
        // db_bench: present keys are the even numbers below 2 x keys, and
        // absent ones the odd numbers between them.
        let keys = 10_000u64;
        let p = KeyParts::new(4, 2 * keys).unwrap();
        assert_eq!(p.len(), 4);
        let c = counts(&p, (0..keys).map(present));
        assert_eq!(c, [2500, 2500, 2500, 2500]);
        about_equal(&counts(&p, (0..keys).map(absent)), keys, 0.0);
        // A part holds a contiguous run: its first and last keys.
        assert_eq!(p.part_of(&present(2499)), 0);
        assert_eq!(p.part_of(&present(2500)), 1);
        assert_eq!(p.part_of(&present(keys - 1)), 3);
        // YCSB: hashed record numbers over 2^48.
        let y = KeyParts::new(4, 1 << 48).unwrap();
        about_equal(
            &counts(&y, (0..20_000).map(|i| key(ycsb_number(i)))),
            20_000,
            0.1,
        );
        // E1/E2: keys 0..keys.
        let e = KeyParts::new(4, 1001).unwrap();
        let c = counts(&e, (0..1001).map(key));
        about_equal(&c, 1001, 0.01);
        // Keys outside the span or not the bench's still have one part,
        // where their bytes sort.
        assert_eq!(p.part_of(b""), 0);
        assert_eq!(p.part_of(&key(KEY_NUMBERS - 1)), 3);
        assert_eq!(p.part_of(b"k00001"), 3);
        assert_eq!(KeyParts::new(1, 10).unwrap().part_of(&key(9)), 0);
    }

    #[test]
    fn a_cut_names_its_keyspaces_and_refuses_what_it_cannot_cut() {
        let p = KeyParts::new(3, 30).unwrap();
        assert_eq!(
            p.keyspace_names(),
            [
                "default",
                "part-1-of-3-from-0000000000000010",
                "part-2-of-3-from-0000000000000020"
            ]
        );
        assert_eq!(KeyParts::new(1, 30).unwrap().keyspace_names(), ["default"]);
        assert!(KeyParts::new(0, 30).is_err());
        assert!(KeyParts::new(4, 3).is_err());
        assert!(KeyParts::new(2, KEY_NUMBERS + 1).is_err());
    }
}
