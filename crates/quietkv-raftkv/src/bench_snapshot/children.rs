//! The processes `bench-snapshot` starts from its own binary: plain nodes
//! (the filler's, the joiner) and the leader process, each with its output
//! read line by line; all stopped when dropped (and by the kernel if this
//! process dies first), and every wait for them cut short by Ctrl-C.

use std::future::Future;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use quietkv_bench::cgroup::interrupted;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::spec::LeaderLine;

/// Waits for `fut` at most `limit`, and not past Ctrl-C.
pub async fn bounded<T>(
    what: &str,
    limit: Duration,
    fut: impl Future<Output = T>,
) -> Result<T, String> {
    let interrupt = async {
        while !interrupted() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::select! {
        r = tokio::time::timeout(limit, fut) => r.map_err(|_| format!("{what}: not done within {limit:?}")),
        () = interrupt => Err(format!("{what}: interrupted")),
    }
}

/// Asks `child` to stop (SIGTERM), and kills it if it has not within
/// `grace`.
async fn stop_child(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) only sends a signal. The pid is our own child's,
        // not yet reaped (we hold its `Child`), so it names no other
        // process.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// A node process (`quietkv-raftkv --id ...`) and the address it serves.
pub struct NodeProcess {
    child: Child,
    pub addr: String,
}

impl NodeProcess {
    /// The node's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Starts a node with `args` (its log in `log`) and waits for its
    /// address.
    pub async fn start(exe: &Path, args: &[String], log: &Path) -> Result<NodeProcess, String> {
        Self::start_on(exe, args, log, &[], 0, false).await
    }

    /// Starts a node with `args` (its log in `log`), on `cpus` only if
    /// any are given, at niceness `nice`, at the idle scheduling policy if
    /// `idle`, and waits for its address.
    pub async fn start_on(
        exe: &Path,
        args: &[String],
        log: &Path,
        cpus: &[usize],
        nice: i32,
        idle: bool,
    ) -> Result<NodeProcess, String> {
        let mut command = crate::child::own_command(exe, log)?;
        crate::child::pin_to_cpus(&mut command, cpus);
        crate::child::set_nice(&mut command, nice);
        if idle {
            crate::child::set_idle_policy(&mut command);
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting a node: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or("the node's stdout was not captured")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = bounded(
            "a node starting",
            Duration::from_secs(120),
            lines.next_line(),
        )
        .await?
        .map_err(|e| format!("reading a node's output: {e}"))?;
        let Some(addr) = first
            .as_deref()
            .and_then(|l| l.strip_prefix("listening on "))
        else {
            return Err(format!("a node did not start: see {}", log.display()));
        };
        let addr = addr.to_string();
        // Keep reading, so the node never writes to a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(NodeProcess { child, addr })
    }

    /// Stops the node: SIGTERM, SIGKILL after 30 s.
    pub async fn stop(mut self) {
        stop_child(&mut self.child, Duration::from_secs(30)).await;
    }
}

/// The leader process (see `leader`): commands in, JSON lines out.
pub struct LeaderProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl LeaderProcess {
    /// Starts the leader process, stopped at reading its spec, on `cpus`
    /// only if any are given.
    pub fn spawn(exe: &Path, log: &Path, cpus: &[usize]) -> Result<LeaderProcess, String> {
        let mut command = crate::child::own_command(exe, log)?;
        crate::child::pin_to_cpus(&mut command, cpus);
        let mut child = command
            .arg(super::spec::LEADER_SUBCOMMAND)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the leader process: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or("the leader's stdout was not captured")?;
        Ok(LeaderProcess {
            stdin: child.stdin.take(),
            child,
            lines: BufReader::new(stdout).lines(),
        })
    }

    /// Its pid, to move it into cgroups.
    pub fn pid(&self) -> Result<u32, String> {
        self.child
            .id()
            .ok_or_else(|| "the leader process has exited".to_string())
    }

    /// Sends one line (the spec, or a command).
    pub async fn send(&mut self, line: &str) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("the leader's stdin is closed")?;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .map_err(|e| format!("writing to the leader process: {e}"))?;
        stdin
            .flush()
            .await
            .map_err(|e| format!("writing to the leader process: {e}"))
    }

    /// The leader's next line, within `limit`; its error line as an error.
    pub async fn next(
        &mut self,
        what: &str,
        limit: Duration,
        log: &Path,
    ) -> Result<LeaderLine, String> {
        let line = bounded(what, limit, self.lines.next_line())
            .await?
            .map_err(|e| format!("{what}: reading the leader's output: {e}"))?
            .ok_or_else(|| format!("{what}: the leader process exited: see {}", log.display()))?;
        match serde_json::from_str(&line) {
            Ok(LeaderLine::Error(e)) => Err(format!("{what}: the leader failed: {e}")),
            Ok(l) => Ok(l),
            Err(e) => Err(format!(
                "{what}: an unreadable line from the leader ({e}): {line}"
            )),
        }
    }

    /// Asks the leader to quit and waits for it; kills it after 30 s.
    pub async fn stop(mut self) {
        let _ = self.send("quit").await;
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            stop_child(&mut self.child, Duration::from_secs(5)).await;
        }
    }
}
