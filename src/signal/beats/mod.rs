//! Beats counted one by one: each QRS that [`detect_qrs_leads`] finds on a window's leads,
//! described against the window's own dominant beat, classified ventricular or not
//! ([`BeatClassifier`], a small network fitted on annotated beats from several seeds, their
//! logits averaged), each beat called by the median probability of the window's beats alike
//! to it ([`Described::alike_median`]), and the run of ventricular beats a VT alarm counts (at
//! least [`VT_MIN_BEATS`] in a row, faster than 100/min, the rule of the label; one uncertain
//! beat between two confident ones does not break it). [`BeatCounter`] is what the ward
//! serves: the classifier and its [`BeatRule`] from the zoo's `beats.json`, with each bed's
//! [`BeatMemory`] (a beat is classified once, in the first window that describes it).
//!
//! A window's networks are asked whether a window ends in VT; this module asks the question the
//! label itself asks, beat by beat, so that two or four ventricular beats (a couplet, a salvo)
//! can be told from five, which the networks do not learn (`docs/EXPERIMENTS.md`,
//! 2026-11-24, "ectopy negatives alone").
//!
//! The features of a beat compare it with the window's **template**, the per-sample median of
//! all its beats' stretches (the dominant rhythm, which outnumbers a short run): shape
//! (correlation and residual on both leads), size, steepest slope, QRS width, and prematurity
//! (the interval from the previous beat against the window's median interval), all measured on
//! the QRS; then the beat's context stretch (0.25 s before its R peak to 0.45 s after: the P
//! wave a sinus beat has, the QRS, the broad discordant T wave of a ventricular beat) and its
//! difference from the template's, on both leads, at 125 Hz and in units of the QRS template's
//! size. A beat is described once its context stretch lies in the window, 0.45 s after its R
//! peak.

use crate::core::stats::{column_medians, median};
use crate::core::window::SAMPLE_RATE_HZ;

use super::classical::{VT_MIN_BEATS, qrs_width_secs, slope};
use super::heart_rate::{detect_qrs_leads, sub_moving_mean};

mod counter;
mod memory;
mod network;
mod tail;

pub use counter::{
    BEATS_FILE, BeatCounter, BeatRule, BeatsChosenBy, BeatsFile, Counted, OpinionPoint,
};
pub(crate) use counter::{RUN_RISK, RUN_RISK_MAX, RunEvidence, held_by_short_runs, run_evidence};
pub(crate) use memory::BeatMemory;
pub(crate) use network::SHAPE_ROWS;
pub use network::{BeatClassifier, BeatFit, BeatsError, Conv, Dense};

/// Measured features per beat, named by [`MEASURES`].
pub(crate) const MEASURED: usize = 10;
/// Samples of each shape vector: the beat's context stretch at half rate.
pub(crate) const SHAPE: usize = (CONTEXT_PRE + CONTEXT_POST).div_ceil(2);
/// Inputs per beat: the measured features, then four shape vectors (the stretch and its
/// difference from the template, on each lead).
pub(crate) const FEATURES: usize = MEASURED + SHAPE_ROWS * SHAPE;
/// The measured features, in order.
const MEASURES: [&str; MEASURED] = [
    "correlation with the template",
    "ln(1 + residual / template rms)",
    "ln(peak-to-peak / template's)",
    "QRS width s",
    "RR before / median RR",
    "ln(steepest slope / template's)",
    "correlation with the template, second lead",
    "ln(1 + residual / template rms), second lead",
    "RR before s",
    "ln(area / template's)",
];

