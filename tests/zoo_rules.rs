//! `holmes zoo rules` through the real binary: the committed rule book holds for the committed
//! zoo, every rule chosen by patient-wise folds, and the embedded defaults' ward serves its
//! rules validated with the beat counter; in a
//! zoo of its own a rule whose member was retrained, is missing, does not read, or was
//! validated with another beat counter is listed as no longer holding, with the reason, and a
//! rule the ward cannot serve says why; `holmes evaluate --revalidate` chooses a rule whose
//! member was retrained or whose counter was refitted again on validation, in place of the
//! old and for its target, removes one a holding rule covers, and leaves the others; with
//! `--folds K` it chooses every rule not chosen by folds yet by the folds, keeps each fold's
//! rule beside the median, and a second run has nothing left to choose.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn zoo_rules(dir: &Path, json: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_holmes"));
    c.args(["zoo", "rules", "--dir"]).arg(dir);
    if json {
        c.arg("--json");
    }
    c.output().unwrap()
}

fn rows_of(dir: &Path) -> Vec<Value> {
    let o = zoo_rules(dir, true);
    assert!(
        o.status.success(),
        "zoo rules failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["rules"].as_array().unwrap().clone()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect()
}

/// A zoo of its own holding copies of the committed `models` and beat counter, and the
/// counter's SHA-256 (its identity in the rules).
fn zoo_of(models: &[&str]) -> (tempfile::TempDir, String) {
    let zoo = tempfile::tempdir().unwrap();
    for m in models {
        common::copy_model(m, zoo.path());
    }
    let beats = zoo.path().join("beats.json");
    std::fs::copy(common::root().join("models/beats.json"), &beats).unwrap();
    let sha = holmes::zoo::sha256_hex(&std::fs::read(&beats).unwrap());
    (zoo, sha)
}

/// A rule's member as the book names it.
fn member(name: &str, sha: &str) -> Value {
    json!({"name": name, "sha256": sha})
}

/// A rule of the book for `members` at the ward's 5-s hop and 30-s window, alarm on at `on`
/// (off at half), pooled by `share`, as validation chose it for a target of 0.9.
fn book_rule(members: Vec<Value>, on: f64, share: Option<f64>) -> Value {
    json!({
        "members": members,
        "hop_secs": 5, "window_secs": 30,
        "rule": {"on": on, "off": on / 2.0, "k": 1, "n": 1},
        "primary_share": share,
        "validation": {"records": 44, "target_sensitivity": 0.9, "episodes": 88,
                       "detected": 85, "false_alarms_per_hour": 0.5,
                       "ec57_sensitivity": 0.955}})
}

/// The embedded defaults with `ensemble.models_dir` set to `models_dir`, written to `at`.
fn config_at(at: &Path, models_dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(common::root().join("config/holmes.toml")).unwrap();
    let line = "\nmodels_dir = \"models\"\n";
    assert!(text.contains(line));
    let dir = models_dir.to_str().unwrap();
    let config = at.join("holmes.toml");
    std::fs::write(
        &config,
        text.replace(line, &format!("\nmodels_dir = {dir:?}\n")),
    )
    .unwrap();
    config
}

#[test]
fn the_committed_rules_hold_for_the_committed_zoo() {
    let rows = rows_of(&common::root().join("models"));
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r["problems"], json!([]), "{r}");
        // The embedded defaults count beats beside the members: a rule validated without the
        // counter is not one the ward can serve, and the listing says so.
        let reasons = strings(&r["not_for_ward"]);
        if r["beat_counter"] == true {
            assert!(reasons.is_empty(), "{r}");
        } else {
            assert_eq!(
                reasons,
                ["validated without the beat counter the ward counts beside its members"],
                "{r}"
            );
        }
    }
    // Every rule was chosen by patient-wise folds over the held-out records (`holmes evaluate
    // --folds 5 --save-rule` for the served one, `--revalidate --folds 5` for the others), and
    // says so with each fold's rule.
    for r in &rows {
        let v = &r["validation"];
        assert_eq!(
            v["chosen_by"]["folds"].as_array().map(Vec::len),
            Some(5),
            "{r}"
        );
        assert_eq!(v["records"], 82, "{r}");
    }
}

