//! Signal quality of one lead's window as the agreement of two QRS detectors (bSQI, after Li,
//! Clifford and colleagues and the PhysioNet/CinC Challenge 2015 entries that used it): the
//! classical detector reads it to tell noise from rhythm, and the beat counter's rule may gate
//! on it. (The flat and clipped fractions, kSQI and pSQI once measured beside it, as alarm
//! gates and model inputs, were not adopted: lab notebook, 2026-11-23.)
//!
//! - **bSQI**: beats matched within 150 ms between [`detect_qrs`](super::heart_rate::detect_qrs) (a Pan-Tompkins: squared
//!   slope, 150 ms integral) and `detect_qrs_length` (a curve-length detector after Zong's
//!   `wqrs`: smoothed absolute slope summed over 130 ms, its own adaptive threshold and a
//!   longer refractory period), over the beats either found: `matched / (n1 + n2 - matched)`,
//!   Li, Clifford et al.'s definition. Two detectors that work differently agree on clean ECG
//!   and drift apart in noise. A window where neither finds a beat scores 0: no evidence of a
//!   readable ECG.

use super::heart_rate::{moving_sum, sub_moving_mean};

/// Two detectors' beats closer than this are the same beat, s.
const MATCH_SECS: f64 = 0.15;

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
    // Curve length over 130 ms after a 20 ms smoothing.
    let span = w(0.13);
    let length = curve_length(x, w(0.02), span);
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

/// The curve length of `x` smoothed by a centred moving mean over `smooth` samples: the moving
/// sum over `span` samples of its absolute first difference (a wide deflection counts as much
/// as a sharp one of the same height). It trails: the sum at `i` ends there.
pub(crate) fn curve_length(x: &[f32], smooth: usize, span: usize) -> Vec<f32> {
    let smooth = moving_mean(x, smooth);
    let steps: Vec<f32> = std::iter::once(0.0)
        .chain(smooth.windows(2).map(|p| (p[1] - p[0]).abs()))
        .collect();
    moving_sum(&steps, span)
}

/// Centred moving mean over `win` samples.
fn moving_mean(x: &[f32], win: usize) -> Vec<f32> {
    let base = sub_moving_mean(x, win);
    x.iter().zip(base).map(|(v, b)| v - b).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::heart_rate::detect_qrs;
    use crate::signal::test_signals::{noise, samples, sinus};

    const FS: f64 = 250.0;

    #[test]
    fn two_detectors_agree_on_clean_sinus_and_drift_apart_in_noise() {
        let agreement = |x: &[f32]| bsqi(&detect_qrs(x, FS), &detect_qrs_length(x, FS), FS);
        for (seed, bpm) in [(1, 60.0), (2, 75.0), (3, 130.0)] {
            let q = agreement(&sinus(seed, bpm, 10.0));
            assert!(q > 0.9, "{bpm}: {q}");
        }
        assert!(agreement(&noise(1, 0.5, 10.0)) < 0.3);
        // ECG under heavy noise (about 2 dB).
        let noisy: Vec<f32> = sinus(2, 75.0, 10.0)
            .iter()
            .zip(noise(4, 0.6, 10.0))
            .map(|(a, b)| a + b)
            .collect();
        assert!(agreement(&noisy) < 0.5);
        assert_eq!(agreement(&[0.3; 2_500]), 0.0, "a flat line");
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
