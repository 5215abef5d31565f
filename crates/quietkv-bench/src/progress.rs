//! Progress on the terminal: on a TTY, one status line (experiment, mode,
//! repeat, time in this run, ETA of the whole benchmark) redrawn in place
//! while a worker runs; log lines clear it first. Off a terminal only the
//! plain log lines are printed.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

struct Run {
    label: String,
    started: Instant,
    /// Seconds of the whole benchmark left when this run started.
    eta_at_start: f64,
    last_draw: Option<Instant>,
}

static CURRENT: Mutex<Option<Run>> = Mutex::new(None);

fn tty() -> bool {
    std::io::stderr().is_terminal()
}

/// A persistent log line (parent or worker process).
pub fn line(msg: &str) {
    let mut err = std::io::stderr().lock();
    if tty() {
        // Clear a status line that may be on screen.
        let _ = write!(err, "\r\x1b[K");
    }
    let _ = writeln!(err, "{msg}");
}

/// The parent starts a run: the status line shows `label` from now on.
pub fn start_run(label: String, eta_secs: f64) {
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Run {
        label,
        started: Instant::now(),
        eta_at_start: eta_secs,
        last_draw: None,
    });
}

/// Redraws the status line (at most once a second); no-op off a terminal.
pub fn tick() {
    if !tty() {
        return;
    }
    let mut cur = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    let Some(run) = cur.as_mut() else { return };
    if run
        .last_draw
        .is_some_and(|t| t.elapsed().as_millis() < 1000)
    {
        return;
    }
    run.last_draw = Some(Instant::now());
    let elapsed = run.started.elapsed().as_secs_f64();
    let left = (run.eta_at_start - elapsed).max(0.0);
    let bar_width = 20usize;
    let frac = if run.eta_at_start > 0.0 {
        (elapsed / run.eta_at_start).min(1.0)
    } else {
        1.0
    };
    let filled = (frac * bar_width as f64) as usize;
    let bar: String = "#".repeat(filled) + &"-".repeat(bar_width - filled);
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r\x1b[K{} [{bar}] {:.0} s in this run, about {} left",
        run.label,
        elapsed,
        fmt_secs(left)
    );
    let _ = err.flush();
}

/// A duration for an ETA: seconds below two minutes, else minutes.
pub fn fmt_secs(s: f64) -> String {
    if s >= 120.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

/// The run ended: remove the status line.
pub fn end_run() {
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
    if tty() {
        let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
    }
}

/// `eprintln!` that first clears the status line on a terminal.
#[macro_export]
macro_rules! progress_line {
    ($($arg:tt)*) => {
        $crate::progress::line(&format!($($arg)*))
    };
}
