//! The beat classifier's network: [`BeatClassifier`], the probability that a beat is
//! ventricular from its [`FEATURES`](super::FEATURES) inputs, computed on the host CPU by
//! plain loops (the counter runs on the scoring thread, beat by beat, and needs no tensor
//! library). The shape vectors go through [`Conv`] layers (a small 1-D CNN over the beat's
//! context stretch and its difference from the template, both leads as channels), whose
//! output joins the measured features in [`Dense`] layers that end in one logit. A
//! classifier without convolutions reads all its inputs in the dense layers (a perceptron).
//! `training::beats` fits it with burn and copies the weights out in the layouts below.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::{FEATURES, MEASURED, MEASURES, SHAPE};

/// Rows of shape vectors among a beat's inputs: each lead's context stretch and its difference
/// from the template's.
pub(crate) const SHAPE_ROWS: usize = 4;

/// One fully connected layer: `y = x W + b`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dense {
    pub inputs: usize,
    pub outputs: usize,
    /// `inputs x outputs`, row-major (one row per input).
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

/// Outputs of a [`Dense`] layer computed together, their sums held in registers.
const BLOCK: usize = 16;

impl Dense {
    /// `y = x W + b`, each output summed from its bias through the inputs in order.
    #[inline(always)]
    fn forward_into(&self, x: &[f32], y: &mut Vec<f32>) {
        let o = self.outputs;
        y.clear();
        y.resize(o, 0.0);
        // Four blocks at a time where there are four, then two, then one: independent sums,
        // added side by side.
        let mut j = 0;
        while j + 4 * BLOCK <= o {
            self.block::<{ 4 * BLOCK }>(x, j, y);
            j += 4 * BLOCK;
        }
        while j + 2 * BLOCK <= o {
            self.block::<{ 2 * BLOCK }>(x, j, y);
            j += 2 * BLOCK;
        }
        while j + BLOCK <= o {
            self.block::<BLOCK>(x, j, y);
            j += BLOCK;
        }
        for (k, yk) in y.iter_mut().enumerate().skip(j) {
            let mut a = self.bias[k];
            for (&xi, row) in x.iter().zip(self.weight.chunks_exact(o)) {
                a += xi * row[k];
            }
            *yk = a;
        }
    }

    /// Outputs `j..j + W` of [`forward_into`](Self::forward_into), their sums in registers.
    #[inline(always)]
    fn block<const W: usize>(&self, x: &[f32], j: usize, y: &mut [f32]) {
        let o = self.outputs;
        let mut acc: [f32; W] = self.bias[j..j + W].try_into().expect("W outputs");
        for (&xi, row) in x.iter().zip(self.weight.chunks_exact(o)) {
            let row: &[f32; W] = row[j..j + W].try_into().expect("W weights");
            for (a, &w) in acc.iter_mut().zip(row) {
                *a += xi * w;
            }
        }
        y[j..j + W].copy_from_slice(&acc);
    }
}

/// One 1-D convolution over channels-first rows, zero-padded to keep the length (an odd
/// kernel), followed by a ReLU and a max-pool of 2 (stride 2, a last odd sample dropped).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conv {
    pub inputs: usize,
    pub outputs: usize,
    pub kernel: usize,
    /// `outputs x inputs x kernel`, row-major (burn's `Conv1d` layout).
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    /// `weight` as `inputs x kernel x outputs`, the order [`forward_n`](Self::forward_n)
    /// reads: made at its first use, not stored in the file.
    #[serde(skip)]
    by_position: OnceLock<Vec<f32>>,
}

/// Two convolutions are equal when their shapes, weights and biases are (whether either has
/// reordered its weights yet does not matter).
impl PartialEq for Conv {
    fn eq(&self, other: &Self) -> bool {
        (self.inputs, self.outputs, self.kernel) == (other.inputs, other.outputs, other.kernel)
            && self.weight == other.weight
            && self.bias == other.bias
    }
}

impl Conv {
    /// A convolution of `weight` (`outputs x inputs x kernel`) and `bias`.
    pub(crate) fn new(
        inputs: usize,
        outputs: usize,
        kernel: usize,
        weight: Vec<f32>,
        bias: Vec<f32>,
    ) -> Conv {
        Conv {
            inputs,
            outputs,
            kernel,
            weight,
            bias,
            by_position: OnceLock::new(),
        }
    }

