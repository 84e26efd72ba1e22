//! Signal-quality indices of one lead's window, after Li, Clifford and colleagues' bSQI work
//! and the PhysioNet/CinC Challenge 2015 entries that used it: whether two different QRS
//! detectors agree (bSQI), how much of the window is flat or clipped, how peaked the amplitude
//! distribution is (kSQI), and how much of the power lies in the QRS band (pSQI). The
//! classical detector reads bSQI to tell noise from rhythm; the evaluation is to measure
//! whether they help as model inputs or alarm gates.
//!
//! - **bSQI**: beats matched within 150 ms between [`detect_qrs`] (a Pan-Tompkins: squared
//!   slope, 150 ms integral) and `detect_qrs_length` (a curve-length detector after Zong's
//!   `wqrs`: smoothed absolute slope summed over 130 ms, its own adaptive threshold and a
//!   longer refractory period), over the beats either found: `matched / (n1 + n2 - matched)`,
//!   Li, Clifford et al.'s definition. Two detectors that work differently agree on clean ECG
//!   and drift apart in noise. A window where neither finds a beat scores 0: no evidence of a
//!   readable ECG.
//! - **Flat fraction**: samples in stretches of at least 0.5 s that move less than 1 µV from
//!   sample to sample (a lead off, a stuck amplifier).
//! - **Clipped fraction**: samples in runs of at least 16 ms at the window's maximum or
//!   minimum (within 0.1 % of its range): a saturated amplifier sits at its rail, an R wave
//!   only passes through its peak. A flat window counts as flat, not clipped.
//! - **kSQI**: the kurtosis (not the excess): above 5 for clean ECG, near 3 for Gaussian noise,
//!   1.5 for a sine (Li, Mark & Clifford 2008).
//! - **pSQI**: power in 5-15 Hz over power in 5-40 Hz, where the QRS's energy lies.

use serde::Serialize;

use super::heart_rate::{detect_qrs, moving_sum, sub_moving_mean};
use super::spectrum::Spectrum;

/// Two detectors' beats closer than this are the same beat, s.
const MATCH_SECS: f64 = 0.15;
/// Shortest flat stretch counted, s: longer than the isoelectric segment between T and P of a
/// live ECG at rates down to about 50/min.
const FLAT_SECS: f64 = 0.5;
/// Sample-to-sample movement below which a stretch is flat, mV (a fifth of an ADC step at the
/// 200 units/mV gain of the MIT-BIH recordings).
const FLAT_MV: f32 = 0.001;
/// Shortest run at the window's extreme counted as clipping, s.
const CLIP_SECS: f64 = 0.016;

/// The quality indices of one lead's window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowSqi {
    /// Agreement of two QRS detectors, 0..=1.
    pub bsqi: f32,
    /// Share of samples in flat stretches, 0..=1.
    pub flat_fraction: f32,
    /// Share of samples in runs at the window's extremes, 0..=1.
    pub clipped_fraction: f32,
    /// Kurtosis of the samples (0 for a constant window).
    pub kurtosis: f32,
    /// Power in 5-15 Hz over power in 5-40 Hz (0 without power there).
    pub psqi: f32,
}

/// The indices of `x` (mV) sampled at `fs` Hz.
pub fn window_sqi(x: &[f32], fs: f64) -> WindowSqi {
    WindowSqi {
        bsqi: bsqi(&detect_qrs(x, fs), &detect_qrs_length(x, fs), fs),
        flat_fraction: flat_fraction(x, fs),
        clipped_fraction: clipped_fraction(x, fs),
        kurtosis: kurtosis(x),
        psqi: psqi(x, fs),
    }
}

/// Li, Clifford et al.'s agreement of two sorted beat lists: one-to-one matches within
/// [`MATCH_SECS`] over the beats found by either.
pub(crate) fn bsqi(a: &[i64], b: &[i64], fs: f64) -> f32 {
    let tol = (MATCH_SECS * fs) as i64;
    let (mut i, mut j, mut matched) = (0, 0, 0usize);
    // Walk both lists in time; a match consumes one beat of each.
    while i < a.len() && j < b.len() {
        if (a[i] - b[j]).abs() <= tol {
            matched += 1;
            i += 1;
            j += 1;
        } else if a[i] < b[j] {
            i += 1;
        } else {
            j += 1;
        }
    }
    let all = a.len() + b.len() - matched;
    if all == 0 {
        0.0
    } else {
        matched as f32 / all as f32
    }
}

