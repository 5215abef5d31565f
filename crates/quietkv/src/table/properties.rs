//! Table properties: a few counters and the key/seqno range, stored in
//! their own checksummed block (never compressed).
//!
//! Payload: varints num_entries, num_deletes, num_data_blocks,
//! raw_key_bytes, raw_value_bytes, data_size, smallest_seq, largest_seq,
//! then length-prefixed smallest_key and largest_key, then varint
//! file_number and fixed 8-byte LE db_id (the table's identity, see
//! [`crate::table::identity`]), then the optional range-tombstone fields,
//! then the optional keyspace id. Decoders ignore trailing bytes so later
//! versions may append fields; a table written before the identity fields
//! existed decodes with both as 0 (unknown). The id has a fixed width so
//! that tables with the same content have the same size in every database.
//!
//! The keyspace id lets `repair` put a table back into its keyspace when
//! the manifest that listed it is lost. Only tables of keyspaces other than
//! the default one carry it (a table without it is the default keyspace's,
//! which is right for every table written before keyspaces existed).

use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::table::format::Decoder;
use crate::varint::put_u64;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableProperties {
    pub num_entries: u64,
    pub num_deletes: u64,
    pub num_data_blocks: u64,
    /// Sum of internal key lengths.
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
    /// Bytes of data blocks on disk (with trailers).
    pub data_size: u64,
    /// 0 when the table is empty.
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    /// Internal keys; empty when the table is empty.
    pub smallest_key: Vec<u8>,
    pub largest_key: Vec<u8>,
    /// The file number the table was written as; 0 = unknown (a table
    /// written before this field existed, or outside a database).
    pub file_number: u64,
    /// The id of the database that wrote the table; 0 = unknown.
    pub db_id: u64,
    /// The range-tombstone block (size 0 = none; only in tables of format
    /// version 2).
    pub range_del_offset: u64,
    pub range_del_size: u64,
    /// Range tombstones in that block (not counted in `num_entries`).
    pub num_range_deletes: u64,
    /// The keyspace the table belongs to (0: the default keyspace, or a
    /// table written before tables recorded their keyspace).
    pub keyspace_id: u32,
}

