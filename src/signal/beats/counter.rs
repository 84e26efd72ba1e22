//! The beat counter a ward serves beside its ensemble ([`BeatCounter`]): the zoo's
//! `beats.json` ([`BeatsFile`]: a [`BeatClassifier`] and the [`BeatRule`] chosen with it on
//! validation), and what the rule judges of a window ([`run_evidence`]): its run level and the
//! agreement of two QRS detectors on its primary lead.

use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::core::window::{ClosedWindow, SAMPLE_RATE_HZ};
use crate::signal::heart_rate::detect_qrs;
use crate::signal::quality::{bsqi, detect_qrs_length};

use super::memory::{BeatMemory, BedMemories};
use super::{BeatClassifier, BeatsError, CALL_GRID, Described, RunFirsts, highest_level};

/// The beat counter's file in the zoo folder: the classifier and the beat rule chosen with it
/// (`holmes evaluate --beats --save-rule`).
pub const BEATS_FILE: &str = "beats.json";
/// A run that ended this long before the hop still counts, s: the label's grace (a window is
/// positive while a VT run ended within its last 3 s).
pub const RUN_GRACE_SECS: usize = 3;
/// The bSQI gate reads the primary lead's last this many seconds.
const GATE_SECS: usize = 10;
/// A window whose beats end in a VT run only at a call probability below the rule's (its run
/// level, [`RunEvidence::level`]) scores at least this times that level: beat-level evidence
/// short of the call ranks the window above those without a run, for the nurse's board and
/// for any ranking of the scores, while staying below the clear threshold of every rule the
/// zoo's rule book holds for an ensemble with the counter (0.20-0.43; a test in
/// `composer::derived` checks it), so
/// that under them such a window neither raises an alarm nor holds one on. A rule search run
/// on these scores (`holmes evaluate` with the zoo's counter, so `--save-rule` and
/// `--revalidate`; `--beats`; `--folds`) tries only rules that clear above [`RUN_RISK_MAX`]
/// (`ThresholdSearch::clearing_above`), so a rule it saves keeps the promise too.
pub(crate) const RUN_RISK: f32 = 0.2;
/// The highest score a run short of the call gives ([`RUN_RISK`] times the highest call
/// probability): a rule served with the counter that clears above it is never raised or held
/// on by such a run (the rule book's, those a search chooses beside the counter, and the
/// derived ones, `composer::derived`, where a test checks the book's and the derived).
pub(crate) const RUN_RISK_MAX: f32 = RUN_RISK * CALL_GRID[CALL_GRID.len() - 1];

/// Whether an alarm rule clearing at `off` can be held on by a window whose beats end in a VT
/// run only short of the call (it clears at or below [`RUN_RISK_MAX`]): what no rule served
/// with the counter should do.
pub(crate) fn held_by_short_runs(off: f32) -> bool {
    off <= RUN_RISK_MAX
}

/// When a window's beats make a VT run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeatRule {
    /// A beat is called ventricular at and above this probability (one of
    /// [`CALL_GRID`](super::CALL_GRID)).
    pub call_at: f32,
    /// The primary lead's bSQI over the window's last 10 s must reach this (0: no gate).
    pub min_bsqi: f32,
}

impl BeatRule {
    /// Whether a window of this evidence holds a VT run under the rule.
    pub(crate) fn sees_run(&self, e: RunEvidence) -> bool {
        let level = e.level();
        level > 0.0 && level >= self.call_at && e.bsqi >= self.min_bsqi
    }

    /// The least score a window of this evidence gets: 1 where the rule sees a VT run,
    /// [`RUN_RISK`] times the run level where it holds a run only at a lower call probability
    /// and passes the gate, else 0.
    pub(crate) fn run_risk(&self, e: RunEvidence) -> f32 {
        if self.sees_run(e) {
            1.0
        } else if e.bsqi >= self.min_bsqi {
            RUN_RISK * e.level()
        } else {
            0.0
        }
    }
}

/// What a [`BeatRule`] judges of a window: the run its beats end in and the agreement of two
/// QRS detectors on its primary lead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RunEvidence {
    /// The primary lead's bSQI over its last [`GATE_SECS`] (1 when not measured).
    pub bsqi: f32,
    /// The first beat of the run at each probability of [`CALL_GRID`], samples before the
    /// window's end: where the run began, which a risk alarm raised on it gives as its onset.
    pub firsts_ago: RunFirsts,
}

impl RunEvidence {
    /// No run, nothing readable.
    pub(crate) const NONE: RunEvidence = RunEvidence {
        bsqi: 0.0,
        firsts_ago: [None; CALL_GRID.len()],
    };

