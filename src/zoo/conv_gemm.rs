//! The fast 1-D convolution of the inference path: a grouped convolution as one batched GEMM
//! over a zero-copy sliding-window view, in a *grouped channels-last* activation layout.
//!
//! Layout: activations are `[batch, groups, length, channels_per_group]`, so channel
//! `g * cg + j` sits at `[_, g, _, j]`. In that layout the `kernel x channels_per_group` input
//! patch of one output position is a contiguous run of the (padded) input, and consecutive
//! positions start `stride * channels_per_group` elements apart. `Tensor::unfold` therefore
//! gives the whole im2col matrix of every `(batch, group)` as a strided *view* (no copy on
//! `flex`), and one broadcast batched `matmul` against the folded weights
//! `[1, groups, kernel * cpg, cout_per_group]` produces the output directly in the same layout,
//! ready for the next convolution of the same group count. The GEMM packs the overlapping
//! windows into cache-sized panels itself, so the full im2col matrix is never written out.
//! The only copy per convolution is the "same" zero padding of its input (input-sized, not
//! `kernel` times larger), done with `cat`.
//!
//! [`fast`](super::fast) builds the network from these pieces; everything is burn tensor ops,
//! so other backends (CUDA) run the same code.

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

/// A convolution with BatchNorm folded in, ready for the grouped channels-last layout.
#[derive(Module, Debug)]
pub struct FoldedConv<B: Backend> {
    /// `[1, groups, kernel * cin_per_group, cout_per_group]`; row `k * cpg + c` holds the
    /// weight of input channel `c` (of the group) at tap `k`.
    weight: Param<Tensor<B, 4>>,
    /// `[1, groups, 1, cout_per_group]`.
    bias: Param<Tensor<B, 4>>,
    kernel: usize,
    stride: usize,
    /// Groups of the output layout (the convolution's own groups, or for a stem with one
    /// input channel the groups of the layer it feeds).
    groups: usize,
    cin_per_group: usize,
}

/// Host-side folded weights of one convolution, before they become a [`FoldedConv`].
#[derive(Debug, Clone)]
pub struct FoldedWeights {
    /// `[cout, cin / groups, kernel]` row-major, BatchNorm scale applied.
    pub weight: Vec<f32>,
    /// `[cout]`, BatchNorm shift (and any convolution bias) applied.
    pub bias: Vec<f32>,
    pub cin: usize,
    pub cout: usize,
    pub kernel: usize,
    pub stride: usize,
    pub groups: usize,
}

/// "Same" padding as burn's `PaddingConfig1d::Same` and ONNX `SAME_UPPER`: output length
/// `ceil(len / stride)`, the odd sample of padding at the end. Returns `(l_out, begin, end)`.
pub fn same_padding(len: usize, kernel: usize, stride: usize) -> (usize, usize, usize) {
    let l_out = len.div_ceil(stride);
    let total = ((l_out.max(1) - 1) * stride + kernel).saturating_sub(len);
    (l_out, total / 2, total - total / 2)
}

impl<B: Backend> FoldedConv<B> {
    /// Builds the layer; `out_groups` is the group count of the activation layout, which may
    /// be coarser than the convolution's own groups: `r = groups / out_groups` neighbouring
    /// groups are merged into one with a block-diagonal weight (`r` times the multiply-adds,
    /// but GEMMs `r` times wider, which pays while the groups are a few channels wide). A
    /// dense convolution (`groups == 1`) may write any `out_groups` dividing `cout`: its input
    /// (one group) is shared by all output groups, as for the stem.
    pub fn new(w: &FoldedWeights, out_groups: usize, device: &B::Device) -> Self {
        assert!(
            (w.groups == 1 && w.cout.is_multiple_of(out_groups))
                || (out_groups > 0 && w.groups.is_multiple_of(out_groups)),
            "layout groups {out_groups} do not fit a convolution of {} groups",
            w.groups
        );
        let k = w.kernel;
        let cpg = w.cin / w.groups; // the convolution's own channels per group
        let cog = w.cout / w.groups;
        let in_groups = if w.groups == 1 { 1 } else { out_groups };
        let cpg_l = w.cin / in_groups; // per layout group
        let cog_l = w.cout / out_groups;
        // [cout, cpg, k] -> [out_groups, k * cpg_l, cog_l], zero between merged groups
        let mut t = vec![0.0f32; out_groups * k * cpg_l * cog_l];
        for co in 0..w.cout {
            let (sg, o) = (co / cog_l, co % cog_l); // layout group and column
            let first_in = (co / cog) * cpg; // the convolution's first input channel of co
            let base = if in_groups == 1 { 0 } else { sg * cpg_l };
            for c in 0..cpg {
                let cl = first_in + c - base;
                for tap in 0..k {
                    t[(sg * k * cpg_l + tap * cpg_l + cl) * cog_l + o] =
                        w.weight[(co * cpg + c) * k + tap];
                }
            }
        }
        FoldedConv {
            weight: Param::from_tensor(
                Tensor::<B, 1>::from_floats(t.as_slice(), device)
                    .reshape([1, out_groups, k * cpg_l, cog_l]),
            ),
            bias: Param::from_tensor(
                Tensor::<B, 1>::from_floats(w.bias.as_slice(), device)
                    .reshape([1, out_groups, 1, cog_l]),
            ),
            kernel: k,
            stride: w.stride,
            groups: out_groups,
            cin_per_group: cpg_l,
        }
    }

