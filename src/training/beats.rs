//! The beat classifier's data and fit: the beats [`describe`] finds in a record's windows,
//! labelled ventricular or not from the record's beat annotations (databases that label
//! ventricular beats only: mitdb, svdb, nstdb), and the [`BeatClassifier`] fitted on them: a
//! small 1-D CNN over the beat's shape vectors (three convolutions, each with a ReLU and a
//! max-pool of 2) whose output joins the measured features in two hidden dense layers, trained
//! with Adam on balanced batches (half ventricular beats) and kept at the epoch whose
//! validation beats it ranks best (PR-AUC). The served classifier is [`FITS`] such fits from
//! consecutive seeds, each at its own best epoch, calling beats by their mean logit: one seed's
//! fit moves with its draw of batches on a few patients, and the mean moves less
//! (`docs/EXPERIMENTS.md`, 2026-11-29, "the beat classifier as three seeds' mean").
//!
//! A detected beat takes the label of the annotated beat within [`MATCH_SECS`] of it; one with
//! none there is a false detection (noise, a tall T wave) and is labelled not ventricular, so
//! the classifier learns to leave artefacts out of runs.
//!
//! A monitor may send one lead (II alone, or V alone), and the counter then reads beats from
//! that lead only (it stands in for the second). So each window of two leads is described
//! twice: with both, and with one of them alone, the primary and the secondary in turn from
//! window to window.
//!
//! The beats a fit learns from are also seen as other patients and monitors would show them
//! ([`BeatRows::add_augmented`]): each training record again with runs, salvos and bigeminy of
//! its patient's own ventricular beats spliced into its sinus rhythm, every window of that copy
//! through a monitor's filter mode, gain, polarity, baseline wander and lead order. The beats
//! that choose the epoch, and those the figures judge, are never augmented.

use std::collections::HashSet;

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Module, Param};
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::loss::BinaryCrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, PaddingConfig1d};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::module::max_pool1d;
use burn::tensor::{Int, Tensor, TensorData};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::core::metrics::pr_auc;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::beats::{
    BeatClassifier, BeatFit, Conv, Dense, FEATURES, MEASURED, SHAPE, SHAPE_ROWS, VENTRICULAR_AT,
    describe,
};

use crate::zoo::preprocess::band_pass;

use super::dataset::RecordData;
use super::dataset::{SpliceMix, splice};

/// A detected beat and an annotated one this close are the same beat, s.
const MATCH_SECS: f64 = 0.15;
/// Convolutions over the shape vectors: `(output channels, kernel)`, each followed by a ReLU
/// and a max-pool of 2.
const CONVS: [(usize, usize); 3] = [(8, 7), (16, 5), (16, 5)];
/// Hidden dense layer widths.
const HIDDEN: [usize; 2] = [64, 32];
/// Beats per batch, half of them ventricular.
const BATCH: usize = 256;
/// Batches per epoch (the served counter's; [`Fitting::batches`]).
pub(crate) const BATCHES: usize = 1_000;
/// Epochs at most; the best on validation is kept.
const EPOCHS: usize = 8;
const LEARNING_RATE: f64 = 1e-3;
/// The first fit's random seed; each further fit adds its number to it.
const SEED: u64 = 0x6265_6174;
/// Fits the served classifier averages (`holmes evaluate --beat-fits`).
pub(crate) const FITS: usize = 3;

/// How the classifier is fitted: how many fits from consecutive seeds it averages, and how
/// many batches of [`BATCH`] beats each of their [`EPOCHS`] epochs draws. The served
/// counter's are [`FITS`] and [`BATCHES`]; a smoke check asks for fewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fitting {
    pub fits: usize,
    pub batches: usize,
}
/// The augmented copies' seed, to which each copy's number is added.
const AUGMENT_SEED: u64 = 0x6175_676d;

type Train = Autodiff<Flex>;