    /// The highest call probability at which the window holds a VT run; 0 where none.
    pub(crate) fn level(&self) -> f32 {
        highest_level(&self.firsts_ago)
    }

    /// The onset, in ms on the timeline of a window ending at `end_ms`, of the run a rule
    /// calling beats at `call_at` sees: the run at the lowest probability of [`CALL_GRID`] not
    /// below `call_at`.
    pub(crate) fn onset_ms(&self, end_ms: i64, call_at: f32) -> Option<i64> {
        CALL_GRID
            .iter()
            .zip(&self.firsts_ago)
            .find_map(|(&g, f)| f.filter(|_| g >= call_at))
            .map(|n| end_ms - (n * 1000 / SAMPLE_RATE_HZ) as i64)
    }
}

/// The run a window (`leads` as [`Described::of`] takes them) ends in and its primary lead's bSQI
/// over the last [`GATE_SECS`] (1 when `gate` is off, which skips the second detector): what
/// a [`BeatRule`] judges. `hop` samples have passed since the last window. With the bed's
/// `memory` and the window's end (ms on its timeline), a beat an earlier window classified
/// is not classified again.
pub(crate) fn run_evidence(
    c: &BeatClassifier,
    leads: &[&[f32]],
    hop: usize,
    gate: bool,
    memory: Option<(&mut BeatMemory, i64)>,
) -> RunEvidence {
    let Some(&first) = leads.first() else {
        return RunEvidence::NONE;
    };
    let len = first.len();
    let recent = hop + RUN_GRACE_SECS * SAMPLE_RATE_HZ;
    let run = c.run_level(Described::of(leads).as_ref(), len, recent, memory);
    let agreement = if gate {
        let last = &first[len.saturating_sub(GATE_SECS * SAMPLE_RATE_HZ)..];
        let fs = SAMPLE_RATE_HZ as f64;
        bsqi(&detect_qrs(last, fs), &detect_qrs_length(last, fs), fs)
    } else {
        1.0
    };
    RunEvidence {
        bsqi: agreement,
        firsts_ago: run.map(|f| f.map(|f| len - f)),
    }
}

/// What [`BEATS_FILE`] holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeatsFile {
    pub classifier: BeatClassifier,
    pub rule: BeatRule,
    /// How the rule was chosen where not on the validation part (`holmes evaluate --folds K
    /// --save-rule`: the median of the folds' beat rules, each chosen on the other folds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_by: Option<BeatsChosenBy>,
    /// The point Holmes's opinion on a monitor alarm, read with this classifier, confirms at,
    /// where the folds chose it (`holmes evaluate --folds K --save-rule`); without it, the
    /// adjudicator's own (`signal::adjudicate::CONFIRM_AT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opinion: Option<OpinionPoint>,
}

/// The opinion's operating point as the folds chose it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpinionPoint {
    /// The probability at and above which a monitor's alarm is confirmed.
    pub confirm_at: f32,
    /// In words, for a reader of the file.
    pub how: String,
    /// Each fold's point, fold 1 first.
    pub folds: Vec<f32>,
}

/// How a counter's beat rule was chosen over folds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeatsChosenBy {
    /// In words, for a reader of the file.
    pub how: String,
    /// Each fold's beat rule, fold 1 first.
    pub folds: Vec<BeatRule>,
}

impl BeatsFile {
    /// Writes `<dir>/beats.json` (through a temporary file and a rename).
    pub fn save(&self, dir: &Path) -> Result<(), BeatsError> {
        let path = dir.join(BEATS_FILE);
        let tmp = dir.join(format!("{BEATS_FILE}.tmp"));
        let text = serde_json::to_string(self).expect("the counter serialises") + "\n";
        let io = |source| BeatsError::Io {
            path: path.clone(),
            source,
        };
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }
}

/// The beat counter a ward serves beside its ensemble: a window whose beats end in a VT run
/// under the rule scores 1, whatever the members say, and one whose run holds only below the
/// rule's call at least [`RUN_RISK`] times its level. It remembers each bed's classified beats
/// ([`BedMemories`]), so a beat is classified once, not in each window that holds it; a clone
/// starts with no memories.
#[derive(Debug)]
pub struct BeatCounter {
    pub file: BeatsFile,
    /// SHA-256 of the file: the counter's identity in the alarm rules.
    pub sha256: String,
    /// Samples between two windows of a bed (the ward's hop).
    hop: usize,
    memories: Mutex<BedMemories>,
}

