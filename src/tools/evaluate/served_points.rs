//! The served operating points chosen over folds (`holmes evaluate --folds K`): each
//! threshold the median of the folds' own, each fold's chosen on the other folds only
//! ([`folds`](super::folds)); [`save`](super::save) keeps them as what serves.

use serde::Serialize;

use crate::alarm::AlarmRule;
use crate::signal::beats::BeatRule;

/// The served operating points chosen over folds: each threshold the median of the folds'
/// (each fold's chosen on the other folds only), the lower middle one for an even count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FoldsMedian {
    pub beat_rule: BeatRule,
    pub alarm_rule: AlarmRule,
    /// The opinion's point on monitor alarms.
    pub confirm_at: f32,
}

/// The lower middle of `v` (not empty).
fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).expect("thresholds are numbers"));
    v[(v.len() - 1) / 2]
}

/// The folds' median beat rule, alarm rule and opinion point; `None` without folds. Each
/// threshold is the median of the folds' own (so the call is one the folds chose), the
/// alarm's off at most its on and its k at most its n.
pub(crate) fn folds_median(rows: &[(BeatRule, AlarmRule, f32)]) -> Option<FoldsMedian> {
    if rows.is_empty() {
        return None;
    }
    Some(FoldsMedian {
        beat_rule: BeatRule {
            call_at: median(rows.iter().map(|r| r.0.call_at).collect()),
            min_bsqi: median(rows.iter().map(|r| r.0.min_bsqi).collect()),
        },
        alarm_rule: median_rule(&rows.iter().map(|r| r.1).collect::<Vec<_>>())?,
        confirm_at: median(rows.iter().map(|r| r.2).collect()),
    })
}

/// The folds' median alarm rule: each threshold the median of the folds' own, its off at
/// most its on and its k at most its n; `None` without folds.
pub(crate) fn median_rule(rules: &[AlarmRule]) -> Option<AlarmRule> {
    if rules.is_empty() {
        return None;
    }
    let on = median(rules.iter().map(|r| r.on).collect());
    let n = median(rules.iter().map(|r| r.n).collect());
    Some(AlarmRule {
        on,
        off: median(rules.iter().map(|r| r.off).collect()).min(on),
        k: median(rules.iter().map(|r| r.k).collect()).min(n),
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(call_at: f32, on: f32, off: f32, k: u32, n: u32) -> (BeatRule, AlarmRule, f32) {
        let beats = BeatRule {
            call_at,
            min_bsqi: 0.0,
        };
        // The opinion's point follows the call here, so that its median is checked too.
        (beats, AlarmRule { on, off, k, n }, call_at / 2.0)
    }

    #[test]
    fn the_served_points_are_the_folds_medians() {
        assert_eq!(folds_median(&[]), None);
        let rows = [
            row(0.9, 0.60, 0.30, 1, 1),
            row(0.5, 0.44, 0.40, 2, 3),
            row(0.7, 0.56, 0.20, 1, 1),
            row(0.99, 0.48, 0.45, 2, 2),
            row(0.8, 0.52, 0.25, 1, 2),
        ];
        let m = folds_median(&rows).unwrap();
        assert_eq!(m.beat_rule.call_at, 0.8);
        assert_eq!((m.alarm_rule.on, m.alarm_rule.off), (0.52, 0.30));
        assert_eq!((m.alarm_rule.k, m.alarm_rule.n), (1, 2));
        assert_eq!(m.confirm_at, 0.4);
        // An even count takes the lower middle; off never above on, k never above n.
        let m = folds_median(&[row(0.5, 0.4, 0.45, 3, 2), row(0.9, 0.6, 0.5, 3, 2)]).unwrap();
        assert_eq!(m.beat_rule.call_at, 0.5);
        assert_eq!(m.alarm_rule.on, 0.4);
        assert_eq!(m.alarm_rule.off, 0.4);
        assert_eq!((m.alarm_rule.k, m.alarm_rule.n), (2, 2));
    }
}
