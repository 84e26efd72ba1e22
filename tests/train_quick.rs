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