/// Samples of a beat's QRS stretch before its R peak (0.1 s) ...
const PRE: usize = SAMPLE_RATE_HZ / 10;
/// ... and from it on (0.15 s).
const POST: usize = SAMPLE_RATE_HZ * 3 / 20;
/// The shape vectors reach further: from this long before the R peak (0.25 s: the P wave a
/// sinus beat has and a ventricular one lacks) ...
const CONTEXT_PRE: usize = SAMPLE_RATE_HZ / 4;
/// ... to this long after it (0.45 s: the broad T wave that follows a wide complex).
pub(crate) const CONTEXT_POST: usize = SAMPLE_RATE_HZ * 9 / 20;
/// The detector marks a beat at its integral's peak, up to this long after the R peak (0.2 s)
/// ...
const R_BEFORE: usize = SAMPLE_RATE_HZ / 5;
/// ... or this long before it (0.05 s).
const R_AFTER: usize = SAMPLE_RATE_HZ / 20;
/// Baseline removal: a centred moving mean this long (0.6 s) is subtracted, wide enough to
/// leave a 200 ms ventricular complex standing.
const BASELINE: usize = SAMPLE_RATE_HZ * 3 / 5;
/// Fewest beats a window needs for a template.
const MIN_BEATS: usize = 3;
/// A VT run's beats follow each other faster than this (100/min) on average, samples.
const MAX_RUN_RR: usize = SAMPLE_RATE_HZ * 60 / 100;
/// Two beats of a window are alike when their QRS stretches correlate at this or more on each
/// lead ...
const ALIKE_CORR: f64 = 0.9;
/// ... and their peak-to-peak sizes on the primary lead are within this factor.
const ALIKE_SIZE: f64 = 2.0;
/// A beat is called ventricular at and above this probability when the figures of a
/// classifier are reported.
pub(crate) const VENTRICULAR_AT: f64 = 0.5;
/// Probabilities at which a beat may be called ventricular when runs are counted: the run
/// level of a window ([`highest_level`]) is the highest of them at which it holds a VT run,
/// and an alarm rule chooses one on validation.
pub(crate) const CALL_GRID: [f32; 8] = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99];

/// One beat of a window: where its R peak is, and its features.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Beat {
    /// The R peak, samples from the window's start.
    pub sample: usize,
    /// [`FEATURES`] inputs.
    pub features: Vec<f32>,
}

/// Finds the beats of a window and describes them all ([`Described`]); fewer than
/// [`MIN_BEATS`] beats give none (no template).
pub(crate) fn describe(leads: &[&[f32]]) -> Vec<Beat> {
    let Some(d) = Described::of(leads) else {
        return Vec::new();
    };
    (0..d.len())
        .map(|k| Beat {
            sample: d.peaks[k],
            features: d.features(k),
        })
        .collect()
}

/// A window's beats and its templates, from which each beat's [`FEATURES`] are computed when
/// asked ([`features`](Self::features)): a bed's counter asks only for the beats no earlier
/// window classified.
pub(crate) struct Described {
    /// R peaks, samples from the window's start, in time order.
    peaks: Vec<usize>,
    /// Each beat's QRS stretch on the primary lead (`segs0`), and on the second (`segs1`) where
    /// there is one.
    segs0: Vec<Vec<f64>>,
    segs1: Option<Vec<Vec<f64>>>,
    /// Each beat's context stretch on each lead, likewise, at half rate (as the shape vectors
    /// read it).
    wide0: Vec<Vec<f64>>,
    wide1: Option<Vec<Vec<f64>>>,
    /// The templates, per lead (`0`, `1`): the medians, sample by sample, of the QRS (`t`) and
    /// the half-rate context (`w`) stretches.
    t0: Vec<f64>,
    t1: Option<Vec<f64>>,
    w0: Vec<f64>,
    w1: Option<Vec<f64>>,
    /// Intervals between consecutive beats, samples, and their median.
    rr: Vec<f64>,
    median_rr: f64,
    /// The primary lead's slope (for the QRS width).
    slope: Vec<f32>,
    /// The QRS template's peak-to-peak size, steepest slope and area.
    t_ptp: f64,
    t_slope: f64,
    t_area: f64,
}

impl Described {
    /// The beats of a window: `leads[0]` is the primary lead, `leads[1]`, when present and as
    /// long, the second (a lone lead stands in for it). Beats are found on both leads together
    /// ([`detect_qrs_leads`]: a wide complex that lead II barely shows stands out on V) and
    /// placed at the primary lead's largest deflection. Beats whose context stretch does not
    /// lie wholly in the window are left out; `None` with fewer than [`MIN_BEATS`].
    pub(crate) fn of(leads: &[&[f32]]) -> Option<Described> {
        Self::of_until(leads, usize::MAX)
    }

