//! Model input preparation, shared by training and serving so both see identical numbers.
//!
//! ECG: models trained so (the manifest's `bandpass`) first pass the window through a
//! monitor-style 0.5-40 Hz band-pass, which on validation under recorded noise ranked better
//! than the raw window (docs/ZOO.md, "The model zoo"). Then each window is centred on its mean and divided by its standard deviation, floored at
//! [`ECG_MIN_SCALE_MV`] so a flat line (asystole, lead off) is not blown up into noise, then
//! clipped to +/-[`ECG_CLIP`]. Non-finite samples count as 0 mV (the daemon's quality gate
//! rejects such windows before they get here). Vitals: the 1 Hz heart-rate series becomes five
//! features, standardised with the training set's mean and spread stored in the manifest.

use crate::core::window::SAMPLE_RATE_HZ;

/// Smallest scale (mV) a window is divided by.
pub(crate) const ECG_MIN_SCALE_MV: f64 = 0.05;
/// Normalised samples are clipped to this magnitude.
pub(crate) const ECG_CLIP: f32 = 20.0;
/// Names of the vitals features, in model-input order.
pub(crate) const VITALS_FEATURES: [&str; 5] = ["hr_mean", "hr_std", "hr_min", "hr_max", "hr_slope"];

/// Normalises one ECG window (mV) into `out` (same length).
pub(crate) fn normalize_ecg_into(x: &[f32], out: &mut [f32]) {
    let clean = |v: f32| if v.is_finite() { v as f64 } else { 0.0 };
    let n = x.len().max(1) as f64;
    let mean = x.iter().map(|&v| clean(v)).sum::<f64>() / n;
    let var = x.iter().map(|&v| (clean(v) - mean).powi(2)).sum::<f64>() / n;
    let scale = var.sqrt().max(ECG_MIN_SCALE_MV);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (((clean(v) - mean) / scale) as f32).clamp(-ECG_CLIP, ECG_CLIP);
    }
}

/// Prepares one ECG window (mV) into `out`: the monitor band-pass first when the model was
/// trained with it, then normalisation. Training and serving both come through here.
pub(crate) fn prepare_ecg_into(x: &[f32], bandpass: bool, out: &mut [f32]) {
    if bandpass {
        normalize_ecg_into(&monitor_bandpass(x), out);
    } else {
        normalize_ecg_into(x, out);
    }
}

/// A monitor-style 0.5-40 Hz band-pass at [`SAMPLE_RATE_HZ`] (second-order Butterworth high- and
/// low-pass sections, causal, started at rest on the first sample), as bedside monitors
/// filter their ECG display.
pub(crate) fn monitor_bandpass(x: &[f32]) -> Vec<f32> {
    band_pass(x, 0.5, Some(40.0))
}

/// A causal band-pass at [`SAMPLE_RATE_HZ`]: a second-order Butterworth high-pass at `low_hz`,
/// then, where `high_hz` is given, a low-pass at it; started at rest on the first sample
/// (non-finite samples read as it). A monitor's filter modes, for training and tests.
pub(crate) fn band_pass(x: &[f32], low_hz: f64, high_hz: Option<f64>) -> Vec<f32> {
    let fs = SAMPLE_RATE_HZ as f64;
    let hp = Biquad::butterworth(low_hz, fs, true);
    let lp = high_hz.map(|f| Biquad::butterworth(f, fs, false));
    let x0 = x.first().copied().filter(|v| v.is_finite()).unwrap_or(0.0) as f64;
    let (mut h, mut l) = ([0.0f64; 4], [0.0f64; 4]);
    x.iter()
        .map(|&v| {
            let v = if v.is_finite() { v as f64 - x0 } else { 0.0 };
            let y = hp.step(v, &mut h);
            lp.as_ref().map_or(y, |lp| lp.step(y, &mut l)) as f32
        })
        .collect()
}

/// One second-order IIR section (direct form I).
struct Biquad {
    b: [f64; 3],
    a: [f64; 2],
}

impl Biquad {
    /// Butterworth (Q = 1/sqrt 2) low- or high-pass by the bilinear transform.
    fn butterworth(cutoff_hz: f64, fs: f64, high: bool) -> Biquad {
        let w = std::f64::consts::TAU * cutoff_hz / fs;
        let alpha = w.sin() / std::f64::consts::SQRT_2;
        let c = w.cos();
        let a0 = 1.0 + alpha;
        let b = if high {
            [(1.0 + c) / 2.0, -(1.0 + c), (1.0 + c) / 2.0]
        } else {
            [(1.0 - c) / 2.0, 1.0 - c, (1.0 - c) / 2.0]
        };
        Biquad {
            b: b.map(|v| v / a0),
            a: [-2.0 * c / a0, (1.0 - alpha) / a0],
        }
    }

