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
//! input is held as its even and odd samples, so every load is a contiguous run.
//! Measured, this beat the GEMM form on every zoo model, dense groups included (lab notebook, 2026-11-21).
//!
//! Fused into the convolution's store: the folded bias, the residual shortcut (the block input
//! max-pooled by 2, zero channels appended, read from where the block's first convolution
//! read it) and the ReLU; and the output written as the next convolution reads it, padded and
//! split by its stride ([`layout`]), so no layer copies, pads or pools its input (the
//! network's input, one channel, is copied in; the last layer writes plain rows).
//!
//! The inner loop reads weights and inputs through pointers whose bounds are checked once
//! per block of rows; the weights are stored in the order it reads them (each kernel's taps by
//! stride phase). A layer's output comes from a few buffers each thread reuses ([`spare`]),
//! not zeroed first: every float is written, the padding included.
//!
//! Work on rayon's pool ([`DirectNet::features`]): one window per thread when the batch has
//! enough of them (activations stay in that core's cache), else each layer split by output
//! rows, else (tiny batches) the calling thread alone. Each task runs compiled for AVX2 and FMA
//! where the CPU has them (detected at run time), with AVX-512VL's 32 vector registers (more
//! accumulators a pass) where it has those too, else a portable loop.
//!
//! This reads host memory, so [`fast`](super::fast) serves it only on the flex CPU backend; a
//! GPU runs the plain path.

use rayon::prelude::*;

mod job;
mod layout;
mod spare;

use super::folded::{FoldedBlock, FoldedWeights, same_padding};
use job::Job;
use layout::{Layout, Phases};
use spare::Buf;

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
#[derive(Clone, Copy)]
struct Shortcut<'a> {
    /// The block input, `[batch][channels]` rows as the block's first convolution read them:
    /// max-pooled by 2 (`ceil_mode`) where that convolution's stride is 2, else as is.
    x: &'a Phases,
    channels: usize,
}

/// Multiply-adds of a whole batch below which it runs on the calling thread alone.
const MIN_SPLIT_MACS: usize = 12_000_000;

/// Floats below which the network's input is copied in on the calling thread alone.
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
    /// the shortcut added if given, then ReLU if `relu`, written in the layout `out` (that of
    /// the next convolution's input, or plain rows). Split over rayon's threads if `split`,
    /// else all on the calling thread.
    ///
    /// # Shapes
    /// - x: `[batch][cin]` rows in [`Layout::input_of`] this convolution; shortcut:
    ///   `[batch][channels <= cout]` rows of the block input (pooled by its stride here)
    /// - returns `[batch][cout]` rows of `out.len` (the output length) in `out`
    fn forward(
        &self,
        x: &Phases,
        batch: usize,
        shortcut: Option<Shortcut<'_>>,
        relu: bool,
        split: bool,
        out: Layout,
    ) -> Phases {
        let len = x.layout.len;
        let (l_out, _, _) = same_padding(len, self.kernel, self.stride);
        assert!(
            x.layout == Layout::input_of(self, len) && x.rows() == batch * self.cin,
            "input in this convolution's layout"
        );
        assert!(out.len == l_out && out.stride <= 2, "output layout");
        // Every float of every row is written by its task (the padding zeroed).
        let mut y = Phases {
            data: Buf::take(batch * self.cout * out.row_len()),
            layout: out,
        };
        if batch == 0 || len == 0 {
            y.data.fill(0.0);
            return y;
        }
        if let Some(s) = shortcut {
            let l = s.x.layout;
            assert!(
                s.x.rows() == batch * s.channels
                    && s.channels <= self.cout
                    && l.stride <= 2
                    && l.len.div_ceil(l.stride) == l_out,
                "shortcut rows"
            );
        }
        // A few tasks per thread, unless that would make them too small to pay for their
        // scheduling; whole passes of 4 channels where possible (a task may split a group).
        let rows = batch * self.cout;
        let macs = rows * l_out * self.cpg * self.kernel;
        let tasks = match split {
            true => (macs / MIN_TASK_MACS).clamp(1, 4 * rayon::current_num_threads()),
            false => 1,
        };
        let rows_per_task = rows.div_ceil(tasks).next_multiple_of(4).min(rows);
        y.data
            .par_chunks_mut(rows_per_task * out.row_len())
            .enumerate()
            .for_each(|(task, dst)| {
                for row in dst.chunks_mut(out.row_len()) {
                    out.zero_padding(row);
                }
                let job = Job {
                    conv: self,
                    phases: x,
                    l_out,
                    first_row: task * rows_per_task,
                    shortcut,
                    relu,
                    out,
                };
                job.run_best(dst);
            });
        y
    }
}

