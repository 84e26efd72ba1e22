//! A proxy monitor on the spliced events (`holmes evaluate --spliced`): a textbook monitor
//! raises its VT alarm once it has counted five ventricular beats, [`ALARM_AFTER_MS`] after
//! the fifth beat's R peak, so each spliced **run** (5-30 beats) draws a true alarm with the run
//! still under way at the alarm's instant, the case the external monitors' true alarms most
//! often are; each **salvo** (2-4 beats) and **bigeminy** draws a false alarm the same time
//! after its last ventricular beat (a monitor miscounting ectopy). Holmes's opinion on each
//! (`signal::adjudicate`, from the samples up to the alarm and the served risk of the windows
//! ending in the 14 s before it) is judged: confirmations by trigger, the ranking of true over
//! false alarms, and the challenge-style score; beside them, the served risk alone.
//!
//! The events are spliced into held-out patients' own rhythm (the reported part, or each
//! fold), so no model or rule was fitted on them; the operating point is chosen on other
//! alarms (the validation part's), or is the default fixed before any was seen.

use serde::Serialize;

use crate::core::metrics::roc_auc;
use crate::core::monitor_alarm::RISK_LOOKBACK_SECS;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::beats::BeatClassifier;
use crate::training::dataset::{SpliceKind, Spliced};

use super::confirm_point::challenge_score;
use super::monitor_alarms::opinion_at;
use super::replay::Replay;
use super::spliced::Count;

/// The proxy monitor alarms this long after the R peak of the beat it counts last, ms (the
/// end of that beat's QRS).
pub const ALARM_AFTER_MS: i64 = 300;

/// Holmes's opinions on the proxy monitor's alarms at the spliced events.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SplicedAdjudication {
    pub confirm_at: f32,
    /// Alarms at runs of 5-7 and of 8+ beats (true), at salvos and bigeminy (false), and how
    /// many of each the opinion confirmed.
    pub runs_5_7: Count,
    pub runs_8_plus: Count,
    pub salvos_2_4: Count,
    pub bigeminy: Count,
    /// The opinion's ROC-AUC, true alarms over false, and the challenge-style score of its
    /// confirmations; the served risk's ROC-AUC over the same alarms.
    pub roc_auc: Option<f64>,
    pub challenge_score: Option<f64>,
    pub risk_roc_auc: Option<f64>,
}

/// One proxy monitor alarm at a spliced event, and the opinion on it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EventAlarm {
    kind: SpliceKind,
    beats: usize,
    probability: f32,
    /// The served risk of the windows before it.
    risk: f32,
}

impl EventAlarm {
    /// A run's alarm is true; a salvo's or bigeminy's false.
    pub(crate) fn truth(&self) -> bool {
        self.kind == SpliceKind::Run
    }

    pub(crate) fn probability(&self) -> f32 {
        self.probability
    }
}

/// The proxy monitor's alarm at every event of `spliced` (replayed as `reps`, served scores by
/// `pick`), each with the opinion `classifier` forms on it.
pub(crate) fn opinions(
    spliced: &[Spliced],
    reps: &[Replay],
    pick: fn(&Replay) -> &[Option<f32>],
    classifier: &BeatClassifier,
) -> Vec<EventAlarm> {
    let ms = |samples: i64| samples * 1000 / SAMPLE_RATE_HZ as i64;
    let mut out = Vec::new();
    for (s, r) in spliced.iter().zip(reps) {
        for e in &s.events {
            let counted = match e.kind {
                SpliceKind::Run => e.ventricular[4],
                SpliceKind::Salvo | SpliceKind::Bigeminy => {
                    *e.ventricular.last().expect("an event has beats")
                }
            };
            let t = ms(counted) + ALARM_AFTER_MS;
            let risk = r
                .ends_ms
                .iter()
                .zip(pick(r))
                .filter(|&(&w, _)| w >= t - RISK_LOOKBACK_SECS * 1000 && w <= t)
                .filter_map(|(_, v)| *v)
                .fold(0.0f32, f32::max);
            if let Some(probability) = opinion_at(classifier, &s.record.leads, t, risk) {
                out.push(EventAlarm {
                    kind: e.kind,
                    beats: e.beats,
                    probability,
                    risk,
                });
            }
        }
    }
    out
}

/// The figures of the `alarms`, confirmed at `confirm_at`.
pub(crate) fn figures(alarms: &[EventAlarm], confirm_at: f32) -> SplicedAdjudication {
    let mut out = SplicedAdjudication {
        confirm_at,
        ..SplicedAdjudication::default()
    };
    for a in alarms {
        let count = match a.kind {
            SpliceKind::Run if a.beats <= 7 => &mut out.runs_5_7,
            SpliceKind::Run => &mut out.runs_8_plus,
            SpliceKind::Salvo => &mut out.salvos_2_4,
            SpliceKind::Bigeminy => &mut out.bigeminy,
        };
        count.add(a.probability >= confirm_at);
    }
    let truth: Vec<bool> = alarms.iter().map(EventAlarm::truth).collect();
    let probs: Vec<f32> = alarms.iter().map(|a| a.probability).collect();
    let risks: Vec<f32> = alarms.iter().map(|a| a.risk).collect();
    let finite = |a: f64| a.is_finite().then_some(a);
    out.roc_auc = finite(roc_auc(&truth, &probs));
    out.risk_roc_auc = finite(roc_auc(&truth, &risks));
    let labelled: Vec<(bool, f32)> = truth.into_iter().zip(probs).collect();
    out.challenge_score = challenge_score(&labelled, confirm_at);
    out
}

/// The report's lines.
pub(crate) fn text(a: &SplicedAdjudication) -> String {
    let f3 = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    let c = |c: Count| format!("{}/{}", c.detected, c.runs);
    format!(
        "  a monitor's VT alarm {ALARM_AFTER_MS} ms after each event's fifth (salvos, bigeminy: \
         last) ventricular beat, Holmes's opinion at {:.2}: confirmed runs 5-7 {}, 8+ {}; \
         salvos {}, bigeminy {}; ROC-AUC {} (served risk alone {}); challenge-style score {}\n",
        a.confirm_at,
        c(a.runs_5_7),
        c(a.runs_8_plus),
        c(a.salvos_2_4),
        c(a.bigeminy),
        f3(a.roc_auc),
        f3(a.risk_roc_auc),
        a.challenge_score.map_or("-".into(), |v| format!("{v:.1}")),
    )
}
