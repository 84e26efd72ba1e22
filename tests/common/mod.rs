//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A free loopback port (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The PhysioNet folder (`HOLMES_DATA` or `../shared/data/physionet`), or `None` with the
/// reason printed, so data-dependent tests skip visibly when it is absent.
pub fn data_dir(test: &str) -> Option<PathBuf> {
    let dir = holmes::training::dataset::default_data_dir();
    if dir.join("vfdb").join("RECORDS").exists() {
        Some(dir)
    } else {
        println!(
            "SKIPPED {test}: PhysioNet data not found at {} (set HOLMES_DATA)",
            dir.display()
        );
        None
    }
}

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// vfdb 422's two leads (of the test part; the beat counter never learnt from it), or `None`
/// where the data is absent (printed, as [`data_dir`] does).
pub async fn vfdb_422(test: &str) -> Option<Vec<Vec<f32>>> {
    let data = data_dir(test)?;
    let keys = vec![(holmes::training::dataset::Database::Vfdb, "422".to_string())];
    let recs =
        tokio::task::spawn_blocking(move || holmes::training::dataset::load_keys(&data, &keys))
            .await
            .unwrap()
            .unwrap();
    Some(recs[0].leads().to_vec())
}

/// Whether python3 imports `module` (a test peer); where not, `SKIPPED` is printed with how
/// to install it (`pip`), unless `require` (an environment variable CI sets) is set.
pub fn python_has(test: &str, module: &str, require: &str, pip: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os(require).is_none(),
            "{require} is set but python3 cannot import {module} (pip install {pip})"
        );
        println!("SKIPPED {test}: python3's {module} not found (pip install {pip})");
    }
    ok
}

