//! The manifest (`manifest.json`) that sits beside each model's weights: what the model is,
//! what it eats, what it costs, how it was trained, how well it does, and its per-window
//! predictions on the validation and test windows (the composer's accuracy profiles).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::resnext::ResNeXtArch;
use super::vitals::VitalsArch;

/// Manifest format this build writes: 2 names windows by their end sample
/// (`db/record/end`) and labels them by their end; format 1 (still read) named them by their
/// start sample, as 30-s windows labelled by the VT/VF time inside them.
pub(crate) const MANIFEST_FORMAT: u32 = 2;
/// Manifest formats this build reads.
pub(crate) const READABLE_FORMATS: [u32; 2] = [1, 2];
/// File names inside a model folder.
pub const MANIFEST_FILE: &str = "manifest.json";
pub const WEIGHTS_FILE: &str = "weights.mpk";

/// Which monitoring lead an ECG model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lead {
    Primary,
    Secondary,
    Third,
}

impl Lead {
    /// Lead slot index (0, 1, 2).
    pub fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Lead::Primary => "primary",
            Lead::Secondary => "secondary",
            Lead::Third => "third",
        }
    }
}

/// What a model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "modality", rename_all = "snake_case", deny_unknown_fields)]
pub enum Input {
    /// One ECG lead, `samples` at `sample_rate_hz`, normalised per window.
    Ecg {
        lead: Lead,
        samples: usize,
        sample_rate_hz: u32,
        /// The window passes the monitor band-pass (0.5-40 Hz) before normalisation
        /// ([`monitor_bandpass`](super::preprocess::monitor_bandpass)); absent means false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        bandpass: bool,
    },
    /// The 1 Hz heart-rate series of the window (beats/min).
    HeartRate { samples: usize, sample_rate_hz: u32 },
}

impl Input {
    pub fn samples(&self) -> usize {
        match *self {
            Input::Ecg { samples, .. } | Input::HeartRate { samples, .. } => samples,
        }
    }

    /// Seconds of signal the member reads.
    pub(crate) fn secs(&self) -> f64 {
        match *self {
            Input::Ecg {
                samples,
                sample_rate_hz,
                ..
            }
            | Input::HeartRate {
                samples,
                sample_rate_hz,
            } => samples as f64 / sample_rate_hz.max(1) as f64,
        }
    }

    pub(crate) fn modality(&self) -> &'static str {
        match self {
            Input::Ecg { .. } => "ecg",
            Input::HeartRate { .. } => "vitals",
        }
    }

    /// Short description such as `ecg/primary` or `vitals/hr`.
    pub(crate) fn label(&self) -> String {
        match self {
            Input::Ecg { lead, .. } => format!("ecg/{}", lead.as_str()),
            Input::HeartRate { .. } => "vitals/hr".into(),
        }
    }
}

/// The architecture, by family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Architecture {
    #[serde(rename = "resnext1d")]
    ResNeXt1d(ResNeXtArch),
    Vitals(VitalsArch),
}

/// Mean and spread used to standardise vitals features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeatureScaling {
    pub(crate) mean: Vec<f32>,
    pub(crate) std: Vec<f32>,
}

/// The weights file and its checksum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WeightsRef {
    pub(crate) file: String,
    /// Lower-case hex SHA-256 of the file's bytes.
    pub(crate) sha256: String,
    pub(crate) bytes: u64,
}

/// How the model was trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    /// The data: databases, windowing, labelling, split.
    pub(crate) data: String,
    /// SHA-256 of the split file used.
    pub(crate) split_sha256: String,
    /// Windows (and positives among them) per split that this model saw.
    pub(crate) windows: BTreeMap<String, [usize; 2]>,
    pub(crate) epochs: usize,
    pub(crate) best_epoch: usize,
    pub(crate) seed: u64,
    /// Wall-clock seconds this model took to train.
    pub(crate) seconds: f64,
    /// Logit offset added to class 1 after training to undo the balanced sampling.
    pub prior_logit_offset: f32,
    /// `holmes` version that trained it.
    pub(crate) trainer: String,
}

/// Ranking metrics on one split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitMetrics {
    pub(crate) windows: usize,
    pub(crate) positives: usize,
    pub(crate) roc_auc: f64,
    pub(crate) pr_auc: f64,
}

