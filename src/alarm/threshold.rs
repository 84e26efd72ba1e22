//! Choosing an [`AlarmRule`] on the validation split: the on-threshold and persistence that
//! reach a target episode sensitivity with the fewest false alarms. `holmes evaluate` hands it
//! each validation record's score series and reference episodes; the chosen rule is kept with
//! the zoo ([`rules`](super::rules)).
//!
//! An episode counts as detected when an alarm is raised for it or is already on at its onset
//! (the nurse is alerted either way; [`AlarmTiming`]). A rule pays a false alarm for every
//! alarm that shares no time with a reference episode widened by the grace
//! ([`is_false_alarm`]) **and** for every alarm that outlasts the episodes it covers by more
//! than the grace plus `n` hops (the least a k-of-n rule takes to clear; [`outlasts`]):
//! otherwise a low threshold whose alarm never clears would cover every episode of a record
//! with a single "true" alarm and win. Both come from [`matching`](super::matching), as the
//! evaluation's do.
//!
//! A search may also bound the time to alarm ([`DelayLimits`]): a rule whose median or p90
//! delay from onset to raise exceeds them has not reached the target, however many episodes it
//! catches. Without the bound, persistence buys false alarms with seconds of delay, and the
//! search, which minimises false alarms, takes that trade as far as the grid goes.

use serde::{Deserialize, Serialize};

use crate::core::stats::percentile;

use super::matching::{AlarmTiming, MatchOptions, is_false_alarm, outlasts, per_hour, timing};
use super::{AlarmError, AlarmRule, alarm_episodes};

/// One validation record as the search sees it.
#[derive(Debug, Clone, Copy)]
pub struct ValidationRecord<'a> {
    /// One `(t_ms, score)` per hop, ascending; `None` where the hop had no score.
    pub scores: &'a [(i64, Option<f32>)],
    /// Reference episodes `(onset_ms, end_ms)`, ascending and disjoint.
    pub episodes: &'a [(i64, i64)],
    /// Monitored time outside the reference episodes, ms: the false-alarm denominator.
    pub monitored_ms: i64,
}

/// What the search tries and what it must reach.
#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdSearch {
    /// Episode sensitivity to reach (0..=1).
    pub target_sensitivity: f64,
    /// The clear threshold as a share of the on-threshold (`off = on · off_ratio`): one
    /// hysteresis for every candidate, so the search has one free threshold.
    pub off_ratio: f32,
    /// Candidate on-thresholds.
    pub on_grid: Vec<f32>,
    /// Candidate persistences `(k, n)`.
    pub persistence: Vec<(u32, u32)>,
    /// The hop of the score series, ms.
    pub hop_ms: i64,
    /// When an alarm is in time for an episode, and when it is false.
    pub matching: MatchOptions,
    /// Bounds on the time to alarm over the episodes an alarm was raised for; `None`: any.
    pub delay_limits: Option<DelayLimits>,
}

/// Bounds on the time to alarm a rule must keep on the validation records (nearest-rank
/// quantiles of the raised episodes' delays, as `holmes evaluate` reports them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelayLimits {
    /// Median delay from onset to raise, at most, ms.
    pub median_ms: i64,
    /// 90th percentile of the delay, at most, ms.
    pub p90_ms: i64,
}

impl DelayLimits {
    /// Issue 16's targets, which EC13-tested monitors meet: median 6 s, p90 10 s.
    pub const BEDSIDE: DelayLimits = DelayLimits {
        median_ms: 6_000,
        p90_ms: 10_000,
    };
}

impl ThresholdSearch {
    /// On-thresholds 1/steps, 2/steps, ..., (steps-1)/steps.
    pub fn even_grid(steps: u32) -> Vec<f32> {
        (1..steps).map(|i| i as f32 / steps as f32).collect()
    }

    /// The same search with only the on-thresholds whose clear threshold lies above `score`,
    /// so that a window scored `score` or less neither raises an alarm nor holds one on (a
    /// run short of the beat counter's call, `signal::beats::RUN_RISK_MAX`).
    pub fn clearing_above(mut self, score: f32) -> ThresholdSearch {
        let r = self.off_ratio;
        self.on_grid.retain(|&on| on * r > score);
        self
    }
}

