//! A classical VT/VF detector of the kind bedside monitors run, on one ECG lead at 250 Hz: the
//! baseline for `holmes evaluate` to report beside the zoo, through the same alarm rule and
//! episode matcher, so that its table says what the models add.
//!
//! - **VT**: a run of at least 5 consecutive wide beats (QRS over 120 ms) at over 100/min: the
//!   rule of the PhysioNet/CinC Challenge 2015 and of several monitors' defaults (5 beats,
//!   100/min), with the clinical width of a ventricular complex (0.12 s). Beats come from
//!   [`detect_qrs`] run once over the lead (its thresholds adapt as a monitor's running detector
//!   does); a beat's QRS runs from where the slope last rests (below a tenth of the beat's
//!   steepest slope for 20 ms) before it to where it next rests after it. As monitors suspend
//!   arrhythmia calls on a noisy ECG, the rule holds only where two different QRS detectors
//!   agree on the window's beats (bSQI at least 0.5, see [`quality`](super::quality)): in noise
//!   a rate-and-width rule sees nothing but fast wide "beats".
//! - **VF**: fibrillatory for 4 s: the spectrum of the window's last 4 s is narrow around a peak
//!   in the VF band, by Barro's SPEC feature A2 (the frequency-weighted share of spectral
//!   amplitude within 0.7 to 1.4 times the peak frequency), computed as the open code of
//!   Figuera et al. 2016 does (`docs/research/ec57_alarms.md` §4a).
//!
//! A window's score is the larger of the two rules' (0..=1): the VT score is the longest
//! qualifying run over 5 (so 1 is a VT run, 0.2 a lone wide beat), the VF score a ramp of A2
//! from 0.3 to 0.5 with the peak in 2.5-9 Hz. The papers' decision thresholds could not be
//! verified, so those here were set on synthetic signals (this module's tests: sinus A2 below
//! 0.1, QRS below 100 ms above 100/min; monomorphic VT A2 0.33-0.46, QRS 150-190 ms; sine-like
//! VF A2 near 1) and are to be measured, not borrowed, by `holmes evaluate`.

use crate::core::window::SAMPLE_RATE_HZ;

use super::heart_rate::detect_qrs;
use super::quality::{bsqi, detect_qrs_length};
use super::spectrum::Spectrum;

/// Fewest consecutive wide fast beats that make a VT run.
pub(crate) const VT_MIN_BEATS: usize = 5;
/// A VT run's beats follow each other faster than this, beats/min.
const VT_MIN_BPM: f64 = 100.0;
/// A wide (ventricular) QRS lasts longer than this, ms.
const WIDE_QRS_MS: f64 = 120.0;
/// The VT rule holds only in windows where the two QRS detectors agree at least this well.
const VT_MIN_BSQI: f32 = 0.5;
/// Seconds of fibrillatory signal the VF rule needs (the window's last).
const VF_SECS: f64 = 4.0;
/// The VF band: the spectral peak lies in it, Hz.
const VF_BAND_HZ: (f64, f64) = (2.5, 9.0);
/// A2 at and below which the VF score is 0...
const A2_LOW: f64 = 0.3;
/// ...and at and above which it is 1.
const A2_HIGH: f64 = 0.5;

/// Half-width of the stretch searched for a QRS's onset and offset around its beat, s.
const WIDTH_SEARCH_SECS: f64 = 0.15;
/// How far past a beat the detectors and the width search read before deciding on it, s:
/// [`detect_qrs`] finds a beat at its integral's peak up to 150 ms later, through a centred
/// 200 ms baseline; the width search reads 170 ms on. A window uses only beats this far
/// before its end.
const BEAT_LOOKAHEAD_SECS: f64 = 0.3;
/// A QRS ends where the slope stays below this share of the beat's steepest slope...
const QUIET_SLOPE_SHARE: f32 = 0.1;
/// ...for this long, s (so that the flat apex of a wave does not end it).
const QUIET_SECS: f64 = 0.02;

/// Arguments the detector refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClassicalError {
    #[error("the hop must be at least one sample")]
    ZeroHop,
    #[error("windows of {got} samples are shorter than the VF rule's {need}")]
    ShortWindow { got: usize, need: usize },
}

/// Scores the lead `ecg` (mV, 250 Hz) in windows of `window_samples` ending at every multiple of
/// `hop_samples` from the record's start (the first once a whole window fits): `(end_sample,
/// score)`, `end_sample` exclusive. Beats are detected once over the whole lead, their
/// thresholds adapting from earlier samples as a monitor's running detector's do; a window
/// uses the beats inside it that are decided by its end (0.3 s before it) and the
/// spectrum of its last 4 s, so no sample after a window's end moves its score.
pub fn baseline_scores(
    ecg: &[f32],
    hop_samples: usize,
    window_samples: usize,
) -> Result<Vec<(usize, f32)>, ClassicalError> {
    baseline_scores_with(ecg, hop_samples, window_samples, VT_MIN_BEATS)
}

