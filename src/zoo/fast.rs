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
//! Two kernels compute these convolutions ([`Kernel`]): on the flex CPU backend the direct
//! convolutions of [`direct`](super::direct) (host memory, AVX2/FMA, bias, shortcut and ReLU
//! fused), elsewhere (CUDA) the burn-tensor GEMM form above. Both are built from the same folded
//! weights and tested against the plain path.
//!
//! [`model`](super::model) picks this path or the plain burn one ([`InferencePath`]); the
//! plain path stays the reference the tests hold this one to.

use std::sync::Arc;

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use super::conv_gemm::{FoldedConv, FoldedWeights, layout_fits, max_pool2, pad_channels};
use super::direct::DirectNet;

/// Environment variable that selects the serving path: `plain` for burn's own modules,
/// anything else (or unset) for the fast path.
pub(crate) const INFERENCE_PATH_ENV: &str = "HOLMES_INFERENCE";

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
    /// The path a model on backend `B` serves: on flex, the one [`from_env`](Self::from_env)
    /// names; on a GPU backend the plain path, whatever the environment says. cubecl 0.10's
    /// matmul refuses the GEMM form's overlapping `unfold` view (no kernel accepts its
    /// layout), and the panic inside the device's stream poisons every later call on that
    /// device, so the fast path cannot even be tried there (measured on an H100, BENCHMARKS,
    /// "CUDA").
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

/// A residual block in inference form.
#[derive(Module, Debug)]
pub(crate) struct FastBlock<B: Backend> {
    c1: FoldedConv<B>,
    c2: FoldedConv<B>,
    stride: usize,
    cout: usize,
    /// Layout groups of the block's output.
    out_groups: usize,
}

/// The convolutions in the GEMM form: the stem and the residual blocks.
#[derive(Module, Debug)]
pub(crate) struct GemmConvs<B: Backend> {
    stem: FoldedConv<B>,
    blocks: Vec<FastBlock<B>>,
}

/// A ResNeXt-1D in inference form. Its convolutions are in exactly one of two forms, as
/// [`Kernel`] chose: `gemm` (burn tensors, any backend) or `direct` (host memory, flex).
#[derive(Module, Debug)]
pub(crate) struct FastResNeXt1d<B: Backend> {
    gemm: Option<GemmConvs<B>>,
    fc: Linear<B>,
    #[module(skip)]
    direct: Option<Arc<DirectNet>>,
}

/// Environment variable that selects the fast path's convolution kernel on flex: `gemm`, or
/// anything else (or unset) for direct; for measuring with `holmes bench-cpu`.
pub(crate) const FAST_KERNEL_ENV: &str = "HOLMES_FAST_KERNEL";

/// Which convolution the fast path runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// One batched GEMM per convolution in the grouped channels-last layout
    /// (`zoo/conv_gemm.rs`); any backend.
    Gemm,
    /// Direct convolution on host memory (`zoo/direct.rs`); flex only.
    Direct,
}

impl Kernel {
    /// The direct kernel on the flex backend (measured faster than the GEMM form for every
    /// zoo model at batch 8, see BENCHMARKS.md), unless `HOLMES_FAST_KERNEL=gemm`; GEMM on
    /// every other backend.
    pub(crate) fn choose<B: Backend>() -> Kernel {
        if on_host::<B>() {
            Kernel::on_flex()
        } else {
            Kernel::Gemm
        }
    }

    /// The kernel the flex backend runs: direct unless `HOLMES_FAST_KERNEL=gemm`.
    pub(crate) fn on_flex() -> Kernel {
        match std::env::var(FAST_KERNEL_ENV).as_deref() {
            Ok("gemm") => Kernel::Gemm,
            _ => Kernel::Direct,
        }
    }
}

/// Whether `B` computes on host memory (flex), where the direct kernel can read tensors
/// without a transfer.
pub(crate) fn on_host<B: Backend>() -> bool {
    std::any::TypeId::of::<B>() == std::any::TypeId::of::<burn::backend::Flex>()
}

/// One residual block's folded convolutions, as [`FastResNeXt1d::with_kernel`] takes them.
#[derive(Debug, Clone)]
pub(crate) struct FoldedBlock {
    pub(crate) c1: FoldedWeights,
    pub(crate) c2: FoldedWeights,
}

/// Channels per layout group tried, in order of preference, for a layout whose group count
/// grows with the channels (see [`plan_layout`]).
pub(crate) const LAYOUT_CHANNELS: [usize; 4] = [8, 16, 4, 32];

/// Narrowest GEMM (output channels per layout group) worth running in a layout of constant
/// group count; narrower groups are merged.
pub(crate) const MIN_GROUP_COLUMNS: usize = 4;

