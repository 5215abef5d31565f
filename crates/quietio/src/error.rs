//! quietio's error type: a kind, a message, and the file/offset where known.

use std::fmt;
use std::path::{Path, PathBuf};

/// What kind of failure an [`Error`] is: a setting to change
/// ([`InvalidArgument`](Self::InvalidArgument),
/// [`NotSupported`](Self::NotSupported)) or an operation the OS refused
/// ([`Io`](Self::Io), whose OS error [`Error::os_error`] returns).
///
/// More kinds may be added: match with a wildcard arm.
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

/// A quietio failure: its [`ErrorKind`], what was being done (the
/// message), and, where known, the file, the byte offset in it and the OS
/// error behind it.
///
/// `Display` prints `message (file F, offset O): OS error`, each part only
/// when present; [`source`](std::error::Error::source) is the OS error, so
/// a wrapping error can keep the chain instead of flattening it to text.
pub struct Error {
    kind: ErrorKind,
    message: String,
    path: Option<PathBuf>,
    offset: Option<u64>,
    source: Option<std::io::Error>,
}

/// `Result` with quietio's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` saying `message` (what was being done, or what is
    /// wrong), with no file, offset or OS error yet: add them with
    /// [`with_file`](Self::with_file) and [`with_offset`](Self::with_offset).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            path: None,
            offset: None,
            source: None,
        }
    }

    /// An [`ErrorKind::InvalidArgument`] error: a setting or argument that
    /// cannot work as given (a buffer size that is not a multiple of the
    /// alignment, mmap for a class that writes, a depth out of range).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// An [`ErrorKind::NotSupported`] error: the kernel or file system under
    /// the directory cannot do what was explicitly asked for. The message
    /// should say why and which setting would work instead.
    pub fn not_supported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotSupported, message)
    }

    /// Wraps an OS error with what was being done when it happened.
    pub fn io(source: std::io::Error, message: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorKind::Io, message);
        e.source = Some(source);
        e
    }

    /// Records the file (or directory) the error concerns, replacing any
    /// recorded before.
    pub fn with_file(mut self, path: impl AsRef<Path>) -> Self {
        self.path = Some(path.as_ref().to_path_buf());
        self
    }

    /// Records the byte offset in the file at which the failing operation
    /// started, replacing any recorded before.
    pub fn with_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    /// The kind of failure. For the OS error behind an [`ErrorKind::Io`]
    /// error see [`os_error`](Self::os_error) and
    /// [`is_no_space`](Self::is_no_space).
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file (or directory) the error concerns, when known.
    pub fn file(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The byte offset in [`file`](Self::file) at which the failing
    /// operation started, when known.
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
