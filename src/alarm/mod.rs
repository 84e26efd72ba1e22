//! The risk alarm rule: when a bed's score series raises a VT/VF risk alarm and when that alarm
//! clears. One sans-IO state machine ([`AlarmState`]), fed one observation per hop: the
//! board runs one per bed (live, with the served plan's rule for the serving ensemble, see
//! `composer::rule`), `holmes evaluate` replays scores through it ([`alarm_episodes`]) and
//! `holmes score` marks each window with it, so all three raise and clear at the same hops.
//! [`matching`] says when an
//! alarm is in time for a reference episode and when it is false (for the threshold search and
//! the evaluation alike); [`threshold`] picks the rule on a validation split, and [`rules`]
//! keeps the rules so chosen with the zoo, one per ensemble, hop and window. Technical alarms
//! (lead off, stale, lost) are not here. It uses nothing of the application: scores and times
//! in, changes out.
//!
//! # The rule
//!
//! - **Raise** when at least `k` of the scores of the last `n` hops are at or above `on`
//!   (persistence: one high score does not alarm unless `k = 1`).
//! - **Clear** when at least `k` of the scores of the last `n` hops are below `off`
//!   (hysteresis, and the same persistence: one low score in the middle of an episode, a
//!   noisy window say, does not end the alarm; alarms split less and flap less).
//! - Each raise or clear starts a fresh count: scores seen before a transition count toward
//!   neither the next raise nor the next clear, so with `k <= n/2` a window holding both high
//!   and low scores cannot raise and clear on consecutive hops from the same scores.
//!
//! # Silence
//!
//! A hop without a score (`None`: a missing or partial window, a lead off) is no evidence either
//! way: it neither raises nor clears, and it holds a place in the last `n` hops, so silence
//! dilutes persistence. "The last `n` hops" is measured in time, not in calls: a score counts
//! while it is less than `n - 1/2` hops old (half a hop of jitter tolerated). A gap with no
//! observations at all (a bed that dropped off, a hole in a record) therefore forgets the
//! scores before it once it lasts `n` hops, exactly as `n` silent hops would. An active alarm
//! is **not** cleared by silence: a lost signal says nothing about the rhythm having ended, and
//! the technical alarm (lead off, lost) is what tells the nurse the signal is gone; the alarm
//! clears only on `k` low scores after the signal returns.

pub mod matching;
pub mod rules;
pub mod threshold;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

pub use matching::MatchOptions;
pub use threshold::{
    DelayLimits, ThresholdChoice, ThresholdSearch, ValidationRecord, choose_threshold,
};

/// Longest persistence, in hops: at a hop of a few seconds, more hops than this look back
/// about a minute or longer, which no time-to-alarm target of seconds survives.
pub const MAX_PERSISTENCE_HOPS: u32 = 32;

/// Why a rule, a hop or a threshold search is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AlarmError {
    #[error("alarm thresholds need 0 <= off <= on <= 1, not on {on}, off {off}")]
    Thresholds { on: f32, off: f32 },
    #[error("alarm persistence needs 1 <= k <= n <= {max}, not k {k}, n {n}")]
    Persistence { k: u32, n: u32, max: u32 },
    #[error("the hop must be a positive number of ms, not {0}")]
    Hop(i64),
    #[error("the target episode sensitivity must be in 0..=1, not {0}")]
    Target(f64),
    #[error("the off/on ratio must be in 0..=1, not {0}")]
    OffRatio(f32),
    #[error("the threshold search has no candidate on-thresholds or no (k, n) pairs")]
    NoCandidates,
}

/// A risk alarm rule: thresholds with hysteresis and a k-of-n persistence. Chosen on the
/// validation split ([`choose_threshold`]); to be stored with the plan, so that a new zoo or
/// ensemble brings its own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlarmRule {
    /// A score at or above this counts toward raising the alarm.
    pub on: f32,
    /// A score below this counts toward clearing it; `off <= on` (the gap is the hysteresis).
    pub off: f32,
    /// Scores needed among the last `n` hops: at or above `on` to raise, below `off` to clear.
    pub k: u32,
    /// Hops the rule looks back over, the current one included (see the module's "Silence").
    pub n: u32,
}

