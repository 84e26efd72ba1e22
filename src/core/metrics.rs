//! Metrics for binary risk scores: ROC-AUC, PR-AUC (average precision), F1 and accuracy at the
//! Youden threshold, and the mean-probability ensemble of several models' stored predictions.
//!
//! Used by [`train`](crate::training::train) for early stopping and manifests, by `holmes zoo list`, and
//! by the [`composer`](crate::composer)'s report.

use std::collections::BTreeMap;

/// Area under the ROC curve (the Mann-Whitney statistic, ties counted half). `NaN` when one
/// class is missing.
pub(crate) fn roc_auc(labels: &[bool], scores: &[f32]) -> f64 {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let (mut rank_sum, mut npos) = (0.0f64, 0usize);
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && scores[idx[j + 1]] == scores[idx[i]] {
            j += 1;
        }
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            if labels[k] {
                rank_sum += avg_rank;
                npos += 1;
            }
        }
        i = j + 1;
    }
    let nneg = labels.len() - npos;
    if npos == 0 || nneg == 0 {
        return f64::NAN;
    }
    (rank_sum - (npos * (npos + 1)) as f64 / 2.0) / (npos as f64 * nneg as f64)
}

/// Average precision: the mean of precision at each positive, scores taken in decreasing
/// order (tied scores form one threshold). `NaN` without positives.
pub(crate) fn pr_auc(labels: &[bool], scores: &[f32]) -> f64 {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let npos = labels.iter().filter(|&&l| l).count();
    if npos == 0 {
        return f64::NAN;
    }
    let (mut tp, mut seen, mut ap) = (0usize, 0usize, 0.0f64);
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && scores[idx[j + 1]] == scores[idx[i]] {
            j += 1;
        }
        let new_tp = idx[i..=j].iter().filter(|&&k| labels[k]).count();
        tp += new_tp;
        seen += j - i + 1;
        ap += new_tp as f64 * tp as f64 / seen as f64;
        i = j + 1;
    }
    ap / npos as f64
}

/// The threshold that maximises Youden's J (sensitivity + specificity - 1) when a score at or
/// above it counts as positive; among equal J the highest threshold. `None` when one class is
/// missing.
pub(crate) fn youden_threshold(labels: &[bool], scores: &[f32]) -> Option<f32> {
    let npos = labels.iter().filter(|&&l| l).count();
    let nneg = labels.len() - npos;
    if npos == 0 || nneg == 0 {
        return None;
    }
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut tp, mut fp) = (0usize, 0usize);
    let mut best: Option<(f64, f32)> = None;
    let mut i = 0;
    while i < idx.len() {
        let t = scores[idx[i]];
        while i < idx.len() && scores[idx[i]] == t {
            if labels[idx[i]] {
                tp += 1;
            } else {
                fp += 1;
            }
            i += 1;
        }
        let j = tp as f64 / npos as f64 - fp as f64 / nneg as f64;
        if best.is_none_or(|(b, _)| j > b) {
            best = Some((j, t));
        }
    }
    best.map(|b| b.1)
}

/// Counts and rates of a thresholded score (`score >= threshold` is positive).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct AtThreshold {
    pub(crate) threshold: f32,
    /// Harmonic mean of precision and sensitivity (0 when there is no true positive).
    pub(crate) f1: f64,
    /// Share of windows classified correctly.
    pub(crate) accuracy: f64,
    pub(crate) sensitivity: f64,
    pub(crate) specificity: f64,
}

/// F1, accuracy, sensitivity and specificity of `scores >= threshold` (`NaN` rates when a
/// class is missing; an empty input gives `NaN` accuracy).
pub(crate) fn at_threshold(labels: &[bool], scores: &[f32], threshold: f32) -> AtThreshold {
    let (mut tp, mut fp, mut tn, mut fneg) = (0usize, 0usize, 0usize, 0usize);
    for (&l, &s) in labels.iter().zip(scores) {
        match (l, s >= threshold) {
            (true, true) => tp += 1,
            (false, true) => fp += 1,
            (false, false) => tn += 1,
            (true, false) => fneg += 1,
        }
    }
    let f = |a: usize, b: usize| a as f64 / b as f64;
    AtThreshold {
        threshold,
        f1: if tp == 0 {
            0.0
        } else {
            f(2 * tp, 2 * tp + fp + fneg)
        },
        accuracy: f(tp + tn, labels.len()),
        sensitivity: f(tp, tp + fneg),
        specificity: f(tn, tn + fp),
    }
}

