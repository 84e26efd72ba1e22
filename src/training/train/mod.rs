//! `holmes train`: builds the zoo from PhysioNet data, model by model, resumably.
//!
//! Reads records through [`dataset`](crate::training::dataset), fits each planned model
//! ([`fit`]), and writes it with [`zoo::write_model`](crate::zoo::write_model). A model whose
//! folder already loads is kept, so an interrupted run picks up where it stopped.

mod fit;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::core::window::SAMPLE_RATE_HZ;
use crate::training::dataset::{
    self, Augment, Dataset, DatasetError, NoiseBank, Split, SplitName, WindowSpec,
};
use crate::zoo::{
    self, Architecture, Input, Lead, MANIFEST_FORMAT, Manifest, ResNeXtArch, Training, VitalsArch,
    WeightsRef, ZooError, ZooModel,
};

/// What can go wrong training.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrainError {
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Zoo(#[from] ZooError),
    #[error("{0}")]
    Data(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One model to train.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ModelPlan {
    pub(crate) name: String,
    pub(crate) input: Input,
    pub(crate) architecture: Architecture,
}

/// Optimisation settings for one model family.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Hyper {
    pub(crate) batch_size: usize,
    pub(crate) learning_rate: f64,
    pub(crate) max_epochs: usize,
    /// Epochs without a better validation ROC-AUC before stopping.
    pub(crate) patience: usize,
    /// Windows drawn per epoch (half positive).
    pub(crate) examples_per_epoch: usize,
    /// Stop a model after this many seconds (keeping its best epoch so far).
    pub(crate) max_seconds: Option<f64>,
}

/// Everything that shapes a training run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrainConfig {
    pub(crate) ecg: Hyper,
    pub(crate) vitals: Hyper,
    pub(crate) seed: u64,
    /// Cap on training windows per epoch (quick mode).
    pub(crate) max_windows_per_epoch: Option<usize>,
    /// Cap on validation and test windows evaluated (quick mode).
    pub(crate) max_eval_windows: Option<usize>,
    /// Early stopping watches all validation positives and this many negatives per positive
    /// (a fixed draw); the manifest's metrics use every validation window.
    pub(crate) early_stop_negatives_per_positive: usize,
    /// Windows per inference batch when evaluating.
    pub(crate) eval_batch: usize,
    /// The evaluation grid (validation and test predictions).
    pub(crate) window: WindowSpec,
    /// Training window ends are this many samples apart.
    pub(crate) train_hop_samples: usize,
    /// How training windows are corrupted.
    pub(crate) augment: Augment,
}

impl TrainConfig {
    /// The settings of a full training run (the zoo that replaces the committed one).
    pub(crate) fn full() -> TrainConfig {
        TrainConfig {
            ecg: Hyper {
                batch_size: 32,
                learning_rate: 2e-3,
                max_epochs: 40,
                patience: 5,
                examples_per_epoch: 2048,
                max_seconds: Some(900.0),
            },
            vitals: Hyper {
                batch_size: 128,
                learning_rate: 1e-2,
                max_epochs: 60,
                patience: 10,
                examples_per_epoch: 4096,
                max_seconds: Some(240.0),
            },
            seed: 20_201_123,
            max_windows_per_epoch: None,
            max_eval_windows: None,
            early_stop_negatives_per_positive: 3,
            eval_batch: 64,
            window: WindowSpec::default(),
            train_hop_samples: SAMPLE_RATE_HZ / 2,
            augment: Augment::default(),
        }
    }

    /// A few minutes end to end: two epochs on a handful of windows.
    pub(crate) fn quick() -> TrainConfig {
        let mut c = TrainConfig::full();
        c.ecg.max_epochs = 2;
        c.vitals.max_epochs = 5;
        c.max_windows_per_epoch = Some(96);
        c.max_eval_windows = Some(160);
        c
    }

    pub(crate) fn for_architecture(&self, a: &Architecture) -> Hyper {
        match a {
            Architecture::ResNeXt1d(_) => self.ecg,
            Architecture::Vitals(_) => self.vitals,
        }
    }
}

/// Observation windows of the ECG models (seconds), as HOLMES varies the window as well as
/// the network.
pub(crate) const ECG_WINDOWS_SECS: [usize; 3] = [5, 10, 30];

