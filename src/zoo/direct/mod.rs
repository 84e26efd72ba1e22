//! Direct 1-D convolution on the host CPU: channels-first rows, vectorised along the length,
//! every multiply-add one the network needs. What the fast path runs on flex.
//!
//! A grouped convolution as one batched GEMM (the form this replaced, retired 2026-11-27: lab
//! notebook) is fast when every group writes 8 or more channels; with 1 to 4 channels per
//! group (the yardstick's W=32 D=4 has 32 groups of 1, 2 and 4) the GEMM is a sliver, and
//! merging groups into block-diagonal weights multiplies the work by 2 to 8. Here instead each
//! output row is `sum over (input channel, tap) of weight * shifted input row`, computed for a
//! tile of positions at once: the position tile is the SIMD axis, several output channels of a
//! group share each loaded input vector, and the accumulators stay in registers. A stride-2
//! input is split once into its even and odd samples, so every load is a contiguous run.
//! Measured, this beat the GEMM form on every zoo model, dense groups included (lab notebook, 2026-11-21).
//!
//! Fused into the convolution's store: the folded bias, the residual shortcut (the block input
//! max-pooled by 2, zero channels appended) and the ReLU. The layout is plain
//! `[batch, channels, length]`, so the network needs no layout changes between layers.
//!
//! The inner loop reads weights and inputs through pointers whose bounds are checked once
//! per block of rows; the weights are stored in the order it reads them (each kernel's taps by
//! stride phase). A layer's padded input, pooled shortcut and output come from a few buffers
//! each thread reuses, written whole (only a padded row's padding is zeroed).
//!
//! Work on rayon's pool ([`DirectNet::features`]): one window per thread when the batch has
//! enough of them (activations stay in that core's cache), else each layer split by output
//! rows, else (tiny batches) the calling thread alone. Each task runs compiled for AVX2 and FMA
//! where the CPU has them (detected at run time), with AVX-512VL's 32 vector registers (more
//! accumulators a pass) where it has those too, else a portable loop.
//!
//! This reads host memory, so [`fast`](super::fast) serves it only on the flex CPU backend; a
//! GPU runs the plain path.

use std::borrow::Cow;

use rayon::prelude::*;

mod job;

use super::folded::{FoldedBlock, FoldedWeights, same_padding};
use job::{Job, MAX_SPAN};

/// A convolution with BatchNorm folded in, in the form the direct kernel reads.
#[derive(Debug, Clone)]
pub(crate) struct DirectConv {
    /// `[cout][cin_per_group][kernel]`, each kernel's taps reordered by stride phase (phase
    /// 0's taps `0, s, 2s, ..`, then phase 1's `1, s + 1, ..`): the order a pass reads them.
    weight: Vec<f32>,
    /// Per stride phase: where its taps start in a kernel's reordered taps, and how many.
    phase_taps: Vec<(usize, usize)>,
    bias: Vec<f32>,
    cin: usize,
    cout: usize,
    kernel: usize,
    stride: usize,
    /// Input channels per group.
    cpg: usize,
    /// Output channels per group.
    cog: usize,
    /// The widest instruction set the kernel may use (tests narrow it to check the forms
    /// other CPUs run).
    widest: Isa,
}

/// The kernel's instruction sets, narrowest first; each is used only where the CPU has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Isa {
    /// Plain Rust loops (vectorised as the compiler's baseline target allows): what a CPU
    /// without AVX2 and FMA runs, reached by name only in tests.
    #[cfg_attr(not(test), allow(dead_code))]
    Portable,
    /// AVX2 and FMA intrinsics, in the 16 vector registers.
    Avx2,
    /// The same intrinsics given AVX-512VL's 32 vector registers and larger passes.
    Avx512,
}

/// What a convolution's store adds before its ReLU: the residual block's shortcut.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shortcut<'a> {
    /// The block input, `[batch][channels][len]`.
    pub(crate) x: &'a [f32],
    pub(crate) channels: usize,
    pub(crate) len: usize,
    /// 2: max-pool by 2 (`ceil_mode`), 1: as is.
    pub(crate) stride: usize,
}

/// Multiply-adds of a whole batch below which it runs on the calling thread alone.
const MIN_SPLIT_MACS: usize = 12_000_000;

/// Floats below which the input copies of a layer run on the calling thread.
const MIN_SPLIT_COPY: usize = 1 << 18;