/// `holmes serve --config CONFIG` as a child process, its log at `warn` on stderr.
pub fn serve_child(config: &Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use holmes::config::{Config, Stagger};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

/// A daemon on port 0 with a temporary database, serving the committed zoo.
pub struct App {
    pub addr: std::net::SocketAddr,
    pub running: Option<holmes::appliance::server::Running>,
    pub dir: tempfile::TempDir,
}

/// The members tests serve unless they say otherwise.
pub const TEST_MEMBERS: [&str; 3] = [
    "ecg-primary-5s-w8-d2",
    "ecg-secondary-5s-w8-d2",
    "vitals-hr-mlp",
];

/// Test configuration: the embedded defaults, a scratch database, short timers.
pub fn test_config(dir: &Path) -> Config {
    let mut c = Config::default();
    c.storage.db = dir.join("holmes.db");
    c.storage.flush_ms = 10;
    c.ensemble.models_dir = root().join("models");
    c.ward.grace_secs = 0.5;
    // Window ends on each bed's own timeline, which these tests stream faster than real time
    // (a lone configured bed's at whole hops); the wall-clock default is tested in
    // tests/daemon.rs with monitors streaming in real time.
    c.ward.stagger = Stagger::Timeline;
    // These tests check what is scored, not how fast: a loaded CI machine (debug build, tests
    // in parallel) must not turn windows partial. Deadlines are tested in tests/engine.rs.
    c.engine.slo_ms = 20_000;
    // The configured members serve unless a test turns the composer on: the smallest models of
    // both leads and the vitals model (cheap in a debug build at the 5-s hop, and every kind of
    // member), not the defaults; tests about the defaults set them.
    c.composer.enabled = false;
    c.ensemble.members = TEST_MEMBERS.map(String::from).to_vec();
    // The API is read without signing in (the dashboard tests sign in where they need to).
    c.dashboard.public_ward_view = true;
    // Monitors present any token (tests/security.rs issues real device tokens).
    c.auth.require_device_tokens = false;
    c
}

pub async fn spawn_app(edit: impl FnOnce(&mut Config)) -> App {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    edit(&mut cfg);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = holmes::appliance::server::start(cfg, listener)
        .await
        .unwrap();
    App {
        addr: running.addr,
        running: Some(running),
        dir,
    }
}

impl App {
    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws/monitor", self.addr)
    }

    /// GET `path`, returning the raw response.
    pub async fn get_raw(&self, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf).to_string()
    }

    /// GET `path`, returning status and JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let mut s = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf).to_string();
        let status: u16 = text[9..12].parse().unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
        // Chunked bodies: take the JSON between the first '{' and the last '}'.
        let json = match (body.find('{'), body.rfind('}')) {
            (Some(a), Some(b)) => &body[a..=b],
            _ => "null",
        };
        (status, serde_json::from_str(json).unwrap_or(Value::Null))
    }

    /// Waits until `pred` holds for `/api/beds/{bed}/scores`, or panics after `secs`.
    pub async fn wait_scores(
        &self,
        bed: &str,
        secs: f64,
        pred: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let until = std::time::Instant::now() + Duration::from_secs_f64(secs);
        loop {
            let (_, v) = self.get(&format!("/api/beds/{bed}/scores")).await;
            let rows = v["scores"].as_array().cloned().unwrap_or_default();
            if pred(&rows) {
                return rows;
            }
            assert!(
                std::time::Instant::now() < until,
                "timed out waiting for scores of {bed}: {rows:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown.cancel();
            r.stopped().await;
        }
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A scripted bedside monitor.
pub struct Monitor {
    pub ws: Ws,
    pub welcome: Value,
}

pub fn hello(bed: &str, device: &str) -> Value {
    json!({"type": "hello", "protocol": 1, "bed": bed, "device": device, "token": "t",
           "ecg": [{"lead": "II", "hz": 250}, {"lead": "V", "hz": 250}],
           "vitals": [{"name": "hr", "unit": "bpm"}]})
}

/// Connects and sends `hello`; returns the socket and the server's first reply.
pub async fn connect_raw(url: &str, hello: &Value) -> (Ws, Option<Message>) {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws.send(Message::Text(hello.to_string().into()))
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .ok()
        .flatten()
        .and_then(Result::ok);
    (ws, first)
}

/// The close code and reason of a close message.
pub fn close_of(m: &Option<Message>) -> Option<(u16, String)> {
    match m {
        Some(Message::Close(Some(CloseFrame { code, reason }))) => {
            Some((u16::from(*code), reason.to_string()))
        }
        _ => None,
    }
}

impl Monitor {
    pub async fn connect(url: &str, bed: &str, device: &str) -> Monitor {
        Monitor::connect_with(url, &hello(bed, device)).await
    }

    /// Connects with this `hello` and expects a welcome.
    pub async fn connect_with(url: &str, hello: &Value) -> Monitor {
        let (ws, first) = connect_raw(url, hello).await;
        let welcome: Value = match first {
            Some(Message::Text(t)) => serde_json::from_str(&t).unwrap(),
            other => panic!("expected a welcome, got {other:?}"),
        };
        assert_eq!(welcome["type"], "welcome");
        Monitor { ws, welcome }
    }

    pub async fn send(&mut self, v: Value) {
        self.ws
            .send(Message::Text(v.to_string().into()))
            .await
            .unwrap();
    }

    pub async fn send_text(&mut self, t: &str) {
        self.ws
            .send(Message::Text(t.to_owned().into()))
            .await
            .unwrap();
    }

    /// Sends frames `seqs` of a synthetic signal (25 samples each, 100 ms apart from `t0`),
    /// with a 1 Hz heart rate.
    pub async fn stream(&mut self, t0: i64, seqs: std::ops::Range<u64>) {
        self.stream_leads(t0, seqs, &["II", "V"]).await;
    }

    /// [`stream`](Self::stream) on these leads alone (of `II` and `V`).
    pub async fn stream_leads(&mut self, t0: i64, seqs: std::ops::Range<u64>, names: &[&str]) {
        for seq in seqs {
            let x: Vec<f32> = (0..25).map(|k| signal(seq * 25 + k)).collect();
            let v: Vec<f32> = x.iter().map(|s| -0.5 * s).collect();
            let leads: serde_json::Map<String, Value> = [("II", x), ("V", v)]
                .into_iter()
                .filter(|(n, _)| names.contains(n))
                .map(|(n, l)| (n.to_owned(), json!(l)))
                .collect();
            self.send(
                json!({"type": "samples", "seq": seq, "t_ms": t0 + seq as i64 * 100,
                             "leads": leads}),
            )
            .await;
            if seq % 10 == 9 {
                let s = (seq + 1) / 10;
                self.send(
                    json!({"type": "vitals", "seq": s, "t_ms": t0 + s as i64 * 1000,
                                 "values": [{"name": "hr", "value": 72.0, "status": []}]}),
                )
                .await;
            }
        }
    }

    /// As [`stream`](Self::stream), in real time: frame `seq` leaves as its last sample is
    /// taken, 100 ms after the one before it.
    /// Sends `leads[..][from..to]` as II and V in frames of 25 samples, 100 ms apart from
    /// `t0`, numbered from 0.
    pub async fn stream_record(&mut self, t0: i64, leads: &[Vec<f32>], from: usize, to: usize) {
        for (seq, start) in (from..to).step_by(25).enumerate() {
            let end = (start + 25).min(to);
            let frame = json!({"type": "samples", "seq": seq, "t_ms": t0 + seq as i64 * 100,
                "leads": {"II": &leads[0][start..end], "V": &leads[1][start..end]}});
            self.send(frame).await;
        }
    }

    pub async fn stream_live(&mut self, t0: i64, seqs: std::ops::Range<u64>) {
        let start = tokio::time::Instant::now();
        for (k, seq) in seqs.enumerate() {
            tokio::time::sleep_until(start + Duration::from_millis(100 * (k as u64 + 1))).await;
            self.stream(t0, seq..seq + 1).await;
        }
    }

    /// Reads replies until one matches `pred` (or `secs` pass).
    pub async fn expect(&mut self, secs: f64, pred: impl Fn(&Value) -> bool) -> Value {
        let until = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
        loop {
            let m = tokio::time::timeout_at(until, self.ws.next()).await;
            match m {
                Ok(Some(Ok(Message::Text(t)))) => {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if pred(&v) {
                        return v;
                    }
                }
                Ok(Some(Ok(_))) => {}
                other => panic!("no matching reply: {other:?}"),
            }
        }
    }

    /// Reads until the server closes; returns the close code and reason.
    pub async fn closed(&mut self, secs: f64) -> Option<(u16, String)> {
        let until = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
        loop {
            match tokio::time::timeout_at(until, self.ws.next()).await {
                Ok(Some(Ok(m @ Message::Close(_)))) => return close_of(&Some(m)),
                Ok(Some(Ok(_))) => {}
                _ => return None,
            }
        }
    }
}

/// A deterministic ECG-like test signal (a 72 bpm spike train on a slow wave), mV.
pub fn signal(i: u64) -> f32 {
    let t = i as f32 / 250.0;
    let phase = (t * 1.2).fract();
    let spike = if phase < 0.04 {
        1.5 * (1.0 - (phase - 0.02).abs() / 0.02)
    } else {
        0.0
    };
    spike + 0.1 * (t * 2.0).sin()
}

/// Copies a committed zoo model into another zoo folder.
pub fn copy_model(name: &str, to: &Path) {
    let src = root().join("models").join(name);
    let dst = to.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for f in ["manifest.json", "weights.mpk"] {
        std::fs::copy(src.join(f), dst.join(f)).unwrap();
    }
}

/// The weights' SHA-256 a model folder's manifest names (what a rule book entry names it by).
pub fn weights_sha(model_dir: &Path) -> String {
    let t = std::fs::read_to_string(model_dir.join("manifest.json")).unwrap();
    let m: Value = serde_json::from_str(&t).unwrap();
    m["weights"]["sha256"].as_str().unwrap().to_owned()
}

/// `/api/health`'s problems, as strings (panics if the body has no list of them).
pub fn problems(h: &Value) -> Vec<&str> {
    h["problems"]
        .as_array()
        .unwrap_or_else(|| panic!("no problems list in {h}"))
        .iter()
        .map(|p| {
            p.as_str()
                .unwrap_or_else(|| panic!("a problem is not a string: {h}"))
        })
        .collect()
}

impl App {
    /// `/api/health`'s body.
    pub async fn health(&self) -> Value {
        self.get("/api/health").await.1
    }

    /// Waits until `pred` holds for `/api/health`, or panics after `secs` with the last body.
    pub async fn wait_health(&self, secs: f64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let until = std::time::Instant::now() + Duration::from_secs_f64(secs);
        loop {
            let h = self.health().await;
            if pred(&h) {
                return h;
            }
            assert!(
                std::time::Instant::now() < until,
                "timed out waiting for {what}: {h}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Reads the live feed (`/api/stream`) until a snapshot satisfies `pred`; panics after
    /// `secs`.
    pub async fn wait_snapshot(&self, secs: f64, pred: impl Fn(&Value) -> bool) -> Value {
        let mut s = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let req = "GET /api/stream HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n";
        s.write_all(req.as_bytes()).await.unwrap();
        let until = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
        let (mut buf, mut last) = (Vec::<u8>::new(), Value::Null);
        loop {
            let mut chunk = [0u8; 65536];
            let n = match tokio::time::timeout_at(until, s.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => n,
                other => panic!("no matching snapshot ({other:?}); last: {last}"),
            };
            buf.extend_from_slice(&chunk[..n]);
            // Events are `data: {...}` lines; chunked framing puts sizes on lines of their own.
            let text = String::from_utf8_lossy(&buf).to_string();
            for line in text.lines() {
                let parsed = line
                    .strip_prefix("data: ")
                    .and_then(|d| serde_json::from_str::<Value>(d).ok());
                if let Some(v) = parsed {
                    if pred(&v) {
                        return v;
                    }
                    last = v;
                }
            }
            if let Some(cut) = text.rfind('\n') {
                buf.drain(..cut + 1);
            }
        }
    }
}

/// Adds a dashboard user to the ward database at `db` (created and migrated if new).
pub fn add_user(db: &Path, name: &str, role: holmes::dashboard::auth::Role, password: &str) {
    holmes::dashboard::auth::Users::new(
        holmes::serving::store::Db::open(db, &holmes::appliance::schema::WARD).unwrap(),
    )
    .unwrap()
    .add(name, role, password, false)
    .unwrap();
}

/// A private CA (named `name`) and a certificate it signed for 127.0.0.1, written as
/// sdc11073's certloader reads them (`cacert.pem`, `usercert.pem`, `userkey.pem`) into `dir`.
pub fn ca_and_leaf(dir: &std::path::Path, name: &str) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    std::fs::create_dir_all(dir).unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, name);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, format!("{name} leaf"));
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("cacert.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("usercert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("userkey.pem"), key.serialize_pem()).unwrap();
    // A second certificate from the same CA: Holmes's, in `holmes/`.
    let mut me = CertificateParams::new(vec!["127.0.0.1".into()]).unwrap();
    me.distinguished_name
        .push(DnType::CommonName, format!("{name} holmes"));
    let key = KeyPair::generate().unwrap();
    let cert = me.signed_by(&key, &issuer).unwrap();
    std::fs::create_dir_all(dir.join("holmes")).unwrap();
    std::fs::write(dir.join("holmes/cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("holmes/key.pem"), key.serialize_pem()).unwrap();
}

/// `holmes validate` on `cfg`, written into `dir`: whether it passed, and what it printed.
pub fn holmes_validate(dir: &Path, cfg: &Config) -> (bool, String) {
    let path = dir.join("holmes.toml");
    std::fs::write(&path, toml::to_string(cfg).unwrap()).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args(["validate", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text)
}
