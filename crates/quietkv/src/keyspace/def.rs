//! What the manifest records about a keyspace when it is created: its
//! name and the table options its tables are written with. Encoded in the
//! manifest's create-keyspace entry (see `docs/format.md`).

use crate::error::{Error, Result};
use crate::table::{Compression, TableOptions};
use crate::varint::{self, put_u64};

/// The name of the default keyspace: the keys `Db::put`, `Db::get` and
/// the other methods of [`Db`](crate::Db) read and write.
pub const DEFAULT_KEYSPACE: &str = "default";

/// Longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME: usize = 255;

/// A keyspace's persistent definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyspaceDef {
    pub name: String,
    /// Target uncompressed size of a data block of its tables.
    pub block_size: u64,
    /// Bloom filter bits per key of its tables (0: none).
    pub bloom_bits_per_key: u64,
    pub compression: Compression,
}

impl KeyspaceDef {
    /// `name`, block size, bloom bits per key, compression byte.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.name.len() as u64);
        out.extend_from_slice(self.name.as_bytes());
        put_u64(out, self.block_size);
        put_u64(out, self.bloom_bits_per_key);
        out.push(self.compression.to_u8());
    }

    /// Parses what [`Self::encode`] wrote, from the start of `buf`;
    /// returns it and the bytes used. Damage is `Corruption` naming what
    /// was expected, with the offset within `buf`.
    pub fn decode(buf: &[u8]) -> Result<(KeyspaceDef, usize)> {
        let err = |what: &str, at: usize| {
            Error::corruption(format!("keyspace definition: {what}")).with_offset(at as u64)
        };
        let mut pos = 0;
        let varint = |what: &str, pos: &mut usize| -> Result<u64> {
            let (v, n) = varint::decode_u64(buf.get(*pos..).unwrap_or(&[]))
                .map_err(|e| err(&format!("{e} in {what}"), *pos))?;
            *pos += n;
            Ok(v)
        };
        let len = varint("name length", &mut pos)?;
        if len == 0 || len > MAX_KEYSPACE_NAME as u64 {
            return Err(err(
                &format!("name length {len} is not within 1..={MAX_KEYSPACE_NAME}"),
                pos,
            ));
        }
        let end = pos + len as usize;
        let raw = buf
            .get(pos..end)
            .ok_or_else(|| err(&format!("name claims {len} bytes, fewer remain"), pos))?;
        let name = std::str::from_utf8(raw)
            .map_err(|_| err("name is not UTF-8", pos))?
            .to_string();
        pos = end;
        let block_size = varint("block size", &mut pos)?;
        let bloom_bits_per_key = varint("bloom bits per key", &mut pos)?;
        let c = *buf
            .get(pos)
            .ok_or_else(|| err("compression byte missing", pos))?;
        let compression =
            Compression::from_u8(c).ok_or_else(|| err(&format!("unknown compression {c}"), pos))?;
        pos += 1;
        let def = KeyspaceDef {
            name,
            block_size,
            bloom_bits_per_key,
            compression,
        };
        def.validate().map_err(|e| e.with_offset(0))?;
        Ok((def, pos))
    }

    /// How its tables are written: its own options, the database's
    /// (`base`) for the rest.
    pub fn table_options(&self, base: TableOptions) -> TableOptions {
        TableOptions {
            block_size: self.block_size as usize,
            bloom_bits_per_key: self.bloom_bits_per_key as usize,
            compression: self.compression,
            ..base
        }
    }

    /// The limits [`crate::Options::validate`] puts on the same options.
    pub fn validate(&self) -> Result<()> {
        if !(256..=(4 << 20)).contains(&self.block_size) {
            return Err(Error::invalid(format!(
                "keyspace {:?}: block_size must be between 256 bytes and 4 MiB, got {}",
                self.name, self.block_size
            )));
        }
        if self.bloom_bits_per_key > 64 {
            return Err(Error::invalid(format!(
                "keyspace {:?}: bloom_bits_per_key must be at most 64, got {}",
                self.name, self.bloom_bits_per_key
            )));
        }
        Ok(())
    }
}

/// `InvalidArgument` unless `name` can name a keyspace: 1 to
/// [`MAX_KEYSPACE_NAME`] bytes, and not the default keyspace's name.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_KEYSPACE_NAME {
        return Err(Error::invalid(format!(
            "keyspace name must be 1 to {MAX_KEYSPACE_NAME} bytes, got {}",
            name.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_damage_without_panicking() {
        let def = KeyspaceDef {
            name: "events".into(),
            block_size: 16384,
            bloom_bits_per_key: 0,
            compression: Compression::Lz4,
        };
        let mut buf = Vec::new();
        def.encode(&mut buf);
        assert_eq!(KeyspaceDef::decode(&buf).unwrap(), (def, buf.len()));
        for cut in 0..buf.len() {
            assert!(KeyspaceDef::decode(&buf[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = buf.clone();
        *bad.last_mut().unwrap() = 9;
        let e = KeyspaceDef::decode(&bad).unwrap_err();
        assert!(e.to_string().contains("unknown compression 9"), "{e}");
    }
}
