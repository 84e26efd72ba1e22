//! Counting beats beside the ensemble (`holmes evaluate --beats`): a [`BeatClassifier`] fitted
//! on the **train** part's annotated beats, its hop-by-hop run level replayed with the
//! ensemble, and a **beat rule** ([`BeatRule`]): at a hop whose window holds a run of
//! [`VT_MIN_BEATS`] beats called ventricular at the rule's probability, where the two QRS
//! detectors agree well enough, the ensemble's score is raised to 1, so any alarm rule raises
//! on it; where a run holds only below the rule's probability, to at least `RUN_RISK` (0.2,
//! `signal::beats::counter`) times the probability it holds at; elsewhere the series is the
//! ensemble's. The beat rule and the alarm rule are chosen
//! together on validation: each beat rule of [`candidates`] gets its alarm rule as the
//! ensemble's does, among the rules that clear above a run short of the call (so that such a
//! window neither raises an alarm nor holds one on), and the pair with the fewest false alarms
//! at the target is kept.
//!
//! [`VT_MIN_BEATS`]: crate::signal::classical::VT_MIN_BEATS

use serde::Serialize;

use crate::alarm::{ThresholdChoice, ThresholdSearch};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::beats::{BeatClassifier, BeatRule, CALL_GRID, RUN_RISK_MAX};
use crate::training::beats::{BeatFigures, BeatRows};
use crate::training::dataset::{Database, Split, SplitName};

use super::condition::gross_figures;
use super::episodes::EpisodeFigures;
use super::replay::Replay;
use super::{EvaluateError, EvaluateOptions, choose_rule, load_part_of};

/// Beats for the fit are taken from windows this far apart, s: each beat lies in two windows
/// of 30 s, against two templates.
const FIT_HOP_SECS: usize = 15;

/// The fitted classifier and how it calls beats.
#[derive(Debug, Clone, Serialize)]
pub struct BeatReport {
    pub classifier: BeatClassifier,
    /// Its calls on the beats it was fitted on...
    pub train: BeatFigures,
    /// ...and on the validation part's.
    pub validation: BeatFigures,
    /// The beat rule chosen on validation.
    pub rule: Option<BeatRule>,
}

/// Fits the classifier on the train part's beats in windows of `window` samples (as
/// `beat_fitting` says, the fits' logits averaged), choosing each fit's epoch on the
/// validation part's (records of the databases that label ventricular beats;
/// `--max-records` keeps the shortest of those).
pub(crate) fn fit(
    opts: &EvaluateOptions,
    split: &Split,
    window: usize,
) -> Result<BeatReport, EvaluateError> {
    let rows = |part| -> Result<BeatRows, EvaluateError> {
        let mut rows = BeatRows::default();
        let labelled = |db: Database| db.labels_ventricular_beats();
        for (i, r) in load_part_of(opts, split, part, labelled)?
            .iter()
            .enumerate()
        {
            rows.add_record(r, window, FIT_HOP_SECS * SAMPLE_RATE_HZ);
            if part == SplitName::Train {
                let hop = FIT_HOP_SECS * SAMPLE_RATE_HZ;
                rows.add_augmented(r, window, hop, i as u64);
            }
        }
        if !rows.ys.iter().any(|&y| y) || rows.ys.iter().all(|&y| y) {
            return Err(EvaluateError::NoBeats(part.as_str()));
        }
        Ok(rows)
    };
    let (train, validation) = (rows(SplitName::Train)?, rows(SplitName::Validation)?);
    let classifier = train.fit(&validation, opts.beat_fitting);
    let report = BeatReport {
        train: train.judge(&classifier),
        validation: validation.judge(&classifier),
        classifier,
        rule: None,
    };
    tracing::info!(
        beats = train.ys.len(),
        ventricular = train.ys.iter().filter(|&&y| y).count(),
        train_sensitivity = report.train.sensitivity(),
        train_positive_predictivity = report.train.positive_predictivity(),
        validation_sensitivity = report.validation.sensitivity(),
        validation_positive_predictivity = report.validation.positive_predictivity(),
        "Beat classifier fitted on the train part"
    );
    Ok(report)
}

/// The beat rules tried: every call probability of [`CALL_GRID`], ungated and behind two bSQI
/// gates.
pub fn candidates() -> Vec<BeatRule> {
    [0.0, 0.5, 0.8]
        .into_iter()
        .flat_map(|min_bsqi| {
            CALL_GRID
                .iter()
                .map(move |&call_at| BeatRule { call_at, min_bsqi })
        })
        .collect()
}

