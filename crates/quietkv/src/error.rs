//! The one public error type of the engine.
//!
//! Callers match on [`ErrorKind`]; the rest (file, offset, message, source)
//! is context for a human reading the message.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What went wrong, in terms a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bytes on disk are not what the format says they must be.
    Corruption,
    /// The operating system refused an I/O operation.
    Io,
    /// The caller passed something that cannot work (option, key, argument).
    InvalidArgument,
    /// The kernel or filesystem cannot do what was asked (e.g. O_DIRECT on tmpfs).
    NotSupported,
    /// Another process holds the database lock.
    Busy,
    /// The database was shut down or a background error made it read-only.
    Closed,
    /// The database was opened read-only ([`crate::Db::open_read_only`]).
    ReadOnly,
    /// A [`Transaction`](crate::Transaction) could not commit: a key it
    /// read or wrote was written by someone else after its snapshot (the
    /// message names the key). Nothing of it was applied; run it again.
    Conflict,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Corruption => "corruption",
            ErrorKind::Io => "I/O error",
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::NotSupported => "not supported",
            ErrorKind::Busy => "busy",
            ErrorKind::Closed => "closed",
            ErrorKind::ReadOnly => "read-only",
            ErrorKind::Conflict => "conflict",
        })
    }
}

/// An engine error: a kind, a message, and where it happened when known.
///
/// Cloning is cheap and keeps the cause: a background or group-commit
/// failure is handed to every caller it affects as the same error, with
/// the underlying OS error still reachable through
/// [`source`](std::error::Error::source) and [`io_error_kind`](Self::io_error_kind).
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    file: Option<PathBuf>,
    offset: Option<u64>,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result` with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            file: None,
            offset: None,
            source: None,
        }
    }

    pub(crate) fn corruption(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Corruption, message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// An I/O error from the OS, with what we were doing.
    pub(crate) fn io(err: std::io::Error, message: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorKind::Io, message);
        e.source = Some(Arc::new(err));
        e
    }

    /// A new error of `kind` caused by `cause` (kept as its source, not
    /// copied into the message).
    pub(crate) fn caused_by(kind: ErrorKind, message: impl Into<String>, cause: Error) -> Self {
        let mut e = Self::new(kind, message);
        e.source = Some(Arc::new(cause));
        e
    }

    pub(crate) fn with_file(mut self, file: impl AsRef<Path>) -> Self {
        self.file = Some(file.as_ref().to_path_buf());
        self
    }

    /// Says what was being done when the error happened, in front of the
    /// message; the kind, file, offset and cause stay as they are.
    pub(crate) fn context(mut self, doing: &str) -> Self {
        self.message = format!("{doing}: {}", self.message);
        self
    }

    pub(crate) fn with_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    /// What went wrong, to match on.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file the error is about, when there is one.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The byte offset in [`file`](Self::file) the error is about, when known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// What happened, without the kind, file, offset or cause.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The kind of the underlying OS error, if one caused this error
    /// (directly or through a chain of engine errors).
    pub fn io_error_kind(&self) -> Option<std::io::ErrorKind> {
        self.os_error().map(std::io::Error::kind)
    }

    /// The raw OS error number (errno), if one caused this error.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.os_error().and_then(std::io::Error::raw_os_error)
    }

    /// Whether the file system ran out of space (ENOSPC or EDQUOT).
    pub fn is_no_space(&self) -> bool {
        self.os_error().is_some_and(quietio::sys::is_out_of_space)
    }

    fn os_error(&self) -> Option<&std::io::Error> {
        let mut cur: &(dyn std::error::Error + 'static) = self.source.as_deref()?;
        loop {
            if let Some(io) = cur.downcast_ref::<std::io::Error>() {
                return Some(io);
            }
            cur = cur.source()?;
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        if let Some(file) = &self.file {
            write!(f, " (file {}", file.display())?;
            if let Some(off) = self.offset {
                write!(f, ", offset {off}")?;
            }
            f.write_str(")")?;
        } else if let Some(off) = self.offset {
            write!(f, " (offset {off})")?;
        }
        if let Some(src) = &self.source {
            write!(f, ": {src}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|s| s.as_ref() as &(dyn std::error::Error + 'static))
    }
}

/// Keeps quietio's message, file, offset and OS error as they are (the OS
/// error stays the source): nothing is rebuilt from text, so nothing is
/// printed twice.
impl From<quietio::Error> for Error {
    fn from(mut e: quietio::Error) -> Self {
        let kind = match e.kind() {
            quietio::ErrorKind::InvalidArgument => ErrorKind::InvalidArgument,
            quietio::ErrorKind::NotSupported => ErrorKind::NotSupported,
            _ => ErrorKind::Io,
        };
        let mut out = Error::new(kind, e.message());
        out.file = e.file().map(Path::to_path_buf);
        out.offset = e.offset();
        out.source = e
            .take_os_error()
            .map(|s| Arc::new(s) as Arc<dyn std::error::Error + Send + Sync>);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_and_offset() {
        let e = Error::corruption("bad block checksum")
            .with_file("/db/000012.sst")
            .with_offset(4096);
        assert_eq!(
            e.to_string(),
            "corruption: bad block checksum (file /db/000012.sst, offset 4096)"
        );
        assert_eq!(e.kind(), ErrorKind::Corruption);
    }

    /// An OS error through quietio keeps its kind as the source, and the
    /// message names the file once.
    #[test]
    fn quietio_errors_keep_their_os_error_and_say_things_once() {
        let os = std::io::Error::from_raw_os_error(quietio::sys::ENOSPC);
        let io = quietio::Error::io(os, "write failed")
            .with_file("/db/000009.log")
            .with_offset(512);
        let e = Error::from(io);
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.is_no_space());
        assert_eq!(e.raw_os_error(), Some(quietio::sys::ENOSPC));
        assert_eq!(e.file(), Some(Path::new("/db/000009.log")));
        let text = e.to_string();
        assert_eq!(text.matches("000009.log").count(), 1, "{text}");
        assert_eq!(text.matches("I/O error").count(), 1, "{text}");
        assert!(!text.contains('\n'), "{text}");
        let src = std::error::Error::source(&e).unwrap();
        assert!(src.downcast_ref::<std::io::Error>().is_some());

        // Wrapped again (a background failure), the cause is still there.
        let outer = Error::caused_by(ErrorKind::Closed, "writes refused", e.clone());
        assert!(outer.is_no_space());
        assert_eq!(outer.kind(), ErrorKind::Closed);
        assert!(!Error::corruption("x").is_no_space());
    }
}
