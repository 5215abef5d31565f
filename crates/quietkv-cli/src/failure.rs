//! How a command fails: the exit code (1 for a user's mistake or an I/O
//! error, 2 for corruption found on disk) and the one-line message printed
//! as `quietkv: ...`.

use std::io;

use quietkv::ErrorKind;

/// A failure: exit code and a one-line message.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn user(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
}

impl From<quietkv::Error> for Failure {
    fn from(e: quietkv::Error) -> Self {
        let code = if e.kind() == ErrorKind::Corruption {
            2
        } else {
            1
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            // `quietkv scan | head`: the reader left; not an error.
            return Failure {
                code: 0,
                message: String::new(),
            };
        }
        Failure::user(format!("cannot write output: {e}"))
    }
}