    /// The weights as `inputs x kernel x outputs`, reordered once.
    fn by_position(&self) -> &[f32] {
        self.by_position.get_or_init(|| {
            let (k, inputs, outputs) = (self.kernel, self.inputs, self.outputs);
            let mut w = vec![0.0f32; inputs * k * outputs];
            for o in 0..outputs {
                for i in 0..inputs {
                    for t in 0..k {
                        w[(i * k + t) * outputs + o] = self.weight[(o * inputs + i) * k + t];
                    }
                }
            }
            w
        })
    }

    /// `x` (`inputs` rows of `len`) to `outputs` rows of `len / 2`. Each output position's
    /// channels are summed together (eight or sixteen held in registers), each from its bias
    /// through the inputs and then the taps in order, as burn's layout reads.
    #[inline(always)]
    fn forward(&self, x: &[f32], len: usize) -> Vec<f32> {
        match self.outputs {
            8 => self.forward_n::<8, 8>(x, len),
            16 => self.forward_n::<16, 4>(x, len),
            _ => self.forward_rows(x, len),
        }
    }

    /// [`forward`](Self::forward) for `N` outputs, all at once at each position. Positions
    /// whose every tap lies inside the row go `LANES` at a time (eight or sixteen sums in
    /// registers, two or four vectors of eight per position): their sums are independent,
    /// so the CPU adds them side by side instead of waiting on one chain of additions; each is
    /// still summed in its own order, so the bits are those of one position at a time.
    #[inline(always)]
    fn forward_n<const N: usize, const LANES: usize>(&self, x: &[f32], len: usize) -> Vec<f32> {
        let (k, half, inputs) = (self.kernel, self.kernel / 2, self.inputs);
        let w = self.by_position();
        let bias: [f32; N] = self.bias[..N].try_into().expect("N outputs");
        let used = len / 2 * 2;
        // The last position every tap of which lies inside the row, plus one.
        let inner_end = (len + half + 1).saturating_sub(k);
        let mut pre = vec![[0.0f32; N]; used];
        let mut p = 0;
        while p < used {
            if p >= half && p + LANES <= inner_end.min(used) {
                let mut acc = [bias; LANES];
                for i in 0..inputs {
                    // Output p + q reads input p + q + t - half, t < k.
                    let xi = &x[i * len + p - half..][..LANES + k - 1];
                    for t in 0..k {
                        let wt: &[f32; N] = w[(i * k + t) * N..][..N].try_into().expect("N");
                        for (q, a) in acc.iter_mut().enumerate() {
                            let v = xi[q + t];
                            for (a, &wo) in a.iter_mut().zip(wt) {
                                *a += v * wo;
                            }
                        }
                    }
                }
                pre[p..p + LANES].copy_from_slice(&acc);
                p += LANES;
                continue;
            }
            let mut acc = bias;
            for i in 0..inputs {
                let xi = &x[i * len..(i + 1) * len];
                // Output p reads input p + t - half, where that is inside the row.
                let lo = half.saturating_sub(p);
                let hi = (len + half - p).min(k);
                for t in lo..hi {
                    let v = xi[p + t - half];
                    let wt: &[f32; N] = w[(i * k + t) * N..][..N].try_into().expect("N");
                    for (a, &wo) in acc.iter_mut().zip(wt) {
                        *a += v * wo;
                    }
                }
            }
            pre[p] = acc;
            p += 1;
        }
        let mut y = vec![0.0f32; N * (len / 2)];
        for (j, pair) in pre.chunks_exact(2).enumerate() {
            for o in 0..N {
                y[o * (len / 2) + j] = pair[0][o].max(pair[1][o]).max(0.0);
            }
        }
        y
    }

