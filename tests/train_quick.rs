//! `holmes train --quick` end to end through the real binary, then `holmes zoo list --json`
//! on what it wrote, and a second run that keeps the finished models (resumability).

mod common;

use std::process::Command;

fn holmes() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_holmes"));
    c.current_dir(common::root());
    c
}

#[test]
fn quick_training_writes_a_listable_zoo_and_resumes() {
    let Some(data) = common::data_dir("quick_training_writes_a_listable_zoo_and_resumes") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let o = holmes()
            .args(["train", "--quick", "--data"])
            .arg(&data)
            .arg("--out")
            .arg(out.path())
            .args(extra)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "train failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let first = run(&[]);
    assert!(first.contains("trained 4 model(s), kept 0"), "{first}");

    let o = holmes()
        .args(["zoo", "list", "--json", "--dir"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let models = v["models"].as_array().unwrap();
    assert_eq!(models.len(), 4);
    for m in models {
        for k in ["val_roc_auc", "test_roc_auc", "val_pr_auc", "test_pr_auc"] {
            let x = m[k].as_f64().unwrap_or(f64::NAN);
            assert!((0.0..=1.0).contains(&x), "{} {k} = {x}", m["name"]);
        }
        assert!(m["parameters"].as_u64().unwrap() > 0);
    }
    assert!(v["ensemble"]["test_roc_auc"].as_f64().unwrap() > 0.5);
    assert!(v["refused"].as_array().unwrap().is_empty());

    // A second run keeps every finished model; a removed one is retrained alone.
    std::fs::remove_dir_all(out.path().join("vitals-hr-mlp")).unwrap();
    let second = run(&[]);
    assert!(second.contains("trained 1 model(s), kept 3"), "{second}");

    let o = holmes()
        .args(["zoo", "list", "--dir"])
        .arg(out.path())
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("ecg-primary-5s-w8-d2") && text.contains("mean-probability ensemble"),
        "{text}"
    );
}

/// `holmes train --fold k --folds K` trains a zoo for one fold of the cross-validation, says
/// so in its manifests, and `holmes evaluate --fold-zoos` refuses a zoo that was not trained
/// for the fold it would judge.
#[test]
fn a_fold_zoo_is_trained_for_its_fold_and_checked_for_it() {
    let Some(data) = common::data_dir("a_fold_zoo_is_trained_for_its_fold_and_checked_for_it")
    else {
        return;
    };
    let zoos = tempfile::tempdir().unwrap();
    let bad = holmes()
        .args(["train", "--quick", "--fold", "4", "--folds", "3", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("1 <= k <= K"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    // Fold 1's zoo, copied as fold 2's: evaluate refuses to judge fold 2 with it.
    let o = holmes()
        .args(["train", "--quick", "--only", "ecg-primary-5s-w8-d2"])
        .args(["--fold", "1", "--folds", "3", "--data"])
        .arg(&data)
        .arg("--out")
        .arg(zoos.path().join("fold-1"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let model = "ecg-primary-5s-w8-d2";
    std::fs::create_dir_all(zoos.path().join("fold-2").join(model)).unwrap();
    for f in std::fs::read_dir(zoos.path().join("fold-1").join(model)).unwrap() {
        let f = f.unwrap().path();
        let to = zoos
            .path()
            .join("fold-2")
            .join(model)
            .join(f.file_name().unwrap());
        std::fs::copy(&f, to).unwrap();
    }
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            zoos.path()
                .join("fold-1/ecg-primary-5s-w8-d2/manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let described = manifest["training"]["data"].as_str().unwrap();
    assert!(
        described.contains("cross-validation fold 1 of 3:"),
        "{described}"
    );
    // The fold's own split, not the committed one, is what the manifest's hash names.
    let served: serde_json::Value = serde_json::from_slice(
        &std::fs::read(common::root().join("models/ecg-primary-5s-w8-d2/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_ne!(
        manifest["training"]["split_sha256"],
        served["training"]["split_sha256"]
    );

    let o = holmes()
        .args(["evaluate", "--folds", "3", "--no-noise", "--members"])
        .arg("ecg-primary-5s-w8-d2")
        .arg("--fold-zoos")
        .arg(zoos.path())
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not trained for fold 2 of 3") && err.contains("--fold 2 --folds 3"),
        "{err}"
    );
}
