//! Monitor alarms adjudicated: the measurement the project is judged on outside (real bedside
//! monitors' VT/VF alarms, each true or false by expert review; the served risk read over the
//! seconds before each alarm), made on this project's own records, with the classical
//! detector ([`baseline_scores`](crate::signal::classical::baseline_scores), under its own
//! rule chosen on validation) standing for the monitor.
//!
//! Each raise of the classical detector's alarm on a clean record of the reported part is a
//! **monitor alarm**; it is **true** when it is raised during a reference episode (from its
//! onset less the matcher's onset tolerance to its end plus the grace), as a reviewer judges
//! the rhythm the monitor alarmed on, and then of that episode's kind (VT or VF). An alarm
//! raised before an episode that it stays on into is false: the rhythm it was raised on was
//! not VT or VF. For each monitor alarm raised at `t`, over the
//! windows of the served ensemble ending from `t` - [`LOOK_BACK_SECS`] to `t`:
//!
//! - the **risk** is their highest score; its ROC-AUC (true against false) is the ranking
//!   figure, with a 95 % interval (Hanley and McNeil's standard error);
//! - the **decision** is whether the served alarm (its rule as chosen on validation, or on
//!   the other folds) was raised or on at any of them; the challenge-style score is
//!   `(TP + TN) / (TP + TN + FP + 5 FN)`, the PhysioNet/CinC Challenge 2015's, under which a
//!   missed true alarm costs five false ones and never alarming scores the share of false
//!   alarms.
//!
//! What differs from the external set: the monitor here is a textbook detector, not a
//! commercial one; the served alarm runs over the whole record rather than from 60 s before
//! each alarm; and the true alarms are mostly the sustained VT and VF of vfdb and cudb rather
//! than short runs in sinus rhythm (those are the spliced runs' figure).

use std::sync::Arc;

use serde::Serialize;

use crate::alarm::{AlarmRule, MatchOptions, alarm_episodes};
use crate::core::metrics::roc_auc;
use crate::core::monitor_alarm::{MonitorAlarmKind, Opinion, RISK_LOOKBACK_SECS};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::adjudicate::{CONFIRM_AT, Lead, adjudicate};
use crate::signal::beats::BeatClassifier;
use crate::training::dataset::{EpisodeKind, RecordData};

use super::EvaluateError;
use super::challenge::{Confirmations, challenge_of, hanley_mcneil};
use super::listing::ListedAlarm;
use super::replay::Replay;
use super::triggers::{Trigger, TriggerRow, rows, trigger_of};

/// The served risk and alarm are read over the windows ending this long before a monitor
/// alarm, and at it, s (as the external measurement reads them).
pub(crate) const LOOK_BACK_SECS: i64 = RISK_LOOKBACK_SECS;

/// The monitor alarms of a part and what the served ensemble said at each.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MonitorAlarms {
    /// Monitor alarms, and how many of them are true (of them VT, VF: one raised during
    /// episodes of both kinds counts in both).
    pub alarms: usize,
    pub true_alarms: usize,
    pub true_vt: usize,
    pub true_vf: usize,
    /// The served risk's ROC-AUC, true alarms against false, with its 95 % interval; and the
    /// VT and VF alarms each against the false ones. `None` without both classes.
    pub roc_auc: Option<f64>,
    pub roc_auc_interval: Option<(f64, f64)>,
    pub roc_auc_vt: Option<f64>,
    pub roc_auc_vf: Option<f64>,
    /// The served alarm raised or on before the true alarms, and before the false ones.
    pub on_for_true: usize,
    pub on_for_false: usize,
    /// `100 (TP + TN) / (TP + TN + FP + 5 FN)` of the served alarm's decisions; never alarming
    /// scores `100 false / (false + 5 true)`.
    pub challenge_score: Option<f64>,
    /// Holmes's opinion on each alarm (`signal::adjudicate`, from the samples up to it), where
    /// a beat classifier was replayed.
    pub adjudication: Option<Adjudicated>,
    /// The alarms by what set them off ([`triggers`](super::triggers)), with the opinion's
    /// confirmations at its point.
    pub by_trigger: Vec<TriggerRow>,
}