/// The rule chosen and what it reached on the validation records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdChoice {
    pub rule: AlarmRule,
    /// Whether the target sensitivity was reached within the delay limits; when no candidate
    /// reaches it, the most sensitive candidate is chosen.
    pub met_target: bool,
    /// Reference episodes, and those an alarm was raised for.
    pub episodes: usize,
    pub detected: usize,
    /// `detected / episodes`; `None` without reference episodes.
    pub sensitivity: Option<f64>,
    /// Alarms that share no time with a reference episode widened by the grace.
    pub false_alarms: usize,
    pub monitored_hours: f64,
    /// `None` without monitored time.
    pub false_alarms_per_hour: Option<f64>,
    /// Median and p90 time to alarm of the raised episodes, ms; `None` when none was raised.
    pub median_delay_ms: Option<i64>,
    pub p90_delay_ms: Option<i64>,
}

impl ThresholdChoice {
    /// How two choices rank when a search picks among them (a gate, a beat rule), smallest
    /// first: those that met the target by fewest false alarms then most episodes detected,
    /// then those that did not, by most detected then fewest false alarms.
    pub fn rank(&self) -> (u8, i64, i64) {
        if self.met_target {
            (0, self.false_alarms as i64, -(self.detected as i64))
        } else {
            (1, -(self.detected as i64), self.false_alarms as i64)
        }
    }
}

