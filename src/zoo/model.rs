//! A loaded, validated zoo model: manifest plus network on a device, and the one `predict`
//! that training evaluation, the zoo checks and serving all call.
//!
//! An ECG model also carries its inference form ([`fast`](super::fast)), which `predict` runs
//! on the host unless the plain path was chosen ([`InferencePath`], `HOLMES_INFERENCE=plain`);
//! on a GPU it always runs the plain path ([`InferencePath::for_backend`]).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use super::fast::{FastResNeXt1d, InferencePath};
use super::manifest::{Architecture, FeatureScaling, Input, MANIFEST_FILE, Manifest};
use super::preprocess::{VITALS_FEATURES, prepare_ecg_into, vitals_features};
use super::resnext::ResNeXt1d;
use super::vitals::VitalsNet;
use super::{ZooError, sha256_hex};

/// The network behind a model, by family. One lives per loaded model, so the size gap
/// between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub(crate) enum Net<B: Backend> {
    Ecg(ResNeXt1d<B>),
    Vitals(VitalsNet<B>),
}

impl<B: Backend> Net<B> {
    /// A freshly initialised network for `arch`.
    pub(crate) fn init(arch: &Architecture, device: &B::Device) -> Net<B> {
        match arch {
            Architecture::ResNeXt1d(a) => Net::Ecg(a.init(device)),
            Architecture::Vitals(a) => Net::Vitals(a.init(device)),
        }
    }
}

/// A model ready to predict.
#[derive(Debug)]
pub struct ZooModel<B: Backend> {
    pub manifest: Manifest,
    /// Folder the model was loaded from.
    pub dir: PathBuf,
    net: Net<B>,
    /// The inference form of an ECG network, when the fast path is on.
    fast: Option<FastResNeXt1d<B>>,
    device: B::Device,
}

/// The manifest in `dir` (read, parsed and validated) and the weights file it names, checked
/// against its checksum: what [`ZooModel::load`] checks before it decodes anything, and all a
/// reader of the zoo's folders needs who does not run the model.
pub(crate) fn read_checked(dir: &Path) -> Result<(Manifest, Vec<u8>), ZooError> {
    let mpath = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&mpath).map_err(|source| ZooError::Io {
        path: mpath.clone(),
        source,
    })?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| ZooError::Manifest {
        path: mpath.clone(),
        reason: e.to_string(),
    })?;
    manifest.validate().map_err(|reason| ZooError::Manifest {
        path: mpath.clone(),
        reason,
    })?;
    let wpath = dir.join(&manifest.weights.file);
    let bytes = std::fs::read(&wpath).map_err(|source| ZooError::Io {
        path: wpath.clone(),
        source,
    })?;
    let actual = sha256_hex(&bytes);
    if actual != manifest.weights.sha256 {
        return Err(ZooError::Checksum {
            path: wpath,
            expected: manifest.weights.sha256.clone(),
            actual,
        });
    }
    Ok((manifest, bytes))
}

/// Serialises a network's weights (named MessagePack, full precision).
pub(crate) fn weights_bytes<B: Backend>(net: Net<B>) -> Vec<u8> {
    NamedMpkBytesRecorder::<FullPrecisionSettings>::default()
        .record(net.into_record(), ())
        .expect("serialising a record to memory cannot fail")
}

