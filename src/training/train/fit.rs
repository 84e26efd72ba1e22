//! Fitting one zoo model: balanced epochs, Adam, early stopping on validation ROC-AUC, then
//! the prior correction and the predictions that go into its manifest.

use std::time::Instant;

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use indicatif::ProgressBar;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::core::metrics::{pr_auc, roc_auc};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::training::dataset::{Dataset, SplitName, overlap};
use crate::zoo::preprocess::{VITALS_FEATURES, vitals_features};
use crate::zoo::{
    Architecture, FeatureScaling, Input, Net, Predictions, SplitMetrics, logits_to_probs,
    prepare_input,
};

use super::{ModelPlan, TrainConfig, TrainError};

type Train = Autodiff<Flex>;

/// What fitting produced: the network and what the manifest records of it.
pub struct Fitted {
    pub net: Net<Flex>,
    pub feature_scaling: Option<FeatureScaling>,
    pub epochs: usize,
    pub best_epoch: usize,
    pub prior_logit_offset: f32,
    pub seconds: f64,
    pub windows: Vec<(SplitName, usize, usize)>,
    pub metrics: Vec<(SplitName, SplitMetrics)>,
    pub predictions: Vec<(SplitName, Predictions)>,
}

/// Windows a model can read: its ECG lead present, or (vitals) any window.
fn usable(plan: &ModelPlan, ds: &Dataset, idx: &[usize]) -> Vec<usize> {
    idx.iter()
        .copied()
        .filter(|&i| match plan.input {
            Input::Ecg { lead, .. } => ds.windows[i].leads[lead.index()],
            Input::HeartRate { .. } => true,
        })
        .collect()
}

fn raw<'a>(plan: &ModelPlan, ds: &'a Dataset, i: usize) -> &'a [f32] {
    let w = &ds.windows[i];
    match plan.input {
        Input::Ecg { lead, .. } => ds
            .ecg(w, lead.index())
            .expect("usable windows have the lead"),
        Input::HeartRate { .. } => &w.heart_rate,
    }
}

fn feature_scaling(plan: &ModelPlan, ds: &Dataset, train: &[usize]) -> Option<FeatureScaling> {
    matches!(plan.architecture, Architecture::Vitals(_)).then(|| {
        let f = VITALS_FEATURES.len();
        let feats: Vec<[f32; 5]> = train
            .iter()
            .map(|&i| vitals_features(raw(plan, ds, i)))
            .collect();
        let n = feats.len().max(1) as f64;
        let mean: Vec<f32> = (0..f)
            .map(|j| (feats.iter().map(|v| v[j] as f64).sum::<f64>() / n) as f32)
            .collect();
        let std = (0..f)
            .map(|j| {
                let var = feats
                    .iter()
                    .map(|v| (v[j] - mean[j]) as f64)
                    .map(|d| d * d)
                    .sum::<f64>()
                    / n;
                (var.sqrt() as f32).max(1e-3)
            })
            .collect();
        FeatureScaling { mean, std }
    })
}

/// Logits of `net` on windows `idx`, in batches.
fn logits(
    plan: &ModelPlan,
    scaling: Option<&FeatureScaling>,
    net: &Net<Flex>,
    ds: &Dataset,
    idx: &[usize],
    batch: usize,
) -> Vec<f32> {
    let device = Default::default();
    let mut out = Vec::with_capacity(idx.len() * 2);
    for chunk in idx.chunks(batch) {
        let inputs: Vec<&[f32]> = chunk.iter().map(|&i| raw(plan, ds, i)).collect();
        let x = prepare_input::<Flex>(&plan.input, scaling, &inputs, &device);
        out.extend(
            net.forward(x)
                .into_data()
                .to_vec::<f32>()
                .expect("f32 logits"),
        );
    }
    out
}

