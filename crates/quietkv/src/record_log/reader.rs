//! Reading records back from a log file image, with crash-tolerant tail rules.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::{
    decode_header, is_recyclable_code, record_crc, IdentityRule, LogIdentity, ParsedHeader,
    RecordType, HEADER_LEN, SYNC_MARK_LEN,
};
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
    /// The record at `offset` is missing a whole sector (it reads back as
    /// zeros) while later bytes of the file reached the disk, and no intact
    /// sync mark after it says it was synced: an unsynced tail the kernel
    /// wrote back out of order before a power cut. Everything from
    /// `offset` on was dropped.
    Unpersisted { offset: u64 },
    /// From `offset` on the file holds bytes of its earlier life as another
    /// log (a recycled WAL): an intact record naming another log (or in the
    /// other record format), or a damaged record that no later sync mark of
    /// this log covers (the end of an unsynced tail written over the old
    /// records). Nothing from `offset` on was replayed.
    Recycled { offset: u64 },
}

impl TailState {
    /// Where the valid records end: the length to truncate the file to
    /// before appending to it again.
    pub fn valid_len(&self, file_len: u64) -> u64 {
        match *self {
            TailState::Clean => file_len,
            TailState::Torn { offset }
            | TailState::ZeroPadded { offset }
            | TailState::Unpersisted { offset }
            | TailState::Recycled { offset } => offset,
        }
    }
}