#[test]
fn a_rule_that_no_longer_holds_says_why() {
    let (a, b) = ("ecg-primary-5s-w8-d2", "ecg-secondary-5s-w8-d2");
    let (broken, tampered) = ("ecg-primary-10s-w8-d2", "ecg-secondary-10s-w8-d2");
    let (zoo, beats_sha) = zoo_of(&[a, b, broken, tampered]);
    let (sa, sb) = (
        common::weights_sha(&zoo.path().join(a)),
        common::weights_sha(&zoo.path().join(b)),
    );
    let st = common::weights_sha(&zoo.path().join(tampered));
    // One model's manifest no longer reads; another's weights are not its manifest's.
    std::fs::write(zoo.path().join(broken).join("manifest.json"), "{").unwrap();
    let w = zoo.path().join(tampered).join("weights.mpk");
    let mut bytes = std::fs::read(&w).unwrap();
    bytes.push(0);
    std::fs::write(&w, bytes).unwrap();

    let rule = |members: Vec<Value>, hop: u32, on: f64| {
        json!({
            "members": members,
            "hop_secs": hop, "window_secs": 30,
            "rule": {"on": on, "off": on / 2.0, "k": 1, "n": 1},
            "validation": {"records": 44, "target_sensitivity": 0.95, "episodes": 88,
                           "detected": 85, "false_alarms_per_hour": 0.5,
                           "ec57_sensitivity": 0.955}})
    };
    let counted = |mut m: Vec<Value>| {
        m.push(member("beats", &beats_sha));
        m
    };
    let book = json!({"format": 1, "rules": [
        // Holds: both models and the counter as validated.
        rule(counted(vec![member(a, &sa), member(b, &sb)]), 5, 0.4),
        // The secondary model was retrained since.
        rule(counted(vec![member(a, &sa), member(b, "0123")]), 5, 0.3),
        // A model the zoo no longer has.
        rule(counted(vec![member(a, &sa), member("ecg-primary-30s-w16-d4", "abcd")]), 5, 0.2),
        // Validated with another beat counter.
        rule(vec![member(b, &sb), member("beats", "feed")], 5, 0.1),
        // A model whose manifest does not read, and one whose weights changed.
        rule(counted(vec![member(broken, "ab"), member(tampered, &st)]), 5, 0.5),
        // Holds for the zoo, but at another hop and without the counter.
        rule(vec![member(a, &sa), member(b, &sb)], 2, 0.6),
    ]});
    std::fs::write(zoo.path().join("alarm_rules.json"), book.to_string()).unwrap();

    let rows = rows_of(zoo.path());
    assert_eq!(rows.len(), 6, "{rows:?}");
    let problems = |i: usize| strings(&rows[i]["problems"]);
    assert!(problems(0).is_empty(), "{}", rows[0]);
    assert_eq!(rows[0]["beat_counter"], true);
    assert_eq!(rows[0]["members"], json!([a, b]));
    assert_eq!(rows[0]["not_for_ward"], json!([]));
    assert_eq!(problems(1), [format!("{b} was retrained since")]);
    assert_eq!(
        problems(2),
        ["ecg-primary-30s-w16-d4 is not in the zoo".to_owned()]
    );
    assert_eq!(
        problems(3),
        ["the zoo's beat counter is not the one it was validated with"]
    );
    let p4 = problems(4);
    assert_eq!(p4.len(), 2, "{p4:?}");
    assert!(
        p4[0].starts_with(&format!("{broken}'s manifest does not read")),
        "{p4:?}"
    );
    assert_eq!(
        p4[1],
        format!("{tampered}'s weights are not the ones its manifest names")
    );
    assert!(problems(5).is_empty(), "{}", rows[5]);
    // Validating again mends a retrained member or another counter, not a missing or
    // unreadable model; a rule that holds needs none.
    let revalidable: Vec<bool> = rows
        .iter()
        .map(|r| r["revalidable"].as_bool().unwrap())
        .collect();
    assert_eq!(revalidable, [false, true, false, true, false, false]);
    assert_eq!(
        strings(&rows[5]["not_for_ward"]),
        [
            "validated at a 2 s hop and 30 s window, the ward's are 5 s and 30 s",
            "validated without the beat counter the ward counts beside its members"
        ]
    );
    // The table says the same to a person.
    let text = String::from_utf8(zoo_rules(zoo.path(), false).stdout).unwrap();
    assert!(
        text.contains(&format!(
            "rule 2 no longer holds: {b} was retrained since (holmes evaluate --revalidate \
             validates it again)"
        )),
        "{text}"
    );
    assert!(
        text.contains("rule 6 is not for this ward: validated at a 2 s hop"),
        "{text}"
    );
    assert!(
        text.contains("2 of 6 rules hold for this zoo; 1 of them apply to this ward"),
        "{text}"
    );
    // Without the counter in the zoo, the counted rules no longer hold, and the ward counts
    // no beats: the rule without the counter applies but for its hop.
    std::fs::remove_file(zoo.path().join("beats.json")).unwrap();
    let rows = rows_of(zoo.path());
    assert_eq!(
        rows[0]["problems"],
        json!(["the zoo has no beat counter (beats.json)"])
    );
    assert_eq!(
        strings(&rows[5]["not_for_ward"]),
        ["validated at a 2 s hop and 30 s window, the ward's are 5 s and 30 s"]
    );
}

