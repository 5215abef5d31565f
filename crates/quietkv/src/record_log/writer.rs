//! Appending records to a log through a [`LogSink`].

use super::{
    encode_header, encode_recyclable_header, LogIdentity, RecordType, MAX_COMPRESSED_RECORD_LEN,
    MAX_RECORD_LEN, MIN_COMPRESSED_RECORD_LEN,
};
use crate::error::{Error, ErrorKind, Result};
use crate::table::Compression;

/// Where a [`LogWriter`] puts its bytes. The engine implements this with
/// real file I/O (buffered, O_DIRECT or RWF_DONTCACHE); tests use `Vec<u8>`.
pub trait LogSink {
    /// Appends all of `buf` (or fails; a partial append is allowed on error).
    fn write_all(&mut self, buf: &[u8]) -> Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&mut self) -> Result<()>;
    /// Hands everything appended so far to the kernel (survives a process
    /// crash, not a power cut). Sinks without a user-space buffer need not
    /// implement it.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    /// True when [`flush`](Self::flush) is itself a device write (O_DIRECT,
    /// or RWF_DONTCACHE, which starts write-back at once) rather than a
    /// copy into the page cache. A writer that
    /// [defers marks](LogWriter::defer_sync_marks) then leaves its sync
    /// mark buffered for the next write instead of paying a second device
    /// write per sync for it.
    fn flush_writes_device(&self) -> bool {
        false
    }
}

/// An in-memory sink, for tests and for building log images.
impl LogSink for Vec<u8> {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        self.extend_from_slice(buf);
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

impl<S: LogSink + ?Sized> LogSink for &mut S {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        (**self).write_all(buf)
    }
    fn sync(&mut self) -> Result<()> {
        (**self).sync()
    }
    fn flush(&mut self) -> Result<()> {
        (**self).flush()
    }
    fn flush_writes_device(&self) -> bool {
        (**self).flush_writes_device()
    }
}

impl<S: LogSink + ?Sized> LogSink for Box<S> {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        (**self).write_all(buf)
    }
    fn sync(&mut self) -> Result<()> {
        (**self).sync()
    }
    fn flush(&mut self) -> Result<()> {
        (**self).flush()
    }
    fn flush_writes_device(&self) -> bool {
        (**self).flush_writes_device()
    }
}

/// Payloads up to this size are copied next to their header so the sink
/// sees one `write_all` per record; larger ones are written in two calls.
const COALESCE_LIMIT: usize = 32 * 1024;

/// Appends checksummed records to a sink.
///
/// After a failed `write_all` or `sync` the log's tail is in an unknown
/// state, so the writer refuses further records (the caller must start a new
/// log file); a reader will treat the half-written record as a torn tail.
pub struct LogWriter<S: LogSink> {
    sink: S,
    bytes_written: u64,
    /// Log length the last successful sync made durable.
    synced_len: u64,
    /// `bytes_written` right after the last sync mark: nothing new to sync
    /// while they are equal.
    marked_len: u64,
    scratch: Vec<u8>,
    /// Compression of records (the WAL's option; never the manifest's).
    compression: Compression,
    compressed: Vec<u8>,
    /// Set for a WAL that may be recycled: records carry this number.
    log_number: Option<u64>,
    /// Whether a sync mark may wait in the sink's buffer (see
    /// [`defer_sync_marks`](Self::defer_sync_marks)).
    defer_marks: bool,
    /// The identity record still to be written before the first record
    /// (see [`with_identity`](Self::with_identity)).
    pending_identity: Option<LogIdentity>,
    failed: bool,
}

impl<S: LogSink> LogWriter<S> {
    /// A writer for a new, empty log.
    pub fn new(sink: S) -> Self {
        Self::with_offset(sink, 0)
    }

    /// A writer appending to a log that already holds `existing_len` valid
    /// bytes (the sink must be positioned there).
    pub fn with_offset(sink: S, existing_len: u64) -> Self {
        LogWriter {
            sink,
            bytes_written: existing_len,
            synced_len: existing_len,
            marked_len: existing_len,
            scratch: Vec::new(),
            compression: Compression::None,
            compressed: Vec::new(),
            log_number: None,
            defer_marks: false,
            pending_identity: None,
            failed: false,
        }
    }

    /// Starts the log with an identity record naming database `db_id` and
    /// log `number` (a WAL's file number), written together with the first
    /// record so that a log nobody wrote to stays empty. For a new (or
    /// recycled, overwritten) WAL; see the module docs.
    pub(crate) fn with_identity(mut self, db_id: u64, number: u64) -> Self {
        self.pending_identity = Some(LogIdentity { db_id, number });
        self
    }

    /// Compresses records of [`MIN_COMPRESSED_RECORD_LEN`] to
    /// [`MAX_COMPRESSED_RECORD_LEN`] bytes with `c` where that makes them
    /// smaller (zstd at level 1: the WAL is on the write path).
    pub fn with_compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    /// Writes recyclable records (types 4-6) naming log `number`, so that
    /// a reader of this log tells its records from the stale ones of the
    /// file's earlier life as another log (see the module docs). Needed
    /// for every WAL that may later be recycled, and for one written over
    /// a recycled file.
    pub fn recyclable(mut self, number: u64) -> Self {
        self.log_number = Some(number);
        self
    }

