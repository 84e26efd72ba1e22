//! The beat classifier's data and fit: the beats [`describe`] finds in a record's windows,
//! labelled ventricular or not from the record's beat annotations (databases that label
//! ventricular beats only: mitdb, svdb, nstdb), and the [`BeatClassifier`] fitted on them.
//!
//! A detected beat takes the label of the annotated beat within [`MATCH_SECS`] of it; one with
//! none there is a false detection (noise, a tall T wave) and is labelled not ventricular, so
//! the classifier learns to leave artefacts out of runs.

use std::collections::HashSet;

use serde::Serialize;

use crate::core::logistic::Logistic;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::beats::{BeatClassifier, FEATURES, VENTRICULAR_AT, describe};

use super::dataset::RecordData;

/// A detected beat and an annotated one this close are the same beat, s.
const MATCH_SECS: f64 = 0.15;
/// Ridge penalty of the fit, per beat.
const RIDGE: f64 = 1e-4;

/// Labelled beats: features, and whether each is ventricular.
#[derive(Debug, Default, Clone)]
pub(crate) struct BeatRows {
    pub xs: Vec<[f64; FEATURES]>,
    pub ys: Vec<bool>,
}

impl BeatRows {
    /// The beats of `rec`'s windows of `window` samples ending every `hop` samples (none when
    /// its database does not label ventricular beats).
    pub(crate) fn add_record(&mut self, rec: &RecordData, window: usize, hop: usize) {
        if !rec.db.labels_ventricular_beats() || hop == 0 {
            return;
        }
        let ventricular: HashSet<i64> = rec
            .ectopy
            .iter()
            .filter(|(a, b)| b - a == 1)
            .map(|&(a, _)| a)
            .collect();
        let tol = (MATCH_SECS * SAMPLE_RATE_HZ as f64) as i64;
        let len = rec.len();
        for end in (window..=len).step_by(hop) {
            let start = end - window;
            let leads: Vec<&[f32]> = rec.leads.iter().map(|l| &l[start..end]).collect();
            for b in describe(&leads) {
                let at = (start + b.sample) as i64;
                let i = rec.beats.partition_point(|&x| x < at);
                let nearest = [i.checked_sub(1), Some(i)]
                    .into_iter()
                    .flatten()
                    .filter_map(|j| rec.beats.get(j))
                    .min_by_key(|&&x| (x - at).abs())
                    .filter(|&&x| (x - at).abs() <= tol);
                self.xs.push(b.features);
                self.ys
                    .push(nearest.is_some_and(|x| ventricular.contains(x)));
            }
        }
    }

    /// Fits the classifier on these beats.
    pub(crate) fn fit(&self) -> BeatClassifier {
        let ys: Vec<f64> = self.ys.iter().map(|&y| y as u8 as f64).collect();
        BeatClassifier {
            model: Logistic::fit(&self.xs, &ys, RIDGE),
        }
    }

    /// How `c` calls these beats.
    pub(crate) fn judge(&self, c: &BeatClassifier) -> BeatFigures {
        let mut f = BeatFigures::default();
        for (x, &y) in self.xs.iter().zip(&self.ys) {
            let called = c.model.probability(x) >= VENTRICULAR_AT;
            match (y, called) {
                (true, true) => f.true_positive += 1,
                (true, false) => f.false_negative += 1,
                (false, true) => f.false_positive += 1,
                (false, false) => f.true_negative += 1,
            }
        }
        f
    }
}

/// A beat classifier's calls against the annotations.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BeatFigures {
    pub true_positive: usize,
    pub false_negative: usize,
    pub false_positive: usize,
    pub true_negative: usize,
}

impl BeatFigures {
    /// Sensitivity to ventricular beats.
    pub fn sensitivity(&self) -> f64 {
        self.true_positive as f64 / (self.true_positive + self.false_negative).max(1) as f64
    }

    /// Positive predictivity of a ventricular call.
    pub fn positive_predictivity(&self) -> f64 {
        self.true_positive as f64 / (self.true_positive + self.false_positive).max(1) as f64
    }
}
