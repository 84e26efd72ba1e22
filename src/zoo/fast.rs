//! The inference form of a ResNeXt-1D: what serving runs on CPU (and GPU), built from the
//! trained [`ResNeXt1d`](super::resnext::ResNeXt1d) record.
//!
//! Differences from the training form, none of which change the function it computes:
//! - BatchNorm (running statistics) is folded into the preceding convolution's weights and a
//!   bias, so each convolution is one GEMM plus one bias add;
//! - "same" padding and the grouped convolution are one [`FoldedConv`] in the grouped
//!   channels-last layout of [`conv_gemm`](super::conv_gemm) (one batched GEMM per layer, no
//!   per-group loop, no im2col buffer, no layout change between layers);
//! - the stem writes the blocks' grouped layout directly;
//! - the shortcut max-pool (kernel 2, stride 2, `ceil_mode`) is an element-wise maximum of the
//!   even and odd samples, with no argmax indices.
//!
//! [`model`](super::model) picks this path or the plain burn one ([`InferencePath`]); the
//! plain path stays the reference the tests hold this one to.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;

use super::conv_gemm::{FoldedConv, FoldedWeights, max_pool2, pad_channels};

/// Environment variable that selects the serving path: `plain` for burn's own modules,
/// anything else (or unset) for the fast path.
pub const INFERENCE_PATH_ENV: &str = "HOLMES_INFERENCE";

/// Which forward pass a zoo model runs for predictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InferencePath {
    /// The folded, GEMM-based inference form of this module.
    #[default]
    Fast,
    /// The training-form burn modules (`Conv1d`, `BatchNorm`, `max_pool1d`): the reference.
    Plain,
}

impl InferencePath {
    /// The path named by `HOLMES_INFERENCE` (`plain` or `fast`; fast when unset).
    pub fn from_env() -> InferencePath {
        match std::env::var(INFERENCE_PATH_ENV) {
            Ok(v) if v.eq_ignore_ascii_case("plain") => InferencePath::Plain,
            _ => InferencePath::Fast,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            InferencePath::Fast => "fast",
            InferencePath::Plain => "plain",
        }
    }
}

/// A residual block in inference form.
#[derive(Module, Debug)]
pub struct FastBlock<B: Backend> {
    c1: FoldedConv<B>,
    c2: FoldedConv<B>,
    stride: usize,
    cout: usize,
}

/// A ResNeXt-1D in inference form.
#[derive(Module, Debug)]
pub struct FastResNeXt1d<B: Backend> {
    stem: FoldedConv<B>,
    blocks: Vec<FastBlock<B>>,
    fc: Linear<B>,
}

/// The group count of the activation layout: the network's groups, merged (block-diagonal
/// weights) until the narrowest convolution writes at least [`MIN_GROUP_COLUMNS`] channels
/// per group, since GEMMs only a few columns wide run far below the machine's speed.
fn layout_groups(stem: &FoldedWeights, blocks: &[FoldedBlock]) -> usize {
    let Some(first) = blocks.first() else {
        return 1;
    };
    let groups = first.c1.groups;
    if blocks.iter().any(|b| b.c1.groups != groups || b.c2.groups != groups) {
        return 1; // mixed group counts: one dense layout
    }
    let narrowest = blocks
        .iter()
        .flat_map(|b| [&b.c1, &b.c2])
        .map(|c| c.cout / groups)
        .chain([stem.cout / groups])
        .min()
        .unwrap_or(1)
        .max(1);
    let min_cols = std::env::var("HOLMES_FAST_MIN_COLUMNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MIN_GROUP_COLUMNS);
    let mut g = groups;
    while g % 2 == 0 && (groups / g) * narrowest < min_cols {
        g /= 2;
    }
    g
}

/// See [`layout_groups`].
pub const MIN_GROUP_COLUMNS: usize = 8;

/// One residual block's folded convolutions and shape, as [`FastResNeXt1d::new`] takes them.
#[derive(Debug, Clone)]
pub struct FoldedBlock {
    pub c1: FoldedWeights,
    pub c2: FoldedWeights,
}

impl<B: Backend> FastResNeXt1d<B> {
    /// Builds the inference form from folded weights and the final linear layer.
    pub fn new(stem: &FoldedWeights, blocks: &[FoldedBlock], fc: Linear<B>, device: &B::Device) -> Self {
        let groups = layout_groups(stem, blocks);
        FastResNeXt1d {
            stem: FoldedConv::new(stem, groups, device),
            blocks: blocks
                .iter()
                .map(|b| FastBlock {
                    c1: FoldedConv::new(&b.c1, groups, device),
                    c2: FoldedConv::new(&b.c2, groups, device),
                    stride: b.c1.stride,
                    cout: b.c1.cout,
                })
                .collect(),
            fc,
        }
    }

    /// # Shapes
    /// - x: `[batch, 1, samples]` normalised ECG
    /// - returns: `[batch, 2]` logits, equal (to float rounding) to the training form's
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        let [n, _, l] = x.dims();
        let x = x.reshape([n, 1, l, 1]); // grouped channels-last, one group, one channel
        let mut h = relu(self.stem.forward(x)); // [n, g, l/2, W/g]
        for b in &self.blocks {
            let t = relu(b.c1.forward(h.clone())); // [n, g, l', cout/g]
            let t = b.c2.forward(t);
            let mut sc = h;
            if b.stride == 2 {
                sc = max_pool2(sc); // [n, g, l', cin/g]
            }
            let sc = pad_channels(sc, b.cout); // [n, g, l', cout/g]
            h = relu(t + sc);
        }
        let [n, g, _, cg] = h.dims();
        self.fc.forward(h.mean_dim(2).reshape([n, g * cg])) // [n, 2]
    }
}
