//! The one public error type of the engine.
//!
//! Callers match on [`ErrorKind`]; the rest (file, offset, message, source)
//! is context for a human reading the message.

use std::fmt;
use std::path::{Path, PathBuf};

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
        })
    }
}

/// An engine error: a kind, a message, and where it happened when known.
pub struct Error {
    kind: ErrorKind,
    message: String,
    file: Option<PathBuf>,
    offset: Option<u64>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            file: None,
            offset: None,
            source: None,
        }
    }

    pub fn corruption(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Corruption, message)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// An I/O error from the OS, with what we were doing.
    pub fn io(err: std::io::Error, message: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorKind::Io, message);
        e.source = Some(Box::new(err));
        e
    }

    pub fn with_file(mut self, file: impl AsRef<Path>) -> Self {
        self.file = Some(file.as_ref().to_path_buf());
        self
    }

    pub fn with_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    pub fn message(&self) -> &str {
        &self.message
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

impl From<quietio::Error> for Error {
    fn from(e: quietio::Error) -> Self {
        let kind = match e.kind() {
            quietio::ErrorKind::InvalidArgument => ErrorKind::InvalidArgument,
            quietio::ErrorKind::NotSupported => ErrorKind::NotSupported,
            _ => ErrorKind::Io,
        };
        let mut out = Error::new(kind, e.to_string());
        if let Some(p) = e.path() {
            out.file = Some(p.to_path_buf());
        }
        out.offset = e.offset();
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
}
