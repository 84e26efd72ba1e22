//! Recomposition while serving: the daemon composes a plan at start-up (none stored), and a
//! model copied into the zoo leads to a new plan, switched in while a monitor keeps streaming
//! and scores keep arriving; a restart finds the stored plan and serves it at once.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{App, Monitor, spawn_app};
use serde_json::Value;

const T0: i64 = 1_700_000_000_000;

fn copy_model(name: &str, to: &Path) {
    let src = common::root().join("models").join(name);
    let dst = to.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for f in ["manifest.json", "weights.mpk"] {
        std::fs::copy(src.join(f), dst.join(f)).unwrap();
    }
}

async fn wait_plan(app: &App, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, v) = app.get("/api/ensemble").await;
        if pred(&v) {
            return v;
        }
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn zoo_of(v: &Value) -> Vec<String> {
    v["composed_plan"]["inputs"]["zoo"]
        .as_array()
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zoo_change_leads_to_a_new_plan_while_scores_keep_arriving() {
    let zoo = tempfile::tempdir().unwrap();
    for m in ["ecg-primary-w8-d2", "vitals-hr-logreg"] {
        copy_model(m, zoo.path());
    }
    let zdir = zoo.path().to_owned();
    let app = spawn_app(move |c| {
        c.ensemble.models_dir = zdir;
        c.ensemble.members = vec!["vitals-hr-logreg".into()];
        c.ward.beds = vec!["bed-c".into()];
        c.composer.enabled = true;
        c.composer.method = "exact".into();
    })
    .await;
    // No plan is stored: the composer composes one and switches to it.
    let first = wait_plan(&app, "the start-up plan", |v| {
        v["source"] == "plan" && v["composed_plan"]["version"].as_i64().is_some()
    })
    .await;
    let v1 = first["composed_plan"]["version"].as_i64().unwrap();
    assert_eq!(zoo_of(&first).len(), 2, "{first}");

    let mut m = Monitor::connect(&app.ws_url(), "bed-c", "dev-c").await;
    let mut next = 0u64;
    m.stream(T0, next..next + 300).await;
    next += 300;
    let before = app.wait_scores("bed-c", 30.0, |r| !r.is_empty()).await;
    assert_eq!(before[0]["status"], "scored", "{}", before[0]);

    // A model is added: a new plan is composed for the new zoo and served, scores go on.
    copy_model("ecg-secondary-w8-d2", zoo.path());
    let mut second = Value::Null;
    let mut scored = before.len();
    for _ in 0..40 {
        m.stream(T0, next..next + 300).await;
        next += 300;
        let want = scored + 1;
        scored = app
            .wait_scores("bed-c", 30.0, |r| r.len() >= want)
            .await
            .len();
        let (_, v) = app.get("/api/ensemble").await;
        if v["composed_plan"]["version"].as_i64().unwrap_or(0) > v1 {
            second = v;
            break;
        }
    }
    assert!(!second.is_null(), "no new plan after the zoo changed");
    assert_eq!(zoo_of(&second).len(), 3, "{second}");
    assert!(
        zoo_of(&second)
            .iter()
            .any(|z| z.starts_with("ecg-secondary-w8-d2@")),
        "{second}"
    );
    // Scores made after the switch carry the new plan's ensemble.
    let id = second["id"].as_i64().unwrap();
    for _ in 0..2 {
        m.stream(T0, next..next + 300).await;
        next += 300;
    }
    let rows = app
        .wait_scores("bed-c", 30.0, |r| {
            r.last()
                .is_some_and(|x| x["ensemble_id"].as_i64() == Some(id))
        })
        .await;
    let last = rows.last().unwrap();
    assert!(
        ["scored", "partial"].contains(&last["status"].as_str().unwrap()),
        "{last}"
    );
    let (_, ev) = app.get("/api/beds/composer/events").await;
    assert!(
        ev["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "plan_change"),
        "{ev}"
    );
}
