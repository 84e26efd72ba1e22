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

use std::sync::Arc;

use serde::Serialize;

use crate::core::metrics::roc_auc;
use crate::core::monitor_alarm::RISK_LOOKBACK_SECS;
use crate::core::stats::wilson_interval;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::adjudicate::CONFIRM_AT;
use crate::signal::beats::BeatClassifier;
use crate::training::dataset::{RunShape, SpliceKind, Spliced};

use super::challenge::{Confirmations, challenge_of};
use super::listing::ListedAlarm;
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
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EventAlarm {
    /// The spliced copy's record, and when the alarm is raised (ms from its start).
    record: Arc<str>,
    at_ms: i64,
    /// The opinion's reason.
    reason: Arc<str>,
    kind: SpliceKind,
    shape: RunShape,
    paced: bool,
    beats: usize,
    probability: f32,
    /// The served risk of the windows before it.
    risk: f32,
    /// The point its opinion is confirmed at (its fold's, over folds).
    confirm_at: f32,
}

impl EventAlarm {
    /// A run's alarm is true; a salvo's or bigeminy's false.
    pub(crate) fn truth(&self) -> bool {
        self.kind == SpliceKind::Run
    }

    pub(crate) fn probability(&self) -> f32 {
        self.probability
    }

    /// The alarm with its opinion confirmed at `point`.
    pub(crate) fn at(self, point: f32) -> EventAlarm {
        EventAlarm {
            confirm_at: point,
            ..self
        }
    }

    fn confirmed(&self) -> bool {
        self.probability >= self.confirm_at
    }

    /// The alarm as the per-alarm listing gives it.
    pub(crate) fn listed(&self) -> ListedAlarm {
        let paced = if self.paced { ", paced" } else { "" };
        ListedAlarm {
            source: "spliced",
            record: self.record.to_string(),
            at_s: self.at_ms as f64 / 1000.0,
            truth: self.truth(),
            set_off_by: format!(
                "{:?} {:?} of {} beats{paced}",
                self.kind, self.shape, self.beats
            ),
            risk: self.risk,
            probability: self.probability,
            confirm_at: self.confirm_at,
            confirmed: self.confirmed(),
            reason: self.reason.to_string(),
        }
    }
}

/// The proxy monitor's alarm at every event of the `spliced` records (each with its replay,
/// served scores by `pick`), each with the opinion `classifier` forms on it, confirmed at
/// [`CONFIRM_AT`] until [`EventAlarm::at`] says otherwise.
pub(crate) fn opinions(
    spliced: &[(&Spliced, &Replay)],
    pick: fn(&Replay) -> &[Option<f32>],
    classifier: &BeatClassifier,
) -> Vec<EventAlarm> {
    let ms = |samples: i64| samples * 1000 / SAMPLE_RATE_HZ as i64;
    let mut out = Vec::new();
    for &(s, r) in spliced {
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
            if let Some(o) = opinion_at(classifier, &s.record.leads, t, risk) {
                out.push(EventAlarm {
                    record: s.record.key.as_str().into(),
                    at_ms: t,
                    reason: o.reason.as_str().into(),
                    probability: o.probability,
                    kind: e.kind,
                    shape: e.shape,
                    paced: s.record.paced,
                    beats: e.beats,
                    risk,
                    confirm_at: CONFIRM_AT,
                });
            }
        }
    }
    out
}

/// The figures of the `alarms`, each confirmed at its own point; `confirm_at` is the point
/// reported (the one served).
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
        count.add(a.confirmed());
    }
    let truth: Vec<bool> = plain.iter().map(|a| a.truth()).collect();
    let probs: Vec<f32> = plain.iter().map(|a| a.probability).collect();
    let risks: Vec<f32> = plain.iter().map(|a| a.risk).collect();
    let finite = |a: f64| a.is_finite().then_some(a);
    out.roc_auc = finite(roc_auc(&truth, &probs));
    out.risk_roc_auc = finite(roc_auc(&truth, &risks));
    out.challenge_score = challenge_of(plain.iter().map(|a| (a.truth(), a.confirmed())));
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
                count.add(a.confirmed());
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
        out.with_shapes_challenge_score =
            challenge_of(alarms.iter().map(|a| (a.truth(), a.confirmed())));
        let mut c = Count::default();
        for a in &runs {
            c.add(a.confirmed());
        }
        out.with_shapes_true_confirmed = Some(c);
    }
    out
}

/// The proxy monitor's alarms pooled: the classical detector's beside those at the spliced
/// events of the same held-out patients, so that short runs in sinus rhythm (the external
/// monitors' commonest true alarm) weigh in the opinion's figures as they do in an ICU's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProxyPooled {
    /// The spliced events pooled: `plain` (runs true, salvos and bigeminy false) or
    /// `with_shapes` (the shaped runs' alarms among the true ones too).
    pub events: &'static str,
    pub alarms: usize,
    pub true_alarms: usize,
    /// True alarms at spliced runs, and their share of the true alarms.
    pub short_runs: usize,
    pub short_runs_share: Option<f64>,
    /// The pool's confirmations.
    #[serde(flatten)]
    pub confirmations: Confirmations,
}

