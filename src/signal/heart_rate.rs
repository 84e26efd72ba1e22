//! Heart rate at 1 Hz from beats, the way a bedside monitor reports it, and a QRS detector for
//! records whose annotations carry no beats (vfdb), also one of the two detectors of bSQI and
//! the beat source of the classical VT rule.
//!
//! The detector is a compact Pan-Tompkins: baseline removal, derivative, squaring, a 150 ms
//! moving integral, then peaks above an adaptive threshold between signal and noise levels
//! with a 200 ms refractory period. The beat counter's detector ([`detect_qrs_leads`]) sums
//! the integrals of both leads, each in units of its own typical beat and weighted by how far
//! its beats stand out, and lowers the threshold after a long gap.

use crate::core::stats::upper_median_f32;

/// Seconds of beats a reported heart rate averages over.
pub(crate) const HR_AVERAGE_SECS: f64 = 8.0;
/// Highest heart rate reported; faster beat trains are clamped.
pub(crate) const HR_MAX_BPM: f32 = 350.0;

/// Heart rate in beats/min reported at time `t_secs`: the mean RR interval of the beats in the
/// last [`HR_AVERAGE_SECS`], or 0 when fewer than two beats fall there (as a monitor shows
/// asystole or a lost signal). `beats` are sorted sample indices at `fs`.
pub(crate) fn heart_rate_at(beats: &[i64], fs: f64, t_secs: f64) -> f32 {
    let end = (t_secs * fs) as i64;
    let start = ((t_secs - HR_AVERAGE_SECS) * fs) as i64;
    let lo = beats.partition_point(|&b| b <= start);
    let hi = beats.partition_point(|&b| b <= end);
    if hi < lo + 2 {
        return 0.0;
    }
    let span = (beats[hi - 1] - beats[lo]) as f64 / fs;
    let rr = span / (hi - lo - 1) as f64;
    ((60.0 / rr) as f32).min(HR_MAX_BPM)
}

/// Detects QRS complexes in `x` (physical units) sampled at `fs`; returns sample indices.
pub(crate) fn detect_qrs(x: &[f32], fs: f64) -> Vec<i64> {
    if x.len() < (fs * 2.0) as usize {
        return Vec::new();
    }
    let (y, m) = energy(x, fs);
    place(&pick(&m, fs, false), &y, fs)
}

/// Detects QRS complexes on every lead of `leads` together (each as long as the first, in
/// physical units, sampled at `fs`): each lead's [`energy`] in units of its typical beat's,
/// weighted by how far its beats stand above its baseline energy, capped at
/// [`LEAD_ENERGY_CAP`], summed, then peaks picked as [`detect_qrs`] picks them on one lead,
/// with the threshold halved once a beat is overdue. A beat that one lead barely shows (a wide
/// ventricular complex of low slope on lead II) stands out on the other; a lead of noise or a
/// flat one weighs little. Beats are placed on the first lead. One lead: [`detect_qrs`].
pub(crate) fn detect_qrs_leads(leads: &[&[f32]], fs: f64) -> Vec<i64> {
    let Some(&first) = leads.first() else {
        return Vec::new();
    };
    let n = first.len();
    if n < (fs * 2.0) as usize {
        return Vec::new();
    }
    let others: Vec<&[f32]> = leads[1..]
        .iter()
        .copied()
        .filter(|l| l.len() == n)
        .collect();
    if others.is_empty() {
        return detect_qrs(first, fs);
    }
    let (y0, m0) = energy(first, fs);
    let mut sum = vec![0.0f32; n];
    let mut weights = 0.0f32;
    for m in std::iter::once(m0).chain(others.iter().map(|l| energy(l, fs).1)) {
        let (level, weight) = beat_level(&m, fs);
        if level <= 0.0 || weight <= 0.0 {
            continue;
        }
        for (s, v) in sum.iter_mut().zip(&m) {
            *s += weight * (v / level).min(LEAD_ENERGY_CAP);
        }
        weights += weight;
    }
    if weights <= 0.0 {
        return detect_qrs(first, fs);
    }
    place(&pick(&sum, fs, true), &y0, fs)
}

/// A lead's energy enters a sum of leads capped at this many times its typical beat's: a run
/// of complexes far taller on one lead than its usual beats would otherwise lift the signal
/// level so far that the usual beats after it fall under the threshold.
const LEAD_ENERGY_CAP: f32 = 3.0;

/// A lead's baseline-free signal and its QRS energy: the squared derivative's 150 ms moving
/// integral.
fn energy(x: &[f32], fs: f64) -> (Vec<f32>, Vec<f32>) {
    let n = x.len();
    let w = |secs: f64| ((secs * fs).round() as usize).max(1);
    // Baseline removal: subtract a 200 ms moving mean.
    let y = sub_moving_mean(x, w(0.2));
    // Derivative, squared.
    let mut d = vec![0.0f32; n];
    for i in 1..n.saturating_sub(1) {
        let v = y[i + 1] - y[i - 1];
        d[i] = v * v;
    }
    // 150 ms moving integral.
    let m = moving_sum(&d, w(0.15));
    (y, m)
}