#[test]
fn a_missing_zoo_or_a_broken_rules_file_is_an_error_naming_it() {
    let zoo = tempfile::tempdir().unwrap();
    let missing = zoo.path().join("no-such-zoo");
    let o = zoo_rules(&missing, false);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no-such-zoo: no such zoo folder"), "{err}");
    std::fs::write(zoo.path().join("alarm_rules.json"), "{ not json").unwrap();
    let o = zoo_rules(zoo.path(), false);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("alarm_rules.json"), "{err}");

    // `holmes evaluate --revalidate` refuses both alike, before reading any record.
    let revalidate = |dir: &Path| {
        let config = config_at(zoo.path(), dir);
        let o = Command::new(env!("CARGO_BIN_EXE_holmes"))
            .current_dir(common::root())
            .args(["evaluate", "--revalidate", "--data"])
            .arg(zoo.path().join("no-data-needed"))
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = revalidate(&missing);
    assert!(err.contains("no-such-zoo: no such zoo folder"), "{err}");
    let err = revalidate(zoo.path());
    assert!(err.contains("alarm_rules.json"), "{err}");
}

#[test]
fn a_rule_whose_member_was_retrained_is_validated_again() {
    let Some(data) = common::data_dir("a_rule_whose_member_was_retrained_is_validated_again")
    else {
        return;
    };
    let (a, b) = ("ecg-primary-5s-w8-d2", "ecg-secondary-5s-w8-d2");
    let (zoo, beats_sha) = zoo_of(&[a, b]);
    let (sa, sb) = (
        common::weights_sha(&zoo.path().join(a)),
        common::weights_sha(&zoo.path().join(b)),
    );
    let book = json!({"format": 1, "rules": [
        // 0. b was retrained since: validated again.
        book_rule(vec![member(a, &sa), member(b, "0123"), member("beats", &beats_sha)], 0.9, Some(0.7)),
        // 1. A model the zoo no longer has: left.
        book_rule(vec![member(a, &sa), member("ecg-primary-30s-w16-d4", "abcd")], 0.8, None),
        // 2. Holds: untouched.
        book_rule(vec![member(a, &sa), member(b, &sb)], 0.6, None),
        // 3. b retrained, and rule 2 already covers a and b as they are: removed.
        book_rule(vec![member(a, &sa), member(b, "4567")], 0.5, None),
        // 4. Validated with another beat counter: validated again with the zoo's.
        book_rule(vec![member(a, &sa), member("beats", "feed")], 0.3, None),
    ]});
    std::fs::write(zoo.path().join("alarm_rules.json"), book.to_string()).unwrap();
    let config = config_at(zoo.path(), zoo.path());
    let revalidate = |json: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_holmes"));
        c.current_dir(common::root())
            .args(["evaluate", "--revalidate", "--max-records", "2"])
            .arg("--data")
            .arg(&data)
            .arg("--config")
            .arg(&config);
        if json {
            c.arg("--json");
        }
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "revalidate failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };

    let done: Value = serde_json::from_str(&revalidate(true)).unwrap();
    let done = done.as_array().unwrap();
    let outcomes: Vec<&str> = done
        .iter()
        .map(|d| d["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["validated", "left", "superseded", "validated"],
        "{done:?}"
    );
    assert_eq!(done[0]["members"], json!([a, b]));
    assert_eq!(done[0]["beat_counter"], true);
    assert_eq!(
        done[0]["problems"],
        json!([format!("{b} was retrained since")])
    );
    assert_eq!(done[3]["members"], json!([a]));
    assert_eq!(
        done[3]["problems"],
        json!(["the zoo's beat counter is not the one it was validated with"])
    );
    for d in [&done[0], &done[3]] {
        let (detected, episodes) = (
            d["detected"].as_u64().unwrap(),
            d["episodes"].as_u64().unwrap(),
        );
        assert!(episodes > 0 && detected <= episodes, "{d}");
    }

    // The book holds the rules chosen again, for the weights and counter as they are, in place
    // of the old ones, and the others as they were.
    let rows = rows_of(zoo.path());
    assert_eq!(rows.len(), 4, "{rows:?}");
    let find = |members: Value, counter: bool| {
        rows.iter()
            .find(|r| r["members"] == members && r["beat_counter"] == counter)
            .unwrap_or_else(|| panic!("{members} {counter}: {rows:?}"))
    };
    for (i, members) in [(0, json!([a, b])), (3, json!([a]))] {
        let kept = find(members, true);
        assert_eq!(kept["problems"], json!([]), "{kept}");
        assert_eq!(kept["rule"], done[i]["rule"]);
        assert_eq!(kept["primary_share"], done[i]["primary_share"]);
        assert_eq!(kept["validation"]["episodes"], done[i]["episodes"]);
        // Chosen for the target the old rule was chosen for.
        assert_eq!(kept["validation"]["target_sensitivity"], 0.9, "{kept}");
    }
    let held = find(json!([a, b]), false);
    assert_eq!(
        (
            held["rule"]["on"].as_f64(),
            held["validation"]["records"].as_u64()
        ),
        (Some(0.6), Some(44))
    );
    let left = find(json!(["ecg-primary-30s-w16-d4", a]), false);
    assert_eq!(
        left["problems"],
        json!(["ecg-primary-30s-w16-d4 is not in the zoo"])
    );
    let book: Value = serde_json::from_str(
        &std::fs::read_to_string(zoo.path().join("alarm_rules.json")).unwrap(),
    )
    .unwrap();
    let shas: Vec<&str> = book["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["members"].as_array().unwrap())
        .filter(|m| m["name"] == b || m["name"] == "beats")
        .map(|m| m["sha256"].as_str().unwrap())
        .collect();
    assert!(
        !shas.is_empty() && shas.iter().all(|s| *s == sb || *s == beats_sha),
        "{book}"
    );

    // Run again: nothing left to mend but the missing model.
    let text = revalidate(false);
    assert!(
        text.contains("left as it is: validating again cannot mend this")
            && !text.contains("validated again:")
            && !text.contains("removed:"),
        "{text}"
    );
}

#[test]
fn the_folds_choose_every_rule_they_have_not_chosen_yet() {
    let Some(data) = common::data_dir("the_folds_choose_every_rule_they_have_not_chosen_yet")
    else {
        return;
    };
    let (a, b) = ("ecg-primary-5s-w8-d2", "ecg-secondary-5s-w8-d2");
    let (zoo, beats_sha) = zoo_of(&[a, b]);
    let (sa, sb) = (
        common::weights_sha(&zoo.path().join(a)),
        common::weights_sha(&zoo.path().join(b)),
    );
    // Chosen by as many folds over as many records as this run's (a smaller run's would be
    // chosen again).
    let mut by_folds = book_rule(vec![member(a, &sa), member(b, &sb)], 0.6, None);
    by_folds["validation"]["records"] = json!(4);
    by_folds["validation"]["chosen_by"] = json!({
        "how": "chosen by folds before",
        "folds": [{"on": 0.6, "off": 0.3, "k": 1, "n": 1}, {"on": 0.6, "off": 0.3, "k": 1, "n": 1}]
    });
    let book = json!({"format": 1, "rules": [
        // 0. Holds, chosen on validation: chosen by the folds.
        book_rule(vec![member(a, &sa), member(b, &sb), member("beats", &beats_sha)], 0.9, Some(0.7)),
        // 1. Chosen by folds already: passed over.
        by_folds,
        // 2. A model the zoo no longer has: left.
        book_rule(vec![member(a, &sa), member("ecg-primary-30s-w16-d4", "abcd")], 0.8, None),
        // 3. Validated with another beat counter: chosen by the folds with the zoo's.
        book_rule(vec![member(a, &sa), member("beats", "feed")], 0.3, None),
    ]});
    std::fs::write(zoo.path().join("alarm_rules.json"), book.to_string()).unwrap();
    let config = config_at(zoo.path(), zoo.path());
    let refold = || {
        let o = Command::new(env!("CARGO_BIN_EXE_holmes"))
            .current_dir(common::root())
            .args([
                "evaluate",
                "--revalidate",
                "--folds",
                "2",
                "--max-records",
                "2",
            ])
            .arg("--data")
            .arg(&data)
            .arg("--config")
            .arg(&config)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "revalidate --folds failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v.as_array().unwrap().clone()
    };

    // The rules that count beats first, then the others in the book's order.
    let done = refold();
    let outcomes: Vec<&str> = done
        .iter()
        .map(|d| d["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["validated", "validated", "left"], "{done:?}");
    assert_eq!(done[0]["members"], json!([a, b]));
    assert_eq!(done[0]["problems"], json!([]));
    assert_eq!(done[1]["members"], json!([a]));
    for d in &done[..2] {
        // Two records of each held-out part, in two folds, each with its own rule.
        assert_eq!(d["folded_records"], 4, "{d}");
        assert_eq!(d["folds"].as_array().unwrap().len(), 2, "{d}");
        let (detected, episodes) = (
            d["detected"].as_u64().unwrap(),
            d["episodes"].as_u64().unwrap(),
        );
        assert!(episodes > 0 && detected <= episodes, "{d}");
    }

    // The book keeps the folds' choice, saying how it was made, with each fold's rule and
    // pooling (the engine weighs members); the rule chosen by folds before is untouched.
    let book: Value = serde_json::from_str(
        &std::fs::read_to_string(zoo.path().join("alarm_rules.json")).unwrap(),
    )
    .unwrap();
    let rules = book["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 4, "{book}");
    let with_counter = |n: usize| {
        rules
            .iter()
            .find(|r| {
                let m = r["members"].as_array().unwrap();
                m.len() == n && m.iter().any(|m| m["name"] == "beats")
            })
            .unwrap_or_else(|| panic!("{n} members with the counter: {book}"))
    };
    for (kept, d) in [(with_counter(3), &done[0]), (with_counter(2), &done[1])] {
        let v = &kept["validation"];
        assert_eq!(kept["rule"], d["rule"], "{kept}");
        assert_eq!(v["records"], 4, "{kept}");
        assert_eq!(v["target_sensitivity"], 0.9, "{kept}");
        let c = &v["chosen_by"];
        assert!(c["how"].as_str().unwrap().contains("2 folds"), "{kept}");
        assert_eq!(c["folds"], d["folds"], "{kept}");
        // The pooling most folds chose (the plain mean on a tie; two folds here), and the
        // lower middle of the folds' rules for it.
        let shares = c["shares"].as_array().unwrap();
        assert_eq!(shares.len(), 2, "{kept}");
        let kept_share = if shares[0] == shares[1] {
            shares[0].clone()
        } else if shares.iter().any(Value::is_null) {
            Value::Null
        } else {
            let s: Vec<f64> = shares.iter().map(|s| s.as_f64().unwrap()).collect();
            json!(s[0].min(s[1]))
        };
        assert_eq!(kept["primary_share"], kept_share, "{kept}");
        let on: Vec<f64> = c["median_of"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["on"].as_f64().unwrap())
            .collect();
        assert_eq!(on.len(), 2, "{kept}");
        assert_eq!(
            kept["rule"]["on"].as_f64(),
            Some(on[0].min(on[1])),
            "{kept}"
        );
    }
    assert!(
        with_counter(2)["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["sha256"] == beats_sha.as_str()),
        "{book}"
    );
    let before = rules
        .iter()
        .find(|r| r["validation"]["chosen_by"]["how"] == "chosen by folds before")
        .unwrap_or_else(|| panic!("{book}"));
    assert_eq!(before["rule"]["on"], 0.6);

    // A second run resumes with nothing left to choose but the rule it cannot mend.
    let again = refold();
    let outcomes: Vec<&str> = again
        .iter()
        .map(|d| d["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["left"], "{again:?}");
}
