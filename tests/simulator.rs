//! `holmes simulate` against a real daemon: synthetic beds score, and injected faults
//! (dropped, duplicated, corrupt frames) are answered per frame without stopping the beds.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use holmes::tools::sim::{Faults, SimOptions, Source};

fn opts(url: String, beds: usize, faults: Faults) -> SimOptions {
    SimOptions {
        url,
        beds,
        source: Source::Synthetic,
        duration: Duration::from_secs(4),
        speed: 25.0,
        start_secs: 0.0,
        token: "t".into(),
        device: None,
        ca: None,
        bed_prefix: "sim-".into(),
        faults,
        records: Vec::new(),
        seed: 3,
        ramp: std::time::Duration::ZERO,
        storm_at: None,
        patient_authority: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_beds_with_faults_keep_scoring() {
    let app = common::spawn_app(|_| {}).await;
    let faults = Faults {
        drop: 0.02,
        duplicate: 0.02,
        corrupt: 0.02,
    };
    let report = holmes::tools::sim::run(opts(app.ws_url(), 2, faults))
        .await
        .unwrap();
    assert!(
        report.errors_received.load(Ordering::Relaxed) > 0,
        "corrupt and duplicate frames are answered"
    );
    assert_eq!(
        report.connects.load(Ordering::Relaxed),
        2,
        "no connection was dropped"
    );
    for bed in ["sim-1", "sim-2"] {
        let rows = app.wait_scores(bed, 30.0, |r| !r.is_empty()).await;
        assert_eq!(rows[0]["status"], "scored", "{}", rows[0]);
        // Dropped frames are gaps, recorded in the window's quality and as events.
        let (_, ev) = app.get(&format!("/api/beds/{bed}/events")).await;
        let gaps = ev["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "gap")
            .count();
        assert!(gaps > 0, "{ev}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_reconnects_after_the_server_restarts() {
    // A port with no server yet: the simulator backs off and retries until one appears.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("ws://{addr}/ws/monitor");
    let sim = tokio::spawn(holmes::tools::sim::run(opts(url, 1, Faults::default())));
    tokio::time::sleep(Duration::from_millis(700)).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = common::test_config(dir.path());
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let running = holmes::appliance::server::start(cfg, listener)
        .await
        .unwrap();
    let report = sim.await.unwrap().unwrap();
    assert!(report.connects.load(Ordering::Relaxed) >= 1);
    assert!(report.frames_sent.load(Ordering::Relaxed) > 100);
    running.shutdown.cancel();
    running.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_beds_are_admitted_with_a_patient_under_the_authority_given() {
    let app = common::spawn_app(|_| {}).await;
    let mut o = opts(app.ws_url(), 2, Faults::default());
    o.duration = Duration::from_secs(2);
    o.patient_authority = Some("urn:oid:1.2.840.99.7".into());
    holmes::tools::sim::run(o).await.unwrap();
    let (_, v) = app.get("/api/beds").await;
    let beds = v["beds"].as_array().unwrap();
    assert_eq!(beds.len(), 2, "{v}");
    for (b, n) in beds.iter().zip(1..) {
        assert_eq!(b["bed"], format!("sim-{n}"));
        assert_eq!(
            b["patient"],
            serde_json::json!({"id": format!("SIM-{n}"), "authority": "urn:oid:1.2.840.99.7"}),
            "{v}"
        );
    }
    app.stop().await;
    // Without the option, no patient.
    let app = common::spawn_app(|_| {}).await;
    let mut o = opts(app.ws_url(), 1, Faults::default());
    o.duration = Duration::from_secs(1);
    holmes::tools::sim::run(o).await.unwrap();
    let (_, v) = app.get("/api/beds").await;
    assert_eq!(v["beds"][0]["bed"], "sim-1", "{v}");
    assert_eq!(v["beds"][0]["patient"], serde_json::Value::Null, "{v}");
    app.stop().await;
}

#[test]
fn holmes_simulate_refuses_an_authority_no_monitor_could_send() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args([
            "simulate",
            "--synthetic",
            "--url",
            "ws://127.0.0.1:9/ws/monitor",
            "--duration",
            "1",
            "--patient-authority",
            "H&S",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--patient-authority") && err.contains("delimiter"),
        "{err}"
    );
}