impl Clone for BeatCounter {
    fn clone(&self) -> Self {
        BeatCounter {
            file: self.file.clone(),
            sha256: self.sha256.clone(),
            hop: self.hop,
            memories: Mutex::default(),
        }
    }
}

impl BeatCounter {
    /// Reads `<dir>/beats.json` for a ward of `hop_secs`; `None` when the zoo has none.
    pub fn load(dir: &Path, hop_secs: u32) -> Result<Option<BeatCounter>, BeatsError> {
        let path = dir.join(BEATS_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(BeatsError::Io { path, source }),
        };
        let file: BeatsFile =
            serde_json::from_slice(&bytes).map_err(|source| BeatsError::Parse {
                path: path.clone(),
                source,
            })?;
        file.classifier.check().map_err(|e| BeatsError::Invalid {
            path: path.clone(),
            source: Box::new(e),
        })?;
        Ok(Some(BeatCounter {
            file,
            sha256: crate::core::hash::sha256_hex(&bytes),
            hop: hop_secs as usize * SAMPLE_RATE_HZ,
            memories: Mutex::default(),
        }))
    }

    /// Samples between two windows of a bed (the ward's hop).
    pub(crate) fn hop_samples(&self) -> usize {
        self.hop
    }

    /// Multiply-accumulates of the classifier per beat (every fit's convolutions and layers).
    pub fn macs_per_beat(&self) -> u64 {
        self.file.classifier.macs()
    }

    /// The window's score with the counter: 1 where its beats end in a VT run under the rule,
    /// at least [`RUN_RISK`] times the run level where a run holds only below the rule's call,
    /// else `score` (no score stays none: the counter raises a scored window, it does not
    /// score one the members could not); with the run's onset, ms on the window's timeline,
    /// where it raised the score. [`read`](Self::read) then [`judge`](Self::judge), as the
    /// engine runs them apart (the reading beside the members, the judging where the window
    /// commits).
    pub fn apply(&self, w: &ClosedWindow, score: Option<f32>) -> Counted {
        if score.is_none() {
            return Counted::default();
        }
        self.judge(&self.read(w), w.end_ms, score)
    }

    /// What the counter reads of a window: the run its beats end in and, when the rule gates
    /// on it, the primary lead's bSQI. All of the counter's work is here; the beats earlier
    /// windows of the bed classified are read from its memory.
    pub(crate) fn read(&self, w: &ClosedWindow) -> RunEvidence {
        let leads: Vec<&[f32]> = w.ecg.iter().flatten().map(|l| &l[..]).collect();
        let gate = self.file.rule.min_bsqi > 0.0;
        let mut memories = self
            .memories
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let memory = memories.of(&w.bed);
        run_evidence(
            &self.file.classifier,
            &leads,
            self.hop,
            gate,
            Some((memory, w.end_ms)),
        )
    }

    /// The score of a window ending at `end_ms` with the counter, from what it read there
    /// ([`apply`](Self::apply)): the ensemble's `score` lifted to the rule's
    /// [`run_risk`](BeatRule::run_risk) (1 at a run the rule sees).
    pub(crate) fn judge(&self, evidence: &RunEvidence, end_ms: i64, score: Option<f32>) -> Counted {
        let Some(s) = score else {
            return Counted::default();
        };
        let rule = self.file.rule;
        let seen = rule.sees_run(*evidence);
        let run_risk = rule.run_risk(*evidence);
        Counted {
            score: Some(s.max(run_risk)),
            raised: seen,
            run_risk,
            run_onset_ms: seen
                .then(|| evidence.onset_ms(end_ms, rule.call_at))
                .flatten(),
            run_level: Some(evidence.level()),
        }
    }
}