    /// One sample through the section; `s` holds x[n-1], x[n-2], y[n-1], y[n-2].
    fn step(&self, x: f64, s: &mut [f64; 4]) -> f64 {
        let y = self.b[0] * x + self.b[1] * s[0] + self.b[2] * s[1]
            - self.a[0] * s[2]
            - self.a[1] * s[3];
        *s = [x, s[0], y, s[2]];
        y
    }
}

/// Mean, standard deviation, minimum, maximum and least-squares slope (per second) of a 1 Hz
/// heart-rate series (beats/min; non-finite values count as 0, i.e. no beats).
pub(crate) fn vitals_features(hr: &[f32]) -> [f32; 5] {
    let v: Vec<f64> = hr
        .iter()
        .map(|&x| if x.is_finite() { x as f64 } else { 0.0 })
        .collect();
    if v.is_empty() {
        return [0.0; 5];
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let tm = (n - 1.0) / 2.0;
    let sxx: f64 = (0..v.len()).map(|i| (i as f64 - tm).powi(2)).sum();
    let sxy: f64 = v
        .iter()
        .enumerate()
        .map(|(i, x)| (i as f64 - tm) * (x - mean))
        .sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    [mean, std, min, max, slope].map(|x| x as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalize_ecg(x: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; x.len()];
        normalize_ecg_into(x, &mut out);
        out
    }

    #[test]
    fn ecg_normalisation_centres_scales_and_floors() {
        let x: Vec<f32> = (0..100)
            .map(|i| if i % 2 == 0 { 1.5 } else { 0.5 })
            .collect();
        let y = normalize_ecg(&x);
        assert!(y.iter().all(|v| (v.abs() - 1.0).abs() < 1e-6));
        let flat = normalize_ecg(&[2.0, 2.01, f32::NAN, 2.0]);
        assert!(flat.iter().all(|v| v.abs() <= ECG_CLIP), "{flat:?}");
        assert!(
            (flat[1] - flat[0]).abs() < 0.25,
            "flat line not amplified: {flat:?}"
        );
    }

    #[test]
    fn the_monitor_band_pass_keeps_qrs_band_and_drops_drift_and_hum() {
        let tone = |f: f32| -> Vec<f32> {
            (0..5000)
                .map(|i| (std::f32::consts::TAU * f * i as f32 / 250.0).sin())
                .collect()
        };
        let rms = |x: &[f32]| (x[2500..].iter().map(|v| v * v).sum::<f32>() / 2500.0).sqrt();
        let gain = |f: f32| rms(&monitor_bandpass(&tone(f))) / rms(&tone(f));
        assert!(gain(10.0) > 0.95, "10 Hz passes: {}", gain(10.0));
        assert!(gain(0.1) < 0.1, "0.1 Hz drift removed: {}", gain(0.1));
        assert!(gain(100.0) < 0.25, "100 Hz removed: {}", gain(100.0));
    }

    #[test]
    fn each_monitor_filter_mode_keeps_its_band() {
        let tone = |f: f32| -> Vec<f32> {
            (0..10_000)
                .map(|i| (std::f32::consts::TAU * f * i as f32 / 250.0).sin())
                .collect()
        };
        let rms = |x: &[f32]| (x[5000..].iter().map(|v| v * v).sum::<f32>() / 5000.0).sqrt();
        let gain = |f: f32, low: f64, high: Option<f64>| {
            rms(&band_pass(&tone(f), low, high)) / rms(&tone(f))
        };
        // ST/artifact mode, 1-30 Hz: 60 Hz hum and 0.3 Hz wander go, 10 Hz stays.
        assert!(gain(10.0, 1.0, Some(30.0)) > 0.9);
        assert!(gain(60.0, 1.0, Some(30.0)) < 0.3);
        assert!(gain(0.3, 1.0, Some(30.0)) < 0.15);
        // Diagnostic mode: a high-pass at 0.05 Hz alone keeps 0.5 Hz and 100 Hz.
        assert!(gain(0.5, 0.05, None) > 0.95);
        assert!(gain(100.0, 0.05, None) > 0.95);
        assert!(
            band_pass(&[f32::NAN, 1.0, 2.0], 0.5, Some(40.0))
                .iter()
                .all(|v| v.is_finite())
        );
    }

    #[test]
    fn vitals_features_by_hand() {
        let f = vitals_features(&[60.0, 70.0, 80.0]);
        assert_eq!(f[0], 70.0);
        assert!((f[1] - 8.164_966).abs() < 1e-4);
        assert_eq!((f[2], f[3], f[4]), (60.0, 80.0, 10.0));
    }
}
