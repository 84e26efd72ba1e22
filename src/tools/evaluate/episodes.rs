//! The event-level comparison of `holmes evaluate`: a record's alarm episodes against its
//! reference episodes, as ANSI/AAMI EC57 reports VF (WFDB's `epicmp` and `sumstats`), plus the
//! time to alarm of each episode and the false alarms per monitored hour. Pure functions on
//! `[start, end)` intervals in ms; which alarm is in time and which is false is
//! [`crate::alarm::matching`]'s, the definitions the alarm rule's threshold search uses.
//!
//! - **Episode sensitivity** (ESe): reference episodes that any alarm shares time with
//!   (`TPs`), over all reference episodes (`TPs + FN`). **Episode positive predictivity**
//!   (E+P): alarms that share time with any reference episode (`TPp`), over all alarms
//!   (`TPp + FP`). No onset tolerance and no delay limit, as in `epicmp`.
//! - **Duration sensitivity / positive predictivity** (DSe, D+P): time shared by alarms and
//!   reference episodes, over the reference time and over the alarm time.
//! - **Gross** figures pool the counts and times of all records; **average** figures are the
//!   mean of the per-record figures, a record left out of a figure whose denominator it lacks
//!   (as `sumstats` does). Gross DSe and D+P are exact here (`sumstats` rebuilds them from
//!   rounded percentages). Figures are fractions (0..=1), not percentages.
//! - **EC57's test period**: `epicmp` and its peers compare from 5:00 on (the first five
//!   minutes are the analyser's learning period): an episode that ends by then is left out,
//!   one that begins before is cut there, the detector's as the reference's. The counts are
//!   given both over the whole record (the headline: Holmes learns nothing, so it is judged
//!   from the first window) and over that period ([`RecordComparison::standard`]).
//! - Each gross ESe and E+P comes with its 95 % **Wilson interval** ([`EpisodeIntervals`]):
//!   on a few dozen episodes a figure moves by a tenth with two episodes.
//! - **Time to alarm** per reference episode ([`AlarmTiming`]): raised (with its delay),
//!   already on, or missed; summarised by median, p90 and max over the raised ones.
//! - **False alarms** ([`is_false_alarm`]) per monitored hour; the caller gives the monitored
//!   time, without the reference episodes' time.

use serde::Serialize;

use crate::alarm::matching::{
    AlarmTiming, MatchOptions, is_false_alarm, overlaps, per_hour, timing,
};
use crate::core::stats::{percentile, wilson_interval};

/// EC57's comparators begin here, ms from the record's start (the learning period's end).
pub const EC57_START_MS: i64 = 300_000;

/// Intervals the comparison refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EpisodeError {
    #[error("{list} episode {index} ends before it starts: {start}..{end} ms")]
    Reversed {
        list: &'static str,
        index: usize,
        start: i64,
        end: i64,
    },
    #[error("{list} episode {index} starts at {start} ms, before the previous one ends")]
    Unordered {
        list: &'static str,
        index: usize,
        start: i64,
    },
    #[error("monitored time must not be negative, not {0} ms")]
    Monitored(i64),
}

/// EC57 episode counts and durations of one record, or pooled over records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EpisodeCounts {
    /// Reference episodes some alarm shares time with.
    pub tp_s: usize,
    /// Reference episodes no alarm shares time with (`tp_s + fn = reference episodes`).
    #[serde(rename = "fn")]
    pub fn_: usize,
    /// Alarms that share time with some reference episode.
    pub tp_p: usize,
    /// Alarms that share time with no reference episode (`tp_p + fp = alarms`).
    pub fp: usize,
    /// Total reference-episode time, ms.
    pub reference_ms: i64,
    /// Total alarm time, ms.
    pub alarm_ms: i64,
    /// Time both in a reference episode and in an alarm, ms.
    pub overlap_ms: i64,
}

