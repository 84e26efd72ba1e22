//! A fast run of **wide** beats up to the alarm's instant, found where the beat counter's QRS
//! detector sees none of them ([`wide_run`]).
//!
//! The counter's detector weighs a beat by its squared slope, so beside the sharp beats of a
//! patient's sinus rhythm the blunt complexes of a ventricular run stand under its threshold,
//! and at 200-300/min its 200 ms refractory period and learnt levels skip them: the run is
//! then not there for the classifier to call. Read by eye, the strips of such missed alarms
//! (bursts, runs of wide beats after sharp sinus beats) show the run plainly. So this reads a
//! lead as a monitor's amplitude-based detection would: the **curve length** of the lightly
//! smoothed signal over [`SPAN_SECS`] (a wide beat's deflection counts as much as a sharp
//! one's), peaks above [`LEVEL_SHARE`] of the lead's typical beat (the median over the beats
//! the Pan-Tompkins detector, `detect_qrs`, finds on that lead), each the largest over
//! [`PEAK_SPAN_SECS`] centred on it. The run is the beats at the end of the look-back whose
//! intervals are each under 0.6 s and under [`SUDDEN_SHARE`] of that detector's median interval
//! before its own trailing fast ones (sudden after the rhythm before it; all its intervals
//! where every one is fast), its last beat within [`REACH_SECS`] of the alarm's instant; its
//! beats must look alike ([`MIN_LIKENESS`], a monomorphic run, not noise's scatter).

use crate::core::stats::{correlation, median};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::classical::VT_MIN_BEATS;
use crate::signal::heart_rate::{detect_qrs, sub_moving_mean};
use crate::signal::quality::curve_length;

/// The curve length is summed over this long, s: about a wide QRS complex.
const SPAN_SECS: f64 = 0.1;
/// A peak of the curve length at least this share of the lead's typical beat's is a beat.
const LEVEL_SHARE: f32 = 0.4;
/// A beat's curve-length peak is the largest over this span centred on it, s (so two beats are
/// more than half of it apart).
const PEAK_SPAN_SECS: f64 = 0.15;
/// A run's intervals are each under this share of the rhythm's median interval before it ...
const SUDDEN_SHARE: f64 = 0.8;
/// ... and under this, s (100/min).
const FAST_SECS: f64 = 0.6;
/// The run's last beat (its curve-length peak, which trails the QRS) is at most this long
/// before the alarm's instant, s.
const REACH_SECS: f64 = 0.75;
/// Consecutive beats of the run correlate at least this much, as a median (their QRS
/// stretches, the best of small shifts).
const MIN_LIKENESS: f64 = 0.7;

/// A run of wide beats found at the end of one lead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct WideRun {
    /// The lead it was found on (an index into the leads given).
    pub lead: usize,
    /// Its sudden intervals in a row (beats, counting the one before the first interval, are
    /// one more).
    pub intervals: usize,
    /// Its rate, per minute.
    pub rate_bpm: f64,
}

/// The longest sudden fast run of alike beats reaching the end of any of `leads` (each ending
/// at the alarm's instant, at [`SAMPLE_RATE_HZ`]), where it has [`VT_MIN_BEATS`] intervals or
/// more.
pub(super) fn wide_run(leads: &[&[f32]]) -> Option<WideRun> {
    leads
        .iter()
        .enumerate()
        .filter_map(|(k, x)| {
            on_lead(x).map(|(intervals, rate_bpm)| WideRun {
                lead: k,
                intervals,
                rate_bpm,
            })
        })
        .max_by_key(|r| r.intervals)
}

/// The run reaching the end of `x`: its sudden intervals and rate.
fn on_lead(x: &[f32]) -> Option<(usize, f64)> {
    let fs = SAMPLE_RATE_HZ as f64;
    let w = |secs: f64| ((secs * fs).round() as usize).max(1);
    let n = x.len();
    if n < w(2.0) {
        return None;
    }
    // The detector's beats: the rhythm's interval and the typical beat's size.
    let known = detect_qrs(x, fs);
    if known.len() < 3 {
        return None;
    }
    // The rhythm before the run: the detector's intervals before its own trailing fast ones
    // (where a signal starts just before the run, those are most of what it found).
    let rr: Vec<f64> = known.windows(2).map(|p| (p[1] - p[0]) as f64).collect();
    let fast = rr.iter().rev().take_while(|&&v| v < FAST_SECS * fs).count();
    let before = if fast < rr.len() {
        &rr[..rr.len() - fast]
    } else {
        &rr[..]
    };
    let limit = (FAST_SECS * fs).min(SUDDEN_SHARE * median(before));
    let y = sub_moving_mean(x, w(0.2));
    let length = curve_length(x, w(0.02), w(SPAN_SECS));
    // The curve length peaks after its beat's QRS (its sum trails): each known beat's peak.
    let around = |b: i64| {
        let lo = (b - w(0.04) as i64).max(0) as usize;
        let hi = ((b + w(0.16) as i64) as usize).min(n);
        length[lo..hi].iter().copied().fold(0.0f32, f32::max)
    };
    let sizes: Vec<f64> = known.iter().map(|&b| around(b) as f64).collect();
    let level = median(&sizes) as f32;
    if level <= 0.0 {
        return None;
    }
    // Peaks above the share of the typical beat, each the largest over the span centred on it.
    let half = w(PEAK_SPAN_SECS) / 2;
    let peaks: Vec<usize> = (1..n)
        .filter(|&i| {
            let v = length[i];
            v >= LEVEL_SHARE * level
                && length[i.saturating_sub(half)..(i + half + 1).min(n)]
                    .iter()
                    .enumerate()
                    .all(|(j, &u)| u < v || (u == v && i.saturating_sub(half) + j >= i))
        })
        .collect();
    let &last = peaks.last()?;
    if (n - 1 - last) as f64 > REACH_SECS * fs {
        return None;
    }
    let intervals = peaks
        .windows(2)
        .rev()
        .take_while(|p| ((p[1] - p[0]) as f64) < limit)
        .count();
    if intervals < VT_MIN_BEATS {
        return None;
    }
    let run = &peaks[peaks.len() - 1 - intervals..];
    if likeness(&y, run) < MIN_LIKENESS {
        return None;
    }
    let span = (run[run.len() - 1] - run[0]) as f64;
    Some((intervals, 60.0 * fs * intervals as f64 / span))
}