/// A reading problem before it is turned into an error: message, offset.
type Problem = (String, u64);

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
///   reading stops with `Ok(None)` and [`tail`](Self::tail) is `Torn`
///   (the header checksum makes the length trustworthy, so this is a file
///   that really ends early);
/// * a header of zero bytes (or fewer than a header's worth of zero bytes at
///   the very end) is padding: reading stops with `ZeroPadded` if every byte
///   after it is zero, and fails with Corruption otherwise;
/// * a header, payload checksum mismatch or unknown record type with nothing
///   but zeros after it is a torn tail (a partially persisted page) and the
///   record is dropped;
/// * any of those followed by anything non-zero is Corruption naming the
///   file and the offset of the bad record. Since every sync appends a sync
///   mark, a record that was synced (and the mark reached the file) is
///   never the last one, so damage to it is always reported;
/// * except for the one shape a power cut gives an unsynced tail the kernel
///   wrote back out of order (a later page reached the disk, an earlier one
///   did not): the damaged record overlaps a 512-byte sector that reads as
///   zeros from the record (or the sector's start) to the sector's end, and
///   no intact sync mark after it claims a synced length past its start.
///   Then the log ends there ([`TailState::Unpersisted`]). A flipped bit
///   does not zero a sector, and damage to a synced record is still
///   Corruption as long as a later sync mark survives.
///
/// A log read as a known log number ([`for_log`](Self::for_log)) in the
/// recyclable format may be a recycled file, whose bytes after the last
/// record of this life are the old life's: an intact record naming another
/// log (or of the other format) ends it, and so does a damaged record no
/// later intact sync mark of this log covers ([`TailState::Recycled`]);
/// damage such a mark covers stays Corruption, and sync marks of other
/// logs cover nothing. Logs of the plain format keep the rules above.
///
/// A log the manifest recorded as sealed at a known length
/// ([`sealed_at`](Self::sealed_at)) is read strictly to that length: a torn
/// record, padding or the end of the file before it is Corruption (the log
/// was truncated or damaged after it was closed), and so is a valid record
/// (of either type) starting at or after it. Past the sealed length the
/// rules above still apply, so zero padding, or a damaged or incomplete
/// record followed only by zeros, ends the log without an error.
///
/// Lengths read from the file are only used to slice the image, never to
/// allocate.
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
    /// The length the manifest recorded when the log was sealed.
    sealed_len: Option<u64>,
    /// Largest length a sync mark read so far says was durable.
    synced_len: u64,
    /// The number of the log being read (a WAL's), which recyclable
    /// records must name.
    log_number: Option<u64>,
    /// Whether this log's records are recyclable, once the first intact
    /// one of this log said so.
    recyclable: Option<bool>,
    /// What the log's identity record must say, when the caller knows.
    identity_rule: Option<IdentityRule>,
    /// The identity record read, if the log has one.
    identity: Option<LogIdentity>,
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
            sealed_len: None,
            synced_len: 0,
            log_number: None,
            recyclable: None,
            identity_rule: None,
            identity: None,
        }
    }

    /// Compares the log's identity record with `rule` (and with the number
    /// given to [`for_log`](Self::for_log)): a WAL of another database, one
    /// copied or renamed over, or (when the rule requires one) one without
    /// an identity record is Corruption at its first record.
    pub(crate) fn expect_identity(mut self, rule: IdentityRule) -> Self {
        self.identity_rule = Some(rule);
        self
    }

    /// Reads the image as log `number` (a WAL's file number): recyclable
    /// records naming another log are the file's earlier life and end the
    /// log ([`TailState::Recycled`]). Without it, a recyclable record is
    /// Corruption.
    pub fn for_log(mut self, number: u64) -> Self {
        self.log_number = Some(number);
        self
    }

    /// Reads the log strictly up to `len`, the length recorded when it was
    /// sealed (closed for appends); see the type's docs.
    pub fn sealed_at(mut self, len: u64) -> Self {
        self.sealed_len = Some(len);
        self
    }

    /// The largest log length a sync mark read so far says was made durable.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn synced_len(&self) -> u64 {
        self.synced_len
    }

    /// The next record's payload (decompressed if the record is
    /// compressed, else borrowed from the image), `Ok(None)` at the
    /// (possibly torn or padded) end, or Corruption.
    pub fn read_record(&mut self) -> Result<Option<Cow<'a, [u8]>>> {
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
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn valid_len(&self) -> u64 {
        self.pos as u64
    }

    fn corruption(&self, message: String, offset: u64) -> Error {
        Error::corruption(message)
            .with_file(&self.path)
            .with_offset(offset)
    }

    fn stop(&mut self, tail: TailState) -> std::result::Result<Option<Cow<'a, [u8]>>, Problem> {
        let end = tail.valid_len(self.data.len() as u64);
        if let Some(sealed) = self.sealed_len {
            if end < sealed {
                let what = match tail {
                    TailState::Clean => "the file ends",
                    TailState::Torn { .. } | TailState::Unpersisted { .. } => {
                        "a damaged or incomplete record starts"
                    }
                    TailState::ZeroPadded { .. } => "zero bytes start",
                    TailState::Recycled { .. } => "bytes of another log start",
                };
                return Err((
                    format!(
                        "log was sealed at {sealed} bytes but {what} at offset {end}: \
                         it was truncated or damaged after it was closed"
                    ),
                    end,
                ));
            }
        }
        self.tail = tail;
        Ok(None)
    }

    /// Reads the next record of any type.
    fn step(&mut self) -> std::result::Result<Option<Cow<'a, [u8]>>, Problem> {
        loop {
            let start = self.pos;
            let Some((ty, payload)) = self.next_raw()? else {
                return Ok(None);
            };
            if let Some(sealed) = self.sealed_len {
                if start as u64 >= sealed {
                    return Err((
                        format!("log was sealed at {sealed} bytes but holds a record after it"),
                        start as u64,
                    ));
                }
            }
            if matches!(ty, RecordType::Full | RecordType::Compressed) && self.identity.is_none() {
                if let Some(why) = self.identity_rule.and_then(|r| r.missing()) {
                    return Err((why, start as u64));
                }
            }
            match ty {
                RecordType::Identity => {
                    if start != 0 {
                        return Err((
                            format!("identity record at offset {start}: only a log's first record names it"),
                            start as u64,
                        ));
                    }
                    let id = LogIdentity::decode(payload).map_err(|why| (why, start as u64))?;
                    if let Some(rule) = self.identity_rule {
                        let number = self.log_number.unwrap_or(id.number);
                        if let Some(why) = rule.mismatch(number, &id) {
                            return Err((why, start as u64));
                        }
                    }
                    self.identity = Some(id);
                }
                RecordType::Full => {
                    self.last_record_offset = start as u64;
                    return Ok(Some(Cow::Borrowed(payload)));
                }
                RecordType::Compressed => {
                    // The checksum matched: these are the bytes the writer
                    // wrote, so a payload that does not decompress is damage
                    // (or a writer bug), never a torn tail.
                    let raw = super::decompress_record(payload)
                        .map_err(|e| (e.message().to_string(), start as u64))?;
                    self.last_record_offset = start as u64;
                    return Ok(Some(Cow::Owned(raw)));
                }
                RecordType::SyncMark => {
                    let value = <[u8; SYNC_MARK_LEN]>::try_from(payload)
                        .map(u64::from_le_bytes)
                        .map_err(|_| {
                            (
                                format!(
                                    "sync mark of {} bytes, expected {SYNC_MARK_LEN}",
                                    payload.len()
                                ),
                                start as u64,
                            )
                        })?;
                    if value > start as u64 {
                        return Err((
                            format!(
                                "sync mark at offset {start} claims {value} bytes were synced before it"
                            ),
                            start as u64,
                        ));
                    }
                    self.synced_len = self.synced_len.max(value);
                }
            }
        }
    }

    /// Reads one record of any type, applying the tail rules.
    fn next_raw(&mut self) -> std::result::Result<Option<(RecordType, &'a [u8])>, Problem> {
        let data = self.data;
        let start = self.pos;
        let offset = start as u64;
        let rest = &data[start..];
        if rest.is_empty() {
            return self.stop(TailState::Clean).map(|_| None);
        }
        if rest.len() < HEADER_LEN {
            let tail = if all_zero(rest) {
                TailState::ZeroPadded { offset }
            } else {
                TailState::Torn { offset }
            };
            return self.stop(tail).map(|_| None);
        }
        let header = &rest[..HEADER_LEN];
        if all_zero(header) {
            if let Some(nz) = rest.iter().position(|&b| b != 0) {
                return self.damaged(
                    start,
                    start + HEADER_LEN,
                    false,
                    format!(
                        "log has a zero record header followed by non-zero data at offset {}",
                        offset + nz as u64
                    ),
                );
            }
            return self.stop(TailState::ZeroPadded { offset }).map(|_| None);
        }
        let h = match decode_header(rest) {
            ParsedHeader::Intact(h) => h,
            // The file ends inside a recyclable header: never finished.
            ParsedHeader::Short => return self.stop(TailState::Torn { offset }).map(|_| None),
            ParsedHeader::Damaged => {
                // A header the writer never finished has only zeros after it.
                if all_zero(&rest[HEADER_LEN..]) {
                    return self.stop(TailState::Torn { offset }).map(|_| None);
                }
                return self.damaged(
                    start,
                    start + HEADER_LEN,
                    false,
                    "log record header fails its checksum".to_string(),
                );
            }
        };
        let after_header = &rest[h.header_len..];
        if h.len > after_header.len() {
            // The writer crashed before the whole payload reached the disk.
            return self.stop(TailState::Torn { offset }).map(|_| None);
        }
        let payload = &after_header[..h.len];
        let after = &after_header[h.len..];
        let ty = RecordType::from_u8(h.ty);
        let problem = match ty {
            None => Some(format!("log record has unknown type {}", h.ty)),
            Some(_) if record_crc(h.ty, payload) != h.payload_crc => {
                Some(format!("log record of {} bytes fails its checksum", h.len))
            }
            Some(_) => None,
        };
        // An intact header naming this log: the record belongs to this
        // log's life, whatever happened to its payload.
        let ours = h.log_number.is_some() && h.log_number == self.log_number;
        if let Some(problem) = problem {
            if all_zero(after) {
                // Last record of the file: a partially persisted page.
                return self.stop(TailState::Torn { offset }).map(|_| None);
            }
            return self.damaged(start, start + h.header_len + h.len, ours, problem);
        }
        let recyclable = is_recyclable_code(h.ty);
        if recyclable && self.log_number.is_none() {
            return Err((
                format!(
                    "recyclable log record (type {}) in a log read without its number",
                    h.ty
                ),
                offset,
            ));
        }
        if (recyclable && !ours) || self.recyclable.is_some_and(|r| r != recyclable) {
            // Another log's record, or one of the other format: the
            // file's earlier life (see the module docs).
            return self.stop(TailState::Recycled { offset }).map(|_| None);
        }
        self.recyclable = Some(recyclable);
        self.pos = start + h.header_len + h.len;
        Ok(ty.map(|t| (t, payload)))
    }
}

