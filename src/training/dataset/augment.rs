//! Training-time corruption of ECG windows, so that models learn that artifacts are not VT or
//! VF: recorded noise (nstdb's `em` electrode motion, `ma` muscle artifact, `bw` baseline
//! wander) mixed in at a chosen signal-to-noise ratio, and what monitors themselves produce
//! (lead-off flat stretches, saturation, mains hum, amplitude and baseline steps, polarity
//! flips). A window's label never changes: it comes from the annotations.
//!
//! **The noise records are split in time**, the same way for all three, so that no stretch
//! that augments training is used for validation or test, and the stretches nstdb injected
//! into its 118e*/119e* records (from 300 s on, two minutes noisy, two clean, at the same
//! sample index of `em`; those records are in the training part of the split) are training
//! noise:
//!
//! | part | seconds of each noise record |
//! |---|---|
//! | train | 0-420, 540-660, 780-900, 1020-1140, 1260-1380, 1500-1620, 1740-end |
//! | validation | 420-540, 660-780, 900-1020 |
//! | test | 1140-1260, 1380-1500, 1620-1740 |
//!
//! Signal-to-noise ratios follow the noise stress test (`nst`): SNR = 10 log10(S / N) with S
//! the squared QRS peak-to-peak amplitude over 8 (here the median over the window's beats) and
//! N the noise's mean square (the trimmed mean of its 1-s RMS over the part's stretches).

use std::path::Path;

use rand::Rng;
use rand::rngs::SmallRng;

use super::{DatasetError, SAMPLE_RATE_HZ, SplitName, read_signals};

/// nstdb's noise recordings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NoiseKind {
    /// Baseline wander.
    Bw,
    /// Electrode motion (the noise stress test's, and the hardest: it looks like beats).
    Em,
    /// Muscle artifact.
    Ma,
}

impl NoiseKind {
    pub const ALL: [NoiseKind; 3] = [NoiseKind::Bw, NoiseKind::Em, NoiseKind::Ma];

    /// The record's name in nstdb.
    pub fn record(self) -> &'static str {
        match self {
            NoiseKind::Bw => "bw",
            NoiseKind::Em => "em",
            NoiseKind::Ma => "ma",
        }
    }
}

/// Stretches (seconds) of each noise record that belong to a part (see the module doc).
fn stretches(part: SplitName) -> &'static [(u32, u32)] {
    match part {
        SplitName::Train => &[
            (0, 420),
            (540, 660),
            (780, 900),
            (1020, 1140),
            (1260, 1380),
            (1500, 1620),
            (1740, u32::MAX),
        ],
        SplitName::Validation => &[(420, 540), (660, 780), (900, 1020)],
        SplitName::Test => &[(1140, 1260), (1380, 1500), (1620, 1740)],
    }
}

/// One channel of one noise record, cut to a part's stretches.
#[derive(Debug, Clone)]
struct Channel {
    kind: NoiseKind,
    /// The part's stretches of the channel (mV, 250 Hz), each at least a window long.
    pieces: Vec<Vec<f32>>,
    /// Calibrated RMS (mV): trimmed mean of the 1-s RMS over the pieces.
    rms: f32,
}

/// The noise of one part of the time split, ready to mix into windows (the default bank holds
/// none: windows get monitor artefacts only).
#[derive(Debug, Clone, Default)]
pub struct NoiseBank {
    channels: Vec<Channel>,
}

impl NoiseBank {
    /// Reads `bw`, `em` and `ma` from `<data>/nstdb` once and keeps, for each of `parts`, the
    /// stretches of that part (one bank per part, in order).
    pub fn load(data: &Path, parts: &[SplitName]) -> Result<Vec<NoiseBank>, DatasetError> {
        let dir = data.join("nstdb");
        let hz = SAMPLE_RATE_HZ;
        let mut banks: Vec<NoiseBank> = parts
            .iter()
            .map(|_| NoiseBank {
                channels: Vec::new(),
            })
            .collect();
        for kind in NoiseKind::ALL {
            let s = read_signals(&dir, kind.record())?;
            for lead in &s.leads {
                for (bank, &part) in banks.iter_mut().zip(parts) {
                    let pieces: Vec<Vec<f32>> = stretches(part)
                        .iter()
                        .filter_map(|&(a, b)| {
                            let (a, b) = (a as usize * hz, (b as usize).saturating_mul(hz));
                            (a < lead.len()).then(|| lead[a..b.min(lead.len())].to_vec())
                        })
                        .filter(|p| p.len() >= 30 * hz)
                        .collect();
                    let rms = calibrated_rms(&pieces);
                    bank.channels.push(Channel { kind, pieces, rms });
                }
            }
        }
        Ok(banks)
    }

