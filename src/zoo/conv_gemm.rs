//! The fast 1-D convolution of the inference path: a grouped convolution as one batched GEMM
//! over a zero-copy sliding-window view, in a *grouped channels-last* activation layout.
//!
//! Layout: activations are `[batch, groups, length, channels_per_group]`, so channel
//! `g * cg + j` sits at `[_, g, _, j]`. In that layout the `kernel x channels_per_group` input
//! patch of one output position is a contiguous run of the (padded) input, and consecutive
//! positions start `stride * channels_per_group` elements apart. `Tensor::unfold` therefore
//! gives the whole im2col matrix of every `(batch, group)` as a strided *view* (no copy on
//! `flex`), and one broadcast batched `matmul` against the folded weights produces the output
//! directly in the grouped layout the next convolution reads. The GEMM packs the overlapping
//! windows into cache-sized panels itself, so the full im2col matrix is never written out.
//! The only copy per convolution is the "same" zero padding of its input (input-sized, not
//! `kernel` times larger), done with `cat`; the bias add and activation are one SIMD pass each.
//!
//! Layout groups need not be the network's groups (see [`layout_fits`]): narrow groups are
//! merged into block-diagonal weights, and a layer may write more layout groups than it reads.
//!
//! Shaped by what is fast on `flex` (measured, see docs/EXPERIMENTS.md, 2026-11-21): strided GEMM operands,
//! contiguous `cat`, whole-row `select` and same-shape or shared-row element-wise ops are;
//! element-wise ops on strided views, broadcasts over middle axes and copies of permuted
//! views go through a generic per-element path one to two orders of magnitude slower.
//!
//! [`fast`](super::fast) builds the network from these pieces; everything is burn tensor ops,
//! so other backends (CUDA) run the same code.