/// Multiply-adds below which a rayon task is not worth its scheduling.
const MIN_TASK_MACS: usize = 1 << 15;

impl DirectConv {
    pub(crate) fn new(w: &FoldedWeights) -> Self {
        let (k, s) = (w.kernel, w.stride.max(1));
        assert!(
            k >= 1
                && w.groups >= 1
                && w.cin.is_multiple_of(w.groups)
                && w.cout.is_multiple_of(w.groups)
                && w.weight.len() == w.cout * (w.cin / w.groups) * k
                && w.bias.len() == w.cout,
            "a convolution's folded weights of inconsistent shape"
        );
        let mut phase_taps = Vec::with_capacity(s);
        let mut order = Vec::with_capacity(k);
        for p in 0..s {
            phase_taps.push((order.len(), (p..k).step_by(s).len()));
            order.extend((p..k).step_by(s));
        }
        let weight = w
            .weight
            .chunks(k)
            .flat_map(|taps| order.iter().map(|&t| taps[t]))
            .collect();
        DirectConv {
            weight,
            phase_taps,
            bias: w.bias.clone(),
            cin: w.cin,
            cout: w.cout,
            kernel: k,
            stride: s,
            cpg: w.cin / w.groups,
            cog: w.cout / w.groups,
            widest: Isa::Avx512,
        }
    }

    /// The convolution with "same" padding (as burn's `PaddingConfig1d::Same`), bias added,
    /// the shortcut added if given, then ReLU if `relu`. Split over rayon's threads if `split`,
    /// else all on the calling thread.
    ///
    /// # Shapes
    /// - x: `[batch][cin][len]`; shortcut: `[batch][channels <= cout][len]` (before pooling)
    /// - returns `([batch][cout][l_out], l_out)`
    pub(crate) fn forward(
        &self,
        x: &[f32],
        batch: usize,
        len: usize,
        shortcut: Option<Shortcut<'_>>,
        relu: bool,
        split: bool,
    ) -> (Vec<f32>, usize) {
        assert_eq!(x.len(), batch * self.cin * len, "input shape");
        let (l_out, begin, _) = same_padding(len, self.kernel, self.stride);
        if batch == 0 || len == 0 {
            return (vec![0.0; batch * self.cout * l_out], l_out);
        }
        // Rows per rayon job in the copies: one where they are large enough to be worth
        // splitting (each split region costs a wake-up of the pool), else all of them.
        let min_len = if split && x.len() >= MIN_SPLIT_COPY {
            1
        } else {
            usize::MAX
        };
        let phases = Phases::new(x, batch * self.cin, len, self, l_out, begin, min_len);
        let pooled = shortcut.map(|s| pool_shortcut(s, batch, l_out, min_len));
        let pooled_channels = shortcut.map_or(0, |s| s.channels);
        // Every position of every row is written by its task.
        let mut y = buffer(batch * self.cout * l_out);
        // A few tasks per thread, unless that would make them too small to pay for their
        // scheduling; whole passes of 4 channels where possible (a task may split a group).
        let rows = batch * self.cout;
        let macs = rows * l_out * self.cpg * self.kernel;
        let tasks = match split {
            true => (macs / MIN_TASK_MACS).clamp(1, 4 * rayon::current_num_threads()),
            false => 1,
        };
        let rows_per_task = rows.div_ceil(tasks).next_multiple_of(4).min(rows);
        y.par_chunks_mut(rows_per_task * l_out)
            .enumerate()
            .for_each(|(task, out)| {
                let first_row = task * rows_per_task;
                let job = Job {
                    conv: self,
                    phases: &phases,
                    l_out,
                    first_row,
                    pooled: pooled.as_deref(),
                    pooled_channels,
                    relu,
                };
                job.run_best(out);
            });
        if let Some(Cow::Owned(p)) = pooled {
            give_back(p);
        }
        (y, l_out)
    }
}

/// The padded input, split by phase for the stride: row `r` (a `(sample, input channel)` pair),
/// phase `p` holds `xpad[stride * j + p]` at `j`, with [`MAX_SPAN`] positions of room past
/// the last output position.
struct Phases {
    data: Vec<f32>,
    /// Length of one phase row.
    len: usize,
    stride: usize,
}