/// [`baseline_scores`] with a VT run of `min_beats` wide fast beats (a monitor's setting, 4 to
/// 6 as vendors document it) scoring 1.
pub(crate) fn baseline_scores_with(
    ecg: &[f32],
    hop_samples: usize,
    window_samples: usize,
    min_beats: usize,
) -> Result<Vec<(usize, f32)>, ClassicalError> {
    let min_beats = min_beats.max(1);
    let fs = SAMPLE_RATE_HZ as f64;
    let vf_len = (VF_SECS * fs) as usize;
    if hop_samples == 0 {
        return Err(ClassicalError::ZeroHop);
    }
    if window_samples < vf_len {
        return Err(ClassicalError::ShortWindow {
            got: window_samples,
            need: vf_len,
        });
    }
    let beats = detect_qrs(ecg, fs);
    let other_beats = detect_qrs_length(ecg, fs);
    let slope = slope(ecg);
    let wide: Vec<bool> = beats
        .iter()
        .map(|&b| qrs_width_secs(&slope, b as usize, fs) * 1000.0 > WIDE_QRS_MS)
        .collect();
    let search = (WIDTH_SEARCH_SECS * fs) as i64;
    let lookahead = (BEAT_LOOKAHEAD_SECS * fs) as i64;
    let max_rr = (60.0 / VT_MIN_BPM * fs) as i64;
    let mut spectrum = Spectrum::new(vf_len, fs);
    let first = window_samples.div_ceil(hop_samples).max(1) * hop_samples;
    Ok((first..=ecg.len())
        .step_by(hop_samples)
        .map(|end| {
            let start = (end - window_samples) as i64;
            let decided = end as i64 - lookahead;
            let span = |b: &[i64], from: i64| {
                b.partition_point(|&x| x < from)..b.partition_point(|&x| x < decided)
            };
            let agree = bsqi(
                &beats[span(&beats, start)],
                &other_beats[span(&other_beats, start)],
                fs,
            );
            let vt = if agree >= VT_MIN_BSQI {
                // Beats whose whole QRS search stretch lies in the window.
                let r = span(&beats, start + search);
                let run = longest_run(&beats[r.clone()], &wide[r], max_rr);
                run.min(min_beats) as f32 / min_beats as f32
            } else {
                0.0
            };
            let vf = vf_score(spectral_peak(&mut spectrum, &ecg[end - vf_len..end]));
            (end, vt.max(vf))
        })
        .collect())
}

/// The longest run of consecutive wide beats, each within `max_rr` samples of the previous.
fn longest_run(beats: &[i64], wide: &[bool], max_rr: i64) -> usize {
    let (mut run, mut longest) = (0usize, 0usize);
    for (i, &w) in wide.iter().enumerate() {
        run = match (w, run) {
            (false, _) => 0,
            (true, 0) => 1,
            // The first beat of a run may follow a slow one; its followers must be fast.
            (true, r) if beats[i] - beats[i - 1] < max_rr => r + 1,
            (true, _) => 1,
        };
        longest = longest.max(run);
    }
    longest
}

/// Central slope of `x` per sample (0 at the ends): baseline wander barely moves it.
pub(crate) fn slope(x: &[f32]) -> Vec<f32> {
    let mut d = vec![0.0; x.len()];
    for i in 1..x.len().saturating_sub(1) {
        d[i] = (x[i + 1] - x[i - 1]) / 2.0;
    }
    d
}

/// The QRS width of the beat at sample `b`, s: from the onset to the offset, each where the
/// slope falls below [`QUIET_SLOPE_SHARE`] of the steepest slope near the beat and stays there
/// for [`QUIET_SECS`], searched up to [`WIDTH_SEARCH_SECS`] on either side (the search's length
/// when no quiet stretch is found, as in VF or noise: wide).
pub(crate) fn qrs_width_secs(slope: &[f32], b: usize, fs: f64) -> f64 {
    let n = slope.len();
    let search = (WIDTH_SEARCH_SECS * fs) as usize;
    let quiet = ((QUIET_SECS * fs) as usize).max(1);
    let near = (0.06 * fs) as usize;
    let steepest = slope[b.saturating_sub(near)..(b + near + 1).min(n)]
        .iter()
        .fold(0.0f32, |m, v| m.max(v.abs()));
    if steepest == 0.0 {
        return 0.0;
    }
    let thr = QUIET_SLOPE_SHARE * steepest;
    let still = |from: usize| slope[from..from + quiet].iter().all(|v| v.abs() < thr);
    let lo_limit = b.saturating_sub(search);
    let onset = (lo_limit..=b.saturating_sub(quiet))
        .rev()
        .find(|&i| still(i))
        .map_or(lo_limit, |i| i + quiet);
    let hi_limit = (b + search).min(n.saturating_sub(quiet));
    let offset = (b.min(hi_limit)..=hi_limit)
        .find(|&i| still(i))
        .unwrap_or(hi_limit);
    offset.saturating_sub(onset) as f64 / fs
}

