//! Which operation fails, and how: the operation kinds the layer counts,
//! the faults it can inject, and the counters that let a test first count
//! a workload's operations and then fail each one in turn.

use std::fmt;
use std::io;

/// A kind of file-system operation the layer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Creating (or opening for writing) a file.
    Create,
    /// Opening a file for reading.
    Open,
    /// One write system call or io_uring write.
    Write,
    /// `fdatasync` of a file.
    Sync,
    /// `fsync` of the directory.
    DirSync,
    /// Renaming a file ([`IoEnv::rename`](crate::IoEnv::rename)).
    Rename,
    /// Removing a file ([`IoEnv::remove_file`](crate::IoEnv::remove_file)).
    Remove,
    /// `ftruncate`.
    Truncate,
    /// `fallocate`: a table writer with io_uring write-behind allocating
    /// its file ahead of the writes.
    Fallocate,
}

impl OpKind {
    /// Every kind, in the order the counters keep them.
    pub const ALL: [OpKind; 9] = [
        OpKind::Create,
        OpKind::Open,
        OpKind::Write,
        OpKind::Sync,
        OpKind::DirSync,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::Truncate,
        OpKind::Fallocate,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The lower-case name used in messages and by `Display` (`create`,
    /// `open`, `write`, `sync`, `dir-sync`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Create => "create",
            OpKind::Open => "open",
            OpKind::Write => "write",
            OpKind::Sync => "sync",
            OpKind::DirSync => "dir-sync",
            OpKind::Rename => "rename",
            OpKind::Remove => "remove",
            OpKind::Truncate => "truncate",
            OpKind::Fallocate => "fallocate",
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an injected fault looks like to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The operation fails with EIO and does nothing.
    Eio,
    /// The operation fails with ENOSPC and does nothing.
    Enospc,
    /// The operation fails with EACCES (permission denied) and does
    /// nothing: a file the process may not open, which is not damage.
    Eacces,
    /// Writes only: the write transfers part of its bytes (half, rounded
    /// down to 512 bytes, at least one sector when it is longer than one)
    /// and the next write fails with ENOSPC, which is how a file system
    /// that fills up mid-write behaves. Other kinds treat it as ENOSPC.
    ShortWrite,
}

impl Fault {
    /// The name used in messages: `EIO`, `ENOSPC` or `short write`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Eio => "EIO",
            Fault::Enospc => "ENOSPC",
            Fault::Eacces => "EACCES",
            Fault::ShortWrite => "short write",
        }
    }

    pub(crate) fn errno(self) -> i32 {
        match self {
            Fault::Eio => libc::EIO,
            Fault::Enospc | Fault::ShortWrite => libc::ENOSPC,
            Fault::Eacces => libc::EACCES,
        }
    }

    pub(crate) fn error(self) -> io::Error {
        io::Error::from_raw_os_error(self.errno())
    }
}

/// Fail the operation of `kind` whose 0-based index (among the operations
/// of that kind the layer has seen since the plan was set) is `index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    /// The kind of operation to fail.
    pub kind: OpKind,
    /// Which one: the 0-based index among the operations of `kind` since
    /// the plan was set ([`OpCounts`] tells how many a workload makes).
    pub index: u64,
    /// How it fails.
    pub fault: Fault,
}

/// Operations seen, per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCounts([u64; 9]);

impl OpCounts {
    /// Operations of `kind` seen.
    pub fn get(&self, kind: OpKind) -> u64 {
        self.0[kind.index()]
    }

    fn bump(&mut self, kind: OpKind) -> u64 {
        let n = self.0[kind.index()];
        self.0[kind.index()] += 1;
        n
    }
}

/// A fault that was injected: what, where, and into which file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// The plan that fired: the operation kind, its index and the fault.
    pub plan: FaultPlan,
    /// The file's name (relative to the layer's directory).
    pub name: String,
}

/// What a write may do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WriteVerdict {
    Full,
    /// Transfer only this many bytes.
    Short(usize),
    /// Fail with this errno.
    Fail(i32),
}

/// The counters and the armed plan.
#[derive(Debug, Default)]
pub(crate) struct Injector {
    plan: Option<FaultPlan>,
    counts: OpCounts,
    fired: Vec<Fired>,
    /// A short write happened: the next write finds the disk full.
    disk_full_next_write: bool,
}

