//! The comparison's figures on hand-made records.

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
    // Reference: one episode over well before 5:00, one ending at 5:00 exactly, one across
    // it, one after. Alarms: one on the first episode, one false before 5:00, one across
    // 5:00 on the third episode, one touching the fourth (touching is no overlap).
    let r = compare_record(
        &[
            (100 * S, 130 * S),
            (250 * S, 300 * S),
            (301 * S, 320 * S),
            (600 * S, 610 * S),
        ],
        &[
            (110 * S, 120 * S),
            (200 * S, 210 * S),
            (295 * S, 330 * S),
            (590 * S, 600 * S),
        ],
        1_800 * S,
        OPTS,
    )
    .unwrap();
    // Whole record: the second episode shares 295-300 s with the third alarm.
    assert_eq!(
        (r.counts.tp_s, r.counts.fn_, r.counts.tp_p, r.counts.fp),
        (3, 1, 2, 2)
    );
    // From 5:00: the episodes at 301-320 s and 600-610 s; the alarms at 300-330 s and
    // 590-600 s.
    assert_eq!(
        r.test_period,
        EpisodeCounts {
            tp_s: 1,
            fn_: 1,
            tp_p: 1,
            fp: 1,
            reference_ms: (19 + 10) * S,
            alarm_ms: (30 + 10) * S,
            overlap_ms: 19 * S,
        }
    );
    let sum = summarize(&[r]);
    assert_eq!(sum.test_period_figures.se, Some(0.5));
    assert_eq!(sum.test_period_intervals.se, wilson_interval(1, 2));
}

#[test]
fn ec57s_record_set_leaves_paced_records_out() {
    // Two records alike, one episode each at 400-410 s; the first is caught, the second
    // (paced) is missed and has a false alarm.
    let caught = compare_record(
        &[(400 * S, 410 * S)],
        &[(405 * S, 420 * S)],
        1_800 * S,
        OPTS,
    )
    .unwrap();
    let paced = RecordComparison {
        paced: true,
        ..compare_record(
            &[(400 * S, 410 * S)],
            &[(500 * S, 510 * S)],
            1_800 * S,
            OPTS,
        )
        .unwrap()
    };
    let sum = summarize(&[caught.clone(), paced]);
    assert_eq!(sum.paced_records, 1);
    assert_eq!((sum.gross.tp_s, sum.gross.fn_, sum.gross.fp), (1, 1, 1));
    assert_eq!(sum.unpaced, caught.counts);
    assert_eq!(sum.ec57, caught.test_period);
    assert_eq!(sum.ec57_figures.se, Some(1.0));
    assert_eq!(sum.unpaced_figures.pp, Some(1.0));
    assert_eq!(sum.gross_figures.se, Some(0.5));
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
