//! The `--scale quick|full` presets of E1, E2 and E3 (docs/benchmark.md's table),
//! explicit flags overriding them, and the report sections they expand to
//! (one per hot-set size x throttle).

use serde::Serialize;

pub const MIB: u64 = 1 << 20;
pub const VALUE_SIZE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scale {
    Quick,
    Full,
}

impl Scale {
    pub fn parse(s: &str) -> Result<Scale, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "quick" => Ok(Scale::Quick),
            "full" => Ok(Scale::Full),
            _ => Err(format!("unknown scale '{s}' (expected quick or full)")),
        }
    }
}

/// Sizes, rates and durations of one experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preset {
    pub db_bytes: u64,
    pub memory_limit_mib: u64,
    /// One report section per hot-set size (keys of 4 KiB values).
    pub hot_keys: Vec<u64>,
    /// And per throttle (MiB/s, 0 = unthrottled); E1/E3 only.
    pub throttles: Vec<u64>,
    pub read_rate: f64,
    /// E2: MiB/s of user writes.
    pub write_rate_mib: f64,
    /// E2: the measured phase; E1/E3: its cap (the phase is the compaction).
    pub duration_s: f64,
    pub warmup_s: f64,
    pub baseline_s: f64,
    /// E1/E3: the shortest window of reads after the compaction's last
    /// install, when reads meet the new tables (0: no after phase, E2).
    /// See [`Preset::after_s`].
    pub min_after_s: f64,
    /// `--after`: the after window of every section, if given.
    pub after_override: Option<f64>,
}

/// Background MiB/s every engine's unthrottled full compaction beat on the
/// development machine (quietkv about 1,000, fjall 650, RocksDB 580): an
/// unthrottled compaction takes at most `2 x database / this`.
const SLOWEST_UNTHROTTLED_MIB_S: u64 = 400;

/// `512 MiB`, `2.0 GiB`.
pub fn mib(b: u64) -> String {
    let m = b as f64 / MIB as f64;
    if m >= 1024.0 {
        format!("{:.1} GiB", m / 1024.0)
    } else {
        format!("{m:.0} MiB")
    }
}

/// Keys of 4 KiB values that make up `bytes`.
pub fn keys_for(bytes: u64) -> u64 {
    (bytes / VALUE_SIZE as u64).max(1)
}

/// Hot sets of about 1/30, 1/3 and 3x a page cache of `limit_mib`.
pub fn e3_hot_keys(limit_mib: u64) -> Vec<u64> {
    let b = limit_mib * MIB;
    vec![keys_for(b / 30), keys_for(b / 3), keys_for(b * 3)]
}

/// docs/benchmark.md's sizes. Quick: 2 GiB db, 256 MiB cgroup, short phases so
/// that E1 + E2 in four modes take a few minutes on a 2-core machine (E1
/// quick is unthrottled only: a 64 MiB/s throttled rewrite of 2 GiB reads
/// and writes 4 GiB, over a minute a mode). Full: 8 GiB db, 1 GiB cgroup.
pub fn preset(experiment: &str, scale: Scale) -> Result<Preset, String> {
    let quick = scale == Scale::Quick;
    let (db, limit) = if quick { (2048, 256) } else { (8192, 1024) };
    let base = Preset {
        db_bytes: db * MIB,
        memory_limit_mib: limit,
        hot_keys: vec![],
        throttles: vec![0],
        read_rate: 2000.0,
        write_rate_mib: 16.0,
        duration_s: if quick { 120.0 } else { 900.0 },
        warmup_s: if quick { 3.0 } else { 10.0 },
        baseline_s: if quick { 5.0 } else { 20.0 },
        min_after_s: 0.0,
        after_override: None,
    };
    let min_after_s = if quick { 5.0 } else { 60.0 };
    Ok(match experiment {
        "E1" if quick => Preset {
            hot_keys: vec![keys_for(8 * MIB)],
            min_after_s,
            ..base
        },
        "E1" => Preset {
            hot_keys: vec![keys_for(30 * MIB), keys_for(400 * MIB)],
            throttles: vec![0, 64],
            min_after_s,
            ..base
        },
        "E2" => Preset {
            hot_keys: if quick {
                vec![7_500]
            } else {
                vec![7_500, 100_000]
            },
            duration_s: if quick { 30.0 } else { 120.0 },
            ..base
        },
        "E3" => Preset {
            hot_keys: e3_hot_keys(limit),
            throttles: if quick { vec![0] } else { vec![0, 64] },
            min_after_s,
            ..base
        },
        // Dataset : memory 8 : 1 (seed 002). Quick: E1's 2 GiB in a 256 MiB
        // cgroup (in 128 MiB, the process's own ~100 MiB of index, threads
        // and histograms left the page cache almost nothing), 30 s a run
        // after 10 s of warm-up: three modes x two loads x three repeats
        // take about a quarter of an hour.
        "E5" => Preset {
            hot_keys: vec![keys_for(db * MIB)],
            duration_s: if quick { 30.0 } else { 120.0 },
            warmup_s: if quick { 10.0 } else { 60.0 },
            baseline_s: 0.0,
            ..base
        },
        other => return Err(format!("no preset for experiment '{other}'")),
    })
}

