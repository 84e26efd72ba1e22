//! `holmes zoo rules` through the real binary: the committed rule book holds for the committed
//! zoo, and in a zoo of its own a rule whose member was retrained, is missing, or was validated
//! with another beat counter is listed as no longer holding, with the reason.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

fn zoo_rules(dir: &Path, json: bool) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_holmes"));
    c.args(["zoo", "rules", "--dir"]).arg(dir);
    if json {
        c.arg("--json");
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "zoo rules failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn sha_of(dir: &Path, model: &str) -> String {
    let t = std::fs::read_to_string(dir.join(model).join("manifest.json")).unwrap();
    let v: Value = serde_json::from_str(&t).unwrap();
    v["weights"]["sha256"].as_str().unwrap().to_owned()
}

#[test]
fn the_committed_rules_hold_for_the_committed_zoo() {
    let models = common::root().join("models");
    let rows: Value = serde_json::from_slice(&zoo_rules(&models, true).stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(r["problems"], json!([]), "{r}");
    }
    // The default ensemble is validated with the beat counter the zoo serves, and reached
    // its target.
    assert!(
        rows.iter()
            .any(|r| r["beat_counter"] == true && r["reached"] == true),
        "{rows:?}"
    );
}

#[test]
fn a_rule_that_no_longer_holds_says_why() {
    let zoo = tempfile::tempdir().unwrap();
    let (a, b) = ("ecg-primary-5s-w8-d2", "ecg-secondary-5s-w8-d2");
    for m in [a, b] {
        common::copy_model(m, zoo.path());
    }
    std::fs::copy(
        common::root().join("models/beats.json"),
        zoo.path().join("beats.json"),
    )
    .unwrap();
    let beats_sha = {
        use sha2::Digest;
        let bytes = std::fs::read(zoo.path().join("beats.json")).unwrap();
        format!("{:x}", sha2::Sha256::digest(bytes))
    };
    let member = |name: &str, sha: &str| json!({"name": name, "sha256": sha});
    let rule = |members: Vec<Value>, on: f64| {
        json!({
            "members": members,
            "hop_secs": 5, "window_secs": 30,
            "rule": {"on": on, "off": on / 2.0, "k": 1, "n": 1},
            "validation": {"records": 44, "target_sensitivity": 0.95, "episodes": 88,
                           "detected": 85, "false_alarms_per_hour": 0.5,
                           "ec57_sensitivity": 0.955}})
    };
    let (sa, sb) = (sha_of(zoo.path(), a), sha_of(zoo.path(), b));
    let book = json!({"format": 1, "rules": [
        // Holds: both models and the counter as validated.
        rule(vec![member(a, &sa), member(b, &sb), member("beats", &beats_sha)], 0.4),
        // The secondary model was retrained since.
        rule(vec![member(a, &sa), member(b, "0123")], 0.3),
        // A model the zoo no longer has.
        rule(vec![member(a, &sa), member("ecg-primary-30s-w16-d4", "abcd")], 0.2),
        // Validated with another beat counter.
        rule(vec![member(b, &sb), member("beats", "feed")], 0.1),
    ]});
    std::fs::write(zoo.path().join("alarm_rules.json"), book.to_string()).unwrap();

    let rows: Value = serde_json::from_slice(&zoo_rules(zoo.path(), true).stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    let problems = |i: usize| -> Vec<&str> {
        rows[i]["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect()
    };
    assert!(problems(0).is_empty(), "{}", rows[0]);
    assert_eq!(rows[0]["beat_counter"], true);
    assert_eq!(rows[0]["members"], json!([a, b]));
    assert_eq!(problems(1), [format!("{b} was retrained since")]);
    assert_eq!(
        problems(2),
        ["ecg-primary-30s-w16-d4 is not in the zoo".to_owned()]
    );
    assert_eq!(
        problems(3),
        ["the zoo's beat counter is not the one it was validated with"]
    );
    // Without the counter in the zoo, the counted rule no longer holds either.
    std::fs::remove_file(zoo.path().join("beats.json")).unwrap();
    let rows: Value = serde_json::from_slice(&zoo_rules(zoo.path(), true).stdout).unwrap();
    assert_eq!(
        rows[0]["problems"],
        json!(["the zoo has no beat counter (beats.json)"])
    );
    // The table says the same to a person.
    let text = String::from_utf8(zoo_rules(zoo.path(), false).stdout).unwrap();
    assert!(
        text.contains("rule 2 no longer holds: ecg-secondary-5s-w8-d2 was retrained since"),
        "{text}"
    );
    assert!(text.contains("0 of 4 rules hold for this zoo"), "{text}");
}

#[test]
fn a_broken_rules_file_is_an_error_naming_it() {
    let zoo = tempfile::tempdir().unwrap();
    std::fs::write(zoo.path().join("alarm_rules.json"), "{ not json").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args(["zoo", "rules", "--dir"])
        .arg(zoo.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("alarm_rules.json"), "{err}");
}