    /// [`forward`](Self::forward) for any number of outputs, row by row.
    fn forward_rows(&self, x: &[f32], len: usize) -> Vec<f32> {
        let (k, half) = (self.kernel, self.kernel / 2);
        let mut row = vec![0.0f32; len];
        let mut y = Vec::with_capacity(self.outputs * (len / 2));
        for o in 0..self.outputs {
            row.fill(self.bias[o]);
            for i in 0..self.inputs {
                let xi = &x[i * len..(i + 1) * len];
                let w = &self.weight[(o * self.inputs + i) * k..][..k];
                for (t, &wt) in w.iter().enumerate() {
                    // Output p reads input p + t - half.
                    let lo = half.saturating_sub(t);
                    let hi = (len + half).saturating_sub(t).min(len);
                    for p in lo..hi {
                        row[p] += wt * xi[p + t - half];
                    }
                }
            }
            y.extend(row.chunks_exact(2).map(|a| a[0].max(a[1]).max(0.0)));
        }
        y
    }
}

/// A beat classifier: the probability that a beat is ventricular, as the mean logit of its
/// [`BeatFit`]s, the same network fitted from different seeds (each at its own epoch), so that
/// no one seed's luck on a few patients decides a beat's call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeatClassifier {
    /// Names of the measured features (the shape vectors follow them).
    pub measures: Vec<String>,
    /// The fits whose logits are averaged, one at least.
    pub fits: Vec<BeatFit>,
}

/// One fitted network: its features' standardisation, the shape vectors through the
/// convolutions (where it has any), then with the measured features through dense layers with
/// rectified hidden outputs and one output logit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeatFit {
    /// Each input's mean and standard deviation over the beats fitted on.
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    /// Convolutions over the four shape vectors (`[4, SHAPE]` channels: each lead's stretch
    /// and its difference from the template), input first; none for a perceptron.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub convs: Vec<Conv>,
    /// The layers, input first; all but the last are followed by a ReLU. The first reads the
    /// measured features and then the last convolution's rows (or the shape vectors as they
    /// are, without convolutions).
    pub layers: Vec<Dense>,
}

/// Why a beat classifier cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BeatsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: {source}")]
    Invalid {
        path: PathBuf,
        #[source]
        source: Box<BeatsError>,
    },
    #[error("the beat classifier reads {got} inputs, the beats have {need}")]
    Inputs { got: usize, need: usize },
    #[error("the beat classifier's layer {layer} does not fit the one before")]
    Layers { layer: usize },
    #[error("the beat classifier's convolution {layer} does not fit the one before")]
    Convolutions { layer: usize },
    #[error("the beat classifier has no fit")]
    NoFits,
}

impl BeatClassifier {
    /// Names of the measured features, in order.
    pub(crate) fn measure_names() -> Vec<String> {
        MEASURES.iter().map(|s| s.to_string()).collect()
    }

    /// A classifier of `fits`, each standardising the [`FEATURES`] inputs itself.
    pub(crate) fn of_fits(fits: Vec<BeatFit>) -> BeatClassifier {
        BeatClassifier {
            measures: BeatClassifier::measure_names(),
            fits,
        }
    }

    /// The classifier whose logit is the mean of `classifiers`' (their fits gathered).
    pub(crate) fn mean_of(classifiers: impl IntoIterator<Item = BeatClassifier>) -> BeatClassifier {
        BeatClassifier::of_fits(classifiers.into_iter().flat_map(|c| c.fits).collect())
    }

    /// Checks that there is a fit, and that each fit's layers chain from [`FEATURES`] inputs to
    /// one output.
    pub fn check(&self) -> Result<(), BeatsError> {
        if self.fits.is_empty() {
            return Err(BeatsError::NoFits);
        }
        self.fits.iter().try_for_each(BeatFit::check)
    }

    /// The logit that a beat with inputs `x` is ventricular: the fits' mean.
    pub(crate) fn logit(&self, x: &[f32]) -> f32 {
        let sum: f32 = self.fits.iter().map(|f| f.logit(x)).sum();
        sum / self.fits.len().max(1) as f32
    }

    /// Multiply-accumulates per beat, over every fit's convolutions and dense layers.
    pub(crate) fn macs(&self) -> u64 {
        self.fits.iter().map(BeatFit::macs).sum()
    }