use burn::module::{Module, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// A convolution with BatchNorm folded in, ready for the grouped channels-last layout.
#[derive(Module, Debug)]
pub(crate) struct FoldedConv<B: Backend> {
    /// `[1, in_groups, out_groups / in_groups, kernel * cin_per_group, cout_per_group]` (per
    /// layout group); row `k * cin_per_group + c` holds the weight of the group's input
    /// channel `c` at tap `k`, zero where merged groups do not connect.
    weight: Param<Tensor<B, 5>>,
    /// `[1, out_groups, 1, cout_per_group]`.
    bias: Param<Tensor<B, 4>>,
    kernel: usize,
    stride: usize,
    /// Groups of the output layout.
    groups: usize,
    /// Input channels per input layout group.
    cin_per_group: usize,
}

/// Host-side folded weights of one convolution, before they become a [`FoldedConv`].
#[derive(Debug, Clone)]
pub(crate) struct FoldedWeights {
    /// `[cout, cin / groups, kernel]` row-major, BatchNorm scale applied.
    pub(crate) weight: Vec<f32>,
    /// `[cout]`, BatchNorm shift (and any convolution bias) applied.
    pub(crate) bias: Vec<f32>,
    pub(crate) cin: usize,
    pub(crate) cout: usize,
    pub(crate) kernel: usize,
    pub(crate) stride: usize,
    pub(crate) groups: usize,
}

#[cfg(test)]
impl FoldedWeights {
    /// A convolution's own weights and bias (no BatchNorm): how the kernel tests compare a
    /// folded convolution with burn's `Conv1d`.
    pub(crate) fn of_conv<B: Backend>(conv: &burn::nn::conv::Conv1d<B>) -> Self {
        let [cout, cpg, kernel] = conv.weight.dims();
        let host = |t: Tensor<B, 1>| t.into_data().to_vec::<f32>().expect("f32 parameters");
        FoldedWeights {
            weight: host(conv.weight.val().reshape([cout * cpg * kernel])),
            bias: conv
                .bias
                .as_ref()
                .map_or(vec![0.0; cout], |b| host(b.val())),
            cin: cpg * conv.groups,
            cout,
            kernel,
            stride: conv.stride,
            groups: conv.groups,
        }
    }
}

/// "Same" padding as burn's `PaddingConfig1d::Same` and ONNX `SAME_UPPER`: output length
/// `ceil(len / stride)`, the odd sample of padding at the end. Returns `(l_out, begin, end)`.
pub(crate) fn same_padding(len: usize, kernel: usize, stride: usize) -> (usize, usize, usize) {
    let l_out = len.div_ceil(stride);
    let total = ((l_out.max(1) - 1) * stride + kernel).saturating_sub(len);
    (l_out, total / 2, total - total / 2)
}

/// Whether a convolution can read a layout of `in_groups` groups and write one of
/// `out_groups` (a multiple of `in_groups`): every output layout group must take all its
/// inputs from the one input layout group `output group / (out_groups / in_groups)`.
pub(crate) fn layout_fits(w: &FoldedWeights, in_groups: usize, out_groups: usize) -> bool {
    if in_groups == 0
        || out_groups == 0
        || !out_groups.is_multiple_of(in_groups)
        || !w.cin.is_multiple_of(in_groups)
        || !w.cout.is_multiple_of(out_groups)
    {
        return false;
    }
    let (cpg, cog) = (w.cin / w.groups, w.cout / w.groups);
    let (cpg_l, cog_l, m) = (
        w.cin / in_groups,
        w.cout / out_groups,
        out_groups / in_groups,
    );
    (0..w.cout).all(|co| {
        let first_in = (co / cog) * cpg;
        let base = (co / cog_l / m) * cpg_l;
        first_in >= base && first_in + cpg <= base + cpg_l
    })
}

impl<B: Backend> FoldedConv<B> {
    /// Builds the layer between activation layouts of `in_groups` and `out_groups` groups
    /// (see [`layout_fits`]; panics if the layouts do not fit). Layout groups may be coarser
    /// than the convolution's own: neighbouring groups then share one block-diagonal weight
    /// (more multiply-adds, but GEMMs wide enough to run near the machine's speed). With
    /// `out_groups = m * in_groups`, each input group feeds `m` output groups: how the stem
    /// (one input group) and a block that widens the channels write a finer layout.
    pub(crate) fn new(
        w: &FoldedWeights,
        in_groups: usize,
        out_groups: usize,
        device: &B::Device,
    ) -> Self {
        assert!(
            layout_fits(w, in_groups, out_groups),
            "layout groups {in_groups} -> {out_groups} do not fit a convolution of {} groups \
             ({} -> {} channels)",
            w.groups,
            w.cin,
            w.cout
        );
        let k = w.kernel;
        let (cpg, cog) = (w.cin / w.groups, w.cout / w.groups);
        let (cpg_l, cog_l, m) = (
            w.cin / in_groups,
            w.cout / out_groups,
            out_groups / in_groups,
        );
        // [cout, cpg, k] -> [out_groups, k * cpg_l, cog_l], zero between merged groups
        let mut t = vec![0.0f32; out_groups * k * cpg_l * cog_l];
        for co in 0..w.cout {
            let (so, o) = (co / cog_l, co % cog_l); // output layout group and column
            let first_in = (co / cog) * cpg - (so / m) * cpg_l; // within the input layout group
            for c in 0..cpg {
                for tap in 0..k {
                    t[(so * k * cpg_l + tap * cpg_l + first_in + c) * cog_l + o] =
                        w.weight[(co * cpg + c) * k + tap];
                }
            }
        }
        FoldedConv {
            weight: Param::from_tensor(
                Tensor::<B, 1>::from_floats(t.as_slice(), device).reshape([
                    1,
                    in_groups,
                    m,
                    k * cpg_l,
                    cog_l,
                ]),
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
    /// - x: `[batch, in_groups, len, cin / in_groups]` (grouped channels-last)
    /// - returns: `[batch, out_groups, len_out, cout / out_groups]`, bias added, no activation
    pub(crate) fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [n, gi, len, cpg] = x.dims();
        debug_assert_eq!(cpg, self.cin_per_group);
        let (_, begin, end) = same_padding(len, self.kernel, self.stride);
        let x = pad_length(x, begin, end); // [n, gi, lp, cpg]
        let lp = x.dims()[2];
        let patches: Tensor<B, 5> =
            x.reshape([n, gi, 1, lp * cpg])
                .unfold(3, self.kernel * cpg, self.stride * cpg); // [n, gi, 1, l_out, k * cpg] (view)
        let y = patches.matmul(self.weight.val()); // [n, gi, m, l_out, cog]
        let [_, _, m, l_out, cog] = y.dims();
        let g = gi * m;
        debug_assert_eq!(g, self.groups);
        // The bias as one row per window: flex adds a shared row with SIMD, while the
        // [1, g, 1, cog] broadcast would take its generic strided path (~40x slower).
        let bias = self
            .bias
            .val()
            .repeat_dim(2, l_out)
            .reshape([1, g * l_out * cog]);
        (y.reshape([n, g * l_out * cog]) + bias).reshape([n, g, l_out, cog])
    }
}

/// Zero-pads the length axis of a grouped channels-last tensor.
///
/// # Shapes
/// - x: `[batch, groups, len, cg]`
/// - returns: `[batch, groups, begin + len + end, cg]`
pub(crate) fn pad_length<B: Backend>(x: Tensor<B, 4>, begin: usize, end: usize) -> Tensor<B, 4> {
    if begin == 0 && end == 0 {
        return x;
    }
    let [n, g, _, c] = x.dims();
    let device = x.device();
    let mut parts = Vec::with_capacity(3);
    if begin > 0 {
        parts.push(zeros([n, g, begin, c], &device));
    }
    parts.push(x);
    if end > 0 {
        parts.push(zeros([n, g, end, c], &device));
    }
    Tensor::cat(parts, 2)
}

/// Max-pool with kernel 2, stride 2 and `ceil_mode` (an odd last sample is its own window),
/// along the length axis: the training-time shortcut without argmax indices.
///
/// # Shapes
/// - x: `[batch, groups, len, cg]`
/// - returns: `[batch, groups, ceil(len / 2), cg]`
pub(crate) fn max_pool2<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, g, l, c] = x.dims();
    let half = l.div_ceil(2);
    if c == 1 {
        // One channel per group: the pairs are neighbours, a max over a last axis of 2.
        let x = if l % 2 == 1 {
            let last = x.clone().narrow(2, l - 1, 1);
            Tensor::cat(vec![x, last], 2)
        } else {
            x
        };
        return x.reshape([n, g, half, 2]).max_dim(3);
    }
    // Whole rows picked by index are plain copies on flex; element-wise ops on strided views
    // (even/odd narrows) and reductions over a middle axis take its slow generic path.
    let rows = |first: usize| -> Vec<i64> {
        (0..half)
            .map(|i| (2 * i + first).min(l - 1) as i64) // an odd last sample pairs with itself
            .collect()
    };
    let device = x.device();
    let index = |v: Vec<i64>| Tensor::<B, 1, Int>::from_data(TensorData::new(v, [half]), &device);
    let even = x.clone().select(2, index(rows(0)));
    let odd = x.select(2, index(rows(1)));
    even.max_pair(odd)
}

/// A contiguous zero tensor (flex's `Tensor::zeros` is a broadcast view whose copies, in
/// `cat`, take the slow strided path).
fn zeros<B: Backend>(shape: [usize; 4], device: &B::Device) -> Tensor<B, 4> {
    Tensor::from_data(TensorData::zeros::<f32, _>(shape), device)
}

/// Appends zero channels (at the end of the channel order) to a grouped channels-last tensor,
/// giving a layout of `out_groups` groups: whole zero groups when the channels per group stay
/// the same (cheap), otherwise a regrouping copy.
///
/// # Shapes
/// - x: `[batch, groups, len, cin / groups]`
/// - returns: `[batch, out_groups, len, cout / out_groups]`
pub(crate) fn pad_channels<B: Backend>(
    x: Tensor<B, 4>,
    cout: usize,
    out_groups: usize,
) -> Tensor<B, 4> {
    let [n, g, l, cg] = x.dims();
    let cin = g * cg;
    if cout == cin && out_groups == g {
        return x;
    }
    assert!(
        cout > cin && cout.is_multiple_of(g),
        "cannot pad {cin} channels to {cout}"
    );
    let device = x.device();
    if out_groups * cg == cout && out_groups > g {
        // Layouts of constant channels per group: the zero channels are whole zero groups.
        return Tensor::cat(vec![x, zeros([n, out_groups - g, l, cg], &device)], 1);
    }
    if out_groups != g {
        let ncl = to_channels_first(x);
        let ncl = Tensor::cat(vec![ncl, Tensor::zeros([n, cout - cin, l], &device)], 1);
        return to_grouped(ncl, out_groups);
    }
    let cg_out = cout / g;
    if g == 1 {
        return Tensor::cat(vec![x, zeros([n, 1, l, cout - cin], &device)], 3);
    }
    if cg_out.is_multiple_of(cg) && g.is_multiple_of(cg_out / cg) {
        // r old groups make one new group; the data fills the first g / r new groups.
        let r = cg_out / cg;
        let data = x
            .reshape([n, g / r, r, l, cg])
            .swap_dims(2, 3)
            .reshape([n, g / r, l, cg_out]);
        return Tensor::cat(vec![data, zeros([n, g - g / r, l, cg_out], &device)], 1);
    }
    let ncl = to_channels_first(x);
    let ncl = Tensor::cat(vec![ncl, Tensor::zeros([n, cout - cin, l], &device)], 1);
    to_grouped(ncl, g)
}

/// `[batch, channels, len]` to the grouped channels-last layout with `groups` groups.
pub(crate) fn to_grouped<B: Backend>(x: Tensor<B, 3>, groups: usize) -> Tensor<B, 4> {
    let [n, c, l] = x.dims();
    x.reshape([n, groups, c / groups, l]).swap_dims(2, 3)
}

/// The grouped channels-last layout back to `[batch, channels, len]`.
pub(crate) fn to_channels_first<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 3> {
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
            let w = FoldedWeights::of_conv(&conv);
            // The convolution's own groups, and merged (block-diagonal) coarser layouts.
            // and layouts that widen with the channels (constant channels per layout group).
            let mut layouts: Vec<(usize, usize)> = (1..=groups)
                .filter(|lg| groups % lg == 0)
                .map(|lg| (lg, lg))
                .collect();
            layouts.extend(
                (1..=cin)
                    .filter(|c| cin % c == 0)
                    .map(|c| (cin / c, cout / c)),
            );
            let mut tried = 0;
            for (gi, go) in layouts {
                if !layout_fits(&w, gi, go) {
                    continue;
                }
                tried += 1;
                let fc = FoldedConv::<B>::new(&w, gi, go, &dev);
                let got = to_channels_first(fc.forward(to_grouped(x.clone(), gi)));
                let d = max_abs_diff(got, want.clone());
                assert!(
                    d < 1e-4,
                    "{cin}->{cout} groups {groups} layout {gi}->{go} stride {stride}: {d}"
                );
            }
            assert!(tried >= 1);
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
        let w = FoldedWeights::of_conv(&conv);
        let fc = FoldedConv::<B>::new(&w, 1, 4, &dev);
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
            let got = to_channels_first(pad_channels(
                to_grouped(want.clone().narrow(1, 0, c), g),
                cout,
                g,
            ));
            assert!(max_abs_diff(got, want.clone()) < 1e-7);
            // Constant channels per group: more groups.
            let got = to_channels_first(pad_channels(
                to_grouped(want.clone().narrow(1, 0, c), g),
                cout,
                g * cout / c,
            ));
            assert!(max_abs_diff(got, want) < 1e-7);
        }
    }
}
