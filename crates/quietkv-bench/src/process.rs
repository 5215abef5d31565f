//! System calls about the bench's own process: the interrupt flag that
//! lets a run clean up on Ctrl-C, the timer slack of reader threads, the
//! process's CPU time and clock tick, and its resident memory. Only the benchmark needs them,
//! so they live here rather than in quietio.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn note_interrupt(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM set a flag ([`interrupted`]) instead of killing
/// the process, so a long run can clean up before it exits.
pub fn catch_interrupts() {
    let handler = note_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: `note_interrupt` is an `extern "C" fn(c_int)` that only
    // stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Whether SIGINT or SIGTERM arrived since [`catch_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`): how late
/// the kernel may wake its sleeps, 50 us by default.
pub fn set_timer_slack(nanos: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and no pointers.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, nanos as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// User and system CPU time this process has used so far, in seconds.
pub fn process_cpu_seconds() -> (f64, f64) {
    // SAFETY: rusage is a plain C struct of integers; all zeros is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, exclusively borrowed rusage to fill; with
    // RUSAGE_SELF and a valid pointer getrusage cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

/// Clock ticks per second (the unit of `/proc/*/stat` CPU times), if the
/// system says.
pub fn clock_ticks_per_sec() -> Option<u64> {
    // SAFETY: sysconf only reads its integer argument.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|&t| t > 0)
}

/// A field of `/proc/self/status` (`"RssAnon:"`, `"VmHWM:"`) in bytes.
pub fn status_bytes(name: &str) -> Option<u64> {
    status_kib(&std::fs::read_to_string("/proc/self/status").ok()?, name)
}

/// The field `name` (`VmHWM:`) of a `/proc/PID/status` text, in bytes.
pub fn status_kib(text: &str, name: &str) -> Option<u64> {
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_helpers() {
        let (u0, _) = process_cpu_seconds();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (u1, s1) = process_cpu_seconds();
        assert!(u1 + s1 > u0, "{u0} -> {u1} + {s1}");
        assert!(clock_ticks_per_sec().is_some_and(|t| t >= 100));
        set_timer_slack(1).unwrap();
        assert!(!interrupted());
    }
}
