//! Starting this binary again as a child process (a node of the cluster
//! command, or the leader and joiner of bench-snapshot): its stderr
//! appended to a log file, its stdout piped for the lines it announces
//! itself with, and never outliving the process that started it.

use std::path::Path;
use std::process::Stdio;

use tokio::process::Command;

/// A command running `exe`, stderr appended to `log`, stdout piped, killed
/// when dropped and sent SIGTERM when the thread that spawned it ends.
pub fn own_command(exe: &Path, log: &Path) -> Result<Command, String> {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let mut command = Command::new(exe);
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: prctl(2) is one, and
    // nothing here allocates or takes a lock.
    unsafe {
        command.pre_exec(|| {
            // SIGTERM when the thread that spawned it ends (the runtime's
            // thread driving `block_on`): no child outlives its starter,
            // even one killed with SIGKILL.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
        .stdout(Stdio::piped())
        .stderr(log_file)
        .kill_on_drop(true);
    Ok(command)
}
