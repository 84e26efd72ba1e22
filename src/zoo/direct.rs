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
//! Work on rayon's pool ([`DirectNet::features`]): one window per thread when the batch has
//! enough of them (activations stay in that core's cache), else each layer split by output
//! rows, else (tiny batches) the calling thread alone. Each task runs compiled for AVX2 and FMA
//! where the CPU has them (detected at run time), else a portable loop.
//!
//! This reads host memory, so [`fast`](super::fast) serves it only on the flex CPU backend; a
//! GPU runs the plain path.

use rayon::prelude::*;

use super::folded::{FoldedBlock, FoldedWeights, same_padding};

/// A convolution with BatchNorm folded in, in the form the direct kernel reads.
#[derive(Debug, Clone)]
pub(crate) struct DirectConv {
    /// `[cout][cin_per_group][kernel]`, as [`FoldedWeights::weight`].
    weight: Vec<f32>,
    bias: Vec<f32>,
    cin: usize,
    cout: usize,
    kernel: usize,
    stride: usize,
    /// Input channels per group.
    cpg: usize,
    /// Output channels per group.
    cog: usize,
    /// Always run the portable pass (tests: the form CPUs without AVX2 and FMA run).
    portable: bool,
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
        DirectConv {
            weight: w.weight.clone(),
            bias: w.bias.clone(),
            cin: w.cin,
            cout: w.cout,
            kernel: w.kernel,
            stride: w.stride.max(1),
            cpg: w.cin / w.groups,
            cog: w.cout / w.groups,
            portable: false,
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
        let mut y = vec![0.0f32; batch * self.cout * l_out];
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
        (y, l_out)
    }
}

