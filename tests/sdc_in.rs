//! IEEE 11073 SDC in, driven by a real SDC device: `tests/sdc_peer/provider.py` (Dräger's
//! `sdc11073` provider) plays vfdb 422 (of the test part) as a bedside monitor's two ECG leads
//! at 500 Hz in reports of 50 ms, its heart rate, and a VT alert condition raised where the
//! annotators mark VT. Holmes, given the device's address and with device tokens required (as
//! by default; an SDC device holds none), subscribes, scores its bed from the waveforms, and
//! judges the device's VT alarm from that bed's ECG: read back from the API and SQLite. Posts
//! to the notification sink from a stranger (a made-up session's path, an unknown device, a
//! body over the limit) are refused while the bed goes on being scored. The device then
//! vanishes (the daemon stays up, the bed goes stale) and comes back (subscribed again, the
//! bed scored again). Over mutual TLS (`[sdc]`'s `tls_ca`, the device with `sdc11073`'s
//! certloader) a device is scored and its alarm judged, while one whose certificate another
//! CA signed is never attached.
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

/// Lead II and V of `leads` over `span` (250 Hz), written as the device plays them: the file.
fn samples_at_250(
    dir: &std::path::Path,
    leads: &[Vec<f32>],
    span: std::ops::Range<usize>,
) -> std::path::PathBuf {
    let samples = dir.join("ecg.json");
    let json = serde_json::json!({"II": &leads[0][span.clone()], "V": &leads[1][span]});
    std::fs::write(&samples, json.to_string()).unwrap();
    samples
}

