//! Synthetic leads at 250 Hz for the tests of the detectors and quality indices: sinus rhythm
//! from [`ecgsyn`](super::ecgsyn) and seeded white noise.

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

/// White noise, uniform in ±`amp` mV.
pub(crate) fn noise(seed: u64, amp: f32, secs: f64) -> Vec<f32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..samples(secs))
        .map(|_| rng.random_range(-amp..amp))
        .collect()
}
