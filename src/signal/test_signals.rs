//! Synthetic leads at 250 Hz for the tests of the detectors and quality indices: sinus rhythm
//! from [`ecgsyn`](super::ecgsyn), and by hand a run of fast wide complexes (monomorphic VT), a
//! sine-like fibrillation wave (VF), seeded white noise, and a train of narrow beats with wide
//! inverted ones among them (ventricular ectopy), and a pair of leads holding a run that only
//! the second shows well.

use std::f64::consts::PI;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::ecgsyn::{EcgSyn, FS};

/// Samples of `secs` seconds.
pub(crate) fn samples(secs: f64) -> usize {
    (secs * FS).round() as usize
}

/// Sinus rhythm at about `bpm`.
pub(crate) fn sinus(seed: u64, bpm: f64, secs: f64) -> Vec<f32> {
    let mut g = EcgSyn::new(seed, bpm);
    (0..samples(secs)).map(|_| g.next_sample()).collect()
}

/// Monomorphic VT: at `bpm`, each complex a positive then a negative half-sine lobe of
/// `qrs_ms / 2` each (1.5 mV), then a low, broad repolarisation wave, then baseline.
pub(crate) fn wide_run(bpm: f64, qrs_ms: f64, secs: f64) -> Vec<f32> {
    let rr = 60.0 / bpm;
    let lobe = qrs_ms / 2000.0;
    (0..samples(secs))
        .map(|i| {
            let t = (i as f64 / FS) % rr;
            let v = if t < lobe {
                1.5 * (PI * t / lobe).sin()
            } else if t < 2.0 * lobe {
                -1.5 * (PI * (t - lobe) / lobe).sin()
            } else if t < 2.0 * lobe + 0.12 {
                0.3 * (PI * (t - 2.0 * lobe) / 0.12).sin()
            } else {
                0.0
            };
            v as f32
        })
        .collect()
}

/// Coarse VF: a 5 Hz wave whose frequency wanders by ±0.6 Hz and whose amplitude swells between
/// 0.2 and 0.6 mV, with a little noise.
pub(crate) fn fibrillation(seed: u64, secs: f64) -> Vec<f32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut phase = 0.0;
    (0..samples(secs))
        .map(|i| {
            let t = i as f64 / FS;
            let f = 5.0 + 0.6 * (2.0 * PI * 0.3 * t).sin();
            phase += 2.0 * PI * f / FS;
            let a = 0.4 + 0.2 * (2.0 * PI * 0.5 * t).sin();
            (a * phase.sin() + rng.random_range(-0.02..0.02)) as f32
        })
        .collect()
}

/// White noise, uniform in ±`amp` mV.
pub(crate) fn noise(seed: u64, amp: f32, secs: f64) -> Vec<f32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..samples(secs))
        .map(|_| rng.random_range(-amp..amp))
        .collect()
}

/// Narrow upright beats every `rr` samples over `len` samples (the first `rr` in), with the
/// beats numbered in `wide` wide and inverted instead; returns the lead and the beats' centres.
pub(crate) fn ectopic_train(len: usize, rr: usize, wide: &[usize]) -> (Vec<f32>, Vec<usize>) {
    let mut x = vec![0.0f32; len];
    let mut centres = Vec::new();
    for (k, at) in (rr..len - rr).step_by(rr).enumerate() {
        let (half, amp) = if wide.contains(&k) {
            (20usize, -2.5f32)
        } else {
            (5, 1.0)
        };
        for i in 0..2 * half {
            let phase = i as f32 / (2 * half) as f32 * std::f32::consts::PI;
            x[at - half + i] += amp * phase.sin();
        }
        centres.push(at);
    }
    (x, centres)
}

/// Two leads of 20 s: narrow beats every 0.8 s (1 mV on the first lead, 0.2 mV on the
/// second), and from 8 s on a run of seven broad complexes every 0.4 s that the first lead
/// barely shows (0.3 mV over 200 ms) and the second shows tall (2 mV, inverted); returns the
/// leads and every beat's centre.
pub(crate) fn lead_pair_with_a_quiet_run() -> (Vec<f32>, Vec<f32>, Vec<usize>) {
    let n = samples(20.0);
    let (mut a, mut b) = (vec![0.0f32; n], vec![0.0f32; n]);
    let mut truth = Vec::new();
    let add = |x: &mut [f32], at: usize, half: usize, amp: f32| {
        for i in 0..2 * half {
            let phase = i as f32 / (2 * half) as f32 * std::f32::consts::PI;
            x[at - half + i] += amp * phase.sin();
        }
    };
    let mut at = 200;
    while at < n - 200 {
        if (2_000..2_700).contains(&at) {
            add(&mut a, at, 25, 0.3);
            add(&mut b, at, 25, -2.0);
        } else {
            add(&mut a, at, 5, 1.0);
            add(&mut b, at, 5, 0.2);
        }
        truth.push(at);
        at += if (1_900..2_600).contains(&at) {
            100
        } else {
            200
        };
    }
    (a, b, truth)
}
