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
//! fold), so no model or rule was fitted on them; the operating point is the default one,
//! fixed before these alarms were seen.

use serde::Serialize;

use crate::core::metrics::roc_auc;
use crate::core::monitor_alarm::{MonitorAlarmKind, RISK_LOOKBACK_SECS};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::adjudicate::{CONFIRM_AT, Lead, adjudicate};
use crate::signal::beats::BeatClassifier;
use crate::training::dataset::{SpliceKind, Spliced};

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

/// Judges the proxy monitor's alarm at every event of `spliced` (replayed as `reps`, served
/// scores by `pick`) with `classifier`.
pub(crate) fn adjudicate_events(
    spliced: &[Spliced],
    reps: &[Replay],
    pick: fn(&Replay) -> &[Option<f32>],
    classifier: &BeatClassifier,
) -> SplicedAdjudication {
    let ms = |samples: i64| samples * 1000 / SAMPLE_RATE_HZ as i64;
    let mut out = SplicedAdjudication {
        confirm_at: CONFIRM_AT,
        ..SplicedAdjudication::default()
    };
    let (mut truth, mut probs, mut risks) = (Vec::new(), Vec::new(), Vec::new());
    for (s, r) in spliced.iter().zip(reps) {
        for e in &s.events {
            let counted = match e.kind {
                SpliceKind::Run => e.ventricular[4],
                SpliceKind::Salvo | SpliceKind::Bigeminy => {
                    *e.ventricular.last().expect("an event has beats")
                }
            };
            let t = ms(counted) + ALARM_AFTER_MS;
            let end = (t * SAMPLE_RATE_HZ as i64 / 1000) as usize;
            let risk = r
                .ends_ms
                .iter()
                .zip(pick(r))
                .filter(|&(&w, _)| w >= t - RISK_LOOKBACK_SECS * 1000 && w <= t)
                .filter_map(|(_, v)| *v)
                .fold(0.0f32, f32::max);
            let names = ["ECG1", "ECG2", "ECG3"];
            let leads: Vec<Lead> = s
                .record
                .leads
                .iter()
                .zip(names)
                .filter(|(l, _)| l.len() >= end)
                .map(|(l, name)| Lead {
                    name,
                    samples: &l[..end],
                })
                .collect();
            let Some(o) = adjudicate(
                classifier,
                &leads,
                MonitorAlarmKind::Vt,
                Some(risk),
                CONFIRM_AT,
            ) else {
                continue;
            };
            let is_run = e.kind == SpliceKind::Run;
            let count = match e.kind {
                SpliceKind::Run if e.beats <= 7 => &mut out.runs_5_7,
                SpliceKind::Run => &mut out.runs_8_plus,
                SpliceKind::Salvo => &mut out.salvos_2_4,
                SpliceKind::Bigeminy => &mut out.bigeminy,
            };
            count.add(o.confirmed);
            truth.push(is_run);
            probs.push(o.probability);
            risks.push(risk);
        }
    }
    let finite = |a: f64| a.is_finite().then_some(a);
    out.roc_auc = finite(roc_auc(&truth, &probs));
    out.risk_roc_auc = finite(roc_auc(&truth, &risks));
    let tp = out.runs_5_7.detected + out.runs_8_plus.detected;
    let n_true = out.runs_5_7.runs + out.runs_8_plus.runs;
    let fp = out.salvos_2_4.detected + out.bigeminy.detected;
    let n_false = out.salvos_2_4.runs + out.bigeminy.runs;
    let (fn_, tn) = (n_true - tp, n_false - fp);
    let denominator = tp + tn + fp + 5 * fn_;
    out.challenge_score = (denominator > 0).then(|| 100.0 * (tp + tn) as f64 / denominator as f64);
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
