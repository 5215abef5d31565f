//! quietio's error type: a kind, a message, and the file/offset where known.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A requested setting cannot work as given (bad size, bad combination).
    InvalidArgument,
    /// The kernel or filesystem cannot do the requested access mode.
    NotSupported,
    /// The OS refused an I/O operation.
    Io,
}

pub struct Error {
    kind: ErrorKind,
    message: String,
    path: Option<PathBuf>,
    offset: Option<u64>,
    source: Option<std::io::Error>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            path: None,
            offset: None,
            source: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    pub fn not_supported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotSupported, message)
    }

    /// Wraps an OS error with what was being done when it happened.
    pub fn io(source: std::io::Error, message: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorKind::Io, message);
        e.source = Some(source);
        e
    }

    pub fn with_file(mut self, path: impl AsRef<Path>) -> Self {
        self.path = Some(path.as_ref().to_path_buf());
        self
    }

    pub fn with_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file (or directory) the error concerns, when known.
    pub fn file(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The underlying OS error, if any (e.g. to check for ENOSPC).
    pub fn os_error(&self) -> Option<&std::io::Error> {
        self.source.as_ref()
    }

    /// Whether the file system ran out of space (ENOSPC or EDQUOT).
    pub fn is_no_space(&self) -> bool {
        matches!(
            self.source.as_ref().and_then(std::io::Error::raw_os_error),
            Some(libc::ENOSPC | libc::EDQUOT)
        )
    }

    /// What was being done, without the file, offset or OS error.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Takes the underlying OS error out, so a wrapping error can keep it as
    /// its own source instead of flattening it to text.
    pub fn take_os_error(&mut self) -> Option<std::io::Error> {
        self.source.take()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(p) = &self.path {
            write!(f, " (file {}", p.display())?;
            if let Some(o) = self.offset {
                write!(f, ", offset {o}")?;
            }
            f.write_str(")")?;
        } else if let Some(o) = self.offset {
            write!(f, " (offset {o})")?;
        }
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}