    /// The noise stress test on a whole record, as `nst` builds nstdb: the record is left
    /// clean for its first [`STRESS_CLEAN_SECS`], then recorded electrode-motion noise is
    /// added in alternate [`STRESS_PERIOD_SECS`] stretches (noisy, clean, noisy, ...) at
    /// `snr_db`, the bank's `em` pieces taken in turn, each lead its own channel. S is the
    /// squared median QRS peak-to-peak amplitude of the clean lead (at `beats`) over 8. Returns
    /// the noisy stretches as `[start, end)` samples; without `em` noise in the bank, none.
    /// `leads[0]` is the record's lead `first_slot` (1: the secondary read alone): each lead
    /// keeps the channel it has among all the record's.
    pub fn stress(
        &self,
        leads: &mut [Vec<f32>],
        first_slot: usize,
        beats: &[i64],
        snr_db: f32,
    ) -> Vec<(usize, usize)> {
        let from = STRESS_CLEAN_SECS * SAMPLE_RATE_HZ;
        self.stress_from(leads, first_slot, beats, snr_db, from)
    }

    /// [`stress`](Self::stress) with the first noisy stretch starting at sample `from`.
    pub fn stress_from(
        &self,
        leads: &mut [Vec<f32>],
        first_slot: usize,
        beats: &[i64],
        snr_db: f32,
        from: usize,
    ) -> Vec<(usize, usize)> {
        let hz = SAMPLE_RATE_HZ;
        let em: Vec<&Channel> = self
            .channels
            .iter()
            .filter(|c| c.kind == NoiseKind::Em && !c.pieces.is_empty())
            .collect();
        let Some(len) = leads.first().map(Vec::len).filter(|_| !em.is_empty()) else {
            return Vec::new();
        };
        let period = STRESS_PERIOD_SECS * hz;
        let spans: Vec<(usize, usize)> = (from..len)
            .step_by(2 * period)
            .map(|a| (a, (a + period).min(len)))
            .collect();
        for (i, lead) in leads.iter_mut().enumerate() {
            let ch = em[(first_slot + i) % em.len()];
            let at: Vec<usize> = beats
                .iter()
                .filter_map(|&b| usize::try_from(b).ok())
                .filter(|&b| b < lead.len())
                .collect();
            let pp = qrs_peak_to_peak(lead, &at);
            for (k, &(a, b)) in spans.iter().enumerate() {
                let piece = &ch.pieces[k % ch.pieces.len()];
                let n = (b - a).min(piece.len());
                let mean = piece[..n].iter().map(|&v| v as f64).sum::<f64>() / n.max(1) as f64;
                let noise: Vec<f32> = piece[..n].iter().map(|&v| v - mean as f32).collect();
                mix_at_snr(&mut lead[a..a + n], &noise, ch.rms, pp, snr_db);
            }
        }
        spans
    }

    /// A random stretch of `len` samples of noise `kind` (mean removed) and its calibrated
    /// RMS; `None` when the bank has no stretch that long.
    fn sample(&self, kind: NoiseKind, len: usize, rng: &mut SmallRng) -> Option<(Vec<f32>, f32)> {
        let fits: Vec<(&Channel, &Vec<f32>)> = self
            .channels
            .iter()
            .filter(|c| c.kind == kind)
            .flat_map(|c| c.pieces.iter().map(move |p| (c, p)))
            .filter(|(_, p)| p.len() >= len)
            .collect();
        if fits.is_empty() {
            return None;
        }
        let (c, p) = fits[rng.random_range(0..fits.len())];
        let off = rng.random_range(0..=p.len() - len);
        let mut n = p[off..off + len].to_vec();
        let mean = n.iter().map(|&v| v as f64).sum::<f64>() / len.max(1) as f64;
        n.iter_mut().for_each(|v| *v -= mean as f32);
        Some((n, c.rms))
    }
}

