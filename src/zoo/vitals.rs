//! The vitals model family: logistic regression and a small MLP on heart-rate features
//! ([`preprocess::vitals_features`](super::preprocess::vitals_features), standardised).

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use serde::{Deserialize, Serialize};

use super::preprocess::VITALS_FEATURES;

/// Hyper-parameters of a vitals model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VitalsArch {
    /// Hidden units; 0 makes a logistic regression.
    pub(crate) hidden: usize,
}

impl VitalsArch {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.hidden > 4096 {
            return Err("hidden layer is implausibly large".into());
        }
        Ok(())
    }

    /// Multiply-accumulates per window.
    pub(crate) fn macs(&self) -> u64 {
        let f = VITALS_FEATURES.len();
        match self.hidden {
            0 => (f * 2) as u64,
            h => (f * h + h * 2) as u64,
        }
    }

    pub(crate) fn init<B: Backend>(&self, device: &B::Device) -> VitalsNet<B> {
        let f = VITALS_FEATURES.len();
        match self.hidden {
            0 => VitalsNet {
                hidden: None,
                out: LinearConfig::new(f, 2).init(device),
            },
            h => VitalsNet {
                hidden: Some(LinearConfig::new(f, h).init(device)),
                out: LinearConfig::new(h, 2).init(device),
            },
        }
    }
}

/// Logistic regression (no hidden layer) or a one-hidden-layer MLP.
#[derive(Module, Debug)]
pub(crate) struct VitalsNet<B: Backend> {
    hidden: Option<Linear<B>>,
    out: Linear<B>,
}

impl<B: Backend> VitalsNet<B> {
    /// # Shapes
    /// - x: `[batch, 5]` standardised features
    /// - returns: `[batch, 2]` logits
    pub(crate) fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        match &self.hidden {
            Some(h) => self.out.forward(relu(h.forward(x))),
            None => self.out.forward(x),
        }
    }
}