/// The network being fitted: convolutions over the shape vectors, then hidden dense layers
/// with ReLU over their output and the measured features, then one logit.
#[derive(Module, Debug)]
struct BeatNet<B: Backend> {
    convs: Vec<Conv1d<B>>,
    hidden: Vec<Linear<B>>,
    out: Linear<B>,
}

impl<B: Backend> BeatNet<B> {
    fn new(device: &B::Device) -> Self {
        let (mut channels, mut len) = (SHAPE_ROWS, SHAPE);
        let convs = CONVS
            .iter()
            .map(|&(c, k)| {
                let conv = Conv1dConfig::new(channels, c, k)
                    .with_padding(PaddingConfig1d::Same)
                    .init(device);
                (channels, len) = (c, len / 2);
                conv
            })
            .collect();
        let mut width = MEASURED + channels * len;
        let hidden = HIDDEN
            .iter()
            .map(|&h| {
                let l = LinearConfig::new(width, h).init(device);
                width = h;
                l
            })
            .collect();
        BeatNet {
            convs,
            hidden,
            out: LinearConfig::new(width, 1).init(device),
        }
    }

    /// This network's weights as a served fit, with `base`'s standardisation.
    fn fit(&self, base: &BeatFit) -> BeatFit {
        BeatFit {
            convs: self.convs.iter().map(conv).collect(),
            layers: self
                .hidden
                .iter()
                .chain(std::iter::once(&self.out))
                .map(dense)
                .collect(),
            ..base.clone()
        }
    }

    /// `[batch, FEATURES]` standardised inputs to `[batch]` logits.
    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 1> {
        let [batch, _] = x.dims();
        let measured = x.clone().slice([0..batch, 0..MEASURED]);
        let shape = x
            .slice([0..batch, MEASURED..FEATURES])
            .reshape([batch, SHAPE_ROWS, SHAPE]);
        let rows = self.convs.iter().fold(shape, |h, c| {
            max_pool1d(relu(c.forward(h)), 2, 2, 0, 1, false)
        });
        let x = Tensor::cat(vec![measured, rows.flatten(1, 2)], 1);
        let h = self.hidden.iter().fold(x, |h, l| relu(l.forward(h)));
        self.out.forward(h).flatten(0, 1)
    }
}

/// A parameter's values, row-major.
fn values<B: Backend, const D: usize>(p: &Param<Tensor<B, D>>) -> Vec<f32> {
    p.val().into_data().to_vec::<f32>().expect("f32 parameters")
}

/// A layer's bias, zeros where it has none.
fn bias<B: Backend>(b: &Option<Param<Tensor<B, 1>>>, outputs: usize) -> Vec<f32> {
    b.as_ref().map_or(vec![0.0; outputs], values)
}

fn conv<B: Backend>(c: &Conv1d<B>) -> Conv {
    let [outputs, inputs, kernel] = c.weight.val().dims();
    Conv::new(
        inputs,
        outputs,
        kernel,
        values(&c.weight),
        bias(&c.bias, outputs),
    )
}

fn dense<B: Backend>(l: &Linear<B>) -> Dense {
    let [inputs, outputs] = l.weight.val().dims();
    Dense {
        inputs,
        outputs,
        weight: values(&l.weight),
        bias: bias(&l.bias, outputs),
    }
}

/// Labelled beats: features, and whether each is ventricular.
#[derive(Debug, Default, Clone)]
pub(crate) struct BeatRows {
    pub xs: Vec<Vec<f32>>,
    pub ys: Vec<bool>,
}

impl BeatRows {
    /// The beats of `rec`'s windows of `window` samples ending every `hop` samples (none when
    /// its database does not label ventricular beats): each window with both its leads, and
    /// where it has two, again with one alone (the primary, then the secondary, in turn).
    pub(crate) fn add_record(&mut self, rec: &RecordData, window: usize, hop: usize) {
        self.add_windows(rec, window, hop, None);
    }

