//! The challenge-style score of confirming monitor alarms, `(TP + TN) / (TP + TN + FP + 5 FN)`,
//! under which a missed true alarm costs five false confirmations; the point of a grid it
//! chooses, and the point chosen with what it was chosen on ([`ChosenPoint`]). Chosen on the
//! validation part by [`confirm_point`](super::confirm_point); the proxy monitor's alarms
//! ([`spliced_alarms`](super::spliced_alarms)) are scored with it and
//! [`monitor_alarms`](super::monitor_alarms) reports the point.

use serde::Serialize;

use crate::core::metrics::roc_auc;
use crate::core::stats::wilson_interval;

/// The points tried: 0.05 to 0.95 by 0.05.
const GRID: std::ops::RangeInclusive<u32> = 1..=19;
const STEP: f32 = 0.05;

/// The challenge-style score (0-100) of confirming the `labelled` alarms (truth, probability)
/// at `point`; `None` without alarms.
pub(crate) fn challenge_score(labelled: &[(bool, f32)], point: f32) -> Option<f64> {
    challenge_of(labelled.iter().map(|&(truth, p)| (truth, p >= point)))
}

/// The challenge-style score (0-100) of `decided` alarms (truth, confirmed), each decided at
/// its own point; `None` without alarms.
pub(crate) fn challenge_of(decided: impl Iterator<Item = (bool, bool)>) -> Option<f64> {
    let (mut tp, mut tn, mut fp, mut fn_) = (0usize, 0usize, 0usize, 0usize);
    for d in decided {
        match d {
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

/// What confirming alarms came to, each at its own point: the true and the false alarms
/// confirmed, each share with its 95 % Wilson interval; the opinion's ROC-AUC, true over
/// false, with Hanley and McNeil's 95 % interval; the challenge-style score. The monitor's
/// alarms, the proxy pooled with the spliced events and the textbook monitor report it alike.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Confirmations {
    pub confirmed_true: usize,
    pub confirmed_true_interval: Option<[f64; 2]>,
    pub confirmed_false: usize,
    pub confirmed_false_interval: Option<[f64; 2]>,
    pub roc_auc: Option<f64>,
    pub roc_auc_interval: Option<(f64, f64)>,
    pub challenge_score: Option<f64>,
}

impl Confirmations {
    /// The figures of `alarms`: each its truth, the opinion's probability, and whether it was
    /// confirmed at its point.
    pub(crate) fn of(alarms: &[(bool, f32, bool)]) -> Confirmations {
        let n_true = alarms.iter().filter(|a| a.0).count();
        let n_false = alarms.len() - n_true;
        let tp = alarms.iter().filter(|a| a.0 && a.2).count();
        let fp = alarms.iter().filter(|a| !a.0 && a.2).count();
        let (truth, probs): (Vec<bool>, Vec<f32>) = alarms.iter().map(|a| (a.0, a.1)).unzip();
        let auc = roc_auc(&truth, &probs);
        let roc = auc.is_finite().then_some(auc);
        Confirmations {
            confirmed_true: tp,
            confirmed_true_interval: wilson_interval(tp, n_true),
            confirmed_false: fp,
            confirmed_false_interval: wilson_interval(fp, n_false),
            roc_auc: roc,
            roc_auc_interval: roc.map(|a| hanley_mcneil(a, n_true, n_false)),
            challenge_score: challenge_of(alarms.iter().map(|a| (a.0, a.2))),
        }
    }
}

/// The 95 % interval of an ROC-AUC `a` over `pos` positives and `neg` negatives from Hanley
/// and McNeil's (1982) standard error, clipped to 0..1.
pub(crate) fn hanley_mcneil(a: f64, pos: usize, neg: usize) -> (f64, f64) {
    let (p, n) = (pos as f64, neg as f64);
    let q1 = a / (2.0 - a);
    let q2 = 2.0 * a * a / (1.0 + a);
    let var = (a * (1.0 - a) + (p - 1.0) * (q1 - a * a) + (n - 1.0) * (q2 - a * a)) / (p * n);
    let se = var.max(0.0).sqrt();
    ((a - 1.96 * se).max(0.0), (a + 1.96 * se).min(1.0))
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