/// Per-window predictions on one split.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predictions {
    /// Window ids (`db/record/end_sample`; `start_sample` in format 1).
    pub ids: Vec<String>,
    pub labels: Vec<u8>,
    /// Probability of ventricular tachyarrhythmia.
    pub probs: Vec<f32>,
}

/// Everything in `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Manifest format version ([`MANIFEST_FORMAT`]).
    pub format: u32,
    /// Unique model name, also the folder name.
    pub(crate) name: String,
    /// Model version; bumps when the weights change.
    pub(crate) version: u32,
    pub input: Input,
    pub(crate) architecture: Architecture,
    /// Present for vitals models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) feature_scaling: Option<FeatureScaling>,
    pub(crate) parameters: usize,
    pub(crate) macs_per_window: u64,
    /// Bytes of f32 weights in memory.
    pub(crate) weight_bytes: u64,
    pub(crate) weights: WeightsRef,
    pub training: Training,
    /// `validation` and `test` metrics.
    pub metrics: BTreeMap<String, SplitMetrics>,
    /// `validation` and `test` per-window predictions.
    pub predictions: BTreeMap<String, Predictions>,
}

impl Manifest {
    /// Reads the manifest of the model folder `dir` (parsed, not validated: for what it says
    /// of a model, its name and weights' checksum; loading a model validates it).
    pub fn read(dir: &std::path::Path) -> Result<Manifest, super::ZooError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| super::ZooError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| super::ZooError::Manifest {
            path,
            reason: e.to_string(),
        })
    }

    /// Consistency checks beyond the schema.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !READABLE_FORMATS.contains(&self.format) {
            return Err(format!(
                "manifest format {} is not one of the supported {READABLE_FORMATS:?}",
                self.format
            ));
        }
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "name {:?} must be non-empty [A-Za-z0-9_-]",
                self.name
            ));
        }
        match (&self.architecture, &self.input) {
            (
                Architecture::ResNeXt1d(a),
                Input::Ecg {
                    samples,
                    sample_rate_hz,
                    bandpass,
                    ..
                },
            ) => {
                a.validate()?;
                if *bandpass && *sample_rate_hz as usize != crate::core::window::SAMPLE_RATE_HZ {
                    return Err(format!(
                        "the monitor band-pass is designed for {} Hz, not {sample_rate_hz} Hz",
                        crate::core::window::SAMPLE_RATE_HZ
                    ));
                }
                if a.macs(*samples) != self.macs_per_window {
                    return Err(format!(
                        "macs_per_window {} does not match the architecture ({})",
                        self.macs_per_window,
                        a.macs(*samples)
                    ));
                }
            }
            (Architecture::Vitals(a), Input::HeartRate { .. }) => {
                a.validate()?;
                let s = self
                    .feature_scaling
                    .as_ref()
                    .ok_or("a vitals model needs feature_scaling")?;
                let n = super::preprocess::VITALS_FEATURES.len();
                if s.mean.len() != n || s.std.len() != n {
                    return Err(format!("feature_scaling needs {n} means and {n} stds"));
                }
                if s.std.iter().any(|v| !v.is_finite() || *v <= 0.0) {
                    return Err("feature_scaling std must be finite and positive".into());
                }
            }
            _ => return Err("architecture family does not fit the input modality".into()),
        }
        if self.weights.file.contains(['/', '\\']) || self.weights.file.starts_with('.') {
            return Err(format!(
                "weights file {:?} must be a plain file name",
                self.weights.file
            ));
        }
        if self.weights.sha256.len() != 64
            || !self.weights.sha256.chars().all(|c| c.is_ascii_hexdigit())
        {
            return Err("weights.sha256 must be 64 hex digits".into());
        }
        for (split, p) in &self.predictions {
            if p.ids.len() != p.labels.len() || p.ids.len() != p.probs.len() {
                return Err(format!(
                    "predictions.{split}: ids, labels and probs differ in length"
                ));
            }
            if p.probs.iter().any(|v| !(0.0..=1.0).contains(v)) {
                return Err(format!(
                    "predictions.{split}: a probability is outside [0, 1]"
                ));
            }
        }
        Ok(())
    }
}
