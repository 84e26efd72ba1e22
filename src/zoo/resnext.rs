//! The ECG model family: a 1-D ResNeXt after the HOLMES zoo (hsd1503's ResNet1D rules).
//!
//! Stem convolution (kernel 16, stride 2), then `depth` residual blocks of two grouped
//! convolutions with BatchNorm; block `i` downsamples by 2 when `i % max(depth/8, 1) == 0` and
//! doubles its channels every `max(depth/4, 1)` blocks up to 4x the width; the shortcut is a
//! stride-2 max-pool with zero channels appended. Global average pooling and a linear layer give
//! two logits. Groups are `width / group_width` (ResNeXt's cardinality grows with width).

use burn::module::{Module, Param, RunningState};
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig1d};
use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::module::max_pool1d;
use serde::{Deserialize, Serialize};

use super::fast::FastResNeXt1d;
use super::folded::{FoldedBlock, FoldedWeights};

/// Hyper-parameters of one ResNeXt-1D model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResNeXtArch {
    /// Channels after the stem (8, 16, 32 or 64 in the zoo).
    pub(crate) width: usize,
    /// Residual blocks (2, 4 or 8 in the zoo).
    pub(crate) depth: usize,
    /// Channels per group in the grouped convolutions.
    pub(crate) group_width: usize,
    /// Convolution kernel length.
    pub(crate) kernel: usize,
}

/// One convolution's shape, for the MAC count and the module builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConvShape {
    pub(crate) cin: usize,
    pub(crate) cout: usize,
    pub(crate) stride: usize,
    pub(crate) groups: usize,
    pub(crate) l_out: usize,
}

impl ResNeXtArch {
    /// Checks the hyper-parameters make a buildable network.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.width == 0 || self.depth == 0 || self.kernel == 0 || self.group_width == 0 {
            return Err("width, depth, kernel and group_width must be positive".into());
        }
        if !self.width.is_multiple_of(self.group_width) {
            return Err(format!(
                "width {} is not a multiple of group_width {}",
                self.width, self.group_width
            ));
        }
        if self.width > 4096 || self.depth > 64 || self.kernel > 255 {
            return Err("architecture is implausibly large".into());
        }
        Ok(())
    }

    pub(crate) fn groups(&self) -> usize {
        self.width / self.group_width
    }

    /// Stem and block convolutions, in order, for an input of `len` samples.
    pub(crate) fn plan(&self, len: usize) -> (ConvShape, Vec<(ConvShape, ConvShape)>) {
        let ds_gap = (self.depth / 8).max(1);
        let inc_gap = (self.depth / 4).max(1);
        let g = self.groups();
        let mut l = len.div_ceil(2);
        let stem = ConvShape {
            cin: 1,
            cout: self.width,
            stride: 2,
            groups: 1,
            l_out: l,
        };
        let mut cin = self.width;
        let mut blocks = Vec::with_capacity(self.depth);
        for i in 0..self.depth {
            let cout = self.width << (i / inc_gap).min(2);
            let stride = if i % ds_gap == 0 { 2 } else { 1 };
            l = l.div_ceil(stride);
            let c1 = ConvShape {
                cin,
                cout,
                stride,
                groups: g,
                l_out: l,
            };
            let c2 = ConvShape {
                cin: cout,
                cout,
                stride: 1,
                groups: g,
                l_out: l,
            };
            blocks.push((c1, c2));
            cin = cout;
        }
        (stem, blocks)
    }

    /// Channels into the final linear layer.
    pub(crate) fn final_channels(&self) -> usize {
        self.width << ((self.depth - 1) / (self.depth / 4).max(1)).min(2)
    }

    /// Multiply-accumulates per window of `len` samples (convolutions and the linear layer).
    pub(crate) fn macs(&self, len: usize) -> u64 {
        let (stem, blocks) = self.plan(len);
        let conv = |c: &ConvShape| (c.l_out * c.cout * (c.cin / c.groups) * self.kernel) as u64;
        conv(&stem)
            + blocks.iter().map(|(a, b)| conv(a) + conv(b)).sum::<u64>()
            + 2 * self.final_channels() as u64
    }

    /// A freshly initialised network.
    pub(crate) fn init<B: Backend>(&self, device: &B::Device) -> ResNeXt1d<B> {
        let (stem, blocks) = self.plan(7500);
        let conv_bn = |c: &ConvShape| ConvBn {
            conv: Conv1dConfig::new(c.cin, c.cout, self.kernel)
                .with_stride(c.stride)
                .with_groups(c.groups)
                .with_padding(PaddingConfig1d::Same)
                .with_bias(false)
                .init(device),
            bn: BatchNormConfig::new(c.cout).init(device),
        };
        ResNeXt1d {
            stem: conv_bn(&stem),
            blocks: blocks
                .iter()
                .map(|(c1, c2)| Block {
                    c1: conv_bn(c1),
                    c2: conv_bn(c2),
                    stride: c1.stride,
                    pad_channels: c1.cout - c1.cin,
                })
                .collect(),
            fc: LinearConfig::new(self.final_channels(), 2).init(device),
        }
    }
}

