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
//!   one that begins before is cut there, the detector's as the reference's. The EC57 counts
//!   are given both over the whole record (the headline: Holmes learns nothing, so it is
//!   judged from the first window) and over that period ([`RecordComparison::test_period`]);
//!   time to alarm and false alarms are over the whole record only.
//! - **EC57's record set**: `ecgeval` leaves paced records out of its evaluations (mitdb 102,
//!   104, 107 and 217). A record's comparison says whether it is paced
//!   ([`RecordComparison::paced`], from its annotations: which also finds vfdb 602, whose `(PM`
//!   Holmes counts as paced though no EC57 list names vfdb), and the summary gives the EC57
//!   counts again without the paced records, over whole records and over the test period: the
//!   set and period EC57's figures are reported on.
//! - Each gross ESe and E+P comes with its 95 % **Wilson interval** ([`EpisodeIntervals`]):
//!   on 30 episodes, three move a figure by a tenth.
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
const EC57_START_MS: i64 = 300_000;

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
    pub(crate) fn intervals(&self) -> EpisodeIntervals {
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
    /// The same counts over EC57's test period: from 5:00 to the record's end.
    pub test_period: EpisodeCounts,
    /// The record is paced (EC57 leaves it out); set by the caller, which knows the record.
    pub paced: bool,
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
    let test_period = count(&in_test_period(reference), &in_test_period(annotated));
    let false_alarms = alarms
        .iter()
        .filter(|&&a| is_false_alarm(a, reference, opts))
        .count();
    Ok(RecordComparison {
        counts,
        figures: counts.figures(),
        test_period,
        paced: false,
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

/// The episodes of `eps` as EC57's comparators see them from [`EC57_START_MS`] on: one that
/// ends by then is left out, one that begins before is cut to begin there. (`epicmp` keeps an
/// episode that ends at 5:00 exactly, as one of no length that matches nothing; here it is
/// left out.)
fn in_test_period(eps: &[(i64, i64)]) -> Vec<(i64, i64)> {
    eps.iter()
        .filter(|&&(_, e)| e > EC57_START_MS)
        .map(|&(s, e)| (s.max(EC57_START_MS), e))
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

/// EC57 episode sensitivity over one kind's reference episodes (VT or VF, each on its own, not
/// merged with an adjacent episode of the other kind): those some alarm, as annotated, shares
/// time with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct KindSensitivity {
    pub episodes: usize,
    pub detected: usize,
    /// `detected / episodes`; `None` without episodes.
    pub se: Option<f64>,
    /// Its 95 % Wilson interval.
    pub interval: Option<[f64; 2]>,
}

impl KindSensitivity {
    /// Counts one more episode, detected or not.
    pub(crate) fn add(&mut self, detected: bool) {
        self.episodes += 1;
        self.detected += usize::from(detected);
        self.se = Some(self.detected as f64 / self.episodes as f64);
        self.interval = wilson_interval(self.detected, self.episodes);
    }
}

/// 95 % Wilson score intervals ([`wilson_interval`]) of pooled episode sensitivity and
/// positive predictivity (over whole records or EC57's test period), `[low, high]`; `None`
/// where the figure is. Episodes are counted as
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
    pub test_period: EpisodeCounts,
    pub test_period_figures: EpisodeFigures,
    pub test_period_intervals: EpisodeIntervals,
    /// Paced records, left out of `unpaced` and `ec57`.
    pub paced_records: usize,
    /// The gross counts over whole records without the paced records.
    pub unpaced: EpisodeCounts,
    /// The figures of `unpaced`.
    pub unpaced_figures: EpisodeFigures,
    /// 95 % Wilson intervals of `unpaced`'s ESe and E+P.
    pub unpaced_intervals: EpisodeIntervals,
    /// The gross counts over EC57's test period without the paced records: EC57's record set
    /// and period.
    pub ec57: EpisodeCounts,
    /// The figures of `ec57`.
    pub ec57_figures: EpisodeFigures,
    /// 95 % Wilson intervals of `ec57`'s ESe and E+P.
    pub ec57_intervals: EpisodeIntervals,
    /// Mean of the per-record figures, each over the records where it is defined.
    pub average_figures: EpisodeFigures,
    pub time_to_alarm: TimeToAlarm,
    pub false_alarms: usize,
    pub monitored_ms: i64,
    pub false_alarms_per_hour: Option<f64>,
}

/// Pools record comparisons into gross and average figures, time to alarm and false alarms.
pub fn summarize(records: &[RecordComparison]) -> Summary {
    let (mut gross, mut test_period) = (EpisodeCounts::default(), EpisodeCounts::default());
    let (mut unpaced, mut ec57) = (EpisodeCounts::default(), EpisodeCounts::default());
    for r in records {
        gross.add(&r.counts);
        test_period.add(&r.test_period);
        if !r.paced {
            unpaced.add(&r.counts);
            ec57.add(&r.test_period);
        }
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
        test_period,
        test_period_figures: test_period.figures(),
        test_period_intervals: test_period.intervals(),
        paced_records: records.iter().filter(|r| r.paced).count(),
        unpaced,
        unpaced_figures: unpaced.figures(),
        unpaced_intervals: unpaced.intervals(),
        ec57,
        ec57_figures: ec57.figures(),
        ec57_intervals: ec57.intervals(),
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
mod tests;
