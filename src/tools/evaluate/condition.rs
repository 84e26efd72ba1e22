//! One detector's figures over the replayed records of one condition (clean, or a noise
//! level): its alarm rule run over each record's score series, the alarms matched with the
//! reference episodes, window ROC-AUC / PR-AUC over the labelled hops, time to alarm by kind,
//! and what the annotations say at each false alarm.

use std::collections::BTreeMap;

use crate::alarm::matching::{AlarmTiming, overlaps, timing};
use crate::alarm::{AlarmRule, MatchOptions, alarm_episodes, annotate_onsets};
use crate::core::metrics::{pr_auc, roc_auc};
use crate::training::dataset::{EpisodeKind, Label};

use super::episodes::{self, EpisodeFigures, KindSensitivity, RecordComparison, compare_annotated};
use super::replay::Replay;
use super::{Condition, EvaluateError, FalseAlarmCauses, RecordRow, WindowMetrics, causes, report};

/// The gross EC57 episode figures of one detector under `rule` over clean replays (the
/// validation part's, to record what a chosen rule reached there).
pub(crate) fn gross_figures(
    reps: &[Replay],
    pick: fn(&Replay) -> &[Option<f32>],
    onsets: fn(&Replay) -> &[Option<i64>],
    rule: AlarmRule,
    hop_ms: i64,
    matching: MatchOptions,
) -> Result<EpisodeFigures, EvaluateError> {
    let c = condition(reps, pick, onsets, rule, hop_ms, None, matching)?;
    Ok(c.summary.gross_figures)
}

/// One detector's figures over the replayed records of one condition: its score series
/// (`pick`) and where each hop's score came with an arrhythmia's onset (`onsets`, one per hop
/// or none: the alarms raised there begin at it in the EC57 comparison).
pub(crate) fn condition(
    reps: &[Replay],
    pick: fn(&Replay) -> &[Option<f32>],
    onsets: fn(&Replay) -> &[Option<i64>],
    rule: AlarmRule,
    hop_ms: i64,
    snr_db: Option<f32>,
    matching: MatchOptions,
) -> Result<Condition, EvaluateError> {
    let (mut labels, mut scores, mut unscored) = (Vec::new(), Vec::new(), 0);
    let mut records = Vec::with_capacity(reps.len());
    let mut kinds: BTreeMap<&'static str, Vec<AlarmTiming>> = BTreeMap::new();
    let mut ec57_kinds: BTreeMap<&'static str, KindSensitivity> = BTreeMap::new();
    for r in reps {
        let s = pick(r);
        for (&l, &v) in r.labels.iter().zip(s) {
            match (l, v) {
                (Label::Unsure, _) => {}
                (_, None) => unscored += 1,
                (l, Some(v)) => {
                    labels.push(l == Label::Positive);
                    scores.push(v);
                }
            }
        }
        let series: Vec<(i64, Option<f32>)> =
            r.ends_ms.iter().copied().zip(s.iter().copied()).collect();
        let alarms = alarm_episodes(rule, hop_ms, &series)?;
        let dated: Vec<(i64, i64)> = r
            .ends_ms
            .iter()
            .zip(onsets(r))
            .filter_map(|(&t, o)| o.map(|o| (t, o)))
            .collect();
        let annotated = annotate_onsets(&alarms, &dated);
        // The hops the beat counter raised (each has its run's onset), where the detector
        // has a counter; the rule's last n hops reach back (n - 1/2) hops from a raise.
        let counted: Vec<i64> = dated.iter().map(|&(t, _)| t).collect();
        let reach = (2 * i64::from(rule.n) - 1) * hop_ms / 2;
        let counted = (!onsets(r).is_empty()).then_some((&counted[..], reach));
        for &(kind, iv) in &r.by_kind {
            let name = match kind {
                EpisodeKind::Vt => "vt",
                EpisodeKind::Vf => "vf",
            };
            kinds
                .entry(name)
                .or_default()
                .push(timing(iv, &alarms, matching));
            ec57_kinds
                .entry(name)
                .or_default()
                .add(annotated.iter().any(|&a| overlaps(a, iv)));
        }
        records.push(RecordRow {
            record: r.key.clone(),
            comparison: RecordComparison {
                paced: r.paced,
                ..compare_annotated(&r.reference, &alarms, &annotated, r.monitored_ms, matching)?
            },
            false_alarm_causes: causes::classify(
                &alarms,
                &r.reference,
                &r.noise_ms,
                &r.ectopy_ms,
                counted,
                matching,
            ),
        });
    }
    let finite = |x: f64| x.is_finite().then_some(x);
    let comparisons: Vec<RecordComparison> = records.iter().map(|r| r.comparison.clone()).collect();
    let mut false_alarm_causes = FalseAlarmCauses::default();
    for r in &records {
        false_alarm_causes.add(&r.false_alarm_causes);
    }
    Ok(Condition {
        snr_db,
        windows: WindowMetrics {
            windows: labels.len(),
            positives: labels.iter().filter(|&&l| l).count(),
            unscored,
            roc_auc: finite(roc_auc(&labels, &scores)),
            pr_auc: finite(pr_auc(&labels, &scores)),
            roc_curve: report::roc_curve(&labels, &scores),
        },
        summary: episodes::summarize(&comparisons),
        false_alarm_causes,
        by_kind: kinds
            .into_iter()
            .map(|(k, t)| (k, episodes::time_to_alarm(&t)))
            .collect(),
        ec57_by_kind: ec57_kinds,
        records,
    })
}