/// `dst[j] = src[2j]`: a stride-2 phase row. Compiled for AVX2 where the CPU has it, where
/// the loop vectorises with shuffles (else SSE2's narrower ones).
fn evens(src: &[f32], dst: &mut [f32]) {
    #[inline(always)]
    fn body(src: &[f32], dst: &mut [f32]) {
        let (two, last) = src.as_chunks::<2>();
        for (d, pair) in dst.iter_mut().zip(two) {
            *d = pair[0];
        }
        if let (Some(&v), Some(d)) = (last.first(), dst.get_mut(two.len())) {
            *d = v;
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2(src: &[f32], dst: &mut [f32]) {
        body(src, dst);
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        unsafe { avx2(src, dst) };
        return;
    }
    body(src, dst);
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
        // Rows per rayon job in the input's copy: one where it is large enough to be worth
        // splitting (each split region costs a wake-up of the pool), else all of them.
        let min_len = if split && x.len() >= MIN_SPLIT_COPY {
            1
        } else {
            usize::MAX
        };
        let input = Phases::copy_in(x, batch, Layout::input_of(&self.stem, len), min_len);
        // Each layer writes its output as the next one reads it; the last, plain rows.
        let after = |i: usize, len: usize| match self.blocks.get(i) {
            Some((c1, _)) => Layout::input_of(c1, len),
            None => Layout::plain(len),
        };
        let l = len.div_ceil(self.stem.stride);
        let mut h = self
            .stem
            .forward(&input, batch, None, true, split, after(0, l));
        drop(input);
        let mut ch = self.stem.cout;
        for (i, (c1, c2)) in self.blocks.iter().enumerate() {
            let l = h.layout.len.div_ceil(c1.stride);
            let t = c1.forward(&h, batch, None, true, split, Layout::input_of(c2, l));
            let sc = Shortcut {
                x: &h,
                channels: ch,
            };
            let y = c2.forward(&t, batch, Some(sc), true, split, after(i + 1, l));
            drop(t);
            (h, ch) = (y, c2.cout);
        }
        let l = h.layout.len;
        h.data
            .chunks(l.max(1))
            .take(batch * ch)
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

    /// Fills this thread's spare buffers with NaN.
    fn poison_spares() {
        for n in [1 << 8, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 19] {
            spare::give_back(vec![f32::NAN; n]);
        }
    }

    /// `rows` plain rows of `len` as `conv` reads them.
    fn rows_for(conv: &DirectConv, x: &[f32], rows: usize, len: usize) -> Phases {
        Phases::copy_in(x, rows, Layout::input_of(conv, len), usize::MAX)
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
        let x = rows_for(&d, &[], 0, 100);
        assert_eq!(
            d.forward(&x, 0, None, true, true, Layout::plain(50))
                .data
                .len(),
            0
        );
        let x = rows_for(&d, &[], 3, 0);
        let y = d.forward(&x, 3, None, true, true, Layout::plain(0));
        assert_eq!(y.data.len(), 0);
    }

    /// Against burn's `Conv1d` ("same" padding) plus the max-pooled, zero-extended shortcut
    /// and ReLU, for depthwise, widening, grouped, dense, odd-length and odd-kernel cases;
    /// written plain and in the layouts of a stride-1 and a stride-2 convolution after it,
    /// each equal, padding included, to those rows copied in.
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
            (1, 8, 1, 2, 300, 16),
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
            let l_out = len.div_ceil(stride);
            let next = |s| {
                let w = FoldedWeights {
                    weight: vec![0.0; cout * 16],
                    bias: vec![0.0; cout],
                    cin: cout,
                    cout,
                    kernel: 16,
                    stride: s,
                    groups: cout,
                };
                Layout::input_of(&DirectConv::new(&w), l_out)
            };
            let layouts = [Layout::plain(l_out), next(1), next(2)];

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
                    let xp = rows_for(&d, &xs, batch * cin, len);
                    let got = d.forward(&xp, batch, None, false, split, Layout::plain(l_out));
                    let diff = max_abs_diff(&want, &got.data);
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
            for widest in [Isa::Avx512, Isa::Avx2, Isa::Portable] {
                let d = DirectConv {
                    widest,
                    ..d.clone()
                };
                for out in layouts {
                    poison_spares();
                    let xp = rows_for(&d, &xs, batch * cin, len);
                    // The shortcut's rows as a convolution of this stride reads them.
                    let scp = rows_for(&d, &scs, batch * sc_ch, len);
                    let shortcut = Shortcut {
                        x: &scp,
                        channels: sc_ch,
                    };
                    let got = d.forward(&xp, batch, Some(shortcut), true, false, out);
                    let plain: Vec<f32> = (0..batch * cout).flat_map(|r| got.samples(r)).collect();
                    let diff = max_abs_diff(&want, &plain);
                    assert!(
                        diff < 1e-4,
                        "{cin}->{cout}/{groups} s{stride} with shortcut ({widest:?}, {out:?}): {diff}"
                    );
                    let copied = Phases::copy_in(&plain, batch * cout, out, usize::MAX);
                    let bits = |p: &Phases| -> Vec<u32> {
                        out.held(&p.data).flatten().map(|v| v.to_bits()).collect()
                    };
                    assert!(
                        bits(&got) == bits(&copied),
                        "{cin}->{cout} s{stride}: written in {out:?} as copied in"
                    );
                }
            }
        }
    }
}