    /// [`of`](Self::of), leaving out beats whose R peak lies at or after sample `until`.
    fn of_until(leads: &[&[f32]], until: usize) -> Option<Described> {
        let &first = leads.first()?;
        let n = first.len();
        let second = leads.get(1).copied().filter(|l| l.len() == n);
        let y0 = sub_moving_mean(first, BASELINE);
        let y1 = second.map(|l| sub_moving_mean(l, BASELINE));
        let mut peaks: Vec<usize> = Vec::new();
        let both: Vec<&[f32]> = std::iter::once(first).chain(second).collect();
        for d in detect_qrs_leads(&both, SAMPLE_RATE_HZ as f64) {
            let d = d as usize;
            let (lo, hi) = (d.saturating_sub(R_BEFORE), (d + R_AFTER + 1).min(n));
            let Some(r) = (lo..hi).max_by(|&a, &b| y0[a].abs().total_cmp(&y0[b].abs())) else {
                continue;
            };
            if r < CONTEXT_PRE || r + CONTEXT_POST > n || r >= until {
                continue;
            }
            // Two detections of one complex land on one peak.
            if peaks.last().is_some_and(|&p| r < p + R_BEFORE) {
                continue;
            }
            peaks.push(r);
        }
        if peaks.len() < MIN_BEATS {
            return None;
        }
        // Each beat's stretch from `before` its R peak to `after` it, every `step`-th sample.
        let stretches = |y: &[f32], before: usize, after: usize, step: usize| -> Vec<Vec<f64>> {
            peaks
                .iter()
                .map(|&r| {
                    y[r - before..r + after]
                        .iter()
                        .step_by(step)
                        .map(|&v| v as f64)
                        .collect()
                })
                .collect()
        };
        let segs0 = stretches(&y0, PRE, POST, 1);
        let segs1 = y1.as_ref().map(|y| stretches(y, PRE, POST, 1));
        // The context stretches at the shape vectors' half rate.
        let wide0 = stretches(&y0, CONTEXT_PRE, CONTEXT_POST, 2);
        let wide1 = y1
            .as_ref()
            .map(|y| stretches(y, CONTEXT_PRE, CONTEXT_POST, 2));
        let t0 = column_medians(&segs0);
        let rr: Vec<f64> = peaks.windows(2).map(|p| (p[1] - p[0]) as f64).collect();
        Some(Described {
            t1: segs1.as_deref().map(column_medians),
            w0: column_medians(&wide0),
            w1: wide1.as_deref().map(column_medians),
            median_rr: median(&rr).max(1.0),
            slope: slope(first),
            t_ptp: ptp(&t0),
            t_slope: steepest(&t0),
            t_area: area(&t0),
            t0,
            rr,
            peaks,
            segs0,
            segs1,
            wide0,
            wide1,
        })
    }

    /// Beats described.
    pub(crate) fn len(&self) -> usize {
        self.peaks.len()
    }

    /// The beats' R peaks, samples from the window's start.
    pub(crate) fn samples(&self) -> &[usize] {
        &self.peaks
    }

    /// The [`FEATURES`] inputs of beat `k`.
    pub(crate) fn features(&self, k: usize) -> Vec<f32> {
        let (r, fs) = (self.peaks[k], SAMPLE_RATE_HZ as f64);
        let s0 = &self.segs0[k];
        let (c0, e0) = shape(s0, &self.t0);
        let (c1, e1) = match (&self.segs1, &self.t1) {
            (Some(s1), Some(t1)) => shape(&s1[k], t1),
            _ => (c0, e0),
        };
        let rr_before = if k == 0 {
            self.median_rr
        } else {
            self.rr[k - 1]
        };
        let measured = [
            c0,
            e0,
            ratio_ln(ptp(s0), self.t_ptp),
            qrs_width_secs(&self.slope, r, fs),
            rr_before / self.median_rr,
            ratio_ln(steepest(s0), self.t_slope),
            c1,
            e1,
            rr_before / fs,
            ratio_ln(area(s0), self.t_area),
        ];
        let mut features: Vec<f32> = Vec::with_capacity(FEATURES);
        features.extend(measured.iter().map(|&v| v as f32));
        let x0 = &self.wide0[k];
        let x1 = self.wide1.as_ref().map_or(x0, |s| &s[k]);
        let q1 = self.t1.as_ref().unwrap_or(&self.t0);
        let w1 = self.w1.as_ref().unwrap_or(&self.w0);
        for (s, w, q) in [(x0, &self.w0, &self.t0), (x1, w1, q1)] {
            let scale = ptp(q).max(1e-3);
            features.extend(s.iter().map(|v| (v / scale) as f32));
            features.extend(
                s.iter()
                    .zip(w.iter())
                    .map(|(v, u)| ((v - u) / scale) as f32),
            );
        }
        debug_assert_eq!(features.len(), FEATURES);
        features
    }
}

