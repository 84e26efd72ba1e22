//! The fast inference path (folded BatchNorm, direct convolutions on the host) computes what the
//! plain burn path computes: for every committed ECG model, on synthetic ECG (always) and on
//! real PhysioNet windows (when the data is present), logits and probabilities agree within
//! 1e-4.

mod common;

use holmes::core::stats::max_abs_diff;
use holmes::signal::ecgsyn::EcgSyn;
use holmes::training::dataset::{self, Database, Dataset, WindowSpec};
use holmes::zoo::{self, InferencePath, Input, ZooModel, logits_to_probs};

type B = burn::backend::Flex;

const TOLERANCE: f32 = 1e-4;

fn ecg_models() -> Vec<ZooModel<B>> {
    let (models, bad) =
        zoo::load_dir::<B>(&common::root().join("models"), &Default::default()).unwrap();
    assert!(bad.is_empty(), "refused: {bad:?}");
    let ecg: Vec<_> = models
        .into_iter()
        .filter(|m| matches!(m.manifest.input, Input::Ecg { .. }))
        .collect();
    assert!(!ecg.is_empty(), "models/ holds no ECG model");
    ecg
}

/// Runs the plain path and the fast path (which flex serves) on the same batch and compares
/// logits and probabilities.
fn assert_paths_agree(m: &ZooModel<B>, windows: &[Vec<f32>], what: &str) {
    assert_eq!(
        m.inference_path(),
        InferencePath::Fast,
        "flex serves the fast path"
    );
    let inputs: Vec<&[f32]> = windows.iter().map(Vec::as_slice).collect();
    let plain = m.logits(&inputs, InferencePath::Plain).unwrap();
    let fast = m.logits(&inputs, InferencePath::Fast).unwrap();
    assert_eq!(plain.len(), 2 * windows.len());
    let worst = max_abs_diff(&plain, &fast);
    assert!(
        worst < TOLERANCE,
        "{} on {what}: logits differ by {worst} (plain {plain:?}, fast {fast:?})",
        m.name()
    );
    let offset = m.manifest.training.prior_logit_offset;
    for (p, f) in logits_to_probs(&plain, offset)
        .iter()
        .zip(logits_to_probs(&fast, offset))
    {
        assert!(
            (p - f).abs() < TOLERANCE,
            "{} on {what}: {p} vs {f}",
            m.name()
        );
    }
}

/// Sinus rhythm, a fast rhythm and a noisy window: a batch of three 30 s windows.
fn synthetic_windows(samples: usize) -> Vec<Vec<f32>> {
    [(1, 70.0, 0.0), (2, 190.0, 0.05), (3, 110.0, 0.3)]
        .into_iter()
        .map(|(seed, hr, noise)| {
            let mut g = EcgSyn::new(seed, hr);
            (0..samples)
                .map(|i| g.next_sample() + noise * ((i as f32 * 0.37).sin() + (i % 7) as f32 * 0.1))
                .collect()
        })
        .collect()
}

#[test]
fn fast_path_matches_plain_on_synthetic_ecg() {
    for m in ecg_models() {
        let windows = synthetic_windows(m.manifest.input.samples());
        assert_paths_agree(&m, &windows, "synthetic ECG");
        // A batch of one takes the same path as a batch of many.
        assert_paths_agree(&m, &windows[..1], "one synthetic window");
    }
}

#[test]
fn fast_path_matches_plain_on_real_windows() {
    let Some(data) = common::data_dir("fast_path_matches_plain_on_real_windows") else {
        return;
    };
    // vfdb 422 holds ventricular flutter/fibrillation and sinus rhythm.
    let ds = Dataset::new(
        dataset::load_keys(&data, &[(Database::Vfdb, "422".to_owned())]).unwrap(),
        WindowSpec::default(),
    );
    let positive = ds.windows.iter().position(|w| w.positive());
    let picks: Vec<usize> = [Some(0), positive, Some(ds.windows.len() - 1)]
        .into_iter()
        .flatten()
        .collect();
    for m in ecg_models() {
        let Input::Ecg { lead, samples, .. } = m.manifest.input else {
            unreachable!()
        };
        let windows: Vec<Vec<f32>> = picks
            .iter()
            .filter_map(|&k| ds.ecg(&ds.windows[k], lead.index(), samples))
            .map(<[f32]>::to_vec)
            .collect();
        assert!(
            !windows.is_empty(),
            "vfdb 422 has {} windows",
            ds.windows.len()
        );
        assert_paths_agree(&m, &windows, "vfdb/422");
    }
}

#[test]
fn the_switch_selects_the_path() {
    let mut m = ecg_models().swap_remove(0);
    m.set_inference_path(InferencePath::Plain);
    assert_eq!(m.inference_path(), InferencePath::Plain);
    let w = synthetic_windows(m.manifest.input.samples());
    let inputs: Vec<&[f32]> = w.iter().map(Vec::as_slice).collect();
    let plain = m.predict(&inputs).unwrap();
    m.set_inference_path(InferencePath::Fast);
    assert_eq!(m.inference_path(), InferencePath::Fast);
    let fast = m.predict(&inputs).unwrap();
    for (p, f) in plain.iter().zip(&fast) {
        assert!((p - f).abs() < TOLERANCE);
    }
}