impl AlarmRule {
    /// Checks `0 <= off <= on <= 1` and `1 <= k <= n <= MAX_PERSISTENCE_HOPS`.
    pub fn validate(&self) -> Result<(), AlarmError> {
        // Written so that NaN fails too.
        if !(0.0 <= self.off && self.off <= self.on && self.on <= 1.0) {
            return Err(AlarmError::Thresholds {
                on: self.on,
                off: self.off,
            });
        }
        if !(1 <= self.k && self.k <= self.n && self.n <= MAX_PERSISTENCE_HOPS) {
            return Err(AlarmError::Persistence {
                k: self.k,
                n: self.n,
                max: MAX_PERSISTENCE_HOPS,
            });
        }
        Ok(())
    }

    /// The rule in words: `on >= 0.42 in 1 of 1 hops, clear below 0.21`.
    pub fn words(&self) -> String {
        format!(
            "on >= {} in {} of {} hops, clear below {}",
            self.on, self.k, self.n, self.off
        )
    }
}

impl std::str::FromStr for AlarmRule {
    type Err = String;

    /// `on,off,k,n`, e.g. `0.6,0.3,2,3`, checked as [`AlarmRule::validate`] does.
    fn from_str(s: &str) -> Result<AlarmRule, String> {
        let v: Vec<&str> = s.split(',').map(str::trim).collect();
        let [on, off, k, n] = v[..] else {
            return Err(format!("{s:?}: on,off,k,n (e.g. 0.6,0.3,2,3)"));
        };
        let bad = |what: &str| format!("{s:?}: {what} is not a number");
        let r = AlarmRule {
            on: on.parse().map_err(|_| bad("on"))?,
            off: off.parse().map_err(|_| bad("off"))?,
            k: k.parse().map_err(|_| bad("k"))?,
            n: n.parse().map_err(|_| bad("n"))?,
        };
        r.validate().map_err(|e| format!("{s:?}: {e}"))?;
        Ok(r)
    }
}

/// A transition of a bed's risk alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum AlarmChange {
    /// The rule was met at the hop of `onset_ms` (the time the nurse is alerted).
    Raised { onset_ms: i64 },
    /// The alarm raised at `raised_ms` cleared at the hop of `at_ms`.
    Cleared { at_ms: i64, raised_ms: i64 },
}

/// One bed's risk alarm: the rule applied to its score series, one observation per hop.
#[derive(Debug, Clone)]
pub struct AlarmState {
    rule: AlarmRule,
    hop_ms: i64,
    /// Scores since the last transition that are still within the last `n` hops, oldest
    /// first, with their hop's time.
    recent: VecDeque<(i64, f32)>,
    /// Time of the latest observation, scored or not.
    last_ms: Option<i64>,
    /// When the active alarm was raised; `None` while no alarm is active.
    raised_ms: Option<i64>,
}

impl AlarmState {
    /// A bed with no alarm and no history, for scores that arrive every `hop_ms`.
    pub fn new(rule: AlarmRule, hop_ms: i64) -> Result<AlarmState, AlarmError> {
        rule.validate()?;
        if hop_ms <= 0 {
            return Err(AlarmError::Hop(hop_ms));
        }
        Ok(AlarmState {
            rule,
            hop_ms,
            recent: VecDeque::with_capacity(rule.n as usize),
            last_ms: None,
            raised_ms: None,
        })
    }