/// A window's score after the counter ([`BeatCounter::apply`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counted {
    pub score: Option<f32>,
    /// Whether the counter raised the score to 1 (a VT run seen).
    pub raised: bool,
    /// The least score the counter's run evidence gave the window ([`BeatRule::run_risk`]):
    /// 1 where it raised it, [`RUN_RISK`] times the run level where a run holds only below
    /// the rule's call; 0 where it saw no run or did not look.
    pub run_risk: f32,
    /// The first beat of the VT run that raised the score, ms on the window's timeline.
    pub run_onset_ms: Option<i64>,
    /// The highest call probability at which the window's beats end in a VT run (0: none);
    /// `None` where the counter did not look (no counter, or no score to raise).
    pub run_level: Option<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::test_signals::ectopic_train;

    #[test]
    fn the_onset_is_the_run_the_rule_calls() {
        // A run of 1,000 samples (4 s) at 0.6 and above, its last 500 (2 s) at 0.9 and above.
        let mut firsts_ago = [None; CALL_GRID.len()];
        firsts_ago[..2].fill(Some(1_000));
        firsts_ago[2..5].fill(Some(500));
        let e = RunEvidence {
            bsqi: 1.0,
            firsts_ago,
        };
        assert_eq!(e.level(), 0.9);
        assert_eq!(e.onset_ms(60_000, 0.5), Some(56_000));
        assert_eq!(e.onset_ms(60_000, 0.8), Some(58_000));
        // Between grid points: the run at the next one up.
        assert_eq!(e.onset_ms(60_000, 0.75), Some(58_000));
        // Above the level there is no run to date.
        assert_eq!(e.onset_ms(60_000, 0.95), None);
    }

    #[test]
    fn a_run_short_of_the_call_scores_a_share_of_its_level() {
        let rule = BeatRule {
            call_at: 0.99,
            min_bsqi: 0.8,
        };
        // A run at 0.9 and below, none at 0.95 or above.
        let mut firsts_ago = [None; CALL_GRID.len()];
        firsts_ago[..5].fill(Some(1_000));
        let e = RunEvidence {
            bsqi: 0.9,
            firsts_ago,
        };
        assert!(!rule.sees_run(e));
        assert!((rule.run_risk(e) - RUN_RISK * 0.9).abs() < 1e-6);
        // Behind a failed gate, or with no run, nothing; a run at the call, 1.
        assert_eq!(rule.run_risk(RunEvidence { bsqi: 0.5, ..e }), 0.0);
        assert_eq!(rule.run_risk(RunEvidence::NONE), 0.0);
        let mut at_call = [None; CALL_GRID.len()];
        at_call.fill(Some(1_000));
        let seen = RunEvidence {
            bsqi: 0.9,
            firsts_ago: at_call,
        };
        assert_eq!(rule.run_risk(seen), 1.0);
    }

    /// A counter whose classifier calls a beat ventricular when it correlates poorly with the
    /// template (logit 10 - 20 x correlation), under `rule`.
    fn counter(rule: BeatRule) -> BeatCounter {
        counter_of(BeatClassifier::on_first_feature(-20.0, 10.0), rule)
    }

    fn counter_of(classifier: BeatClassifier, rule: BeatRule) -> BeatCounter {
        let file = BeatsFile {
            classifier,
            rule,
            chosen_by: None,
            opinion: None,
        };
        // A folder of its own: tests run side by side.
        let dir = tempfile::tempdir().unwrap();
        file.save(dir.path()).unwrap();
        let c = BeatCounter::load(dir.path(), 5)
            .unwrap()
            .expect("the file was written");
        assert_eq!(c.file, file);
        c
    }

    /// `window(lead)` ending at `end_ms` on the bed's timeline.
    fn window_ending(lead: Vec<f32>, end_ms: i64) -> ClosedWindow {
        let mut w = window(lead);
        w.end_ms = end_ms;
        w.start_ms = end_ms - 30_000;
        w
    }

    fn window(lead: Vec<f32>) -> ClosedWindow {
        use crate::core::window::WindowQuality;
        ClosedWindow {
            bed: "b".into(),
            index: 0,
            start_ms: 0,
            end_ms: 30_000,
            ecg: [Some(lead.into()), None, None],
            heart_rate: None,
            quality: WindowQuality {
                leads: [None, None, None],
                gap_samples: 0,
                hr_coverage: 0.0,
            },
            last_sample_at: std::time::Instant::now(),
        }
    }

    #[test]
    fn a_beds_beats_are_classified_once_across_its_overlapping_windows() {
        let c = counter(BeatRule {
            call_at: 0.9,
            min_bsqi: 0.0,
        });
        // A minute of beats every 0.56 s, read as seven 30-s windows a 5-s hop apart.
        let (x, beats) = ectopic_train(60 * SAMPLE_RATE_HZ, 140, &[]);
        let (len, hop) = (30 * SAMPLE_RATE_HZ, 5 * SAMPLE_RATE_HZ);
        let mut described = 0;
        for k in 0..7 {
            let end = len + k * hop;
            let end_ms = (end * 1000 / SAMPLE_RATE_HZ) as i64;
            c.read(&window_ending(x[end - len..end].to_vec(), end_ms));
            described += Described::of(&[&x[end - len..end]]).map_or(0, |d| d.len());
        }
        let bed: std::sync::Arc<str> = "b".into();
        let classified = c.memories.lock().unwrap().of(&bed).classified() as usize;
        assert!(
            classified <= beats.len() && classified + 6 >= beats.len(),
            "{classified} classified of {} beats",
            beats.len()
        );
        assert!(described >= 3 * classified, "{described} described");
        // A clone starts with no memories.
        assert_eq!(c.clone().memories.lock().unwrap().of(&bed).classified(), 0);
    }

    #[test]
    fn a_window_without_beats_still_moves_the_beds_timeline_on() {
        let c = counter(BeatRule {
            call_at: 0.9,
            min_bsqi: 0.0,
        });
        // Beats every 0.56 s: a window ending at 100 s, then a flat one (no beats) at 110 s.
        let (x, _) = ectopic_train(30 * SAMPLE_RATE_HZ, 140, &[]);
        let read = |lead: Vec<f32>, end_ms: i64| c.read(&window_ending(lead, end_ms));
        let bed: std::sync::Arc<str> = "b".into();
        let classified = || c.memories.lock().unwrap().of(&bed).classified();
        read(x.clone(), 100_000);
        let first = classified();
        assert!(first >= 40, "{first} classified");
        read(vec![0.0; x.len()], 110_000);
        assert_eq!(classified(), first);
        // The monitor restarts its timeline: the same beats in a window ending at 105.6 s, ten
        // beats on from the first, before the flat window's end. That is a new timeline, so
        // the beats are classified afresh rather than read as the first window's.
        read(x, 105_600);
        assert_eq!(classified(), 2 * first);
    }

    #[test]
    fn the_counter_raises_a_window_ending_in_a_fast_run_and_nothing_else() {
        let c = counter(BeatRule {
            call_at: 0.9,
            min_bsqi: 0.0,
        });
        // Beats every 0.56 s (107/min) over 30 s; the 46th to the 51st wide and inverted.
        let run: Vec<usize> = (45..51).collect();
        let (x, beats) = ectopic_train(7_500, 140, &run);
        let counted = c.apply(&window(x.clone()), Some(0.1));
        assert_eq!(counted.score, Some(1.0));
        assert!(counted.raised);
        // The alarm's onset is the run's first wide beat (the window spans 0-30 s).
        let onset = counted
            .run_onset_ms
            .expect("a raised window gives its run's onset");
        let first_ms = (beats[45] * 1000 / SAMPLE_RATE_HZ) as i64;
        assert!(
            (onset - first_ms).abs() <= 100,
            "onset {onset} ms, first wide beat {first_ms} ms"
        );
        assert_eq!(
            c.apply(&window(x), None),
            Counted::default(),
            "it raises scores, it does not make them"
        );
        let unraised = Counted {
            score: Some(0.1),
            raised: false,
            run_risk: 0.0,
            run_onset_ms: None,
            run_level: Some(0.0),
        };
        // Four wide beats are a salvo, not VT.
        let (salvo, _) = ectopic_train(7_500, 140, &[45, 46, 47, 48]);
        assert_eq!(c.apply(&window(salvo), Some(0.1)), unraised);
        // The same six wide beats long before the window's end have ended.
        let early: Vec<usize> = (5..11).collect();
        let (ended, _) = ectopic_train(7_500, 140, &early);
        assert_eq!(c.apply(&window(ended), Some(0.1)), unraised);
    }

    #[test]
    fn a_window_ending_in_a_run_below_the_call_is_ranked_not_raised() {
        // A less certain classifier (logit 1.2 - 2 x correlation: about 0.96 for an inverted
        // beat, 0.3 for a sinus one) under a call of 0.99.
        let c = counter_of(
            BeatClassifier::on_first_feature(-2.0, 1.2),
            BeatRule {
                call_at: 0.99,
                min_bsqi: 0.0,
            },
        );
        let run: Vec<usize> = (45..51).collect();
        let (x, _) = ectopic_train(7_500, 140, &run);
        let counted = c.apply(&window(x), Some(0.01));
        assert!(!counted.raised, "{counted:?}");
        let level = counted.run_level.expect("the counter looked");
        assert!((0.5..0.99).contains(&level), "{counted:?}");
        assert_eq!(counted.score, Some(RUN_RISK * level));
        assert_eq!(counted.run_risk, RUN_RISK * level);
        // A higher ensemble score stands.
        let (x, _) = ectopic_train(7_500, 140, &run);
        assert_eq!(c.apply(&window(x), Some(0.5)).score, Some(0.5));
    }

    #[test]
    fn a_zoo_without_a_counter_has_none_and_a_broken_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("holmes-beats-none-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(BeatCounter::load(&dir, 5).unwrap().is_none());
        std::fs::write(dir.join(BEATS_FILE), "{\"classifier\": 1}").unwrap();
        let e = BeatCounter::load(&dir, 5).unwrap_err();
        assert!(e.to_string().contains("beats.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
