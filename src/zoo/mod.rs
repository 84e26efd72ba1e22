//! The model zoo: model families, the folder format (`models/<name>/manifest.json` plus
//! `weights.mpk`), loading with validation, and input preprocessing shared with serving.
//! ECG models also carry a fast inference form (`fast`: BatchNorm folded by `folded`, the
//! direct convolutions of `direct` on host memory), which serving runs on the CPU; the
//! training-form modules stay its reference and are what a GPU runs. [`LeadSets`] says which
//! lead sets a monitor can send (lead II alone, V alone, both) a set of members scores.
//!
//! [`train`](crate::training::train) writes models here; the engine and the composer read them.

mod direct;
mod fast;
mod folded;
mod lead_sets;
mod listing;
mod manifest;
mod model;
pub(crate) mod preprocess;
mod resnext;
mod vitals;

pub use crate::core::hash::sha256_hex;
pub use fast::InferencePath;
pub(crate) use fast::{FastResNeXt1d, on_host};
pub(crate) use folded::{FoldedBlock, FoldedWeights, same_padding};
pub use lead_sets::LeadSets;
pub(crate) use listing::list;
pub(crate) use manifest::{
    Architecture, FeatureScaling, MANIFEST_FORMAT, Predictions, SplitMetrics, Training, WeightsRef,
};
pub use manifest::{Input, Lead, MANIFEST_FILE, Manifest, WEIGHTS_FILE};
pub(crate) use model::read_checked;
pub(crate) use model::{Net, prepare_input, weights_bytes};
pub use model::{ZooModel, logits_to_probs};
pub(crate) use resnext::{ConvShape, ResNeXt1d, ResNeXtArch};
pub(crate) use vitals::VitalsArch;

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
pub(crate) fn write_model(
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
