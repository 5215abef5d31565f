//! E4's configurations: which file system, WAL access mode, sync policy
//! and compression a run writes with, as named on the command line, and
//! the default grid.

use serde::Serialize;

use crate::engines::QuietkvConfig;
use quietkv::AccessMode;

/// The file system a configuration writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    /// The scratch directory's own file system (ext4 on the development
    /// machine; the report names what it really is).
    Native,
    /// A loop-mounted xfs image in the scratch directory.
    Xfs,
}

/// One E4 configuration: `FS/MODE/SYNC/COMPRESSION[/recycle:N]`, e.g.
/// `ext4/direct/group/none` or `xfs/buffered/periodic:10/lz4` (`ext4` means
/// the scratch directory's own file system); `/recycle:N` keeps up to N
/// flushed WAL files for reuse (`Options::wal_recycle_count`; without it
/// the engine's default, `/recycle:0` turns recycling off).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WalConfig {
    pub name: String,
    pub fs: Fs,
    pub wal_mode: String,
    pub sync: String,
    pub compression: String,
    /// `Options::wal_recycle_count`: `/recycle:N`, else the engine's default.
    pub recycle: usize,
}

impl WalConfig {
    pub fn parse(name: &str) -> Result<WalConfig, String> {
        let parts: Vec<&str> = name.trim().split('/').collect();
        let (fs, mode, sync, compression, recycle) = match parts[..] {
            [fs, mode, sync, compression] => {
                let default = quietkv::Options::default().wal_recycle_count;
                (fs, mode, sync, compression, default)
            }
            [fs, mode, sync, compression, recycle] => {
                let n = recycle
                    .strip_prefix("recycle:")
                    .and_then(|n| n.parse::<usize>().ok())
                    .ok_or_else(|| {
                        format!("E4 mode '{name}': expected recycle:N (N >= 0) after the compression, not '{recycle}'")
                    })?;
                (fs, mode, sync, compression, n)
            }
            _ => {
                return Err(format!(
                    "E4 mode '{name}': expected FS/MODE/SYNC/COMPRESSION[/recycle:N], e.g. ext4/direct/group/none"
                ))
            }
        };
        let fs = match fs {
            "ext4" | "native" => Fs::Native,
            "xfs" => Fs::Xfs,
            other => {
                return Err(format!(
                    "E4 mode '{name}': unknown file system '{other}' (ext4 or xfs)"
                ))
            }
        };
        let access: AccessMode = mode.parse().map_err(|e| format!("E4 mode '{name}': {e}"))?;
        // Validated by the engine's own parsers.
        QuietkvConfig::wal(name, access, sync, compression)
            .map_err(|e| format!("E4 mode '{name}': {e}"))?;
        Ok(WalConfig {
            name: name.trim().to_string(),
            fs,
            wal_mode: mode.into(),
            sync: sync.into(),
            compression: compression.into(),
            recycle,
        })
    }

    /// The configuration without its file system: what the xfs/ext4
    /// ratio pairs up.
    pub(super) fn rest(&self) -> String {
        let mut s = format!("{}/{}/{}", self.wal_mode, self.sync, self.compression);
        if self.recycle != quietkv::Options::default().wal_recycle_count {
            s.push_str(&format!("/recycle:{}", self.recycle));
        }
        s
    }

    pub(super) fn engine_config(&self) -> QuietkvConfig {
        let mode: AccessMode = self.wal_mode.parse().expect("checked by parse");
        let mut c = QuietkvConfig::wal(&self.name, mode, &self.sync, &self.compression)
            .expect("checked by parse");
        c.wal_recycle_count = Some(self.recycle);
        c
    }
}

/// The default grid: every WAL mode with group commit, plus a periodic
/// sync and lz4 compression (of the buffered and the mmap WAL: does
/// compression remove an mmap penalty?), on both file systems.
pub fn default_modes(with_xfs: bool) -> Vec<String> {
    let per_fs = [
        "buffered/group/none",
        "direct/group/none",
        "dontcache/group/none",
        "mmap/group/none",
        "mmap/group/lz4",
        "buffered/periodic:10/none",
        "buffered/group/lz4",
    ];
    let mut v: Vec<String> = per_fs.iter().map(|m| format!("ext4/{m}")).collect();
    if with_xfs {
        v.extend(per_fs.iter().map(|m| format!("xfs/{m}")));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_parse_and_bad_ones_say_what_is_expected() {
        let c = WalConfig::parse("xfs/direct/periodic:10/lz4").unwrap();
        assert_eq!(c.fs, Fs::Xfs);
        assert_eq!(
            (c.wal_mode.as_str(), c.sync.as_str(), c.compression.as_str()),
            ("direct", "periodic:10", "lz4")
        );
        let r = WalConfig::parse("ext4/buffered/group/none/recycle:9").unwrap();
        assert_eq!(
            (r.recycle, r.rest().as_str()),
            (9, "buffered/group/none/recycle:9")
        );
        assert_eq!(r.engine_config().wal_recycle_count, Some(9));
        // Without the suffix: what the engine does by default.
        let default = quietkv::Options::default().wal_recycle_count;
        assert_eq!(c.recycle, default);
        assert_eq!(c.engine_config().wal_recycle_count, Some(default));
        assert_eq!(c.rest(), "direct/periodic:10/lz4");
        let off = WalConfig::parse("ext4/buffered/group/none/recycle:0").unwrap();
        assert_eq!(off.engine_config().wal_recycle_count, Some(0));
        // The suffix names only what differs from the engine's default.
        let expected = if default == 0 {
            "buffered/group/none"
        } else {
            "buffered/group/none/recycle:0"
        };
        assert_eq!(off.rest(), expected);
        for bad in [
            "ext4/buffered/group/none/recycle:-1",
            "ext4/buffered/group/none/recycle:x",
            "ext4/buffered/group/none/keep:4",
            "ext4/direct/group",
            "zfs/direct/group/none",
            "ext4/sideways/group/none",
            "ext4/direct/sometimes/none",
            "ext4/direct/group/snappy",
        ] {
            assert!(WalConfig::parse(bad).is_err(), "{bad}");
        }
        for m in default_modes(true) {
            WalConfig::parse(&m).unwrap();
        }
        assert_eq!(default_modes(false).len() * 2, default_modes(true).len());
    }
}