/// Convolution followed by BatchNorm.
#[derive(Module, Debug)]
pub(crate) struct ConvBn<B: Backend> {
    conv: Conv1d<B>,
    bn: BatchNorm<B>,
}

impl<B: Backend> ConvBn<B> {
    fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.bn.forward(self.conv.forward(x))
    }

    /// The convolution with the BatchNorm's running statistics folded in:
    /// `w' = w * s`, `b' = beta + (bias - mean) * s` with `s = gamma / sqrt(var + eps)`.
    fn fold(&self) -> FoldedWeights {
        let host = |t: Tensor<B, 1>| -> Vec<f64> {
            t.into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .expect("f32 parameters")
                .into_iter()
                .map(f64::from)
                .collect()
        };
        let [cout, cpg, kernel] = self.conv.weight.dims();
        let gamma = host(self.bn.gamma.val());
        let beta = host(self.bn.beta.val());
        let mean = host(self.bn.running_mean.value());
        let var = host(self.bn.running_var.value());
        let bias = match &self.conv.bias {
            Some(b) => host(b.val()),
            None => vec![0.0; cout],
        };
        let scale: Vec<f64> = (0..cout)
            .map(|o| gamma[o] / (var[o] + self.bn.epsilon).sqrt())
            .collect();
        let w: Vec<f32> = self
            .conv
            .weight
            .val()
            .into_data()
            .convert::<f32>()
            .to_vec()
            .expect("f32 parameters");
        let per_out = cpg * kernel;
        FoldedWeights {
            weight: w
                .iter()
                .enumerate()
                .map(|(i, &v)| (v as f64 * scale[i / per_out]) as f32)
                .collect(),
            bias: (0..cout)
                .map(|o| (beta[o] + (bias[o] - mean[o]) * scale[o]) as f32)
                .collect(),
            cin: cpg * self.conv.groups,
            cout,
            kernel,
            stride: self.conv.stride,
            groups: self.conv.groups,
        }
    }

    /// Sets the convolution to `w` and the BatchNorm to the identity plus `w.bias`.
    fn load_folded(mut self, w: &FoldedWeights, device: &B::Device) -> Self {
        let cpg = w.cin / w.groups;
        let t = |v: &[f32]| Tensor::<B, 1>::from_floats(v, device);
        self.conv.weight = Param::from_tensor(t(&w.weight).reshape([w.cout, cpg, w.kernel]));
        self.bn.gamma = Param::from_tensor(Tensor::ones([w.cout], device));
        self.bn.beta = Param::from_tensor(t(&w.bias));
        self.bn.running_mean = RunningState::new(Tensor::zeros([w.cout], device));
        self.bn.running_var = RunningState::new(Tensor::ones([w.cout], device));
        self.bn.epsilon = 0.0;
        self
    }
}

/// A residual block of two grouped convolutions.
#[derive(Module, Debug)]
pub(crate) struct Block<B: Backend> {
    c1: ConvBn<B>,
    c2: ConvBn<B>,
    stride: usize,
    pad_channels: usize,
}

/// The network.
#[derive(Module, Debug)]
pub(crate) struct ResNeXt1d<B: Backend> {
    stem: ConvBn<B>,
    blocks: Vec<Block<B>>,
    fc: Linear<B>,
}

