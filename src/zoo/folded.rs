//! A convolution with its BatchNorm folded in, as host-side weights and bias: what the
//! inference form's direct kernels ([`direct`](super::direct)) are built from, by
//! [`ResNeXt1d::inference_form`](super::resnext::ResNeXt1d::inference_form) from a trained
//! network and by `holmes bench-cpu` from the ONNX yardstick's weights; and the "same" padding
//! (burn's and ONNX's) the direct kernels and the yardstick's check compute.

/// Host-side folded weights of one convolution, as the direct kernels take them.
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
    pub(crate) fn of_conv<B: burn::tensor::backend::Backend>(
        conv: &burn::nn::conv::Conv1d<B>,
    ) -> Self {
        let [cout, cpg, kernel] = conv.weight.dims();
        let host =
            |t: burn::tensor::Tensor<B, 1>| t.into_data().to_vec::<f32>().expect("f32 parameters");
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

/// One residual block's folded convolutions, as
/// [`FastResNeXt1d::new`](super::fast::FastResNeXt1d::new) takes them.
#[derive(Debug, Clone)]
pub(crate) struct FoldedBlock {
    pub(crate) c1: FoldedWeights,
    pub(crate) c2: FoldedWeights,
}