/// Mean-probability ensemble: per window id, the mean of the members that scored it.
/// Each member is `(ids, labels, probs)`; returns `(labels, scores)` over the union of ids.
pub(crate) fn ensemble_mean<'a>(
    members: impl IntoIterator<Item = (&'a [String], &'a [u8], &'a [f32])>,
) -> (Vec<bool>, Vec<f32>) {
    let mut acc: BTreeMap<&str, (bool, f64, usize)> = BTreeMap::new();
    for (ids, labels, probs) in members {
        for ((id, &l), &p) in ids.iter().zip(labels).zip(probs) {
            let e = acc.entry(id).or_insert((l != 0, 0.0, 0));
            e.1 += p as f64;
            e.2 += 1;
        }
    }
    acc.values()
        .map(|&(l, s, n)| (l, (s / n as f64) as f32))
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_by_hand() {
        let l = [false, false, true, true];
        assert_eq!(roc_auc(&l, &[0.1, 0.4, 0.35, 0.8]), 0.75);
        assert_eq!(roc_auc(&l, &[0.5; 4]), 0.5);
        assert!(roc_auc(&[true, true], &[0.1, 0.2]).is_nan());
        // ranking: 0.8(+) 0.4(-) 0.35(+) 0.1(-): AP = (1/1 + 2/3) / 2
        assert!((pr_auc(&l, &[0.1, 0.4, 0.35, 0.8]) - (1.0 + 2.0 / 3.0) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn youden_threshold_and_its_f1_by_hand() {
        // Descending: 0.9(+) 0.7(+) 0.6(-) 0.3(+) 0.1(-); J at each cut:
        // 0.9: 1/3 - 0; 0.7: 2/3 - 0; 0.6: 2/3 - 1/2; 0.3: 1 - 1/2; 0.1: 1 - 1.
        let l = [false, false, true, true, true];
        let s = [0.1, 0.6, 0.3, 0.7, 0.9];
        assert_eq!(youden_threshold(&l, &s), Some(0.7));
        // At 0.7: TP 2, FP 0, TN 2, FN 1: F1 = 4/5, accuracy 4/5.
        let m = at_threshold(&l, &s, 0.7);
        assert!((m.f1 - 0.8).abs() < 1e-12 && (m.accuracy - 0.8).abs() < 1e-12);
        assert!((m.sensitivity - 2.0 / 3.0).abs() < 1e-12 && m.specificity == 1.0);
        // Ties in J (0.8 and 0.35 both give 1/2): the higher threshold.
        let l = [false, false, true, true];
        assert_eq!(youden_threshold(&l, &[0.1, 0.4, 0.35, 0.8]), Some(0.8));
        // Tied scores form one cut; one class missing has no threshold.
        assert_eq!(youden_threshold(&l, &[0.5; 4]), Some(0.5));
        assert_eq!(youden_threshold(&[true, true], &[0.1, 0.2]), None);
        // No positive predicted: F1 0, accuracy the negatives' share.
        let m = at_threshold(&l, &[0.1, 0.2, 0.3, 0.4], 0.9);
        assert_eq!((m.f1, m.accuracy), (0.0, 0.5));
    }

    #[test]
    fn ensemble_means_over_present_members() {
        let a_ids = ["w1".to_string(), "w2".to_string()];
        let b_ids = ["w2".to_string()];
        let (l, s) = ensemble_mean([
            (&a_ids[..], &[1u8, 0][..], &[0.8f32, 0.2][..]),
            (&b_ids[..], &[0u8][..], &[0.6f32][..]),
        ]);
        assert_eq!(l, vec![true, false]);
        assert!((s[0] - 0.8).abs() < 1e-6 && (s[1] - 0.4).abs() < 1e-6);
    }
}
