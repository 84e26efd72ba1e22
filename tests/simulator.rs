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
