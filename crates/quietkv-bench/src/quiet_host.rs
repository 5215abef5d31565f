//! Waiting for a quiet host before a run (`--wait-quiet`).
//!
//! On a shared virtual machine the host may take this machine's CPUs away
//! in spells (steal) that last minutes; a run that meets one is set aside
//! by the disturbance rule and run again, and run again at once it may
//! meet the same spell. So before a run the bench can check the
//! host first: it keeps every CPU waking up for a few seconds, as a run's
//! readers do, and reads the steal the host showed meanwhile (a CPU with
//! nothing to run shows no steal, however busy the host, so an idle check
//! would see nothing; see [`wake_check`]). At
//! or below the rule's limit the run starts; above it the bench pauses
//! and checks again, until the time allowed is spent, and then starts
//! anyway: the run is still judged by the rule, so waiting can only save
//! reruns, never make a disturbed run count. It helps only where quiet
//! stretches outlast a run: on a host whose steal comes and goes within a
//! minute, a quiet check says little about the next few minutes.

use std::time::{Duration, Instant};

/// How long one check keeps the CPUs waking: long enough to see a spell
/// (they last minutes, with gaps of seconds), short beside a run.
pub const CHECK_SECONDS: f64 = 10.0;

/// The pause between two checks that found the host busy.
pub const PAUSE_SECONDS: f64 = 20.0;

/// What waiting came to before one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waited {
    /// From the first check's start to the last one's end.
    pub seconds: f64,
    pub checks: u32,
    /// The steal of the last check (ms per second, summed over CPUs);
    /// `None` where the machine does not report steal.
    pub last_steal_ms_per_s: Option<f64>,
    /// The last check was at or below the limit (or steal is not
    /// reported: nothing to wait for).
    pub quiet: bool,
}

impl Waited {
    /// `host quiet after 2 checks (41 s; steal 6 ms/s)`.
    pub fn text(&self) -> String {
        let steal = self
            .last_steal_ms_per_s
            .map_or("not reported".to_string(), |s| format!("{s:.0} ms/s"));
        format!(
            "host {} after {} check(s) ({:.0} s; steal {steal})",
            if self.quiet { "quiet" } else { "still busy" },
            self.checks,
            self.seconds
        )
    }
}

/// What the waits of a report section came to, for its header.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QuietWaits {
    pub runs: u32,
    pub seconds: f64,
    /// Runs started after the time allowed was spent, the host still busy.
    pub started_busy: u32,
}

impl QuietWaits {
    pub fn add(&mut self, w: &Waited) {
        self.runs += 1;
        self.seconds += w.seconds;
        self.started_busy += u32::from(!w.quiet);
    }

    /// The header line: what was asked and what it came to.
    pub fn text(&self, max_wait_s: u64) -> String {
        format!(
            "before each run, up to {max_wait_s} s waiting for CPU steal at or below {:.0} ms/s over a {:.0} s check waking every CPU: {} runs waited {:.0} s in all; {} started with the host still busy",
            crate::disturbance::MAX_STEAL_MS_PER_S,
            CHECK_SECONDS,
            self.runs,
            self.seconds,
            self.started_busy
        )
    }
}

/// Checks with `check` until one returns a steal at or below `limit`, a
/// check cannot tell (`None`), `stop` says so (Ctrl-C), or `max_wait`
/// seconds have passed since the first check began, pausing with `pause`
/// between checks. `now` is the clock (seconds).
pub fn wait_until_quiet(
    limit: f64,
    max_wait: f64,
    mut now: impl FnMut() -> f64,
    mut check: impl FnMut() -> Option<f64>,
    mut pause: impl FnMut(),
    mut stop: impl FnMut() -> bool,
) -> Waited {
    let start = now();
    let mut waited = Waited {
        seconds: 0.0,
        checks: 0,
        last_steal_ms_per_s: None,
        quiet: true,
    };
    loop {
        let steal = check();
        waited.checks += 1;
        waited.seconds = now() - start;
        waited.last_steal_ms_per_s = steal;
        waited.quiet = steal.is_none_or(|s| s <= limit);
        if waited.quiet || stop() || waited.seconds >= max_wait {
            return waited;
        }
        pause();
        if stop() || now() - start >= max_wait {
            waited.seconds = now() - start;
            return waited;
        }
    }
}

/// What one check saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    /// Steal over the check, ms per second summed over CPUs.
    pub steal_ms_per_s: f64,
    /// Times the check's threads woke from a sleep.
    pub wakeups: u64,
}

/// How long a check's threads sleep between wake-ups: about a reader's
/// rhythm at 2,000 reads/s over 8 threads, and short enough that each
/// virtual CPU halts and is woken thousands of times a second.
const NAP: Duration = Duration::from_micros(200);