/// A training example: window `i`, or a random crop of it labelled by its own content.
fn example<'a>(
    plan: &ModelPlan,
    ds: &'a Dataset,
    i: usize,
    crop_secs: Option<u32>,
    rng: &mut SmallRng,
) -> (&'a [f32], bool) {
    let w = &ds.windows[i];
    let x = raw(plan, ds, i);
    match (plan.input, crop_secs) {
        (Input::Ecg { .. }, Some(c)) if (c as usize * SAMPLE_RATE_HZ) < x.len() => {
            let len = c as usize * SAMPLE_RATE_HZ;
            let off = rng.random_range(0..=x.len() - len);
            let s = (w.start + off) as i64;
            let vt = overlap(&ds.records[w.record].positive, s, s + len as i64) as f32;
            let need = ds.spec.min_positive_secs * c as f32 / ds.spec.window_secs as f32;
            (&x[off..off + len], vt / SAMPLE_RATE_HZ as f32 >= need)
        }
        _ => (x, w.label),
    }
}

/// All positives of `idx` plus a fixed draw of `k` negatives per positive, in index order.
fn stratified(ds: &Dataset, idx: &[usize], k: usize, rng: &mut SmallRng) -> Vec<usize> {
    let (pos, mut neg): (Vec<usize>, Vec<usize>) = idx.iter().partition(|&&i| ds.windows[i].label);
    neg.shuffle(rng);
    neg.truncate(pos.len() * k);
    let mut out = [pos, neg].concat();
    out.sort_unstable();
    out
}

fn labels(ds: &Dataset, idx: &[usize]) -> Vec<bool> {
    idx.iter().map(|&i| ds.windows[i].label).collect()
}

/// Evenly spaced subset of at most `cap` (deterministic), for quick runs.
fn cap(idx: Vec<usize>, cap: Option<usize>) -> Vec<usize> {
    match cap {
        Some(c) if idx.len() > c => (0..c).map(|k| idx[k * idx.len() / c]).collect(),
        _ => idx,
    }
}

