//! Spectra of short ECG stretches, for the spectral VF rule of [`classical`](super::classical):
//! the mean removed, a Hamming window, one real FFT (realfft), planned once per stretch
//! length; a caller that keeps its [`Spectrum`] reuses the plan across windows (the classical
//! detector does).

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{RealFftPlanner, RealToComplex};

/// A planned transform of stretches of one length, with its buffers.
pub(crate) struct Spectrum {
    fft: Arc<dyn RealToComplex<f32>>,
    window: Vec<f32>,
    input: Vec<f32>,
    output: Vec<Complex<f32>>,
    bin_hz: f64,
}

impl Spectrum {
    /// For stretches of `len >= 2` samples at `fs` Hz.
    pub(crate) fn new(len: usize, fs: f64) -> Spectrum {
        assert!(len >= 2, "a spectrum needs at least two samples");
        let fft = RealFftPlanner::<f32>::new().plan_fft_forward(len);
        let window = (0..len)
            .map(|i| {
                let phase = 2.0 * std::f64::consts::PI * i as f64 / (len - 1) as f64;
                (0.54 - 0.46 * phase.cos()) as f32
            })
            .collect();
        Spectrum {
            input: fft.make_input_vec(),
            output: fft.make_output_vec(),
            fft,
            window,
            bin_hz: fs / len as f64,
        }
    }

    /// Width of a frequency bin, Hz: bin `j` is at `j · bin_hz`.
    pub(crate) fn bin_hz(&self) -> f64 {
        self.bin_hz
    }

    /// The transform of `x` (of the planned length), bins 0 to Nyquist.
    pub(crate) fn transform(&mut self, x: &[f32]) -> &[Complex<f32>] {
        assert_eq!(x.len(), self.window.len(), "stretch of the planned length");
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / x.len() as f64;
        for ((dst, &v), &w) in self.input.iter_mut().zip(x).zip(&self.window) {
            *dst = (v as f64 - mean) as f32 * w;
        }
        self.fft
            .process(&mut self.input, &mut self.output)
            .expect("buffers made by the plan");
        &self.output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sine_peaks_at_its_frequency() {
        let fs = 250.0;
        let x: Vec<f32> = (0..1000)
            .map(|i| (2.0 * std::f64::consts::PI * 5.0 * i as f64 / fs).sin() as f32 + 3.0)
            .collect();
        let mut s = Spectrum::new(x.len(), fs);
        assert_eq!(s.bin_hz(), 0.25);
        let bins = s.transform(&x);
        assert_eq!(bins.len(), 501);
        let peak = (0..bins.len())
            .max_by(|&a, &b| bins[a].norm().total_cmp(&bins[b].norm()))
            .unwrap();
        assert_eq!(peak, 20, "5 Hz");
        // The offset of 3 is removed, not a peak at 0 Hz.
        assert!(bins[0].norm() < 0.01 * bins[20].norm());
    }
}
