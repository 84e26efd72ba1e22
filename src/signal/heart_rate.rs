//! Heart rate at 1 Hz from beats, the way a bedside monitor reports it, and a QRS detector for
//! records whose annotations carry no beats (vfdb), also one of the two detectors of bSQI and
//! the beat source of the classical VT rule.
//!
//! The detector is a compact Pan-Tompkins: baseline removal, derivative, squaring, a 150 ms
//! moving integral, then peaks above an adaptive threshold between signal and noise levels
//! with a 200 ms refractory period.

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
    let n = x.len();
    if n < (fs * 2.0) as usize {
        return Vec::new();
    }
    let w = |secs: f64| ((secs * fs).round() as usize).max(1);
    // Baseline removal: subtract a 200 ms moving mean.
    let y = sub_moving_mean(x, w(0.2));
    // Derivative, squared.
    let mut d = vec![0.0f32; n];
    for i in 1..n - 1 {
        let v = y[i + 1] - y[i - 1];
        d[i] = v * v;
    }
    // 150 ms moving integral.
    let m = moving_sum(&d, w(0.15));
    let refractory = w(0.2) as i64;
    let learn = w(2.0).min(n);
    let mut spk = m[..learn].iter().cloned().fold(0.0f32, f32::max) * 0.5;
    let mut npk = m[..learn].iter().sum::<f32>() / learn as f32 * 0.5;
    let mut beats: Vec<i64> = Vec::new();
    for i in 1..n - 1 {
        if !(m[i] > m[i - 1] && m[i] >= m[i + 1]) {
            continue;
        }
        let threshold = npk + 0.25 * (spk - npk);
        let is_beat = m[i] > threshold && beats.last().is_none_or(|&b| i as i64 - b > refractory);
        if is_beat {
            beats.push(i as i64);
            spk = 0.125 * m[i] + 0.875 * spk;
        } else {
            npk = 0.125 * m[i] + 0.875 * npk;
        }
    }
    // The integral peaks after the QRS: place each beat at the largest deflection of the
    // baseline-free signal in the integration window before the detection.
    let back = w(0.15) as i64;
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
}