    /// The beats of a copy of `rec` as other monitors and patients would show it, for a fit
    /// (never for the beats that choose its epoch or judge it): runs, salvos and bigeminy of the
    /// patient's own ventricular beats spliced into its sinus rhythm ([`splice`], where the
    /// record has enough of them), and each window seen through a monitor
    /// ([`monitor_variant`]: a filter mode, gain, polarity, baseline wander, leads swapped).
    /// Deterministic from `copy` (a fit gives each of its records its own, e.g. its index).
    pub(crate) fn add_augmented(&mut self, rec: &RecordData, window: usize, hop: usize, copy: u64) {
        let seed = AUGMENT_SEED.wrapping_add(copy);
        let spliced = splice(rec, seed, SpliceMix::EVALUATION);
        let rec = spliced.as_ref().map_or(rec, |s| &s.record);
        let mut rng = SmallRng::seed_from_u64(seed ^ SEED);
        self.add_windows(rec, window, hop, Some(&mut rng));
    }

    fn add_windows(
        &mut self,
        rec: &RecordData,
        window: usize,
        hop: usize,
        mut augment: Option<&mut SmallRng>,
    ) {
        if !rec.db.labels_ventricular_beats() || hop == 0 {
            return;
        }
        let ventricular: HashSet<i64> = rec
            .ectopy
            .iter()
            .filter(|(a, b)| b - a == 1)
            .map(|&(a, _)| a)
            .collect();
        let tol = (MATCH_SECS * SAMPLE_RATE_HZ as f64) as i64;
        let len = rec.len();
        for (k, end) in (window..=len).step_by(hop).enumerate() {
            let start = end - window;
            let leads: Vec<&[f32]> = rec.leads.iter().map(|l| &l[start..end]).collect();
            let seen: Vec<Vec<f32>>;
            let leads: Vec<&[f32]> = match augment.as_deref_mut() {
                Some(rng) => {
                    seen = monitor_variant(&leads, rng);
                    seen.iter().map(Vec::as_slice).collect()
                }
                None => leads,
            };
            let alone = (leads.len() > 1).then(|| vec![leads[k % 2]]);
            for b in std::iter::once(&leads)
                .chain(alone.as_ref())
                .flat_map(|l| describe(l))
            {
                let at = (start + b.sample) as i64;
                let i = rec.beats.partition_point(|&x| x < at);
                let nearest = [i.checked_sub(1), Some(i)]
                    .into_iter()
                    .flatten()
                    .filter_map(|j| rec.beats.get(j))
                    .min_by_key(|&&x| (x - at).abs())
                    .filter(|&&x| (x - at).abs() <= tol);
                self.xs.push(b.features);
                self.ys
                    .push(nearest.is_some_and(|x| ventricular.contains(x)));
            }
        }
    }

    /// Fits the classifier on these beats as `fitting` says, each fit from its own seed kept
    /// at the epoch that ranks `validation`'s beats best: the classifier of their mean logit.
    pub(crate) fn fit(&self, validation: &BeatRows, fitting: Fitting) -> BeatClassifier {
        BeatClassifier::mean_of(
            (0..fitting.fits.max(1) as u64)
                .map(|n| self.fit_for(validation, n, EPOCHS, fitting.batches.max(1))),
        )
    }

    fn fit_for(
        &self,
        validation: &BeatRows,
        seed: u64,
        epochs: usize,
        batches: usize,
    ) -> BeatClassifier {
        let mut best: Option<(f64, BeatClassifier)> = None;
        let standardised = BeatClassifier::of_fits(vec![self.standardised()]);
        self.train(seed, epochs, batches, |epoch, candidate| {
            let auc = validation.pr_auc(&candidate);
            let f = validation.judge(&candidate);
            tracing::info!(
                seed,
                epoch,
                pr_auc = auc,
                sensitivity = f.sensitivity(),
                positive_predictivity = f.positive_predictivity(),
                "Beat classifier epoch"
            );
            if best.as_ref().is_none_or(|(b, _)| auc > *b) {
                best = Some((auc, candidate));
            }
        });
        best.map_or(standardised, |(_, c)| c)
    }

