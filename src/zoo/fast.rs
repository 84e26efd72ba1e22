//! The inference form of a ResNeXt-1D: what serving runs on the CPU, built from the trained
//! [`ResNeXt1d`](super::resnext::ResNeXt1d) record.
//!
//! Differences from the training form, none of which change the function it computes:
//! - BatchNorm (running statistics) is folded into the preceding convolution's weights and a
//!   bias ([`folded`](super::folded));
//! - every convolution is a direct convolution on host memory ([`direct`](super::direct):
//!   AVX2/FMA where the CPU has them, "same" padding, bias, the residual shortcut with its
//!   max-pool and the ReLU fused into its store);
//! - the mean over the length and the final linear layer are the training form's.
//!
//! [`model`](super::model) picks this path or the plain burn one ([`InferencePath`]); the
//! plain path stays the reference the tests hold this one to, and the only path a GPU runs.

use std::sync::Arc;

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use super::direct::DirectNet;
use super::folded::{FoldedBlock, FoldedWeights};

/// Environment variable that selects the serving path: `plain` for burn's own modules,
/// anything else (or unset) for the fast path.
pub(crate) const INFERENCE_PATH_ENV: &str = "HOLMES_INFERENCE";

/// Which forward pass a zoo model runs for predictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InferencePath {
    /// The inference form of this module: BatchNorm folded, the direct convolutions.
    #[default]
    Fast,
    /// The training-form burn modules (`Conv1d`, `BatchNorm`, `max_pool1d`): the reference.
    Plain,
}

impl InferencePath {
    /// The path a model on backend `B` serves: on flex, the one [`from_env`](Self::from_env)
    /// names; on a GPU backend the plain path, whatever the environment says: the direct
    /// kernels read host memory. (A GEMM form built of burn tensors, which could have run on
    /// a GPU, was refused by cubecl 0.10's matmul on an H100 and retired on 2026-11-27:
    /// lab notebook.)
    pub(crate) fn for_backend<B: Backend>() -> InferencePath {
        if on_host::<B>() {
            InferencePath::from_env()
        } else {
            InferencePath::Plain
        }
    }

    /// The path named by `HOLMES_INFERENCE` (`plain` or `fast`; fast when unset).
    pub(crate) fn from_env() -> InferencePath {
        match std::env::var(INFERENCE_PATH_ENV) {
            Ok(v) if v.eq_ignore_ascii_case("plain") => InferencePath::Plain,
            _ => InferencePath::Fast,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            InferencePath::Fast => "fast",
            InferencePath::Plain => "plain",
        }
    }
}

/// Whether `B` computes on host memory (flex), where the direct kernel can read tensors
/// without a transfer.
pub(crate) fn on_host<B: Backend>() -> bool {
    std::any::TypeId::of::<B>() == std::any::TypeId::of::<burn::backend::Flex>()
}

/// A ResNeXt-1D in inference form: the direct convolutions' features, then the linear layer.
#[derive(Module, Debug)]
pub(crate) struct FastResNeXt1d<B: Backend> {
    fc: Linear<B>,
    #[module(skip)]
    direct: Arc<DirectNet>,
}

impl<B: Backend> FastResNeXt1d<B> {
    /// Builds the inference form from folded weights and the final linear layer.
    pub(crate) fn new(stem: &FoldedWeights, blocks: &[FoldedBlock], fc: Linear<B>) -> Self {
        FastResNeXt1d {
            fc,
            direct: Arc::new(DirectNet::new(stem, blocks)),
        }
    }

    /// # Shapes
    /// - x: `[batch, 1, samples]` normalised ECG
    /// - returns: `[batch, 2]` logits, equal (to float rounding) to the training form's
    pub(crate) fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        self.fc.forward(direct_features(&self.direct, x)) // [n, 2]
    }
}

/// The direct convolutions' pooled features (flex: the tensor data is host memory, taken
/// without a copy when the tensor is contiguous and not shared).
///
/// # Shapes
/// - x: `[batch, 1, samples]`
/// - returns: `[batch, channels]`
fn direct_features<B: Backend>(direct: &DirectNet, x: Tensor<B, 3>) -> Tensor<B, 2> {
    let [n, _, _] = x.dims();
    let device = x.device();
    let samples: Vec<f32> = x
        .into_data()
        .convert::<f32>()
        .into_vec()
        .expect("f32 input");
    let features = direct.features(&samples, n);
    let c = features.len() / n.max(1);
    Tensor::from_data(TensorData::new(features, [n, c]), &device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo::ResNeXtArch;

    /// The direct kernels against the plain path for the yardstick's thinnest network (W=32
    /// D=4: 32 groups of 1, 2 and 4 channels) and a dense one, at batch sizes that take each
    /// way of splitting the work (one thread, layers split, one sample per thread).
    #[test]
    fn the_inference_form_matches_the_plain_path() {
        use burn::backend::Flex;
        use burn::tensor::Distribution;
        let dev = Default::default();
        for (width, group_width) in [(32, 1), (8, 8)] {
            let arch = ResNeXtArch {
                width,
                depth: 4,
                group_width,
                kernel: 16,
            };
            let m = arch.init::<Flex>(&dev);
            for batch in [1, 3, 4] {
                let x = Tensor::<Flex, 3>::random(
                    [batch, 1, 7500],
                    Distribution::Normal(0.0, 1.0),
                    &dev,
                );
                // The plain pass first: burn initialises a fresh module's parameters lazily, and
                // a linear layer cloned before that would draw its own.
                let want: Vec<f32> = m.forward(x.clone()).into_data().to_vec().unwrap();
                let got: Vec<f32> = m.inference_form().forward(x).into_data().to_vec().unwrap();
                let diff = crate::core::stats::max_abs_diff(&want, &got);
                assert!(diff < 1e-4, "W{width} g{group_width} batch {batch}: {diff}");
            }
        }
    }
}
