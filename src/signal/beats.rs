//! Beats counted one by one: each QRS that [`detect_qrs`] finds in a window, described against
//! the window's own dominant beat, classified ventricular or not by a logistic regression
//! ([`BeatClassifier`], fitted on annotated beats), and the run of ventricular beats a VT alarm
//! counts (at least [`VT_MIN_BEATS`] in a row, faster than 100/min, the rule of the label).
//!
//! A window's networks are asked whether a window ends in VT; this module asks the question the
//! label itself asks, beat by beat, so that two or four ventricular beats (a couplet, a salvo)
//! can be told from five, which the networks do not learn (BENCHMARKS, "Rules bounded by time to
//! alarm").
//!
//! The features of a beat compare it with the window's **template**, the per-sample median of
//! all its beats' QRS stretches (the dominant rhythm, which outnumbers a short run): shape
//! (correlation and residual on both leads), size, steepest slope, QRS width, and prematurity
//! (the interval from the previous beat against the window's median interval). Nothing after a
//! beat's own QRS enters its features, so a run is counted as it happens.

use serde::{Deserialize, Serialize};

use crate::core::logistic::Logistic;
use crate::core::window::SAMPLE_RATE_HZ;

use super::classical::{VT_MIN_BEATS, qrs_width_secs, slope};
use super::heart_rate::{detect_qrs, sub_moving_mean};

/// Features per beat.
pub(crate) const FEATURES: usize = 10;
/// Their names, in order.
pub(crate) const FEATURE_NAMES: [&str; FEATURES] = [
    "correlation with the template",
    "ln(1 + residual / template rms)",
    "ln(peak-to-peak / template's)",
    "QRS width s",
    "RR before / median RR",
    "ln(steepest slope / template's)",
    "correlation with the template, second lead",
    "ln(1 + residual / template rms), second lead",
    "RR before s",
    "ln(area / template's)",
];

/// Samples of a beat's QRS stretch before its R peak (0.1 s) ...
const PRE: usize = SAMPLE_RATE_HZ / 10;
/// ... and from it on (0.15 s).
const POST: usize = SAMPLE_RATE_HZ * 3 / 20;
/// The detector marks a beat at its integral's peak, up to this long after the R peak (0.2 s)
/// ...
const R_BEFORE: usize = SAMPLE_RATE_HZ / 5;
/// ... or this long before it (0.05 s).
const R_AFTER: usize = SAMPLE_RATE_HZ / 20;
/// Baseline removal: a centred moving mean this long (0.6 s) is subtracted, wide enough to
/// leave a 200 ms ventricular complex standing.
const BASELINE: usize = SAMPLE_RATE_HZ * 3 / 5;
/// Fewest beats a window needs for a template.
const MIN_BEATS: usize = 3;
/// A VT run's beats follow each other faster than this (100/min), samples.
const MAX_RUN_RR: usize = SAMPLE_RATE_HZ * 60 / 100;
/// A beat is called ventricular at and above this probability.
pub(crate) const VENTRICULAR_AT: f64 = 0.5;

/// One beat of a window: where its R peak is, and its features.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Beat {
    /// The R peak, samples from the window's start.
    pub sample: usize,
    pub features: [f64; FEATURES],
}