/// Barro's SPEC on one stretch: the peak frequency in 0.5-9 Hz and A2.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SpectralPeak {
    peak_hz: f64,
    a2: f64,
}

fn spectral_peak(spectrum: &mut Spectrum, x: &[f32]) -> SpectralPeak {
    let bin_hz = spectrum.bin_hz();
    // Amplitude as the original paper defines it: |Re| + |Im|.
    let mut amp: Vec<f64> = spectrum
        .transform(x)
        .iter()
        .map(|c| (c.re.abs() + c.im.abs()) as f64)
        .collect();
    let last = amp.len() - 1;
    // Bins from the first at or above `from` Hz to the last at or below `to` Hz.
    let bins = |from: f64, to: f64| {
        ((from / bin_hz).ceil() as usize).min(last)..=((to / bin_hz).floor() as usize).min(last)
    };
    let hz = |j: usize| j as f64 * bin_hz;
    let peak = bins(0.5, 9.0)
        .max_by(|&a, &b| amp[a].total_cmp(&amp[b]))
        .unwrap_or(0);
    let max = amp[peak];
    if max <= 0.0 {
        return SpectralPeak {
            peak_hz: 0.0,
            a2: 0.0,
        };
    }
    // Insignificant components, under 5 % of the peak, are dropped.
    for a in amp.iter_mut().filter(|a| **a < 0.05 * max) {
        *a = 0.0;
    }
    let f = hz(peak);
    let total: f64 = bins(0.5, (20.0 * f).min(100.0)).map(|j| amp[j]).sum();
    let near: f64 = bins(0.7 * f, 1.4 * f).map(|j| amp[j] * hz(j)).sum();
    SpectralPeak {
        peak_hz: f,
        a2: near / f / total,
    }
}

/// The VF rule's score (0..=1) of the last 4 s of `x` (the whole of a shorter `x`): how
/// narrow its spectrum is around a peak in the VF band.
pub(crate) fn vf_likeness(x: &[f32]) -> f32 {
    let len = ((VF_SECS * SAMPLE_RATE_HZ as f64) as usize).min(x.len());
    if len < SAMPLE_RATE_HZ {
        return 0.0;
    }
    let mut spectrum = Spectrum::new(len, SAMPLE_RATE_HZ as f64);
    vf_score(spectral_peak(&mut spectrum, &x[x.len() - len..]))
}