/// The padded input, split by phase for the stride: row `r` (a `(sample, input channel)` pair),
/// phase `p` holds `xpad[stride * j + p]` at `j`, with room for whole position tiles.
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
        let plen = l_out.div_ceil(TILE) * TILE + (conv.kernel - 1) / s + 1;
        let mut data = vec![0.0f32; rows * s * plen];
        data.par_chunks_mut(s * plen)
            .zip(x.par_chunks(len))
            .with_min_len(min_len)
            .for_each(|(dst, src)| {
                for (p, row) in dst.chunks_mut(plen).enumerate() {
                    // Padded position s * q + p holds input sample s * q + p - begin.
                    let q0 = begin.saturating_sub(p).div_ceil(s);
                    let Some(src) = src.get(s * q0 + p - begin..) else {
                        continue;
                    };
                    for (d, &v) in row[q0..].iter_mut().zip(src.iter().step_by(s)) {
                        *d = v;
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

/// The shortcut at the output length: max-pooled by 2 (an odd last sample alone) or as is.
fn pool_shortcut(s: Shortcut<'_>, batch: usize, l_out: usize, min_len: usize) -> Vec<f32> {
    if s.stride == 1 {
        assert_eq!(s.len, l_out, "shortcut length");
        return s.x.to_vec();
    }
    assert_eq!(s.len.div_ceil(2), l_out, "shortcut length");
    let mut out = vec![0.0f32; batch * s.channels * l_out];
    out.par_chunks_mut(l_out)
        .zip(s.x.par_chunks(s.len))
        .with_min_len(min_len)
        .for_each(|(dst, src)| {
            let (pairs, rest) = src.as_chunks::<2>();
            for (d, p) in dst.iter_mut().zip(pairs) {
                *d = p[0].max(p[1]);
            }
            if let Some(&last) = rest.first() {
                dst[l_out - 1] = last;
            }
        });
    out
}

/// Phase rows are padded to a multiple of this many positions: the longest pass.
const TILE: usize = 64;

/// One task: a run of output rows.
struct Job<'a> {
    conv: &'a DirectConv,
    phases: &'a Phases,
    l_out: usize,
    first_row: usize,
    pooled: Option<&'a [f32]>,
    pooled_channels: usize,
    relu: bool,
}

impl Job<'_> {
    /// [`run`](Self::run) compiled for AVX2 and FMA where the CPU has them.
    fn run_best(&self, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if !self.conv.portable
            && std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            unsafe { self.run_avx2_fma(out) };
            return;
        }
        self.run(out, false);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn run_avx2_fma(&self, out: &mut [f32]) {
        self.run(out, true);
    }

    #[inline(always)]
    fn run(&self, out: &mut [f32], simd: bool) {
        let c = self.conv;
        let rows = out.len() / self.l_out;
        let mut r = 0;
        while r < rows {
            let row = self.first_row + r;
            let co = row % c.cout;
            let left_in_group = c.cog - co % c.cog;
            let take = match left_in_group.min(rows - r) {
                t if t >= 4 => 4,
                t if t >= 2 => 2,
                _ => 1,
            };
            let dst = &mut out[r * self.l_out..(r + take) * self.l_out];
            match (take, simd) {
                (4, true) => self.rows::<4, 16, true>(row, dst),
                (4, false) => self.rows::<4, 16, false>(row, dst),
                (2, true) => self.rows::<2, 32, true>(row, dst),
                (2, false) => self.rows::<2, 32, false>(row, dst),
                (_, true) => self.rows::<1, 64, true>(row, dst),
                (_, false) => self.rows::<1, 64, false>(row, dst),
            }
            r += take;
        }
    }

    /// `CO` output rows of one group starting at global row `row`, `SPAN` positions per pass
    /// (`CO * SPAN` = 64 accumulators: eight AVX2 registers).
    #[inline(always)]
    fn rows<const CO: usize, const SPAN: usize, const SIMD: bool>(
        &self,
        row: usize,
        dst: &mut [f32],
    ) {
        let c = self.conv;
        let (n, co) = (row / c.cout, row % c.cout);
        let first_in = n * c.cin + (co / c.cog) * c.cpg;
        let mut l0 = 0;
        while l0 < self.l_out {
            let mut acc = [[0.0f32; SPAN]; CO];
            #[cfg(target_arch = "x86_64")]
            if SIMD {
                // SAFETY: SIMD is only true under `run_avx2_fma`, after the CPU check.
                unsafe { avx::pass::<CO, SPAN>(self, first_in, co, l0, &mut acc) };
            } else {
                self.pass::<CO, SPAN>(first_in, co, l0, &mut acc);
            }
            #[cfg(not(target_arch = "x86_64"))]
            self.pass::<CO, SPAN>(first_in, co, l0, &mut acc);
            let valid = SPAN.min(self.l_out - l0);
            for (o, a) in acc.iter().enumerate() {
                let d = &mut dst[o * self.l_out + l0..o * self.l_out + l0 + valid];
                d.copy_from_slice(&a[..valid]);
                let ch = co + o;
                if let Some(p) = self.pooled
                    && ch < self.pooled_channels
                {
                    let base = (n * self.pooled_channels + ch) * self.l_out + l0;
                    for (v, &sv) in d.iter_mut().zip(&p[base..base + valid]) {
                        *v += sv;
                    }
                }
                if self.relu {
                    for v in d.iter_mut() {
                        *v = v.max(0.0);
                    }
                }
            }
            l0 += SPAN;
        }
    }

    /// One pass of `CO` output channels from `co` over positions `l0..l0 + SPAN`: bias plus
    /// the sum over the group's input channels and the taps (portable form).
    #[inline(always)]
    fn pass<const CO: usize, const SPAN: usize>(
        &self,
        first_in: usize,
        co: usize,
        l0: usize,
        acc: &mut [[f32; SPAN]; CO],
    ) {
        let c = self.conv;
        for (o, a) in acc.iter_mut().enumerate() {
            *a = [c.bias[co + o]; SPAN];
        }
        for ci in 0..c.cpg {
            for p in 0..c.stride {
                let xr = self.phases.row(first_in + ci, p);
                for (q, tap) in (p..c.kernel).step_by(c.stride).enumerate() {
                    let xs = &xr[l0 + q..l0 + q + SPAN];
                    for (o, a) in acc.iter_mut().enumerate() {
                        let w = c.weight[((co + o) * c.cpg + ci) * c.kernel + tap];
                        for (av, &xv) in a.iter_mut().zip(xs) {
                            *av += w * xv;
                        }
                    }
                }
            }
        }
    }
}

/// The pass with AVX2 and FMA intrinsics.
#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::{
        __m256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps,
        _mm256_storeu_ps,
    };

    use super::Job;

    /// See [`Job::pass`]; `SPAN` is a multiple of 8 and at most 64.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub(super) unsafe fn pass<const CO: usize, const SPAN: usize>(
        job: &Job<'_>,
        first_in: usize,
        co: usize,
        l0: usize,
        acc: &mut [[f32; SPAN]; CO],
    ) {
        let c = job.conv;
        let lanes = SPAN / 8;
        let mut a = [[_mm256_setzero_ps(); 8]; CO];
        for (o, ao) in a.iter_mut().enumerate() {
            let b = _mm256_set1_ps(c.bias[co + o]);
            for v in ao.iter_mut().take(lanes) {
                *v = b;
            }
        }
        for ci in 0..c.cpg {
            for p in 0..c.stride {
                let xr = job.phases.row(first_in + ci, p);
                for (q, tap) in (p..c.kernel).step_by(c.stride).enumerate() {
                    let xs = &xr[l0 + q..l0 + q + SPAN];
                    let mut x: [__m256; 8] = [_mm256_setzero_ps(); 8];
                    for (v, xv) in x.iter_mut().enumerate().take(lanes) {
                        // SAFETY: `xs` holds SPAN = 8 * lanes floats.
                        *xv = unsafe { _mm256_loadu_ps(xs.as_ptr().add(8 * v)) };
                    }
                    for (o, ao) in a.iter_mut().enumerate() {
                        let w = _mm256_set1_ps(c.weight[((co + o) * c.cpg + ci) * c.kernel + tap]);
                        for v in 0..lanes {
                            ao[v] = _mm256_fmadd_ps(w, x[v], ao[v]);
                        }
                    }
                }
            }
        }
        for (o, ao) in a.iter().enumerate() {
            for (v, av) in ao.iter().enumerate().take(lanes) {
                // SAFETY: `acc[o]` holds SPAN = 8 * lanes floats.
                unsafe { _mm256_storeu_ps(acc[o].as_mut_ptr().add(8 * v), *av) };
            }
        }
    }
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
            (h, l, ch) = (y, ly, c2.cout);
        }
        h.chunks(l.max(1))
            .map(|r| r.iter().sum::<f32>() / l as f32)
            .collect()
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

            // Bare convolution, with SIMD where the CPU has it and portable.
            let want: Vec<f32> = conv.forward(x.clone()).into_data().to_vec().unwrap();
            let portable = DirectConv {
                portable: true,
                ..d.clone()
            };
            for (d, how) in [(&d, "best"), (&portable, "portable")] {
                let (got, _) = d.forward(&xs, batch, len, None, false, true);
                let diff = max_abs_diff(&want, &got);
                assert!(
                    diff < 1e-4,
                    "{cin}->{cout}/{groups} s{stride} len {len} ({how}): {diff}"
                );
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
            let (got, _) = d.forward(&xs, batch, len, Some(shortcut), true, false);
            let diff = max_abs_diff(&want, &got);
            assert!(
                diff < 1e-4,
                "{cin}->{cout}/{groups} s{stride} with shortcut: {diff}"
            );
        }
    }
}