/// The opinions on the monitor alarms: how well their probability ranks true alarms over
/// false ones, and the confirmations at an operating point chosen on other alarms (the
/// validation part's) or fixed before any was seen ([`CONFIRM_AT`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Adjudicated {
    pub confirm_at: f32,
    /// The confirmations, and the opinion's ranking of all alarms ...
    #[serde(flatten)]
    pub confirmations: Confirmations,
    /// ... of the VT alarms and of the VF alarms, each over the false ones.
    pub roc_auc_vt: Option<f64>,
    pub roc_auc_vf: Option<f64>,
    /// Where the point was chosen (`None`: the default, fixed before any alarm was seen, or
    /// the folds').
    pub point_chosen_on: Option<super::challenge::ChosenPoint>,
    /// Over folds: each fold's point, chosen on the alarms of the records its rules were
    /// chosen on, which confirms that fold's alarms (`confirm_at` is their median, the one
    /// served).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub folds_points: Vec<f32>,
}

/// One monitor alarm, judged.
#[derive(Debug, Clone)]
pub(super) struct Judged {
    /// The record it was raised in, and when (ms from the record's start).
    record: Arc<str>,
    at_ms: i64,
    truth: bool,
    vt: bool,
    vf: bool,
    risk: f32,
    on: bool,
    /// The opinion's probability and reason, where the alarm was adjudicated.
    opinion: Option<(f32, Arc<str>)>,
    /// The point the opinion is confirmed at (its fold's, over folds).
    confirm_at: f32,
    /// What set it off.
    trigger: Trigger,
}

impl Judged {
    /// The alarm with its opinion confirmed at `point`.
    pub(super) fn at(self, point: f32) -> Judged {
        Judged {
            confirm_at: point,
            ..self
        }
    }

    /// The opinion's probability, where the alarm was adjudicated.
    fn probability(&self) -> Option<f32> {
        self.opinion.as_ref().map(|o| o.0)
    }

    fn confirmed(&self) -> Option<bool> {
        self.probability().map(|p| p >= self.confirm_at)
    }

    /// The alarm as the per-alarm listing gives it (adjudicated alarms only).
    pub(super) fn listed(&self) -> Option<ListedAlarm> {
        let (probability, reason) = self.opinion.as_ref()?;
        Some(ListedAlarm {
            source: "monitor",
            record: self.record.to_string(),
            at_s: self.at_ms as f64 / 1000.0,
            truth: self.truth,
            set_off_by: format!("{:?}", self.trigger),
            risk: self.risk,
            probability: *probability,
            confirm_at: self.confirm_at,
            confirmed: self.confirmed().unwrap_or_default(),
            reason: reason.to_string(),
        })
    }
}