    /// # Shapes
    /// - x: `[batch, in_groups, len, cin_per_group]` (grouped channels-last); `in_groups` is
    ///   the layer's groups, or 1 for a dense convolution (its input is shared by all groups)
    /// - returns: `[batch, groups, len_out, cout_per_group]`, bias added, no activation
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [n, gi, len, cpg] = x.dims();
        debug_assert_eq!(cpg, self.cin_per_group);
        let (_, begin, end) = same_padding(len, self.kernel, self.stride);
        let x = pad_length(x, begin, end); // [n, gi, lp, cpg]
        let lp = x.dims()[2];
        let patches: Tensor<B, 4> = x
            .reshape([n, gi, lp * cpg])
            .unfold(2, self.kernel * cpg, self.stride * cpg); // [n, gi, l_out, k * cpg] (view)
        let y = patches.matmul(self.weight.val()); // [n, groups, l_out, cog]
        let [_, g, l_out, cog] = y.dims();
        debug_assert_eq!(g, self.groups);
        // The bias as one row per window: flex adds a shared row with SIMD, while the
        // [1, g, 1, cog] broadcast would take its generic strided path (~40x slower).
        let bias = self.bias.val().repeat_dim(2, l_out).reshape([1, g * l_out * cog]);
        (y.reshape([n, g * l_out * cog]) + bias).reshape([n, g, l_out, cog])
    }
}

/// Zero-pads the length axis of a grouped channels-last tensor.
///
/// # Shapes
/// - x: `[batch, groups, len, cg]`
/// - returns: `[batch, groups, begin + len + end, cg]`
pub fn pad_length<B: Backend>(x: Tensor<B, 4>, begin: usize, end: usize) -> Tensor<B, 4> {
    if begin == 0 && end == 0 {
        return x;
    }
    let [n, g, _, c] = x.dims();
    let device = x.device();
    let mut parts = Vec::with_capacity(3);
    if begin > 0 {
        parts.push(Tensor::zeros([n, g, begin, c], &device));
    }
    parts.push(x);
    if end > 0 {
        parts.push(Tensor::zeros([n, g, end, c], &device));
    }
    Tensor::cat(parts, 2)
}

/// Max-pool with kernel 2, stride 2 and `ceil_mode` (an odd last sample is its own window),
/// along the length axis: the training-time shortcut without argmax indices.
///
/// # Shapes
/// - x: `[batch, groups, len, cg]`
/// - returns: `[batch, groups, ceil(len / 2), cg]`
pub fn max_pool2<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, g, l, c] = x.dims();
    let x = if l % 2 == 1 {
        let last = x.clone().narrow(2, l - 1, 1);
        Tensor::cat(vec![x, last], 2)
    } else {
        x
    };
    let half = l.div_ceil(2);
    // Reductions over a short axis are fast on flex; element-wise ops on strided views are not.
    if c == 1 {
        x.reshape([n, g, half, 2]).max_dim(3) // [n, g, half, 1]
    } else {
        x.reshape([n * g * half, 2, c])
            .max_dim(1)
            .reshape([n, g, half, c])
    }
}

/// Appends zero channels (at the end of the channel order) to a grouped channels-last tensor
/// of `groups` groups, returning the same group count with `cout / groups` channels per group.
///
/// # Shapes
/// - x: `[batch, groups, len, cin / groups]`
/// - returns: `[batch, groups, len, cout / groups]`
pub fn pad_channels<B: Backend>(x: Tensor<B, 4>, cout: usize) -> Tensor<B, 4> {
    let [n, g, l, cg] = x.dims();
    let cin = g * cg;
    if cout == cin {
        return x;
    }
    assert!(cout > cin && cout.is_multiple_of(g), "cannot pad {cin} channels to {cout}");
    let device = x.device();
    let cg_out = cout / g;
    if g == 1 {
        return Tensor::cat(vec![x, Tensor::zeros([n, 1, l, cout - cin], &device)], 3);
    }
    if cg_out.is_multiple_of(cg) && g.is_multiple_of(cg_out / cg) {
        // r old groups make one new group; the data fills the first g / r new groups.
        let r = cg_out / cg;
        let data = x
            .reshape([n, g / r, r, l, cg])
            .swap_dims(2, 3)
            .reshape([n, g / r, l, cg_out]);
        let zeros = Tensor::zeros([n, g - g / r, l, cg_out], &device);
        return Tensor::cat(vec![data, zeros], 1);
    }
    let ncl = to_channels_first(x);
    let ncl = Tensor::cat(vec![ncl, Tensor::zeros([n, cout - cin, l], &device)], 1);
    to_grouped(ncl, g)
}

