//! The run-and-repeat loop every experiment runs its modes in: each mode
//! `--repeats` times, interleaved (A B C, then B C A, ...), the order
//! rotated each round so that every mode runs in every slot; Ctrl-C ends
//! the campaign between runs; the time and runs left are kept for the
//! progress lines; and a run the machine disturbed can be set aside and
//! its slot run again ([`Judge`]).
//!
//! An experiment hands [`run`] what one run is (copy a source, start the
//! worker, print what it measured ...) as a closure, which files its result
//! and says whether it counted. The experiments that run in a worker
//! process start it through [`in_worker`], which keeps the terminal's
//! status line and reports an interruption as such.

use crate::cgroup::interrupted;
use crate::disturbance::{AfterRun, Rule};
use crate::progress::fmt_secs;
use crate::report::{FailedRun, ModeReport};
use crate::result::{RunResult, WorkerSpec};
use crate::runner::{RunError, Runner};

/// What a campaign cut short by Ctrl-C (or SIGTERM) returns.
pub const INTERRUPTED: &str = "interrupted; cgroups and scratch files removed";

/// The order of the modes in round `repeat` (1-based): rotated by one each
/// round, so that over as many rounds as modes every mode runs once in
/// every slot. A fixed order let the slot bias the comparison: on the
/// development machine's host-cached disk, the same mode compacted ~10%
/// faster or slower depending on which mode ran before it.
pub fn round_order(modes: usize, repeat: u32) -> impl Iterator<Item = usize> {
    let shift = (repeat as usize).saturating_sub(1);
    (0..modes).map(move |i| (i + shift) % modes)
}

/// One run's place in a campaign: which mode, in which round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Index into the experiment's modes.
    pub mode: usize,
    /// 1-based.
    pub repeat: u32,
    pub repeats: u32,
}

impl Slot {
    /// `[E1 auto 2/3]`: how this run's progress lines start.
    pub fn tag(&self, section: &str, name: &str) -> String {
        format!("[{section} {name} {}/{}]", self.repeat, self.repeats)
    }
}

/// The seconds and the counted runs left in the whole benchmark, for the
/// progress lines' estimate. Runs run again after a disturbance use up
/// time but not runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Eta {
    pub seconds: f64,
    pub runs: u32,
}

impl Eta {
    /// `ETA 12 min for 6 runs left`.
    pub fn text(&self) -> String {
        format!("ETA {} for {} runs left", fmt_secs(self.seconds), self.runs)
    }
}

/// What became of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filed {
    /// It counts (among the clean runs, or kept as asked).
    Counted,
    /// It was set aside: run its slot again.
    RunAgain,
}