/// Picks the rule that reaches `search.target_sensitivity`, within `search.delay_limits`, with
/// the fewest false alarms.
/// Ties go to more detected episodes, then the smaller `k` (it raises sooner), then the smaller
/// `n`, then the higher on-threshold; the search is deterministic. Every candidate replays
/// every record, so its cost is candidates × hops.
pub fn choose_threshold(
    records: &[ValidationRecord<'_>],
    search: &ThresholdSearch,
) -> Result<ThresholdChoice, AlarmError> {
    let t = search.target_sensitivity;
    if !(0.0..=1.0).contains(&t) {
        return Err(AlarmError::Target(t));
    }
    let r = search.off_ratio;
    if !(0.0..=1.0).contains(&r) {
        return Err(AlarmError::OffRatio(r));
    }
    if search.on_grid.is_empty() || search.persistence.is_empty() {
        return Err(AlarmError::NoCandidates);
    }
    let episodes: usize = records.iter().map(|r| r.episodes.len()).sum();
    let monitored_ms: i64 = records.iter().map(|r| r.monitored_ms).sum();
    let needed = (t * episodes as f64).ceil() as usize;

    // Lower is better: candidates that reach the target first, and among them the fewest
    // false alarms; among those that do not, the most detected. Then the tie-breaks; the
    // on-threshold, a float, is compared last and apart.
    let rank = |met: bool, detected: usize, false_alarms: usize, rule: &AlarmRule| {
        let (d, f) = (detected as i64, false_alarms as i64);
        let primary = if met { (0, f, -d) } else { (1, -d, f) };
        (primary, rule.k, rule.n)
    };
    let in_time = |t: &Tally| match search.delay_limits {
        None => true,
        Some(l) => {
            t.median_ms.is_none_or(|m| m <= l.median_ms) && t.p90_ms.is_none_or(|p| p <= l.p90_ms)
        }
    };
    // (rank, rule, tally) of the best candidate so far.
    let mut best: Option<(_, AlarmRule, Tally)> = None;
    for &(k, n) in &search.persistence {
        for &on in &search.on_grid {
            let rule = AlarmRule {
                on,
                off: on * r,
                k,
                n,
            };
            rule.validate()?;
            let t = tally(rule, records, search)?;
            let met = t.detected >= needed && in_time(&t);
            let key = rank(met, t.detected, t.false_alarms, &rule);
            let better = best
                .as_ref()
                .is_none_or(|(b_key, b, ..)| key < *b_key || (key == *b_key && on > b.on));
            if better {
                best = Some((key, rule, t));
            }
        }
    }
    let (key, rule, t) = best.expect("at least one candidate");
    let Tally {
        detected,
        false_alarms,
        median_ms,
        p90_ms,
    } = t;
    Ok(ThresholdChoice {
        rule,
        met_target: key.0.0 == 0,
        episodes,
        detected,
        sensitivity: (episodes > 0).then(|| detected as f64 / episodes as f64),
        false_alarms,
        monitored_hours: monitored_ms as f64 / 3_600_000.0,
        false_alarms_per_hour: per_hour(false_alarms, monitored_ms),
        median_delay_ms: median_ms,
        p90_delay_ms: p90_ms,
    })
}

/// What one rule does over all records.
#[derive(Debug, Clone, Copy)]
struct Tally {
    /// Episodes an alarm was raised for or was on at.
    detected: usize,
    false_alarms: usize,
    /// Time to alarm of the raised episodes, ms.
    median_ms: Option<i64>,
    p90_ms: Option<i64>,
}

/// Episodes an alarm was raised for, false alarms and delays of one rule over all records.
fn tally(
    rule: AlarmRule,
    records: &[ValidationRecord<'_>],
    search: &ThresholdSearch,
) -> Result<Tally, AlarmError> {
    let (mut detected, mut false_alarms) = (0, 0);
    let mut delays: Vec<f64> = Vec::new();
    for rec in records {
        let alarms = alarm_episodes(rule, search.hop_ms, rec.scores)?;
        for &e in rec.episodes {
            match timing(e, &alarms, search.matching) {
                AlarmTiming::Missed => {}
                AlarmTiming::AlreadyOn => detected += 1,
                AlarmTiming::Raised { delay_ms } => {
                    detected += 1;
                    delays.push(delay_ms as f64);
                }
            }
        }
        let linger = search.matching.grace_ms + rule.n as i64 * search.hop_ms;
        false_alarms += alarms
            .iter()
            .filter(|&&a| {
                is_false_alarm(a, rec.episodes, search.matching)
                    || outlasts(a, rec.episodes, linger)
            })
            .count();
    }
    delays.sort_by(f64::total_cmp);
    let q = |q: f64| (!delays.is_empty()).then(|| percentile(&delays, q) as i64);
    Ok(Tally {
        detected,
        false_alarms,
        median_ms: q(0.5),
        p90_ms: q(0.9),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOP: i64 = 1_000;

    /// A record's score series and its one reference episode.
    type Record = (Vec<(i64, Option<f32>)>, (i64, i64));

    fn hops(scores: &[f32]) -> Vec<(i64, Option<f32>)> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as i64 * HOP, Some(s)))
            .collect()
    }

    fn search(target: f64, persistence: Vec<(u32, u32)>) -> ThresholdSearch {
        ThresholdSearch {
            target_sensitivity: target,
            off_ratio: 0.8,
            on_grid: ThresholdSearch::even_grid(10),
            persistence,
            hop_ms: HOP,
            matching: MatchOptions {
                onset_tolerance_ms: 1_000,
                grace_ms: 0,
            },
            delay_limits: None,
        }
    }

    /// Two half-hour records, 30 hops of score each (the rest of the hour unscored).
    /// A: an episode at 10-20 s scored 0.75, a lone artefact of 0.95 at 3 s.
    /// B: an episode at 5-15 s scored 0.55, an artefact of 0.65 over 25-26 s.
    /// Elsewhere 0.1, so on = 0.1 (off 0.08) raises at 0 s and never clears.
    fn records() -> [Record; 2] {
        let mut a = vec![0.1; 30];
        a[3] = 0.95;
        a[10..20].fill(0.75);
        let mut b = vec![0.1; 30];
        b[5..15].fill(0.55);
        b[25] = 0.65;
        b[26] = 0.65;
        [(hops(&a), (10_000, 20_000)), (hops(&b), (5_000, 15_000))]
    }

    fn validation(recs: &[Record]) -> Vec<ValidationRecord<'_>> {
        recs.iter()
            .map(|(scores, ep)| ValidationRecord {
                scores,
                episodes: std::slice::from_ref(ep),
                monitored_ms: 1_800_000,
            })
            .collect()
    }

    #[test]
    fn full_sensitivity_with_one_hop_costs_both_artefacts() {
        let recs = records();
        let v = validation(&recs);
        // Thresholds 0.2 to 0.5 raise for both episodes and for both artefacts; 0.1's alarm,
        // on from 0 s, is already on at each onset and outlasts each episode: as many false
        // alarms. The tie among 0.1 to 0.5 goes to the highest.
        let c = choose_threshold(&v, &search(1.0, vec![(1, 1)])).unwrap();
        assert_eq!(
            c.rule,
            AlarmRule {
                on: 0.5,
                off: 0.4,
                k: 1,
                n: 1
            }
        );
        assert!(c.met_target);
        assert_eq!((c.detected, c.episodes, c.false_alarms), (2, 2, 2));
        assert_eq!(c.sensitivity, Some(1.0));
        assert_eq!(c.monitored_hours, 1.0);
        assert_eq!(c.false_alarms_per_hour, Some(2.0));
    }

    #[test]
    fn a_search_clearing_above_a_score_never_chooses_a_rule_that_clears_below_it() {
        let recs = records();
        let v = validation(&recs);
        // B's episode scores 0.55: only on-thresholds of 0.5 and below raise for it, and their
        // clear thresholds (0.4 and below) are not above 0.45. Of the rules left, 0.6 and 0.7
        // raise for A's episode (0.8 and 0.9 for none), and 0.7 leaves B's artefact (0.65)
        // under it: the most sensitive with the fewest false alarms.
        let q = search(1.0, vec![(1, 1)]).clearing_above(0.45);
        assert_eq!(q.on_grid, vec![0.6, 0.7, 0.8, 0.9]);
        let c = choose_threshold(&v, &q).unwrap();
        assert!(!c.met_target);
        assert!(c.rule.off > 0.45, "{:?}", c.rule);
        assert_eq!((c.rule.on, c.detected, c.false_alarms), (0.7, 1, 1));
        // A clear threshold equal to the score is not above it (0.5 x 0.8 is 0.4 in f32).
        let q = search(1.0, vec![(1, 1)]).clearing_above(0.4);
        assert_eq!(q.on_grid, vec![0.6, 0.7, 0.8, 0.9]);
        // Nothing left to try is refused, not chosen.
        let none = search(1.0, vec![(1, 1)]).clearing_above(0.8);
        assert!(matches!(
            choose_threshold(&v, &none),
            Err(AlarmError::NoCandidates)
        ));
    }

    #[test]
    fn half_the_episodes_at_the_fewest_false_alarms() {
        let recs = records();
        let v = validation(&recs);
        // 0.7 raises for A's episode with one false alarm (A's artefact); 0.6 also sounds on
        // B's artefact; 0.8 and 0.9 miss A's episode (0.75).
        let c = choose_threshold(&v, &search(0.5, vec![(1, 1)])).unwrap();
        assert_eq!(c.rule.on, 0.7);
        assert_eq!((c.detected, c.false_alarms), (1, 1));
    }

    #[test]
    fn persistence_removes_the_artefacts_and_wins() {
        let recs = records();
        let v = validation(&recs);
        // With 3 of 3 hops neither artefact (1 and 2 hops) alarms; 0.2 to 0.5 raise for both
        // episodes (2 s after onset) with no false alarm, beating every (1, 1) rule.
        let c = choose_threshold(&v, &search(1.0, vec![(1, 1), (3, 3)])).unwrap();
        assert_eq!(
            c.rule,
            AlarmRule {
                on: 0.5,
                off: 0.4,
                k: 3,
                n: 3
            }
        );
        assert_eq!((c.detected, c.false_alarms), (2, 0));
    }

    #[test]
    fn a_delay_limit_refuses_the_slow_persistence() {
        let recs = records();
        let v = validation(&recs);
        // Unbounded, 3 of 3 wins (no false alarm) at 2 s after each onset.
        let mut q = search(1.0, vec![(1, 1), (3, 3)]);
        let c = choose_threshold(&v, &q).unwrap();
        assert_eq!(
            (c.rule.k, c.median_delay_ms, c.p90_delay_ms),
            (3, Some(2_000), Some(2_000))
        );
        // A 1-s bound on the median leaves the immediate 1-of-1 rules and their false alarms.
        q.delay_limits = Some(DelayLimits {
            median_ms: 1_000,
            p90_ms: 10_000,
        });
        let c = choose_threshold(&v, &q).unwrap();
        assert!(c.met_target);
        assert_eq!((c.rule.k, c.rule.n), (1, 1));
        assert_eq!(
            (c.detected, c.false_alarms, c.median_delay_ms),
            (2, 2, Some(0))
        );
        // Bounding the p90 alike has the same effect; a bound no raised alarm meets misses the
        // target and falls back to the most sensitive rule. (0.1's alarm, on before either
        // onset, raises for neither: it is left out, as an episode alerted already is in time.)
        q.on_grid.retain(|&on| on > 0.15);
        q.delay_limits = Some(DelayLimits {
            median_ms: 10_000,
            p90_ms: 1_000,
        });
        assert_eq!(choose_threshold(&v, &q).unwrap().rule.k, 1);
        q.delay_limits = Some(DelayLimits {
            median_ms: -1,
            p90_ms: -1,
        });
        let c = choose_threshold(&v, &q).unwrap();
        assert!(!c.met_target);
        assert_eq!(c.detected, 2);
    }

    #[test]
    fn an_alarm_that_never_clears_costs_a_false_alarm() {
        let recs = records();
        let v = validation(&recs);
        let mut q = search(0.0, vec![(1, 1)]);
        q.on_grid = vec![0.1];
        let c = choose_threshold(&v, &q).unwrap();
        // One alarm per record from 0 s, already on at each onset (detected), still on 9 s
        // (A) and 14 s (B) after its episode ended: a false alarm each.
        assert_eq!((c.detected, c.false_alarms), (2, 2));
    }

    #[test]
    fn an_unreachable_target_returns_the_most_sensitive_rule() {
        // The episode is never scored above 0.05: no grid threshold raises for it.
        let a = hops(&[0.0; 20]);
        let recs = [ValidationRecord {
            scores: &a,
            episodes: &[(5_000, 10_000)],
            monitored_ms: 3_600_000,
        }];
        let c = choose_threshold(&recs, &search(0.9, vec![(1, 1)])).unwrap();
        assert!(!c.met_target);
        assert_eq!((c.detected, c.false_alarms), (0, 0));
        // All tie: the highest threshold.
        assert_eq!(c.rule.on, 0.9);
    }

    #[test]
    fn the_grace_makes_an_alarm_just_after_an_episode_late_not_false() {
        // An alarm at 12-14 s after an episode that ended at 10 s.
        let mut s = vec![0.0; 20];
        s[12..14].fill(0.9);
        let a = hops(&s);
        let recs = [ValidationRecord {
            scores: &a,
            episodes: &[(5_000, 10_000)],
            monitored_ms: 3_600_000,
        }];
        let mut q = search(0.0, vec![(1, 1)]);
        q.on_grid = vec![0.5];
        let c = choose_threshold(&recs, &q).unwrap();
        assert_eq!((c.detected, c.false_alarms), (0, 1));
        q.matching.grace_ms = 3_000;
        let c = choose_threshold(&recs, &q).unwrap();
        assert_eq!((c.detected, c.false_alarms), (1, 0));
    }

    #[test]
    fn bad_searches_are_refused() {
        let recs: [ValidationRecord<'_>; 0] = [];
        let mut q = search(1.5, vec![(1, 1)]);
        assert_eq!(choose_threshold(&recs, &q), Err(AlarmError::Target(1.5)));
        q.target_sensitivity = 0.9;
        q.off_ratio = 2.0;
        assert_eq!(choose_threshold(&recs, &q), Err(AlarmError::OffRatio(2.0)));
        q.off_ratio = 0.8;
        q.persistence.clear();
        assert_eq!(choose_threshold(&recs, &q), Err(AlarmError::NoCandidates));
        q.persistence = vec![(4, 2)];
        assert!(matches!(
            choose_threshold(&recs, &q),
            Err(AlarmError::Persistence { .. })
        ));
    }
}