/// `[batch, channels, len]` to the grouped channels-last layout with `groups` groups.
pub fn to_grouped<B: Backend>(x: Tensor<B, 3>, groups: usize) -> Tensor<B, 4> {
    let [n, c, l] = x.dims();
    x.reshape([n, groups, c / groups, l]).swap_dims(2, 3)
}

/// The grouped channels-last layout back to `[batch, channels, len]`.
pub fn to_channels_first<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 3> {
    let [n, g, l, cg] = x.dims();
    x.swap_dims(2, 3).reshape([n, g * cg, l])
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::nn::PaddingConfig1d;
    use burn::nn::conv::Conv1dConfig;
    use burn::tensor::Distribution;
    use burn::tensor::module::max_pool1d;

    type B = Flex;

    fn max_abs_diff(a: Tensor<B, 3>, b: Tensor<B, 3>) -> f32 {
        assert_eq!(a.dims(), b.dims());
        (a - b).abs().max().into_scalar()
    }

    /// The GEMM convolution against burn's `Conv1d` with "same" padding, for grouped,
    /// strided, odd-length and dense cases.
    #[test]
    fn matches_burn_conv1d() {
        let dev = Default::default();
        for &(cin, cout, groups, stride, len) in &[
            (8, 8, 2, 2, 31),
            (8, 16, 2, 1, 40),
            (16, 16, 4, 1, 17),
            (1, 8, 1, 2, 75),
            (6, 12, 1, 2, 33),
        ] {
            let conv = Conv1dConfig::new(cin, cout, 16)
                .with_stride(stride)
                .with_groups(groups)
                .with_padding(PaddingConfig1d::Same)
                .init::<B>(&dev);
            let x = Tensor::<B, 3>::random([3, cin, len], Distribution::Normal(0.0, 1.0), &dev);
            let want = conv.forward(x.clone());
            let w = FoldedWeights {
                weight: conv.weight.val().into_data().to_vec().unwrap(),
                bias: conv.bias.as_ref().unwrap().val().into_data().to_vec().unwrap(),
                cin,
                cout,
                kernel: 16,
                stride,
                groups,
            };
            // The convolution's own groups, and merged (block-diagonal) coarser layouts.
            for lg in (1..=groups).filter(|lg| groups % lg == 0) {
                let fc = FoldedConv::<B>::new(&w, lg, &dev);
                let got = to_channels_first(fc.forward(to_grouped(x.clone(), lg)));
                let d = max_abs_diff(got, want.clone());
                assert!(d < 1e-4, "cin {cin} cout {cout} groups {groups}/{lg} stride {stride}: {d}");
            }
        }
    }

    #[test]
    fn dense_stem_writes_the_grouped_layout() {
        let dev = Default::default();
        let conv = Conv1dConfig::new(1, 8, 16)
            .with_stride(2)
            .with_padding(PaddingConfig1d::Same)
            .init::<B>(&dev);
        let x = Tensor::<B, 3>::random([2, 1, 101], Distribution::Normal(0.0, 1.0), &dev);
        let want = conv.forward(x.clone());
        let w = FoldedWeights {
            weight: conv.weight.val().into_data().to_vec().unwrap(),
            bias: conv.bias.as_ref().unwrap().val().into_data().to_vec().unwrap(),
            cin: 1,
            cout: 8,
            kernel: 16,
            stride: 2,
            groups: 1,
        };
        let fc = FoldedConv::<B>::new(&w, 4, &dev);
        let got = to_channels_first(fc.forward(to_grouped(x, 1)));
        assert!(max_abs_diff(got, want) < 1e-4);
    }

    #[test]
    fn shortcut_ops_match_the_training_ops() {
        let dev = Default::default();
        for &(c, g, len, cout) in &[(8, 2, 31, 16), (8, 2, 30, 8), (8, 1, 9, 16), (6, 3, 7, 12)] {
            let x = Tensor::<B, 3>::random([2, c, len], Distribution::Normal(0.0, 1.0), &dev);
            let want = max_pool1d(x.clone(), 2, 2, 0, 1, true);
            let got = to_channels_first(max_pool2(to_grouped(x, g)));
            assert!(max_abs_diff(got, want.clone()) < 1e-7);
            let [n, _, l] = want.dims();
            let want = Tensor::cat(vec![want.clone(), Tensor::zeros([n, cout - c, l], &dev)], 1);
            let got = to_channels_first(pad_channels(to_grouped(want.clone().narrow(1, 0, c), g), cout));
            assert!(max_abs_diff(got, want) < 1e-7);
        }
    }
}