    /// The classifier (of one fit) after each of the [`EPOCHS`] epochs of fit number `seed`,
    /// `batches` an epoch (the same fit as [`BeatRows::fit`]'s, before any epoch is chosen),
    /// for a caller that chooses the epoch on beats of its own.
    pub(crate) fn fit_epochs(&self, seed: u64, batches: usize) -> Vec<BeatClassifier> {
        let mut out = Vec::with_capacity(EPOCHS);
        self.train(seed, EPOCHS, batches.max(1), |_, c| out.push(c));
        if out.is_empty() {
            out.push(BeatClassifier::of_fits(vec![self.standardised()]));
        }
        out
    }

    /// A fit with these beats' input standardisation and no layers yet.
    fn standardised(&self) -> BeatFit {
        let n = self.xs.len().max(1) as f64;
        let mut mean = vec![0.0f64; FEATURES];
        let mut var = vec![0.0f64; FEATURES];
        for x in &self.xs {
            for (m, &v) in mean.iter_mut().zip(x) {
                *m += v as f64 / n;
            }
        }
        for x in &self.xs {
            for ((s, &v), m) in var.iter_mut().zip(x).zip(&mean) {
                *s += (v as f64 - m).powi(2) / n;
            }
        }
        // Each shape vector is standardised as one signal (one mean and deviation over its
        // samples), so that the convolutions see its shape, not each sample's spread.
        for row in 0..SHAPE_ROWS {
            let at = MEASURED + row * SHAPE..MEASURED + (row + 1) * SHAPE;
            let m = mean[at.clone()].iter().sum::<f64>() / SHAPE as f64;
            let v = at
                .clone()
                .map(|i| var[i] + (mean[i] - m).powi(2))
                .sum::<f64>()
                / SHAPE as f64;
            mean[at.clone()].fill(m);
            var[at].fill(v);
        }
        BeatFit {
            convs: Vec::new(),
            mean: mean.iter().map(|&m| m as f32).collect(),
            std: var.iter().map(|&v| v.sqrt().max(1e-6) as f32).collect(),
            layers: Vec::new(),
        }
    }

    /// Trains fit number `seed` for `epochs` of `batches` batches, handing `on_epoch` the
    /// classifier (of this one fit) after each (nothing where the beats hold one class only).
    fn train(
        &self,
        seed: u64,
        epochs: usize,
        batches: usize,
        mut on_epoch: impl FnMut(usize, BeatClassifier),
    ) {
        let base = self.standardised();
        let pos: Vec<usize> = (0..self.ys.len()).filter(|&i| self.ys[i]).collect();
        let neg: Vec<usize> = (0..self.ys.len()).filter(|&i| !self.ys[i]).collect();
        if pos.is_empty() || neg.is_empty() {
            return;
        }
        let (mean, std) = (base.mean.clone(), base.std.clone());
        let standardise = |x: &[f32], out: &mut Vec<f32>| {
            out.extend(
                x.iter()
                    .zip(mean.iter().zip(&std))
                    .map(|(v, (m, s))| (v - m) / s),
            );
        };
        let device = Default::default();
        let seed = SEED.wrapping_add(seed);
        <Train as Backend>::seed(&device, seed);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut net = BeatNet::<Train>::new(&device);
        let mut optim = AdamConfig::new().init();
        let loss_fn = BinaryCrossEntropyLossConfig::new()
            .with_logits(true)
            .init(&device);
        for epoch in 1..=epochs {
            for _ in 0..batches {
                let mut x = Vec::with_capacity(BATCH * FEATURES);
                let mut y = Vec::with_capacity(BATCH);
                for k in 0..BATCH {
                    let from = if k % 2 == 0 { &pos } else { &neg };
                    let i = from[rng.random_range(0..from.len())];
                    standardise(&self.xs[i], &mut x);
                    y.push(i64::from(self.ys[i]));
                }
                let x =
                    Tensor::<Train, 2>::from_data(TensorData::new(x, [BATCH, FEATURES]), &device);
                let y = Tensor::<Train, 1, Int>::from_data(TensorData::new(y, [BATCH]), &device);
                let loss = loss_fn.forward(net.forward(x), y);
                let grads = GradientsParams::from_grads(loss.backward(), &net);
                net = optim.step(LEARNING_RATE, net, grads);
            }
            let candidate = BeatClassifier::of_fits(vec![net.valid().fit(&base)]);
            on_epoch(epoch, candidate);
        }
    }

