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
//! The shaped runs (`training::dataset::RunShape`, spliced apart with their own seed) are
//! alarmed the same way, except a run **under way**, whose alarm comes [`UNDER_WAY_ALARM_MS`]
//! into it, with the run still going; their opinions are reported by shape, with the runs
//! spliced into paced records as a row of their own, and beside the plain events' figures
//! (which they leave as they were).
//!
//! The events are spliced into held-out patients' own rhythm (the reported part, or each
//! fold), so no model or rule was fitted on them; the operating point is chosen on other
//! alarms (the validation part's), or is the default fixed before any was seen.
//!
//! [`Count`], events of one kind and how many drew an alarm (or were confirmed), is the
//! spliced run tables' ([`spliced`](super::spliced)) as well as these.

use serde::Serialize;

use crate::core::metrics::roc_auc;
use crate::core::monitor_alarm::RISK_LOOKBACK_SECS;
use crate::core::stats::wilson_interval;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::beats::BeatClassifier;
use crate::training::dataset::{RunShape, SpliceKind, Spliced};

use super::challenge::challenge_score;
use super::monitor_alarms::opinion_at;
use super::replay::Replay;

/// Events of one kind and how many drew an alarm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    pub runs: usize,
    pub detected: usize,
}

impl Count {
    pub(super) fn add(&mut self, detected: bool) {
        self.runs += 1;
        self.detected += usize::from(detected);
    }
}

/// The proxy monitor alarms this long after the R peak of the beat it counts last, ms (the
/// end of that beat's QRS).
pub const ALARM_AFTER_MS: i64 = 300;
/// The proxy monitor alarms this long after the first beat of a run under way, ms (the middle
/// of the 2-4 s the external monitors' true alarms came into their runs).
pub const UNDER_WAY_ALARM_MS: i64 = 3000;

/// Rows of the shaped runs' table, in order; `paced` holds every run spliced into a paced
/// record, whatever its shape.
pub(super) const SHAPE_ROWS: [&str; 6] =
    ["plain", "under_way", "slow", "burst", "flat_start", "paced"];

/// One row of the shaped runs: true alarms confirmed, with the share's 95 % Wilson interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeRow {
    pub shape: &'static str,
    #[serde(flatten)]
    pub count: Count,
    pub interval: Option<[f64; 2]>,
}

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
    /// confirmations; the served risk's ROC-AUC over the same alarms (plain events only).
    pub roc_auc: Option<f64>,
    pub challenge_score: Option<f64>,
    pub risk_roc_auc: Option<f64>,
    /// Every run's alarm by shape (the plain runs too; paced: the runs in paced records).
    pub shapes: Vec<ShapeRow>,
    /// With the shaped runs' alarms among the true ones: the ROC-AUC, the challenge-style
    /// score, and the share of true alarms confirmed (`None` without shaped runs).
    pub with_shapes_roc_auc: Option<f64>,
    pub with_shapes_challenge_score: Option<f64>,
    pub with_shapes_true_confirmed: Option<Count>,
}

/// One proxy monitor alarm at a spliced event, and the opinion on it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EventAlarm {
    kind: SpliceKind,
    shape: RunShape,
    paced: bool,
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
            let t = match (e.kind, e.shape) {
                (SpliceKind::Run, RunShape::UnderWay) => ms(e.ventricular[0]) + UNDER_WAY_ALARM_MS,
                (SpliceKind::Run, _) => ms(e.ventricular[4]) + ALARM_AFTER_MS,
                (SpliceKind::Salvo | SpliceKind::Bigeminy, _) => {
                    ms(*e.ventricular.last().expect("an event has beats")) + ALARM_AFTER_MS
                }
            };
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
                    shape: e.shape,
                    paced: s.record.paced,
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
    let plain: Vec<&EventAlarm> = alarms
        .iter()
        .filter(|a| a.shape == RunShape::Plain)
        .collect();
    for a in &plain {
        let count = match a.kind {
            SpliceKind::Run if a.beats <= 7 => &mut out.runs_5_7,
            SpliceKind::Run => &mut out.runs_8_plus,
            SpliceKind::Salvo => &mut out.salvos_2_4,
            SpliceKind::Bigeminy => &mut out.bigeminy,
        };
        count.add(a.probability >= confirm_at);
    }
    let truth: Vec<bool> = plain.iter().map(|a| a.truth()).collect();
    let probs: Vec<f32> = plain.iter().map(|a| a.probability).collect();
    let risks: Vec<f32> = plain.iter().map(|a| a.risk).collect();
    let finite = |a: f64| a.is_finite().then_some(a);
    out.roc_auc = finite(roc_auc(&truth, &probs));
    out.risk_roc_auc = finite(roc_auc(&truth, &risks));
    let labelled: Vec<(bool, f32)> = truth.into_iter().zip(probs).collect();
    out.challenge_score = challenge_score(&labelled, confirm_at);
    let runs: Vec<&EventAlarm> = alarms.iter().filter(|a| a.truth()).collect();
    out.shapes = SHAPE_ROWS
        .iter()
        .map(|&shape| {
            let mut count = Count::default();
            for a in runs.iter().filter(|a| {
                if shape == "paced" {
                    a.paced
                } else {
                    a.shape.as_str() == shape
                }
            }) {
                count.add(a.probability >= confirm_at);
            }
            ShapeRow {
                shape,
                interval: wilson_interval(count.detected, count.runs),
                count,
            }
        })
        .collect();
    if alarms.iter().any(|a| a.shape != RunShape::Plain) {
        let truth: Vec<bool> = alarms.iter().map(EventAlarm::truth).collect();
        let probs: Vec<f32> = alarms.iter().map(|a| a.probability).collect();
        out.with_shapes_roc_auc = finite(roc_auc(&truth, &probs));
        let labelled: Vec<(bool, f32)> = truth.into_iter().zip(probs).collect();
        out.with_shapes_challenge_score = challenge_score(&labelled, confirm_at);
        let mut c = Count::default();
        for a in &runs {
            c.add(a.probability >= confirm_at);
        }
        out.with_shapes_true_confirmed = Some(c);
    }
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
    ) + &shapes_text(a)
}

/// The shaped runs' lines.
fn shapes_text(a: &SplicedAdjudication) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let rows: Vec<String> = a
        .shapes
        .iter()
        .filter(|r| r.count.runs > 0)
        .map(|r| {
            let ci = r
                .interval
                .map_or(String::new(), |[lo, hi]| format!(" ({lo:.2}-{hi:.2})"));
            format!("{} {}/{}{ci}", r.shape, r.count.detected, r.count.runs)
        })
        .collect();
    if !rows.is_empty() {
        let _ = writeln!(
            s,
            "    true alarms confirmed by run shape: {}",
            rows.join(", ")
        );
    }
    if let Some(c) = a.with_shapes_true_confirmed {
        let _ = writeln!(
            s,
            "    with the shaped runs: true alarms confirmed {}/{}; ROC-AUC {}; challenge-style {}",
            c.detected,
            c.runs,
            a.with_shapes_roc_auc
                .map_or("-".into(), |v| format!("{v:.3}")),
            a.with_shapes_challenge_score
                .map_or("-".into(), |v| format!("{v:.1}")),
        );
    }
    s
}