impl BeatClassifier {
    /// The probability that a beat of `features` ([`FEATURES`] inputs) is ventricular.
    pub(crate) fn probability(&self, features: &[f32]) -> f64 {
        1.0 / (1.0 + (-self.logit(features) as f64).exp())
    }

    /// The VT runs the window of `len` samples ends in, one per call probability
    /// ([`RunFirsts`]), from its `described` beats (`None`: too few for a template). With a
    /// bed's `memory` and the window's end (ms on the bed's timeline), each beat an earlier
    /// window classified keeps its probability ([`BeatMemory`]) and is not described again; a
    /// window without beats still moves the memory's timeline on.
    pub(crate) fn run_level(
        &self,
        described: Option<&Described>,
        len: usize,
        recent: usize,
        memory: Option<(&mut BeatMemory, i64)>,
    ) -> RunFirsts {
        let peaks = described.map_or(&[][..], Described::samples);
        // Only a described window has beats to classify.
        let classify = |k: usize| described.map_or(0.0, |d| self.probability(&d.features(k)));
        let p: Vec<f64> = match memory {
            Some((m, end_ms)) => m.probabilities(peaks, classify, len, end_ms),
            None => (0..peaks.len()).map(classify).collect(),
        };
        // Each beat called with the beats alike to it.
        let p = match described {
            Some(d) => d.alike_median(&p),
            None => p,
        };
        run_level(peaks, &p, len, recent)
    }
}

impl Described {
    /// Each beat's probability in `p` (one per beat) replaced by the median of those of the
    /// window's beats alike to it, itself included ([`ALIKE_CORR`], [`ALIKE_SIZE`]): a beat of
    /// a monomorphic run that the classifier doubts is called with the run's other beats, and
    /// a beat it calls among many sinus beats of its shape is not. A beat below every call
    /// that is alike to no beat at or above one keeps its own probability (its median would
    /// be below every call too), so a window called nowhere costs no comparison.
    pub(crate) fn alike_median(&self, p: &[f64]) -> Vec<f64> {
        // The lowest probability anything is called at.
        let floor = VENTRICULAR_AT.min(CALL_GRID[0] as f64);
        let n = self.len();
        if !p.iter().any(|&v| v >= floor) {
            return p.to_vec();
        }
        let z0: Vec<Vec<f64>> = self.segs0.iter().map(|s| standardised(s)).collect();
        let z1: Option<Vec<Vec<f64>>> = self
            .segs1
            .as_ref()
            .map(|segs| segs.iter().map(|s| standardised(s)).collect());
        let sizes: Vec<f64> = self.segs0.iter().map(|s| ptp(s).max(1e-6)).collect();
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        // Whether beats i and j are alike, each pair compared at most once.
        let mut known: Vec<Option<bool>> = vec![None; n * n];
        let mut alike = |i: usize, j: usize| -> bool {
            if i == j {
                return true;
            }
            let (a, b) = (i.min(j), i.max(j));
            *known[a * n + b].get_or_insert_with(|| {
                let ratio = sizes[a] / sizes[b];
                (1.0 / ALIKE_SIZE..=ALIKE_SIZE).contains(&ratio)
                    && dot(&z0[a], &z0[b]) >= ALIKE_CORR
                    && z1.as_ref().is_none_or(|z| dot(&z[a], &z[b]) >= ALIKE_CORR)
            })
        };
        let mut may_call: Vec<bool> = p.iter().map(|&v| v >= floor).collect();
        for i in (0..n).filter(|&i| p[i] >= floor) {
            for (j, may) in may_call.iter_mut().enumerate() {
                if !*may && alike(i, j) {
                    *may = true;
                }
            }
        }
        let mut v = Vec::with_capacity(n);
        (0..n)
            .map(|i| {
                if !may_call[i] {
                    return p[i];
                }
                v.clear();
                v.extend((0..n).filter(|&j| alike(i, j)).map(|j| p[j]));
                median(&v)
            })
            .collect()
    }
}

