//! YCSB's core workloads A-F over one engine's database: the load phase
//! (records of 1 KiB under hashed keys), then each workload's mix for a
//! fixed time from one client thread, as YCSB runs by default. Every read
//! checks it got its record's value.

use std::path::Path;
use std::time::{Duration, Instant};

use super::dbbench::{check_interrupt, settle};
use super::keygen::{
    ycsb_number, Distribution, Latest, Rng, ScrambledZipfian, Workload, YcsbOp, MAX_SCAN,
};
use super::measure::{dir_bytes, Latencies, Probe};
use super::phase::Phase;
use crate::engines::BenchEngine;
use crate::keys::{fill_value, is_value_of, key, KEY_SIZE};

/// YCSB's record: 10 fields of 100 bytes, stored as one value of 1 KiB.
pub const RECORD_BYTES: usize = 1024;

fn entry_bytes() -> u64 {
    (KEY_SIZE + RECORD_BYTES) as u64
}

/// The YCSB database: how many records it holds (inserts add to it) and
/// the version the next write gives a value.
#[derive(Debug, Clone)]
pub struct YcsbState {
    pub records: u64,
    version: u64,
    pub run_for: Duration,
    pub seed: u64,
}

impl YcsbState {
    pub fn new(records: u64, run_for: Duration, seed: u64) -> YcsbState {
        YcsbState {
            records,
            version: 0,
            run_for,
            seed,
        }
    }
}

/// The load phase: every record once, in record order (their keys are
/// hashed, so the engine sees random keys); space amplification after.
pub fn load<E: BenchEngine>(db: &E, dir: &Path, st: &YcsbState) -> Result<Phase, String> {
    let probe = Probe::start();
    let mut lat = Latencies::new();
    let mut value = vec![0u8; RECORD_BYTES];
    let t = Instant::now();
    for i in 0..st.records {
        check_interrupt(i)?;
        let n = ycsb_number(i);
        fill_value(&mut value, n, 0);
        lat.time(|| db.put(&key(n), &value))
            .map_err(|e| format!("ycsb load: {e}"))?;
    }
    let secs = t.elapsed().as_secs_f64();
    settle(db).map_err(|e| format!("ycsb load: {e}"))?;
    let cost = probe.finish();
    let user = st.records * entry_bytes();
    let mut p = Phase::new("ycsb-load", st.records, secs, Some(&lat), &cost, user);
    p.space_amp = Some(dir_bytes(dir)? as f64 / user as f64);
    p.l0_tables_after = db.counters().l0_tables;
    Ok(p)
}

/// The request distribution of a workload over the records it starts with.
enum Chooser {
    Zipfian(ScrambledZipfian),
    Latest(Latest),
}

impl Chooser {
    fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            Chooser::Zipfian(z) => z.next(rng),
            Chooser::Latest(l) => l.next(rng),
        }
    }
}

fn read_record<E: BenchEngine>(db: &E, rec: u64) -> Result<(), String> {
    let n = ycsb_number(rec);
    match db.get(&key(n))? {
        Some(v) if is_value_of(&v, n, RECORD_BYTES) => Ok(()),
        Some(_) => Err(format!("record {rec} read back a value not its own")),
        None => Err(format!("record {rec} is missing")),
    }
}

/// Runs workload `w` for `st.run_for` from one client thread; a workload
/// that writes waits for its flush and catch-up inside its cost.
pub fn run<E: BenchEngine>(db: &E, w: Workload, st: &mut YcsbState) -> Result<Phase, String> {
    let name = w.name();
    let mix = w.mix();
    let mut chooser = match w.distribution() {
        // Over the records the workload starts with: its own inserts are
        // not read back (YCSB reads them only once acknowledged, rarely).
        Distribution::Zipfian => Chooser::Zipfian(ScrambledZipfian::new(st.records)),
        Distribution::Latest => Chooser::Latest(Latest::new(st.records)),
    };
    let mut rng = Rng::new(st.seed ^ ((w as u64 + 1) * 0x51));
    let mut value = vec![0u8; RECORD_BYTES];
    let mut lat = Latencies::new();
    let mut ops = 0u64;
    let mut written = 0u64;
    let probe = Probe::start();
    let t = Instant::now();
    let end = t + st.run_for;
    loop {
        let start = Instant::now();
        if start >= end {
            break;
        }
        check_interrupt(ops)?;
        let op = mix.pick(rng.unit());
        let mut write = |rec: u64, st: &mut YcsbState| -> Result<(), String> {
            st.version += 1;
            let n = ycsb_number(rec);
            fill_value(&mut value, n, st.version);
            db.put(&key(n), &value)?;
            written += entry_bytes();
            Ok(())
        };
        let r = match op {
            YcsbOp::Read => read_record(db, chooser.next(&mut rng)),
            YcsbOp::Update => write(chooser.next(&mut rng), st),
            YcsbOp::ReadModifyWrite => {
                let rec = chooser.next(&mut rng);
                read_record(db, rec).and_then(|()| write(rec, st))
            }
            YcsbOp::Insert => {
                let rec = st.records;
                let r = write(rec, st);
                st.records += 1;
                if let Chooser::Latest(l) = &mut chooser {
                    l.inserted();
                }
                r
            }
            YcsbOp::Scan => {
                let rec = chooser.next(&mut rng);
                let len = 1 + rng.below(MAX_SCAN);
                match db.seek_scan(&key(ycsb_number(rec)), len as usize) {
                    // The record itself is there: at least one entry.
                    Ok(0) => Err(format!("a scan from record {rec} read nothing")),
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        };
        r.map_err(|e| format!("{name}: {e}"))?;
        lat.record(start.elapsed());
        ops += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    if w.writes() {
        settle(db).map_err(|e| format!("{name}: {e}"))?;
    }
    let cost = probe.finish();
    let mut p = Phase::new(name, ops, secs, Some(&lat), &cost, written);
    if w.writes() {
        p.l0_tables_after = db.counters().l0_tables;
    }
    Ok(p)
}
