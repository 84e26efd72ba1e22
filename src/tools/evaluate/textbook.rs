//! A textbook monitor's VT and VF alarms (`textbook_monitor` in `holmes evaluate --json`): the
//! rule vendors document, **N consecutive wide beats at 100/min or more** (N = 4, 5 and 6, on
//! the monitor's own QRS detection, the classical detector's) or 4 s of fibrillatory signal,
//! raised as `holmes simulate --monitor-alarms` raises them (8-s windows every second on the
//! record's first lead; once a window's score reaches 1; not again within 10 s of the previous
//! alarm's end), on each reported record clean and under each noise level.
//!
//! An alarm is **true** when the reference holds a VT or VF episode in the
//! [`LOOKBACK_SECS`] before it (a VT episode being a run of 5 or more annotated ventricular
//! beats at over 100/min, or a rhythm labelled VT where beats are not labelled). Each is
//! reported by what set it off ([`triggers`](super::triggers)), with Holmes's opinion on it at
//! the served point where a beat classifier serves, so the mix of the alarms a monitor raises
//! (an ICU's: about three VT alarms in four false) can be held against the opinion's figures.

use serde::Serialize;

use crate::alarm::MatchOptions;
use crate::core::monitor_alarm::{LOOKBACK_SECS, RISK_LOOKBACK_SECS};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::beats::BeatClassifier;
use crate::tools::sim::alarms::Schedule;
use crate::training::dataset::RecordData;

use super::EvaluateError;
use super::challenge::Confirmations;
use super::monitor_alarms::opinion_at;
use super::replay::Replay;
use super::triggers::{Trigger, TriggerRow, rows, trigger_of};

/// The monitor's VT run settings reported, beats.
pub(crate) const RUN_SETTINGS: [usize; 3] = [4, 5, 6];

/// The textbook monitor at one VT run setting under one condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextbookMonitor {
    /// The VT run the monitor alarms on, beats.
    pub min_beats: usize,
    /// Electrode motion added, dB (`None`: clean).
    pub snr_db: Option<f32>,
    /// Its alarms, how many are true, and the rate of the false ones per bed-hour.
    pub alarms: usize,
    pub true_alarms: usize,
    pub false_per_hour: f64,
    /// The alarms by what set them off, with the opinion's confirmations.
    pub by_trigger: Vec<TriggerRow>,
    /// The opinion, where a beat classifier serves: the point the alarms were confirmed at
    /// (over folds, each fold's at its own) ...
    pub confirm_at: Option<f32>,
    /// ... and the confirmations.
    #[serde(flatten)]
    pub confirmations: Option<Confirmations>,
}

/// One record as the condition replayed it: the record, the leads the monitor and the
/// opinion read, and the replay whose served scores `pick` gives (the opinion's risk).
pub(crate) struct Played<'a> {
    pub record: &'a RecordData,
    pub leads: &'a [Vec<f32>],
    pub replay: &'a Replay,
}

/// One textbook monitor alarm, judged.
#[derive(Debug, Clone, Copy)]
struct Alarm {
    min_beats: usize,
    snr_db: Option<f32>,
    truth: bool,
    trigger: Trigger,
    /// The opinion's probability, and the point it is confirmed at (its fold's, over folds).
    opinion: Option<(f32, f32)>,
}

/// The textbook monitor's alarms over the conditions and records played so far (over folds,
/// every fold's), and the bed-hours of each condition.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    alarms: Vec<Alarm>,
    hours: Vec<(Option<f32>, f64)>,
}