/// A stretch less its mean, over its norm (all zeros when flat): the dot product of two is
/// their Pearson correlation.
fn standardised(s: &[f64]) -> Vec<f64> {
    let mean = s.iter().sum::<f64>() / s.len().max(1) as f64;
    let centred: Vec<f64> = s.iter().map(|v| v - mean).collect();
    let norm = centred.iter().map(|v| v * v).sum::<f64>().sqrt();
    if norm > 0.0 {
        centred.iter().map(|v| v / norm).collect()
    } else {
        vec![0.0; s.len()]
    }
}

/// The VT runs a window's beats end in: at each probability of [`CALL_GRID`], the first beat
/// of the run of at least [`VT_MIN_BEATS`] beats the window holds when beats are called at it,
/// samples from the window's start (`None` where it holds none). Called at a lower
/// probability, a run may begin earlier.
pub(crate) type RunFirsts = [Option<usize>; CALL_GRID.len()];

/// The highest probability of [`CALL_GRID`] with a run in `firsts` (one entry per grid
/// probability, `Some` where a run was found at it); 0 where none.
pub(super) fn highest_level(firsts: &RunFirsts) -> f32 {
    CALL_GRID
        .iter()
        .zip(firsts)
        .rev()
        .find_map(|(&g, f)| f.map(|_| g))
        .unwrap_or(0.0)
}

/// [`BeatClassifier::run_level`] on the beats at `peaks` (R peaks, samples from the window's
/// start) and their probabilities `p`. At a grid probability `g`, a beat is called when it
/// reaches `g`, or when it reaches [`VENTRICULAR_AT`] between two beats that reach `g` (one
/// uncertain beat inside a run does not break it).
fn run_level(peaks: &[usize], p: &[f64], len: usize, recent: usize) -> RunFirsts {
    let mut out = [None; CALL_GRID.len()];
    for (&g, first_at) in CALL_GRID.iter().zip(&mut out) {
        let called = called_at(p, g as f64);
        let (n, first) = recent_run(peaks, &called, len, recent);
        if n >= VT_MIN_BEATS {
            *first_at = first;
        }
    }
    out
}

/// Which beats of probabilities `p` are called ventricular at `g`: those that reach it, and
/// those that reach [`VENTRICULAR_AT`] between two that reach it.
pub(crate) fn called_at(p: &[f64], g: f64) -> Vec<bool> {
    (0..p.len())
        .map(|k| {
            p[k] >= g
                || (p[k] >= VENTRICULAR_AT
                    && k > 0
                    && k + 1 < p.len()
                    && p[k - 1] >= g
                    && p[k + 1] >= g)
        })
        .collect()
}

/// The run of ventricular beats (at `peaks`) a window of `len` samples ends in: the most
/// consecutive beats `called` ventricular, faster than 100/min on average, among runs whose
/// last beat lies within the window's last `recent` samples (a run under way, or one that has
/// just ended); 1 when there is only a slow run or a lone beat, 0 when none is called. As the
/// label counts a run, the consecutive called beats whose mean interval is under [`MAX_RUN_RR`] (one slow interval
/// inside a fast run does not break it). Also returns the sample of that run's first beat
/// where it is a fast run (the latest such run where two are as long).
fn recent_run(
    peaks: &[usize],
    called: &[bool],
    len: usize,
    recent: usize,
) -> (usize, Option<usize>) {
    let since = len.saturating_sub(recent);
    let (mut best, mut best_first) = (0usize, None);
    for (first, last, fast) in called_runs(peaks, called).filter(|r| peaks[r.1] >= since) {
        let count = if fast { last - first + 1 } else { 1 };
        if count >= best {
            best = count;
            best_first = fast.then_some(peaks[first]);
        }
    }
    (best, best_first)
}

/// Each run of consecutive `called` beats at `peaks`, in time order: its first and last index,
/// and whether it is fast (two or more beats under [`MAX_RUN_RR`] apart on average).
pub(crate) fn called_runs<'a>(
    peaks: &'a [usize],
    called: &'a [bool],
) -> impl Iterator<Item = (usize, usize, bool)> + 'a {
    let mut k = 0;
    std::iter::from_fn(move || {
        while k < peaks.len() && !called[k] {
            k += 1;
        }
        let first = (k < peaks.len()).then_some(k)?;
        while k + 1 < peaks.len() && called[k + 1] {
            k += 1;
        }
        let (n, span) = (k - first + 1, peaks[k] - peaks[first]);
        let run = (first, k, n >= 2 && span < MAX_RUN_RR * (n - 1));
        k += 1;
        Some(run)
    })
}