/// A lead's typical beat energy (the median of its per-second maxima) and its weight in a
/// sum of leads: how many times its median energy that level is, less one (0 for a lead
/// whose peaks do not stand out: noise, or a flat line).
fn beat_level(m: &[f32], fs: f64) -> (f32, f32) {
    let second = (fs as usize).max(1);
    let peaks: Vec<f32> = m
        .chunks(second)
        .map(|c| c.iter().copied().fold(0.0f32, f32::max))
        .collect();
    let level = upper_median_f32(&peaks);
    let base = upper_median_f32(m);
    if level <= 0.0 {
        return (0.0, 0.0);
    }
    let standing = if base > 0.0 { level / base } else { 100.0 };
    (level, (standing.min(100.0) - 1.0).max(0.0))
}

/// Peaks of the energy `m` above an adaptive threshold between signal and noise levels, with
/// a 200 ms refractory period. With `search_back`, as in Pan and Tompkins' search-back: once
/// no beat has come for 1.66 mean intervals (of the last eight), a peak over half the
/// threshold is a beat, so a level lifted by a run of tall complexes cannot hide the beats
/// after it.
fn pick(m: &[f32], fs: f64, search_back: bool) -> Vec<i64> {
    let n = m.len();
    let w = |secs: f64| ((secs * fs).round() as usize).max(1);
    let refractory = w(0.2) as i64;
    let learn = w(2.0).min(n);
    let mut spk = m[..learn].iter().cloned().fold(0.0f32, f32::max) * 0.5;
    let mut npk = m[..learn].iter().sum::<f32>() / learn as f32 * 0.5;
    let mut beats: Vec<i64> = Vec::new();
    let mean_rr = |beats: &[i64]| {
        let k = beats.len().min(9);
        if k < 2 {
            return fs as f32;
        }
        (beats[beats.len() - 1] - beats[beats.len() - k]) as f32 / (k - 1) as f32
    };
    for i in 1..n - 1 {
        if !(m[i] > m[i - 1] && m[i] >= m[i + 1]) {
            continue;
        }
        let mut threshold = npk + 0.25 * (spk - npk);
        if search_back
            && beats
                .last()
                .is_some_and(|&b| (i as i64 - b) as f32 > 1.66 * mean_rr(&beats))
        {
            threshold *= 0.5;
        }
        let is_beat = m[i] > threshold && beats.last().is_none_or(|&b| i as i64 - b > refractory);
        if is_beat {
            beats.push(i as i64);
            spk = 0.125 * m[i] + 0.875 * spk;
        } else {
            npk = 0.125 * m[i] + 0.875 * npk;
        }
    }
    beats
}

/// The integral peaks after the QRS: each beat placed at the largest deflection of the
/// baseline-free signal `y` in the integration window before the detection.
fn place(beats: &[i64], y: &[f32], fs: f64) -> Vec<i64> {
    let back = ((0.15 * fs).round() as i64).max(1);
    beats
        .iter()
        .map(|&b| {
            let lo = (b - back).max(0) as usize;
            (lo..=b as usize)
                .max_by(|&p, &q| y[p].abs().total_cmp(&y[q].abs()))
                .unwrap_or(b as usize) as i64
        })
        .collect()
}

/// `x` less its centred moving mean over `win` samples (the baseline).
pub(crate) fn sub_moving_mean(x: &[f32], win: usize) -> Vec<f32> {
    let half = win / 2;
    // Running sums kept in a register (pushing each onto the last one read it back from
    // memory, a store and a load in every step of a chain of dependent additions).
    let mut prefix = vec![0.0f64; x.len() + 1];
    let mut acc = 0.0f64;
    for (p, &v) in prefix[1..].iter_mut().zip(x) {
        acc += v as f64;
        *p = acc;
    }
    let n = x.len();
    let at = |i: usize| {
        let lo = i.saturating_sub(half);
        let hi = (i + half + 1).min(n);
        x[i] - ((prefix[hi] - prefix[lo]) / (hi - lo) as f64) as f32
    };
    // Away from the edges every mean spans `2 half + 1` samples: a loop the compiler
    // vectorises, the same arithmetic as at the edges.
    if n <= 2 * half {
        return (0..n).map(at).collect();
    }
    let mut out: Vec<f32> = Vec::with_capacity(n);
    out.extend((0..half).map(at));
    let span = (2 * half + 1) as f64;
    out.extend(
        x[half..n - half]
            .iter()
            .zip(prefix[2 * half + 1..].iter().zip(&prefix[..]))
            .map(|(&v, (&hi, &lo))| v - ((hi - lo) / span) as f32),
    );
    out.extend((n - half..n).map(at));
    out
}