    /// Lets [`sync`](Self::sync) leave its sync mark in the sink's buffer
    /// where handing it over would be a device write of its own
    /// ([`LogSink::flush_writes_device`]). For the WAL, whose writer is
    /// sealed or finished whenever it is closed cleanly; the manifest keeps
    /// the default, because it is dropped at close without a seal and its
    /// last edit would end the file with no mark after it.
    pub fn defer_sync_marks(mut self) -> Self {
        self.defer_marks = true;
        self
    }

    /// Appends one record. Not durable until [`sync`](Self::sync).
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check_usable()?;
        if payload.len() > MAX_RECORD_LEN {
            return Err(Error::invalid(format!(
                "log record of {} bytes exceeds the {MAX_RECORD_LEN}-byte limit",
                payload.len()
            )));
        }
        if self.compression != Compression::None
            && (MIN_COMPRESSED_RECORD_LEN..=MAX_COMPRESSED_RECORD_LEN).contains(&payload.len())
        {
            if let Some(framed) = crate::codec::compress(payload, self.compression, 1) {
                if framed.len() + 1 < payload.len() {
                    let mut body = std::mem::take(&mut self.compressed);
                    body.clear();
                    body.push(self.compression.to_u8());
                    body.extend_from_slice(&framed);
                    let r = self.append(RecordType::Compressed, &body);
                    self.compressed = body;
                    return r;
                }
            }
        }
        self.append(RecordType::Full, payload)
    }

    fn append(&mut self, ty: RecordType, payload: &[u8]) -> Result<()> {
        if let Some(id) = self.pending_identity.take() {
            self.append(RecordType::Identity, &id.encode())?;
        }
        let recyclable;
        let plain;
        let header: &[u8] = match self.log_number {
            Some(n) => {
                recyclable = encode_recyclable_header(ty, payload, n);
                &recyclable
            }
            None => {
                plain = encode_header(ty, payload);
                &plain
            }
        };
        let res = if payload.len() <= COALESCE_LIMIT {
            self.scratch.clear();
            self.scratch.extend_from_slice(header);
            self.scratch.extend_from_slice(payload);
            self.sink.write_all(&self.scratch)
        } else {
            self.sink
                .write_all(header)
                .and_then(|()| self.sink.write_all(payload))
        };
        if let Err(e) = res {
            self.failed = true;
            return Err(e);
        }
        self.bytes_written += (header.len() + payload.len()) as u64;
        Ok(())
    }

    /// Makes every record added so far durable, then appends a sync mark
    /// (not synced) so that the synced records are never the last bytes of
    /// the file; see the module docs. The mark is handed to the kernel at
    /// once, unless the writer [defers marks](Self::defer_sync_marks) and
    /// handing it over would be a device write of its own
    /// ([`LogSink::flush_writes_device`]): then it stays in the sink's
    /// buffer and goes out at the next sync, flush, seal or finish (or when
    /// the buffer fills), so a group commit costs one write and one sync,
    /// not two writes. Dropping the writer without those loses it.
    ///
    /// An error after the sync itself succeeded (while writing the mark)
    /// still fails the call: the records are durable, but the log's tail is
    /// in an unknown state and the writer refuses further records.
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.marked_len == self.bytes_written {
            return Ok(());
        }
        if let Err(e) = self.sink.sync() {
            // After a failed fsync the kernel may have dropped dirty pages;
            // retrying could report success for data that is gone.
            self.failed = true;
            return Err(e);
        }
        let synced = self.bytes_written;
        self.append(RecordType::SyncMark, &synced.to_le_bytes())?;
        if !(self.defer_marks && self.sink.flush_writes_device()) {
            if let Err(e) = self.sink.flush() {
                self.failed = true;
                return Err(e);
            }
        }
        self.synced_len = synced;
        self.marked_len = self.bytes_written;
        Ok(())
    }

    /// Syncs every record and the sync mark after them, for a log that will
    /// take no more records, and returns its final length (what the
    /// manifest records for a sealed WAL).
    pub fn seal(&mut self) -> Result<u64> {
        self.sync()?;
        if let Err(e) = self.sink.sync() {
            self.failed = true;
            return Err(e);
        }
        self.synced_len = self.bytes_written;
        Ok(self.bytes_written)
    }

    /// Hands every record added so far to the kernel: they survive a
    /// process crash (not a power cut) once this returns.
    pub fn flush(&mut self) -> Result<()> {
        self.check_usable()?;
        if let Err(e) = self.sink.flush() {
            self.failed = true;
            return Err(e);
        }
        Ok(())
    }

    /// The log length the last successful [`sync`](Self::sync) made durable
    /// (sync marks after it are not counted).
    #[cfg(test)]
    pub fn synced_len(&self) -> u64 {
        self.synced_len
    }

    /// Bytes in the log so far (headers included, plus `existing_len`).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    #[cfg(test)]
    pub fn sink(&self) -> &S {
        &self.sink
    }

    pub fn into_inner(self) -> S {
        self.sink
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            Err(Error::new(
                ErrorKind::Io,
                "log writer is unusable after an earlier write or sync failure",
            ))
        } else {
            Ok(())
        }
    }
}