/// The zoo: ECG models on three observation windows x two lead roles x three network sizes,
/// and two vitals models, cheapest first so an interrupted run has the most models. `quick`
/// plans a tiny zoo.
pub(crate) fn zoo_plan(quick: bool) -> Vec<ModelPlan> {
    let ecg = |lead: Lead, secs: usize, width, depth| ModelPlan {
        name: format!("ecg-{}-{secs}s-w{width}-d{depth}", lead.as_str()),
        input: Input::Ecg {
            lead,
            samples: secs * SAMPLE_RATE_HZ,
            sample_rate_hz: SAMPLE_RATE_HZ as u32,
            bandpass: true,
        },
        architecture: Architecture::ResNeXt1d(ResNeXtArch {
            width,
            depth,
            group_width: 4,
            kernel: 16,
        }),
    };
    let vitals = |name: &str, hidden| ModelPlan {
        name: name.to_owned(),
        input: Input::HeartRate {
            samples: 30,
            sample_rate_hz: 1,
        },
        architecture: Architecture::Vitals(VitalsArch { hidden }),
    };
    let mut plan = vec![vitals("vitals-hr-logreg", 0), vitals("vitals-hr-mlp", 16)];
    if quick {
        plan.push(ecg(Lead::Primary, 5, 8, 2));
        plan.push(ecg(Lead::Secondary, 10, 8, 2));
        return plan;
    }
    let mut ecgs: Vec<ModelPlan> = [Lead::Primary, Lead::Secondary]
        .into_iter()
        .flat_map(|lead| {
            ECG_WINDOWS_SECS.into_iter().flat_map(move |secs| {
                [(8, 2), (16, 4), (32, 4)]
                    .into_iter()
                    .map(move |(w, d)| ecg(lead, secs, w, d))
            })
        })
        .collect();
    ecgs.sort_by_key(|p| (macs(p), p.name.clone()));
    plan.extend(ecgs);
    plan
}

fn macs(p: &ModelPlan) -> u64 {
    match (&p.architecture, &p.input) {
        (Architecture::ResNeXt1d(a), i) => a.macs(i.samples()),
        (Architecture::Vitals(a), _) => a.macs(),
    }
}

/// Options of `holmes train`.
#[derive(Debug, Clone)]
pub(crate) struct TrainOptions {
    /// PhysioNet folder holding vfdb/, cudb/, mitdb/, svdb/ and nstdb/ (its noise records too).
    pub(crate) data: PathBuf,
    /// Zoo folder to write.
    pub(crate) out: PathBuf,
    /// The committed split.
    pub(crate) split: PathBuf,
    pub(crate) quick: bool,
    /// Train only models whose names contain one of these.
    pub(crate) only: Vec<String>,
    /// Retrain models that already exist.
    pub(crate) force: bool,
    /// Train for one fold of cross-validation instead of the committed split's parts.
    pub(crate) fold: Option<Fold>,
}

/// Fold `fold` (1-based) of `of`: the split [`dataset::fold_split`] makes over every record
/// of the committed split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fold {
    pub(crate) fold: usize,
    pub(crate) of: usize,
}

impl Fold {
    /// Where a fold's zoo goes unless told: `runs/folds-K/fold-k`.
    pub(crate) fn default_out(self) -> PathBuf {
        PathBuf::from(format!("runs/folds-{}/fold-{}", self.of, self.fold))
    }
}