/// Finds the beats of a window and describes them: `leads[0]` is the primary lead (beats are
/// found on it), `leads[1]`, when present and as long, the second (a lone lead stands in for
/// it). Beats whose QRS stretch does not lie wholly in the window are left out; fewer than
/// [`MIN_BEATS`] beats give none (no template).
pub(crate) fn describe(leads: &[&[f32]]) -> Vec<Beat> {
    let Some(&first) = leads.first() else {
        return Vec::new();
    };
    let n = first.len();
    let second = leads.get(1).copied().filter(|l| l.len() == n);
    let y0 = sub_moving_mean(first, BASELINE);
    let y1 = second.map(|l| sub_moving_mean(l, BASELINE));
    let mut peaks: Vec<usize> = Vec::new();
    for d in detect_qrs(first, SAMPLE_RATE_HZ as f64) {
        let d = d as usize;
        let (lo, hi) = (d.saturating_sub(R_BEFORE), (d + R_AFTER + 1).min(n));
        let Some(r) = (lo..hi).max_by(|&a, &b| y0[a].abs().total_cmp(&y0[b].abs())) else {
            continue;
        };
        if r < PRE || r + POST > n {
            continue;
        }
        // Two detections of one complex land on one peak.
        if peaks.last().is_some_and(|&p| r < p + R_BEFORE) {
            continue;
        }
        peaks.push(r);
    }
    if peaks.len() < MIN_BEATS {
        return Vec::new();
    }
    let seg = |y: &[f32], r: usize| -> Vec<f64> {
        y[r - PRE..r + POST].iter().map(|&v| v as f64).collect()
    };
    let segs0: Vec<Vec<f64>> = peaks.iter().map(|&r| seg(&y0, r)).collect();
    let segs1: Option<Vec<Vec<f64>>> = y1
        .as_ref()
        .map(|y| peaks.iter().map(|&r| seg(y, r)).collect());
    let t0 = median_template(&segs0);
    let t1 = segs1.as_deref().map(median_template);
    let rr: Vec<f64> = peaks.windows(2).map(|p| (p[1] - p[0]) as f64).collect();
    let median_rr = median(&rr).max(1.0);
    let sl = slope(first);
    let fs = SAMPLE_RATE_HZ as f64;
    let (t_ptp, t_slope, t_area) = (ptp(&t0), steepest(&t0), area(&t0));
    peaks
        .iter()
        .enumerate()
        .map(|(k, &r)| {
            let s0 = &segs0[k];
            let (c0, e0) = shape(s0, &t0);
            let (c1, e1) = match (&segs1, &t1) {
                (Some(s1), Some(t1)) => shape(&s1[k], t1),
                _ => (c0, e0),
            };
            let rr_before = if k == 0 { median_rr } else { rr[k - 1] };
            Beat {
                sample: r,
                features: [
                    c0,
                    e0,
                    ratio_ln(ptp(s0), t_ptp),
                    qrs_width_secs(&sl, r, fs),
                    rr_before / median_rr,
                    ratio_ln(steepest(s0), t_slope),
                    c1,
                    e1,
                    rr_before / fs,
                    ratio_ln(area(s0), t_area),
                ],
            }
        })
        .collect()
}

/// A beat classifier: the probability that a beat is ventricular, from its features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeatClassifier {
    /// The regression over [`FEATURE_NAMES`].
    pub model: Logistic,
}

impl BeatClassifier {
    /// The probability that `beat` is ventricular.
    pub(crate) fn probability(&self, beat: &Beat) -> f64 {
        self.model.probability(&beat.features)
    }

    /// The run of ventricular beats a window of `len` samples ends in: the most consecutive
    /// beats called ventricular, each within [`MAX_RUN_RR`] of the one before, among runs
    /// whose last beat lies within the window's last `recent` samples (a run under way, or
    /// one that has just ended).
    pub(crate) fn recent_run(&self, beats: &[Beat], len: usize, recent: usize) -> usize {
        let called: Vec<bool> = beats
            .iter()
            .map(|b| self.probability(b) >= VENTRICULAR_AT)
            .collect();
        recent_run(beats, &called, len, recent)
    }
}

/// [`BeatClassifier::recent_run`] on beats already called.
fn recent_run(beats: &[Beat], called: &[bool], len: usize, recent: usize) -> usize {
    let since = len.saturating_sub(recent);
    let (mut run, mut best) = (0usize, 0usize);
    for (k, b) in beats.iter().enumerate() {
        run = match (called[k], run) {
            (false, _) => 0,
            (true, 0) => 1,
            // The first beat of a run may follow a slow one; its followers must be fast.
            (true, r) if b.sample - beats[k - 1].sample < MAX_RUN_RR => r + 1,
            (true, _) => 1,
        };
        if b.sample >= since {
            best = best.max(run);
        }
    }
    best
}