/// The two pools of the `monitor` alarms' opinions (truth, probability, confirmed) and the
/// spliced events' `alarms`: with the plain events, then with the shaped runs too.
pub(crate) fn pooled(monitor: &[(bool, f32, bool)], alarms: &[EventAlarm]) -> Vec<ProxyPooled> {
    let pool = |events: &'static str, with_shapes: bool| {
        let spliced: Vec<&EventAlarm> = alarms
            .iter()
            .filter(|a| with_shapes || a.shape == RunShape::Plain)
            .collect();
        let rows: Vec<(bool, f32, bool)> = monitor
            .iter()
            .copied()
            .chain(
                spliced
                    .iter()
                    .map(|a| (a.truth(), a.probability, a.confirmed())),
            )
            .collect();
        let n_true = rows.iter().filter(|r| r.0).count();
        let short_runs = spliced.iter().filter(|a| a.truth()).count();
        ProxyPooled {
            events,
            alarms: rows.len(),
            true_alarms: n_true,
            short_runs,
            short_runs_share: (n_true > 0).then(|| short_runs as f64 / n_true as f64),
            confirmations: Confirmations::of(&rows),
        }
    };
    if alarms.is_empty() {
        return Vec::new();
    }
    let mut out = vec![pool("plain", false)];
    if alarms.iter().any(|a| a.shape != RunShape::Plain) {
        out.push(pool("with_shapes", true));
    }
    out
}

/// The pools' lines.
pub(crate) fn pooled_text(rows: &[ProxyPooled]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for p in rows {
        let c = &p.confirmations;
        let ci =
            |i: Option<[f64; 2]>| i.map_or(String::new(), |[a, b]| format!(" ({a:.2}-{b:.2})"));
        let share = |c: usize, n: usize| if n > 0 { c as f64 / n as f64 } else { f64::NAN };
        let _ = writeln!(
            s,
            "  pooled with the spliced events ({}): {} alarms, {} true ({} at spliced runs, {:.2}); \
             confirmed true {}/{} = {:.2}{}, false {}/{} = {:.2}{}; ROC-AUC {}; challenge-style {}",
            p.events,
            p.alarms,
            p.true_alarms,
            p.short_runs,
            p.short_runs_share.unwrap_or(f64::NAN),
            c.confirmed_true,
            p.true_alarms,
            share(c.confirmed_true, p.true_alarms),
            ci(c.confirmed_true_interval),
            c.confirmed_false,
            p.alarms - p.true_alarms,
            share(c.confirmed_false, p.alarms - p.true_alarms),
            ci(c.confirmed_false_interval),
            c.roc_auc.map_or("-".into(), |v| format!("{v:.3}")),
            c.challenge_score.map_or("-".into(), |v| format!("{v:.1}")),
        );
    }
    s
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

#[cfg(test)]
mod tests {
    use super::*;

    fn alarm(kind: SpliceKind, shape: RunShape, probability: f32, point: f32) -> EventAlarm {
        EventAlarm {
            record: "vfdb/418".into(),
            at_ms: 60_000,
            reason: "a reason".into(),
            kind,
            shape,
            paced: false,
            beats: 6,
            probability,
            risk: 0.0,
            confirm_at: CONFIRM_AT,
        }
        .at(point)
    }

    #[test]
    fn the_pools_hold_the_monitors_alarms_beside_the_spliced_ones_each_at_its_point() {
        // The monitor: two true alarms (one confirmed), two false (one confirmed).
        let monitor = [
            (true, 0.9, true),
            (true, 0.2, false),
            (false, 0.7, true),
            (false, 0.1, false),
        ];
        let alarms = [
            // A plain run at 0.5: confirmed at its fold's 0.4, not at 0.6.
            alarm(SpliceKind::Run, RunShape::Plain, 0.5, 0.4),
            alarm(SpliceKind::Run, RunShape::Plain, 0.5, 0.6),
            alarm(SpliceKind::Salvo, RunShape::Plain, 0.3, 0.4),
            alarm(SpliceKind::Run, RunShape::Burst, 0.8, 0.4),
        ];
        let pools = pooled(&monitor, &alarms);
        assert_eq!(pools.len(), 2);
        let plain = &pools[0];
        assert_eq!(plain.events, "plain");
        assert_eq!(
            (plain.alarms, plain.true_alarms, plain.short_runs),
            (7, 4, 2)
        );
        let c = &plain.confirmations;
        assert_eq!((c.confirmed_true, c.confirmed_false), (2, 1));
        assert_eq!(plain.short_runs_share, Some(0.5));
        // TP 2, FN 2, FP 1, TN 2: 4 / (4 + 1 + 10).
        let score = c.challenge_score.unwrap();
        assert!((score - 400.0 / 15.0).abs() < 1e-9, "{score}");
        let shaped = &pools[1];
        assert_eq!(shaped.events, "with_shapes");
        assert_eq!(
            (shaped.alarms, shaped.true_alarms, shaped.short_runs),
            (8, 5, 3)
        );
        assert_eq!(shaped.confirmations.confirmed_true, 3);
        // Without spliced events there is nothing to pool; with plain ones alone, one pool.
        assert!(pooled(&monitor, &[]).is_empty());
        assert_eq!(pooled(&monitor, &alarms[..3]).len(), 1);
    }
}
