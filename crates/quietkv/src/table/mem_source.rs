//! Table sources over bytes in memory, for unit tests of the table format.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::source::{RandomSource, SeqSource};
use crate::error::{Error, ErrorKind, Result};

/// A whole table held in memory, with a path for error messages.
#[derive(Clone)]
pub struct MemSource {
    data: Arc<[u8]>,
    path: PathBuf,
}

impl MemSource {
    pub fn new(data: impl Into<Arc<[u8]>>, path: impl Into<PathBuf>) -> Self {
        MemSource {
            data: data.into(),
            path: path.into(),
        }
    }

    #[cfg(any(test, feature = "fuzzing"))]
    /// A sequential reader over the same bytes, starting at offset 0.
    pub fn seq(&self) -> MemSeqSource {
        MemSeqSource {
            data: Arc::clone(&self.data),
            pos: 0,
            path: self.path.clone(),
        }
    }
}

fn short_read(path: &Path, offset: u64, len: usize, size: u64) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("short read: wanted {len} bytes at offset {offset}, file has {size} bytes"),
    )
    .with_file(path)
    .with_offset(offset)
}

impl RandomSource for MemSource {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let size = self.data.len() as u64;
        let start = usize::try_from(offset).ok();
        let range = start.and_then(|s| Some(s..s.checked_add(len)?));
        match range.and_then(|r| self.data.get(r)) {
            Some(bytes) => Ok(bytes.to_vec()),
            None => Err(short_read(&self.path, offset, len, size)),
        }
    }

    fn size(&self) -> u64 {
        self.data.len() as u64
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Sequential reads over in-memory bytes.
pub struct MemSeqSource {
    data: Arc<[u8]>,
    pos: usize,
    path: PathBuf,
}

#[cfg(test)]
impl MemSeqSource {
    pub fn new(data: impl Into<Arc<[u8]>>, path: impl Into<PathBuf>) -> Self {
        MemSeqSource {
            data: data.into(),
            pos: 0,
            path: path.into(),
        }
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl SeqSource for MemSeqSource {
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        let end = self.pos.checked_add(buf.len());
        match end.and_then(|e| Some((e, self.data.get(self.pos..e)?))) {
            Some((end, bytes)) => {
                buf.copy_from_slice(bytes);
                self.pos = end;
                Ok(())
            }
            None => Err(short_read(
                &self.path,
                self.pos as u64,
                buf.len(),
                self.data.len() as u64,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_sources_read_and_refuse_short_reads() {
        let src = MemSource::new(b"hello world".to_vec(), "/t/1.sst");
        assert_eq!(src.read_at(6, 5).unwrap(), b"world");
        assert_eq!(src.read_at(11, 0).unwrap(), b"");
        let e = src.read_at(7, 5).unwrap_err();
        assert_eq!(e.offset(), Some(7));
        assert!(src.read_at(u64::MAX, 2).is_err());
        let mut seq = src.seq();
        let mut buf = [0u8; 5];
        seq.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        let mut big = [0u8; 7];
        assert!(seq.read_exact(&mut big).is_err());
        let mut rest = [0u8; 6];
        seq.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b" world");
    }
}