impl<B: Backend> ResNeXt1d<B> {
    /// The inference form of this network (BatchNorm folded, direct convolutions on host
    /// memory).
    pub(crate) fn inference_form(&self) -> FastResNeXt1d<B> {
        let blocks: Vec<FoldedBlock> = self
            .blocks
            .iter()
            .map(|b| FoldedBlock {
                c1: b.c1.fold(),
                c2: b.c2.fold(),
            })
            .collect();
        FastResNeXt1d::new(&self.stem.fold(), &blocks, self.fc.clone())
    }

    /// Replaces every convolution's weights by already folded ones (BatchNorm set to the
    /// identity plus the folded bias) and the linear layer by `fc_weight` (`[in, 2]`) and
    /// `fc_bias`: how weights trained elsewhere (the ONNX yardstick's) enter the plain path.
    ///
    /// Panics if the shapes differ from this network's.
    pub(crate) fn load_folded(
        mut self,
        stem: &FoldedWeights,
        blocks: &[FoldedBlock],
        fc_weight: &[f32],
        fc_bias: &[f32],
    ) -> Self {
        assert_eq!(blocks.len(), self.blocks.len(), "depth differs");
        let device = self.fc.weight.device();
        self.stem = self.stem.load_folded(stem, &device);
        self.blocks = self
            .blocks
            .into_iter()
            .zip(blocks)
            .map(|(mut b, f)| {
                b.c1 = b.c1.load_folded(&f.c1, &device);
                b.c2 = b.c2.load_folded(&f.c2, &device);
                b
            })
            .collect();
        let [d_in, d_out] = self.fc.weight.dims();
        self.fc.weight = Param::from_tensor(
            Tensor::<B, 1>::from_floats(fc_weight, &device).reshape([d_in, d_out]),
        );
        self.fc.bias = Some(Param::from_tensor(Tensor::from_floats(fc_bias, &device)));
        self
    }

    /// # Shapes
    /// - x: `[batch, 1, samples]` normalised ECG
    /// - returns: `[batch, 2]` logits (class 1 = ventricular tachyarrhythmia)
    pub(crate) fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        let mut h = relu(self.stem.forward(x)); // [b, W, L/2]
        for b in &self.blocks {
            let t = relu(b.c1.forward(h.clone())); // [b, cout, L']
            let t = b.c2.forward(t);
            let mut sc = h;
            if b.stride == 2 {
                sc = max_pool1d(sc, 2, 2, 0, 1, true); // [b, cin, L']
            }
            if b.pad_channels > 0 {
                let [n, _, l] = sc.dims();
                let zeros = Tensor::zeros([n, b.pad_channels, l], &sc.device());
                sc = Tensor::cat(vec![sc, zeros], 1); // [b, cout, L']
            }
            h = relu(t + sc);
        }
        let [n, c, _] = h.dims();
        self.fc.forward(h.mean_dim(2).reshape([n, c])) // [b, 2]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    #[test]
    fn plan_and_macs_follow_the_rules() {
        let a = ResNeXtArch {
            width: 8,
            depth: 2,
            group_width: 4,
            kernel: 16,
        };
        let (stem, blocks) = a.plan(7500);
        assert_eq!((stem.cout, stem.l_out), (8, 3750));
        assert_eq!(blocks.len(), 2);
        assert_eq!(
            (blocks[0].0.cin, blocks[0].0.cout, blocks[0].0.l_out),
            (8, 8, 1875)
        );
        assert_eq!(
            (blocks[1].0.cout, blocks[1].0.l_out, blocks[1].0.groups),
            (16, 938, 2)
        );
        // stem 3750*8*1*16 + b0 2*(1875*8*4*16) + b1 938*16*4*16 + 938*16*8*16 + fc 32
        let expect = 480_000 + 1_920_000 + 960_512 + 1_921_024 + 32;
        assert_eq!(a.macs(7500), expect);
        assert_eq!(a.final_channels(), 16);
    }

    #[test]
    fn forward_shape_and_param_count() {
        let a = ResNeXtArch {
            width: 8,
            depth: 4,
            group_width: 4,
            kernel: 16,
        };
        let m = a.init::<Flex>(&Default::default());
        let y = m.forward(Tensor::zeros([3, 1, 7500], &Default::default()));
        assert_eq!(y.dims(), [3, 2]);
        assert!(m.num_params() > 1000);
    }
}
