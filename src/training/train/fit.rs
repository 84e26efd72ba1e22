//! Fitting one zoo model: balanced epochs of windows labelled by their end (a quarter of them
//! ending in the first seconds of an episode), each corrupted by recorded noise and monitor
//! artifacts ([`Augment`]); Adam; early stopping on validation ROC-AUC over clean and noisy
//! copies of the same windows; then the prior correction and the predictions (clean
//! validation and test grid windows) that go into its manifest.

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
use crate::training::dataset::{
    Augment, Dataset, NoiseBank, Split, SplitName, Window, qrs_peak_to_peak,
};
use crate::zoo::preprocess::{VITALS_FEATURES, vitals_features};
use crate::zoo::{
    Architecture, FeatureScaling, Input, Net, Predictions, SplitMetrics, logits_to_probs,
    prepare_input,
};

use super::{ModelPlan, TrainConfig, TrainError};

type Train = Autodiff<Flex>;

/// What fitting produced: the network and what the manifest records of it.
pub(crate) struct Fitted {
    pub(crate) net: Net<Flex>,
    pub(crate) feature_scaling: Option<FeatureScaling>,
    pub(crate) epochs: usize,
    pub(crate) best_epoch: usize,
    pub(crate) prior_logit_offset: f32,
    pub(crate) seconds: f64,
    pub(crate) windows: Vec<(SplitName, usize, usize)>,
    pub(crate) metrics: Vec<(SplitName, SplitMetrics)>,
    pub(crate) predictions: Vec<(SplitName, Predictions)>,
}

/// The window end a model can first read: its own length, in samples at 250 Hz.
fn first_end(plan: &ModelPlan) -> usize {
    match plan.input {
        Input::Ecg { .. } => plan.input.samples(),
        Input::HeartRate { samples, .. } => samples * SAMPLE_RATE_HZ,
    }
}

/// Windows a model can read: its ECG lead present and mostly clean, or (vitals) any window
/// long enough.
fn usable(
    plan: &ModelPlan,
    ds: &Dataset,
    windows: impl IntoIterator<Item = Window>,
) -> Vec<Window> {
    windows
        .into_iter()
        .filter(|w| w.end >= first_end(plan))
        .filter(|w| match plan.input {
            Input::Ecg { lead, samples, .. } => ds.lead_usable(w, lead.index(), samples),
            Input::HeartRate { .. } => true,
        })
        .collect()
}

/// What the model reads of window `w`, clean.
fn raw(plan: &ModelPlan, ds: &Dataset, w: &Window) -> Vec<f32> {
    match plan.input {
        Input::Ecg { lead, samples, .. } => ds
            .ecg(w, lead.index(), samples)
            .expect("usable windows have the lead")
            .to_vec(),
        Input::HeartRate { samples, .. } => ds.heart_rate(w, samples),
    }
}

/// Beat positions (indices into the window) of an ECG window, for the SNR calibration.
fn beats_in(ds: &Dataset, w: &Window, len: usize) -> Vec<usize> {
    let start = w.end - len;
    let beats = &ds.records[w.record].beats;
    let from = beats.partition_point(|&b| b < start as i64);
    beats[from..]
        .iter()
        .take_while(|&&b| b < w.end as i64)
        .map(|&b| b as usize - start)
        .collect()
}

/// What the model reads of `w`, corrupted by `aug` with noise from `bank` (ECG only).
fn corrupted(
    plan: &ModelPlan,
    ds: &Dataset,
    w: &Window,
    aug: &Augment,
    bank: &NoiseBank,
    rng: &mut SmallRng,
) -> Vec<f32> {
    let mut x = raw(plan, ds, w);
    if let Input::Ecg { .. } = plan.input {
        let pp = qrs_peak_to_peak(&x, &beats_in(ds, w, x.len()));
        let keep_tail = (KEEP_TAIL_SECS * SAMPLE_RATE_HZ).min(x.len());
        aug.apply(bank, &mut x, pp, keep_tail, rng);
    }
    x
}

/// Seconds at a window's end that a lead-off stretch never covers.
const KEEP_TAIL_SECS: usize = 4;
/// Positives whose end is this close after an episode's confirmation are onset examples.
const ONSET_ZONE_SECS: i64 = 4;

