//! A closed window in flight through the engine, materialised once and shared by every member
//! and the beat counter's stage (ids, not data), with its accumulator: member results and the
//! counter's reading arrive in any order and the window commits when all are in, or at its
//! deadline with what it has (`partial`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Shared;
use super::counter::BEATS_NAME;
use crate::core::score::{MemberScore, ScoreRecord, ScoreStatus};
use crate::core::window::ClosedWindow;
use crate::signal::beats::RunEvidence;

/// One member's outcome for one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MemberResult {
    /// Probability; `None` when the model failed or returned a non-finite value.
    pub(crate) prob: Option<f32>,
    pub(crate) version: u32,
    pub(crate) queue: Duration,
    pub(crate) compute: Duration,
    pub(crate) batch: usize,
    /// Why `prob` is `None`, when the model ran and failed.
    pub(crate) fault: Option<ModelFault>,
}

/// How a model failed on a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModelFault {
    /// It panicked (caught; the worker carries on).
    Panic,
    /// It returned an error.
    Error,
    /// It returned a different number of outputs than windows.
    WrongOutputs,
    /// It returned NaN or an infinity for this window.
    NonFinite,
}

impl ModelFault {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ModelFault::Panic => "panic",
            ModelFault::Error => "error",
            ModelFault::WrongOutputs => "wrong_outputs",
            ModelFault::NonFinite => "non_finite",
        }
    }
}

/// Where each member stands for a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Slot {
    /// The member's input is not usable in this window: it sits out.
    NotApplicable,
    Waiting,
    /// Its queue was full: it never ran.
    Dropped,
    Done(MemberResult),
}

/// What the counter read of one window (on its stage, [`beats`](super::beats)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reading {
    /// `None` when the reading panicked (the window is then scored without the counter).
    pub(crate) evidence: Option<RunEvidence>,
    /// Submission to the start of the reading.
    pub(crate) queue: Duration,
    pub(crate) compute: Duration,
}

/// Where the beat counter stands for a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BeatSlot {
    /// No counter serves, or no member applies (the counter raises scores, it makes none).
    Off,
    Waiting,
    /// Its queue was full: it never read the window.
    Dropped,
    Done(Reading),
}

#[derive(Debug)]
struct State {
    slots: Vec<Slot>,
    beats: BeatSlot,
    done: bool,
    /// The deadline passed with no member result yet: the first one commits.
    overdue: bool,
}

impl State {
    /// Whether a member or the counter has yet to answer.
    fn waiting(&self) -> bool {
        self.beats == BeatSlot::Waiting || self.slots.iter().any(|x| matches!(x, Slot::Waiting))
    }

    fn snapshot(&self) -> (Vec<Slot>, BeatSlot) {
        (self.slots.clone(), self.beats)
    }
}

/// A window and its accumulator.
pub(crate) struct WindowJob {
    pub(crate) window: ClosedWindow,
    /// `last_sample_at + slo`.
    pub(crate) deadline: Instant,
    pub(crate) submitted: Instant,
    state: Mutex<State>,
}

/// Timing of a committed score, stored with it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Timing {
    /// Window close (arrival of its last sample) to submission to the engine.
    pub(crate) submit_ms: f64,
    pub(crate) members: Vec<MemberTiming>,
    /// The beat counter's reading, where it read the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) beats: Option<MemberTiming>,
    /// Last answer (or deadline) to hand-off to the store.
    pub(crate) combine_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct MemberTiming {
    pub(crate) name: String,
    pub(crate) queue_ms: f64,
    pub(crate) compute_ms: f64,
    pub(crate) batch: usize,
}