/// The noise stress test leaves a record's first this many seconds clean...
pub const STRESS_CLEAN_SECS: usize = 300;
/// ...then alternates noisy and clean stretches this long.
pub const STRESS_PERIOD_SECS: usize = 120;

/// `nst`'s noise calibration: RMS of each 1-s chunk about its mean, 5 %/5 % trimmed mean.
fn calibrated_rms(pieces: &[Vec<f32>]) -> f32 {
    let mut chunks: Vec<f64> = pieces
        .iter()
        .flat_map(|p| p.chunks_exact(SAMPLE_RATE_HZ))
        .map(|c| {
            let m = c.iter().map(|&v| v as f64).sum::<f64>() / c.len() as f64;
            (c.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / c.len() as f64).sqrt()
        })
        .collect();
    if chunks.is_empty() {
        return 0.0;
    }
    chunks.sort_by(f64::total_cmp);
    let cut = chunks.len() / 20;
    let kept = &chunks[cut..chunks.len() - cut];
    (kept.iter().sum::<f64>() / kept.len() as f64) as f32
}

/// QRS peak-to-peak amplitude (mV) of a window: the median over `beats` (indices into `x`) of
/// max - min within 50 ms of the beat; without two beats, the 1st-99th percentile range.
pub fn qrs_peak_to_peak(x: &[f32], beats: &[usize]) -> f32 {
    let half = SAMPLE_RATE_HZ / 20;
    let mut pp: Vec<f32> = beats
        .iter()
        .filter(|&&b| b >= half && b + half < x.len())
        .map(|&b| {
            let w = &x[b - half..=b + half];
            w.iter().cloned().fold(f32::MIN, f32::max) - w.iter().cloned().fold(f32::MAX, f32::min)
        })
        .collect();
    if pp.len() >= 2 {
        pp.sort_by(f32::total_cmp);
        return pp[pp.len() / 2];
    }
    let mut s: Vec<f32> = x.iter().copied().filter(|v| v.is_finite()).collect();
    if s.is_empty() {
        return 0.0;
    }
    s.sort_by(f32::total_cmp);
    s[s.len() * 99 / 100] - s[s.len() / 100]
}

/// Adds `noise` (RMS `rms`) to `x` so that the window's SNR is `snr_db` by nst's definition.
fn mix_at_snr(x: &mut [f32], noise: &[f32], rms: f32, pp_mv: f32, snr_db: f32) {
    if rms <= 0.0 || pp_mv <= 0.0 {
        return;
    }
    // nst: noise RMS / QRS p-p = 10^(-SNR/20) * sqrt(2) / 4.
    let gain = pp_mv * 10f32.powf(-snr_db / 20.0) * std::f32::consts::SQRT_2 / 4.0 / rms;
    for (v, n) in x.iter_mut().zip(noise) {
        *v += gain * n;
    }
}

/// How training windows are corrupted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Augment {
    /// Probability a window gets recorded noise.
    pub noise_p: f64,
    /// SNR range (dB) of recorded noise, drawn uniformly.
    pub snr_db: (f32, f32),
    /// Probability of each monitor artifact (flat stretch, saturation, hum, step, flip).
    pub artifact_p: f64,
}

impl Default for Augment {
    fn default() -> Self {
        Augment {
            noise_p: 0.5,
            snr_db: (-6.0, 24.0),
            artifact_p: 0.08,
        }
    }
}

