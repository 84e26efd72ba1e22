//! The operating point of Holmes's opinion on monitor alarms: the probability at and above
//! which an alarm is confirmed, chosen on alarms the reported figures never saw (the
//! validation part's) for the challenge-style score `(TP + TN) / (TP + TN + FP + 5 FN)`, under
//! which a missed true alarm costs five false confirmations ([`challenge`](super::challenge)).

use crate::alarm::AlarmRule;
use crate::alarm::MatchOptions;
use crate::signal::beats::BeatClassifier;
use crate::training::dataset::RecordData;

use super::EvaluateError;
use super::challenge::{ChosenPoint, challenge_score, choose_point};
use super::replay::{Detectors, Replay, replay};
use super::{monitor_alarms, spliced, spliced_alarms};

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

/// The point [`choose_point`](super::challenge::choose_point) finds on the validation part's proxy alarms, each adjudicated
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
        let pairs: Vec<_> = parts.iter().zip(&reps).collect();
        let alarms = spliced_alarms::opinions(&pairs, Replay::ensemble_scores, classifier);
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