/// A second QRS detector, built unlike [`detect_qrs`] so that their agreement means something:
/// a 20 ms smoothing, the absolute (not squared) slope summed over 130 ms (a curve length, as
/// Zong's `wqrs`), a threshold at 40 % of a running peak level learnt from the first 2 s and
/// learnt afresh from the last 2 s whenever 2 s pass without a beat (so an artefact or a flat
/// start does not blind it), and a 250 ms refractory period. A beat is placed at the largest baseline-free deflection within
/// 100 ms of the threshold crossing. Returns sample indices.
pub(crate) fn detect_qrs_length(x: &[f32], fs: f64) -> Vec<i64> {
    let n = x.len();
    let w = |secs: f64| ((secs * fs).round() as usize).max(1);
    if n < w(2.0) {
        return Vec::new();
    }
    let smooth = moving_mean(x, w(0.02));
    // Curve length over 130 ms: the moving sum of the absolute first difference.
    let steps: Vec<f32> = std::iter::once(0.0)
        .chain(smooth.windows(2).map(|p| (p[1] - p[0]).abs()))
        .collect();
    let span = w(0.13);
    let length = moving_sum(&steps, span);
    let flat_base = sub_moving_mean(x, w(0.25));
    let mut level = length[..w(2.0)].iter().fold(0.0f32, |m, &v| m.max(v));
    let (refractory, reach, patience) = (w(0.25), w(0.1) as i64, w(2.0));
    let mut beats: Vec<i64> = Vec::new();
    let mut since_beat = 0;
    let mut i = 1;
    while i < n {
        let thr = 0.4 * level;
        if level > 0.0 && length[i] > thr && length[i - 1] <= thr {
            // The curve length peaks within its own span after the crossing.
            let top = (i..(i + span).min(n)).fold(0.0f32, |m, k| m.max(length[k]));
            level = 0.875 * level + 0.125 * top;
            let (lo, hi) = (
                (i as i64 - reach).max(0),
                (i as i64 + reach).min(n as i64 - 1),
            );
            let beat = (lo..=hi)
                .max_by(|&p, &q| {
                    flat_base[p as usize]
                        .abs()
                        .total_cmp(&flat_base[q as usize].abs())
                })
                .unwrap_or(i as i64);
            if beats.last().is_none_or(|&b| beat - b > refractory as i64) {
                beats.push(beat);
            }
            since_beat = 0;
            i += refractory;
            continue;
        }
        since_beat += 1;
        if since_beat > patience {
            level = length[i - patience..=i]
                .iter()
                .fold(0.0f32, |m, &v| m.max(v));
            since_beat = 0;
        }
        i += 1;
    }
    beats
}

/// Centred moving mean over `win` samples.
fn moving_mean(x: &[f32], win: usize) -> Vec<f32> {
    let base = sub_moving_mean(x, win);
    x.iter().zip(base).map(|(v, b)| v - b).collect()
}

fn flat_fraction(x: &[f32], fs: f64) -> f32 {
    let min_run = ((FLAT_SECS * fs) as usize).max(2);
    let still: Vec<bool> = (0..x.len())
        .map(|i| {
            let prev = i.checked_sub(1).map(|p| (x[i] - x[p]).abs() < FLAT_MV);
            let next = x.get(i + 1).map(|v| (v - x[i]).abs() < FLAT_MV);
            // A sample is still when it moves little from a neighbour.
            prev.unwrap_or(false) || next.unwrap_or(false)
        })
        .collect();
    share_in_runs(&still, min_run)
}

fn clipped_fraction(x: &[f32], fs: f64) -> f32 {
    let (min, max) = x
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let range = max - min;
    // Also an empty window (range -inf) or one holding NaN.
    if range.is_nan() || range <= FLAT_MV {
        return 0.0;
    }
    let tol = 0.001 * range;
    let at_rail: Vec<bool> = x
        .iter()
        .map(|&v| v >= max - tol || v <= min + tol)
        .collect();
    share_in_runs(&at_rail, ((CLIP_SECS * fs) as usize).max(2))
}

/// Share of `flags` that lie in runs of at least `min_run` true values.
fn share_in_runs(flags: &[bool], min_run: usize) -> f32 {
    if flags.is_empty() {
        return 0.0;
    }
    let (mut run, mut counted) = (0usize, 0usize);
    for &f in flags.iter().chain([&false]) {
        if f {
            run += 1;
        } else {
            if run >= min_run {
                counted += run;
            }
            run = 0;
        }
    }
    counted as f32 / flags.len() as f32
}

fn kurtosis(x: &[f32]) -> f32 {
    let n = x.len() as f64;
    if x.is_empty() {
        return 0.0;
    }
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let (m2, m4) = x.iter().fold((0.0, 0.0), |(m2, m4), &v| {
        let d = v as f64 - mean;
        (m2 + d * d / n, m4 + d * d * d * d / n)
    });
    if m2 <= 0.0 {
        0.0
    } else {
        (m4 / (m2 * m2)) as f32
    }
}

