//! `holmes score` on a recording gives the same numbers as the live path: the simulator
//! replays the record into a real daemon, and the offline command scores the same windows.

mod common;

use std::time::Duration;

use holmes::tools::sim::{Faults, SimOptions, Source};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_scores_equal_live_scores() {
    let Some(data) = common::data_dir("offline_scores_equal_live_scores") else {
        return;
    };
    // One configured bed: phase 0, so its windows end at 30 s and every hop after. The
    // default members, as `holmes score` on the embedded defaults serves them.
    let app = common::spawn_app(|c| {
        c.ward.beds = vec!["bed-1".into()];
        c.ensemble.members = holmes::config::Config::default().ensemble.members;
    })
    .await;
    let opts = SimOptions {
        url: app.ws_url(),
        beds: 1,
        source: Source::Records(data.clone()),
        duration: Duration::from_secs(3),
        speed: 30.0,
        start_secs: 0.0,
        token: "t".into(),
        device: None,
        ca: None,
        bed_prefix: "bed-".into(),
        faults: Faults::default(),
        records: vec!["vfdb/418".into()],
        seed: 7,
        ramp: std::time::Duration::ZERO,
        storm_at: None,
        monitor_alarms: false,
        patient_authority: None,
    };
    let report = holmes::tools::sim::run(opts).await.unwrap();
    assert!(
        report
            .frames_sent
            .load(std::sync::atomic::Ordering::Relaxed)
            > 600
    );
    let live = app.wait_scores("bed-1", 30.0, |r| r.len() >= 2).await;
    // The daemon pools the members as the zoo's rule for them was chosen, and says so.
    let (_, ensemble) = app.get("/api/ensemble").await;
    let (_, health) = app.get("/api/health").await;
    app.stop().await;
    let share = ensemble["primary_share"].as_f64();
    let mut served: Vec<String> = ensemble["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .chain(std::iter::once("beats".to_owned()))
        .collect();
    served.sort();
    let book = holmes::alarm::rules::RuleBook::load(&common::root().join("models")).unwrap();
    let validated = book
        .rules
        .iter()
        .find(|r| {
            r.hop_secs == 5
                && r.members.iter().map(|m| m.name.clone()).collect::<Vec<_>>() == served
        })
        .expect("the default ensemble has its rule");
    assert_eq!(share, validated.primary_share, "{ensemble}");
    assert_eq!(
        health["alarm_rule"]["validated"], true,
        "the served pooling has its validated rule: {health}"
    );

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .args(["score", "--to", "60", "--json", "--record"])
        .arg(data.join("vfdb/418"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let offline: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let ward = holmes::config::Config::default().ward;
    assert_eq!(
        offline.len() as u32,
        (60 - ward.window_secs) / ward.hop_secs + 1
    );
    // The same windows: one hop apart in both, from the first (the live ends are on the
    // device's clock, the offline ones on the record's).
    let (l0, o0) = (
        live[0]["window_end_ms"].as_i64().unwrap(),
        offline[0]["end_secs"].as_f64().unwrap(),
    );
    assert_eq!(o0, f64::from(ward.window_secs));
    for (l, o) in live.iter().zip(&offline) {
        assert_eq!(
            l["window_end_ms"].as_i64().unwrap() - l["window_start_ms"].as_i64().unwrap(),
            30_000
        );
        assert_eq!(
            l["window_end_ms"].as_i64().unwrap() - l0,
            ((o["end_secs"].as_f64().unwrap() - o0) * 1000.0).round() as i64,
            "{l} / {o}"
        );
        let (ls, os) = (l["score"].as_f64().unwrap(), o["score"].as_f64().unwrap());
        assert!(
            (ls - os).abs() < 1e-5,
            "live {ls} vs offline {os}: {l} / {o}"
        );
        let lm = l["members"].as_array().unwrap();
        let om = o["members"].as_array().unwrap();
        // Where the beat counter did not raise it, the score is the members' pooled mean: the
        // primary lead's members share `share` (0.9 for the default zoo), the secondary's the
        // rest; or the plain mean.
        if l["run_onset_ms"].is_null() {
            let lead = |m: &serde_json::Value, l: &str| {
                let path = common::root()
                    .join("models")
                    .join(m["name"].as_str().unwrap())
                    .join("manifest.json");
                let mf: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
                mf["input"]["lead"] == l
            };
            let (mut sum, mut wsum) = (0.0, 0.0);
            for m in lm.iter().filter(|m| !m["prob"].is_null()) {
                let same = lm
                    .iter()
                    .filter(|x| lead(x, "primary") == lead(m, "primary"));
                let n = same.count() as f64;
                let w = match share {
                    Some(s) if lead(m, "primary") => s / n,
                    Some(s) => (1.0 - s) / n,
                    None => 1.0,
                };
                sum += w * m["prob"].as_f64().unwrap();
                wsum += w;
            }
            assert!(
                (ls - sum / wsum).abs() < 1e-5,
                "pooled {} vs score {ls}: {l}",
                sum / wsum
            );
        }
        for (a, b) in lm.iter().zip(om) {
            assert_eq!(a["name"], b["name"]);
            let (pa, pb) = (a["prob"].as_f64().unwrap(), b["prob"].as_f64().unwrap());
            assert!(
                (pa - pb).abs() < 1e-5,
                "{}: live {pa} vs offline {pb}",
                a["name"]
            );
        }
    }
}
