//! Model input preparation, shared by training and serving so both see identical numbers.
//!
//! ECG: each window is centred on its mean and divided by its standard deviation, floored at
//! [`ECG_MIN_SCALE_MV`] so a flat line (asystole, lead off) is not blown up into noise, then
//! clipped to +/-[`ECG_CLIP`]. Non-finite samples count as 0 mV (the daemon's quality gate
//! rejects such windows before they get here). Vitals: the 1 Hz heart-rate series becomes five
//! features, standardised with the training set's mean and spread stored in the manifest.

/// Smallest scale (mV) a window is divided by.
pub const ECG_MIN_SCALE_MV: f64 = 0.05;
/// Normalised samples are clipped to this magnitude.
pub const ECG_CLIP: f32 = 20.0;
/// Names of the vitals features, in model-input order.
pub const VITALS_FEATURES: [&str; 5] = ["hr_mean", "hr_std", "hr_min", "hr_max", "hr_slope"];

/// Normalises one ECG window (mV) into `out` (same length).
pub fn normalize_ecg_into(x: &[f32], out: &mut [f32]) {
    let clean = |v: f32| if v.is_finite() { v as f64 } else { 0.0 };
    let n = x.len().max(1) as f64;
    let mean = x.iter().map(|&v| clean(v)).sum::<f64>() / n;
    let var = x.iter().map(|&v| (clean(v) - mean).powi(2)).sum::<f64>() / n;
    let scale = var.sqrt().max(ECG_MIN_SCALE_MV);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (((clean(v) - mean) / scale) as f32).clamp(-ECG_CLIP, ECG_CLIP);
    }
}

/// Normalises one ECG window (mV).
pub fn normalize_ecg(x: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    normalize_ecg_into(x, &mut out);
    out
}

/// Mean, standard deviation, minimum, maximum and least-squares slope (per second) of a 1 Hz
/// heart-rate series (beats/min; non-finite values count as 0, i.e. no beats).
pub fn vitals_features(hr: &[f32]) -> [f32; 5] {
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
    fn vitals_features_by_hand() {
        let f = vitals_features(&[60.0, 70.0, 80.0]);
        assert_eq!(f[0], 70.0);
        assert!((f[1] - 8.164_966).abs() < 1e-4);
        assert_eq!((f[2], f[3], f[4]), (60.0, 80.0, 10.0));
    }
}
