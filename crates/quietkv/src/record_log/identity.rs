//! Whose log a file is: the identity record that starts every WAL.
//!
//! Checksums prove a record is intact, not that it belongs here: a WAL of
//! another database copied into the directory under a newer number is a
//! perfectly valid log, and replaying it would serve the other database's
//! values as this one's. So every WAL starts with a record naming its
//! database and its own file number, and recovery, `check` and `repair`
//! compare both with what they expect.

/// What an identity record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogIdentity {
    /// The database's random id (0: a database that has none).
    pub db_id: u64,
    /// The log's file number (`NNNNNN.log`).
    pub number: u64,
}

/// The kind byte of a WAL's identity record.
const KIND_WAL: u8 = 1;

/// Bytes of an identity record's payload: kind, database id, number.
pub(crate) const IDENTITY_LEN: usize = 1 + 8 + 8;

impl LogIdentity {
    pub(crate) fn encode(&self) -> [u8; IDENTITY_LEN] {
        let mut b = [0u8; IDENTITY_LEN];
        b[0] = KIND_WAL;
        b[1..9].copy_from_slice(&self.db_id.to_le_bytes());
        b[9..17].copy_from_slice(&self.number.to_le_bytes());
        b
    }

    /// The identity in an intact record's payload, or why it is not one.
    pub(crate) fn decode(payload: &[u8]) -> Result<LogIdentity, String> {
        let b: &[u8; IDENTITY_LEN] = payload.try_into().map_err(|_| {
            format!(
                "identity record of {} bytes, expected {IDENTITY_LEN}",
                payload.len()
            )
        })?;
        if b[0] != KIND_WAL {
            return Err(format!("identity record of unknown kind {}", b[0]));
        }
        Ok(LogIdentity {
            db_id: u64::from_le_bytes(b[1..9].try_into().expect("eight bytes")),
            number: u64::from_le_bytes(b[9..17].try_into().expect("eight bytes")),
        })
    }
}

/// What a reader of a WAL expects its identity record to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdentityRule {
    /// This database's id; 0 (unknown) skips the comparison.
    pub db_id: u64,
    /// Whether a WAL without an identity record is refused: true for a
    /// database whose manifest says every WAL it may replay was written
    /// with one. False only for WALs of databases written before
    /// identities existed.
    pub required: bool,
}

impl IdentityRule {
    /// Why `found`, read from WAL `number`, is not this database's WAL, if
    /// it is not.
    pub(crate) fn mismatch(&self, number: u64, found: &LogIdentity) -> Option<String> {
        if self.db_id != 0 && found.db_id != 0 && found.db_id != self.db_id {
            return Some(format!(
                "the WAL was written by database {:016x}, not by this database ({:016x}): its records are not replayed",
                found.db_id, self.db_id
            ));
        }
        if found.number != number {
            return Some(format!(
                "the WAL says it is {:06}.log, not {number:06}.log: it was copied or renamed over",
                found.number
            ));
        }
        None
    }

    /// Why a WAL whose first record is not an identity record is refused,
    /// if it is.
    pub(crate) fn missing(&self) -> Option<String> {
        self.required.then(|| {
            "the WAL does not start with an identity record, but every WAL of this database does: it is not this database's WAL (a file of another database, or of an older version, copied in)".to_string()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_payloads() {
        let id = LogIdentity {
            db_id: 0xfeed,
            number: 42,
        };
        assert_eq!(LogIdentity::decode(&id.encode()).unwrap(), id);
        assert!(LogIdentity::decode(&id.encode()[..16])
            .unwrap_err()
            .contains("16 bytes"));
        let mut other = id.encode();
        other[0] = 9;
        assert!(LogIdentity::decode(&other)
            .unwrap_err()
            .contains("unknown kind 9"));
    }

    #[test]
    fn rules() {
        let rule = IdentityRule {
            db_id: 7,
            required: true,
        };
        let ours = LogIdentity {
            db_id: 7,
            number: 5,
        };
        assert_eq!(rule.mismatch(5, &ours), None);
        assert!(rule.mismatch(6, &ours).unwrap().contains("000005.log"));
        let foreign = LogIdentity { db_id: 8, ..ours };
        assert!(rule
            .mismatch(5, &foreign)
            .unwrap()
            .contains("database 0000000000000008"));
        // A database without an id compares numbers only.
        let unknown = IdentityRule { db_id: 0, ..rule };
        assert_eq!(unknown.mismatch(5, &foreign), None);
        assert!(rule.missing().is_some());
        assert!(IdentityRule {
            required: false,
            ..rule
        }
        .missing()
        .is_none());
    }
}
