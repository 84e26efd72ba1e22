//! The model zoo: model families, the folder format (`models/<name>/manifest.json` plus
//! `weights.mpk`), loading with validation, and input preprocessing shared with serving.
//! ECG models also carry a fast inference form (`fast`: the direct convolutions of `direct` on
//! flex, the GEMM convolutions of `conv_gemm` elsewhere), which serving runs; the
//! training-form modules stay its reference. [`LeadSets`] says which lead sets a monitor
//! can send (lead II alone, V alone, both) a set of members scores.
//!
//! [`train`](crate::training::train) writes models here; the engine and the composer read them.

mod conv_gemm;
mod direct;
mod fast;
mod lead_sets;
mod listing;
mod manifest;
mod model;
pub mod preprocess;
mod resnext;
mod vitals;

pub use conv_gemm::{
    FoldedConv, FoldedWeights, layout_fits, max_pool2, pad_channels, pad_length, same_padding,
    to_channels_first, to_grouped,
};
pub use fast::{
    FAST_KERNEL_ENV, FastResNeXt1d, FoldedBlock, INFERENCE_PATH_ENV, InferencePath, Kernel,
    LayoutPlan, plan_layout,
};
pub use lead_sets::LeadSets;
pub use listing::{ZooListing, list};
pub use manifest::{
    Architecture, FeatureScaling, Input, Lead, MANIFEST_FILE, MANIFEST_FORMAT, Manifest,
    Predictions, SplitMetrics, Training, WEIGHTS_FILE, WeightsRef,
};
pub use model::{
    Net, NetInput, ZooModel, forward_raw, logits_to_probs, prepare_input, sha256_hex, weights_bytes,
};
pub use resnext::{ConvShape, ResNeXt1d, ResNeXtArch};
pub use vitals::{VitalsArch, VitalsNet};

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;

/// What can go wrong with a model folder. Every variant names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum ZooError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: malformed manifest: {reason}")]
    Manifest { path: PathBuf, reason: String },
    #[error(
        "{path}: checksum mismatch (manifest says sha256 {expected}, file has {actual}): the file was changed or is corrupt"
    )]
    Checksum {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("{path}: unusable weights: {reason}")]
    Weights { path: PathBuf, reason: String },
    #[error("model {model}: bad input: {reason}")]
    Input { model: String, reason: String },
}

/// Model folders under `dir` (sub-directories not starting with `.`), sorted by name.
pub fn model_dirs(dir: &Path) -> Result<Vec<PathBuf>, ZooError> {
    let rd = std::fs::read_dir(dir).map_err(|source| ZooError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let mut out: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// Loads every model folder under `dir`: the good ones, and an error for each bad one.
pub fn load_dir<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<(Vec<ZooModel<B>>, Vec<ZooError>), ZooError> {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for d in model_dirs(dir)? {
        match ZooModel::load(&d, device) {
            Ok(m) => ok.push(m),
            Err(e) => bad.push(e),
        }
    }
    Ok((ok, bad))
}

/// Writes a model folder atomically: into `<zoo>/.tmp-<name>`, then renamed over
/// `<zoo>/<name>`. Fills in the manifest's weights reference from `weights`.
pub fn write_model(
    zoo: &Path,
    mut manifest: Manifest,
    weights: &[u8],
) -> Result<PathBuf, ZooError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ZooError::Io { path, source }
    };
    manifest.weights = WeightsRef {
        file: WEIGHTS_FILE.into(),
        sha256: sha256_hex(weights),
        bytes: weights.len() as u64,
    };
    let tmp = zoo.join(format!(".tmp-{}", manifest.name));
    let dest = zoo.join(&manifest.name);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
    }
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    std::fs::write(tmp.join(WEIGHTS_FILE), weights).map_err(io(&tmp))?;
    let json = serde_json::to_string_pretty(&manifest).expect("a manifest serialises");
    std::fs::write(tmp.join(MANIFEST_FILE), json).map_err(io(&tmp))?;
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(io(&dest))?;
    }
    std::fs::rename(&tmp, &dest).map_err(io(&dest))?;
    Ok(dest)
}
