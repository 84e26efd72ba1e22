//! IEEE 11073 SDC in, driven by a real SDC device: `tests/sdc_peer/provider.py` (Dräger's
//! `sdc11073` provider) plays vfdb 422 (of the test part) as a bedside monitor's two ECG leads
//! at 500 Hz in reports of 50 ms, its heart rate, and a VT alert condition raised where the
//! annotators mark VT. Holmes, given the device's address and with device tokens required (as
//! by default; an SDC device holds none), subscribes, scores its bed from the waveforms, and
//! judges the device's VT alarm from that bed's ECG: read back from the API and SQLite. Posts
//! to the notification sink from a stranger (a made-up session's path, an unknown device, a
//! body over the limit) are refused while the bed goes on being scored. The device then
//! vanishes (the daemon stays up, the bed goes stale) and comes back (subscribed again, the
//! bed scored again).
//!
//! Without python3 and its `sdc11073` package this prints `SKIPPED` (`pip install
//! sdc11073==3.0.0`), unless `HOLMES_REQUIRE_SDC` is set, as in CI.

mod common;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::spawn_app;
use serde_json::Value;

const FS: usize = 250;

/// POSTs `body` to `path` on `addr`: the answer's status.
async fn post(addr: std::net::SocketAddr, path: &str, body: &[u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: sink\r\nContent-Type: application/soap+xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let _ = s.write_all(body).await;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_devices_ecg_is_scored_and_its_vt_alarm_judged_and_its_loss_shown() {
    let test = "a_devices_ecg_is_scored_and_its_vt_alarm_judged_and_its_loss_shown";
    if !common::python_has(test, "sdc11073", "HOLMES_REQUIRE_SDC", "sdc11073==3.0.0") {
        return;
    }
    let Some(leads) = common::vfdb_422(test).await else {
        return;
    };
    // vfdb 422's annotators mark VT from 1335.8 s: the device plays from 1311 s and raises its
    // VT alarm 28 s in (1339 s), having sent the bed well over the 16 s the opinion reads.
    let (from, to) = (1311 * FS, 1345 * FS);
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("ecg.json");
    // At 500 Hz: each 250-Hz sample, then the midpoint to the next.
    let up = |x: &[f32]| -> Vec<f32> {
        x.windows(2)
            .flat_map(|w| [w[0], 0.5 * (w[0] + w[1])])
            .collect()
    };
    let json = serde_json::json!({"II": up(&leads[0][from..to]), "V": up(&leads[1][from..to])});
    std::fs::write(&samples, json.to_string()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let device = |extra: &[&str]| {
        let mut p = Command::new("python3")
            .arg(common::root().join("tests/sdc_peer/provider.py"))
            .args([
                "--port",
                &port.to_string(),
                "--hz",
                "500",
                "--chunk-ms",
                "50",
            ])
            .args(extra)
            .arg("--samples")
            .arg(&samples)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufReader::new(p.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(&line).expect("the provider's ready line");
        (p, ready)
    };
    let (mut provider, ready) = device(&["--vt-at", "28"]);
    let xaddr = ready["xaddr"].as_str().unwrap().to_string();
    let epr = ready["epr"].as_str().unwrap().to_string();

    let sink = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let app = spawn_app(|c| {
        c.auth.require_device_tokens = true;
        c.auth.devices_refresh_secs = 0.2;
        c.sdc.enabled = true;
        c.sdc.notify_listen = sink.to_string();
        c.sdc.devices = vec![holmes::config::SdcDevice {
            xaddr: xaddr.clone(),
            bed: "bed-sdc".into(),
        }];
    })
    .await;
    // The bed is scored from the device's waveforms.
    app.wait_scores("bed-sdc", 40.0, |rows| !rows.is_empty())
        .await;
    // A stranger posting to the sink (a made-up session, an unknown device, a huge body) is
    // refused; the device's session goes on.
    let forged = "<s12:Envelope xmlns:s12=\"http://www.w3.org/2003/05/soap-envelope\"/>";
    let made_up = "/sdc/0/0123456789abcdef0123456789abcdef/reports";
    assert_eq!(post(sink, made_up, forged.as_bytes()).await, 404);
    assert_eq!(
        post(sink, "/sdc/7/0123456789abcdef/reports", forged.as_bytes()).await,
        404
    );
    let huge = vec![b'<'; 600 * 1024];
    assert_eq!(post(sink, made_up, &huge).await, 413);
    let before = app.wait_scores("bed-sdc", 5.0, |_| true).await.len();
    app.wait_scores("bed-sdc", 30.0, |rows| rows.len() > before)
        .await;
    // The device's VT alarm, judged from the bed's ECG.
    let until = Instant::now() + Duration::from_secs(45);
    let alarm = loop {
        let (_, v) = app.get("/api/beds/bed-sdc/monitor_alarms").await;
        if let Some(a) = v["alarms"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["kind"] == "vt").cloned())
            && !a["confirmed"].is_null()
        {
            break a;
        }
        assert!(Instant::now() < until, "no judged VT alarm: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(alarm["confirmed"], Value::Bool(true), "{alarm}");
    let reason = alarm["reason"].as_str().unwrap();
    assert!(reason.contains("II") && reason.contains("V1"), "{alarm}");
    assert!(
        alarm["provenance"]["coverage"].as_f64().unwrap() > 0.9,
        "{alarm}"
    );
    let db = rusqlite::Connection::open(app.dir.path().join("holmes.db")).unwrap();
    let kind: String = db
        .query_row(
            "SELECT kind FROM monitor_alarms WHERE bed = 'bed-sdc' AND confirmed = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kind, "vt");

    // The device vanishes: the bed goes stale, the daemon stays up.
    provider.kill().unwrap();
    provider.wait().unwrap();
    let status = |want: &'static [&'static str], secs: u64| {
        let app = &app;
        async move {
            let until = Instant::now() + Duration::from_secs(secs);
            loop {
                let (code, v) = app.get("/api/beds").await;
                assert_eq!(code, 200);
                let bed = v["beds"]
                    .as_array()
                    .and_then(|b| b.iter().find(|x| x["bed"] == "bed-sdc").cloned())
                    .unwrap_or_default();
                let state = bed["status"].as_str().unwrap_or_default().to_string();
                if want.contains(&state.as_str()) {
                    return;
                }
                assert!(Instant::now() < until, "the bed stays {state:?}: {bed}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    status(&["stale", "lost"], 30).await;
    let scored = app.wait_scores("bed-sdc", 5.0, |_| true).await.len();
    // It comes back at the same address: subscribed again, the bed live and scored again.
    let (mut provider, _) = device(&["--epr", &epr]);
    status(&["live"], 40).await;
    app.wait_scores("bed-sdc", 40.0, |rows| rows.len() > scored)
        .await;
    provider.kill().unwrap();
    provider.wait().unwrap();
    app.stop().await;
}