    /// A bed whose alarm, raised at `raised_ms`, carries over from an earlier rule (the
    /// served rule changed while it was active): it stays active and clears under this rule;
    /// no score counts toward it yet, since the earlier scores were judged by another rule.
    pub fn carried(rule: AlarmRule, hop_ms: i64, raised_ms: i64) -> Result<AlarmState, AlarmError> {
        let mut s = AlarmState::new(rule, hop_ms)?;
        s.raised_ms = Some(raised_ms);
        s.last_ms = Some(raised_ms);
        Ok(s)
    }

    /// The rule this state applies.
    pub fn rule(&self) -> AlarmRule {
        self.rule
    }

    /// The hop ending at `t_ms` with its score (`None`: no score this hop; a NaN counts as
    /// none). Returns the transition it causes, if any. An observation not later than the
    /// previous one is ignored: each hop is observed once, and a late score cannot rewrite what
    /// the ward already showed.
    pub fn observe(&mut self, t_ms: i64, score: Option<f32>) -> Option<AlarmChange> {
        if self.last_ms.is_some_and(|last| t_ms <= last) {
            return None;
        }
        self.last_ms = Some(t_ms);
        // Scores of hops at t - (n-1)·hop stay, at t - n·hop leave; half a hop of slack.
        let span = self.rule.n as i64 * self.hop_ms - self.hop_ms / 2;
        while self.recent.front().is_some_and(|&(t, _)| t_ms - t >= span) {
            self.recent.pop_front();
        }
        if let Some(s) = score.filter(|s| !s.is_nan()) {
            self.recent.push_back((t_ms, s));
            if self.recent.len() > self.rule.n as usize {
                self.recent.pop_front();
            }
        }
        let k = self.rule.k as usize;
        match self.raised_ms {
            None => {
                let high = self
                    .recent
                    .iter()
                    .filter(|&&(_, s)| s >= self.rule.on)
                    .count();
                (high >= k).then(|| {
                    self.recent.clear();
                    self.raised_ms = Some(t_ms);
                    AlarmChange::Raised { onset_ms: t_ms }
                })
            }
            Some(raised_ms) => {
                let low = self
                    .recent
                    .iter()
                    .filter(|&&(_, s)| s < self.rule.off)
                    .count();
                (low >= k).then(|| {
                    self.recent.clear();
                    self.raised_ms = None;
                    AlarmChange::Cleared {
                        at_ms: t_ms,
                        raised_ms,
                    }
                })
            }
        }
    }

    /// When the active alarm was raised, or `None` when no alarm is active. The dashboard
    /// shows this onset and the alarm's age from it.
    pub fn active_since(&self) -> Option<i64> {
        self.raised_ms
    }

    /// Whether an alarm is active.
    pub fn is_active(&self) -> bool {
        self.raised_ms.is_some()
    }
}

/// Replays a score series (one `(t_ms, score)` per hop, ascending) through the rule and returns
/// its alarms as `(raised_ms, cleared_ms)` intervals, ascending and disjoint. An alarm still
/// active at the end runs to the last time of the series (zero-length if raised at it).
pub fn alarm_episodes(
    rule: AlarmRule,
    hop_ms: i64,
    series: &[(i64, Option<f32>)],
) -> Result<Vec<(i64, i64)>, AlarmError> {
    let mut state = AlarmState::new(rule, hop_ms)?;
    let mut out = Vec::new();
    for &(t, score) in series {
        if let Some(AlarmChange::Cleared { at_ms, raised_ms }) = state.observe(t, score) {
            out.push((raised_ms, at_ms));
        }
    }
    if let (Some(raised), Some(&(last, _))) = (state.active_since(), series.last()) {
        out.push((raised, last.max(raised)));
    }
    Ok(out)
}