/// Each monitor alarm of `reps` (the classical detector's under the rules' first, `monitor`),
/// judged with the served scores `pick` gives and their alarm under the second, `served`;
/// records without both series give none. `records` are the replayed records (in `reps`' order): their annotations say
/// what set each alarm off, and with `adjudicator`, a beat classifier, each alarm also gets
/// Holmes's opinion from their leads up to its raise, as a VT alarm's, confirmed at
/// [`CONFIRM_AT`] until [`Judged::at`] says otherwise.
pub(super) fn judge(
    reps: &[Replay],
    records: &[&RecordData],
    adjudicator: Option<&BeatClassifier>,
    pick: fn(&Replay) -> &[Option<f32>],
    (monitor, served): (AlarmRule, AlarmRule),
    hop_ms: i64,
    matching: MatchOptions,
) -> Result<Vec<Judged>, EvaluateError> {
    let look_back = LOOK_BACK_SECS * 1000;
    let mut judged = Vec::new();
    for (i, r) in reps.iter().enumerate() {
        let series = |s: &[Option<f32>]| -> Vec<(i64, Option<f32>)> {
            r.ends_ms.iter().copied().zip(s.iter().copied()).collect()
        };
        let monitor_series = series(&r.classical);
        let served_series = series(pick(r));
        if monitor_series.is_empty() || served_series.is_empty() {
            continue;
        }
        let monitor_alarms = alarm_episodes(monitor, hop_ms, &monitor_series)?;
        let served_alarms = alarm_episodes(served, hop_ms, &served_series)?;
        let last = served_series.last().map(|&(end, _)| end);
        for &alarm in &monitor_alarms {
            let t = alarm.0;
            let from = t - look_back;
            // True when raised in an episode (from its onset less the tolerance to its end
            // plus the grace), of that episode's kind.
            let during = |(s, e): (i64, i64)| {
                t >= s - matching.onset_tolerance_ms && t < e + matching.grace_ms
            };
            let truth = r.reference.iter().any(|&iv| during(iv));
            let of_kind =
                |k: EpisodeKind| r.by_kind.iter().any(|&(kind, iv)| kind == k && during(iv));
            let span = || {
                served_series
                    .iter()
                    .filter(move |&&(end, _)| end >= from && end <= t)
            };
            let risk = span().filter_map(|&(_, v)| v).fold(0.0f32, f32::max);
            // On at a window of the span: raised at or before it and cleared after it (an
            // alarm still on at the record's end runs to its last window).
            let on = span().any(|&(w, _)| {
                served_alarms
                    .iter()
                    .any(|&(a, b)| a <= w && (w < b || Some(b) == last))
            });
            let opinion = adjudicator.and_then(|c| opinion_at(c, &records[i].leads, t, risk));
            judged.push(Judged {
                record: records[i].key.as_str().into(),
                at_ms: t,
                opinion: opinion.map(|o| (o.probability, o.reason.into())),
                trigger: trigger_of(records[i], t, truth, matching),
                truth,
                vt: of_kind(EpisodeKind::Vt),
                vf: of_kind(EpisodeKind::Vf),
                risk,
                on,
                confirm_at: CONFIRM_AT,
            });
        }
    }
    Ok(judged)
}

/// Holmes's opinion on a monitor alarm raised at `t_ms` into a record of `leads`, with the
/// served `risk` over the windows before it (both proxies' alarms are judged so).
pub(super) fn opinion_at(
    c: &BeatClassifier,
    leads: &[Vec<f32>],
    t_ms: i64,
    risk: f32,
) -> Option<Opinion> {
    let end = usize::try_from(t_ms * SAMPLE_RATE_HZ as i64 / 1000).ok()?;
    let names = ["ECG1", "ECG2", "ECG3"];
    let cut: Vec<Lead> = leads
        .iter()
        .zip(names)
        .filter(|(l, _)| l.len() >= end)
        .map(|(l, name)| Lead {
            name,
            samples: &l[..end],
        })
        .collect();
    // Judged as VT alarms: the proxy's VF rule is the opinion's own VF evidence, so a VF
    // alarm judged as one would confirm itself.
    adjudicate(c, &cut, MonitorAlarmKind::Vt, Some(risk), CONFIRM_AT)
}

/// Each adjudicated alarm of `judged`: its truth, the opinion's probability, and whether it
/// was confirmed at its point.
pub(super) fn decided(judged: &[Judged]) -> Vec<(bool, f32, bool)> {
    judged
        .iter()
        .filter_map(|j| j.probability().map(|p| (j.truth, p, p >= j.confirm_at)))
        .collect()
}

/// Each adjudicated alarm of `judged`: its truth and the opinion's probability.
pub(super) fn labelled(judged: &[Judged]) -> Vec<(bool, f32)> {
    judged
        .iter()
        .filter_map(|j| j.probability().map(|p| (j.truth, p)))
        .collect()
}

/// The figures of the monitor alarms `judged` (of one part, or pooled over folds), each
/// opinion confirmed at its own point; `confirm_at` is the point reported (the one served).
pub(super) fn figures(judged: &[Judged], confirm_at: f32) -> MonitorAlarms {
    let risk = |j: &Judged| j.risk;
    let n_true = judged.iter().filter(|j| j.truth).count();
    let n_false = judged.len() - n_true;
    let tp = judged.iter().filter(|j| j.truth && j.on).count();
    let fp = judged.iter().filter(|j| !j.truth && j.on).count();
    let roc = auc_of(judged, risk, |_| true);
    MonitorAlarms {
        alarms: judged.len(),
        true_alarms: n_true,
        true_vt: judged.iter().filter(|j| j.vt).count(),
        true_vf: judged.iter().filter(|j| j.vf).count(),
        roc_auc: roc,
        roc_auc_interval: roc.map(|a| hanley_mcneil(a, n_true, n_false)),
        roc_auc_vt: auc_of(judged, risk, |j| j.vt),
        roc_auc_vf: auc_of(judged, risk, |j| j.vf),
        on_for_true: tp,
        on_for_false: fp,
        challenge_score: challenge_of(judged.iter().map(|j| (j.truth, j.on))),
        adjudication: adjudicated(judged, confirm_at),
        by_trigger: rows(
            &judged
                .iter()
                .map(|j| (j.trigger, j.truth, j.confirmed()))
                .collect::<Vec<_>>(),
        ),
    }
}