/// E5's closed-loop reader thread counts: 32 as in the seed's heavy load;
/// the full scale sweeps around it.
pub fn e5_threads(scale: Scale) -> Vec<usize> {
    match scale {
        Scale::Quick => vec![32],
        Scale::Full => vec![1, 8, 32, 128],
    }
}

/// Explicit flags; `None` keeps the preset's value.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub db_bytes: Option<u64>,
    pub memory_limit_mib: Option<u64>,
    pub hot_keys: Option<Vec<u64>>,
    pub throttles: Option<Vec<u64>>,
    pub read_rate: Option<f64>,
    pub write_rate_mib: Option<f64>,
    pub duration_s: Option<f64>,
    pub warmup_s: Option<f64>,
    pub baseline_s: Option<f64>,
    pub after_s: Option<f64>,
}

impl Preset {
    pub fn apply(mut self, experiment: &str, o: &Overrides) -> Preset {
        if let Some(v) = o.db_bytes {
            self.db_bytes = v;
        }
        if let Some(v) = o.memory_limit_mib {
            self.memory_limit_mib = v;
            if experiment == "E3" && o.hot_keys.is_none() && v > 0 {
                self.hot_keys = e3_hot_keys(v);
            }
        }
        if let Some(v) = &o.hot_keys {
            self.hot_keys = v.clone();
        }
        if let Some(v) = &o.throttles {
            self.throttles = v.clone();
        }
        if let Some(v) = o.read_rate {
            self.read_rate = v;
        }
        if let Some(v) = o.write_rate_mib {
            self.write_rate_mib = v;
        }
        if let Some(v) = o.duration_s {
            self.duration_s = v;
        }
        if let Some(v) = o.warmup_s {
            self.warmup_s = v;
        }
        if let Some(v) = o.baseline_s {
            self.baseline_s = v;
        }
        if o.after_s.is_some() && experiment != "E2" {
            self.after_override = o.after_s;
        }
        let keys = keys_for(self.db_bytes);
        for h in &mut self.hot_keys {
            *h = (*h).clamp(1, keys);
        }
        if experiment == "E2" {
            self.throttles = vec![self.throttles.first().copied().unwrap_or(0)];
        }
        self
    }

    /// Seconds of reads after the last install in a section at `throttle`
    /// MiB/s (0 = unthrottled): `--after` if given, else at least as long
    /// as the compaction can take (the database read and written at the
    /// throttle, or at [`SLOWEST_UNTHROTTLED_MIB_S`]), and at least
    /// `min_after_s` (quick 5 s, full 60 s). Full scale: 60 s unthrottled
    /// (the compactions took 16-28 s), 256 s at 64 MiB/s.
    pub fn after_s(&self, throttle: u64) -> f64 {
        if self.min_after_s <= 0.0 {
            return 0.0;
        }
        if let Some(v) = self.after_override {
            return v.max(0.0);
        }
        let rate = if throttle > 0 {
            throttle
        } else {
            SLOWEST_UNTHROTTLED_MIB_S
        };
        let during = 2.0 * (self.db_bytes / MIB) as f64 / rate as f64;
        during.max(self.min_after_s)
    }

    /// (section id, hot keys, throttle) of each report section.
    pub fn sections(&self, experiment: &str) -> Vec<(String, u64, u64)> {
        let mut out = Vec::new();
        let many = self.hot_keys.len() * self.throttles.len() > 1 || experiment == "E3";
        for &t in &self.throttles {
            for &h in &self.hot_keys {
                let id = if many {
                    let mut id = format!("{experiment}-hot{}MiB", hot_mib_label(h));
                    if self.throttles.len() > 1 || t > 0 {
                        id.push_str(&if t > 0 {
                            format!("-throttle{t}")
                        } else {
                            "-unthrottled".into()
                        });
                    }
                    id
                } else {
                    experiment.to_string()
                };
                out.push((id, h, t));
            }
        }
        out
    }
}

fn hot_mib_label(keys: u64) -> String {
    let mib = keys as f64 * VALUE_SIZE as f64 / MIB as f64;
    if mib >= 10.0 {
        format!("{mib:.0}")
    } else {
        format!("{mib:.1}").replace('.', "_")
    }
}