impl Augment {
    /// Corrupts `x` (one lead, mV) in place. `pp_mv` is its clean QRS peak-to-peak amplitude;
    /// no flat stretch is laid over the last `keep_tail` samples (where a positive window's
    /// evidence is).
    pub fn apply(
        &self,
        bank: &NoiseBank,
        x: &mut [f32],
        pp_mv: f32,
        keep_tail: usize,
        rng: &mut SmallRng,
    ) {
        let hz = SAMPLE_RATE_HZ as f32;
        let len = x.len();
        if rng.random_bool(self.noise_p) {
            let kind = match rng.random_range(0..4) {
                0 => NoiseKind::Bw,
                1 => NoiseKind::Ma,
                _ => NoiseKind::Em,
            };
            if let Some((n, rms)) = bank.sample(kind, len, rng) {
                let snr = rng.random_range(self.snr_db.0..=self.snr_db.1);
                mix_at_snr(x, &n, rms, pp_mv, snr);
            }
        }
        let p = self.artifact_p;
        if rng.random_bool(p) {
            // Mains hum at 50 or 60 Hz.
            let f = if rng.random_bool(0.5) { 50.0 } else { 60.0 };
            let a = pp_mv * rng.random_range(0.02..0.3);
            let phase = rng.random_range(0.0..std::f32::consts::TAU);
            for (i, v) in x.iter_mut().enumerate() {
                *v += a * (std::f32::consts::TAU * f * i as f32 / hz + phase).sin();
            }
        }
        if rng.random_bool(p) && len > 1 {
            // A gain or baseline step, as when a cable is moved or a filter resets.
            let at = rng.random_range(0..len);
            if rng.random_bool(0.5) {
                let g = rng.random_range(0.4..2.5);
                x[at..].iter_mut().for_each(|v| *v *= g);
            } else {
                let d = rng.random_range(-2.0..2.0);
                x[at..].iter_mut().for_each(|v| *v += d);
            }
        }
        if rng.random_bool(p) {
            x.iter_mut().for_each(|v| *v = -*v);
        }
        if rng.random_bool(p) {
            // Saturation at a fraction of the window's largest excursion.
            let peak = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let c = peak * rng.random_range(0.3..0.8);
            x.iter_mut().for_each(|v| *v = v.clamp(-c, c));
        }
        let flat = rng.random_range((hz * 0.5) as usize..=(hz * 3.0) as usize);
        if rng.random_bool(p) && len > keep_tail + flat {
            // Lead off: the signal holds one value for a while.
            let at = rng.random_range(0..=len - keep_tail - flat);
            let hold = if rng.random_bool(0.5) { 0.0 } else { x[at] };
            x[at..at + flat].iter_mut().for_each(|v| *v = hold);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_noise_parts_are_disjoint_and_cover_the_record() {
        let mut all: Vec<(u32, u32)> = SplitName::ALL
            .into_iter()
            .flat_map(|p| stretches(p).iter().copied())
            .collect();
        all.sort_unstable();
        assert_eq!(all[0].0, 0);
        for w in all.windows(2) {
            assert_eq!(w[0].1, w[1].0, "{all:?}");
        }
        assert_eq!(all.last().unwrap().1, u32::MAX);
    }

    #[test]
    fn noise_is_mixed_at_the_asked_snr() {
        // A square "QRS" of 2 mV p-p and white-ish noise of RMS 0.5 mV.
        let x0: Vec<f32> = (0..2500)
            .map(|i| if i % 250 < 10 { 2.0 } else { 0.0 })
            .collect();
        let mut rng = SmallRng::seed_from_u64(1);
        let noise: Vec<f32> = (0..2500).map(|_| rng.random_range(-1.0..1.0)).collect();
        let rms = (noise.iter().map(|v| v * v).sum::<f32>() / 2500.0).sqrt();
        let beats: Vec<usize> = (0..10).map(|k| k * 250 + 5).collect();
        let pp = qrs_peak_to_peak(&x0, &beats);
        assert!((pp - 2.0).abs() < 1e-6);
        for snr in [24.0f32, 6.0, -6.0] {
            let mut x = x0.clone();
            mix_at_snr(&mut x, &noise, rms, pp, snr);
            let added: Vec<f32> = x.iter().zip(&x0).map(|(a, b)| a - b).collect();
            let n = (added.iter().map(|v| v * v).sum::<f32>() / 2500.0).sqrt();
            let got = 10.0 * ((pp * pp / 8.0) / (n * n)).log10();
            assert!((got - snr).abs() < 0.05, "asked {snr} dB, got {got}");
        }
    }

    #[test]
    fn the_stress_test_follows_nsts_schedule_and_snr() {
        let hz = SAMPLE_RATE_HZ;
        let mut rng = SmallRng::seed_from_u64(3);
        let piece: Vec<f32> = (0..120 * hz).map(|_| rng.random_range(-1.0..1.0)).collect();
        let rms = calibrated_rms(std::slice::from_ref(&piece));
        let bank = NoiseBank {
            channels: vec![Channel {
                kind: NoiseKind::Em,
                pieces: vec![piece],
                rms,
            }],
        };
        let len = 800 * hz;
        let clean: Vec<f32> = (0..len)
            .map(|i| if i % hz < 10 { 2.0 } else { 0.0 })
            .collect();
        let beats: Vec<i64> = (0..800).map(|k| (k * hz + 5) as i64).collect();
        let mut leads = vec![clean.clone()];
        let spans = bank.stress(&mut leads, 0, &beats, 6.0);
        // Clean to 300 s, noisy 300-420, clean 420-540, noisy 540-660, clean 660-780, noisy 780-800.
        assert_eq!(
            spans,
            vec![
                (300 * hz, 420 * hz),
                (540 * hz, 660 * hz),
                (780 * hz, 800 * hz)
            ]
        );
        let added: Vec<f32> = leads[0].iter().zip(&clean).map(|(a, b)| a - b).collect();
        assert!(added[..300 * hz].iter().all(|&v| v == 0.0));
        assert!(added[420 * hz..540 * hz].iter().all(|&v| v == 0.0));
        let noisy = &added[540 * hz..660 * hz];
        let n = (noisy.iter().map(|v| v * v).sum::<f32>() / noisy.len() as f32).sqrt();
        let snr = 10.0 * ((2.0f32 * 2.0 / 8.0) / (n * n)).log10();
        assert!((snr - 6.0).abs() < 0.3, "got {snr} dB");
    }

    #[test]
    fn a_lead_read_alone_keeps_its_own_stress_channel() {
        let hz = SAMPLE_RATE_HZ;
        let mut rng = SmallRng::seed_from_u64(5);
        let channels = (0..2)
            .map(|_| {
                let piece: Vec<f32> = (0..120 * hz).map(|_| rng.random_range(-1.0..1.0)).collect();
                let rms = calibrated_rms(std::slice::from_ref(&piece));
                Channel {
                    kind: NoiseKind::Em,
                    pieces: vec![piece],
                    rms,
                }
            })
            .collect();
        let bank = NoiseBank { channels };
        let len = 500 * hz;
        let clean: Vec<f32> = (0..len)
            .map(|i| if i % hz < 10 { 2.0 } else { 0.0 })
            .collect();
        let beats: Vec<i64> = (0..500).map(|k| (k * hz + 5) as i64).collect();
        let mut both = vec![clean.clone(), clean.clone()];
        bank.stress(&mut both, 0, &beats, 6.0);
        let mut second = vec![clean.clone()];
        bank.stress(&mut second, 1, &beats, 6.0);
        assert_eq!(second[0], both[1]);
        assert_ne!(both[0], both[1]);
    }

    #[test]
    fn artifacts_keep_the_tail_and_stay_finite() {
        let aug = Augment {
            noise_p: 0.0,
            snr_db: (0.0, 0.0),
            artifact_p: 1.0,
        };
        let bank = NoiseBank {
            channels: Vec::new(),
        };
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..50 {
            let mut x: Vec<f32> = (0..2500).map(|i| (i as f32 * 0.05).sin()).collect();
            aug.apply(&bank, &mut x, 1.0, 1000, &mut rng);
            assert!(x.iter().all(|v| v.is_finite()));
            // The last 1000 samples are never held flat: no run of 100 equal samples there.
            let tail = &x[1500..];
            assert!(!tail.windows(100).any(|w| w.iter().all(|&v| v == w[0])));
        }
    }
}