/// Why a job is being committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Complete,
    Deadline,
    Superseded,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl WindowJob {
    pub(crate) fn new(
        window: ClosedWindow,
        slots: Vec<Slot>,
        beats: BeatSlot,
        slo: Duration,
    ) -> WindowJob {
        WindowJob {
            deadline: window.last_sample_at + slo,
            submitted: Instant::now(),
            window,
            state: Mutex::new(State {
                slots,
                beats,
                done: false,
                overdue: false,
            }),
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state.lock().expect("job lock").done
    }

    /// Marks a member dropped (its queue was full).
    pub(crate) fn drop_member(&self, m: usize) {
        self.state.lock().expect("job lock").slots[m] = Slot::Dropped;
    }

    /// Marks the counter dropped (its queue was full).
    pub(crate) fn drop_beats(&self) {
        self.state.lock().expect("job lock").beats = BeatSlot::Dropped;
    }

    /// Records the counter's reading; commits when it was the last answer. An overdue window
    /// waits for its first member result: the counter only raises a score.
    pub(crate) fn complete_beats(&self, r: Reading, shared: &Shared) {
        self.answer(shared, false, |s| s.beats = BeatSlot::Done(r));
    }

    /// Records member `m`'s result; commits when it was the last one (or the deadline passed).
    pub(crate) fn complete_member(&self, m: usize, r: MemberResult, shared: &Shared) {
        self.answer(shared, true, |s| s.slots[m] = Slot::Done(r));
    }

    /// Records an answer with `record`; commits when nothing is left waiting, or, when
    /// `commits_overdue`, once the deadline has passed.
    fn answer(&self, shared: &Shared, commits_overdue: bool, record: impl FnOnce(&mut State)) {
        let commit = {
            let mut s = self.state.lock().expect("job lock");
            if s.done {
                shared.metrics.late_member();
                return;
            }
            record(&mut s);
            let waiting = s.waiting();
            if waiting && !(commits_overdue && s.overdue) {
                None
            } else {
                s.done = true;
                let reason = if waiting {
                    Reason::Deadline
                } else {
                    Reason::Complete
                };
                Some((s.snapshot(), reason))
            }
        };
        if let Some((snapshot, reason)) = commit {
            self.commit(snapshot, reason, shared);
        }
    }

    /// The deadline passed: commit what is there, or let the first result commit.
    pub(crate) fn on_deadline(&self, shared: &Shared) {
        let commit = {
            let mut s = self.state.lock().expect("job lock");
            if s.done {
                return;
            }
            if s.slots.iter().any(|x| matches!(x, Slot::Done(_))) {
                s.done = true;
                Some(s.snapshot())
            } else if s.slots.iter().any(|x| matches!(x, Slot::Waiting)) {
                s.overdue = true;
                None
            } else {
                // Every member was dropped: nothing will come.
                s.done = true;
                Some(s.snapshot())
            }
        };
        if let Some(snapshot) = commit {
            self.commit(snapshot, Reason::Deadline, shared);
        }
    }

    /// A newer window of the same bed replaced this one in a queue. Where every member has
    /// answered already (the counter's queue let it go), the window commits with what it has,
    /// as at its deadline.
    pub(crate) fn supersede(&self, shared: &Shared) {
        let (snapshot, reason) = {
            let mut s = self.state.lock().expect("job lock");
            if s.done {
                return;
            }
            s.done = true;
            let answered = s.slots.iter().any(|x| matches!(x, Slot::Done(_)))
                && !s.slots.iter().any(|x| matches!(x, Slot::Waiting));
            let reason = if answered {
                Reason::Deadline
            } else {
                Reason::Superseded
            };
            (s.snapshot(), reason)
        };
        self.commit(snapshot, reason, shared);
    }

    /// Commits immediately (no member applies to this window).
    pub(crate) fn commit_now(&self, shared: &Shared) {
        let snapshot = {
            let mut s = self.state.lock().expect("job lock");
            s.done = true;
            s.snapshot()
        };
        self.commit(snapshot, Reason::Complete, shared);
    }

    fn commit(&self, (slots, beats): (Vec<Slot>, BeatSlot), reason: Reason, shared: &Shared) {
        let t = Instant::now();
        let names = shared.member_names();
        let mut members = Vec::with_capacity(slots.len());
        let mut timing = Timing {
            submit_ms: ms(self
                .submitted
                .saturating_duration_since(self.window.last_sample_at)),
            members: Vec::new(),
            beats: None,
            combine_ms: 0.0,
        };
        let mut missing = Vec::new();
        let mut present = Vec::with_capacity(slots.len());
        for (i, slot) in slots.iter().enumerate() {
            let (name, version) = (&names[i].0, names[i].1);
            let prob = match slot {
                Slot::Done(r) => {
                    timing.members.push(MemberTiming {
                        name: name.clone(),
                        queue_ms: ms(r.queue),
                        compute_ms: ms(r.compute),
                        batch: r.batch,
                    });
                    if let Some(p) = r.prob {
                        present.push((shared.weight(i), p));
                    } else {
                        missing.push(name.clone());
                    }
                    members.push(MemberScore {
                        name: name.clone(),
                        version: r.version,
                        prob: r.prob,
                        fault: r.fault.map(|f| f.as_str().to_owned()),
                    });
                    continue;
                }
                Slot::Waiting | Slot::Dropped => {
                    missing.push(name.clone());
                    None
                }
                Slot::NotApplicable => None,
            };
            members.push(MemberScore {
                name: name.clone(),
                version,
                prob,
                fault: None,
            });
        }
        let combined = super::ensemble::combine(shared.combine, &present);
        // A counted VT run raises the score; a counter that serves and did not read the window
        // is missing from it (a slot other than `Off` means one serves).
        let evidence = match beats {
            BeatSlot::Done(r) => {
                timing.beats = Some(MemberTiming {
                    name: BEATS_NAME.into(),
                    queue_ms: ms(r.queue),
                    compute_ms: ms(r.compute),
                    batch: 1,
                });
                if r.evidence.is_none() {
                    missing.push(BEATS_NAME.into());
                }
                r.evidence
            }
            BeatSlot::Waiting | BeatSlot::Dropped => {
                missing.push(BEATS_NAME.into());
                None
            }
            BeatSlot::Off => None,
        };
        let (combined, run_onset_ms) = match (&shared.beats, evidence) {
            (Some(stage), Some(e)) if reason != Reason::Superseded => {
                let counted = stage.counter.judge(&e, self.window.end_ms, combined);
                (counted.score, counted.run_onset_ms)
            }
            _ => (combined, None),
        };
        let (status, score) = match reason {
            Reason::Superseded => (ScoreStatus::Superseded, None),
            _ if combined.is_some() && missing.is_empty() => (ScoreStatus::Scored, combined),
            _ if combined.is_some() => (ScoreStatus::Partial, combined),
            _ if slots.iter().all(|s| matches!(s, Slot::NotApplicable)) => {
                (ScoreStatus::InsufficientSignal, None)
            }
            _ => (ScoreStatus::Dropped, None),
        };
        shared
            .metrics
            .committed(status, &timing, self.window.last_sample_at);
        timing.combine_ms = ms(t.elapsed());
        shared.store.score(ScoreRecord {
            bed: self.window.bed.clone(),
            window_index: self.window.index,
            start_ms: self.window.start_ms,
            end_ms: self.window.end_ms,
            status,
            score,
            run_onset_ms: run_onset_ms.filter(|_| score.is_some()),
            members,
            missing,
            ensemble_id: shared.ensemble_id,
            quality: self.window.quality.clone(),
            heart_rate_bpm: crate::core::score::median_heart_rate(
                self.window.heart_rate.as_deref(),
            ),
            timing: Some(serde_json::to_value(&timing).expect("timing serialises")),
            last_sample_at: self.window.last_sample_at,
        });
    }
}
