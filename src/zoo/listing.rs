//! `holmes zoo list`: the table of models with their metrics, the refused folders with their
//! reasons, and the validation/test ROC-AUC of two mean-probability ensembles: of all models,
//! and of the best three by validation ROC-AUC (chosen on validation, so its test figure is an
//! honest one beside the best single model's).

use std::fmt::Write as _;
use std::path::Path;

use burn::tensor::backend::Backend;
use serde::Serialize;

use super::{Architecture, ZooError, load_dir};
use crate::core::metrics::{ensemble_mean, pr_auc, roc_auc};

/// One model's row.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ModelRow {
    pub(crate) name: String,
    pub(crate) version: u32,
    pub(crate) input: String,
    pub(crate) architecture: String,
    pub(crate) parameters: usize,
    pub(crate) macs_per_window: u64,
    pub(crate) weight_bytes: u64,
    pub(crate) val_roc_auc: f64,
    pub(crate) val_pr_auc: f64,
    pub(crate) test_roc_auc: f64,
    pub(crate) test_pr_auc: f64,
    pub(crate) train_seconds: f64,
}

/// A mean-probability ensemble of listed models.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EnsembleRow {
    /// Its members, by name.
    pub(crate) members: Vec<String>,
    pub(crate) val_roc_auc: f64,
    pub(crate) val_pr_auc: f64,
    pub(crate) test_roc_auc: f64,
    pub(crate) test_pr_auc: f64,
}

/// A folder that was refused, and why.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Refused {
    pub(crate) error: String,
}

/// Everything `zoo list` shows.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ZooListing {
    pub(crate) models: Vec<ModelRow>,
    /// Every model.
    pub(crate) ensemble: Option<EnsembleRow>,
    /// The best three by validation ROC-AUC.
    pub(crate) best3: Option<EnsembleRow>,
    pub(crate) refused: Vec<Refused>,
}

/// Loads (and so validates) every model under `dir` and tabulates them.
pub(crate) fn list<B: Backend>(dir: &Path, device: &B::Device) -> Result<ZooListing, ZooError> {
    let (models, bad) = load_dir::<B>(dir, device)?;
    let rows: Vec<ModelRow> = models
        .iter()
        .map(|m| {
            let mf = &m.manifest;
            let metric = |s: &str| mf.metrics.get(s).copied();
            let nan = f64::NAN;
            ModelRow {
                name: mf.name.clone(),
                version: mf.version,
                input: mf.input.label(),
                architecture: match &mf.architecture {
                    Architecture::ResNeXt1d(a) => {
                        format!("resnext1d w{} d{} g{}", a.width, a.depth, a.groups())
                    }
                    Architecture::Vitals(a) if a.hidden == 0 => "logistic regression".into(),
                    Architecture::Vitals(a) => format!("mlp {}", a.hidden),
                },
                parameters: mf.parameters,
                macs_per_window: mf.macs_per_window,
                weight_bytes: mf.weight_bytes,
                val_roc_auc: metric("validation").map_or(nan, |m| m.roc_auc),
                val_pr_auc: metric("validation").map_or(nan, |m| m.pr_auc),
                test_roc_auc: metric("test").map_or(nan, |m| m.roc_auc),
                test_pr_auc: metric("test").map_or(nan, |m| m.pr_auc),
                train_seconds: mf.training.seconds,
            }
        })
        .collect();
    let mean_of = |chosen: &[usize]| {
        let split = |s: &str| {
            ensemble_mean(chosen.iter().filter_map(|&i| {
                models[i]
                    .manifest
                    .predictions
                    .get(s)
                    .map(|p| (&p.ids[..], &p.labels[..], &p.probs[..]))
            }))
        };
        let (vl, vs) = split("validation");
        let (tl, ts) = split("test");
        EnsembleRow {
            members: chosen
                .iter()
                .map(|&i| models[i].manifest.name.clone())
                .collect(),
            val_roc_auc: roc_auc(&vl, &vs),
            val_pr_auc: pr_auc(&vl, &vs),
            test_roc_auc: roc_auc(&tl, &ts),
            test_pr_auc: pr_auc(&tl, &ts),
        }
    };
    let all: Vec<usize> = (0..models.len()).collect();
    let ensemble = (!models.is_empty()).then(|| mean_of(&all));
    let mut by_val: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].val_roc_auc.is_finite())
        .collect();
    by_val.sort_by(|&a, &b| rows[b].val_roc_auc.total_cmp(&rows[a].val_roc_auc));
    let best3 = (by_val.len() > 3).then(|| mean_of(&by_val[..3]));
    Ok(ZooListing {
        models: rows,
        ensemble,
        best3,
        refused: bad
            .into_iter()
            .map(|e| Refused {
                error: e.to_string(),
            })
            .collect(),
    })
}

impl ZooListing {
    /// The human-readable table.
    pub(crate) fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<24} {:>3} {:<15} {:<22} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7}",
            "model",
            "ver",
            "input",
            "architecture",
            "params",
            "MMAC",
            "KiB",
            "valAUC",
            "valPR",
            "testAUC",
            "testPR",
            "train_s"
        );
        for r in &self.models {
            let _ = writeln!(
                s,
                "{:<24} {:>3} {:<15} {:<22} {:>8} {:>8.2} {:>8.1} {:>7.4} {:>7.4} {:>7.4} {:>7.4} {:>7.0}",
                r.name,
                r.version,
                r.input,
                r.architecture,
                r.parameters,
                r.macs_per_window as f64 / 1e6,
                r.weight_bytes as f64 / 1024.0,
                r.val_roc_auc,
                r.val_pr_auc,
                r.test_roc_auc,
                r.test_pr_auc,
                r.train_seconds
            );
        }
        if let Some(e) = &self.ensemble {
            let _ = writeln!(
                s,
                "\nmean-probability ensemble of all {} models: validation ROC-AUC {:.4} (PR-AUC {:.4}), \
                 test ROC-AUC {:.4} (PR-AUC {:.4})",
                e.members.len(),
                e.val_roc_auc,
                e.val_pr_auc,
                e.test_roc_auc,
                e.test_pr_auc
            );
            if let Some(b) = &self.best3 {
                let _ = writeln!(
                    s,
                    "mean-probability ensemble of the best 3 by validation ROC-AUC ({}): \
                     validation ROC-AUC {:.4} (PR-AUC {:.4}), test ROC-AUC {:.4} (PR-AUC {:.4})",
                    b.members.join(", "),
                    b.val_roc_auc,
                    b.val_pr_auc,
                    b.test_roc_auc,
                    b.test_pr_auc
                );
            }
        } else {
            let _ = writeln!(s, "\nno usable models");
        }
        for r in &self.refused {
            let _ = writeln!(s, "refused: {}", r.error);
        }
        s
    }
}