    /// Appends `other`'s beats.
    pub(crate) fn extend(&mut self, other: &BeatRows) {
        self.xs.extend(other.xs.iter().cloned());
        self.ys.extend_from_slice(&other.ys);
    }

    /// How well `c` ranks these beats: PR-AUC of its logits (what chooses a fit's epoch).
    pub(crate) fn pr_auc(&self, c: &BeatClassifier) -> f64 {
        let scores: Vec<f32> = self.xs.iter().map(|x| c.logit(x)).collect();
        pr_auc(&self.ys, &scores)
    }

    /// How `c` calls these beats.
    pub(crate) fn judge(&self, c: &BeatClassifier) -> BeatFigures {
        let mut f = BeatFigures::default();
        for (x, &y) in self.xs.iter().zip(&self.ys) {
            let called = c.logit(x) >= (VENTRICULAR_AT / (1.0 - VENTRICULAR_AT)).ln() as f32;
            match (y, called) {
                (true, true) => f.true_positive += 1,
                (true, false) => f.false_negative += 1,
                (false, true) => f.false_positive += 1,
                (false, false) => f.true_negative += 1,
            }
        }
        f
    }
}

/// Filter modes of bedside monitors, `(high-pass, low-pass)` Hz: monitoring (0.5-40),
/// diagnostic (0.05-150, at 250 Hz a high-pass alone), ST/artifact (1-30); `None` leaves the
/// recording's own.
const MONITOR_FILTERS: [Option<(f64, Option<f64>)>; 4] = [
    None,
    Some((0.5, Some(40.0))),
    Some((0.05, None)),
    Some((1.0, Some(30.0))),
];

/// One window's leads as another monitor would send them: its leads swapped (half the time,
/// where there are two), one filter mode for all ([`MONITOR_FILTERS`]), and on each lead a
/// gain of 0.5-2, a polarity flip (one time in six) and a slow baseline wander of up to
/// 0.3 mV.
pub(crate) fn monitor_variant(leads: &[&[f32]], rng: &mut SmallRng) -> Vec<Vec<f32>> {
    let mut order: Vec<&[f32]> = leads.to_vec();
    if order.len() > 1 && rng.random_bool(0.5) {
        order.swap(0, 1);
    }
    let filter = MONITOR_FILTERS[rng.random_range(0..MONITOR_FILTERS.len())];
    let hz = SAMPLE_RATE_HZ as f32;
    order
        .into_iter()
        .map(|lead| {
            let mut x = match filter {
                Some((low, high)) => band_pass(lead, low, high),
                None => lead.to_vec(),
            };
            let gain = rng.random_range(-0.7f32..0.7).exp();
            let sign = if rng.random_bool(1.0 / 6.0) {
                -1.0
            } else {
                1.0
            };
            let (a, f) = (rng.random_range(0.0f32..0.3), rng.random_range(0.1f32..0.4));
            let phase = rng.random_range(0.0..std::f32::consts::TAU);
            for (i, v) in x.iter_mut().enumerate() {
                let wander = a * (std::f32::consts::TAU * f * i as f32 / hz + phase).sin();
                *v = sign * gain * *v + wander;
            }
            x
        })
        .collect()
}

/// A beat classifier's calls against the annotations.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BeatFigures {
    pub true_positive: usize,
    pub false_negative: usize,
    pub false_positive: usize,
    pub true_negative: usize,
}

impl BeatFigures {
    /// Sensitivity to ventricular beats.
    pub fn sensitivity(&self) -> f64 {
        self.true_positive as f64 / (self.true_positive + self.false_negative).max(1) as f64
    }