impl EpisodeCounts {
    /// ESe, E+P, DSe, D+P; each `None` where its denominator is zero.
    pub fn figures(&self) -> EpisodeFigures {
        let ratio = |num: f64, den: f64| (den > 0.0).then(|| num / den);
        EpisodeFigures {
            se: ratio(self.tp_s as f64, (self.tp_s + self.fn_) as f64),
            pp: ratio(self.tp_p as f64, (self.tp_p + self.fp) as f64),
            dse: ratio(self.overlap_ms as f64, self.reference_ms as f64),
            dpp: ratio(self.overlap_ms as f64, self.alarm_ms as f64),
        }
    }

    /// 95 % Wilson intervals of ESe and E+P.
    pub fn intervals(&self) -> EpisodeIntervals {
        EpisodeIntervals {
            se: wilson_interval(self.tp_s, self.tp_s + self.fn_),
            pp: wilson_interval(self.tp_p, self.tp_p + self.fp),
        }
    }

    fn add(&mut self, o: &EpisodeCounts) {
        self.tp_s += o.tp_s;
        self.fn_ += o.fn_;
        self.tp_p += o.tp_p;
        self.fp += o.fp;
        self.reference_ms += o.reference_ms;
        self.alarm_ms += o.alarm_ms;
        self.overlap_ms += o.overlap_ms;
    }
}

/// Episode and duration sensitivity and positive predictivity, as fractions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EpisodeFigures {
    pub se: Option<f64>,
    pub pp: Option<f64>,
    pub dse: Option<f64>,
    pub dpp: Option<f64>,
}

/// A reference episode and its time-to-alarm outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EpisodeTiming {
    pub onset_ms: i64,
    pub end_ms: i64,
    #[serde(flatten)]
    pub timing: AlarmTiming,
}

/// The comparison of one record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordComparison {
    pub counts: EpisodeCounts,
    pub figures: EpisodeFigures,
    /// The same counts over EC57's test period: from [`EC57_START_MS`] to the record's end.
    pub standard: EpisodeCounts,
    /// One per reference episode, in order.
    pub timings: Vec<EpisodeTiming>,
    /// Alarms that share no time with a reference episode widened by the grace.
    pub false_alarms: usize,
    /// Monitored time outside the reference episodes, ms.
    pub monitored_ms: i64,
    /// `None` without monitored time.
    pub false_alarms_per_hour: Option<f64>,
}

/// Compares a record's `alarms` with its `reference` episodes (both `[start, end)` in ms,
/// ascending and disjoint; touching is allowed). `monitored_ms` is the record's monitored time
/// outside the reference episodes. The alarms are their own episodes in the EC57 comparison
/// ([`compare_annotated`] where the detector annotates them otherwise).
pub fn compare_record(
    reference: &[(i64, i64)],
    alarms: &[(i64, i64)],
    monitored_ms: i64,
    opts: MatchOptions,
) -> Result<RecordComparison, EpisodeError> {
    compare_annotated(reference, alarms, alarms, monitored_ms, opts)
}

/// [`compare_record`] where the detector's episodes for the EC57 counts and durations are
/// `annotated` (the alarms as [`annotate_onsets`](crate::alarm::annotate_onsets) dates them,
/// one per alarm), while time to alarm and false alarms are judged on the `alarms` as raised.
pub fn compare_annotated(
    reference: &[(i64, i64)],
    alarms: &[(i64, i64)],
    annotated: &[(i64, i64)],
    monitored_ms: i64,
    opts: MatchOptions,
) -> Result<RecordComparison, EpisodeError> {
    check("reference", reference)?;
    check("alarm", alarms)?;
    check("annotated alarm", annotated)?;
    if monitored_ms < 0 {
        return Err(EpisodeError::Monitored(monitored_ms));
    }
    let counts = count(reference, annotated);
    let standard = count(
        &from(reference, EC57_START_MS),
        &from(annotated, EC57_START_MS),
    );
    let false_alarms = alarms
        .iter()
        .filter(|&&a| is_false_alarm(a, reference, opts))
        .count();
    Ok(RecordComparison {
        counts,
        figures: counts.figures(),
        standard,
        timings: reference
            .iter()
            .map(|&(onset_ms, end_ms)| EpisodeTiming {
                onset_ms,
                end_ms,
                timing: timing((onset_ms, end_ms), alarms, opts),
            })
            .collect(),
        false_alarms,
        monitored_ms,
        false_alarms_per_hour: per_hour(false_alarms, monitored_ms),
    })
}

