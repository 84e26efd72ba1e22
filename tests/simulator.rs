//! `holmes simulate` against a real daemon: synthetic beds score, and injected faults
//! (dropped, duplicated, corrupt frames) are answered per frame without stopping the beds.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use holmes::tools::sim::alarms::Schedule;
use holmes::tools::sim::{Faults, SimOptions, Source};
use holmes::training::dataset::{Database, load_keys};

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
        monitor_alarms: false,
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

/// A record with VT (vfdb 422) replayed from 20 s before the proxy monitor's first alarm on
/// it: the bed sends the alarms, and each arrives in SQLite with Holmes's opinion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_records_bed_sends_the_monitors_alarms_and_each_gets_an_opinion() {
    let Some(data) = common::data_dir("a_records_bed_sends_the_monitors_alarms") else {
        return;
    };
    let key = (Database::Vfdb, "422".to_owned());
    let rec = load_keys(&data, &[key]).unwrap().remove(0);
    let schedule = Schedule::of_record(&rec).unwrap();
    let first = schedule.alarms[0];
    let start = first.raised.saturating_sub(20 * 250);
    let app = common::spawn_app(|_| {}).await;
    let mut o = opts(app.ws_url(), 1, Faults::default());
    o.source = Source::Records(data);
    o.records = vec!["vfdb/422".into()];
    o.start_secs = start as f64 / 250.0;
    o.speed = 10.0;
    o.duration = Duration::from_secs(4);
    o.monitor_alarms = true;
    let report = holmes::tools::sim::run(o).await.unwrap();
    let sent = report.alarms_sent.load(Ordering::Relaxed);
    // The 40 s replayed hold the first alarm, and what follows it within them.
    let due: Vec<_> = schedule
        .alarms
        .iter()
        .filter(|a| a.raised > start && a.raised <= start + 40 * 250)
        .collect();
    assert_eq!(sent, due.len() as u64, "{due:?}");
    let rows = |app: &common::App| {
        let db = rusqlite::Connection::open(app.dir.path().join("holmes.db")).unwrap();
        let mut st = db
            .prepare(
                "SELECT alarm_id, kind, confirmed, received_ms, judged_ms, provenance
                 FROM monitor_alarms WHERE bed = 'sim-1' ORDER BY onset_ms",
            )
            .unwrap();
        st.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<bool>>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, String>(5)?,
            ))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
    };
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    let stored = loop {
        let r = rows(&app);
        if r.len() as u64 >= sent || tokio::time::Instant::now() > until {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(stored.len(), due.len(), "{stored:?}");
    for (n, (row, a)) in stored.iter().zip(&due).enumerate() {
        let (id, kind, confirmed, received, judged, provenance) = row;
        assert_eq!(id, &format!("A-{}", n + 1), "{row:?}");
        assert_eq!(kind, a.kind.as_str(), "{row:?}");
        assert!(confirmed.is_some(), "an opinion: {provenance}");
        assert!(judged.is_some_and(|j| j >= *received), "{row:?}");
    }
    app.stop().await;
}