impl<'a> LogReader<'a> {
    /// A damaged record at `start` (its bytes end at `end`, or its header
    /// does where the length cannot be trusted) with non-zero bytes after
    /// it: Corruption, unless it has the shape of an unsynced tail written
    /// back out of order, or of an unsynced tail written over a recycled
    /// file's old records (see the type's docs). `ours` says the damaged
    /// record's own header is intact and names this log.
    fn damaged(
        &mut self,
        start: usize,
        end: usize,
        ours: bool,
        problem: String,
    ) -> std::result::Result<Option<(RecordType, &'a [u8])>, Problem> {
        let data = self.data;
        // A log of the plain format is never a recycled file (only WALs
        // written in the recyclable format are reused).
        let maybe_recycled = self.log_number.is_some() && self.recyclable != Some(false);
        let unpersisted =
            self.sealed_len.is_none() && has_unpersisted_sector(data, start, end.min(data.len()));
        if !maybe_recycled && !unpersisted {
            return Err((problem, start as u64));
        }
        let after = scan_after(data, start, self.log_number);
        // A recycled log: known to be one from its own records (or the
        // damaged record's header), or from the stale records after it.
        let recycled = maybe_recycled && (self.recyclable == Some(true) || ours || after.stale);
        let past_sealed = self.sealed_len.is_none_or(|len| start as u64 >= len);
        let recycled_tail = recycled && past_sealed && !after.covered;
        // Stale records after the damage say best what the bytes are.
        if recycled_tail && after.stale {
            return self
                .stop(TailState::Recycled {
                    offset: start as u64,
                })
                .map(|_| None);
        }
        if unpersisted && !after.covered {
            return self
                .stop(TailState::Unpersisted {
                    offset: start as u64,
                })
                .map(|_| None);
        }
        if recycled_tail {
            return self
                .stop(TailState::Recycled {
                    offset: start as u64,
                })
                .map(|_| None);
        }
        Err((problem, start as u64))
    }
}