/// Keeps every CPU of the machine waking up, one thread per CPU that
/// sleeps [`NAP`] and wakes again, for `seconds`, and returns the steal
/// the host showed meanwhile; `None` where `/proc/stat` has no steal
/// column. Stops early on Ctrl-C.
///
/// Waking, not spinning: the host counts as steal the time a virtual CPU
/// waits to run once woken, and a run's readers, I/O completions and
/// background threads wake all the time. A spinning CPU never halts and
/// shows only the host's preemptions: on the development VM, alternate
/// 10 s checks read 0-14 ms/s spinning against 10-87 ms/s waking.
pub fn wake_check(seconds: f64) -> Option<Check> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let before = crate::metrics::read_steal_ticks()?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let wakeups = std::thread::scope(|s| {
        let threads: Vec<_> = (0..cpus)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0u64;
                    while Instant::now() < deadline && !crate::process::interrupted() {
                        std::thread::sleep(NAP);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|h| h.join().unwrap_or(0))
            .sum::<u64>()
    });
    let after = crate::metrics::read_steal_ticks()?;
    let elapsed = start.elapsed().as_secs_f64().max(1e-3);
    let ms = after.saturating_sub(before) as f64 * 1000.0 / crate::metrics::clock_ticks_per_sec();
    Some(Check {
        steal_ms_per_s: ms / elapsed,
        wakeups,
    })
}

/// Waits up to `max_wait` seconds for a check of [`CHECK_SECONDS`] to show
/// steal at or below `limit` (ms/s), pausing [`PAUSE_SECONDS`] between
/// checks.
pub fn wait_for_quiet_host(limit: f64, max_wait: f64) -> Waited {
    let start = Instant::now();
    wait_until_quiet(
        limit,
        max_wait,
        || start.elapsed().as_secs_f64(),
        || wake_check(CHECK_SECONDS).map(|c| c.steal_ms_per_s),
        || {
            // In short sleeps, so that Ctrl-C is not kept waiting.
            let until = Instant::now() + Duration::from_secs_f64(PAUSE_SECONDS);
            while Instant::now() < until && !crate::process::interrupted() {
                std::thread::sleep(Duration::from_millis(200));
            }
        },
        crate::process::interrupted,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A fake clock that each check moves 10 s and each pause 20 s.
    fn run(steals: &[Option<f64>], limit: f64, max_wait: f64) -> (Waited, u32) {
        let t = Cell::new(0.0);
        let i = Cell::new(0usize);
        let pauses = Cell::new(0u32);
        let w = wait_until_quiet(
            limit,
            max_wait,
            || t.get(),
            || {
                t.set(t.get() + 10.0);
                let s = steals[i.get().min(steals.len() - 1)];
                i.set(i.get() + 1);
                s
            },
            || {
                pauses.set(pauses.get() + 1);
                t.set(t.get() + 20.0);
            },
            || false,
        );
        (w, pauses.get())
    }

    #[test]
    fn a_quiet_first_check_starts_the_run_at_once() {
        let (w, pauses) = run(&[Some(12.0)], 30.0, 600.0);
        assert!(w.quiet);
        assert_eq!((w.checks, pauses), (1, 0));
        assert_eq!(w.seconds, 10.0);
        assert_eq!(w.last_steal_ms_per_s, Some(12.0));
    }

    #[test]
    fn a_busy_host_is_checked_again_until_quiet() {
        let (w, pauses) = run(&[Some(400.0), Some(31.0), Some(30.0)], 30.0, 600.0);
        assert!(w.quiet, "30 is at the limit, which is quiet");
        assert_eq!((w.checks, pauses), (3, 2));
        assert_eq!(w.seconds, 70.0);
    }

    #[test]
    fn waiting_ends_when_the_time_allowed_is_spent() {
        let (w, pauses) = run(&[Some(400.0)], 30.0, 100.0);
        assert!(!w.quiet);
        // 10 + 20 + 10 + 20 + 10 + 20 = 90, then a check: 100.
        assert_eq!((w.checks, pauses), (4, 3));
        assert_eq!(w.seconds, 100.0);
        let (w, _) = run(&[Some(400.0)], 30.0, 0.0);
        assert_eq!(w.checks, 1, "no time allowed: one check, then go");
    }

    #[test]
    fn a_machine_without_steal_figures_has_nothing_to_wait_for() {
        let (w, pauses) = run(&[None], 30.0, 600.0);
        assert!(w.quiet);
        assert_eq!((w.checks, pauses), (1, 0));
    }

    #[test]
    fn ctrl_c_ends_the_wait() {
        let w = wait_until_quiet(30.0, 600.0, || 0.0, || Some(400.0), || {}, || true);
        assert_eq!(w.checks, 1);
        assert!(!w.quiet);
    }

    /// The real check: it lasts as long as asked, its threads wake over
    /// and over (a check that slept once would wake a few times), and the
    /// steal it reports is a rate within what the CPUs could show.
    #[test]
    fn the_check_wakes_every_cpu_often_and_measures_a_rate() {
        let cpus = std::thread::available_parallelism().unwrap().get() as f64;
        let t = Instant::now();
        let c = wake_check(0.5).expect("Linux reports steal in /proc/stat");
        let wall = t.elapsed().as_secs_f64();
        assert!((0.5..5.0).contains(&wall), "{wall}");
        assert!((0.0..=cpus * 1000.0).contains(&c.steal_ms_per_s), "{c:?}");
        // 2,500 naps a second per thread when the machine is idle; a busy
        // machine wakes them later, but not 25 times later.
        assert!(
            c.wakeups as f64 > 100.0 * wall * cpus,
            "{c:?} over {wall} s"
        );
    }
}
