//! Hot reload of the zoo in a running server: a model copied in, a member's weights corrupted,
//! a member changed, a member removed, while a monitor keeps streaming and scores keep coming.

mod common;

use std::time::Duration;

use common::{App, Monitor, spawn_app};
use serde_json::Value;

const T0: i64 = 1_700_000_000_000;
/// The served members (not the defaults: a small, cheap ensemble of both leads and vitals).
const MEMBERS: [&str; 3] = [
    "ecg-primary-5s-w8-d2",
    "ecg-secondary-5s-w8-d2",
    "vitals-hr-mlp",
];

async fn wait_json(app: &App, path: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = app.get(path).await;
        if pred(&v) {
            return v;
        }
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Streams `frames` more frames and waits for one more scored window.
async fn one_more_window(app: &App, m: &mut Monitor, next: &mut u64, scored: &mut usize) -> Value {
    m.stream(T0, *next..*next + 300).await;
    *next += 300;
    let want = *scored + 1;
    let rows = app.wait_scores("bed-z", 30.0, |r| r.len() >= want).await;
    *scored = rows.len();
    rows.last().unwrap().clone()
}

fn member<'a>(row: &'a Value, name: &str) -> &'a Value {
    row["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_are_added_refused_changed_and_removed_while_scoring() {
    let zoo = tempfile::tempdir().unwrap();
    for m in MEMBERS {
        common::copy_model(m, zoo.path());
    }
    let zdir = zoo.path().to_owned();
    let app = spawn_app(move |c| {
        c.ensemble.models_dir = zdir;
        c.ensemble.members = MEMBERS.map(String::from).to_vec();
        c.ward.beds = vec!["bed-z".into()];
    })
    .await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-z", "dev-z").await;
    let (mut next, mut scored) = (0u64, 0usize);
    let first = one_more_window(&app, &mut m, &mut next, &mut scored).await;
    assert_eq!(first["status"], "scored");

    // Added: a new model shows up in the zoo.
    common::copy_model("ecg-primary-10s-w8-d2", zoo.path());
    wait_json(&app, "/api/models", "the added model", |v| {
        v["zoo"]["available"]["ecg-primary-10s-w8-d2"] == 1
    })
    .await;
    one_more_window(&app, &mut m, &mut next, &mut scored).await;

    // Corrupted: refused and reported; the old version keeps serving.
    std::fs::write(
        zoo.path().join("ecg-secondary-5s-w8-d2/weights.mpk"),
        b"garbage",
    )
    .unwrap();
    let v = wait_json(&app, "/api/models", "the refusal", |v| {
        !v["zoo"]["failures"].as_array().unwrap().is_empty()
    })
    .await;
    assert!(
        v["zoo"]["failures"][0]["error"]
            .as_str()
            .unwrap()
            .contains("weights.mpk"),
        "{v}"
    );
    let row = one_more_window(&app, &mut m, &mut next, &mut scored).await;
    assert!(
        member(&row, "ecg-secondary-5s-w8-d2")["prob"].is_number(),
        "{row}"
    );

    // Changed: a new version of a member is swapped in; later scores name it.
    let mf = zoo.path().join("ecg-primary-5s-w8-d2/manifest.json");
    let mut j: Value = serde_json::from_str(&std::fs::read_to_string(&mf).unwrap()).unwrap();
    j["version"] = Value::from(7);
    std::fs::write(&mf, serde_json::to_string_pretty(&j).unwrap()).unwrap();
    wait_json(&app, "/api/models", "version 7 serving", |v| {
        v["serving"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s[0] == "ecg-primary-5s-w8-d2" && s[1] == 7)
    })
    .await;
    // A window already submitted when the swap landed is scored by the version before it.
    let mut row = one_more_window(&app, &mut m, &mut next, &mut scored).await;
    if member(&row, "ecg-primary-5s-w8-d2")["version"] != 7 {
        row = one_more_window(&app, &mut m, &mut next, &mut scored).await;
    }
    assert_eq!(member(&row, "ecg-primary-5s-w8-d2")["version"], 7, "{row}");

    // Removed: reported; the member keeps serving from memory.
    std::fs::remove_dir_all(zoo.path().join("vitals-hr-mlp")).unwrap();
    wait_json(&app, "/api/models", "the removal", |v| {
        v["zoo"]["serving_removed"][0] == "vitals-hr-mlp"
    })
    .await;
    let row = one_more_window(&app, &mut m, &mut next, &mut scored).await;
    assert_eq!(row["status"], "scored", "{row}");
    assert!(member(&row, "vitals-hr-mlp")["prob"].is_number());
    let (_, models) = app.get("/api/models").await;
    assert!(
        models["zoo"]["generation"].as_u64().unwrap() >= 4,
        "{models}"
    );
    // Every change is in the audit log, by the system.
    let audit = holmes::serving::store::audit::read_all(&app.dir.path().join("holmes.db")).unwrap();
    for action in ["model_loaded", "model_refused", "model_removed"] {
        assert!(
            audit
                .iter()
                .any(|r| r.0.as_deref() == Some("system") && r.1 == action),
            "{action} missing from {audit:?}"
        );
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_lists_the_zoo_folders_that_do_not_load() {
    let zoo = tempfile::tempdir().unwrap();
    for m in MEMBERS {
        common::copy_model(m, zoo.path());
    }
    // Beside the members, three folders that do not load: corrupt weights, a manifest that is
    // not JSON, a folder without its weights file.
    for m in [
        "ecg-primary-10s-w8-d2",
        "ecg-primary-30s-w8-d2",
        "vitals-hr-logreg",
    ] {
        common::copy_model(m, zoo.path());
    }
    let weights = zoo.path().join("ecg-primary-10s-w8-d2").join("weights.mpk");
    let mut bytes = std::fs::read(&weights).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&weights, bytes).unwrap();
    std::fs::write(
        zoo.path()
            .join("ecg-primary-30s-w8-d2")
            .join("manifest.json"),
        "{ not json",
    )
    .unwrap();
    std::fs::remove_file(zoo.path().join("vitals-hr-logreg").join("weights.mpk")).unwrap();
    let zdir = zoo.path().to_owned();
    let app = spawn_app(move |c| {
        c.ensemble.models_dir = zdir;
        c.ensemble.members = MEMBERS.map(String::from).to_vec();
    })
    .await;

    let h = app.health().await;
    assert_eq!(h["status"], "degraded", "{h}");
    // The configured members cover every lead set (so no problem of that kind below).
    assert_eq!(
        h["lead_sets"],
        serde_json::json!({"primary_only": true, "secondary_only": true, "both": true}),
        "{h}"
    );
    let problems = common::problems(&h);
    assert_eq!(problems.len(), 3, "{h}");
    for (folder, why) in [
        ("ecg-primary-10s-w8-d2", "checksum"),
        ("ecg-primary-30s-w8-d2", "manifest"),
        ("vitals-hr-logreg", "weights.mpk"),
    ] {
        assert!(
            problems.iter().any(|p| p
                .contains(&format!("zoo: model folder {folder} does not load"))
                && p.contains(why)),
            "{folder}: {problems:?}"
        );
    }
    // The serving ensemble is whole: still ready.
    let (status, ready) = app.get("/health/ready").await;
    assert_eq!(status, 200, "{ready}");

    // Mended folders leave the list; a removed one too.
    common::copy_model("ecg-primary-10s-w8-d2", zoo.path());
    std::fs::remove_dir_all(zoo.path().join("ecg-primary-30s-w8-d2")).unwrap();
    let h = app
        .wait_health(20.0, "one problem left", |h| {
            h["problems"].as_array().is_some_and(|p| p.len() == 1)
        })
        .await;
    assert!(
        h["problems"][0]
            .as_str()
            .unwrap()
            .contains("vitals-hr-logreg"),
        "{h}"
    );
    common::copy_model("vitals-hr-logreg", zoo.path());
    let h = app
        .wait_health(20.0, "no problem left", |h| h["status"] == "ok")
        .await;
    assert_eq!(h["problems"], serde_json::json!([]), "{h}");
    app.stop().await;
}