fn vf_score(p: SpectralPeak) -> f32 {
    if !(VF_BAND_HZ.0..=VF_BAND_HZ.1).contains(&p.peak_hz) {
        return 0.0;
    }
    ((p.a2 - A2_LOW) / (A2_HIGH - A2_LOW)).clamp(0.0, 1.0) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::test_signals::{fibrillation, noise, samples, sinus, wide_run};

    const FS: f64 = SAMPLE_RATE_HZ as f64;
    /// 8 s windows every second.
    const WINDOW: usize = 2_000;
    const HOP: usize = 250;

    fn widths_ms(x: &[f32]) -> Vec<f64> {
        let s = slope(x);
        detect_qrs(x, FS)
            .iter()
            .map(|&b| qrs_width_secs(&s, b as usize, FS) * 1000.0)
            .collect()
    }

    /// The first window end at or after `from` whose score reaches 1, in samples after `from`.
    fn first_alarm_after(scores: &[(usize, f32)], from: usize) -> Option<usize> {
        scores
            .iter()
            .find(|&&(end, s)| end >= from && s >= 1.0)
            .map(|&(end, _)| end - from)
    }

    #[test]
    fn qrs_width_tells_narrow_beats_from_wide_ones() {
        // ECGSYN's QRS narrows as the rate rises (its waves are angles of the beat).
        let narrow = widths_ms(&sinus(4, 130.0, 10.0));
        assert!(narrow.len() >= 20);
        assert!(narrow.iter().all(|&w| w < 100.0), "{narrow:?}");
        for (bpm, qrs) in [(150.0, 140.0), (220.0, 130.0)] {
            let wide = widths_ms(&wide_run(bpm, qrs, 10.0));
            assert!(wide.len() >= 20);
            assert!(wide.iter().all(|&w| w > WIDE_QRS_MS), "{bpm}: {wide:?}");
        }
    }

    #[test]
    fn a_run_counts_consecutive_fast_wide_beats() {
        let max_rr = 150;
        // The first wide beat follows a slow one; the next four are fast: a run of 5.
        let beats = [0, 400, 500, 600, 700, 800, 1200, 1300];
        let wide = [false, true, true, true, true, true, true, true];
        assert_eq!(longest_run(&beats, &wide, max_rr), 5);
        // A narrow beat breaks a run (2, then 2), so does a slow interval (1, then 3).
        let beats = [0, 400, 500, 600, 700, 800, 1200, 1300, 1400];
        let wide = [true, true, true, false, true, true, true, true, true];
        assert_eq!(longest_run(&beats, &wide, max_rr), 3);
        assert_eq!(longest_run(&[], &[], max_rr), 0);
    }

    #[test]
    fn sinus_rhythm_scores_low_even_when_fast() {
        for (seed, bpm) in [(1, 75.0), (2, 130.0)] {
            let x = sinus(seed, bpm, 30.0);
            let scores = baseline_scores(&x, HOP, WINDOW).unwrap();
            let max = scores.iter().fold(0.0f32, |m, &(_, s)| m.max(s));
            // At most a lone beat measured wide; never a run, never fibrillatory.
            assert!(max <= 1.0 / VT_MIN_BEATS as f32, "{bpm}/min: {max}");
        }
    }

    #[test]
    fn a_wide_complex_run_raises_the_vt_rule_within_seconds() {
        let mut x = sinus(5, 75.0, 20.0);
        let onset = x.len();
        x.extend(wide_run(180.0, 160.0, 12.0));
        let scores = baseline_scores(&x, HOP, WINDOW).unwrap();
        // Before the run: no window holds it.
        assert!(
            scores
                .iter()
                .filter(|&&(e, _)| e <= onset)
                .all(|&(_, s)| s <= 0.2)
        );
        // Five beats at 180/min take 1.3 s, plus the width search after the last.
        let delay = first_alarm_after(&scores, onset).expect("VT detected");
        assert!(delay <= samples(3.0), "{delay} samples");
    }

    #[test]
    fn fibrillation_raises_the_vf_rule_once_four_seconds_are_fibrillatory() {
        let vf = fibrillation(2, 10.0);
        let p = spectral_peak(
            &mut Spectrum::new(samples(VF_SECS), FS),
            &vf[..samples(VF_SECS)],
        );
        assert!((4.0..=6.0).contains(&p.peak_hz), "{p:?}");
        assert!(p.a2 >= A2_HIGH, "{p:?}");
        let s = sinus(6, 75.0, 10.0);
        let p = spectral_peak(
            &mut Spectrum::new(samples(VF_SECS), FS),
            &s[..samples(VF_SECS)],
        );
        assert!(p.a2 <= A2_LOW, "{p:?}");

        let mut x = sinus(6, 75.0, 20.0);
        let onset = x.len();
        x.extend(vf);
        let scores = baseline_scores(&x, HOP, WINDOW).unwrap();
        let delay = first_alarm_after(&scores, onset).expect("VF detected");
        // The spectral rule needs about 4 s of VF (a little less once most of them are).
        assert!(
            (samples(3.0)..=samples(VF_SECS)).contains(&delay),
            "{delay} samples"
        );
    }

    #[test]
    fn white_noise_is_neither_vt_nor_vf() {
        // Detected "beats" in noise are fast and wide, but the detectors disagree.
        let x = noise(3, 0.3, 30.0);
        let scores = baseline_scores(&x, HOP, WINDOW).unwrap();
        assert!(scores.iter().all(|&(_, s)| s == 0.0), "{scores:?}");
    }

    #[test]
    fn windows_end_on_the_hop_grid_once_a_window_fits() {
        let x = sinus(7, 75.0, 12.0);
        let scores = baseline_scores(&x, 300, 1_100).unwrap();
        let ends: Vec<usize> = scores.iter().map(|&(e, _)| e).collect();
        assert_eq!(ends.first(), Some(&1_200));
        assert!(ends.iter().all(|e| e % 300 == 0 && *e <= x.len()));
        assert_eq!(ends.last(), Some(&(x.len() / 300 * 300)));
        assert_eq!(baseline_scores(&x, 0, 1_100), Err(ClassicalError::ZeroHop));
        assert_eq!(
            baseline_scores(&x, 250, 999),
            Err(ClassicalError::ShortWindow {
                got: 999,
                need: 1_000
            })
        );
    }
}
