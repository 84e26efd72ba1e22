//! Anti-aliased sample-rate conversion (mitdb's 360 Hz to the appliance's 250 Hz), by rubato's
//! synchronous FFT resampler, with its delay removed so sample `i` out is time `i / to_hz`.

use rubato::{FftFixedIn, Resampler};

/// Input frames per resampler chunk.
const CHUNK: usize = 3600;

/// Resamples `x` from `from_hz` to `to_hz` (both integral). Output length is
/// `floor(len * to_hz / from_hz)`.
pub(crate) fn resample(x: &[f32], from_hz: usize, to_hz: usize) -> Result<Vec<f32>, String> {
    if from_hz == to_hz {
        return Ok(x.to_vec());
    }
    let mut r = FftFixedIn::<f32>::new(from_hz, to_hz, CHUNK, 1, 1).map_err(|e| e.to_string())?;
    let want = x.len() * to_hz / from_hz;
    let delay = r.output_delay();
    let mut out = Vec::with_capacity(want + delay + CHUNK);
    let mut pos = 0;
    let mut chunk = vec![0.0f32; CHUNK];
    while out.len() < want + delay {
        let n = r.input_frames_next();
        chunk.resize(n, 0.0);
        let take = x.len().saturating_sub(pos).min(n);
        chunk[..take].copy_from_slice(&x[pos..pos + take]);
        chunk[take..].fill(0.0);
        pos += take;
        let y = r.process(&[&chunk], None).map_err(|e| e.to_string())?;
        out.extend_from_slice(&y[0]);
    }
    Ok(out[delay..delay + want].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_low_tone_and_removes_an_alias() {
        let n = 36_000;
        let tone =
            |f: f64, fs: f64, i: usize| (2.0 * std::f64::consts::PI * f * i as f64 / fs).sin();
        // 10 Hz passes unchanged (and in phase), 160 Hz is above the new Nyquist (125 Hz).
        let x: Vec<f32> = (0..n)
            .map(|i| (tone(10.0, 360.0, i) + tone(160.0, 360.0, i)) as f32)
            .collect();
        let y = resample(&x, 360, 250).unwrap();
        assert_eq!(y.len(), 25_000);
        let err: f64 = (2000..23_000)
            .map(|i| (y[i] as f64 - tone(10.0, 250.0, i)).powi(2))
            .sum::<f64>()
            / 21_000.0;
        assert!(err.sqrt() < 0.02, "rms error {}", err.sqrt());
    }
}