impl Phases {
    fn new(
        x: &[f32],
        rows: usize,
        len: usize,
        conv: &DirectConv,
        l_out: usize,
        begin: usize,
        min_len: usize,
    ) -> Self {
        let s = conv.stride;
        let plen = l_out + MAX_SPAN + (conv.kernel - 1) / s + 1;
        // Every position is written below (the padding zeroed), so a reused buffer's old
        // values never show.
        let mut data = buffer(rows * s * plen);
        data.par_chunks_mut(s * plen)
            .zip(x.par_chunks(len))
            .with_min_len(min_len)
            .for_each(|(dst, src)| {
                for (p, row) in dst.chunks_mut(plen).enumerate() {
                    // Padded position s * q + p holds input sample s * q + p - begin.
                    let q0 = begin.saturating_sub(p).div_ceil(s).min(plen);
                    let src = src.get((s * q0 + p).saturating_sub(begin)..).unwrap_or(&[]);
                    let n = src.len().div_ceil(s).min(plen - q0);
                    let (pad, rest) = row.split_at_mut(q0);
                    let (dst, tail) = rest.split_at_mut(n);
                    pad.fill(0.0);
                    tail.fill(0.0);
                    match s {
                        // A plain copy, and the even or odd samples (both vectorised).
                        1 => dst.copy_from_slice(&src[..n]),
                        2 => pairs(src, dst, |pair| pair[0]),
                        _ => {
                            for (d, &v) in dst.iter_mut().zip(src.iter().step_by(s)) {
                                *d = v;
                            }
                        }
                    }
                }
            });
        Phases {
            data,
            len: plen,
            stride: s,
        }
    }

    /// Phase `p` of row `r`.
    #[inline(always)]
    fn row(&self, r: usize, p: usize) -> &[f32] {
        let start = (r * self.stride + p) * self.len;
        &self.data[start..start + self.len]
    }
}

thread_local! {
    /// This thread's spare buffers: a layer's padded input, pooled shortcut and output are
    /// taken from here and handed back once read, so the layers of a window (and the windows
    /// after it) reuse a few allocations instead of zeroing fresh ones. At most
    /// [`MAX_SPARE`], each as large as the largest layer the thread has run.
    static SPARE: std::cell::RefCell<Vec<Vec<f32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Spare buffers a thread keeps.
const MAX_SPARE: usize = 4;

/// A buffer of `n` floats from this thread's spares (else a new one). Its values are
/// whatever it last held: the caller writes every one before reading it.
fn buffer(n: usize) -> Vec<f32> {
    let mut v = SPARE
        .with_borrow_mut(|spare| {
            // The smallest spare that fits, else the largest (grown below).
            let fits = (0..spare.len())
                .filter(|&i| spare[i].capacity() >= n)
                .min_by_key(|&i| spare[i].capacity());
            let pick = fits.or_else(|| (0..spare.len()).max_by_key(|&i| spare[i].capacity()));
            pick.map(|i| spare.swap_remove(i))
        })
        .unwrap_or_default();
    if v.capacity() < n {
        // Grown: its old values need not be copied.
        v.clear();
    }
    v.resize(n, 0.0);
    v
}

/// Hands `v` back to this thread's spares (the smallest dropped when they are full).
fn give_back(v: Vec<f32>) {
    SPARE.with_borrow_mut(|spare| {
        spare.push(v);
        if spare.len() > MAX_SPARE {
            let smallest = (0..spare.len()).min_by_key(|&i| spare[i].capacity());
            if let Some(i) = smallest {
                spare.swap_remove(i);
            }
        }
    });
}

impl Drop for Phases {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.data));
    }
}

/// The shortcut at the output length: max-pooled by 2 (an odd last sample alone) into a
/// spare buffer, or the block input itself.
fn pool_shortcut<'a>(
    s: Shortcut<'a>,
    batch: usize,
    l_out: usize,
    min_len: usize,
) -> Cow<'a, [f32]> {
    assert_eq!(s.x.len(), batch * s.channels * s.len, "shortcut shape");
    if s.stride == 1 {
        assert_eq!(s.len, l_out, "shortcut length");
        return Cow::Borrowed(s.x);
    }
    assert_eq!(s.len.div_ceil(2), l_out, "shortcut length");
    // Every position is written: the pairs, and an odd last sample.
    let mut out = buffer(batch * s.channels * l_out);
    out.par_chunks_mut(l_out)
        .zip(s.x.par_chunks(s.len))
        .with_min_len(min_len)
        .for_each(|(dst, src)| {
            pairs(src, dst, |pair| pair[0].max(pair[1]));
        });
    Cow::Owned(out)
}