/// Pearson correlation of `s` with the template `t`, and the residual's rms over the
/// template's, as `ln(1 + r)`.
fn shape(s: &[f64], t: &[f64]) -> (f64, f64) {
    let n = s.len() as f64;
    let (ms, mt) = (s.iter().sum::<f64>() / n, t.iter().sum::<f64>() / n);
    let (mut sst, mut sss, mut stt, mut res) = (0.0, 0.0, 0.0, 0.0);
    for (a, b) in s.iter().zip(t) {
        sst += (a - ms) * (b - mt);
        sss += (a - ms).powi(2);
        stt += (b - mt).powi(2);
        res += (a - b).powi(2);
    }
    let corr = if sss > 0.0 && stt > 0.0 {
        sst / (sss * stt).sqrt()
    } else {
        0.0
    };
    let t_rms = (t.iter().map(|v| v * v).sum::<f64>() / n).sqrt();
    let rel = if t_rms > 0.0 {
        (res / n).sqrt() / t_rms
    } else {
        0.0
    };
    (corr, rel.ln_1p())
}

fn ptp(s: &[f64]) -> f64 {
    let (lo, hi) = s
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    hi - lo
}

fn steepest(s: &[f64]) -> f64 {
    s.windows(2)
        .map(|p| (p[1] - p[0]).abs())
        .fold(0.0, f64::max)
}

fn area(s: &[f64]) -> f64 {
    s.iter().map(|v| v.abs()).sum()
}