/// The unit a disk persists atomically, at its smallest. A page the kernel
/// never wrote back reads as zeros in every one of its sectors, so checking
/// 512-byte sectors also finds lost 4 KiB pages.
const SECTOR: usize = 512;

/// Shortest zero run, from inside a damaged record to a sector boundary,
/// taken as a lost sector rather than as zero bytes the record may hold.
/// A run that starts at the record itself counts at any length: a record
/// starting a few bytes before a boundary loses just those bytes when the
/// sector's new version never reached the disk, and a header never starts
/// with zeros up to a boundary otherwise (its first bytes are a checksum).
const MIN_LOST_RUN: usize = 4;

/// Whether some sector overlapping `data[start..end]` reads as zeros from
/// `max(start, sector start)` to the end of the sector (or of the file) -
/// the bytes a power cut leaves where an unsynced write never reached the
/// disk (the sector's durable part, before `start`, may hold data).
fn has_unpersisted_sector(data: &[u8], start: usize, end: usize) -> bool {
    let mut sector = start / SECTOR * SECTOR;
    while sector < end {
        let lo = sector.max(start);
        let hi = (sector + SECTOR).min(data.len());
        if lo < hi && (hi - lo >= MIN_LOST_RUN || lo == start) && all_zero(&data[lo..hi]) {
            return true;
        }
        sector += SECTOR;
    }
    false
}

/// What the intact records after a damaged one say about it.
struct After {
    /// An intact sync mark of this log (or a plain one) says the log was
    /// synced past the damage: the bytes there were durable and the damage
    /// is real.
    covered: bool,
    /// An intact recyclable record of another log follows: the file is a
    /// recycled one.
    stale: bool,
}

/// Scans the bytes after `offset` for intact records, resynchronising
/// like repair's salvage scan. Sync marks of other logs (stale ones of a
/// recycled file's earlier life) cover nothing.
fn scan_after(data: &[u8], offset: usize, log_number: Option<u64>) -> After {
    let mut out = After {
        covered: false,
        stale: false,
    };
    let mut pos = offset + 1;
    while let Some((at, found)) = super::salvage::next_record(data, pos) {
        let other_log = found.log_number.is_some() && found.log_number != log_number;
        if other_log {
            out.stale = true;
        } else if found.ty == RecordType::SyncMark {
            let synced = <[u8; SYNC_MARK_LEN]>::try_from(found.payload).map(u64::from_le_bytes);
            if matches!(synced, Ok(len) if len > offset as u64) {
                out.covered = true;
                return out;
            }
        }
        pos = at + found.len();
    }
    out
}

impl<'a> Iterator for LogReader<'a> {
    type Item = Result<Cow<'a, [u8]>>;

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
