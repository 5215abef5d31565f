//! Running this test binary again as a child process to kill: a crash
//! test's child is an ignored test of the same binary, which reports its
//! progress to the parent on its standard output, one line at a time.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;

/// A command that runs only the ignored test `entry` of this test binary,
/// with its standard output piped (the child's reports) and its standard
/// error discarded. The caller adds the environment the child reads.
pub fn entry_command(entry: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        entry,
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    cmd
}

/// Sends each line of `child`'s standard output to the returned channel as
/// it comes, from the returned thread, which ends when the child's output
/// does (once the child is killed and reaped).
#[allow(dead_code)]
pub fn stdout_lines(child: &mut Child) -> (Receiver<String>, JoinHandle<()>) {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    (rx, reader)
}
