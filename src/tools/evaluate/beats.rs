//! Counting beats beside the ensemble (`holmes evaluate --beats`): a [`BeatClassifier`] fitted
//! on the **train** part's annotated beats, its hop-by-hop run of ventricular beats replayed
//! with the ensemble, and the larger of the two scores as one more series whose alarm rule is
//! chosen on validation as the ensemble's is. A run of [`VT_MIN_BEATS`] scores 1, so any rule
//! raises on it; below its `on` threshold, the series is the ensemble's.
//!
//! [`VT_MIN_BEATS`]: crate::signal::classical::VT_MIN_BEATS

use serde::Serialize;

use crate::signal::beats::BeatClassifier;
use crate::training::beats::{BeatFigures, BeatRows};
use crate::training::dataset::{RecordData, Split, SplitName};

use super::{EvaluateError, EvaluateOptions, load_part};

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
}

/// Fits the classifier on the train part's beats in windows of `window` samples.
pub(crate) fn fit(
    opts: &EvaluateOptions,
    split: &Split,
    window: usize,
) -> Result<(BeatClassifier, BeatFigures), EvaluateError> {
    let recs = load_part(opts, split, SplitName::Train)?;
    let hop = FIT_HOP_SECS * crate::core::window::SAMPLE_RATE_HZ;
    let mut rows = BeatRows::default();
    for r in &recs {
        rows.add_record(r, window, hop);
    }
    let c = rows.fit();
    let figures = rows.judge(&c);
    tracing::info!(
        beats = rows.ys.len(),
        ventricular = rows.ys.iter().filter(|&&y| y).count(),
        sensitivity = figures.sensitivity(),
        positive_predictivity = figures.positive_predictivity(),
        weights = ?c.model.weights,
        "Beat classifier fitted on the train part"
    );
    Ok((c, figures))
}

/// How `c` calls the beats of `recs` (windows of `window` samples).
pub(crate) fn judge(c: &BeatClassifier, recs: &[RecordData], window: usize) -> BeatFigures {
    let hop = FIT_HOP_SECS * crate::core::window::SAMPLE_RATE_HZ;
    let mut rows = BeatRows::default();
    for r in recs {
        rows.add_record(r, window, hop);
    }
    let f = rows.judge(c);
    tracing::info!(
        beats = rows.ys.len(),
        sensitivity = f.sensitivity(),
        positive_predictivity = f.positive_predictivity(),
        "Beat classifier on the validation part"
    );
    f
}
