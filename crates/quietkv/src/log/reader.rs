//! Reading records back from a log file image, with crash-tolerant tail rules.

use std::path::{Path, PathBuf};

use super::{record_crc, RecordType, HEADER_LEN};
use crate::error::{Error, Result};

/// How the log ended, known once [`LogReader::read_record`] returned `Ok(None)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailState {
    /// The file ends exactly after the last record (or is empty).
    Clean,
    /// An incomplete or damaged last record starts at `offset` and was
    /// dropped: the writer crashed while appending it.
    Torn { offset: u64 },
    /// From `offset` to the end the file is zero bytes (O_DIRECT padding or
    /// preallocated space).
    ZeroPadded { offset: u64 },
}

impl TailState {
    /// Where the valid records end: the length to truncate the file to
    /// before appending to it again.
    pub fn valid_len(&self, file_len: u64) -> u64 {
        match *self {
            TailState::Clean => file_len,
            TailState::Torn { offset } | TailState::ZeroPadded { offset } => offset,
        }
    }
}

enum State {
    Reading,
    Done,
    Failed { message: String, offset: u64 },
}

/// Reads the records of a whole log file image, in order.
///
/// The writer may have crashed at any point and an O_DIRECT writer pads the
/// tail with zeros, so the end of the file is read leniently and everything
/// else strictly:
///
/// * a header or payload that runs past the end of the file is a torn tail:
///   reading stops with `Ok(None)` and [`tail`](Self::tail) is `Torn`;
/// * a header of nine zero bytes (or fewer than nine zero bytes at the very
///   end) is padding: reading stops with `ZeroPadded` if every byte after it
///   is zero, and fails with Corruption otherwise;
/// * a checksum mismatch or unknown record type on the last record, with
///   nothing but zeros after its declared end, is a torn tail (a partially
///   persisted page) and the record is dropped;
/// * a checksum mismatch or unknown type followed by anything non-zero is
///   Corruption naming the file and the offset of the bad record.
///
/// Lengths read from the file are only used to slice the image, never to
/// allocate. A damaged length field that points past the end of the file is
/// indistinguishable from a torn tail and is reported as one.
///
/// After an error every further `read_record` returns the same error (the
/// `Iterator` impl yields it once, then ends); after `Ok(None)` every further
/// call returns `Ok(None)`.
pub struct LogReader<'a> {
    data: &'a [u8],
    path: PathBuf,
    pos: usize,
    last_record_offset: u64,
    tail: TailState,
    state: State,
}

impl<'a> LogReader<'a> {
    /// `path` is only used in error messages.
    pub fn new(path: impl AsRef<Path>, data: &'a [u8]) -> Self {
        LogReader {
            data,
            path: path.as_ref().to_path_buf(),
            pos: 0,
            last_record_offset: 0,
            tail: TailState::Clean,
            state: State::Reading,
        }
    }

    /// The next record's payload, `Ok(None)` at the (possibly torn or
    /// padded) end, or Corruption.
    pub fn read_record(&mut self) -> Result<Option<&'a [u8]>> {
        match &self.state {
            State::Reading => {}
            State::Done => return Ok(None),
            State::Failed { message, offset } => {
                return Err(self.corruption(message.clone(), *offset));
            }
        }
        match self.step() {
            Ok(Some(rec)) => Ok(Some(rec)),
            Ok(None) => {
                self.state = State::Done;
                Ok(None)
            }
            Err((message, offset)) => {
                let err = self.corruption(message.clone(), offset);
                self.state = State::Failed { message, offset };
                Err(err)
            }
        }
    }

    /// How the log ended; `Clean` until `read_record` has returned `Ok(None)`.
    pub fn tail(&self) -> TailState {
        self.tail
    }

    /// File offset of the header of the record most recently returned.
    pub fn last_record_offset(&self) -> u64 {
        self.last_record_offset
    }

    /// File offset just past the last record returned so far.
    pub fn valid_len(&self) -> u64 {
        self.pos as u64
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn corruption(&self, message: String, offset: u64) -> Error {
        Error::corruption(message)
            .with_file(&self.path)
            .with_offset(offset)
    }

    fn stop(&mut self, tail: TailState) -> std::result::Result<Option<&'a [u8]>, (String, u64)> {
        self.tail = tail;
        Ok(None)
    }

    fn step(&mut self) -> std::result::Result<Option<&'a [u8]>, (String, u64)> {
        let data = self.data;
        let start = self.pos;
        let offset = start as u64;
        let rest = &data[start..];
        if rest.is_empty() {
            return self.stop(TailState::Clean);
        }
        if rest.len() < HEADER_LEN {
            return if all_zero(rest) {
                self.stop(TailState::ZeroPadded { offset })
            } else {
                self.stop(TailState::Torn { offset })
            };
        }
        let header = &rest[..HEADER_LEN];
        if all_zero(header) {
            if let Some(nz) = rest.iter().position(|&b| b != 0) {
                return Err((
                    format!(
                        "log has a zero record header followed by non-zero data at offset {}",
                        offset + nz as u64
                    ),
                    offset,
                ));
            }
            return self.stop(TailState::ZeroPadded { offset });
        }
        let stored_crc = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
        let ty = header[8];
        let body = &rest[HEADER_LEN..];
        if len > body.len() {
            // The writer crashed before the whole payload reached the disk.
            return self.stop(TailState::Torn { offset });
        }
        let payload = &body[..len];
        let after = &body[len..];
        let problem = if RecordType::from_u8(ty).is_none() {
            Some(format!("log record has unknown type {ty}"))
        } else if record_crc(ty, payload) != stored_crc {
            Some(format!("log record of {len} bytes fails its checksum"))
        } else {
            None
        };
        if let Some(problem) = problem {
            if all_zero(after) {
                // Last record of the file: a partially persisted page.
                return self.stop(TailState::Torn { offset });
            }
            return Err((problem, offset));
        }
        self.last_record_offset = offset;
        self.pos = start + HEADER_LEN + len;
        Ok(Some(payload))
    }
}

impl<'a> Iterator for LogReader<'a> {
    type Item = Result<&'a [u8]>;

    /// Yields each record, then either nothing more or one error.
    fn next(&mut self) -> Option<Self::Item> {
        if matches!(self.state, State::Failed { .. }) {
            return None;
        }
        self.read_record().transpose()
    }
}

fn all_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}