/// Trains `plan` on the data set's train split and evaluates it on validation and test.
pub fn fit(
    plan: &ModelPlan,
    ds: &Dataset,
    split: &crate::training::dataset::Split,
    cfg: &TrainConfig,
    bar: &ProgressBar,
) -> Result<Fitted, TrainError> {
    let started = Instant::now();
    let device = Default::default();
    let seed = cfg.seed ^ fnv1a(plan.name.as_bytes());
    <Train as Backend>::seed(&device, seed);
    let mut rng = SmallRng::seed_from_u64(seed);

    let train = usable(plan, ds, &ds.indices(split, SplitName::Train));
    let val = cap(
        usable(plan, ds, &ds.indices(split, SplitName::Validation)),
        cfg.max_eval_windows,
    );
    let test = cap(
        usable(plan, ds, &ds.indices(split, SplitName::Test)),
        cfg.max_eval_windows,
    );
    let (pos, neg): (Vec<usize>, Vec<usize>) = train.iter().partition(|&&i| ds.windows[i].label);
    let val_has_both = {
        let l = labels(ds, &val);
        l.contains(&true) && l.contains(&false)
    };
    if pos.is_empty() || neg.is_empty() || !val_has_both {
        return Err(TrainError::Data(format!(
            "{}: train needs positives and negatives ({} / {}) and validation both classes",
            plan.name,
            pos.len(),
            neg.len()
        )));
    }
    let scaling = feature_scaling(plan, ds, &train);
    let hp = cfg.for_architecture(&plan.architecture);

    let mut net = Net::<Train>::init(&plan.architecture, &device);
    let mut optim = AdamConfig::new().init::<Train, Net<Train>>();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let watch = stratified(ds, &val, cfg.early_stop_negatives_per_positive, &mut rng);
    let watch_labels = labels(ds, &watch);
    let (mut best, mut best_auc, mut best_epoch, mut stale) =
        (net.valid(), f64::NEG_INFINITY, 0, 0);
    let mut epochs = 0;
    let neg_per_epoch = (pos.len() * hp.negatives_per_positive).min(neg.len());
    for epoch in 1..=hp.max_epochs {
        epochs = epoch;
        let mut order = pos.clone();
        let mut negs = neg.clone();
        negs.shuffle(&mut rng);
        order.extend_from_slice(&negs[..neg_per_epoch]);
        order.shuffle(&mut rng);
        if let Some(c) = cfg.max_windows_per_epoch {
            order.truncate(c);
        }
        let batches: Vec<&[usize]> = order
            .chunks(hp.batch_size)
            .filter(|b| b.len() >= 2)
            .collect();
        let out_of_time = |t: &Instant| {
            hp.max_seconds
                .is_some_and(|m| t.elapsed().as_secs_f64() > m)
        };
        bar.set_length(batches.len() as u64);
        bar.set_position(0);
        let mut loss_sum = 0.0;
        for b in &batches {
            let (inputs, y): (Vec<&[f32]>, Vec<i64>) = b
                .iter()
                .map(|&i| {
                    let (x, l) = example(plan, ds, i, hp.crop_secs, &mut rng);
                    (x, i64::from(l))
                })
                .unzip();
            let x = prepare_input::<Train>(&plan.input, scaling.as_ref(), &inputs, &device);
            let y = Tensor::<Train, 1, Int>::from_data(TensorData::new(y, [b.len()]), &device);
            let loss = loss_fn.forward(net.forward(x), y);
            loss_sum += loss.clone().into_scalar() as f64;
            let grads = GradientsParams::from_grads(loss.backward(), &net);
            net = optim.step(hp.learning_rate, net, grads);
            bar.inc(1);
        }
        let valid = net.valid();
        let probs = logits_to_probs(
            &logits(plan, scaling.as_ref(), &valid, ds, &watch, cfg.eval_batch),
            0.0,
        );
        let auc = roc_auc(&watch_labels, &probs);
        tracing::info!(
            model = %plan.name,
            epoch,
            loss = loss_sum / batches.len().max(1) as f64,
            val_roc_auc = auc,
            secs = started.elapsed().as_secs_f64().round(),
            "Epoch done"
        );
        bar.set_message(format!("epoch {epoch}: val AUC {auc:.4}"));
        if auc > best_auc {
            (best, best_auc, best_epoch, stale) = (valid, auc, epoch, 0);
        } else {
            stale += 1;
            if stale >= hp.patience {
                break;
            }
        }
        if out_of_time(&started) {
            tracing::info!(model = %plan.name, epoch, "Time budget spent, keeping the best epoch");
            break;
        }
    }

    // Balanced epochs train at a positive rate rho; shift the logit back to the true prior pi.
    let rho = pos.len() as f64 / (pos.len() + neg_per_epoch) as f64;
    let pi = pos.len() as f64 / train.len() as f64;
    let logit = |p: f64| (p / (1.0 - p)).ln();
    let prior_logit_offset = (logit(pi) - logit(rho)) as f32;

    let mut metrics = Vec::new();
    let mut predictions = Vec::new();
    let mut windows = vec![(SplitName::Train, train.len(), pos.len())];
    for (name, idx) in [(SplitName::Validation, &val), (SplitName::Test, &test)] {
        let l = labels(ds, idx);
        let p = logits_to_probs(
            &logits(plan, scaling.as_ref(), &best, ds, idx, cfg.eval_batch),
            prior_logit_offset,
        );
        let npos = l.iter().filter(|&&x| x).count();
        windows.push((name, idx.len(), npos));
        metrics.push((
            name,
            SplitMetrics {
                windows: idx.len(),
                positives: npos,
                roc_auc: roc_auc(&l, &p),
                pr_auc: pr_auc(&l, &p),
            },
        ));
        predictions.push((
            name,
            Predictions {
                ids: idx.iter().map(|&i| ds.windows[i].id.clone()).collect(),
                labels: l.iter().map(|&x| u8::from(x)).collect(),
                probs: p,
            },
        ));
    }
    Ok(Fitted {
        net: best,
        feature_scaling: scaling,
        epochs,
        best_epoch,
        prior_logit_offset,
        seconds: started.elapsed().as_secs_f64(),
        windows,
        metrics,
        predictions,
    })
}

/// FNV-1a, to derive a per-model seed from its name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}