impl<B: Backend> ZooModel<B> {
    /// Loads and validates the model in `dir`: manifest schema and consistency, weights
    /// checksum, weights decoding, parameter count, and one forward pass on zeros.
    pub fn load(dir: &Path, device: &B::Device) -> Result<ZooModel<B>, ZooError> {
        let (manifest, bytes) = read_checked(dir)?;
        let wpath = dir.join(&manifest.weights.file);
        let fresh = Net::<B>::init(&manifest.architecture, device);
        let expected_params = fresh.num_params();
        let loaded = std::panic::catch_unwind(AssertUnwindSafe(|| {
            NamedMpkBytesRecorder::<FullPrecisionSettings>::default()
                .load(bytes, device)
                .map(|record| fresh.load_record(record))
        }));
        let net = match loaded {
            Ok(Ok(net)) => net,
            Ok(Err(e)) => {
                return Err(ZooError::Weights {
                    path: wpath,
                    reason: e.to_string(),
                });
            }
            Err(_) => {
                return Err(ZooError::Weights {
                    path: wpath,
                    reason: "weights do not fit the manifest's architecture".into(),
                });
            }
        };
        let params = net.num_params();
        if params != expected_params || params != manifest.parameters {
            return Err(ZooError::Weights {
                path: wpath,
                reason: format!(
                    "holds {params} parameters; the architecture has {expected_params}, \
                     the manifest says {}",
                    manifest.parameters
                ),
            });
        }
        let mut model = ZooModel {
            manifest,
            dir: dir.to_owned(),
            net,
            fast: None,
            device: device.clone(),
        };
        model.set_inference_path(InferencePath::for_backend::<B>());
        let probe = vec![0.0f32; model.manifest.input.samples()];
        if model.inference_path() == InferencePath::Fast && !model.fast_path_agrees(&probe) {
            // The plain path stays the reference: serve it rather than a fast path that
            // fails or disagrees on this backend.
            tracing::warn!(model = %model.manifest.name, "Fast inference path failed its check; serving the plain path");
            model.set_inference_path(InferencePath::Plain);
        }
        let smoke = std::panic::catch_unwind(AssertUnwindSafe(|| model.predict(&[&probe])));
        match smoke {
            Ok(Ok(p)) if p.len() == 1 && p[0].is_finite() => Ok(model),
            _ => Err(ZooError::Weights {
                path: dir.join(&model.manifest.weights.file),
                reason: "a forward pass on a zero window failed".into(),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// Chooses the forward pass `predict` runs. Vitals models have one path only.
    pub fn set_inference_path(&mut self, path: InferencePath) {
        self.fast = match (path, &self.net) {
            (InferencePath::Fast, Net::Ecg(m)) => Some(m.inference_form()),
            _ => None,
        };
    }

    /// Whether the fast path runs and matches the plain one (1e-3 on logits) on `window`.
    fn fast_path_agrees(&self, window: &[f32]) -> bool {
        let run = |path| {
            std::panic::catch_unwind(AssertUnwindSafe(|| self.logits(&[window], path)))
                .ok()
                .and_then(Result::ok)
        };
        match (run(InferencePath::Fast), run(InferencePath::Plain)) {
            (Some(f), Some(p)) => {
                f.len() == p.len() && f.iter().zip(&p).all(|(a, b)| (a - b).abs() < 1e-3)
            }
            _ => false,
        }
    }

    /// The forward pass `predict` runs.
    pub fn inference_path(&self) -> InferencePath {
        if self.fast.is_some() {
            InferencePath::Fast
        } else {
            InferencePath::Plain
        }
    }

    /// Probability of ventricular tachyarrhythmia for each raw input window: ECG in mV
    /// (`input.samples` long) or the 1 Hz heart-rate series, as the manifest's input says.
    pub fn predict(&self, inputs: &[&[f32]]) -> Result<Vec<f32>, ZooError> {
        let logits = self.logits(inputs, self.inference_path())?;
        let offset = self.manifest.training.prior_logit_offset;
        Ok(logits_to_probs(&logits, offset))
    }

    /// `[n, 2]` logits (flattened) for raw input windows through `path`; the fast path is
    /// built on the fly if the model does not hold it.
    pub fn logits(&self, inputs: &[&[f32]], path: InferencePath) -> Result<Vec<f32>, ZooError> {
        let want = self.manifest.input.samples();
        if let Some(bad) = inputs.iter().find(|x| x.len() != want) {
            return Err(ZooError::Input {
                model: self.manifest.name.clone(),
                reason: format!("got {} samples, the model reads {want}", bad.len()),
            });
        }
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let fast = match (path, &self.fast, &self.net) {
            (InferencePath::Plain, _, _) | (_, _, Net::Vitals(_)) => None,
            (InferencePath::Fast, Some(f), _) => Some(std::borrow::Cow::Borrowed(f)),
            (InferencePath::Fast, None, Net::Ecg(m)) => {
                Some(std::borrow::Cow::Owned(m.inference_form()))
            }
        };
        Ok(match fast {
            None => forward_raw(&self.net, &self.manifest, inputs, &self.device),
            Some(f) => {
                let x = prepare_input::<B>(&self.manifest.input, None, inputs, &self.device);
                let NetInput::Ecg(x) = x else {
                    unreachable!("ECG models take ECG input")
                };
                f.forward(x)
                    .into_data()
                    .to_vec::<f32>()
                    .expect("logits are f32")
            }
        })
    }
}

/// A batch prepared for a network.
pub(crate) enum NetInput<B: Backend> {
    /// `[batch, 1, samples]` normalised ECG.
    Ecg(Tensor<B, 3>),
    /// `[batch, features]` standardised vitals features.
    Features(Tensor<B, 2>),
}

impl<B: Backend> Net<B> {
    /// # Shapes
    /// - returns: `[batch, 2]` logits
    pub(crate) fn forward(&self, x: NetInput<B>) -> Tensor<B, 2> {
        match (self, x) {
            (Net::Ecg(m), NetInput::Ecg(t)) => m.forward(t),
            (Net::Vitals(m), NetInput::Features(t)) => m.forward(t),
            _ => panic!("network and input families differ"),
        }
    }
}

/// Turns raw windows (ECG in mV, or the 1 Hz heart-rate series) into a network input.
pub(crate) fn prepare_input<B: Backend>(
    manifest_input: &Input,
    scaling: Option<&FeatureScaling>,
    inputs: &[&[f32]],
    device: &B::Device,
) -> NetInput<B> {
    let n = inputs.len();
    match manifest_input {
        &Input::Ecg { bandpass, .. } => {
            // Every window of a batch has the same length (the model's).
            let len = inputs.first().map_or(0, |x| x.len());
            let mut buf = vec![0.0f32; n * len];
            for (x, o) in inputs.iter().zip(buf.chunks_exact_mut(len.max(1))) {
                prepare_ecg_into(x, bandpass, o);
            }
            NetInput::Ecg(Tensor::from_data(TensorData::new(buf, [n, 1, len]), device))
        }
        Input::HeartRate { .. } => {
            let s = scaling.expect("vitals models carry feature scaling");
            let f = VITALS_FEATURES.len();
            let mut buf = Vec::with_capacity(n * f);
            for x in inputs {
                let feats = vitals_features(x);
                buf.extend((0..f).map(|j| (feats[j] - s.mean[j]) / s.std[j]));
            }
            NetInput::Features(Tensor::from_data(TensorData::new(buf, [n, f]), device))
        }
    }
}

/// Runs `net` on raw inputs, returning `[n, 2]` logits flattened.
pub(crate) fn forward_raw<B: Backend>(
    net: &Net<B>,
    manifest: &Manifest,
    inputs: &[&[f32]],
    device: &B::Device,
) -> Vec<f32> {
    let x = prepare_input(
        &manifest.input,
        manifest.feature_scaling.as_ref(),
        inputs,
        device,
    );
    net.forward(x)
        .into_data()
        .to_vec::<f32>()
        .expect("logits are f32")
}

/// Class-1 probabilities from `[n, 2]` logits, with `offset` added to the class-1 logit.
pub fn logits_to_probs(logits: &[f32], offset: f32) -> Vec<f32> {
    logits
        .chunks_exact(2)
        .map(|l| {
            let z = (l[1] - l[0] + offset) as f64;
            (1.0 / (1.0 + (-z).exp())) as f32
        })
        .collect()
}