fn psqi(x: &[f32], fs: f64) -> f32 {
    if x.len() < 2 {
        return 0.0;
    }
    let mut spectrum = Spectrum::new(x.len(), fs);
    let bin_hz = spectrum.bin_hz();
    let power = |bins: &[realfft::num_complex::Complex<f32>], from: f64, to: f64| -> f64 {
        bins.iter()
            .enumerate()
            .filter(|(j, _)| (from..=to).contains(&(*j as f64 * bin_hz)))
            .map(|(_, c)| c.norm_sqr() as f64)
            .sum()
    };
    let bins = spectrum.transform(x);
    let (qrs, all) = (power(bins, 5.0, 15.0), power(bins, 5.0, 40.0));
    if all > 0.0 { (qrs / all) as f32 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::test_signals::{noise, samples, sinus};

    const FS: f64 = 250.0;

    fn sine(hz: f64, amp: f32, secs: f64) -> Vec<f32> {
        (0..samples(secs))
            .map(|i| amp * (2.0 * std::f64::consts::PI * hz * i as f64 / FS).sin() as f32)
            .collect()
    }

    #[test]
    fn clean_sinus_scores_high() {
        for (seed, bpm) in [(1, 60.0), (2, 75.0), (3, 130.0)] {
            let q = window_sqi(&sinus(seed, bpm, 10.0), FS);
            assert!(q.bsqi > 0.9, "{bpm}: {q:?}");
            assert!(q.kurtosis > 5.0, "{bpm}: {q:?}");
            assert!(q.psqi > 0.4, "{bpm}: {q:?}");
            assert_eq!(
                (q.flat_fraction, q.clipped_fraction),
                (0.0, 0.0),
                "{bpm}: {q:?}"
            );
        }
    }

    #[test]
    fn noise_scores_low() {
        let q = window_sqi(&noise(1, 0.5, 10.0), FS);
        assert!(q.bsqi < 0.3, "{q:?}");
        assert!(q.kurtosis < 3.0, "{q:?}");
        // ECG under heavy noise (about 2 dB): the detectors drift apart.
        let clean = sinus(2, 75.0, 10.0);
        let noisy: Vec<f32> = clean
            .iter()
            .zip(noise(4, 0.6, 10.0))
            .map(|(a, b)| a + b)
            .collect();
        let q = window_sqi(&noisy, FS);
        assert!(q.bsqi < 0.5, "{q:?}");
    }

    #[test]
    fn a_flat_line_is_flat_and_unreadable() {
        let q = window_sqi(&[0.3; 2_500], FS);
        assert_eq!(
            q,
            WindowSqi {
                bsqi: 0.0,
                flat_fraction: 1.0,
                clipped_fraction: 0.0,
                kurtosis: 0.0,
                psqi: 0.0
            }
        );
    }

    #[test]
    fn half_a_flat_window_is_half_flat() {
        let mut x = sinus(5, 75.0, 5.0);
        let last = *x.last().unwrap();
        x.extend(std::iter::repeat_n(last, samples(5.0)));
        let f = window_sqi(&x, FS).flat_fraction;
        assert!((f - 0.5).abs() < 0.03, "{f}");
    }

    #[test]
    fn a_clipped_sine_sits_at_its_rails_two_thirds_of_the_time() {
        // |sin| >= 1/2 for two thirds of a cycle; clipped at +-1 from an amplitude of 2.
        let x: Vec<f32> = sine(1.0, 2.0, 10.0)
            .iter()
            .map(|v| v.clamp(-1.0, 1.0))
            .collect();
        let c = window_sqi(&x, FS).clipped_fraction;
        assert!((c - 2.0 / 3.0).abs() < 0.01, "{c}");
    }

    #[test]
    fn the_qrs_band_holds_a_10_hz_wave_and_not_a_30_hz_one() {
        assert!(window_sqi(&sine(10.0, 1.0, 8.0), FS).psqi > 0.95);
        assert!(window_sqi(&sine(30.0, 1.0, 8.0), FS).psqi < 0.05);
        // A sine's kurtosis is 1.5.
        assert!((window_sqi(&sine(10.0, 1.0, 8.0), FS).kurtosis - 1.5).abs() < 0.01);
    }

    #[test]
    fn bsqi_matches_beats_one_to_one_within_150_ms() {
        // 150 ms at 250 Hz is 37 samples: 100~110 and 500~520 match; 300 and 700 do not.
        assert_eq!(bsqi(&[100, 300, 500], &[110, 520, 700], FS), 2.0 / 4.0);
        // One beat cannot match two.
        assert_eq!(bsqi(&[100], &[90, 110], FS), 1.0 / 2.0);
        assert_eq!(bsqi(&[], &[], FS), 0.0);
    }

    #[test]
    fn the_length_detector_finds_sinus_beats_after_a_flat_start() {
        let rhythm = sinus(6, 60.0, 12.0);
        let lead = samples(3.0);
        // The beats of the rhythm alone, where the flat start will shift them.
        let truth: Vec<i64> = detect_qrs(&rhythm, FS)
            .iter()
            .map(|&b| b + lead as i64)
            .collect();
        assert!(truth.len() >= 10, "{truth:?}");
        let mut x = vec![0.0; lead];
        x.extend(&rhythm);
        let found = detect_qrs_length(&x, FS);
        // It relearns its level 2 s into the silence and may miss a beat or two meanwhile.
        assert!(found.len() + 2 >= truth.len(), "{found:?} vs {truth:?}");
        assert!(bsqi(&found, &truth, FS) > 0.8, "{found:?} vs {truth:?}");
    }
}