/// Sets each replay's `with_beats` series under `rule`, and where it raised a score, the
/// run's onset.
pub(crate) fn apply(reps: &mut [Replay], rule: BeatRule) {
    for r in reps {
        (r.with_beats, r.with_beats_onsets) = r
            .ensemble
            .iter()
            .zip(&r.beat_runs)
            .zip(&r.ends_ms)
            .map(|((&e, &b), &end)| {
                if rule.sees_run(b) {
                    (Some(1.0), b.onset_ms(end, rule.call_at))
                } else {
                    (e.map(|s| s.max(rule.run_risk(b))), None)
                }
            })
            .unzip();
    }
}

/// `search` for scores beside the counter: a window with a run short of the call scores up
/// to [`RUN_RISK_MAX`], so only the rules that clear above it are tried, and under the rule
/// chosen such a window neither raises an alarm nor holds one on.
pub(crate) fn beside_counter(search: &ThresholdSearch) -> ThresholdSearch {
    search.clone().clearing_above(RUN_RISK_MAX)
}

/// A beat rule tried on validation, with the alarm rule chosen for it.
#[derive(Debug, Clone, Serialize)]
pub struct BeatTrial {
    pub beat_rule: BeatRule,
    pub choice: ThresholdChoice,
}

/// Chooses the beat rule and its alarm rule on the validation replays: among the pairs whose
/// rule reaches the target both by count and by EC57's overlap (what the composer asks of a
/// validated rule, `ValidationSummary::reached`), the one with the fewest false alarms; where
/// none does, the pair that meets the target by count with the fewest false alarms (else the
/// most sensitive); ties to the stricter call. Leaves the chosen rule applied, and gives what
/// the pair reached on validation by EC57's overlap beside it.
pub(crate) fn choose(
    val: &mut [Replay],
    search: &ThresholdSearch,
) -> Result<(BeatRule, ThresholdChoice, Vec<BeatTrial>, EpisodeFigures), EvaluateError> {
    let search = &beside_counter(search);
    let mut trials = Vec::new();
    let mut overlap = Vec::new();
    for beat_rule in candidates() {
        apply(val, beat_rule);
        let choice = choose_rule(val, Replay::with_beats_scores, search)?;
        let figures = gross_figures(
            val,
            Replay::with_beats_scores,
            Replay::with_beats_run_onsets,
            choice.rule,
            search.hop_ms,
            search.matching,
        )?;
        tracing::info!(
            call_at = beat_rule.call_at,
            min_bsqi = beat_rule.min_bsqi,
            on = choice.rule.on,
            met = choice.met_target,
            detected = choice.detected,
            false_alarms = choice.false_alarms,
            ec57_sensitivity = figures.se,
            "Beat rule tried on validation"
        );
        let by_overlap = figures
            .se
            .is_none_or(|se| se >= search.target_sensitivity - 1e-9);
        overlap.push((choice.met_target && by_overlap, figures));
        trials.push(BeatTrial { beat_rule, choice });
    }
    let best = (0..trials.len())
        .min_by(|&i, &j| {
            let (a, b) = (&trials[i], &trials[j]);
            overlap[j]
                .0
                .cmp(&overlap[i].0)
                .then(a.choice.rank().cmp(&b.choice.rank()))
                .then(b.beat_rule.call_at.total_cmp(&a.beat_rule.call_at))
                .then(i.cmp(&j))
        })
        .expect("candidates are not empty");
    apply(val, trials[best].beat_rule);
    let figures = overlap[best].1;
    let best = trials[best].clone();
    Ok((best.beat_rule, best.choice, trials, figures))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::beats::RunEvidence;

    #[test]
    fn a_beat_rule_raises_the_score_only_where_it_sees_a_run() {
        let rule = BeatRule {
            call_at: 0.8,
            min_bsqi: 0.5,
        };
        // A run found at every call probability up to `level`.
        let e = |level: f32, bsqi| RunEvidence {
            bsqi,
            firsts_ago: CALL_GRID.map(|g| (level > 0.0 && g <= level).then_some(1_500)),
        };
        // (run level, bSQI): a run at 0.9 in readable signal; at 0.6 only; in noise; none.
        assert!(rule.sees_run(e(0.9, 0.9)));
        assert!(
            !rule.sees_run(e(0.6, 0.9)),
            "called only below the rule's probability"
        );
        assert!(!rule.sees_run(e(0.9, 0.3)), "the detectors disagree");
        assert!(!rule.sees_run(e(0.0, 1.0)));
        let ungated = BeatRule {
            call_at: 0.5,
            min_bsqi: 0.0,
        };
        assert!(ungated.sees_run(e(0.5, 0.0)));
        assert!(!ungated.sees_run(e(0.0, 0.0)), "no run at any probability");
    }

    #[test]
    fn every_call_probability_is_tried_behind_each_gate() {
        let c = candidates();
        assert_eq!(c.len(), 3 * CALL_GRID.len());
        assert!(c.iter().any(|r| r.min_bsqi == 0.0 && r.call_at == 0.5));
        assert!(c.iter().any(|r| r.min_bsqi == 0.8 && r.call_at == 0.99));
    }
}