/// The run's score for the alarm rule: its share of [`VT_MIN_BEATS`], 1 for a VT run.
pub(crate) fn run_score(run: usize) -> f32 {
    run.min(VT_MIN_BEATS) as f32 / VT_MIN_BEATS as f32
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// The per-sample median of equally long stretches.
fn median_template(segs: &[Vec<f64>]) -> Vec<f64> {
    let len = segs.first().map_or(0, Vec::len);
    let mut column = Vec::with_capacity(segs.len());
    (0..len)
        .map(|i| {
            column.clear();
            column.extend(segs.iter().map(|s| s[i]));
            median(&column)
        })
        .collect()
}

/// Pearson correlation of `s` with the template `t`, and the residual's rms over the
/// template's, as `ln(1 + r)`.
fn shape(s: &[f64], t: &[f64]) -> (f64, f64) {
    let n = s.len() as f64;
    let (ms, mt) = (s.iter().sum::<f64>() / n, t.iter().sum::<f64>() / n);
    let (mut sst, mut sss, mut stt, mut res) = (0.0, 0.0, 0.0, 0.0);
    for (a, b) in s.iter().zip(t) {
        sst += (a - ms) * (b - mt);
        sss += (a - ms).powi(2);
        stt += (b - mt).powi(2);
        res += (a - b).powi(2);
    }
    let corr = if sss > 0.0 && stt > 0.0 {
        sst / (sss * stt).sqrt()
    } else {
        0.0
    };
    let t_rms = (t.iter().map(|v| v * v).sum::<f64>() / n).sqrt();
    let rel = if t_rms > 0.0 {
        (res / n).sqrt() / t_rms
    } else {
        0.0
    };
    (corr, rel.ln_1p())
}

fn ptp(s: &[f64]) -> f64 {
    let (lo, hi) = s
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    hi - lo
}

fn steepest(s: &[f64]) -> f64 {
    s.windows(2).map(|p| (p[1] - p[0]).abs()).fold(0.0, f64::max)
}

fn area(s: &[f64]) -> f64 {
    s.iter().map(|v| v.abs()).sum()
}

/// `ln(a / b)`, bounded to ±5 (a flat template or beat).
fn ratio_ln(a: f64, b: f64) -> f64 {
    if a <= 0.0 || b <= 0.0 {
        return 0.0;
    }
    (a / b).ln().clamp(-5.0, 5.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat_at(sample: usize) -> Beat {
        Beat {
            sample,
            features: [0.0; FEATURES],
        }
    }

    #[test]
    fn a_run_counts_consecutive_fast_called_beats_that_end_recently() {
        // Beats every 0.4 s (150/min); the 3rd-7th are called ventricular.
        let beats: Vec<Beat> = (0..10).map(|k| beat_at(100 + k * 100)).collect();
        let mut called = vec![false; 10];
        called[2..7].iter_mut().for_each(|c| *c = true);
        // The run's last beat is at 700; the window is 1,100 samples long.
        assert_eq!(recent_run(&beats, &called, 1_100, 500), 5);
        assert_eq!(recent_run(&beats, &called, 1_100, 300), 0, "ended too long ago");
        // A slow follower breaks the run.
        let mut slow = beats.clone();
        for b in &mut slow[5..] {
            b.sample += MAX_RUN_RR;
        }
        assert_eq!(recent_run(&slow, &called, 2_000, 2_000), 3);
        assert_eq!(run_score(4), 0.8);
        assert_eq!(run_score(9), 1.0);
    }

    /// A lead of narrow beats every `rr` samples, with wide inverted beats at `wide`.
    fn lead(len: usize, rr: usize, wide: &[usize]) -> Vec<f32> {
        let mut x = vec![0.0f32; len];
        for (k, at) in (rr..len - rr).step_by(rr).enumerate() {
            let (half, amp) = if wide.contains(&k) {
                (20usize, -1.2f32)
            } else {
                (5, 1.0)
            };
            for i in 0..2 * half {
                let phase = i as f32 / (2 * half) as f32 * std::f32::consts::PI;
                x[at - half + i] += amp * phase.sin();
            }
        }
        x
    }

    #[test]
    fn a_wide_inverted_beat_stands_apart_from_the_template() {
        let x = lead(5_000, 200, &[10]);
        let beats = describe(&[&x]);
        assert!(beats.len() >= 20, "{}", beats.len());
        let odd = beats
            .iter()
            .min_by(|a, b| a.features[0].total_cmp(&b.features[0]))
            .unwrap();
        assert!((odd.sample as i64 - 2_200).abs() < 30, "{}", odd.sample);
        assert!(odd.features[0] < 0.0, "{:?}", odd.features);
        assert!(odd.features[3] > 0.1, "wide: {:?}", odd.features);
        let typical = &beats[3];
        assert!(typical.features[0] > 0.95, "{:?}", typical.features);
        // A lone lead stands in for the second.
        assert_eq!(typical.features[0], typical.features[6]);
    }

    #[test]
    fn too_few_beats_give_no_template() {
        assert!(describe(&[&vec![0.0; 2_000]]).is_empty());
        assert!(describe(&[]).is_empty());
    }
}
