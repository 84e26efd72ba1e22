//! Ranking metrics for binary risk scores: ROC-AUC, PR-AUC (average precision), and the
//! mean-probability ensemble of several models' stored predictions.
//!
//! Used by [`train`](crate::train) for early stopping and manifests, and by `holmes zoo list`.

use std::collections::BTreeMap;

/// Area under the ROC curve (the Mann-Whitney statistic, ties counted half). `NaN` when one
/// class is missing.
pub fn roc_auc(labels: &[bool], scores: &[f32]) -> f64 {
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
pub fn pr_auc(labels: &[bool], scores: &[f32]) -> f64 {
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

/// Mean-probability ensemble: per window id, the mean of the members that scored it.
/// Each member is `(ids, labels, probs)`; returns `(labels, scores)` over the union of ids.
pub fn ensemble_mean<'a>(
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
