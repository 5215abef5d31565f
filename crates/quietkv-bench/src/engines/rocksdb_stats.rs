//! RocksDB's per-level compaction table (the `rocksdb.cfstats` property,
//! the same table its LOG prints) read into [`LevelWork`]s, so a report can
//! put RocksDB's write amplification by level beside quietkv's. Kept apart
//! from the `rocksdb` feature so it is tested in every build.
//!
//! The table's byte columns are in GB with one decimal: 0.1 GB resolution,
//! enough for a full-scale run, not for a small test.

use super::counters::LevelWork;

const GIB: f64 = (1u64 << 30) as f64;

/// The first compaction table of `text` (cumulative since open): one entry
/// per level `L0..=Ln` present, levels missing in between left zero.
/// `None` when no table with the expected columns is found.
pub fn parse_level_compaction_stats(text: &str) -> Option<Vec<LevelWork>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .by_ref()
        .find(|l| l.trim_start().starts_with("Level") && l.contains("Rnp1(GB)"))?
        .split_whitespace()
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (rn, rnp1, write, moved) = (
        col("Rn(GB)")?,
        col("Rnp1(GB)")?,
        col("Write(GB)")?,
        col("Moved(GB)")?,
    );
    // A row's size is two tokens ("256.00 MB") under the one "Size"
    // heading, so every column after it sits one token further right.
    let size = col("Size")?;
    let at = |i: usize| if i > size { i + 1 } else { i };
    let mut levels: Vec<LevelWork> = Vec::new();
    // The dashes under the header come first; the rows end at the Sum row.
    for line in lines.skip_while(|l| l.trim_start().starts_with('-')) {
        let t: Vec<&str> = line.split_whitespace().collect();
        let Some(level) = t
            .first()
            .and_then(|n| n.strip_prefix('L'))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            break;
        };
        if t.len() != header.len() + 1 {
            return None;
        }
        let gb = |i: usize| -> Option<u64> {
            let v: f64 = t[at(i)].parse().ok()?;
            Some((v * GIB).round() as u64)
        };
        if levels.len() <= level {
            levels.resize(level + 1, LevelWork::default());
        }
        levels[level] = LevelWork {
            read_from_above_bytes: gb(rn)?,
            read_from_level_bytes: gb(rnp1)?,
            written_bytes: gb(write)?,
            moved_bytes: gb(moved)?,
        };
    }
    (!levels.is_empty()).then_some(levels)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout of RocksDB 11's table (its LOG's header, rows as its
    /// printf formats them).
    const TABLE: &str = "
** Compaction Stats [default] **
Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) WPreComp(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)
--------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------
  L0      2/0   64.00 MB   0.5      0.0     0.0      0.0       1.9          1.9      1.9       0.0   1.0      0.0     16.1    121.50             80.12        62    1.960       0      0       0.0       0.0
  L1      8/1   256.00 MB   1.0      4.2     1.9      2.3       4.1          4.1      1.8       0.0   2.2    140.2    137.9     30.70             25.11        15    2.047   1050K   2048       0.0       0.0
  L3    180/0    5.68 GB   0.2     12.5     2.5     10.0      12.4         12.4      2.4       0.5   5.0    131.0    130.4     97.60             80.00        40    2.440   3200K   5000       0.0       0.0
 Sum    190/1    6.00 GB   0.0     16.7     4.4     12.3      18.4         18.4      6.1       0.5   9.7    120.0    130.0    249.80            185.23       117    2.135   4250K   7048       0.0       0.0
 Int      0/0    0.00 KB   0.0      0.0     0.0      0.0       0.0          0.0      0.0       0.0   0.0      0.0      0.0      0.00              0.00         0    0.000       0      0       0.0       0.0

** Compaction Stats [default] **
Priority    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) WPreComp(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)
";

    fn gib(x: f64) -> u64 {
        (x * GIB).round() as u64
    }

    #[test]
    fn reads_each_level_s_columns_and_stops_at_the_sum_row() {
        let l = parse_level_compaction_stats(TABLE).unwrap();
        assert_eq!(l.len(), 4, "L0..=L3, L2 absent: {l:?}");
        assert_eq!(l[0].written_bytes, gib(1.9));
        assert_eq!(l[0].read_from_above_bytes, 0);
        assert_eq!(
            l[1],
            LevelWork {
                read_from_above_bytes: gib(1.9),
                read_from_level_bytes: gib(2.3),
                written_bytes: gib(4.1),
                moved_bytes: 0,
            }
        );
        assert_eq!(l[2], LevelWork::default());
        assert_eq!(l[3].read_from_level_bytes, gib(10.0));
        assert_eq!(l[3].moved_bytes, gib(0.5));
    }

    #[test]
    fn text_without_the_table_or_with_other_columns_gives_none() {
        assert_eq!(parse_level_compaction_stats(""), None);
        assert_eq!(parse_level_compaction_stats("Level Files Size"), None);
        // A row that does not line up with the header is not guessed at.
        let cut = TABLE.replace("  L1      8/1   256.00 MB", "  L1      8/1   256.00MB");
        assert_eq!(parse_level_compaction_stats(&cut), None);
    }
}