    /// Weights and biases, over every fit.
    pub(crate) fn parameters(&self) -> usize {
        let conv = |c: &Conv| c.weight.len() + c.bias.len();
        let dense = |l: &Dense| l.weight.len() + l.bias.len();
        self.fits
            .iter()
            .map(|f| {
                f.convs.iter().map(conv).sum::<usize>() + f.layers.iter().map(dense).sum::<usize>()
            })
            .sum()
    }

    /// A classifier for tests: one fit of one layer reading the first feature (standardised as
    /// is), its logit `weight x feature + bias`.
    #[cfg(test)]
    pub(crate) fn on_first_feature(weight: f32, bias: f32) -> BeatClassifier {
        let mut w = vec![0.0; FEATURES];
        w[0] = weight;
        BeatClassifier::of_fits(vec![BeatFit {
            mean: vec![0.0; FEATURES],
            std: vec![1.0; FEATURES],
            convs: Vec::new(),
            layers: vec![Dense {
                inputs: FEATURES,
                outputs: 1,
                weight: w,
                bias: vec![bias],
            }],
        }])
    }
}

impl BeatFit {
    /// Checks that the layers chain from [`FEATURES`] inputs to one output.
    pub fn check(&self) -> Result<(), BeatsError> {
        let need = FEATURES;
        if self.mean.len() != need || self.std.len() != need {
            return Err(BeatsError::Inputs {
                got: self.mean.len(),
                need,
            });
        }
        let (mut channels, mut len) = (SHAPE_ROWS, SHAPE);
        for (k, c) in self.convs.iter().enumerate() {
            if c.inputs != channels
                || c.kernel % 2 == 0
                || c.weight.len() != c.outputs * c.inputs * c.kernel
                || c.bias.len() != c.outputs
                || len < 2
            {
                return Err(BeatsError::Convolutions { layer: k });
            }
            (channels, len) = (c.outputs, len / 2);
        }
        let mut width = MEASURED + channels * len;
        for (k, l) in self.layers.iter().enumerate() {
            if l.inputs != width
                || l.weight.len() != l.inputs * l.outputs
                || l.bias.len() != l.outputs
            {
                return Err(BeatsError::Layers { layer: k });
            }
            width = l.outputs;
        }
        if width != 1 {
            return Err(BeatsError::Layers {
                layer: self.layers.len(),
            });
        }
        Ok(())
    }

    /// This fit's logit that a beat with inputs `x` is ventricular: compiled for AVX2 where the
    /// CPU has it (wider vectors, the same sums in the same order, so the same bits).
    pub(crate) fn logit(&self, x: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { self.logit_avx2(x) };
        }
        self.logit_portable(x)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn logit_avx2(&self, x: &[f32]) -> f32 {
        self.logit_portable(x)
    }

    #[inline(always)]
    fn logit_portable(&self, x: &[f32]) -> f32 {
        let mut h: Vec<f32> = x
            .iter()
            .zip(self.mean.iter().zip(&self.std))
            .map(|(v, (m, s))| (v - m) / s)
            .collect();
        if !self.convs.is_empty() {
            let mut len = SHAPE;
            let mut rows = h.split_off(MEASURED);
            for c in &self.convs {
                rows = c.forward(&rows, len);
                len /= 2;
            }
            h.extend(rows);
        }
        let mut next = Vec::new();
        let last = self.layers.len().saturating_sub(1);
        for (k, l) in self.layers.iter().enumerate() {
            l.forward_into(&h, &mut next);
            std::mem::swap(&mut h, &mut next);
            if k < last {
                h.iter_mut().for_each(|v| *v = v.max(0.0));
            }
        }
        h.first().copied().unwrap_or(0.0)
    }