/// The opinions' figures, where every alarm of `judged` has one (and there is one).
fn adjudicated(judged: &[Judged], confirm_at: f32) -> Option<Adjudicated> {
    if judged.is_empty() || judged.iter().any(|j| j.opinion.is_none()) {
        return None;
    }
    let opinion = |j: &Judged| j.probability().unwrap_or(0.0);
    Some(Adjudicated {
        confirm_at,
        confirmations: Confirmations::of(&decided(judged)),
        roc_auc_vt: auc_of(judged, opinion, |j| j.vt),
        roc_auc_vf: auc_of(judged, opinion, |j| j.vf),
        point_chosen_on: None,
        folds_points: Vec::new(),
    })
}

/// The ROC-AUC of `score` over the true alarms `keep` keeps against every false one of
/// `judged`; `None` where it is undefined (no alarm on one side).
fn auc_of(
    judged: &[Judged],
    score: impl Fn(&Judged) -> f32,
    keep: impl Fn(&Judged) -> bool,
) -> Option<f64> {
    let (labels, scores): (Vec<bool>, Vec<f32>) = judged
        .iter()
        .filter(|j| !j.truth || keep(j))
        .map(|j| (j.truth, score(j)))
        .unzip();
    let a = roc_auc(&labels, &scores);
    a.is_finite().then_some(a)
}