impl Tally {
    /// Adds the alarms of each of [`RUN_SETTINGS`] over the `played` records of one condition
    /// (`snr_db`), with the opinion `adjudicator` (classifier, point) forms on each, its risk
    /// from the served scores `pick` gives; `matching` names the triggers as the proxy
    /// monitor's are named.
    pub(crate) fn add(
        &mut self,
        played: &[Played<'_>],
        pick: fn(&Replay) -> &[Option<f32>],
        adjudicator: Option<(&BeatClassifier, f32)>,
        snr_db: Option<f32>,
        matching: MatchOptions,
    ) -> Result<(), EvaluateError> {
        let fs = SAMPLE_RATE_HZ as i64;
        let hours: f64 = played
            .iter()
            .map(|p| p.leads.first().map_or(0, Vec::len) as f64 / fs as f64 / 3600.0)
            .sum();
        match self.hours.iter_mut().find(|(c, _)| *c == snr_db) {
            Some((_, h)) => *h += hours,
            None => self.hours.push((snr_db, hours)),
        }
        for min_beats in RUN_SETTINGS {
            for p in played {
                let lead = p.leads.first().map_or(&[][..], Vec::as_slice);
                for a in &Schedule::of_with(lead, min_beats)?.alarms {
                    let t = a.raised as i64;
                    let t_ms = t * 1000 / fs;
                    let from = t - LOOKBACK_SECS as i64 * fs;
                    let truth = p
                        .record
                        .episodes
                        .iter()
                        .any(|e| e.onset < t && e.end > from);
                    let risk = p
                        .replay
                        .ends_ms
                        .iter()
                        .zip(pick(p.replay))
                        .filter(|&(&w, _)| w >= t_ms - RISK_LOOKBACK_SECS * 1000 && w <= t_ms)
                        .filter_map(|(_, v)| *v)
                        .fold(0.0f32, f32::max);
                    let opinion = adjudicator.and_then(|(c, at)| {
                        opinion_at(c, p.leads, t_ms, risk).map(|o| (o.probability, at))
                    });
                    self.alarms.push(Alarm {
                        min_beats,
                        snr_db,
                        truth,
                        trigger: trigger_of(p.record, t_ms, truth, matching),
                        opinion,
                    });
                }
            }
        }
        Ok(())
    }

    /// Adds `other`'s alarms and hours (another fold's).
    pub(crate) fn extend(&mut self, other: Tally) {
        for (c, h) in other.hours {
            match self.hours.iter_mut().find(|(s, _)| *s == c) {
                Some((_, mine)) => *mine += h,
                None => self.hours.push((c, h)),
            }
        }
        self.alarms.extend(other.alarms);
    }

    /// The figures of each condition and setting, the opinion's point reported as `confirm_at`
    /// (the served one).
    pub(crate) fn figures(&self, confirm_at: f32) -> Vec<TextbookMonitor> {
        let mut out = Vec::new();
        for &(snr_db, hours) in &self.hours {
            for min_beats in RUN_SETTINGS {
                let judged: Vec<Alarm> = self
                    .alarms
                    .iter()
                    .filter(|a| a.snr_db == snr_db && a.min_beats == min_beats)
                    .copied()
                    .collect();
                out.push(row(min_beats, snr_db, hours, &judged, confirm_at));
            }
        }
        out
    }
}

/// The figures of one setting's `judged` alarms.
fn row(
    min_beats: usize,
    snr_db: Option<f32>,
    hours: f64,
    judged: &[Alarm],
    confirm_at: f32,
) -> TextbookMonitor {
    let n_true = judged.iter().filter(|j| j.truth).count();
    let n_false = judged.len() - n_true;
    let confirmed = |a: &Alarm| a.opinion.map(|(p, at)| p >= at);
    let by_trigger = rows(
        &judged
            .iter()
            .map(|a| (a.trigger, a.truth, confirmed(a)))
            .collect::<Vec<_>>(),
    );
    let opined = !judged.is_empty() && judged.iter().all(|a| a.opinion.is_some());
    let decided: Vec<(bool, f32, bool)> = judged
        .iter()
        .filter_map(|a| a.opinion.map(|(p, at)| (a.truth, p, p >= at)))
        .collect();
    TextbookMonitor {
        min_beats,
        snr_db,
        alarms: judged.len(),
        true_alarms: n_true,
        false_per_hour: if hours > 0.0 {
            n_false as f64 / hours
        } else {
            0.0
        },
        by_trigger,
        confirm_at: opined.then_some(confirm_at),
        confirmations: opined.then(|| Confirmations::of(&decided)),
    }
}

/// The report's lines.
pub(crate) fn text(rows: &[TextbookMonitor]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if rows.is_empty() {
        return s;
    }
    s.push_str(
        "textbook monitor (N wide beats at 100/min or more, or 4 s of fibrillation; true: a \
         VT or VF episode in the 16 s before):\n",
    );
    for r in rows {
        let opinion = match &r.confirmations {
            Some(c) => format!(
                "; Holmes confirmed {}/{} true, {}/{} false, ROC-AUC {}, challenge-style {}",
                c.confirmed_true,
                r.true_alarms,
                c.confirmed_false,
                r.alarms - r.true_alarms,
                c.roc_auc.map_or("-".into(), |v| format!("{v:.3}")),
                c.challenge_score.map_or("-".into(), |v| format!("{v:.1}")),
            ),
            None => String::new(),
        };
        let triggers: Vec<String> = r
            .by_trigger
            .iter()
            .map(|t| format!("{} {}/{}", t.trigger, t.true_alarms, t.alarms))
            .collect();
        let _ = writeln!(
            s,
            "  N {} {}: {} alarms, {} true, false {:.2}/h{opinion}\n    by trigger (true/all): {}",
            r.min_beats,
            r.snr_db.map_or("clean".into(), |d| format!("em {d} dB")),
            r.alarms,
            r.true_alarms,
            r.false_per_hour,
            triggers.join(", "),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_reports_its_alarms_truth_and_the_opinions_each_at_its_point() {
        let alarm = |truth, trigger, opinion| Alarm {
            min_beats: 4,
            snr_db: None,
            truth,
            trigger,
            opinion,
        };
        let judged = [
            alarm(true, Trigger::Vf, Some((0.9, 0.5))),
            alarm(true, Trigger::SustainedVt, Some((0.3, 0.5))),
            // Confirmed at its fold's point, 0.2, though under the reported 0.5.
            alarm(false, Trigger::Noise, Some((0.3, 0.2))),
            alarm(false, Trigger::Other, Some((0.1, 0.5))),
        ];
        let r = row(4, None, 2.0, &judged, 0.5);
        assert_eq!((r.alarms, r.true_alarms), (4, 2));
        assert!((r.false_per_hour - 1.0).abs() < 1e-9);
        let c = r.confirmations.as_ref().expect("opined");
        assert_eq!((c.confirmed_true, c.confirmed_false), (1, 1));
        // TP 1, FN 1, FP 1, TN 1: 2 / (2 + 1 + 5).
        assert!((c.challenge_score.unwrap() - 25.0).abs() < 1e-9);
        assert_eq!(r.by_trigger.len(), 4);
        // Without a classifier, no opinion is reported.
        let r = row(
            4,
            None,
            2.0,
            &judged.map(|a| Alarm { opinion: None, ..a }),
            0.5,
        );
        assert_eq!((&r.confirmations, r.confirm_at), (&None, None));
        assert_eq!(r.by_trigger[0].confirmed, None);
    }
}