/// The window ends shortly after an episode became visible: the first seconds of a run.
fn near_onset(ds: &Dataset, w: &Window) -> bool {
    let zone = ONSET_ZONE_SECS * SAMPLE_RATE_HZ as i64;
    ds.records[w.record]
        .episodes
        .iter()
        .any(|e| (e.confirmed..e.confirmed + zone).contains(&(w.end as i64)))
}

fn feature_scaling(plan: &ModelPlan, ds: &Dataset, train: &[Window]) -> Option<FeatureScaling> {
    matches!(plan.architecture, Architecture::Vitals(_)).then(|| {
        let f = VITALS_FEATURES.len();
        let feats: Vec<[f32; 5]> = train
            .iter()
            .map(|w| vitals_features(&raw(plan, ds, w)))
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

/// Logits of `net` on the given inputs, in batches.
fn logits(
    plan: &ModelPlan,
    scaling: Option<&FeatureScaling>,
    net: &Net<Flex>,
    inputs: &[Vec<f32>],
    batch: usize,
) -> Vec<f32> {
    let device = Default::default();
    let mut out = Vec::with_capacity(inputs.len() * 2);
    for chunk in inputs.chunks(batch) {
        let refs: Vec<&[f32]> = chunk.iter().map(Vec::as_slice).collect();
        let x = prepare_input::<Flex>(&plan.input, scaling, &refs, &device);
        out.extend(
            net.forward(x)
                .into_data()
                .to_vec::<f32>()
                .expect("f32 logits"),
        );
    }
    out
}

/// Logits of `net` on clean windows, read a batch at a time.
fn logits_on(
    plan: &ModelPlan,
    scaling: Option<&FeatureScaling>,
    net: &Net<Flex>,
    ds: &Dataset,
    windows: &[Window],
    batch: usize,
) -> Vec<f32> {
    windows
        .chunks(batch)
        .flat_map(|c| {
            let inputs: Vec<Vec<f32>> = c.iter().map(|w| raw(plan, ds, w)).collect();
            logits(plan, scaling, net, &inputs, batch)
        })
        .collect()
}

/// All positives of `windows` plus a fixed draw of `k` negatives per positive.
fn stratified(windows: &[Window], k: usize, rng: &mut SmallRng) -> Vec<Window> {
    let (pos, mut neg): (Vec<Window>, Vec<Window>) = windows.iter().partition(|w| w.positive());
    neg.shuffle(rng);
    neg.truncate(pos.len() * k);
    [pos, neg].concat()
}

fn labels(windows: &[Window]) -> Vec<bool> {
    windows.iter().map(Window::positive).collect()
}

/// Evenly spaced subset of at most `cap` (deterministic), for quick runs.
fn cap(w: Vec<Window>, cap: Option<usize>) -> Vec<Window> {
    match cap {
        Some(c) if w.len() > c => (0..c).map(|k| w[k * w.len() / c]).collect(),
        _ => w,
    }
}

/// The noise banks fitting draws from: train for augmentation, validation for early stopping.
pub(crate) struct Banks {
    pub(crate) train: NoiseBank,
    pub(crate) validation: NoiseBank,
}

/// Trains `plan` on the data set's train split and evaluates it on validation and test.
pub(crate) fn fit(
    plan: &ModelPlan,
    ds: &Dataset,
    split: &Split,
    banks: &Banks,
    cfg: &TrainConfig,
    bar: &ProgressBar,
) -> Result<Fitted, TrainError> {
    let started = Instant::now();
    let device = Default::default();
    let seed = cfg.seed ^ fnv1a(plan.name.as_bytes());
    <Train as Backend>::seed(&device, seed);
    let mut rng = SmallRng::seed_from_u64(seed);

    let pool = usable(
        plan,
        ds,
        ds.dense(
            split,
            SplitName::Train,
            first_end(plan),
            cfg.train_hop_samples,
        ),
    );
    let grid = |name| {
        let w: Vec<Window> = ds
            .indices(split, name)
            .iter()
            .map(|&i| ds.windows[i])
            .collect();
        cap(usable(plan, ds, w), cfg.max_eval_windows)
    };
    let (val, test) = (grid(SplitName::Validation), grid(SplitName::Test));
    let (pos, neg): (Vec<Window>, Vec<Window>) = pool.iter().partition(|w| w.positive());
    let onset: Vec<Window> = pos.iter().copied().filter(|w| near_onset(ds, w)).collect();
    let val_has_both = {
        let l = labels(&val);
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
    let scaling = feature_scaling(plan, ds, &cap(pool.clone(), Some(20_000)));
    let hp = cfg.for_architecture(&plan.architecture);

    let mut net = Net::<Train>::init(&plan.architecture, &device);
    let mut optim = AdamConfig::new().init::<Train, Net<Train>>();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    // Early stopping watches validation windows clean and under validation noise.
    let watch = stratified(&val, cfg.early_stop_negatives_per_positive, &mut rng);
    let watch_aug = Augment {
        noise_p: 1.0,
        snr_db: (0.0, 12.0),
        artifact_p: 0.0,
    };
    let mut watch_inputs: Vec<Vec<f32>> = watch.iter().map(|w| raw(plan, ds, w)).collect();
    let mut watch_labels = labels(&watch);
    if matches!(plan.input, Input::Ecg { .. }) {
        let mut noisy_rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
        for w in &watch {
            watch_inputs.push(corrupted(
                plan,
                ds,
                w,
                &watch_aug,
                &banks.validation,
                &mut noisy_rng,
            ));
        }
        watch_labels.extend(labels(&watch));
    }
    let (mut best, mut best_auc, mut best_epoch, mut stale) =
        (net.valid(), f64::NEG_INFINITY, 0, 0);
    let mut epochs = 0;
    let per_epoch = cfg.max_windows_per_epoch.unwrap_or(hp.examples_per_epoch);
    for epoch in 1..=hp.max_epochs {
        epochs = epoch;
        // Half positives (half of those from the first seconds of an episode), half negatives.
        let mut order: Vec<Window> = (0..per_epoch)
            .map(|k| {
                let from = match k % 4 {
                    0 if !onset.is_empty() => &onset,
                    0 | 1 => &pos,
                    _ => &neg,
                };
                from[rng.random_range(0..from.len())]
            })
            .collect();
        order.shuffle(&mut rng);
        let batches: Vec<&[Window]> = order
            .chunks(hp.batch_size)
            .filter(|b| b.len() >= 2)
            .collect();
        bar.set_length(batches.len() as u64);
        bar.set_position(0);
        let mut loss_sum = 0.0;
        for b in &batches {
            let inputs: Vec<Vec<f32>> = b
                .iter()
                .map(|w| corrupted(plan, ds, w, &cfg.augment, &banks.train, &mut rng))
                .collect();
            let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
            let y: Vec<i64> = b.iter().map(|w| i64::from(w.positive())).collect();
            let x = prepare_input::<Train>(&plan.input, scaling.as_ref(), &refs, &device);
            let y = Tensor::<Train, 1, Int>::from_data(TensorData::new(y, [b.len()]), &device);
            let loss = loss_fn.forward(net.forward(x), y);
            loss_sum += loss.clone().into_scalar() as f64;
            let grads = GradientsParams::from_grads(loss.backward(), &net);
            net = optim.step(hp.learning_rate, net, grads);
            bar.inc(1);
        }
        let valid = net.valid();
        let probs = logits_to_probs(
            &logits(
                plan,
                scaling.as_ref(),
                &valid,
                &watch_inputs,
                cfg.eval_batch,
            ),
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
        if hp
            .max_seconds
            .is_some_and(|m| started.elapsed().as_secs_f64() > m)
        {
            tracing::info!(model = %plan.name, epoch, "Time budget spent, keeping the best epoch");
            break;
        }
    }

    // Epochs train at a positive rate of one half; shift the logit back to the true prior.
    let rho = 0.5f64;
    let pi = pos.len() as f64 / pool.len() as f64;
    let logit = |p: f64| (p / (1.0 - p)).ln();
    let prior_logit_offset = (logit(pi) - logit(rho)) as f32;

    let mut metrics = Vec::new();
    let mut predictions = Vec::new();
    let mut windows = vec![(SplitName::Train, pool.len(), pos.len())];
    for (name, w) in [(SplitName::Validation, &val), (SplitName::Test, &test)] {
        let l = labels(w);
        let p = logits_to_probs(
            &logits_on(plan, scaling.as_ref(), &best, ds, w, cfg.eval_batch),
            prior_logit_offset,
        );
        let npos = l.iter().filter(|&&x| x).count();
        windows.push((name, w.len(), npos));
        metrics.push((
            name,
            SplitMetrics {
                windows: w.len(),
                positives: npos,
                roc_auc: roc_auc(&l, &p),
                pr_auc: pr_auc(&l, &p),
            },
        ));
        predictions.push((
            name,
            Predictions {
                ids: w.iter().map(|w| ds.id(w)).collect(),
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