    /// Positive predictivity of a ventricular call.
    pub fn positive_predictivity(&self) -> f64 {
        self.true_positive as f64 / (self.true_positive + self.false_positive).max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::test_signals::ectopic_train;
    use crate::training::dataset::Database;

    #[test]
    fn the_served_classifier_computes_what_the_fitted_network_does() {
        let device = Default::default();
        <Flex as Backend>::seed(&device, 7);
        let net = BeatNet::<Flex>::new(&device);
        let base = BeatFit {
            mean: vec![0.5; FEATURES],
            std: vec![2.0; FEATURES],
            convs: Vec::new(),
            layers: Vec::new(),
        };
        let served = net.fit(&base);
        served.check().expect("the exported layers chain");
        assert_eq!(served.convs.len(), CONVS.len());
        let rows = 6;
        let x: Vec<f32> = (0..rows * FEATURES)
            .map(|k| ((k * 7_919) % 1_013) as f32 / 150.0 - 3.0)
            .collect();
        let standardised: Vec<f32> = x.iter().map(|v| (v - 0.5) / 2.0).collect();
        let want = net
            .forward(Tensor::<Flex, 2>::from_data(
                TensorData::new(standardised, [rows, FEATURES]),
                &device,
            ))
            .into_data()
            .to_vec::<f32>()
            .expect("f32 logits");
        for (row, w) in x.chunks_exact(FEATURES).zip(want) {
            let got = served.logit(row);
            assert!(
                (got - w).abs() < 1e-4 * (1.0 + w.abs()),
                "{got} against {w}"
            );
        }
    }

    /// Two minutes of beats every 0.8 s, every seventh one ventricular (wide, inverted).
    fn record(db: Database) -> RecordData {
        let wide: Vec<usize> = (3..200).step_by(7).collect();
        let (lead, centres) = ectopic_train(120 * SAMPLE_RATE_HZ, 200, &wide);
        RecordData {
            db,
            key: format!("{}/x", db.name()),
            group: format!("{}/x", db.name()),
            leads: vec![lead],
            episodes: Vec::new(),
            noise: vec![Vec::new()],
            beats: centres.iter().map(|&c| c as i64).collect(),
            paced: false,
            ectopy: wide
                .iter()
                .filter_map(|&k| centres.get(k))
                .map(|&c| (c as i64, c as i64 + 1))
                .collect(),
        }
    }

    #[test]
    fn beats_take_their_labels_from_the_annotations_and_the_fit_learns_them() {
        let mut rows = BeatRows::default();
        rows.add_record(
            &record(Database::Mitdb),
            30 * SAMPLE_RATE_HZ,
            30 * SAMPLE_RATE_HZ,
        );
        let v = rows.ys.iter().filter(|&&y| y).count();
        // 4 windows of about 36 beats, one in seven ventricular.
        assert!(rows.ys.len() > 120, "{}", rows.ys.len());
        assert!((15..=25).contains(&v), "{v} of {}", rows.ys.len());
        let c = rows.fit_for(&rows, 0, 2, 40);
        c.check().unwrap();
        let f = rows.judge(&c);
        assert!(
            f.sensitivity() > 0.95 && f.positive_predictivity() > 0.95,
            "{f:?}"
        );

        // Another seed's fit differs, and the classifier of both calls by their mean logit.
        let other = rows.fit_for(&rows, 1, 2, 40);
        assert_ne!(other.fits, c.fits);
        let both = BeatClassifier::mean_of([c.clone(), other.clone()]);
        both.check().unwrap();
        for x in rows.xs.iter().take(20) {
            let mean = (c.logit(x) + other.logit(x)) / 2.0;
            assert!((both.logit(x) - mean).abs() <= 1e-5 * (1.0 + mean.abs()));
        }
        let f = rows.judge(&both);
        assert!(
            f.sensitivity() > 0.95 && f.positive_predictivity() > 0.95,
            "{f:?}"
        );
    }

    #[test]
    fn a_window_of_two_leads_is_also_described_with_one_alone() {
        let one = record(Database::Mitdb);
        let mut two = one.clone();
        two.leads
            .push(one.leads[0].iter().map(|v| 0.8 * v).collect());
        let (window, hop) = (30 * SAMPLE_RATE_HZ, 30 * SAMPLE_RATE_HZ);
        let (mut a, mut b) = (BeatRows::default(), BeatRows::default());
        a.add_record(&one, window, hop);
        b.add_record(&two, window, hop);
        let v = |r: &BeatRows| r.ys.iter().filter(|&&y| y).count();
        assert_eq!(b.ys.len(), 2 * a.ys.len());
        assert_eq!(v(&b), 2 * v(&a));
    }

    #[test]
    fn a_monitor_variant_is_deterministic_finite_and_sometimes_swaps_the_leads() {
        let rec = record(Database::Mitdb);
        let a = &rec.leads[0][..7_500];
        // The second lead: the first 40 samples later, so each is told by its shape.
        let b: Vec<f32> = (0..a.len())
            .map(|i| a[(i + a.len() - 40) % a.len()])
            .collect();
        let leads: Vec<&[f32]> = vec![a, &b];
        let variant = |seed| monitor_variant(&leads, &mut SmallRng::seed_from_u64(seed));
        assert_eq!(variant(7), variant(7));
        let corr = |x: &[f32], y: &[f32]| -> f32 {
            let dot = |p: &[f32], q: &[f32]| p.iter().zip(q).map(|(u, w)| u * w).sum::<f32>();
            dot(x, y).abs() / (dot(x, x) * dot(y, y)).sqrt()
        };
        let mut swapped = 0;
        for seed in 0..20 {
            let v = variant(seed);
            assert_eq!(v.len(), 2);
            assert!(
                v.iter()
                    .all(|l| l.len() == a.len() && l.iter().all(|x| x.is_finite()))
            );
            assert_ne!(v[0], a, "seed {seed}: seen through no monitor");
            if corr(&v[0], &b) > corr(&v[0], a) {
                swapped += 1;
            }
        }
        assert!((3..=17).contains(&swapped), "{swapped} of 20 swapped");
    }

    #[test]
    fn augmented_copies_add_spliced_runs_of_the_patients_own_beats() {
        // Ventricular beats only in the first half minute, sinus rhythm after: room to splice.
        let wide: Vec<usize> = (3..40).step_by(7).collect();
        let (lead, centres) = ectopic_train(300 * SAMPLE_RATE_HZ, 200, &wide);
        let rec = RecordData {
            leads: vec![lead],
            beats: centres.iter().map(|&c| c as i64).collect(),
            ectopy: wide
                .iter()
                .filter_map(|&k| centres.get(k))
                .map(|&c| (c as i64, c as i64 + 1))
                .collect(),
            ..record(Database::Mitdb)
        };
        let (window, hop) = (30 * SAMPLE_RATE_HZ, 15 * SAMPLE_RATE_HZ);
        let (mut plain, mut more, mut again) = (
            BeatRows::default(),
            BeatRows::default(),
            BeatRows::default(),
        );
        plain.add_record(&rec, window, hop);
        more.add_augmented(&rec, window, hop, 3);
        again.add_augmented(&rec, window, hop, 3);
        let v = |r: &BeatRows| r.ys.iter().filter(|&&y| y).count();
        assert!(
            v(&more) > 2 * v(&plain),
            "{} against {}",
            v(&more),
            v(&plain)
        );
        assert_eq!((&more.xs, &more.ys), (&again.xs, &again.ys));
    }

    #[test]
    fn a_database_without_ventricular_beat_labels_gives_no_beats() {
        let mut rows = BeatRows::default();
        rows.add_record(
            &record(Database::Cudb),
            30 * SAMPLE_RATE_HZ,
            30 * SAMPLE_RATE_HZ,
        );
        assert!(rows.ys.is_empty());
    }
}