/// Trains the planned zoo; returns the names of models trained and kept.
pub(crate) fn run(opts: &TrainOptions) -> Result<(Vec<String>, Vec<String>), TrainError> {
    let cfg = if opts.quick {
        TrainConfig::quick()
    } else {
        TrainConfig::full()
    };
    let split = Split::read(&opts.split)?;
    let mut split_text = std::fs::read(&opts.split).map_err(|source| TrainError::Io {
        path: opts.split.clone(),
        source,
    })?;
    std::fs::create_dir_all(&opts.out).map_err(|source| TrainError::Io {
        path: opts.out.clone(),
        source,
    })?;
    let plan: Vec<ModelPlan> = zoo_plan(opts.quick)
        .into_iter()
        .filter(|p| opts.only.is_empty() || opts.only.iter().any(|o| p.name.contains(o.as_str())))
        .collect();
    let device = Default::default();
    let (mut todo, mut kept) = (Vec::new(), Vec::new());
    for p in plan {
        let dir = opts.out.join(&p.name);
        if !opts.force
            && dir.exists()
            && ZooModel::<burn::backend::Flex>::load(&dir, &device).is_ok()
        {
            kept.push(p.name);
        } else {
            todo.push(p);
        }
    }
    if todo.is_empty() {
        return Ok((Vec::new(), kept));
    }

    let t0 = Instant::now();
    let keys: Vec<_> = dataset::record_keys(&opts.data)?
        .into_iter()
        .filter(|(db, name)| split.of(&format!("{}/{name}", db.name())).is_some())
        .collect();
    let keys = if opts.quick {
        quick_records(&split, keys)
    } else {
        keys
    };
    let records = dataset::load_keys(&opts.data, &keys)?;
    let split = match opts.fold {
        Some(f) => {
            let s = dataset::fold_split(&records, f.of, f.fold - 1);
            split_text = toml::to_string(&s)
                .expect("a split serialises")
                .into_bytes();
            tracing::info!(
                fold = f.fold,
                of = f.of,
                train = s.train.len(),
                validation = s.validation.len(),
                test = s.test.len(),
                "Training for one fold"
            );
            s
        }
        None => split,
    };
    let ds = Dataset::new(records, cfg.window);
    let [train, validation]: [NoiseBank; 2] =
        NoiseBank::load(&opts.data, &[SplitName::Train, SplitName::Validation])?
            .try_into()
            .expect("one bank per part asked for");
    let banks = fit::Banks { train, validation };
    tracing::info!(
        records = ds.records.len(),
        windows = ds.windows.len(),
        positives = ds.windows.iter().filter(|w| w.positive()).count(),
        secs = t0.elapsed().as_secs_f64(),
        "Data set built"
    );

    let multi = MultiProgress::new();
    let overall = multi.add(ProgressBar::new(todo.len() as u64));
    overall.set_style(
        ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} models, {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    overall.set_prefix("zoo");
    let mut trained = Vec::new();
    for p in &todo {
        let bar = multi.add(ProgressBar::new(0));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} batches {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(p.name.clone());
        let fitted = fit::fit(p, &ds, &split, &banks, &cfg, &bar)?;
        bar.finish_and_clear();
        let dir = write(p, fitted, &cfg, opts.fold, &split_text, &opts.out)?;
        let m = ZooModel::<burn::backend::Flex>::load(&dir, &device)?;
        tracing::info!(
            model = %p.name,
            val_roc_auc = m.manifest.metrics["validation"].roc_auc,
            test_roc_auc = m.manifest.metrics["test"].roc_auc,
            secs = m.manifest.training.seconds.round(),
            "Model written"
        );
        trained.push(p.name.clone());
        overall.inc(1);
    }
    overall.finish();
    Ok((trained, kept))
}

/// Quick mode reads two records per database and split.
fn quick_records(
    split: &Split,
    keys: Vec<(dataset::Database, String)>,
) -> Vec<(dataset::Database, String)> {
    let mut count: BTreeMap<(dataset::Database, SplitName), usize> = BTreeMap::new();
    keys.into_iter()
        .filter(|(db, name)| {
            let s = split
                .of(&format!("{}/{name}", db.name()))
                .expect("filtered to the split");
            let c = count.entry((*db, s)).or_default();
            *c += 1;
            *c <= 2
        })
        .collect()
}

fn data_description(cfg: &TrainConfig) -> String {
    let w = &cfg.window;
    format!(
        "PhysioNet vfdb, cudb, mitdb, svdb and nstdb 118e*/119e* at 250 Hz; a window is labelled \
         by its end: positive when a VT run (>= 5 ventricular beats > 100/min; vfdb/cudb: (VT \
         label) or VF/VFL episode is confirmed by then and ended at most {} s before, unsure \
         (left out) between onset and confirmation; trained on ends every {} ms with nstdb \
         noise (train part of its time split) at {}..{} dB and monitor artifacts; evaluated on \
         ends every {} s from {} s plus every {} s inside episodes; a lead is absent where > \
         {:.0}% of the window is noise-marked; patient-wise split config/split.toml",
        dataset::LABEL_GRACE_SECS,
        cfg.train_hop_samples * 1000 / SAMPLE_RATE_HZ,
        cfg.augment.snr_db.0,
        cfg.augment.snr_db.1,
        w.hop_secs,
        w.first_end_secs,
        w.episode_hop_secs,
        w.max_noise_fraction * 100.0
    )
}

fn write(
    p: &ModelPlan,
    f: fit::Fitted,
    cfg: &TrainConfig,
    fold: Option<Fold>,
    split_text: &[u8],
    out: &std::path::Path,
) -> Result<PathBuf, TrainError> {
    let parameters = burn::module::Module::num_params(&f.net);
    let previous = std::fs::read_to_string(out.join(&p.name).join(zoo::MANIFEST_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<Manifest>(&t).ok())
        .map_or(0, |m| m.version);
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        name: p.name.clone(),
        version: previous + 1,
        input: p.input,
        architecture: p.architecture,
        feature_scaling: f.feature_scaling,
        parameters,
        macs_per_window: macs(p),
        weight_bytes: parameters as u64 * 4,
        weights: WeightsRef {
            file: String::new(),
            sha256: String::new(),
            bytes: 0,
        },
        training: Training {
            data: data_description(cfg)
                + &fold.map_or(String::new(), |f| {
                    format!(
                        "; cross-validation fold {} of {}: that fold's patients held out, the \
                         next fold's for early stopping, the rest learnt from (split_sha256 \
                         is that split's)",
                        f.fold, f.of
                    )
                }),
            split_sha256: zoo::sha256_hex(split_text),
            windows: f
                .windows
                .iter()
                .map(|&(s, n, pos)| (s.as_str().to_owned(), [n, pos]))
                .collect(),
            epochs: f.epochs,
            best_epoch: f.best_epoch,
            seed: cfg.seed,
            seconds: f.seconds,
            prior_logit_offset: f.prior_logit_offset,
            trainer: format!("holmes {}", env!("CARGO_PKG_VERSION")),
        },
        metrics: f
            .metrics
            .into_iter()
            .map(|(s, m)| (s.as_str().to_owned(), m))
            .collect(),
        predictions: f
            .predictions
            .into_iter()
            .map(|(s, p)| (s.as_str().to_owned(), p))
            .collect(),
    };
    let weights = zoo::weights_bytes(f.net);
    Ok(zoo::write_model(out, manifest, &weights)?)
}