/// `2G`, `2GiB`, `512M`, `16MiB`, `4096K`, or plain MiB.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1 << 20),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad size '{s}' (examples: 2G, 512MiB, 16M)"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("size must be positive: '{s}'"));
    }
    Ok((v * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_follow_the_protocol_table() {
        let e1 = preset("E1", Scale::Quick).unwrap();
        assert_eq!(e1.db_bytes, 2 << 30);
        assert_eq!(e1.memory_limit_mib, 256);
        assert_eq!(e1.hot_keys, vec![2048]); // 8 MiB
        let e1f = preset("E1", Scale::Full).unwrap();
        assert_eq!(e1f.db_bytes, 8 << 30);
        assert_eq!(e1f.memory_limit_mib, 1024);
        assert_eq!(e1f.hot_keys, vec![7680, 102_400]); // 30 and 400 MiB
        assert_eq!(e1f.throttles, vec![0, 64]);
        assert_eq!(e1f.sections("E1").len(), 4);
        let e2 = preset("E2", Scale::Quick).unwrap();
        assert_eq!((e2.db_bytes, e2.duration_s), (2 << 30, 30.0));
        let e2f = preset("E2", Scale::Full).unwrap();
        assert_eq!(e2f.hot_keys, vec![7_500, 100_000]);
        assert_eq!((e2f.memory_limit_mib, e2f.duration_s), (1024, 120.0));
        let e3 = preset("E3", Scale::Full).unwrap();
        // 1/30, 1/3 and 3x of 1 GiB in 4 KiB values.
        assert_eq!(e3.hot_keys, vec![8738, 87381, 786_432]);
        assert!(preset("E9", Scale::Quick).is_err());
        // E5: dataset : memory 8 : 1 at both scales.
        for (sc, db) in [(Scale::Quick, 2u64 << 30), (Scale::Full, 8 << 30)] {
            let e5 = preset("E5", sc).unwrap();
            assert_eq!(e5.db_bytes, db);
            assert_eq!(e5.db_bytes / (e5.memory_limit_mib * MIB), 8);
            assert_eq!(e5.hot_keys, vec![keys_for(db)]);
        }
        assert_eq!(e5_threads(Scale::Full), vec![1, 8, 32, 128]);
        assert_eq!(e5_threads(Scale::Quick), vec![32]);
    }

    #[test]
    fn the_after_window_is_at_least_as_long_as_the_compaction_can_take() {
        let full = preset("E1", Scale::Full).unwrap();
        assert_eq!(full.after_s(0), 60.0);
        assert_eq!(full.after_s(64), 256.0);
        let quick = preset("E1", Scale::Quick).unwrap();
        assert_eq!(quick.after_s(0), 10.24);
        assert_eq!(preset("E2", Scale::Full).unwrap().after_s(0), 0.0);
        let o = Overrides {
            after_s: Some(3.0),
            ..Default::default()
        };
        assert_eq!(quick.apply("E1", &o).after_s(64), 3.0);
        assert_eq!(
            preset("E2", Scale::Quick)
                .unwrap()
                .apply("E2", &o)
                .after_s(0),
            0.0
        );
    }

    #[test]
    fn flags_override_presets() {
        let o = Overrides {
            db_bytes: Some(16 << 20),
            hot_keys: Some(vec![100, 1_000_000]),
            duration_s: Some(2.0),
            ..Default::default()
        };
        let p = preset("E1", Scale::Quick).unwrap().apply("E1", &o);
        assert_eq!(p.db_bytes, 16 << 20);
        // Clamped to the database's keys.
        assert_eq!(p.hot_keys, vec![100, 4096]);
        assert_eq!(p.duration_s, 2.0);
        assert_eq!(p.memory_limit_mib, 256);
        let s = p.sections("E1");
        assert_eq!(s[0].0, "E1-hot0_4MiB");
        assert_eq!(s[1], ("E1-hot16MiB".to_string(), 4096, 0));
        // E3 follows a changed cgroup limit.
        let o = Overrides {
            memory_limit_mib: Some(128),
            ..Default::default()
        };
        let p = preset("E3", Scale::Quick).unwrap().apply("E3", &o);
        assert_eq!(p.hot_keys, e3_hot_keys(128));
        assert_eq!(p.sections("E3").len(), 3);
        // One section keeps the bare id.
        assert_eq!(
            preset("E2", Scale::Quick).unwrap().sections("E2")[0].0,
            "E2"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("512").unwrap(), 512 << 20);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert!(parse_size("lots").is_err());
        assert_eq!(Scale::parse("FULL").unwrap(), Scale::Full);
        assert!(Scale::parse("huge").is_err());
    }
}