/// `ln(a / b)`, bounded to ±5 (a flat template or beat).
fn ratio_ln(a: f64, b: f64) -> f64 {
    if a <= 0.0 || b <= 0.0 {
        return 0.0;
    }
    (a / b).ln().clamp(-5.0, 5.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::test_signals::ectopic_train;

    #[test]
    fn a_run_counts_consecutive_fast_called_beats_that_end_recently() {
        // Beats every 0.4 s (150/min); the 3rd-7th are called ventricular.
        let beats: Vec<usize> = (0..10).map(|k| 100 + k * 100).collect();
        let mut called = vec![false; 10];
        called[2..7].iter_mut().for_each(|c| *c = true);
        // The run's last beat is at 700; the window is 1,100 samples long.
        assert_eq!(recent_run(&beats, &called, 1_100, 500), (5, Some(300)));
        assert_eq!(
            recent_run(&beats, &called, 1_100, 300).0,
            0,
            "ended too long ago"
        );
        // One slow interval inside a fast run does not break it; a slow run is no run.
        let mut slow = beats.clone();
        for b in &mut slow[5..] {
            *b += 100;
        }
        assert_eq!(recent_run(&slow, &called, 2_000, 2_000), (5, Some(300)));
        let spaced: Vec<usize> = (0..10).map(|k| 100 + k * 2 * MAX_RUN_RR).collect();
        assert_eq!(
            recent_run(&spaced, &called, 10_000, 10_000),
            (1, None),
            "a slow run has no onset"
        );
    }

    #[test]
    fn a_run_called_at_a_lower_probability_may_begin_earlier() {
        // Seven fast beats, the first two less sure: five in a run at 0.99, seven at 0.6.
        let beats: Vec<usize> = (0..7).map(|k| 100 + k * 100).collect();
        let p = [0.7, 0.7, 0.995, 0.995, 0.995, 0.995, 0.995];
        let r = run_level(&beats, &p, 800, 800);
        assert_eq!(highest_level(&r), 0.99);
        assert_eq!(r[7], Some(300), "at 0.99");
        assert_eq!(r[1], Some(100), "at 0.6");
        assert_eq!(r[3], Some(300), "at 0.8 the first two are not called");
    }

    #[test]
    fn one_uncertain_beat_between_confident_ones_does_not_break_a_run() {
        // Six fast beats: confident, but the third only 0.6.
        let beats: Vec<usize> = (0..6).map(|k| 100 + k * 100).collect();
        let p = [0.995, 0.995, 0.6, 0.995, 0.995, 0.995];
        let whole = run_level(&beats, &p, 700, 700);
        assert_eq!((highest_level(&whole), whole[7]), (0.99, Some(100)));
        // Below VENTRICULAR_AT it breaks the run (two and three are no VT) ...
        let q = [0.995, 0.995, 0.3, 0.995, 0.995, 0.995];
        assert_eq!(highest_level(&run_level(&beats, &q, 700, 700)), 0.0);
        // ... and two uncertain beats in a row are not bridged at 0.99: the run holds at 0.6.
        let r = [0.995, 0.995, 0.65, 0.65, 0.995, 0.995];
        assert_eq!(highest_level(&run_level(&beats, &r, 700, 700)), 0.6);
    }

    #[test]
    fn a_wide_inverted_beat_stands_apart_from_the_template() {
        let (x, _) = ectopic_train(5_000, 200, &[10]);
        let beats = describe(&[&x]);
        assert!(beats.len() >= 20, "{}", beats.len());
        let odd = beats
            .iter()
            .min_by(|a, b| a.features[0].total_cmp(&b.features[0]))
            .unwrap();
        assert!((odd.sample as i64 - 2_200).abs() < 30, "{}", odd.sample);
        assert!(odd.features[0] < 0.0, "{:?}", odd.features);
        assert!(odd.features[3] > 0.1, "wide: {:?}", odd.features);
        let typical = &beats[3];
        assert!(typical.features[0] > 0.95, "{:?}", typical.features);
        // A lone lead stands in for the second.
        assert_eq!(typical.features[0], typical.features[6]);
    }

    #[test]
    fn a_run_the_primary_lead_barely_shows_is_found_on_the_second() {
        let (a, b, truth) = crate::signal::test_signals::lead_pair_with_a_quiet_run();
        let found = |beats: &[Beat]| {
            truth
                .iter()
                .filter(|&&t| beats.iter().any(|b| b.sample.abs_diff(t) <= 30))
                .count()
        };
        // Every beat whose QRS stretch lies in the window: all but none at the edges here.
        let both = describe(&[&a, &b]);
        assert_eq!(
            found(&both),
            truth.len(),
            "{:?}",
            both.iter().map(|b| b.sample).collect::<Vec<_>>()
        );
        let one = describe(&[&a]);
        assert!(
            found(&one) < truth.len(),
            "lead II alone finds the quiet run"
        );
    }

    #[test]
    fn a_beat_is_called_with_the_beats_alike_to_it() {
        // Sinus beats every 0.8 s; the 5th and the 11th-15th wide and inverted.
        let wide = [5, 11, 12, 13, 14, 15];
        let (x, centres) = ectopic_train(5_000, 200, &wide);
        let d = Described::of(&[&x]).unwrap();
        let index = |centre: usize| {
            d.samples()
                .iter()
                .position(|&r| r.abs_diff(centre) < 30)
                .unwrap()
        };
        // The classifier calls the wide beats but doubts one of the run, and calls one
        // sinus beat.
        let mut p = vec![0.02; d.len()];
        for &k in &wide {
            p[index(centres[k])] = 0.99;
        }
        let (doubted, stray) = (index(centres[13]), index(centres[8]));
        p[doubted] = 0.3;
        p[stray] = 0.97;
        let q = d.alike_median(&p);
        assert_eq!(q[doubted], 0.99, "called with the run");
        assert_eq!(q[stray], 0.02, "not called among the sinus beats");
        for &k in &wide {
            assert_eq!(q[index(centres[k])], 0.99);
        }
        // A beat alike to none keeps its own probability.
        let (mut y, c) = ectopic_train(5_000, 200, &[]);
        for (i, v) in y[c[6] - 30..c[6] + 30].iter_mut().enumerate() {
            *v = if i % 7 < 3 { 1.5 } else { -1.5 };
        }
        let d = Described::of(&[&y]).unwrap();
        let odd = d
            .samples()
            .iter()
            .position(|&r| r.abs_diff(c[6]) < 40)
            .unwrap();
        let mut p = vec![0.02; d.len()];
        p[odd] = 0.6;
        assert_eq!(d.alike_median(&p)[odd], 0.6);
    }

    #[test]
    fn too_few_beats_give_no_template() {
        assert!(describe(&[&vec![0.0; 2_000]]).is_empty());
        assert!(describe(&[]).is_empty());
    }
}
