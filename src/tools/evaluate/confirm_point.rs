//! The operating point of Holmes's opinion on monitor alarms: the probability at and above
//! which an alarm is confirmed, chosen on alarms the reported figures never saw (the
//! validation part's) for the challenge-style score `(TP + TN) / (TP + TN + FP + 5 FN)`, under
//! which a missed true alarm costs five false confirmations.

use serde::Serialize;

use crate::alarm::AlarmRule;
use crate::alarm::MatchOptions;
use crate::signal::beats::BeatClassifier;
use crate::training::dataset::RecordData;

use super::EvaluateError;
use super::replay::{Detectors, Replay, replay};
use super::{monitor_alarms, spliced, spliced_alarms};

/// The points tried: 0.05 to 0.95 by 0.05.
const GRID: std::ops::RangeInclusive<u32> = 1..=19;
const STEP: f32 = 0.05;

/// The challenge-style score (0-100) of confirming the `labelled` alarms (truth, probability)
/// at `point`; `None` without alarms.
pub(crate) fn challenge_score(labelled: &[(bool, f32)], point: f32) -> Option<f64> {
    let (mut tp, mut tn, mut fp, mut fn_) = (0usize, 0usize, 0usize, 0usize);
    for &(truth, p) in labelled {
        match (truth, p >= point) {
            (true, true) => tp += 1,
            (true, false) => fn_ += 1,
            (false, true) => fp += 1,
            (false, false) => tn += 1,
        }
    }
    let d = tp + tn + fp + 5 * fn_;
    (d > 0).then(|| 100.0 * (tp + tn) as f64 / d as f64)
}

/// The point of the grid with the highest challenge-style score on `labelled`, the lowest
/// such point where several tie (the most confirmations: a missed true alarm is the costlier
/// error); `None` without alarms.
pub(crate) fn choose_point(labelled: &[(bool, f32)]) -> Option<f32> {
    let mut best: Option<(f64, f32)> = None;
    for k in GRID {
        let point = k as f32 * STEP;
        let Some(score) = challenge_score(labelled, point) else {
            continue;
        };
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, point));
        }
    }
    best.map(|(_, p)| p)
}

/// The point chosen, and the alarms it was chosen on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChosenPoint {
    pub point: f32,
    /// The validation part's proxy alarms: all, true, and the score at the point.
    pub alarms: usize,
    pub true_alarms: usize,
    pub challenge_score: f64,
}

/// The validation part as replayed for the rules' choice.
pub(super) struct Validation<'a> {
    pub recs: &'a [RecordData],
    pub replays: &'a [Replay],
    /// How the spliced validation records are replayed (the served ensemble).
    pub det: Detectors<'a>,
    /// The served scores.
    pub pick: fn(&Replay) -> &[Option<f32>],
    /// The classical detector's rule: the proxy monitor.
    pub monitor: AlarmRule,
    /// With a seed, the spliced events' proxy alarms too.
    pub spliced_seed: Option<u64>,
    pub window: usize,
    pub hop: usize,
}

/// The point [`choose_point`] finds on the validation part's proxy alarms, each adjudicated
/// with `classifier`; `None` without alarms.
pub(super) fn on_validation(
    v: &Validation<'_>,
    classifier: &BeatClassifier,
    matching: MatchOptions,
) -> Result<Option<ChosenPoint>, EvaluateError> {
    let hop_ms = (v.hop * 1000 / crate::core::window::SAMPLE_RATE_HZ) as i64;
    let records: Vec<&RecordData> = v.recs.iter().collect();
    let judged = monitor_alarms::judge(
        v.replays,
        &records,
        Some(classifier),
        v.pick,
        (v.monitor, v.monitor),
        hop_ms,
        matching,
    )?;
    let mut labelled = monitor_alarms::labelled(&judged);
    if let Some(seed) = v.spliced_seed {
        let parts = spliced::splice_plain(v.recs, seed);
        let reps = parts
            .iter()
            .map(|s| replay(&s.record, &s.record.leads, v.window, v.hop, v.det))
            .collect::<Result<Vec<_>, _>>()?;
        let alarms = spliced_alarms::opinions(&parts, &reps, Replay::ensemble_scores, classifier);
        labelled.extend(alarms.iter().map(|a| (a.truth(), a.probability())));
    }
    let Some(point) = choose_point(&labelled) else {
        return Ok(None);
    };
    let chosen = ChosenPoint {
        point,
        alarms: labelled.len(),
        true_alarms: labelled.iter().filter(|l| l.0).count(),
        challenge_score: challenge_score(&labelled, point).unwrap_or(0.0),
    };
    tracing::info!(
        point,
        alarms = chosen.alarms,
        true_alarms = chosen.true_alarms,
        "Opinion's operating point chosen on validation"
    );
    Ok(Some(chosen))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_point_weighs_a_missed_true_alarm_as_five_false_confirmations() {
        // Two true alarms at 0.3 and 0.9, five false at 0.1, 0.2, 0.35, 0.4 and 0.6.
        let l = [
            (true, 0.3),
            (true, 0.9),
            (false, 0.1),
            (false, 0.2),
            (false, 0.35),
            (false, 0.4),
            (false, 0.6),
        ];
        // At 0.3: TP 2, FP 3, TN 2: 4 / 7. At 0.65: TP 1, FN 1, TN 5: 6 / 11.
        assert!((challenge_score(&l, 0.3).unwrap() - 400.0 / 7.0).abs() < 1e-9);
        assert!((challenge_score(&l, 0.65).unwrap() - 600.0 / 11.0).abs() < 1e-9);
        // 0.25 and 0.3 tie (nothing lies between them): the lower is kept.
        assert_eq!(choose_point(&l), Some(0.25));
        assert_eq!(choose_point(&[]), None);
    }
}