/// The alarms of [`alarm_episodes`] as the detector annotates them: an alarm raised at a hop
/// whose score came with the time its arrhythmia began (`onsets`: `(hop, onset)` in ms, the
/// first beat of a VT run the beat counter found, as the dashboard gives the alarm's onset)
/// starts there, no earlier than the previous alarm's end; the others start where they were
/// raised. This is what EC57's episode comparison reads (an analyser's episode annotation
/// marks where the rhythm began); the time to alarm stays the time raised.
pub fn annotate_onsets(alarms: &[(i64, i64)], onsets: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut prev_end = i64::MIN;
    alarms
        .iter()
        .map(|&(raised, end)| {
            let onset = onsets
                .iter()
                .find(|&&(hop, _)| hop == raised)
                .map_or(raised, |&(_, onset)| onset.max(prev_end).min(raised));
            prev_end = end;
            (onset, end)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alarm_raised_on_a_dated_run_starts_at_the_run() {
        let alarms = [(10_000, 20_000), (25_000, 30_000), (40_000, 45_000)];
        // The second alarm's run began at 12 s, inside the first alarm: it starts at the first
        // one's end; the third's began at 37 s; a dated hop that raised nothing is ignored.
        let onsets = [(25_000, 12_000), (35_000, 33_000), (40_000, 37_000)];
        assert_eq!(
            annotate_onsets(&alarms, &onsets),
            vec![(10_000, 20_000), (20_000, 30_000), (37_000, 45_000)]
        );
        // An onset after the raise (not a run's start) does not move it.
        assert_eq!(
            annotate_onsets(&[(10_000, 20_000)], &[(10_000, 11_000)]),
            vec![(10_000, 20_000)]
        );
    }

    #[test]
    fn a_rule_reads_from_on_off_k_n() {
        let r: AlarmRule = "0.6, 0.3,2,3".parse().unwrap();
        assert_eq!(
            r,
            AlarmRule {
                on: 0.6,
                off: 0.3,
                k: 2,
                n: 3
            }
        );
        for bad in ["0.6,0.3,2", "0.3,0.6,1,1", "x,0.3,1,1", "0.6,0.3,3,2"] {
            assert!(bad.parse::<AlarmRule>().is_err(), "{bad}");
        }
    }

    const HOP: i64 = 2_000;

    fn rule(on: f32, off: f32, k: u32, n: u32) -> AlarmRule {
        AlarmRule { on, off, k, n }
    }

    /// Scores at 0, HOP, 2·HOP, ...
    fn series(scores: &[Option<f32>]) -> Vec<(i64, Option<f32>)> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as i64 * HOP, s))
            .collect()
    }

    #[test]
    fn validation_refuses_inverted_thresholds_and_bad_persistence() {
        assert!(rule(0.7, 0.5, 2, 3).validate().is_ok());
        assert!(rule(0.7, 0.7, 1, 1).validate().is_ok());
        assert!(matches!(
            rule(0.5, 0.7, 1, 1).validate(),
            Err(AlarmError::Thresholds { .. })
        ));
        assert!(rule(1.2, 0.5, 1, 1).validate().is_err());
        assert!(rule(0.7, -0.1, 1, 1).validate().is_err());
        assert!(rule(f32::NAN, 0.5, 1, 1).validate().is_err());
        assert!(matches!(
            rule(0.7, 0.5, 0, 1).validate(),
            Err(AlarmError::Persistence { .. })
        ));
        assert!(rule(0.7, 0.5, 3, 2).validate().is_err());
        assert!(
            rule(0.7, 0.5, 1, MAX_PERSISTENCE_HOPS + 1)
                .validate()
                .is_err()
        );
        assert_eq!(
            AlarmState::new(rule(0.7, 0.5, 1, 1), 0).err(),
            Some(AlarmError::Hop(0))
        );
    }

    #[test]
    fn the_rule_round_trips_through_json_and_refuses_unknown_fields() {
        let r = rule(0.8, 0.6, 2, 3);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<AlarmRule>(&text).unwrap(), r);
        let extra = r#"{"on":0.8,"off":0.6,"k":2,"n":3,"hop":2}"#;
        assert!(serde_json::from_str::<AlarmRule>(extra).is_err());
    }

    #[test]
    fn a_fresh_state_is_quiet() {
        let s = AlarmState::new(rule(0.7, 0.5, 2, 3), HOP).unwrap();
        assert!(!s.is_active());
        assert_eq!(s.active_since(), None);
    }

    #[test]
    fn crossing_raises_at_the_hop_that_reaches_on() {
        let mut s = AlarmState::new(rule(0.7, 0.5, 1, 1), HOP).unwrap();
        assert_eq!(s.observe(0, Some(0.69)), None);
        assert_eq!(
            s.observe(HOP, Some(0.7)),
            Some(AlarmChange::Raised { onset_ms: HOP })
        );
        assert!(s.is_active());
        assert_eq!(s.active_since(), Some(HOP));
        // Still high: no second raise.
        assert_eq!(s.observe(2 * HOP, Some(0.9)), None);
    }

    #[test]
    fn persistence_needs_k_high_scores_within_the_last_n_hops() {
        let r = rule(0.7, 0.5, 2, 3);
        // High, low, high: 2 of the last 3 hops at the third.
        let eps = alarm_episodes(r, HOP, &series(&[Some(0.8), Some(0.6), Some(0.8)])).unwrap();
        assert_eq!(eps, vec![(2 * HOP, 2 * HOP)]);
        // High, low, low, high: the first high has left the last 3 hops at the fourth.
        let eps = alarm_episodes(
            r,
            HOP,
            &series(&[Some(0.8), Some(0.6), Some(0.6), Some(0.8)]),
        )
        .unwrap();
        assert!(eps.is_empty(), "{eps:?}");
        // k = n = 3: three in a row.
        let r = rule(0.7, 0.5, 3, 3);
        let mut s = AlarmState::new(r, HOP).unwrap();
        assert_eq!(s.observe(0, Some(0.9)), None);
        assert_eq!(s.observe(HOP, Some(0.9)), None);
        assert_eq!(
            s.observe(2 * HOP, Some(0.9)),
            Some(AlarmChange::Raised { onset_ms: 2 * HOP })
        );
    }

    #[test]
    fn hysteresis_holds_between_off_and_on_and_clearing_needs_k_low_scores() {
        let mut s = AlarmState::new(rule(0.7, 0.5, 2, 3), HOP).unwrap();
        s.observe(0, Some(0.9));
        assert_eq!(
            s.observe(HOP, Some(0.9)),
            Some(AlarmChange::Raised { onset_ms: HOP })
        );
        // Between off and on: holds, however long.
        for i in 2..10 {
            assert_eq!(s.observe(i * HOP, Some(0.6)), None);
        }
        // One low score (a noisy window) does not clear...
        assert_eq!(s.observe(10 * HOP, Some(0.1)), None);
        assert_eq!(s.observe(11 * HOP, Some(0.6)), None);
        // ...a second within the last 3 hops does.
        assert_eq!(
            s.observe(12 * HOP, Some(0.2)),
            Some(AlarmChange::Cleared {
                at_ms: 12 * HOP,
                raised_ms: HOP
            })
        );
        assert!(!s.is_active());
        // A fresh count after the clear: one high score does not re-raise, two do.
        assert_eq!(s.observe(13 * HOP, Some(0.9)), None);
        assert_eq!(
            s.observe(14 * HOP, Some(0.9)),
            Some(AlarmChange::Raised { onset_ms: 14 * HOP })
        );
    }

    #[test]
    fn scores_before_a_transition_do_not_count_after_it() {
        // k = 1 of n = 3: a low score two hops before the raise must not clear it at once.
        let mut s = AlarmState::new(rule(0.7, 0.5, 1, 3), HOP).unwrap();
        s.observe(0, Some(0.1));
        assert!(s.observe(HOP, Some(0.9)).is_some());
        assert_eq!(s.observe(2 * HOP, Some(0.6)), None);
        assert!(s.is_active());
    }

    #[test]
    fn silence_neither_raises_nor_clears_but_dilutes_persistence() {
        let r = rule(0.7, 0.5, 2, 3);
        // High, none, high: 2 of the last 3 hops.
        let eps = alarm_episodes(r, HOP, &series(&[Some(0.8), None, Some(0.8)])).unwrap();
        assert_eq!(eps, vec![(2 * HOP, 2 * HOP)]);
        // High, none, none, high: the first high is 3 hops old.
        let eps = alarm_episodes(r, HOP, &series(&[Some(0.8), None, None, Some(0.8)])).unwrap();
        assert!(eps.is_empty());
        // An active alarm survives any silence and clears on low scores after it.
        let mut scores = vec![Some(0.9), Some(0.9)];
        scores.extend(std::iter::repeat_n(None, 50));
        scores.extend([Some(0.1), Some(0.1)]);
        let eps = alarm_episodes(r, HOP, &series(&scores)).unwrap();
        assert_eq!(eps, vec![(HOP, 53 * HOP)]);
        // NaN is no score.
        let eps = alarm_episodes(r, HOP, &series(&[Some(0.8), Some(f32::NAN), None])).unwrap();
        assert!(eps.is_empty());
    }

    #[test]
    fn a_gap_without_observations_forgets_what_came_before() {
        let mut s = AlarmState::new(rule(0.7, 0.5, 2, 3), HOP).unwrap();
        s.observe(0, Some(0.9));
        // Two hops missing altogether: the score at 0 is 3 hops old at 3·HOP.
        assert_eq!(s.observe(3 * HOP, Some(0.9)), None);
        // The next hop, a third of a hop late: still within the last 3 hops of 3·HOP's score.
        assert_eq!(
            s.observe(4 * HOP + HOP / 3, Some(0.9)),
            Some(AlarmChange::Raised {
                onset_ms: 4 * HOP + HOP / 3
            })
        );
    }

    #[test]
    fn a_carried_alarm_stays_active_and_clears_under_the_new_rule() {
        let mut s = AlarmState::carried(rule(0.8, 0.4, 2, 3), HOP, 5 * HOP).unwrap();
        assert_eq!(s.active_since(), Some(5 * HOP));
        assert_eq!(s.rule(), rule(0.8, 0.4, 2, 3));
        // Not a fresh raise, and an older hop is ignored.
        assert_eq!(s.observe(5 * HOP, Some(0.1)), None);
        assert_eq!(s.observe(6 * HOP, Some(0.9)), None);
        assert_eq!(s.observe(7 * HOP, Some(0.3)), None);
        assert_eq!(
            s.observe(8 * HOP, Some(0.3)),
            Some(AlarmChange::Cleared {
                at_ms: 8 * HOP,
                raised_ms: 5 * HOP
            })
        );
    }

    #[test]
    fn late_and_repeated_hops_are_ignored() {
        let mut s = AlarmState::new(rule(0.7, 0.5, 2, 2), HOP).unwrap();
        s.observe(HOP, Some(0.9));
        assert_eq!(s.observe(HOP, Some(0.9)), None, "the same hop twice");
        assert_eq!(s.observe(0, Some(0.9)), None, "an earlier hop");
        assert!(!s.is_active());
        assert!(s.observe(2 * HOP, Some(0.9)).is_some());
    }

    #[test]
    fn episodes_of_a_series_with_an_alarm_open_at_the_end() {
        let r = rule(0.7, 0.5, 1, 1);
        let s = series(&[
            Some(0.1),
            Some(0.8),
            Some(0.6),
            Some(0.4),
            Some(0.9),
            Some(0.9),
        ]);
        assert_eq!(
            alarm_episodes(r, HOP, &s).unwrap(),
            vec![(HOP, 3 * HOP), (4 * HOP, 5 * HOP)]
        );
        assert!(alarm_episodes(r, HOP, &[]).unwrap().is_empty());
        assert!(alarm_episodes(rule(0.5, 0.7, 1, 1), HOP, &s).is_err());
    }
}