impl TableProperties {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.smallest_key.len() + self.largest_key.len());
        for v in [
            self.num_entries,
            self.num_deletes,
            self.num_data_blocks,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.data_size,
            self.smallest_seq,
            self.largest_seq,
        ] {
            put_u64(&mut out, v);
        }
        for k in [&self.smallest_key, &self.largest_key] {
            put_u64(&mut out, k.len() as u64);
            out.extend_from_slice(k);
        }
        put_u64(&mut out, self.file_number);
        out.extend_from_slice(&self.db_id.to_le_bytes());
        // Only tables with range tombstones (or of another keyspace than
        // the default one, whose id follows them) carry the three fields,
        // so a default keyspace's table without any is byte for byte what
        // older builds write.
        if self.range_del_size > 0 || self.keyspace_id != 0 {
            for v in [
                self.range_del_offset,
                self.range_del_size,
                self.num_range_deletes,
            ] {
                put_u64(&mut out, v);
            }
        }
        if self.keyspace_id != 0 {
            put_u64(&mut out, u64::from(self.keyspace_id));
        }
        out
    }

    pub fn decode(buf: &[u8]) -> Result<TableProperties> {
        let mut d = Decoder::new(buf, "properties block");
        let mut p = TableProperties {
            num_entries: d.varint()?,
            num_deletes: d.varint()?,
            num_data_blocks: d.varint()?,
            raw_key_bytes: d.varint()?,
            raw_value_bytes: d.varint()?,
            data_size: d.varint()?,
            smallest_seq: d.varint()?,
            largest_seq: d.varint()?,
            ..Default::default()
        };
        p.smallest_key = d.len_prefixed()?.to_vec();
        p.largest_key = d.len_prefixed()?.to_vec();
        // Older tables end here: their identity stays unknown (0).
        if !d.is_empty() {
            p.file_number = d.varint()?;
            p.db_id = d.fixed64()?;
        }
        if !d.is_empty() {
            p.range_del_offset = d.varint()?;
            p.range_del_size = d.varint()?;
            p.num_range_deletes = d.varint()?;
        }
        if !d.is_empty() {
            let id = d.varint()?;
            p.keyspace_id = u32::try_from(id).map_err(|_| {
                Error::corruption(format!(
                    "table properties name keyspace {id}, past the largest keyspace id"
                ))
            })?;
        }
        // No block is all three zero; a block has a size and a count.
        if (p.range_del_size == 0) != (p.num_range_deletes == 0)
            || (p.range_del_size == 0 && p.range_del_offset != 0)
        {
            return Err(Error::corruption(format!(
                "table properties claim {} range tombstones in a block of {} bytes at offset {}",
                p.num_range_deletes, p.range_del_size, p.range_del_offset
            )));
        }
        if p.num_deletes > p.num_entries || p.smallest_seq > p.largest_seq {
            return Err(Error::corruption("inconsistent table properties"));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let p = TableProperties {
            num_entries: 10,
            num_deletes: 3,
            num_data_blocks: 2,
            raw_key_bytes: 100,
            raw_value_bytes: 1000,
            data_size: 900,
            smallest_seq: 4,
            largest_seq: 99,
            smallest_key: b"aaaaaaaaaaaa".to_vec(),
            largest_key: b"zzzzzzzzzzzz".to_vec(),
            file_number: 300,
            db_id: u64::MAX - 5,
            ..Default::default()
        };
        let enc = p.encode();
        assert_eq!(TableProperties::decode(&enc).unwrap(), p);
        // The layout before the identity fields: it decodes as unknown.
        let old_len = enc.len() - 2 - 8;
        let old = TableProperties::decode(&enc[..old_len]).unwrap();
        assert_eq!((old.file_number, old.db_id), (0, 0));
        assert_eq!(old.largest_key, p.largest_key);
        for n in (0..enc.len()).filter(|&n| n != old_len) {
            assert!(TableProperties::decode(&enc[..n]).is_err(), "{n}");
        }
        // With a range-tombstone block: three more fields, which older
        // layouts lack (and decode as none).
        let with_dels = TableProperties {
            range_del_offset: 900,
            range_del_size: 40,
            num_range_deletes: 2,
            ..p.clone()
        };
        let enc2 = with_dels.encode();
        assert_eq!(&enc2[..enc.len()], &enc[..]);
        assert_eq!(TableProperties::decode(&enc2).unwrap(), with_dels);
        for n in enc.len() + 1..enc2.len() {
            assert!(TableProperties::decode(&enc2[..n]).is_err(), "{n}");
        }
        // A table of another keyspace than the default one: its id after
        // the range-tombstone fields (written as zeros when it has none).
        for base in [&p, &with_dels] {
            let in_ks = TableProperties {
                keyspace_id: 7,
                ..base.clone()
            };
            let enc3 = in_ks.encode();
            assert_eq!(TableProperties::decode(&enc3).unwrap(), in_ks);
            assert_eq!(*enc3.last().unwrap(), 7);
            // Fields a later version appends are ignored.
            let mut longer = enc3.clone();
            longer.extend_from_slice(&[1, 2, 3]);
            assert_eq!(TableProperties::decode(&longer).unwrap(), in_ks);
        }
        let mut past = with_dels.encode();
        past.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x7f]);
        let e = TableProperties::decode(&past).unwrap_err();
        assert!(e.to_string().contains("largest keyspace id"), "{e}");
        // A count without a block (or the reverse) is damage, and so is an
        // offset of no block.
        let bad = TableProperties {
            num_range_deletes: 0,
            ..with_dels.clone()
        };
        assert!(TableProperties::decode(&bad.encode()).is_err());
        let mut offset_only = enc.clone();
        offset_only.extend_from_slice(&[5, 0, 0]);
        assert!(TableProperties::decode(&offset_only).is_err());
    }
}