/// Layout group counts: after the stem, then `(input, output)` of each block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LayoutPlan {
    pub(crate) stem: usize,
    pub(crate) blocks: Vec<(usize, usize)>,
}

/// Chooses the activation layout. Preferred: a constant number of channels per layout group
/// (one of [`LAYOUT_CHANNELS`]), so widening a block appends whole zero groups to the shortcut
/// and every GEMM is equally wide; neighbouring groups share block-diagonal weights where the
/// network's groups are narrower. Otherwise a constant group count (the network's groups,
/// merged while they write fewer than [`MIN_GROUP_COLUMNS`] channels), which needs a
/// regrouping copy where a block widens.
///
/// `HOLMES_FAST_LAYOUT_CHANNELS` (comma-separated) overrides the preference list, for
/// measuring other layouts with `holmes bench-cpu`.
pub(crate) fn plan_layout(stem: &FoldedWeights, blocks: &[FoldedBlock]) -> LayoutPlan {
    let prefs: Vec<usize> = std::env::var("HOLMES_FAST_LAYOUT_CHANNELS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| LAYOUT_CHANNELS.to_vec());
    for c in prefs.into_iter().filter(|&c| c > 0) {
        let groups = |ch: usize| ch / c;
        let fits = stem.cout.is_multiple_of(c)
            && layout_fits(stem, 1, groups(stem.cout))
            && blocks.iter().all(|b| {
                b.c1.cin.is_multiple_of(c)
                    && b.c1.cout.is_multiple_of(c)
                    && layout_fits(&b.c1, groups(b.c1.cin), groups(b.c1.cout))
                    && layout_fits(&b.c2, groups(b.c2.cin), groups(b.c2.cout))
            });
        if fits {
            return LayoutPlan {
                stem: groups(stem.cout),
                blocks: blocks
                    .iter()
                    .map(|b| (groups(b.c1.cin), groups(b.c1.cout)))
                    .collect(),
            };
        }
    }
    let g = constant_groups(stem, blocks);
    LayoutPlan {
        stem: g,
        blocks: vec![(g, g); blocks.len()],
    }
}

/// The network's groups, merged until the narrowest convolution writes at least
/// [`MIN_GROUP_COLUMNS`] channels per group (1 when the blocks' groups differ).
fn constant_groups(stem: &FoldedWeights, blocks: &[FoldedBlock]) -> usize {
    let Some(first) = blocks.first() else {
        return 1;
    };
    let groups = first.c1.groups;
    if blocks
        .iter()
        .any(|b| b.c1.groups != groups || b.c2.groups != groups)
    {
        return 1;
    }
    let narrowest = blocks
        .iter()
        .flat_map(|b| [&b.c1, &b.c2])
        .map(|c| c.cout / groups)
        .chain([stem.cout / groups])
        .min()
        .unwrap_or(1)
        .max(1);
    let mut g = groups;
    while g % 2 == 0 && (groups / g) * narrowest < MIN_GROUP_COLUMNS {
        g /= 2;
    }
    g
}

impl<B: Backend> FastResNeXt1d<B> {
    /// Builds the inference form from folded weights and the final linear layer, with the
    /// given kernel ([`Kernel::Direct`] only takes effect on flex; elsewhere it is
    /// [`Kernel::Gemm`]).
    pub(crate) fn with_kernel(
        stem: &FoldedWeights,
        blocks: &[FoldedBlock],
        fc: Linear<B>,
        device: &B::Device,
        kernel: Kernel,
    ) -> Self {
        let direct = kernel == Kernel::Direct && on_host::<B>();
        FastResNeXt1d {
            gemm: (!direct).then(|| GemmConvs::new(stem, blocks, device)),
            fc,
            direct: direct.then(|| Arc::new(DirectNet::new(stem, blocks))),
        }
    }

    /// # Shapes
    /// - x: `[batch, 1, samples]` normalised ECG
    /// - returns: `[batch, 2]` logits, equal (to float rounding) to the training form's
    pub(crate) fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        let features = match (&self.direct, &self.gemm) {
            (Some(direct), _) => direct_features(direct, x),
            (None, Some(gemm)) => gemm.features(x),
            (None, None) => unreachable!("with_kernel builds one form"),
        };
        self.fc.forward(features) // [n, 2]
    }

    /// The kernel this model's convolutions run.
    pub(crate) fn kernel(&self) -> Kernel {
        if self.direct.is_some() {
            Kernel::Direct
        } else {
            Kernel::Gemm
        }
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

impl<B: Backend> GemmConvs<B> {
    fn new(stem: &FoldedWeights, blocks: &[FoldedBlock], device: &B::Device) -> Self {
        let plan = plan_layout(stem, blocks);
        GemmConvs {
            stem: FoldedConv::new(stem, 1, plan.stem, device),
            blocks: blocks
                .iter()
                .zip(&plan.blocks)
                .map(|(b, &(gi, go))| FastBlock {
                    c1: FoldedConv::new(&b.c1, gi, go, device),
                    c2: FoldedConv::new(&b.c2, go, go, device),
                    stride: b.c1.stride,
                    cout: b.c1.cout,
                    out_groups: go,
                })
                .collect(),
        }
    }

    /// # Shapes
    /// - x: `[batch, 1, samples]`
    /// - returns: `[batch, channels]`, the mean over the length of the last block's output
    fn features(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        let [n, _, l] = x.dims();
        let x = x.reshape([n, 1, l, 1]); // grouped channels-last, one group, one channel
        let mut h = relu(self.stem.forward(x)); // [n, g, l/2, W/g] (g: layout groups)
        for b in &self.blocks {
            let t = relu(b.c1.forward(h.clone())); // [n, g', l', cout/g']
            let t = b.c2.forward(t);
            let mut sc = h;
            if b.stride == 2 {
                sc = max_pool2(sc); // [n, g, l', cin/g]
            }
            let sc = pad_channels(sc, b.cout, b.out_groups); // [n, g', l', cout/g']
            h = relu(t + sc);
        }
        let [n, g, _, cg] = h.dims();
        h.mean_dim(2).reshape([n, g * cg])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo::ResNeXtArch;

    fn folded(arch: ResNeXtArch) -> (FoldedWeights, Vec<FoldedBlock>) {
        let (stem, blocks) = arch.plan(7500);
        let w = |c: &crate::zoo::ConvShape| FoldedWeights {
            weight: vec![0.0; c.cout * c.cin / c.groups * arch.kernel],
            bias: vec![0.0; c.cout],
            cin: c.cin,
            cout: c.cout,
            kernel: arch.kernel,
            stride: c.stride,
            groups: c.groups,
        };
        let blocks = blocks
            .iter()
            .map(|(c1, c2)| FoldedBlock {
                c1: w(c1),
                c2: w(c2),
            })
            .collect();
        (w(&stem), blocks)
    }

    /// Both kernels against the plain path for the yardstick's thinnest network (W=32 D=4:
    /// 32 groups of 1, 2 and 4 channels) and a dense one, at batch sizes that take each way
    /// of splitting the work (one thread, layers split, one sample per thread).
    #[test]
    fn both_kernels_match_the_plain_path() {
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
                let want: Vec<f32> = m.forward(x.clone()).into_data().to_vec().unwrap();
                for kernel in [Kernel::Direct, Kernel::Gemm] {
                    let fast = m.inference_form_with(kernel);
                    assert_eq!(fast.kernel(), kernel);
                    let got: Vec<f32> = fast.forward(x.clone()).into_data().to_vec().unwrap();
                    let diff = crate::core::stats::max_abs_diff(&want, &got);
                    assert!(
                        diff < 1e-4,
                        "W{width} g{group_width} batch {batch} {kernel:?}: {diff}"
                    );
                }
            }
        }
    }

    #[test]
    fn layouts_widen_with_the_channels_where_the_groups_allow() {
        // The yardstick's W=32 D=4: 32 groups of 1 to 4 channels, 8 channels per layout group.
        let (stem, blocks) = folded(ResNeXtArch {
            width: 32,
            depth: 4,
            group_width: 1,
            kernel: 16,
        });
        let plan = plan_layout(&stem, &blocks);
        assert_eq!(plan.stem, 4);
        assert_eq!(plan.blocks, vec![(4, 4), (4, 8), (8, 16), (16, 16)]);
        // Zoo w16-d8: groups of 4, 8 and 16 channels need 16 per layout group.
        let (stem, blocks) = folded(ResNeXtArch {
            width: 16,
            depth: 8,
            group_width: 4,
            kernel: 16,
        });
        let plan = plan_layout(&stem, &blocks);
        assert_eq!(plan.stem, 1);
        assert_eq!(plan.blocks.last(), Some(&(4, 4)));
        // Zoo w8-d8: 16-channel groups do not fit an 8-wide stem: constant group count.
        let (stem, blocks) = folded(ResNeXtArch {
            width: 8,
            depth: 8,
            group_width: 4,
            kernel: 16,
        });
        let plan = plan_layout(&stem, &blocks);
        assert!(
            plan.blocks
                .iter()
                .all(|&(i, o)| i == plan.stem && o == plan.stem)
        );
    }
}
