//! `holmes bench` runs end to end and reports what it measured (smoke runs: real benchmarks
//! run at speed 1 and their results go to BENCHMARKS.md, never into test assertions on time).

mod common;

use serde_json::Value;

fn bench(args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .arg("bench")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0].clone()
}

fn n(r: &Value, key: &str) -> u64 {
    r[key].as_u64().unwrap_or_else(|| panic!("{key} in {r}"))
}

#[test]
fn bench_reports_windows_latency_and_the_daemons_resources() {
    let r = bench(&["--beds", "3", "--duration", "6", "--speed", "20"]);
    assert_eq!(r["beds"], 3);
    assert!(n(&r, "windows") >= 3, "{r}");
    assert_eq!(
        n(&r, "windows"),
        n(&r, "scored")
            + n(&r, "partial")
            + n(&r, "superseded")
            + n(&r, "dropped")
            + n(&r, "insufficient")
    );
    assert!(r["latency_ms_p50"].as_f64().unwrap() > 0.0);
    // The daemon is a child process: its memory and CPU are its own.
    assert!(r["daemon_peak_rss_mb"].as_f64().unwrap() > 1.0);
    assert!(r["daemon_cpu_cores"].as_f64().unwrap() > 0.0);
    // The simulated monitors' CPU, beside it: the bench's own process.
    assert!(r["simulator_cpu_cores"].as_f64().unwrap() > 0.0, "{r}");
    assert!(n(&r, "commits") > 0);
    assert!(r["commit_ms_p95"].as_f64().unwrap() > 0.0);
    // Everything sent was ingested: 3 beds at 20x send 600 frames a second.
    assert!(n(&r, "frames_ingested") + 6 >= n(&r, "frames_sent"), "{r}");
    assert!(r["samples_per_sec"].as_f64().unwrap() > 10_000.0, "{r}");
    assert_eq!(n(&r, "gaps"), 0, "{r}");
}

#[test]
fn a_reconnect_storm_loses_nothing() {
    let r = bench(&[
        "--scenario",
        "storm",
        "--beds",
        "3",
        "--duration",
        "8",
        "--speed",
        "10",
    ]);
    assert_eq!(r["scenario"], "storm");
    // Every monitor dropped once and came back; what it resent filled the holes.
    assert!(n(&r, "reconnects") >= 3, "{r}");
    assert_eq!(n(&r, "gaps"), 0, "{r}");
    assert!(n(&r, "scored") + n(&r, "partial") >= 6, "{r}");
}

#[test]
fn ingest_only_closes_windows_and_scores_none() {
    let r = bench(&[
        "--scenario",
        "ingest",
        "--beds",
        "4",
        "--duration",
        "6",
        "--speed",
        "20",
    ]);
    assert!(n(&r, "windows_closed") >= 8, "{r}");
    assert_eq!(n(&r, "windows"), 0, "{r}");
    assert_eq!(r["within_budget"], true, "{r}");
}

#[test]
fn monitor_alarms_sent_with_the_records_get_opinions_and_their_latency() {
    if common::data_dir("monitor_alarms_sent_with_the_records").is_none() {
        return;
    }
    // vfdb 418 and 419 from their start, 200 s each at 20x.
    let r = bench(&[
        "--records",
        "--monitor-alarms",
        "--beds",
        "2",
        "--duration",
        "10",
        "--speed",
        "20",
    ]);
    let o = &r["monitor_alarms"];
    assert!(n(o, "sent") >= 1, "{r}");
    assert_eq!(n(o, "stored"), n(o, "sent"), "{o}");
    assert_eq!(n(o, "judged") + n(o, "unjudged"), n(o, "stored"), "{o}");
    assert!(n(o, "judged") >= 1, "{o}");
    let p95 = o["latency_ms_p95"].as_f64().unwrap_or(f64::NAN);
    assert!(p95.is_finite() && p95 >= 0.0, "{o}");
    assert!(o["latency_ms_max"].as_f64().unwrap() >= p95, "{o}");
}

#[test]
fn a_gateways_pcd04_reports_are_each_answered_and_stored_once() {
    let r = bench(&["--pcd04", "60"]);
    assert_eq!(n(&r, "reports"), 60);
    assert_eq!(n(&r, "accepted"), 60, "{r}");
    assert_eq!(n(&r, "refused"), 0, "{r}");
    assert_eq!(n(&r, "stored"), 60, "{r}");
    assert_eq!(n(&r, "stored_distinct"), 60, "{r}");
    assert!(r["reports_per_minute"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["answer_ms_p95"].as_f64().unwrap() > 0.0, "{r}");
}

/// `holmes bench --sdc` with two devices (Dräger's `sdc11073`, as in `tests/sdc_in.rs`), over
/// mutual TLS (`--sdc-tls-dir`): both paths scored, each device's VT condition judged, the
/// beds marked when the devices die and live again once they return, nothing taken or stored
/// twice.
#[test]
fn a_ward_of_sdc_devices_is_timed_beside_the_websocket_path() {
    let test = "a_ward_of_sdc_devices_is_timed_beside_the_websocket_path";
    if !common::python_has(test, "sdc11073", "HOLMES_REQUIRE_SDC", "sdc11073==3.0.0")
        || common::data_dir(test).is_none()
    {
        return;
    }
    // Long enough for each device's VT condition (20 s into the steady load) and its opinion.
    let certs = tempfile::tempdir().unwrap();
    common::ca_and_leaf(certs.path(), "bench CA");
    let dir = certs.path().to_str().unwrap();
    let r = bench(&[
        "--sdc",
        "--beds",
        "2",
        "--duration",
        "45",
        "--sdc-tls-dir",
        dir,
    ]);
    let (w, s) = (&r["websocket"], &r["sdc"]);
    assert_eq!(s["tls"], true, "{r}");
    assert!(n(w, "scored") > 0, "{r}");
    assert_eq!(n(s, "beds"), 2);
    assert!(n(s, "scored") >= 2, "{r}");
    assert!(s["latency_ms_p95"].as_f64().unwrap() > 0.0, "{r}");
    assert!(s["daemon_cpu_cores"].as_f64().unwrap() > 0.0, "{r}");
    assert!(s["devices_cpu_cores"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(n(s, "vt_raised"), 2, "{r}");
    assert_eq!(n(s, "vt_stored"), 2, "{r}");
    assert_eq!(n(s, "vt_judged"), 2, "{r}");
    assert!(s["alert_to_opinion_ms_p95"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(n(s, "beds_unplugged"), 2, "{r}");
    assert_eq!(n(s, "beds_marked"), 2, "{r}");
    assert_eq!(n(s, "beds_back"), 2, "{r}");
    assert_eq!(n(s, "frames_twice"), 0, "{r}");
    assert_eq!(n(s, "windows_twice"), 0, "{r}");
    assert!(
        r["consumer_cpu_ms_per_bed_second"].as_f64().is_some(),
        "{r}"
    );
}
