//! The I/O engine of sequential direct files: io_uring, which keeps several
//! requests in flight, or plain blocking system calls. This module decides
//! which one a process gets; `ring` wraps one ring, and `request` says what
//! each request does, so that a ring can do one itself with a blocking call.
//! The write-behind and read-ahead that use rings live in `file`.

mod request;
mod ring;

use std::fmt;
use std::io;
use std::str::FromStr;
use std::sync::OnceLock;

pub(crate) use ring::{release_kept_rings, Ring};

use crate::error::{Error, Result};

/// The engine a user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IoEngine {
    /// io_uring where the kernel allows it, else blocking calls.
    #[default]
    Auto,
    /// io_uring; opening fails where the kernel refuses it.
    Uring,
    /// Blocking `pread`/`pwrite`, one request at a time.
    Sync,
}

impl IoEngine {
    /// The lower-case name `Display` prints and `FromStr` accepts (`auto`,
    /// `uring`, `sync`; `io_uring` is also accepted).
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Auto => "auto",
            IoEngine::Uring => "uring",
            IoEngine::Sync => "sync",
        }
    }
}

impl fmt::Display for IoEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IoEngine {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(IoEngine::Auto),
            "uring" | "io_uring" => Ok(IoEngine::Uring),
            "sync" => Ok(IoEngine::Sync),
            _ => Err(Error::invalid(format!(
                "unknown I/O engine '{s}' (expected auto, uring or sync)"
            ))),
        }
    }
}

/// The engine files really use: never `Auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// io_uring: a direct sequential writer or reader keeps up to
    /// [`IoOptions::io_depth`](crate::IoOptions::io_depth) requests in flight.
    Uring,
    /// Blocking `pread`/`pwrite`, one request at a time.
    Sync,
}

impl Engine {
    /// The lower-case name (`uring` or `sync`), as [`IoEngine::name`]
    /// spells the same engine.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Uring => "uring",
            Engine::Sync => "sync",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A resolved engine plus, when `auto` fell back to blocking calls, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineResolution {
    /// The engine direct sequential files use.
    pub engine: Engine,
    /// Why `auto` fell back to [`Engine::Sync`] (what refused io_uring, as
    /// [`uring_unavailable_reason`] says); `None` otherwise.
    pub fallback: Option<String>,
}

/// Decides the engine from the request and why io_uring cannot be used
/// here (`None` = it can). An explicit `uring` that cannot work is an error
/// that says why and what to set instead.
pub fn resolve_engine(
    requested: IoEngine,
    uring_refused: Option<&str>,
) -> Result<EngineResolution> {
    match (requested, uring_refused) {
        (IoEngine::Sync, _) => Ok(EngineResolution {
            engine: Engine::Sync,
            fallback: None,
        }),
        (IoEngine::Auto | IoEngine::Uring, None) => Ok(EngineResolution {
            engine: Engine::Uring,
            fallback: None,
        }),
        (IoEngine::Auto, Some(why)) => Ok(EngineResolution {
            engine: Engine::Sync,
            fallback: Some(format!(
                "io_uring unavailable ({why}); using blocking I/O, one request at a time"
            )),
        }),
        (IoEngine::Uring, Some(why)) => Err(Error::not_supported(format!(
            "io_engine uring was requested but io_uring cannot be used here: {why}; set io_engine to auto or sync"
        ))),
    }
}

/// Why this process cannot use io_uring, or `None` when it can. Tried once
/// per process: a ring is set up and a no-op goes through it, since a
/// seccomp filter may allow the setup and refuse the submission.
pub fn uring_unavailable_reason() -> Option<&'static str> {
    static REASON: OnceLock<Option<String>> = OnceLock::new();
    REASON
        .get_or_init(|| {
            let why = try_uring().err();
            if let Some(w) = &why {
                log::info!("quietio: io_uring unavailable: {w}");
            }
            why
        })
        .as_deref()
}

fn try_uring() -> std::result::Result<(), String> {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    if disabled == Some(2) {
        return Err("kernel.io_uring_disabled = 2".into());
    }
    let explain = |e: io::Error| refusal_reason(&e, disabled);
    let mut ring = Ring::new(2).map_err(explain)?;
    ring.start_nop(7).map_err(explain)?;
    match ring.next_completion() {
        Ok((7, res)) if res >= 0 => Ok(()),
        Ok((_, res)) => Err(explain(io::Error::from_raw_os_error(-res))),
        Err(e) => Err(explain(e)),
    }
}

/// Says why setting up or using a ring failed with `e`, given the value of
/// `kernel.io_uring_disabled` (if readable).
fn refusal_reason(e: &io::Error, disabled: Option<u32>) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no io_uring (ENOSYS)".into(),
        Some(code @ (libc::EPERM | libc::EACCES)) => format!(
            "the kernel refused it ({}){}",
            if code == libc::EPERM {
                "EPERM"
            } else {
                "EACCES"
            },
            match disabled {
                Some(n) if n > 0 => format!(": kernel.io_uring_disabled = {n}"),
                _ => ": a seccomp filter or security module".into(),
            }
        ),
        Some(libc::ENOMEM) => "no memory for a ring (ENOMEM: memlock limit?)".into(),
        _ => format!("setting up a ring failed ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_falls_back_and_explicit_uring_says_why() {
        let r = resolve_engine(IoEngine::Auto, None).unwrap();
        assert_eq!(r.engine, Engine::Uring);
        assert!(r.fallback.is_none());
        let r =
            resolve_engine(IoEngine::Auto, Some("EPERM: kernel.io_uring_disabled = 1")).unwrap();
        assert_eq!(r.engine, Engine::Sync);
        assert!(r.fallback.unwrap().contains("io_uring_disabled"));
        let e = resolve_engine(IoEngine::Uring, Some("ENOSYS")).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::NotSupported);
        assert!(e.to_string().contains("ENOSYS") && e.to_string().contains("sync"));
        let r = resolve_engine(IoEngine::Sync, None).unwrap();
        assert_eq!(r.engine, Engine::Sync);
        assert!(r.fallback.is_none());
    }

    #[test]
    fn refusals_name_their_cause() {
        let err = |n| io::Error::from_raw_os_error(n);
        assert!(refusal_reason(&err(libc::ENOSYS), None).contains("ENOSYS"));
        let r = refusal_reason(&err(libc::EPERM), Some(1));
        assert!(
            r.contains("EPERM") && r.contains("io_uring_disabled = 1"),
            "{r}"
        );
        let r = refusal_reason(&err(libc::EPERM), Some(0));
        assert!(r.contains("seccomp"), "{r}");
        assert!(refusal_reason(&err(libc::EACCES), None).contains("EACCES"));
        assert!(refusal_reason(&err(libc::ENOMEM), None).contains("memlock"));
        assert!(refusal_reason(&err(libc::EINVAL), None).contains("setting up"));
    }

    #[test]
    fn parse_engines() {
        assert_eq!("URING".parse::<IoEngine>().unwrap(), IoEngine::Uring);
        assert_eq!("sync".parse::<IoEngine>().unwrap(), IoEngine::Sync);
        assert_eq!("auto".parse::<IoEngine>().unwrap(), IoEngine::Auto);
        assert!("aio".parse::<IoEngine>().is_err());
    }
}