    /// Multiply-accumulates per beat: each convolution over its input length (halved by the
    /// pooling after it), then the dense layers.
    fn macs(&self) -> u64 {
        let mut len = SHAPE;
        let mut sum = 0u64;
        for c in &self.convs {
            sum += (c.outputs * c.inputs * c.kernel * len) as u64;
            len /= 2;
        }
        sum + self
            .layers
            .iter()
            .map(|l| (l.inputs * l.outputs) as u64)
            .sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dense_layer_sums_each_output_from_its_bias_through_the_inputs_in_order() {
        // Widths around the block of outputs computed together.
        for (inputs, outputs) in [
            (3, 1),
            (5, 16),
            (7, 20),
            (134, 64),
            (64, 32),
            (2, 33),
            (9, 48),
        ] {
            let f = |k: usize| ((k * 7_919) % 1_013) as f32 / 97.0 - 5.0;
            let layer = Dense {
                inputs,
                outputs,
                weight: (0..inputs * outputs).map(f).collect(),
                bias: (0..outputs).map(|k| f(k + 3)).collect(),
            };
            let x: Vec<f32> = (0..inputs).map(|k| f(k + 11) * 0.37).collect();
            let mut y = vec![9.0; 3];
            layer.forward_into(&x, &mut y);
            assert_eq!(y.len(), outputs);
            for (j, &yj) in y.iter().enumerate() {
                let mut want = layer.bias[j];
                for (i, &xi) in x.iter().enumerate() {
                    want += xi * layer.weight[i * outputs + j];
                }
                assert_eq!(
                    yj.to_bits(),
                    want.to_bits(),
                    "{inputs}x{outputs} output {j}"
                );
            }
        }
    }

    #[test]
    fn a_convolution_sums_every_output_as_row_by_row_does_to_the_bit() {
        let f = |k: usize| ((k * 7_919) % 1_013) as f32 / 97.0 - 5.0;
        for (inputs, outputs, kernel, len) in
            // The zoo's three, odd and short rows (no position or one group of positions with
            // every tap inside), and widths the grouped path does not take.
            [
                (4, 8, 7, 88),
                (8, 16, 5, 44),
                (16, 16, 5, 22),
                (4, 8, 7, 87),
                (2, 16, 9, 13),
                (3, 8, 7, 5),
                (3, 16, 3, 6),
                (3, 5, 3, 9),
            ]
        {
            let c = Conv::new(
                inputs,
                outputs,
                kernel,
                (0..outputs * inputs * kernel).map(f).collect(),
                (0..outputs).map(|k| f(k + 5)).collect(),
            );
            let x: Vec<f32> = (0..inputs * len).map(|k| f(k + 17) * 0.21).collect();
            let (got, want) = (c.forward(&x, len), c.forward_rows(&x, len));
            assert_eq!(got.len(), outputs * (len / 2));
            let bits = |v: &[f32]| v.iter().map(|a| a.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{inputs}x{outputs}, kernel {kernel}, {len}"
            );
        }
    }

    #[test]
    fn a_convolution_that_does_not_read_the_shape_rows_is_refused() {
        let mut c = BeatClassifier::on_first_feature(1.0, 0.0).fits.remove(0);
        c.check().expect("a perceptron on the inputs as they are");
        c.convs.push(Conv::new(
            SHAPE_ROWS + 1,
            2,
            3,
            vec![0.0; 2 * (SHAPE_ROWS + 1) * 3],
            vec![0.0; 2],
        ));
        assert!(matches!(
            c.check(),
            Err(BeatsError::Convolutions { layer: 0 })
        ));
        c.convs[0].inputs = SHAPE_ROWS;
        c.convs[0].weight.truncate(2 * SHAPE_ROWS * 3);
        // The dense layer still reads the shape vectors whole, not the convolution's rows.
        assert!(matches!(c.check(), Err(BeatsError::Layers { layer: 0 })));
    }

    #[test]
    fn a_classifier_of_several_fits_calls_by_their_mean_logit() {
        let one = BeatClassifier::on_first_feature(2.0, 1.0);
        let two = BeatClassifier::on_first_feature(-1.0, 4.0);
        let x = {
            let mut x = vec![0.0; FEATURES];
            x[0] = 3.0;
            x
        };
        assert_eq!(one.logit(&x), 7.0);
        assert_eq!(two.logit(&x), 1.0);
        let both = BeatClassifier::mean_of([one.clone(), two]);
        both.check().expect("two fits that chain");
        assert_eq!(both.fits.len(), 2);
        assert_eq!(both.logit(&x), 4.0);
        assert_eq!(both.macs(), 2 * one.macs());
        assert_eq!(both.parameters(), 2 * (FEATURES + 1));
        assert!(matches!(
            BeatClassifier::of_fits(Vec::new()).check(),
            Err(BeatsError::NoFits)
        ));
    }
}