/// Runs `modes` modes `repeats` times each, in [`round_order`]: `one`
/// performs the run of a slot and files it, and a slot whose run was
/// [`Filed::RunAgain`] is run again at once. Before every run, Ctrl-C
/// ends the campaign with [`INTERRUPTED`]; after it, `per_run_s` comes
/// off `eta`'s seconds and a counted run off its runs.
pub fn run(
    modes: usize,
    repeats: u32,
    per_run_s: f64,
    eta: &mut Eta,
    mut one: impl FnMut(Slot, &Eta) -> Result<Filed, String>,
) -> Result<(), String> {
    for repeat in 1..=repeats {
        for mode in round_order(modes, repeat) {
            let slot = Slot {
                mode,
                repeat,
                repeats,
            };
            loop {
                if interrupted() {
                    return Err(INTERRUPTED.into());
                }
                let filed = one(slot, eta)?;
                eta.seconds = (eta.seconds - per_run_s).max(0.0);
                if filed == Filed::Counted {
                    eta.runs = eta.runs.saturating_sub(1);
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Runs `spec` in a worker process of `runner`, with `status` and the
/// estimate on the terminal's status line while it runs; an error caused
/// by Ctrl-C says so.
pub fn in_worker(
    runner: &mut Runner,
    spec: WorkerSpec,
    status: String,
    eta: &Eta,
) -> Result<RunResult, RunError> {
    in_worker_as(runner, spec, status, eta)
}

/// [`in_worker`] for an experiment whose worker returns `T`.
pub fn in_worker_as<T: serde::de::DeserializeOwned>(
    runner: &mut Runner,
    spec: WorkerSpec,
    status: String,
    eta: &Eta,
) -> Result<T, RunError> {
    crate::progress::start_run(status, eta.seconds);
    runner.run_as(spec).map_err(|e| {
        if interrupted() {
            RunError::Other(INTERRUPTED.to_string())
        } else {
            e
        }
    })
}

/// How a campaign of worker runs treats the runs the machine disturbed.
#[derive(Debug, Clone, PartialEq)]
pub enum Judge {
    /// Every run counts: the experiments that never applied the rule
    /// (E0, E5) keep their figures comparable with earlier reports.
    KeepEvery,
    /// The disturbance rule (see [`crate::disturbance`]): a disturbed run
    /// is set aside and its slot run again while the section has reruns
    /// left, or kept as asked (`--keep-disturbed`).
    Rule { rule: Rule, reruns_left: u32 },
}

impl Judge {
    /// The rule with `--max-reruns` reruns for a section.
    pub fn rule(keep_disturbed: bool, max_reruns: u32) -> Judge {
        Judge::Rule {
            rule: Rule {
                keep_disturbed,
                ..Default::default()
            },
            reruns_left: max_reruns,
        }
    }

    /// Files what became of run `repeat` of the mode `mode`: a result as
    /// [`Judge::file`] does; a worker the OOM killer ended as a failed run
    /// of that mode, which counts as its run (running it again would only
    /// outgrow the same limit) and leaves it short of clean runs, so that
    /// the other modes are still measured; any other error ends the
    /// campaign.
    pub fn file_outcome(
        &mut self,
        mode: &mut ModeReport,
        outcome: Result<RunResult, RunError>,
        repeat: u32,
        tag: &str,
    ) -> Result<Filed, String> {
        match outcome {
            Ok(run) => Ok(self.file(mode, run, tag)),
            Err(RunError::OutOfMemory(why)) => {
                crate::progress_line!(
                    "{tag} failed: {why}; recorded as a failed run of this mode, the other modes go on"
                );
                mode.failed.push(FailedRun { repeat, why });
                Ok(Filed::Counted)
            }
            Err(RunError::Other(e)) => Err(e),
        }
    }

    /// Files `run` of the mode `mode` (tagged `tag` in progress lines) and
    /// says whether it counted; a disturbed run's reasons are printed.
    pub fn file(&mut self, mode: &mut ModeReport, run: RunResult, tag: &str) -> Filed {
        let (rule, reruns_left) = match self {
            Judge::KeepEvery => {
                mode.runs.push(run);
                return Filed::Counted;
            }
            Judge::Rule { rule, reruns_left } => (rule, reruns_left),
        };
        match rule.file(mode, run, reruns_left) {
            AfterRun::Keep => Filed::Counted,
            AfterRun::Rerun { reasons } => {
                crate::progress_line!(
                    "{tag} disturbed, left out of the medians: {}; running it again ({reruns_left} rerun(s) left in this section)",
                    reasons.join("; ")
                );
                Filed::RunAgain
            }
            AfterRun::Kept { reasons } => {
                crate::progress_line!(
                    "{tag} disturbed, kept (--keep-disturbed): {}",
                    reasons.join("; ")
                );
                Filed::Counted
            }
            AfterRun::GiveUp { reasons } => {
                crate::progress_line!(
                    "{tag} disturbed, left out of the medians: {}; no reruns left (--max-reruns)",
                    reasons.join("; ")
                );
                Filed::Counted
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_runs_in_every_slot_over_as_many_rounds() {
        let rounds: Vec<Vec<usize>> = (1..=3)
            .map(|r| super::round_order(3, r).collect())
            .collect();
        assert_eq!(rounds, vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1]]);
        for slot in 0..3 {
            let mut in_slot: Vec<usize> = rounds.iter().map(|r| r[slot]).collect();
            in_slot.sort_unstable();
            assert_eq!(in_slot, vec![0, 1, 2]);
        }
        assert_eq!(super::round_order(1, 5).collect::<Vec<_>>(), vec![0]);
    }

    /// A slot set aside is run again at once; the estimate loses a run's
    /// time for every run, and a run only for the ones that counted.
    #[test]
    fn a_run_set_aside_is_run_again_in_its_slot() {
        let mut eta = Eta {
            seconds: 100.0,
            runs: 4,
        };
        let mut seen = Vec::new();
        let mut again = true;
        run(2, 2, 10.0, &mut eta, |slot, eta| {
            seen.push((slot.mode, slot.repeat, eta.runs));
            if slot
                == (Slot {
                    mode: 1,
                    repeat: 1,
                    repeats: 2,
                })
                && again
            {
                again = false;
                return Ok(Filed::RunAgain);
            }
            Ok(Filed::Counted)
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![(0, 1, 4), (1, 1, 3), (1, 1, 3), (1, 2, 2), (0, 2, 1)]
        );
        assert_eq!(
            eta,
            Eta {
                seconds: 50.0,
                runs: 0
            }
        );
        let tag = Slot {
            mode: 0,
            repeat: 2,
            repeats: 3,
        }
        .tag("E1", "auto");
        assert_eq!(tag, "[E1 auto 2/3]");
        assert_eq!(
            Eta {
                seconds: 720.0,
                runs: 6
            }
            .text(),
            "ETA 12 min for 6 runs left"
        );
    }

    /// A worker the OOM killer ended is the mode's failed run: it counts
    /// as the slot's run, is not run again, and leaves the mode short of
    /// clean runs; any other failure still ends the campaign.
    #[test]
    fn a_run_the_oom_killer_ended_is_a_failed_run_of_its_mode() {
        let mut m = ModeReport::new("rocksdb:all-direct", None, 3);
        let mut judge = Judge::rule(false, 2);
        let filed = judge
            .file_outcome(
                &mut m,
                Err(RunError::OutOfMemory("killed".into())),
                2,
                "[E2 rocksdb:all-direct 2/3]",
            )
            .unwrap();
        assert_eq!(filed, Filed::Counted);
        assert_eq!(
            m.failed,
            vec![FailedRun {
                repeat: 2,
                why: "killed".into()
            }]
        );
        assert_eq!((m.runs.len(), m.disturbed.len()), (0, 0));
        assert_eq!(judge, Judge::rule(false, 2), "no rerun used up");
        let other = judge.file_outcome(&mut m, Err(RunError::Other("broken".into())), 3, "");
        assert_eq!(other, Err("broken".to_string()));
        assert_eq!(m.failed.len(), 1);
    }

    #[test]
    fn keeping_every_run_files_it_among_the_runs() {
        let mut m = ModeReport::new("buffered", None, 0);
        let filed = Judge::KeepEvery.file(&mut m, RunResult::default(), "[E0 buffered 1/1]");
        assert_eq!(filed, Filed::Counted);
        assert_eq!((m.runs.len(), m.disturbed.len()), (1, 0));
    }
}
