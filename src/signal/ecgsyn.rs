//! Synthetic ECG after McSharry, Clifford, Tarassenko and Smith, "A dynamical model for
//! generating synthetic electrocardiogram signals", IEEE Trans Biomed Eng 50(3):289-294 (2003):
//! a trajectory around the unit circle whose angle sets the phase of the beat, with Gaussian
//! events P, Q, R, S and T pushing the height `z`. Heart rate varies with a slow
//! respiratory-sinus-arrhythmia component and seeded noise.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Angles, amplitudes and widths of the P, Q, R, S, T events (the paper's Table 1).
const THETA: [f64; 5] = [
    -std::f64::consts::PI / 3.0,
    -std::f64::consts::PI / 12.0,
    0.0,
    std::f64::consts::PI / 12.0,
    std::f64::consts::PI / 2.0,
];
const A: [f64; 5] = [1.2, -5.0, 30.0, -7.5, 0.75];
const B: [f64; 5] = [0.25, 0.1, 0.1, 0.1, 0.4];

/// A running synthetic ECG generator at 250 Hz.
pub struct EcgSyn {
    theta: f64,
    z: f64,
    t: f64,
    rr: f64,
    mean_hr: f64,
    rng: SmallRng,
}

/// Samples per second produced.
pub(crate) const FS: f64 = 250.0;
const SUBSTEPS: usize = 4;

impl EcgSyn {
    pub fn new(seed: u64, mean_hr: f64) -> EcgSyn {
        EcgSyn {
            theta: -std::f64::consts::PI,
            z: 0.0,
            t: 0.0,
            rr: 60.0 / mean_hr,
            mean_hr,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Current heart rate (beats/min).
    pub(crate) fn heart_rate(&self) -> f64 {
        60.0 / self.rr
    }

    /// Next sample (mV, lead II-like).
    pub fn next_sample(&mut self) -> f32 {
        let dt = 1.0 / FS / SUBSTEPS as f64;
        for _ in 0..SUBSTEPS {
            let omega = 2.0 * std::f64::consts::PI / self.rr;
            let prev = self.theta;
            self.theta += omega * dt;
            if self.theta > std::f64::consts::PI {
                self.theta -= 2.0 * std::f64::consts::PI;
            }
            if prev < 0.0 && self.theta >= 0.0 {
                // A new R wave: draw the next interval (RSA at 0.25 Hz plus noise).
                let rsa = 0.05 * (2.0 * std::f64::consts::PI * 0.25 * self.t).sin();
                let noise: f64 = self.rng.random_range(-0.02..0.02);
                self.rr = (60.0 / self.mean_hr) * (1.0 + rsa + noise);
            }
            let mut dz = -(self.z);
            for i in 0..5 {
                let mut d = self.theta - THETA[i];
                d = (d + std::f64::consts::PI).rem_euclid(2.0 * std::f64::consts::PI)
                    - std::f64::consts::PI;
                dz -= A[i] * omega * d * (-d * d / (2.0 * B[i] * B[i])).exp();
            }
            self.z += dz * dt;
            self.t += dt;
        }
        // z peaks near 0.23 at the R wave; scale to a ~1.2 mV R wave, as ECGSYN rescales.
        (self.z * 5.0) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beats_at_the_requested_rate_with_a_dominant_r_wave() {
        let mut g = EcgSyn::new(1, 75.0);
        let x: Vec<f32> = (0..(FS as usize * 20)).map(|_| g.next_sample()).collect();
        let beats = crate::signal::heart_rate::detect_qrs(&x, FS);
        let bpm = beats.len() as f64 / 20.0 * 60.0;
        assert!(
            (65.0..85.0).contains(&bpm),
            "{bpm} bpm from {} beats",
            beats.len()
        );
        let max = x.iter().cloned().fold(f32::MIN, f32::max);
        let min = x.iter().cloned().fold(f32::MAX, f32::min);
        assert!(max > 0.5 && max > -min, "R dominates: max {max} min {min}");
    }
}
