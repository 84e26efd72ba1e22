//! The challenge-style score of confirming monitor alarms, `(TP + TN) / (TP + TN + FP + 5 FN)`,
//! under which a missed true alarm costs five false confirmations; the point of a grid it
//! chooses, and the point chosen with what it was chosen on ([`ChosenPoint`]). Chosen on the
//! validation part by [`confirm_point`](super::confirm_point); the proxy monitor's alarms
//! ([`spliced_alarms`](super::spliced_alarms)) are scored with it and
//! [`monitor_alarms`](super::monitor_alarms) reports the point.

use serde::Serialize;

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