/// The episodes of `eps` as EC57's comparators see them from `start_ms` on: one that ends by
/// then is left out, one that begins before is cut to begin there.
fn from(eps: &[(i64, i64)], start_ms: i64) -> Vec<(i64, i64)> {
    eps.iter()
        .filter(|&&(_, e)| e > start_ms)
        .map(|&(s, e)| (s.max(start_ms), e))
        .collect()
}

/// EC57 counts and durations of `annotated` against `reference` (both checked).
fn count(reference: &[(i64, i64)], annotated: &[(i64, i64)]) -> EpisodeCounts {
    let tp_s = reference
        .iter()
        .filter(|&&r| annotated.iter().any(|&a| overlaps(r, a)))
        .count();
    let tp_p = annotated
        .iter()
        .filter(|&&a| reference.iter().any(|&r| overlaps(r, a)))
        .count();
    // Both lists are disjoint, so summing the pairwise overlaps counts no time twice.
    let overlap_ms = reference
        .iter()
        .flat_map(|&(rs, re)| {
            annotated
                .iter()
                .map(move |&(s, e)| (re.min(e) - rs.max(s)).max(0))
        })
        .sum();
    EpisodeCounts {
        tp_s,
        fn_: reference.len() - tp_s,
        tp_p,
        fp: annotated.len() - tp_p,
        reference_ms: reference.iter().map(|(s, e)| e - s).sum(),
        alarm_ms: annotated.iter().map(|(s, e)| e - s).sum(),
        overlap_ms,
    }
}

/// Time to alarm over a set of reference episodes (`raised + already_on + missed = episodes`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeToAlarm {
    pub episodes: usize,
    pub raised: usize,
    pub already_on: usize,
    pub missed: usize,
    /// Over the raised episodes' delays, seconds; `None` when none was raised.
    pub median_s: Option<f64>,
    pub p90_s: Option<f64>,
    pub max_s: Option<f64>,
}

/// Time to alarm over the outcomes of a set of reference episodes.
pub fn time_to_alarm(timings: &[AlarmTiming]) -> TimeToAlarm {
    let mut delays_s: Vec<f64> = timings
        .iter()
        .filter_map(|t| match *t {
            AlarmTiming::Raised { delay_ms } => Some(delay_ms as f64 / 1000.0),
            _ => None,
        })
        .collect();
    delays_s.sort_by(f64::total_cmp);
    let count = |want: AlarmTiming| timings.iter().filter(|&&t| t == want).count();
    let quantile = |q: f64| (!delays_s.is_empty()).then(|| percentile(&delays_s, q));
    TimeToAlarm {
        episodes: timings.len(),
        raised: delays_s.len(),
        already_on: count(AlarmTiming::AlreadyOn),
        missed: count(AlarmTiming::Missed),
        median_s: quantile(0.5),
        p90_s: quantile(0.9),
        max_s: quantile(1.0),
    }
}

/// 95 % Wilson score intervals ([`wilson_interval`]) of the gross episode sensitivity and
/// positive predictivity, `[low, high]`; `None` where the figure is. Episodes are counted as
/// independent trials, which episodes of one record are not, so the intervals are if anything
/// too narrow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EpisodeIntervals {
    pub se: Option<[f64; 2]>,
    pub pp: Option<[f64; 2]>,
}