/// The median correlation of consecutive beats' QRS stretches (the curve length's peak `at`
/// trails its QRS: the stretch ends there), each pair at the best of small shifts.
fn likeness(y: &[f32], at: &[usize]) -> f64 {
    let fs = SAMPLE_RATE_HZ as f64;
    let len = (0.12 * fs) as usize;
    let shift = (0.02 * fs) as i64;
    let y: Vec<f64> = y.iter().map(|&v| v as f64).collect();
    let stretch = |p: usize, s: i64| -> Option<&[f64]> {
        let end = p as i64 + s;
        let start = end - len as i64;
        (start >= 0 && end as usize <= y.len()).then(|| &y[start as usize..end as usize])
    };
    let corr: Vec<f64> = at
        .windows(2)
        .filter_map(|p| {
            let a = stretch(p[0], 0)?;
            (-shift..=shift)
                .filter_map(|s| stretch(p[1], s).map(|b| correlation(a, b)))
                .max_by(f64::total_cmp)
        })
        .collect();
    if corr.is_empty() { 0.0 } else { median(&corr) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::test_signals::{noise, samples, sinus, wide_run as wide_beats};

    fn then(parts: &[&[f32]]) -> Vec<f32> {
        parts.iter().flat_map(|p| p.iter().copied()).collect()
    }

    #[test]
    fn a_fast_run_of_wide_beats_up_to_the_instant_is_found_with_its_rate() {
        // Sinus at 70/min, then 1.5 s of wide beats at 250/min up to the onset.
        let x = then(&[&sinus(1, 70.0, 14.5), &wide_beats(250.0, 120.0, 1.5)]);
        let r = wide_run(&[&x]).expect("a run");
        assert!(r.intervals >= VT_MIN_BEATS, "{r:?}");
        assert!((r.rate_bpm - 250.0).abs() < 15.0, "{r:?}");
        // On the second lead given, it is named there.
        let flat = vec![0.0f32; x.len()];
        assert_eq!(wide_run(&[&flat, &x]).map(|r| r.lead), Some(1));
    }

    #[test]
    fn a_run_just_after_the_signal_starts_is_sudden_after_the_few_beats_before_it() {
        // Flat, then 3 s of sinus at 70/min, then 2 s of wide beats at 180/min.
        let x = then(&[
            &vec![0.0; samples(11.0)],
            &sinus(2, 70.0, 3.0),
            &wide_beats(180.0, 120.0, 2.0),
        ]);
        // The adjudicator reads a lead from where its signal starts, as here.
        let r = wide_run(&[&x[samples(11.0)..]]).expect("a run");
        assert!(r.intervals >= VT_MIN_BEATS, "{r:?}");
    }

    #[test]
    fn rhythm_salvos_and_noise_are_not_a_run() {
        for (what, x) in [
            ("sinus", sinus(3, 75.0, 16.0)),
            ("sinus tachycardia", sinus(4, 130.0, 16.0)),
            (
                "a salvo of three",
                then(&[&sinus(5, 70.0, 15.1), &wide_beats(200.0, 120.0, 0.9)]),
            ),
            (
                "a run that ended 3 s before",
                then(&[
                    &sinus(6, 70.0, 10.0),
                    &wide_beats(200.0, 120.0, 3.0),
                    &sinus(7, 70.0, 3.0),
                ]),
            ),
            (
                "a run, then a second of flat line",
                then(&[
                    &sinus(10, 70.0, 13.0),
                    &wide_beats(200.0, 120.0, 2.0),
                    &vec![0.0; samples(1.0)],
                ]),
            ),
            (
                "noise up to the instant",
                then(&[&sinus(8, 70.0, 14.0), &noise(9, 0.5, 2.0)]),
            ),
        ] {
            assert_eq!(wide_run(&[&x]), None, "{what}");
        }
    }
}