/// `dst[j] = f(src[2j], src[2j + 1])`, and `dst[j] = src[2j]` for an odd last sample: a
/// stride-2 phase row, or the shortcut max-pooled by 2. Compiled for AVX2 where the CPU has
/// it, where the loop vectorises with shuffles (else SSE2's narrower ones).
fn pairs(src: &[f32], dst: &mut [f32], f: impl Fn([f32; 2]) -> f32) {
    #[inline(always)]
    fn body(src: &[f32], dst: &mut [f32], f: impl Fn([f32; 2]) -> f32) {
        let (two, last) = src.as_chunks::<2>();
        for (d, &pair) in dst.iter_mut().zip(two) {
            *d = f(pair);
        }
        if let (Some(&v), Some(d)) = (last.first(), dst.get_mut(two.len())) {
            *d = v;
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2(src: &[f32], dst: &mut [f32], f: impl Fn([f32; 2]) -> f32) {
        body(src, dst, f);
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        unsafe { avx2(src, dst, f) };
        return;
    }
    body(src, dst, f);
}

/// A ResNeXt-1D's convolutions as direct convolutions: the stem, then two per block.
#[derive(Debug, Clone)]
pub(crate) struct DirectNet {
    stem: DirectConv,
    blocks: Vec<(DirectConv, DirectConv)>,
}

impl DirectNet {
    pub(crate) fn new(stem: &FoldedWeights, blocks: &[FoldedBlock]) -> Self {
        DirectNet {
            stem: DirectConv::new(stem),
            blocks: blocks
                .iter()
                .map(|b| (DirectConv::new(&b.c1), DirectConv::new(&b.c2)))
                .collect(),
        }
    }

    /// The network up to its global average pool. With at least two samples per thread (or
    /// a multiple of the threads), each sample runs the whole network on one thread, its
    /// activations staying in that core's cache; otherwise each layer is split over the
    /// threads.
    ///
    /// # Shapes
    /// - x: `[batch][samples]`
    /// - returns `[batch][channels]`, the mean over the length of the last block's output
    pub(crate) fn features(&self, x: &[f32], batch: usize) -> Vec<f32> {
        let threads = rayon::current_num_threads();
        let len = x.len() / batch.max(1);
        if threads > 1 && self.macs(len) * batch < MIN_SPLIT_MACS {
            // Too little work to wake the pool for.
            return self.features_of(x, batch, false);
        }
        if threads > 1 && (batch >= 2 * threads || batch.is_multiple_of(threads)) {
            let each: Vec<Vec<f32>> = x
                .par_chunks(len.max(1))
                .map(|one| self.features_of(one, 1, false))
                .collect();
            return each.concat();
        }
        self.features_of(x, batch, true)
    }

    /// Multiply-adds of one window of `len` samples.
    fn macs(&self, len: usize) -> usize {
        let mut l = len;
        std::iter::once(&self.stem)
            .chain(self.blocks.iter().flat_map(|(a, b)| [a, b]))
            .map(|c| {
                l = l.div_ceil(c.stride);
                l * c.cout * c.cpg * c.kernel
            })
            .sum()
    }

    fn features_of(&self, x: &[f32], batch: usize, split: bool) -> Vec<f32> {
        let len = x.len() / batch.max(1);
        let (mut h, mut l) = self.stem.forward(x, batch, len, None, true, split);
        let mut ch = self.stem.cout;
        for (c1, c2) in &self.blocks {
            let (t, lt) = c1.forward(&h, batch, l, None, true, split);
            let sc = Shortcut {
                x: &h,
                channels: ch,
                len: l,
                stride: c1.stride,
            };
            let (y, ly) = c2.forward(&t, batch, lt, Some(sc), true, split);
            give_back(t);
            give_back(std::mem::replace(&mut h, y));
            (l, ch) = (ly, c2.cout);
        }
        let features = h
            .chunks(l.max(1))
            .map(|r| r.iter().sum::<f32>() / l as f32)
            .collect();
        give_back(h);
        features
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::stats::max_abs_diff;
    use burn::backend::Flex;
    use burn::nn::PaddingConfig1d;
    use burn::nn::conv::Conv1dConfig;
    use burn::tensor::activation::relu;
    use burn::tensor::module::max_pool1d;
    use burn::tensor::{Distribution, Tensor};

    type B = Flex;

    /// Fills this thread's spare buffers with NaN.
    fn poison_spares() {
        for n in [1 << 8, 1 << 12, 1 << 14, 1 << 16, 1 << 18] {
            give_back(vec![f32::NAN; n]);
        }
    }

    #[test]
    fn empty_inputs_give_empty_outputs() {
        let w = FoldedWeights {
            weight: vec![1.0; 8 * 16],
            bias: vec![0.5; 8],
            cin: 1,
            cout: 8,
            kernel: 16,
            stride: 2,
            groups: 1,
        };
        let d = DirectConv::new(&w);
        assert_eq!(d.forward(&[], 0, 100, None, true, true).0.len(), 0);
        assert_eq!(d.forward(&[], 3, 0, None, true, true).0.len(), 0);
    }

    /// Against burn's `Conv1d` ("same" padding) plus the max-pooled, zero-extended shortcut
    /// and ReLU, for depthwise, widening, grouped, dense, odd-length and odd-kernel cases.
    #[test]
    fn matches_burn_conv_shortcut_and_relu() {
        let dev = Default::default();
        for &(cin, cout, groups, stride, len, kernel) in &[
            (32, 32, 32, 2, 75, 16),
            (32, 64, 32, 1, 40, 16),
            (64, 64, 32, 2, 33, 16),
            (64, 128, 32, 1, 17, 16),
            (128, 128, 32, 2, 101, 16),
            (1, 8, 1, 2, 75, 16),
            (6, 12, 3, 2, 9, 5),
            (12, 12, 4, 1, 300, 7),
        ] {
            let conv = Conv1dConfig::new(cin, cout, kernel)
                .with_stride(stride)
                .with_groups(groups)
                .with_padding(PaddingConfig1d::Same)
                .init::<B>(&dev);
            let batch = 3;
            let x = Tensor::<B, 3>::random([batch, cin, len], Distribution::Normal(0.0, 1.0), &dev);
            let d = DirectConv::new(&FoldedWeights::of_conv(&conv));
            let xs: Vec<f32> = x.clone().into_data().to_vec().unwrap();

            // Bare convolution, in each form the CPU can run (those it cannot fall back to a
            // narrower one), each time with this thread's spare buffers full of NaN: a value
            // not written before it is read shows.
            let want: Vec<f32> = conv.forward(x.clone()).into_data().to_vec().unwrap();
            for widest in [Isa::Avx512, Isa::Avx2, Isa::Portable] {
                let d = DirectConv {
                    widest,
                    ..d.clone()
                };
                for split in [true, false] {
                    poison_spares();
                    let (got, _) = d.forward(&xs, batch, len, None, false, split);
                    let diff = max_abs_diff(&want, &got);
                    assert!(
                        diff < 1e-4,
                        "{cin}->{cout}/{groups} s{stride} len {len} ({widest:?}): {diff}"
                    );
                }
            }

            // With a shortcut (pooled when strided, zero channels appended) and ReLU.
            let sc_ch = cin.min(cout);
            let sc =
                Tensor::<B, 3>::random([batch, sc_ch, len], Distribution::Normal(0.0, 1.0), &dev);
            let pooled = if stride == 2 {
                max_pool1d(sc.clone(), 2, 2, 0, 1, true)
            } else {
                sc.clone()
            };
            let l_out = pooled.dims()[2];
            let pooled = if cout > sc_ch {
                Tensor::cat(
                    vec![pooled, Tensor::zeros([batch, cout - sc_ch, l_out], &dev)],
                    1,
                )
            } else {
                pooled
            };
            let want: Vec<f32> = relu(conv.forward(x) + pooled).into_data().to_vec().unwrap();
            let scs: Vec<f32> = sc.into_data().to_vec().unwrap();
            let shortcut = Shortcut {
                x: &scs,
                channels: sc_ch,
                len,
                stride,
            };
            for widest in [Isa::Avx512, Isa::Avx2, Isa::Portable] {
                let d = DirectConv {
                    widest,
                    ..d.clone()
                };
                poison_spares();
                let (got, _) = d.forward(&xs, batch, len, Some(shortcut), true, false);
                let diff = max_abs_diff(&want, &got);
                assert!(
                    diff < 1e-4,
                    "{cin}->{cout}/{groups} s{stride} with shortcut ({widest:?}): {diff}"
                );
            }
        }
    }
}