/// The comparison of a set of records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub records: usize,
    /// Counts and durations pooled over the records, and the figures they give.
    pub gross: EpisodeCounts,
    pub gross_figures: EpisodeFigures,
    /// 95 % Wilson intervals of the gross ESe and E+P.
    pub gross_intervals: EpisodeIntervals,
    /// The gross counts, figures and intervals over EC57's test period (from 5:00).
    pub standard: EpisodeCounts,
    pub standard_figures: EpisodeFigures,
    pub standard_intervals: EpisodeIntervals,
    /// Mean of the per-record figures, each over the records where it is defined.
    pub average_figures: EpisodeFigures,
    pub time_to_alarm: TimeToAlarm,
    pub false_alarms: usize,
    pub monitored_ms: i64,
    pub false_alarms_per_hour: Option<f64>,
}

/// Pools record comparisons into gross and average figures, time to alarm and false alarms.
pub fn summarize(records: &[RecordComparison]) -> Summary {
    let (mut gross, mut standard) = (EpisodeCounts::default(), EpisodeCounts::default());
    for r in records {
        gross.add(&r.counts);
        standard.add(&r.standard);
    }
    let mean = |f: fn(&EpisodeFigures) -> Option<f64>| {
        let v: Vec<f64> = records.iter().filter_map(|r| f(&r.figures)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let timings: Vec<AlarmTiming> = records
        .iter()
        .flat_map(|r| r.timings.iter().map(|t| t.timing))
        .collect();
    let false_alarms = records.iter().map(|r| r.false_alarms).sum();
    let monitored_ms = records.iter().map(|r| r.monitored_ms).sum();
    Summary {
        records: records.len(),
        gross,
        gross_figures: gross.figures(),
        gross_intervals: gross.intervals(),
        standard,
        standard_figures: standard.figures(),
        standard_intervals: standard.intervals(),
        average_figures: EpisodeFigures {
            se: mean(|f| f.se),
            pp: mean(|f| f.pp),
            dse: mean(|f| f.dse),
            dpp: mean(|f| f.dpp),
        },
        time_to_alarm: time_to_alarm(&timings),
        false_alarms,
        monitored_ms,
        false_alarms_per_hour: per_hour(false_alarms, monitored_ms),
    }
}

/// Each interval in order (`start <= end`) and after the previous one's end.
fn check(list: &'static str, eps: &[(i64, i64)]) -> Result<(), EpisodeError> {
    for (index, &(start, end)) in eps.iter().enumerate() {
        if end < start {
            return Err(EpisodeError::Reversed {
                list,
                index,
                start,
                end,
            });
        }
        if index > 0 && start < eps[index - 1].1 {
            return Err(EpisodeError::Unordered { list, index, start });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alarm::{AlarmRule, ThresholdSearch, ValidationRecord, alarm_episodes};

    const S: i64 = 1_000;
    const OPTS: MatchOptions = MatchOptions {
        onset_tolerance_ms: 1_000,
        grace_ms: 10_000,
    };

    /// Record 1: reference VT at 100-130 s and 300-310 s. Alarms at 104-140 s (in time, 4 s,
    /// runs 10 s past the end), 200-205 s (false), and 315-318 s (late, in the grace, shares no
    /// time with the episode).
    fn record1() -> RecordComparison {
        compare_record(
            &[(100 * S, 130 * S), (300 * S, 310 * S)],
            &[(104 * S, 140 * S), (200 * S, 205 * S), (315 * S, 318 * S)],
            1_800 * S,
            OPTS,
        )
        .unwrap()
    }

    /// Record 2: reference at 50-70 s, alarm on since 40 s (already on) to 60 s.
    /// Record 3: no reference episode, one false alarm at 10-12 s.
    fn record2() -> RecordComparison {
        compare_record(&[(50 * S, 70 * S)], &[(40 * S, 60 * S)], 1_780 * S, OPTS).unwrap()
    }

    fn record3() -> RecordComparison {
        compare_record(&[], &[(10 * S, 12 * S)], 3_600 * S, OPTS).unwrap()
    }

    #[test]
    fn one_record_by_hand() {
        let r = record1();
        // Se pass: the first episode is overlapped, the second is not (315 > 310).
        // +P pass: the first alarm overlaps, the other two do not.
        // Overlap: 104-130 = 26 s. Reference 30 + 10 = 40 s; alarms 36 + 5 + 3 = 44 s.
        assert_eq!(
            r.counts,
            EpisodeCounts {
                tp_s: 1,
                fn_: 1,
                tp_p: 1,
                fp: 2,
                reference_ms: 40 * S,
                alarm_ms: 44 * S,
                overlap_ms: 26 * S,
            }
        );
        assert_eq!(r.figures.se, Some(0.5));
        assert_eq!(r.figures.pp, Some(1.0 / 3.0));
        assert_eq!(r.figures.dse, Some(26.0 / 40.0));
        assert_eq!(r.figures.dpp, Some(26.0 / 44.0));
        // Time to alarm: 4 s, then 15 s (late, within the 10 s grace after 310 s).
        let t: Vec<AlarmTiming> = r.timings.iter().map(|t| t.timing).collect();
        assert_eq!(
            t,
            vec![
                AlarmTiming::Raised { delay_ms: 4 * S },
                AlarmTiming::Raised { delay_ms: 15 * S }
            ]
        );
        // Only 200-205 s is false: 315-318 s lies within the grace of 300-310 s.
        assert_eq!(r.false_alarms, 1);
        assert_eq!(r.false_alarms_per_hour, Some(2.0));
    }

    #[test]
    fn records_pool_into_gross_and_average_figures() {
        let sum = summarize(&[record1(), record2(), record3()]);
        // Record 2: TPs 1, TPp 1, overlap 50-60 = 10 s of a 20 s episode and a 20 s alarm.
        // Record 3: FP 1, 2 s of alarm, no reference.
        assert_eq!(
            sum.gross,
            EpisodeCounts {
                tp_s: 2,
                fn_: 1,
                tp_p: 2,
                fp: 3,
                reference_ms: 60 * S,
                alarm_ms: 66 * S,
                overlap_ms: 36 * S,
            }
        );
        let g = sum.gross_figures;
        assert_eq!(g.se, Some(2.0 / 3.0));
        assert_eq!(g.pp, Some(2.0 / 5.0));
        assert_eq!(g.dse, Some(36.0 / 60.0));
        assert_eq!(g.dpp, Some(36.0 / 66.0));
        // The intervals are the gross counts': 2 of 3 and 2 of 5.
        let i = sum.gross_intervals;
        assert_eq!(i.se, wilson_interval(2, 3));
        assert_eq!(i.pp, wilson_interval(2, 5));
        let [lo, hi] = i.pp.unwrap();
        assert!(lo < 0.4 && 0.4 < hi);
        // Averages: Se over records 1 and 2 only (record 3 has no reference episode);
        // +P over all three (1/3, 1, 0).
        let a = sum.average_figures;
        assert_eq!(a.se, Some((0.5 + 1.0) / 2.0));
        assert_eq!(a.pp, Some((1.0 / 3.0 + 1.0 + 0.0) / 3.0));
        assert_eq!(a.dse, Some((26.0 / 40.0 + 0.5) / 2.0));
        assert_eq!(a.dpp, Some((26.0 / 44.0 + 0.5 + 0.0) / 3.0));
        // Time to alarm: 4 s and 15 s raised, record 2's episode already on.
        let t = &sum.time_to_alarm;
        assert_eq!((t.episodes, t.raised, t.already_on, t.missed), (3, 2, 1, 0));
        assert_eq!(t.raised + t.already_on + t.missed, t.episodes);
        // Nearest rank over [4, 15]: the median rounds up to 15 (index 0.5 -> 1).
        assert_eq!(
            (t.median_s, t.p90_s, t.max_s),
            (Some(15.0), Some(15.0), Some(15.0))
        );
        // False alarms: 1 + 0 + 1 over 1,800 + 1,780 + 3,600 s of monitored time.
        assert_eq!(sum.false_alarms, 2);
        assert_eq!(sum.monitored_ms, 7_180 * S);
        assert_eq!(sum.false_alarms_per_hour, Some(2.0 / (7_180.0 / 3_600.0)));
    }

    #[test]
    fn ec57s_test_period_leaves_out_what_ends_by_5_min_and_cuts_what_begins_before() {
        // Reference: one episode over by 5:00, one across it, one after. Alarms: one before
        // 5:00 (false), one across it on the second episode, none on the third.
        let r = compare_record(
            &[(100 * S, 130 * S), (290 * S, 320 * S), (600 * S, 610 * S)],
            &[(110 * S, 120 * S), (200 * S, 210 * S), (295 * S, 330 * S)],
            1_800 * S,
            OPTS,
        )
        .unwrap();
        assert_eq!(
            (r.counts.tp_s, r.counts.fn_, r.counts.tp_p, r.counts.fp),
            (2, 1, 2, 1)
        );
        assert_eq!(
            r.standard,
            EpisodeCounts {
                tp_s: 1,
                fn_: 1,
                tp_p: 1,
                fp: 0,
                reference_ms: (20 + 10) * S,
                alarm_ms: 30 * S,
                overlap_ms: 20 * S,
            }
        );
        let sum = summarize(&[r]);
        assert_eq!(sum.standard_figures.se, Some(0.5));
        assert_eq!(sum.standard_intervals.se, wilson_interval(1, 2));
    }

    #[test]
    fn delays_summarise_by_nearest_rank() {
        // Ten episodes alarmed 1..=10 s after onset, one missed.
        let reference: Vec<(i64, i64)> = (0..11)
            .map(|i| (i * 100 * S, i * 100 * S + 20 * S))
            .collect();
        let alarms: Vec<(i64, i64)> = (0..10)
            .map(|i| (i * 100 * S + (i + 1) * S, i * 100 * S + 30 * S))
            .collect();
        let r = compare_record(&reference, &alarms, 3_600 * S, OPTS).unwrap();
        let t = summarize(&[r]).time_to_alarm;
        assert_eq!((t.raised, t.missed), (10, 1));
        // Sorted 1..=10 s: index round(9·0.5) = 5 -> 6 s; round(9·0.9) = 8 -> 9 s.
        assert_eq!(
            (t.median_s, t.p90_s, t.max_s),
            (Some(6.0), Some(9.0), Some(10.0))
        );
    }

    #[test]
    fn an_annotated_alarm_counts_for_ec57_from_its_onset_and_times_from_its_raise() {
        // A 2-s run at 100-102 s; the alarm raised at 105 s (the next hop) until 115 s, its
        // run dated from 100.4 s.
        let reference = [(100 * S, 102 * S)];
        let raised = [(105 * S, 115 * S)];
        let plain = compare_record(&reference, &raised, 1_800 * S, OPTS).unwrap();
        assert_eq!(
            (plain.counts.tp_s, plain.counts.fp),
            (0, 1),
            "no shared time"
        );
        let dated = [(100_400, 115 * S)];
        let r = compare_annotated(&reference, &raised, &dated, 1_800 * S, OPTS).unwrap();
        assert_eq!(
            (r.counts.tp_s, r.counts.fn_, r.counts.tp_p, r.counts.fp),
            (1, 0, 1, 0)
        );
        assert_eq!(r.counts.overlap_ms, 1_600);
        assert_eq!(r.counts.alarm_ms, 14_600);
        // Time to alarm and false alarms are the raised alarm's, in both.
        assert_eq!(r.timings, plain.timings);
        assert_eq!(r.timings[0].timing, AlarmTiming::Raised { delay_ms: 5 * S });
        assert_eq!((r.false_alarms, plain.false_alarms), (0, 0));
    }

    #[test]
    fn empty_inputs_give_no_figures_rather_than_nan() {
        let r = compare_record(&[], &[], 0, OPTS).unwrap();
        assert_eq!(r.figures, EpisodeFigures::default());
        assert_eq!(r.false_alarms_per_hour, None);
        let sum = summarize(&[r]);
        assert_eq!(sum.average_figures, EpisodeFigures::default());
        assert_eq!(sum.time_to_alarm.median_s, None);
        let sum = summarize(&[]);
        assert_eq!(sum.records, 0);
        assert_eq!(sum.gross_figures, EpisodeFigures::default());
        assert_eq!(
            (sum.gross_intervals.se, sum.gross_intervals.pp),
            (None, None)
        );
    }

    #[test]
    fn unordered_overlapping_or_reversed_episodes_are_refused() {
        assert_eq!(
            compare_record(&[(10, 5)], &[], 0, OPTS),
            Err(EpisodeError::Reversed {
                list: "reference",
                index: 0,
                start: 10,
                end: 5
            })
        );
        assert_eq!(
            compare_record(&[], &[(0, 10), (5, 20)], 0, OPTS),
            Err(EpisodeError::Unordered {
                list: "alarm",
                index: 1,
                start: 5
            })
        );
        assert!(
            compare_record(&[(0, 10), (10, 20)], &[], 0, OPTS).is_ok(),
            "touching"
        );
        assert_eq!(
            compare_record(&[], &[], -1, OPTS),
            Err(EpisodeError::Monitored(-1))
        );
    }

    #[test]
    fn json_names_follow_ec57() {
        let v = serde_json::to_value(record2()).unwrap();
        assert_eq!(v["counts"]["fn"], 0);
        assert_eq!(v["counts"]["tp_s"], 1);
        assert_eq!(v["timings"][0]["outcome"], "already_on");
        let v = serde_json::to_value(record1()).unwrap();
        assert_eq!(v["timings"][1]["outcome"], "raised");
        assert_eq!(v["timings"][1]["delay_ms"], 15_000);
    }

    #[test]
    fn the_threshold_search_counts_as_this_matcher_does() {
        // A score series replayed by the alarm rule: the search's detected episodes are the
        // matcher's raised ones and its false alarms the matcher's.
        let scores: Vec<(i64, Option<f32>)> = (0..600)
            .map(|i| {
                let t = i * 2 * S;
                let s = match t / S {
                    100..130 | 402..420 => 0.9, // episodes, the second alarmed late
                    200..206 => 0.8,            // an artefact
                    500..520 => 0.3,            // an episode scored too low
                    _ => 0.05,
                };
                (t, Some(s))
            })
            .collect();
        let reference = [(100 * S, 130 * S), (395 * S, 400 * S), (500 * S, 520 * S)];
        let search = ThresholdSearch {
            target_sensitivity: 0.0,
            off_ratio: 0.5,
            on_grid: vec![0.7],
            persistence: vec![(2, 3)],
            hop_ms: 2 * S,
            matching: OPTS,
            delay_limits: None,
        };
        let monitored_ms = 1_200 * S - 55 * S;
        let choice = crate::alarm::choose_threshold(
            &[ValidationRecord {
                scores: &scores,
                episodes: &reference,
                monitored_ms,
            }],
            &search,
        )
        .unwrap();
        let rule = AlarmRule {
            on: 0.7,
            off: 0.35,
            k: 2,
            n: 3,
        };
        assert_eq!(choice.rule, rule);
        let alarms = alarm_episodes(rule, 2 * S, &scores).unwrap();
        let r = compare_record(&reference, &alarms, monitored_ms, OPTS).unwrap();
        let raised = r
            .timings
            .iter()
            .filter(|t| matches!(t.timing, AlarmTiming::Raised { .. }))
            .count();
        assert_eq!(
            (choice.detected, choice.false_alarms),
            (raised, r.false_alarms)
        );
        // And by hand: raised for 100-130 s (at 102 s) and 395-400 s (at 404 s, late); the
        // artefact at 200-206 s is false.
        assert_eq!((raised, r.false_alarms), (2, 1));
        assert_eq!(choice.false_alarms_per_hour, r.false_alarms_per_hour);
    }
}