/// The report's line.
pub(crate) fn text(m: &MonitorAlarms) -> String {
    let f3 = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    format!(
        "\nmonitor alarms (the classical detector's, clean; the served risk and alarm over the \
         {LOOK_BACK_SECS} s before each): {} alarms, {} true (VT {}, VF {}); risk ROC-AUC {} \
         ({}; VT {}, VF {}); served alarm on for {} true and {} false; challenge-style score {}\n",
        m.alarms,
        m.true_alarms,
        m.true_vt,
        m.true_vf,
        f3(m.roc_auc),
        m.roc_auc_interval
            .map_or("-".into(), |(a, b)| format!("{a:.3}-{b:.3}")),
        f3(m.roc_auc_vt),
        f3(m.roc_auc_vf),
        m.on_for_true,
        m.on_for_false,
        m.challenge_score.map_or("-".into(), |v| format!("{v:.1}")),
    ) + &m.adjudication.as_ref().map_or(String::new(), |a| {
        let c = &a.confirmations;
        let share = |k: usize, iv: Option<[f64; 2]>| match iv {
            Some([lo, hi]) => format!("{k} ({lo:.2}-{hi:.2})"),
            None => k.to_string(),
        };
        format!(
            "Holmes's opinion on each (from the samples up to it): ROC-AUC {} ({}; VT {}, VF {}); \
             at {:.2}{}, confirmed {} true and {} false; challenge-style score {}\n",
            f3(c.roc_auc),
            c.roc_auc_interval
                .map_or("-".into(), |(lo, hi)| format!("{lo:.3}-{hi:.3}")),
            f3(a.roc_auc_vt),
            f3(a.roc_auc_vf),
            a.confirm_at,
            match (&a.point_chosen_on, a.folds_points.as_slice()) {
                (Some(c), _) => format!(
                    " (chosen on validation's {} proxy alarms, {} true)",
                    c.alarms, c.true_alarms
                ),
                (None, []) => " (the default)".into(),
                (None, points) => format!(
                    " (the median of the folds' points, each chosen on other folds' alarms: {}; \
                     over folds, each fold's alarms are confirmed at its own)",
                    points
                        .iter()
                        .map(|p| format!("{p:.2}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            share(c.confirmed_true, c.confirmed_true_interval),
            share(c.confirmed_false, c.confirmed_false_interval),
            c.challenge_score.map_or("-".into(), |v| format!("{v:.1}")),
        )
    }) + &triggers_text(&m.by_trigger)
}

/// The line of the alarms by what set them off.
fn triggers_text(rows: &[TriggerRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let cells: Vec<String> = rows
        .iter()
        .map(|r| {
            let confirmed = r
                .confirmed
                .map_or(String::new(), |c| format!(", {c} confirmed"));
            format!(
                "{} {} ({} true{confirmed})",
                r.trigger, r.alarms, r.true_alarms
            )
        })
        .collect();
    format!("  by what set them off: {}\n", cells.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(truth: bool, risk: f32, on: bool) -> Judged {
        Judged {
            record: "cudb/cu01".into(),
            at_ms: 60_000,
            truth,
            vt: truth,
            vf: false,
            risk,
            on,
            opinion: None,
            confirm_at: CONFIRM_AT,
            trigger: Trigger::Other,
        }
    }

    #[test]
    fn each_opinion_is_confirmed_at_its_own_point() {
        // Two true alarms of opinion 0.5: one from a fold that confirms at 0.4, one from a
        // fold that confirms at 0.6; a false one of 0.45 at 0.4.
        let with = |truth: bool, p: f32, at: f32| {
            Judged {
                opinion: Some((p, "a reason".into())),
                ..j(truth, 0.0, false)
            }
            .at(at)
        };
        let judged = [
            with(true, 0.5, 0.4),
            with(true, 0.5, 0.6),
            with(false, 0.45, 0.4),
        ];
        let a = figures(&judged, 0.5).adjudication.unwrap();
        let c = &a.confirmations;
        assert_eq!((c.confirmed_true, c.confirmed_false), (1, 1));
        assert_eq!(a.confirm_at, 0.5, "the point reported is the caller's");
        // All at 0.4: both true ones confirmed.
        let all: Vec<Judged> = judged.iter().map(|x| x.clone().at(0.4)).collect();
        let a = figures(&all, 0.4).adjudication.unwrap();
        let c = &a.confirmations;
        assert_eq!((c.confirmed_true, c.confirmed_false), (2, 1));
    }

    #[test]
    fn the_figures_follow_the_challenges_score_and_the_ranking() {
        // Two true alarms (one caught), three false (one alarmed).
        let judged = [
            j(true, 0.9, true),
            j(true, 0.2, false),
            j(false, 0.3, true),
            j(false, 0.1, false),
            j(false, 0.0, false),
        ];
        let m = figures(&judged, CONFIRM_AT);
        assert_eq!(
            (m.alarms, m.true_alarms, m.true_vt, m.true_vf),
            (5, 2, 2, 0)
        );
        assert_eq!((m.on_for_true, m.on_for_false), (1, 1));
        // TP 1, TN 2, FP 1, FN 1: 3 / (3 + 1 + 5).
        assert!((m.challenge_score.unwrap() - 100.0 * 3.0 / 9.0).abs() < 1e-9);
        // 0.9 beats all three false; 0.2 beats two of three: 5 of 6 pairs.
        assert!((m.roc_auc.unwrap() - 5.0 / 6.0).abs() < 1e-9);
        let (lo, hi) = m.roc_auc_interval.unwrap();
        assert!(lo < 5.0 / 6.0 && hi <= 1.0 && lo >= 0.0, "{lo}-{hi}");
        assert_eq!(m.roc_auc_vf, None, "no VF alarm");
        // Never alarming scores the false alarms' share under the Challenge's weights.
        let quiet: Vec<Judged> = judged
            .iter()
            .map(|x| Judged {
                on: false,
                ..x.clone()
            })
            .collect();
        let q = figures(&quiet, CONFIRM_AT);
        assert!((q.challenge_score.unwrap() - 100.0 * 3.0 / 13.0).abs() < 1e-9);
    }

    /// A 120-s record's replay (window ends 30, 35, ..., 120 s) with these classical and
    /// served scores, one per hop, and one VT episode from 58 to 70 s.
    fn replay_with(classical: &[f32], served: &[f32]) -> (Replay, RecordData) {
        use crate::core::window::SAMPLE_RATE_HZ;
        use crate::training::dataset::{Database, Episode};
        let hz = SAMPLE_RATE_HZ;
        let rec = RecordData {
            db: Database::Vfdb,
            key: "vfdb/999".into(),
            group: "vfdb/999".into(),
            leads: vec![vec![0.0; 120 * hz]],
            episodes: vec![Episode {
                kind: EpisodeKind::Vt,
                onset: 58 * hz as i64,
                confirmed: 62 * hz as i64,
                end: 70 * hz as i64,
            }],
            noise: vec![Vec::new()],
            beats: Vec::new(),
            paced: false,
            ectopy: Vec::new(),
        };
        let det = super::super::replay::Detectors {
            ensemble: None,
            classical: false,
            beats: None,
            first_slot: 0,
        };
        let mut r = super::super::replay::replay(&rec, &rec.leads, 30 * hz, 5 * hz, det).unwrap();
        assert_eq!(r.ends_ms.len(), classical.len());
        r.classical = classical.iter().map(|&v| Some(v)).collect();
        r.ensemble = served.iter().map(|&v| Some(v)).collect();
        r.reference = vec![(58_000, 70_000)];
        r.by_kind = vec![(EpisodeKind::Vt, (58_000, 70_000))];
        (r, rec)
    }

    #[test]
    fn each_monitor_alarm_is_judged_at_its_raise_over_the_windows_before_it() {
        let at = |hops: &[usize], v: f32| {
            let mut s = vec![0.0f32; 19];
            for &k in hops {
                s[k] = v;
            }
            s
        };
        // The monitor alarms at 60 s (in the VT), 80 s (the episode's end plus the grace: not
        // in it) and 100 s.
        let classical = at(&[6, 7, 10, 14], 1.0);
        // The served alarm on from 40 s, cleared at 50 s by a score below its clear threshold
        // (so off at all of the first alarm's windows, 50-60 s); scores of 0.2 at 50-60 s; on
        // again at 90 s.
        let mut served = at(&[2, 3, 12], 1.0);
        for v in &mut served[4..=6] {
            *v = 0.2;
        }
        let rule = AlarmRule {
            on: 0.5,
            off: 0.25,
            k: 1,
            n: 1,
        };
        let (r, rec) = replay_with(&classical, &served);
        let judged = judge(
            &[r],
            &[&rec],
            None,
            Replay::ensemble_scores,
            (rule, rule),
            5_000,
            MatchOptions::default(),
        )
        .unwrap();
        let seen: Vec<(bool, bool, f32, bool)> = judged
            .iter()
            .map(|j| (j.truth, j.vt, j.risk, j.on))
            .collect();
        assert_eq!(
            seen,
            [
                (true, true, 0.2, false),
                (false, false, 0.0, false),
                (false, false, 1.0, true)
            ]
        );
        let m = figures(&judged, CONFIRM_AT);
        assert_eq!(
            (m.alarms, m.true_alarms, m.on_for_true, m.on_for_false),
            (3, 1, 0, 1)
        );
        // The true alarm's trigger is the 12-s VT episode (vfdb labels no beats), the false
        // ones' nothing the annotations hold.
        let by: Vec<(&str, usize, usize)> = m
            .by_trigger
            .iter()
            .map(|r| (r.trigger, r.alarms, r.true_alarms))
            .collect();
        assert_eq!(by, [("vt_run_unlabelled", 1, 1), ("other", 2, 0)]);
        // TP 0, TN 1, FP 1, FN 1.
        assert!((m.challenge_score.unwrap() - 100.0 / 7.0).abs() < 1e-9);
        assert_eq!(m.roc_auc, Some(0.5));
    }

    #[test]
    fn an_interval_narrows_with_more_alarms() {
        let (a, b) = hanley_mcneil(0.8, 10, 30);
        let (c, d) = hanley_mcneil(0.8, 100, 300);
        assert!(a < c && d < b && c < 0.8 && d > 0.8);
    }
}
