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

/// Makes `command`'s process run only on `cpus` (its threads inherit it).
/// An empty list leaves it where the scheduler puts it.
pub fn pin_to_cpus(command: &mut Command, cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    // SAFETY: a cpu_set_t is plain data; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu < libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is below CPU_SETSIZE, so the bit is inside the set.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
    }
    // SAFETY: sched_setaffinity(2) is a plain system call, safe between
    // fork and exec; the set was built before the fork and is copied into
    // the closure.
    unsafe {
        command.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes `command`'s process run at niceness `nice` (its threads inherit
/// it): from 19, the lowest priority, which takes a CPU only when nothing
/// of a higher priority wants it, to -20. 0 leaves it as this process is.
pub fn set_nice(command: &mut Command, nice: i32) {
    if nice == 0 {
        return;
    }
    // SAFETY: setpriority(2) is a plain system call, safe between fork and
    // exec; `nice` is copied into the closure.
    unsafe {
        command.pre_exec(move || {
            if libc::setpriority(libc::PRIO_PROCESS, 0, nice) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes `command`'s process run at the idle scheduling policy
/// (`SCHED_IDLE`; its threads inherit it): it has a CPU only when no
/// thread of the normal policy wants one, and gives it up the moment one
/// wakes, where even niceness 19 lets it finish its time slice first.
pub fn set_idle_policy(command: &mut Command) {
    // SAFETY: between fork and exec the child has one thread, which this
    // moves with one plain system call (sched_setscheduler(2)).
    unsafe {
        command.pre_exec(quietio::sys::set_thread_idle_policy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `/bin/sh -c script` prints, started through `own_command` and
    /// then `setup`.
    fn child_says(setup: impl FnOnce(&mut Command), script: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut command = own_command(Path::new("/bin/sh"), &log).unwrap();
        setup(&mut command);
        command.args(["-c", script]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let out = rt.block_on(async { command.output().await }).unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// The CPUs a process pinned to `cpus` may run on, as the kernel
    /// reports them to it.
    fn allowed_cpus(cpus: &[usize]) -> String {
        child_says(
            |c| pin_to_cpus(c, cpus),
            "grep Cpus_allowed_list /proc/self/status",
        )
    }

    /// The niceness of a process started with `nice`: field 19 of its
    /// /proc/self/stat (the command name before it has no spaces here).
    fn niceness(nice: i32) -> i64 {
        child_says(|c| set_nice(c, nice), "cut -d' ' -f19 /proc/self/stat")
            .parse()
            .unwrap()
    }

    #[test]
    fn a_niced_child_runs_at_its_niceness() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let ours: i64 = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(16)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(niceness(0), ours);
        assert_eq!(niceness(19), 19);
    }

    #[test]
    fn an_idle_child_runs_at_the_idle_policy() {
        // Field 41 of /proc/self/stat is the scheduling policy (5: idle).
        let policy = |setup: fn(&mut Command)| {
            child_says(setup, "cut -d' ' -f41 /proc/self/stat")
                .parse::<i64>()
                .unwrap()
        };
        assert_eq!(policy(set_idle_policy), i64::from(libc::SCHED_IDLE));
        assert_eq!(policy(|_| {}), i64::from(libc::SCHED_OTHER));
    }

    #[test]
    fn a_pinned_child_runs_only_on_its_cpus() {
        assert!(
            allowed_cpus(&[0]).ends_with("\t0"),
            "{}",
            allowed_cpus(&[0])
        );
        // Without a list it keeps what this process has.
        let ours = std::fs::read_to_string("/proc/self/status").unwrap();
        let ours = ours
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .unwrap()
            .to_string();
        assert_eq!(allowed_cpus(&[]), ours);
    }
}