impl Injector {
    pub(crate) fn set_plan(&mut self, plan: Option<FaultPlan>) {
        self.plan = plan;
        self.counts = OpCounts::default();
        self.fired.clear();
        self.disk_full_next_write = false;
    }

    pub(crate) fn counts(&self) -> OpCounts {
        self.counts
    }

    pub(crate) fn fired(&self) -> &[Fired] {
        &self.fired
    }

    /// Counts one operation; `Some(fault)` when the plan fails it.
    fn count(&mut self, kind: OpKind, name: &str) -> Option<Fault> {
        let n = self.counts.bump(kind);
        let plan = self.plan?;
        if plan.kind != kind || plan.index != n {
            return None;
        }
        self.fired.push(Fired {
            plan,
            name: name.to_string(),
        });
        Some(plan.fault)
    }

    /// Any operation but a write.
    pub(crate) fn admit(&mut self, kind: OpKind, name: &str) -> io::Result<()> {
        debug_assert_ne!(kind, OpKind::Write);
        match self.count(kind, name) {
            None => Ok(()),
            Some(f) => Err(f.error()),
        }
    }

    /// A write of `len` bytes.
    pub(crate) fn admit_write(&mut self, name: &str, len: usize) -> WriteVerdict {
        let fault = self.count(OpKind::Write, name);
        if std::mem::take(&mut self.disk_full_next_write) {
            return WriteVerdict::Fail(libc::ENOSPC);
        }
        match fault {
            None => WriteVerdict::Full,
            Some(Fault::ShortWrite) if len > 1 => {
                self.disk_full_next_write = true;
                let half = len / 2;
                let short = if half >= 512 { half / 512 * 512 } else { half };
                WriteVerdict::Short(short.max(1))
            }
            Some(f) => WriteVerdict::Fail(f.errno()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_kind_and_fails_only_the_planned_index() {
        let mut inj = Injector::default();
        for _ in 0..3 {
            inj.admit(OpKind::Sync, "a").unwrap();
        }
        assert_eq!(inj.admit_write("a", 10), WriteVerdict::Full);
        assert_eq!(inj.counts().get(OpKind::Sync), 3);
        assert_eq!(inj.counts().get(OpKind::Write), 1);
        assert_eq!(inj.counts().get(OpKind::Rename), 0);

        inj.set_plan(Some(FaultPlan {
            kind: OpKind::Sync,
            index: 1,
            fault: Fault::Eio,
        }));
        assert_eq!(
            inj.counts().get(OpKind::Sync),
            0,
            "a new plan counts afresh"
        );
        inj.admit(OpKind::Sync, "a").unwrap();
        inj.admit(OpKind::DirSync, "").unwrap();
        let e = inj.admit(OpKind::Sync, "b").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        inj.admit(OpKind::Sync, "c").unwrap();
        assert_eq!(inj.fired().len(), 1);
        assert_eq!(inj.fired()[0].name, "b");
    }

    #[test]
    fn a_short_write_is_followed_by_a_full_disk() {
        let mut inj = Injector::default();
        inj.set_plan(Some(FaultPlan {
            kind: OpKind::Write,
            index: 0,
            fault: Fault::ShortWrite,
        }));
        assert_eq!(inj.admit_write("w", 4096), WriteVerdict::Short(2048));
        assert_eq!(inj.admit_write("w", 2048), WriteVerdict::Fail(libc::ENOSPC));
        assert_eq!(inj.admit_write("w", 2048), WriteVerdict::Full);
        // Odd small lengths still move at least one byte and not all.
        inj.set_plan(Some(FaultPlan {
            kind: OpKind::Write,
            index: 0,
            fault: Fault::ShortWrite,
        }));
        assert_eq!(inj.admit_write("w", 700), WriteVerdict::Short(350));
    }

    #[test]
    fn enospc_and_eio_fail_writes_outright() {
        for (fault, errno) in [(Fault::Eio, libc::EIO), (Fault::Enospc, libc::ENOSPC)] {
            let mut inj = Injector::default();
            inj.set_plan(Some(FaultPlan {
                kind: OpKind::Write,
                index: 2,
                fault,
            }));
            assert_eq!(inj.admit_write("w", 1), WriteVerdict::Full);
            assert_eq!(inj.admit_write("w", 1), WriteVerdict::Full);
            assert_eq!(inj.admit_write("w", 1), WriteVerdict::Fail(errno));
        }
    }
}
