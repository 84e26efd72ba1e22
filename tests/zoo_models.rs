//! The committed zoo: every model in `models/` loads, passes validation, and reproduces its
//! stored predictions on real windows rebuilt from the PhysioNet files.

mod common;

use holmes::training::dataset::{self, Database, Dataset, WindowSpec};
use holmes::zoo::{self, Input, ZooModel};

type B = burn::backend::Flex;

#[test]
fn every_committed_model_loads() {
    let dir = common::root().join("models");
    let (models, bad) = zoo::load_dir::<B>(&dir, &Default::default()).unwrap();
    assert!(bad.is_empty(), "refused: {bad:?}");
    assert!(!models.is_empty(), "models/ holds no model");
    for m in &models {
        assert_eq!(
            m.dir.file_name().unwrap().to_str(),
            Some(m.name()),
            "folder is the name"
        );
        assert!(
            m.manifest.metrics.contains_key("validation")
                && m.manifest.metrics.contains_key("test")
        );
        for split in ["validation", "test"] {
            let p = &m.manifest.predictions[split];
            assert!(!p.ids.is_empty(), "{} has {split} predictions", m.name());
        }
    }
}

#[test]
fn committed_models_reproduce_their_stored_predictions() {
    let Some(data) = common::data_dir("committed_models_reproduce_their_stored_predictions") else {
        return;
    };
    let dir = common::root().join("models");
    let (models, _) = zoo::load_dir::<B>(&dir, &Default::default()).unwrap();
    // A few test windows per model: the first, the last, and the first positive.
    let mut wanted: Vec<(String, usize)> = Vec::new(); // (window id, model index)
    for (mi, m) in models.iter().enumerate() {
        let p = &m.manifest.predictions["test"];
        let mut picks = vec![0, p.ids.len() - 1];
        picks.extend(p.labels.iter().position(|&l| l == 1));
        wanted.extend(picks.into_iter().map(|k| (p.ids[k].clone(), mi)));
    }
    let mut keys: Vec<(Database, String)> = wanted
        .iter()
        .map(|(id, _)| {
            let mut parts = id.split('/');
            let db = Database::from_name(parts.next().unwrap()).unwrap();
            (db, parts.next().unwrap().to_owned())
        })
        .collect();
    keys.sort();
    keys.dedup();
    let ds = Dataset::new(
        dataset::load_keys(&data, &keys).unwrap(),
        WindowSpec::default(),
    );
    let mut checked = 0;
    for (id, mi) in &wanted {
        let m: &ZooModel<B> = &models[*mi];
        // Format 1 named a 30-s window by its start, format 2 names a window by its end.
        let legacy = m.manifest.format == 1;
        let named = ds.find(id).unwrap_or_else(|| panic!("window {id} rebuilt"));
        let w = if legacy {
            ds.window_at(named.record, named.end + 30 * 250)
        } else {
            named
        };
        let samples = m.manifest.input.samples();
        let x: Vec<f32> = match m.manifest.input {
            Input::Ecg { lead, .. } => ds.ecg(&w, lead.index(), samples).unwrap().to_vec(),
            Input::HeartRate { .. } => ds.heart_rate(&w, samples),
        };
        let got = m.predict(&[&x]).unwrap()[0];
        let p = &m.manifest.predictions["test"];
        let k = p.ids.iter().position(|i| i == id).unwrap();
        assert!(
            (got - p.probs[k]).abs() < 1e-4,
            "{} on {id}: predicted {got}, stored {}",
            m.name(),
            p.probs[k]
        );
        // Format 1's labels followed the former rule (VT/VF time inside the window).
        if !legacy {
            assert_eq!(
                p.labels[k] == 1,
                w.positive(),
                "{} on {id}: stored label",
                m.name()
            );
        }
        checked += 1;
    }
    assert!(checked >= 2 * models.len());
}
