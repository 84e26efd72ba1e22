//! How an alarm relates to a reference episode, defined once for the threshold search
//! ([`threshold`](super::threshold)) and the event matcher of `holmes evaluate`: overlap (EC57's
//! `epicmp` rule: any shared time is a match), the time-to-alarm outcome of an episode, and a
//! false alarm (and false alarms per monitored hour). Intervals are `[start, end)` in ms, each list ascending and disjoint.

use serde::Serialize;

/// The tolerances of matching alarms to reference episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MatchOptions {
    /// An alarm raised up to this long before a labelled onset is in time for the episode
    /// (time to alarm 0): onsets are marked by hand to within a beat or two, and a rhythm
    /// often announces itself (the VT before a VF) before its label starts, ms.
    pub onset_tolerance_ms: i64,
    /// An alarm raised up to this long after an episode's end is still the episode's (late)
    /// alarm, and an alarm this close to an episode on either side is not a false alarm: a
    /// window holds the episode for up to its own length after the end, ms.
    pub grace_ms: i64,
}

impl Default for MatchOptions {
    /// 1 s of onset tolerance; 10 s of grace, the longest member window of the zoo (and the
    /// 10 s within which the Challenge 2015 organisers read EC13's time to alarm).
    fn default() -> MatchOptions {
        MatchOptions {
            onset_tolerance_ms: 1_000,
            grace_ms: 10_000,
        }
    }
}

/// Whether two `[start, end)` intervals share time. A zero-length interval (an alarm raised at
/// the last hop of a record) shares time with an interval that holds it strictly inside.
pub fn overlaps(a: (i64, i64), b: (i64, i64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// The time-to-alarm outcome of one reference episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AlarmTiming {
    /// An alarm was raised for the episode, `delay_ms` after its onset (0 when raised within
    /// the onset tolerance before it).
    Raised { delay_ms: i64 },
    /// An alarm raised earlier (before onset minus the tolerance) was still on at onset: the
    /// nurse was already alerted, but no delay can be measured. Reported apart, neither a
    /// delay nor a miss.
    AlreadyOn,
    /// No alarm on at onset and none raised from onset minus the tolerance to the episode's
    /// end plus the grace.
    Missed,
}

/// The outcome of `episode` given the record's `alarms`.
pub fn timing(episode: (i64, i64), alarms: &[(i64, i64)], opts: MatchOptions) -> AlarmTiming {
    let (onset, end) = episode;
    let from = onset - opts.onset_tolerance_ms;
    if alarms.iter().any(|&(s, e)| s < from && e > onset) {
        return AlarmTiming::AlreadyOn;
    }
    match alarms
        .iter()
        .find(|&&(s, _)| s >= from && s < end + opts.grace_ms)
    {
        Some(&(s, _)) => AlarmTiming::Raised {
            delay_ms: (s - onset).max(0),
        },
        None => AlarmTiming::Missed,
    }
}

/// Whether `alarm` is false: it shares no time with any reference episode widened by the grace
/// on both sides.
pub fn is_false_alarm(alarm: (i64, i64), episodes: &[(i64, i64)], opts: MatchOptions) -> bool {
    let g = opts.grace_ms;
    !episodes
        .iter()
        .any(|&(s, e)| overlaps((s - g, e + g), alarm))
}

/// Whether `alarm`, which shares time with some reference episode, stays on more than
/// `linger_ms` after the end of the last episode it shares time with: an alarm that keeps
/// sounding once the rhythm is over (one that never clears, at worst).
pub fn outlasts(alarm: (i64, i64), episodes: &[(i64, i64)], linger_ms: i64) -> bool {
    episodes
        .iter()
        .filter(|&&e| overlaps(e, alarm))
        .map(|&(_, end)| end)
        .max()
        .is_some_and(|end| alarm.1 > end + linger_ms)
}

/// `count` false alarms over `monitored_ms` as a rate per monitored hour (`None` for no time).
pub fn per_hour(count: usize, monitored_ms: i64) -> Option<f64> {
    (monitored_ms > 0).then(|| count as f64 / (monitored_ms as f64 / 3_600_000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: MatchOptions = MatchOptions {
        onset_tolerance_ms: 1_000,
        grace_ms: 5_000,
    };

    #[test]
    fn overlap_is_any_shared_time() {
        assert!(overlaps((0, 10), (9, 20)));
        assert!(!overlaps((0, 10), (10, 20)), "touching is not sharing");
        assert!(overlaps((5, 5), (0, 10)), "a point inside");
        assert!(!overlaps((0, 0), (0, 10)), "a point at the start");
        assert!(overlaps((0, 100), (40, 60)));
    }

    #[test]
    fn outcomes_of_an_episode_at_20_to_40_s() {
        let ep = (20_000, 40_000);
        let t = |alarms: &[(i64, i64)]| timing(ep, alarms, OPTS);
        assert_eq!(
            t(&[(26_500, 50_000)]),
            AlarmTiming::Raised { delay_ms: 6_500 }
        );
        // Within the tolerance before onset: 0 s.
        assert_eq!(t(&[(19_500, 30_000)]), AlarmTiming::Raised { delay_ms: 0 });
        // Raised after the end but within the grace: late, still the episode's.
        assert_eq!(
            t(&[(43_000, 44_000)]),
            AlarmTiming::Raised { delay_ms: 23_000 }
        );
        assert_eq!(t(&[(45_000, 46_000)]), AlarmTiming::Missed);
        // On since before the tolerance, still on at onset.
        assert_eq!(
            t(&[(10_000, 25_000), (30_000, 35_000)]),
            AlarmTiming::AlreadyOn
        );
        // One that cleared before onset does not count; the next raise does.
        assert_eq!(
            t(&[(10_000, 19_800), (30_000, 35_000)]),
            AlarmTiming::Raised { delay_ms: 10_000 }
        );
        assert_eq!(t(&[]), AlarmTiming::Missed);
    }

    #[test]
    fn false_alarms_keep_clear_of_episodes_and_their_grace() {
        let eps = [(20_000, 40_000), (100_000, 110_000)];
        assert!(!is_false_alarm((30_000, 31_000), &eps, OPTS));
        assert!(
            !is_false_alarm((44_000, 60_000), &eps, OPTS),
            "within the grace"
        );
        assert!(
            !is_false_alarm((0, 16_000), &eps, OPTS),
            "within the grace before"
        );
        assert!(is_false_alarm((45_000, 60_000), &eps, OPTS));
        assert!(is_false_alarm((0, 1), &[], OPTS));
    }

    #[test]
    fn an_alarm_outlasts_the_episodes_it_covers() {
        let eps = [(10_000, 20_000), (30_000, 40_000)];
        assert!(
            !outlasts((12_000, 25_000), &eps, 5_000),
            "5 s after the end"
        );
        assert!(outlasts((12_000, 25_001), &eps, 5_000));
        // Measured from the last episode it covers.
        assert!(!outlasts((12_000, 44_000), &eps, 5_000));
        assert!(outlasts((12_000, 46_000), &eps, 5_000));
        assert!(
            !outlasts((0, 100_000), &[], 0),
            "covering nothing: not lingering (false)"
        );
    }
}