/// A counter's value in the daemon's `/metrics` (0 where it was never counted).
async fn counter(app: &common::App, name: &str) -> f64 {
    app.get_raw("/metrics")
        .await
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// A device's process, killed when dropped (so a failing test leaves none behind), and the
/// file its stderr (its events, JSON lines) goes to.
struct Device(std::process::Child, std::path::PathBuf);

impl Device {
    /// Times the device logged the event `ev` so far.
    fn said(&self, ev: &str) -> usize {
        std::fs::read_to_string(&self.1)
            .unwrap_or_default()
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|e| e["ev"] == ev))
            .count()
    }

    /// Gone at once, without a word to its subscribers.
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `tests/sdc_peer/provider.py` on `port` playing `samples` at `hz` (with `extra`
/// arguments): the process and its ready line.
fn start_device(port: u16, samples: &std::path::Path, hz: &str, extra: &[&str]) -> (Device, Value) {
    let log = samples.with_file_name(format!("device-{port}.log"));
    let mut p = Command::new("python3")
        .arg(common::root().join("tests/sdc_peer/provider.py"))
        .args(["--port", &port.to_string(), "--hz", hz, "--chunk-ms", "50"])
        .args(extra)
        .arg("--samples")
        .arg(samples)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    std::io::BufReader::new(p.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: Value = serde_json::from_str(&line).expect("the provider's ready line");
    (Device(p, log), ready)
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
    let port = common::free_port();
    let device = |extra: &[&str]| start_device(port, &samples, "500", extra);
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
    provider.kill();
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
    provider.kill();
    app.stop().await;
}

/// A device that misbehaves (one report in 25 cut in half, one in 390 over the sink's limit,
/// lead V under a code no ECG lead has) beside one that behaves: the daemon stays up, the
/// misbehaving device's bed is scored from the lead it knows and shows the gaps its spoilt
/// reports left, the other bed is scored without a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_device_leaves_the_daemon_up_its_bed_marked_and_the_other_bed_scored() {
    let test = "a_misbehaving_device_leaves_the_daemon_up_its_bed_marked_and_the_other_bed_scored";
    if !common::python_has(test, "sdc11073", "HOLMES_REQUIRE_SDC", "sdc11073==3.0.0") {
        return;
    }
    let Some(leads) = common::vfdb_422(test).await else {
        return;
    };
    let (from, to) = (1311 * FS, 1335 * FS);
    let dir = tempfile::tempdir().unwrap();
    let samples = samples_at_250(dir.path(), &leads, from..to);
    let (mut good, ready_good) = start_device(common::free_port(), &samples, "250", &[]);
    let spoil = [
        "--mangle-every",
        "25",
        "--huge-every",
        "390",
        "--lead-v-code",
        "131999",
    ];
    let (mut bad, ready_bad) = start_device(common::free_port(), &samples, "250", &spoil);
    let sink = common::free_port();
    let app = spawn_app(|c| {
        c.sdc.enabled = true;
        c.sdc.notify_listen = format!("127.0.0.1:{sink}");
        c.sdc.devices = [("bed-good", &ready_good), ("bed-bad", &ready_bad)]
            .map(|(bed, r)| holmes::config::SdcDevice {
                xaddr: r["xaddr"].as_str().unwrap().to_string(),
                bed: bed.into(),
            })
            .to_vec();
    })
    .await;
    // Both beds are scored, several windows each, and the device has sent a report over the
    // limit (its 390th, about 19 s in).
    for bed in ["bed-good", "bed-bad"] {
        app.wait_scores(bed, 60.0, |rows| rows.len() >= 3).await;
    }
    let until = Instant::now() + Duration::from_secs(60);
    while bad.said("huge") == 0 {
        assert!(
            Instant::now() < until,
            "the device sent no report over the limit"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(bad.said("mangled") > 0);
    let scored = app.wait_scores("bed-bad", 5.0, |_| true).await.len();
    app.wait_scores("bed-bad", 60.0, |rows| rows.len() > scored)
        .await;
    let (code, v) = app.get("/api/beds").await;
    assert_eq!(code, 200, "the daemon answers");
    let bed = |name: &str| {
        v["beds"]
            .as_array()
            .and_then(|b| b.iter().find(|x| x["bed"] == name).cloned())
            .unwrap_or_default()
    };
    let (g, b) = (bed("bed-good"), bed("bed-bad"));
    assert_eq!(g["status"], "live", "{g}");
    assert_eq!(g["gaps"], 0, "the behaving device's bed has no gap: {g}");
    assert!(
        b["gaps"].as_u64().unwrap() > 0,
        "the spoilt reports' gaps: {b}"
    );
    // The misbehaving bed is scored from lead II alone; the other from both leads.
    let db = rusqlite::Connection::open(app.dir.path().join("holmes.db")).unwrap();
    let second_lead = |bed: &str| -> Value {
        let q: String = db
            .query_row(
                "SELECT quality FROM scores WHERE bed = ?1 AND score IS NOT NULL
                 ORDER BY id DESC LIMIT 1",
                [bed],
                |r| r.get(0),
            )
            .unwrap_or_else(|e| {
                let statuses: Vec<String> = db
                    .prepare("SELECT status || ' ' || quality FROM scores WHERE bed = ?1")
                    .unwrap()
                    .query_map([bed], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                panic!("{bed} has no scored window ({e}): {statuses:?}")
            });
        serde_json::from_str::<Value>(&q).unwrap()["leads"][1].clone()
    };
    let v_good = second_lead("bed-good");
    assert!(v_good["coverage"].as_f64().unwrap() > 0.9, "{v_good}");
    let v_bad = second_lead("bed-bad");
    assert!(
        v_bad.is_null() || v_bad["coverage"].as_f64() == Some(0.0),
        "lead V of an unknown code is left out: {v_bad}"
    );
    // Reports that did not read were counted.
    let unread = counter(&app, "holmes_sdc_reports_unread_total").await;
    assert!(unread >= 1.0, "unread reports counted: {unread}");
    good.kill();
    bad.kill();
    app.stop().await;
}

/// A TLS client trusting `ca` and showing the certificate and key in `dir` (`cert.pem`,
/// `key.pem`).
fn client_with_certificate(
    ca: &std::path::Path,
    dir: &std::path::Path,
) -> std::sync::Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(ca).unwrap())
        .unwrap();
    let certs = vec![CertificateDer::from_pem_file(dir.join("cert.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(dir.join("key.pem")).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .unwrap(),
    )
}

/// POSTs an empty report over TLS to the sink at `addr`: the answer's status, `None` where
/// the handshake or the connection failed.
async fn tls_post(
    addr: std::net::SocketAddr,
    client: std::sync::Arc<rustls::ClientConfig>,
) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut s = tokio_rustls::TlsConnector::from(client)
        .connect(name, tcp)
        .await
        .ok()?;
    let head = "POST /sdc/0/0123456789abcdef/reports HTTP/1.1\r\nHost: s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    s.write_all(head.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    String::from_utf8_lossy(&buf)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
}

/// `[sdc] tls_ca`: Holmes calls a device over HTTPS showing its certificate, and the device
/// posts its reports to the sink over HTTPS showing its own (mutual TLS both ways, with
/// sdc11073's certloader on the device's side). The bed is scored and the device's VT alarm
/// judged. A device whose certificate another CA signed is never attached, and the sink
/// answers neither plain HTTP nor a client without a certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_speaks_tls_is_scored_and_one_from_another_ca_is_not() {
    let test = "a_device_that_speaks_tls_is_scored_and_one_from_another_ca_is_not";
    if !common::python_has(test, "sdc11073", "HOLMES_REQUIRE_SDC", "sdc11073==3.0.0") {
        return;
    }
    let Some(leads) = common::vfdb_422(test).await else {
        return;
    };
    let (from, to) = (1311 * FS, 1345 * FS);
    let dir = tempfile::tempdir().unwrap();
    let samples = samples_at_250(dir.path(), &leads, from..to);
    let (ward, other) = (dir.path().join("ward"), dir.path().join("other"));
    common::ca_and_leaf(&ward, "ward CA");
    common::ca_and_leaf(&other, "another CA");
    // The stranger trusts the ward's CA (it would take Holmes's certificate), but another CA
    // signed its own: Holmes is the side that must refuse it.
    std::fs::copy(ward.join("cacert.pem"), other.join("cacert.pem")).unwrap();
    let tls = |d: &std::path::Path| ["--tls-dir".to_string(), d.display().to_string()];
    let [a, b] = tls(&ward);
    let (mut device, ready) = start_device(
        common::free_port(),
        &samples,
        "250",
        &[&a, &b, "--vt-at", "28"],
    );
    let [a, b] = tls(&other);
    let (mut stranger, ready_stranger) =
        start_device(common::free_port(), &samples, "250", &[&a, &b]);
    let xaddr = ready["xaddr"].as_str().unwrap().to_string();
    assert!(xaddr.starts_with("https://"), "{xaddr}");
    let sink = std::net::SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let app = spawn_app(|c| {
        c.sdc.enabled = true;
        c.sdc.notify_listen = sink.to_string();
        c.sdc.tls_ca = Some(ward.join("cacert.pem"));
        c.sdc.tls = Some(holmes::config::TlsConfig {
            cert: ward.join("holmes/cert.pem"),
            key: ward.join("holmes/key.pem"),
        });
        c.sdc.devices = [("bed-tls", &ready), ("bed-stranger", &ready_stranger)]
            .map(|(bed, r)| holmes::config::SdcDevice {
                xaddr: r["xaddr"].as_str().unwrap().to_string(),
                bed: bed.into(),
            })
            .to_vec();
    })
    .await;
    app.wait_scores("bed-tls", 60.0, |rows| rows.len() >= 2)
        .await;
    // The sink: plain HTTP gets no answer; HTTPS without a certificate is refused at the
    // handshake.
    assert_eq!(post(sink, "/sdc/0/x/reports", b"<x/>").await, 0);
    // A client without a certificate, or with one another CA signed, gets no answer; with
    // one the ward's CA signed, it reaches the sink (404: no session at that path).
    let no_cert = holmes::http::tls::client_config(&ward.join("cacert.pem")).unwrap();
    assert_eq!(tls_post(sink, no_cert).await, None);
    let foreign = client_with_certificate(&ward.join("cacert.pem"), &other.join("holmes"));
    assert_eq!(tls_post(sink, foreign).await, None);
    let ours = client_with_certificate(&ward.join("cacert.pem"), &ward.join("holmes"));
    assert_eq!(tls_post(sink, ours).await, Some(404));
    // The device's VT alarm, judged from the bed's ECG.
    let until = Instant::now() + Duration::from_secs(45);
    let alarm = loop {
        let (_, v) = app.get("/api/beds/bed-tls/monitor_alarms").await;
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
    // The device another CA vouches for was never attached (it would take Holmes's
    // certificate; Holmes refused its own at the first request): its bed has no score, and
    // sessions ended (the other device's runs on unbroken).
    assert!(
        app.wait_scores("bed-stranger", 1.0, |_| true)
            .await
            .is_empty()
    );
    let ended = counter(&app, "holmes_sdc_sessions_ended_total").await;
    assert!(ended >= 1.0, "the stranger's sessions ended: {ended}");
    device.kill();
    stranger.kill();
    app.stop().await;
}

/// `holmes validate` on `[sdc]`'s TLS: the files load, Holmes has a certificate to show, and
/// every device's address speaks TLS when `tls_ca` is set.
#[test]
fn holmes_validate_checks_the_sdc_sections_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ward = dir.path().join("ward");
    common::ca_and_leaf(&ward, "ward CA");
    let run = |edit: &dyn Fn(&mut holmes::config::Config)| {
        let mut cfg = common::test_config(dir.path());
        cfg.sdc.enabled = true;
        cfg.sdc.tls_ca = Some(ward.join("cacert.pem"));
        cfg.sdc.tls = Some(holmes::config::TlsConfig {
            cert: ward.join("holmes/cert.pem"),
            key: ward.join("holmes/key.pem"),
        });
        cfg.sdc.devices = vec![holmes::config::SdcDevice {
            xaddr: "https://10.20.1.17:6464/4f1a".into(),
            bed: "bed-7".into(),
        }];
        edit(&mut cfg);
        common::holmes_validate(dir.path(), &cfg)
    };
    let (ok, text) = run(&|_| {});
    assert!(
        ok && text.contains("sdc: 1 device(s)") && text.contains("mutual TLS"),
        "{text}"
    );
    let missing = dir.path().join("no-such-ca.pem");
    let (ok, text) = run(&|c| c.sdc.tls_ca = Some(missing.clone()));
    assert!(!ok && text.contains("no-such-ca.pem"), "{text}");
    let (ok, text) = run(&|c| c.sdc.tls = None);
    assert!(!ok && text.contains("[sdc.tls] or [server.tls]"), "{text}");
    let (ok, text) = run(&|c| c.sdc.devices[0].xaddr = "http://10.20.1.17:6464/4f1a".into());
    assert!(!ok && text.contains("every device speaks TLS"), "{text}");
    let (ok, text) = run(&|c| c.sdc.tls_ca = None);
    assert!(!ok && text.contains("needs sdc.tls_ca"), "{text}");
}