pub(crate) fn moving_sum(x: &[f32], win: usize) -> Vec<f32> {
    // Written into place, not pushed: a push that may grow the vector keeps the running sum
    // in memory, a store and a load in every step of the chain.
    let mut out = vec![0.0f32; x.len()];
    let mut acc = 0.0f64;
    for (i, o) in out.iter_mut().enumerate() {
        acc += x[i] as f64;
        if i >= win {
            acc -= x[i - win] as f64;
        }
        *o = acc as f32;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::test_signals::lead_pair_with_a_quiet_run;

    /// A lead-like test signal: beats, wander and a step, at values with long mantissas.
    fn wiggly(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let t = i as f32 / 250.0;
                (t * 7.3).sin() * 0.31 + (t * 0.4).cos() * 1.7 + if i > n / 2 { 0.9 } else { 0.0 }
            })
            .collect()
    }

    #[test]
    fn moving_means_and_sums_match_their_definitions_bit_for_bit() {
        for n in [0, 1, 5, 49, 50, 51, 149, 151, 300, 7_500] {
            let x = wiggly(n);
            for win in [1, 2, 50, 150] {
                let half = win / 2;
                // The definitions, in the order the scores were first computed in.
                let mut prefix = vec![0.0f64];
                for &v in &x {
                    prefix.push(prefix.last().unwrap() + v as f64);
                }
                let mean: Vec<f32> = (0..n)
                    .map(|i| {
                        let (lo, hi) = (i.saturating_sub(half), (i + half + 1).min(n));
                        x[i] - ((prefix[hi] - prefix[lo]) / (hi - lo) as f64) as f32
                    })
                    .collect();
                let got = sub_moving_mean(&x, win);
                assert_eq!(got.len(), n);
                for (a, b) in got.iter().zip(&mean) {
                    assert_eq!(a.to_bits(), b.to_bits(), "n {n} win {win}");
                }
                let mut acc = 0.0f64;
                let sum: Vec<f32> = (0..n)
                    .map(|i| {
                        acc += x[i] as f64;
                        if i >= win {
                            acc -= x[i - win] as f64;
                        }
                        acc as f32
                    })
                    .collect();
                let got = moving_sum(&x, win);
                assert_eq!(got.len(), n);
                for (a, b) in got.iter().zip(&sum) {
                    assert_eq!(a.to_bits(), b.to_bits(), "n {n} win {win}");
                }
            }
        }
    }

    #[test]
    fn heart_rate_from_regular_beats() {
        let beats: Vec<i64> = (0..100).map(|i| i * 200).collect(); // every 0.8 s at 250 Hz
        assert!((heart_rate_at(&beats, 250.0, 20.0) - 75.0).abs() < 1e-3);
        assert_eq!(heart_rate_at(&beats, 250.0, 200.0), 0.0); // no beats in the last 8 s
    }

    #[test]
    fn detects_synthetic_qrs_train() {
        let fs = 250.0;
        let mut x = vec![0.0f32; 250 * 20];
        let truth: Vec<usize> = (1..20).map(|i| i * 250 + 17).collect(); // 60 bpm
        for &t in &truth {
            for k in 0..10usize {
                let v = 1.0 - (k as f32 - 5.0).abs() / 5.0;
                x[t - 5 + k] += v;
            }
        }
        for (i, v) in x.iter_mut().enumerate() {
            *v += 0.05 * (i as f32 * 0.01).sin(); // baseline wander
        }
        let found = detect_qrs(&x, fs);
        assert_eq!(found.len(), truth.len(), "{found:?}");
        for (f, t) in found.iter().zip(&truth) {
            assert!((*f - *t as i64).abs() <= 10, "{f} vs {t}");
        }
    }

    fn found_all(found: &[i64], truth: &[usize]) -> usize {
        truth
            .iter()
            .filter(|&&t| found.iter().any(|&f| (f - t as i64).abs() <= 30))
            .count()
    }

    #[test]
    fn beats_one_lead_barely_shows_are_found_on_both_together() {
        let (a, b, truth) = lead_pair_with_a_quiet_run();
        let one = detect_qrs(&a, 250.0);
        assert!(
            found_all(&one, &truth) < truth.len(),
            "lead II alone finds them all"
        );
        let both = detect_qrs_leads(&[&a, &b], 250.0);
        assert_eq!(found_all(&both, &truth), truth.len(), "{both:?}");
        assert_eq!(both.len(), truth.len(), "no extra detections: {both:?}");
    }

    #[test]
    fn a_second_lead_of_noise_or_a_flat_one_changes_nothing() {
        let (a, _, truth) = lead_pair_with_a_quiet_run();
        let one = detect_qrs(&a, 250.0);
        let flat = vec![0.0f32; a.len()];
        assert_eq!(detect_qrs_leads(&[&a, &flat], 250.0), one);
        let noise: Vec<f32> = (0..a.len())
            .map(|i| ((i as u64 * 2_654_435_761) % 1_000) as f32 / 2_000.0 - 0.25)
            .collect();
        let with_noise = detect_qrs_leads(&[&a, &noise], 250.0);
        assert_eq!(found_all(&with_noise, &truth), found_all(&one, &truth));
        assert_eq!(with_noise.len(), one.len(), "{with_noise:?}");
        // One lead is the one-lead detector.
        assert_eq!(detect_qrs_leads(&[&a], 250.0), one);
    }
}
