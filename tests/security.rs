//! Security end to end: device tokens issued and revoked with the real `holmes device`
//! command against the daemon's SQLite file, TLS (`wss://` and `https://` with a self-signed
//! certificate made here), plain HTTP kept off the network, and an info log free of tokens
//! and bed ids.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Monitor, add_user, close_of, connect_raw, hello, spawn_app, test_config};
use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::Connector;
use tokio_tungstenite::tungstenite::Message;

const T0: i64 = 1_700_000_000_000;

fn holmes(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args(args)
        .output()
        .expect("running holmes")
}

/// `holmes device add`: the token printed on standard output.
fn issue(db: &Path, name: &str, bed: Option<&str>) -> String {
    let mut args = vec!["device", "add", name, "--db", db.to_str().unwrap()];
    if let Some(b) = bed {
        args.extend(["--bed", b]);
    }
    let out = holmes(&args);
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "one token line on stdout: {token:?}");
    token
}

fn hello_with(bed: &str, device: &str, token: &str) -> Value {
    let mut h = hello(bed, device);
    h["token"] = json!(token);
    h
}

/// The close code of a hello's first reply (None: not a close).
async fn refused(url: &str, h: &Value) -> Option<(u16, String)> {
    close_of(&connect_raw(url, h).await.1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_tokens_are_issued_checked_and_revoked() {
    let app = spawn_app(|c| {
        c.auth.require_device_tokens = true;
        c.auth.devices_refresh_secs = 0.2;
    })
    .await;
    let db = app.dir.path().join("holmes.db");
    let url = app.ws_url();
    // Issued while the daemon runs: the first hello with the new token finds it.
    let bedside = issue(&db, "mon-1", Some("icu-1"));
    let gateway = issue(&db, "gw-1", None);
    let (_, first) = connect_raw(&url, &hello_with("icu-1", "mon-1", &bedside)).await;
    assert!(
        matches!(&first, Some(Message::Text(t)) if t.contains("welcome")),
        "{first:?}"
    );
    let refusals = [
        hello_with("icu-1", "mon-1", "not-a-token"),
        hello_with("icu-1", "mon-1", ""),
        // Another device's name with mon-1's token.
        hello_with("icu-2", "mon-2", &bedside),
        // mon-1 is bound to icu-1.
        hello_with("icu-2", "mon-1", &bedside),
    ];
    for h in &refusals {
        assert_eq!(
            refused(&url, h).await,
            Some((4001, "token not accepted".into())),
            "{h}"
        );
    }
    // A gateway (no bed binding) sends for several beds.
    let mut gw = Vec::new();
    for bed in ["icu-5", "icu-6"] {
        let (ws, first) = connect_raw(&url, &hello_with(bed, "gw-1", &gateway)).await;
        assert!(matches!(&first, Some(Message::Text(t)) if t.contains("welcome")));
        gw.push(Monitor {
            ws,
            welcome: Value::Null,
        });
    }
    gw[0].stream(T0, 0..5).await;

    let out = holmes(&["device", "list", "--db", db.to_str().unwrap()]);
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("mon-1") && listing.contains("icu-1") && listing.contains("gw-1"));
    assert!(!listing.contains(&bedside) && !listing.contains(&gateway));

    // Revoking closes the device's live connections and refuses its next hellos.
    let out = holmes(&["device", "revoke", "gw-1", "--db", db.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    for m in &mut gw {
        assert_eq!(
            m.closed(10.0).await,
            Some((4001, "device token revoked".into()))
        );
    }
    assert_eq!(
        refused(&url, &hello_with("icu-5", "gw-1", &gateway))
            .await
            .map(|c| c.0),
        Some(4001)
    );
    let out = holmes(&["device", "revoke", "gw-1", "--db", db.to_str().unwrap()]);
    assert!(!out.status.success(), "revoking twice is an error");

    // Only hashes are stored; issuing and revoking are audited with the CLI's actor.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let hashes: Vec<String> = conn
        .prepare("SELECT token_sha256 FROM devices")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(hashes.len(), 2);
    assert!(hashes.iter().all(|h| *h != bedside && *h != gateway));
    let audit = holmes::serving::store::audit::read_all(&db).unwrap();
    let actions: Vec<&str> = audit.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        actions
            .iter()
            .filter(|a| **a == "device_added" || **a == "device_revoked")
            .count(),
        3,
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .filter(|r| r.1.starts_with("device_"))
            .all(|r| r.0.as_deref().is_some_and(|a| a.starts_with("cli:"))
                && !r.2.contains(&bedside)
                && !r.2.contains(&gateway))
    );
    app.stop().await;
}

/// A self-signed certificate for 127.0.0.1 and localhost: `(cert.pem, key.pem)`.
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let ck =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// GET over HTTPS trusting `ca`: status and JSON body.
async fn https_get(addr: std::net::SocketAddr, ca: &Path, path: &str) -> (u16, Value) {
    let (status, _, v) = https_get_with_headers(addr, ca, path).await;
    (status, v)
}

/// GET over HTTPS trusting `ca`: status, the head (lower-cased) and JSON body.
async fn https_get_with_headers(
    addr: std::net::SocketAddr,
    ca: &Path,
    path: &str,
) -> (u16, String, Value) {
    let connector = tokio_rustls::TlsConnector::from(holmes::http::tls::client_config(ca).unwrap());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut s = connector.connect(name, tcp).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    // A peer that closes without close_notify is fine here: the body has arrived.
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).to_string();
    let status: u16 = text[9..12].parse().unwrap();
    let head = text.split("\r\n\r\n").next().unwrap_or("").to_lowercase();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    let json = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) => &body[a..=b],
        _ => "null",
    };
    (
        status,
        head,
        serde_json::from_str(json).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_carries_the_monitor_socket_and_the_api() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let app = spawn_app(|c| {
        c.server.tls = Some(holmes::config::TlsConfig {
            cert: cert.clone(),
            key: key.clone(),
        });
        // A configured bed alone has phase 0: 32 s of signal close its first window.
        c.ward.beds = vec!["tls-bed".into()];
    })
    .await;
    let wss = format!("wss://127.0.0.1:{}/ws/monitor", app.addr.port());
    let connector = Connector::Rustls(holmes::http::tls::client_config(&cert).unwrap());
    let (ws, _) =
        tokio_tungstenite::connect_async_tls_with_config(&wss, None, false, Some(connector))
            .await
            .unwrap();
    let mut m = Monitor {
        ws,
        welcome: Value::Null,
    };
    m.ws.send(Message::Text(
        hello("tls-bed", "tls-dev").to_string().into(),
    ))
    .await
    .unwrap();
    m.expect(10.0, |v| v["type"] == "welcome").await;
    m.stream(T0, 0..320).await;
    // The score comes back over HTTPS.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, v) = https_get(app.addr, &cert, "/api/beds/tls-bed/scores").await;
        assert_eq!(status, 200);
        if v["scores"].as_array().is_some_and(|r| !r.is_empty()) {
            assert_eq!(v["scores"][0]["status"], "scored", "{v}");
            break;
        }
        assert!(std::time::Instant::now() < until, "no score over TLS: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, head, _) = https_get_with_headers(app.addr, &cert, "/health/live").await;
    assert_eq!(status, 200);
    assert!(
        head.contains("strict-transport-security: max-age=31536000"),
        "{head}"
    );

    // Plain ws:// and http:// to the TLS port get nowhere.
    let plain = format!("ws://{}/ws/monitor", app.addr);
    assert!(tokio_tungstenite::connect_async(&plain).await.is_err());
    let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    s.write_all(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
    // A certificate the client does not trust is refused.
    let other = tempfile::tempdir().unwrap();
    let (stranger, _) = self_signed(other.path());
    let connector = Connector::Rustls(holmes::http::tls::client_config(&stranger).unwrap());
    assert!(
        tokio_tungstenite::connect_async_tls_with_config(&wss, None, false, Some(connector))
            .await
            .is_err()
    );

    // The simulator speaks wss:// with --ca.
    let report = holmes::tools::sim::run(holmes::tools::sim::SimOptions {
        url: wss,
        beds: 1,
        source: holmes::tools::sim::Source::Synthetic,
        duration: Duration::from_secs(2),
        speed: 10.0,
        start_secs: 0.0,
        token: "t".into(),
        device: None,
        ca: Some(cert.clone()),
        bed_prefix: "sim-".into(),
        faults: holmes::tools::sim::Faults::default(),
        records: Vec::new(),
        seed: 3,
        ramp: Duration::ZERO,
        storm_at: None,
        monitor_alarms: false,
        patient_authority: None,
    })
    .await
    .unwrap();
    assert!(report.connects.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    assert!(
        report
            .frames_sent
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_refused_off_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let e = match holmes::appliance::server::start(test_config(dir.path()), listener).await {
        Ok(_) => panic!("plain HTTP on 0.0.0.0 must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("refusing plain HTTP") && e.contains("[server.tls]"),
        "{e}"
    );
    // The same through the command line, before anything is loaded.
    let db = dir.path().join("cli.db");
    let out = holmes(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing plain HTTP on 0.0.0.0"), "{err}");
    // Allowed on purpose, it serves.
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let mut cfg = test_config(dir.path());
    cfg.server.allow_plain_http_on_network = true;
    let running = holmes::appliance::server::start(cfg, listener)
        .await
        .unwrap();
    running.shutdown.cancel();
    running.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_info_log_carries_no_tokens_or_beds() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.auth.require_device_tokens = true;
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    let config = dir.path().join("holmes.toml");
    std::fs::write(&config, toml::to_string(&cfg).unwrap()).unwrap();
    let token = issue(&cfg.storage.db, "mon-log", None);
    let mut child = Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let reader = {
        let (log, stderr) = (log.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("Holmes is serving")
                    && let Some(i) = line.find("127.0.0.1:")
                {
                    let port: String = line[i + 10..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    let _ = addr_tx.send(format!("127.0.0.1:{port}"));
                }
                let mut l = log.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        })
    };
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("the daemon did not start: {}", log.lock().unwrap()));
    let url = format!("ws://{addr}/ws/monitor");
    let bed = "bay-7-window";
    let (ws, first) = connect_raw(&url, &hello_with(bed, "mon-log", &token)).await;
    assert!(matches!(&first, Some(Message::Text(t)) if t.contains("welcome")));
    let mut m = Monitor {
        ws,
        welcome: Value::Null,
    };
    m.stream(T0, 0..320).await;
    let guess = "guessed-token-0123456789";
    assert_eq!(
        refused(&url, &hello_with(bed, "mon-log", guess))
            .await
            .map(|c| c.0),
        Some(4001)
    );
    // Wait for the window's score, then stop the daemon the way systemd does.
    let mut scored = false;
    for _ in 0..300 {
        let conn = rusqlite::Connection::open(&cfg.storage.db).unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM scores", [], |r| r.get(0))
            .unwrap_or(0);
        if n > 0 {
            scored = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(m);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    reader.join().unwrap();
    let log = log.lock().unwrap().clone();
    assert!(scored, "no score was stored: {log}");
    assert!(
        log.contains("Monitor refused") && log.contains("mon-log"),
        "{log}"
    );
    for secret in [token.as_str(), guess, bed] {
        assert!(!log.contains(secret), "{secret:?} in the info log:\n{log}");
    }
}

/// A raw HTTP/1.1 request from `from` (any address of the loopback net): status, head
/// (lower-cased) and body.
async fn request(
    addr: std::net::SocketAddr,
    from: [u8; 4],
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, Value) {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind((std::net::Ipv4Addr::from(from), 0).into())
        .unwrap();
    let mut s = sock.connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let status: u16 = text[9..12].parse().unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let json = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) => &body[a..=b],
        _ => "null",
    };
    (
        status,
        head.to_lowercase(),
        serde_json::from_str(json).unwrap_or(Value::Null),
    )
}

const HERE: [u8; 4] = [127, 0, 0, 1];

/// Signs in from `from`: the status and the `name=value` of the session cookie, if any.
async fn sign_in(
    addr: std::net::SocketAddr,
    from: [u8; 4],
    name: &str,
    password: &str,
) -> (u16, Option<String>) {
    let body = json!({"name": name, "password": password}).to_string();
    let (status, head, _) = request(addr, from, "POST", "/api/login", &[], &body).await;
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .map(str::to_owned);
    (status, cookie)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sign_ins_back_off_per_name_and_per_address() {
    let app = spawn_app(|c| {
        c.dashboard.public_ward_view = false;
        c.dashboard.login_free_failures = 3;
        c.dashboard.login_backoff_secs = 1.0;
        c.dashboard.login_backoff_max_secs = 4.0;
    })
    .await;
    let db = app.dir.path().join("holmes.db");
    use holmes::dashboard::auth::Role;
    add_user(&db, "nina", Role::Nurse, "night shift 7");
    add_user(&db, "erik", Role::Engineer, "biomed shop 3");
    let addr = app.addr;
    // Three wrong guesses are answered as wrong; the fourth starts the back-off.
    for _ in 0..4 {
        assert_eq!(sign_in(addr, HERE, "nina", "guess").await.0, 401);
    }
    // Shut out now, the right password included, with the wait in Retry-After.
    let body = json!({"name": "nina", "password": "night shift 7"}).to_string();
    let (status, head, v) = request(addr, HERE, "POST", "/api/login", &[], &body).await;
    assert_eq!(status, 429, "{v}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("too many failed sign-ins"),
        "{v}"
    );
    // The address is shut out for every name; the name from every address.
    assert_eq!(sign_in(addr, HERE, "erik", "biomed shop 3").await.0, 429);
    let elsewhere = [127, 0, 0, 2];
    assert_eq!(
        sign_in(addr, elsewhere, "nina", "night shift 7").await.0,
        429
    );
    assert_eq!(
        sign_in(addr, elsewhere, "erik", "biomed shop 3").await.0,
        200
    );
    // After the back-off the right password is taken, and the slate is clean.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, cookie) = sign_in(addr, HERE, "nina", "night shift 7").await;
    assert_eq!(status, 200);
    assert!(cookie.is_some());
    assert_eq!(sign_in(addr, HERE, "nina", "guess").await.0, 401);
    // Each back-off is audited, by name and by address, without a password.
    let audit = holmes::serving::store::audit::read_all(&db).unwrap();
    let backoffs: Vec<&String> = audit
        .iter()
        .filter(|r| r.1 == "sign_in_backoff")
        .map(|r| &r.2)
        .collect();
    assert!(
        backoffs.iter().any(|d| d.contains("\"name\":\"nina\""))
            && backoffs
                .iter()
                .any(|d| d.contains("\"address\":\"127.0.0.1\"")),
        "{backoffs:?}"
    );
    assert!(audit.iter().all(|r| !r.2.contains("night shift")));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusing_an_unknown_name_takes_as_long_as_a_wrong_password() {
    let app = spawn_app(|c| c.dashboard.login_free_failures = 1000).await;
    let db = app.dir.path().join("holmes.db");
    add_user(
        &db,
        "nina",
        holmes::dashboard::auth::Role::Nurse,
        "night shift 7",
    );
    let addr = app.addr;
    let time = move |name: &'static str| async move {
        let t = std::time::Instant::now();
        assert_eq!(sign_in(addr, HERE, name, "not the password").await.0, 401);
        t.elapsed().as_secs_f64()
    };
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for _ in 0..9 {
        known.push(time("nina").await);
        unknown.push(time("nobody-here").await);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (k, u) = (median(&mut known), median(&mut unknown));
    // Both run one argon2 verification; without the dummy hash an unknown name took a few
    // percent of a known one's time.
    assert!(
        u > 0.5 * k && u < 2.0 * k,
        "known {k:.4} s, unknown {u:.4} s"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changing_requests_from_other_origins_are_refused() {
    let app = spawn_app(|c| {
        c.dashboard.public_ward_view = false;
        c.dashboard.allowed_origins = vec!["https://ward.example".into()];
    })
    .await;
    let db = app.dir.path().join("holmes.db");
    add_user(
        &db,
        "nina",
        holmes::dashboard::auth::Role::Nurse,
        "night shift 7",
    );
    let (_, cookie) = sign_in(app.addr, HERE, "nina", "night shift 7").await;
    let cookie = cookie.unwrap();
    // A monitor that says hello and sends nothing: its bed is lost, a technical alarm.
    let _m = Monitor::connect(&app.ws_url(), "icu-9", "mon-9").await;
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let id = loop {
        let (_, _, v) = request(
            app.addr,
            HERE,
            "GET",
            "/api/alarms",
            &[("Cookie", &cookie)],
            "",
        )
        .await;
        if let Some(id) = v["alarms"][0]["id"].as_i64() {
            break id;
        }
        assert!(std::time::Instant::now() < until, "no alarm: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let ack = format!("/api/alarms/{id}/ack");
    let own = format!("http://{}", app.addr);
    let other_port = format!("http://127.0.0.1:{}", app.addr.port() + 1);
    for headers in [
        vec![
            ("Origin", "http://evil.example"),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        // Another port of this host: the same site, not the same origin.
        vec![
            ("Origin", other_port.as_str()),
            ("Sec-Fetch-Site", "same-site"),
        ],
        vec![("Origin", "null")],
        vec![("Sec-Fetch-Site", "cross-site")],
    ] {
        let mut h = headers.clone();
        h.push(("Cookie", &cookie));
        let (status, _, v) = request(app.addr, HERE, "POST", &ack, &h, "").await;
        assert_eq!(status, 403, "{headers:?}: {v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("cross-site request refused"),
            "{v}"
        );
    }
    // Signing in from another origin is refused too.
    let body = json!({"name": "nina", "password": "night shift 7"}).to_string();
    let evil = [("Origin", "http://evil.example")];
    let (status, _, _) = request(app.addr, HERE, "POST", "/api/login", &evil, &body).await;
    assert_eq!(status, 403);
    // Nothing was acknowledged.
    let (_, _, v) = request(
        app.addr,
        HERE,
        "GET",
        "/api/alarms",
        &[("Cookie", &cookie)],
        "",
    )
    .await;
    assert!(v["alarms"][0]["acked_by"].is_null(), "{v}");
    // The page itself (its own origin) and a configured proxy's origin may.
    for origin in [own.as_str(), "https://ward.example"] {
        let h = [
            ("Origin", origin),
            ("Sec-Fetch-Site", "same-origin"),
            ("Cookie", cookie.as_str()),
        ];
        let (status, _, v) = request(app.addr, HERE, "POST", &ack, &h, "").await;
        assert_eq!(status, 200, "{origin}: {v}");
        assert_eq!(v["alarm"]["acked_by"], "nina", "{v}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_cannot_lock_registered_monitors_out_of_the_ward() {
    let app = spawn_app(|c| {
        c.auth.require_device_tokens = true;
        c.auth.devices_refresh_secs = 0.2;
        c.auth.max_beds_per_gateway = 3;
        c.ward.max_beds = 6;
    })
    .await;
    let db = app.dir.path().join("holmes.db");
    let url = app.ws_url();
    let gw_a = issue(&db, "gw-a", None);
    let gw_b = issue(&db, "gw-b", None);
    let mon = issue(&db, "mon-2", Some("bed-2"));
    // The daemon reads the table again: bed-2 is bound to a registered monitor.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let welcomed =
        |first: &Option<Message>| matches!(first, Some(Message::Text(t)) if t.contains("welcome"));

    // Hello after hello for new beds, each left at once: beds that never streamed give their
    // places up, so the ward never fills with them.
    for i in 0..20 {
        let bed = format!("junk-{i}");
        let (ws, first) = connect_raw(&url, &hello_with(&bed, "gw-a", &gw_a)).await;
        assert!(welcomed(&first), "{bed}: {first:?}");
        drop(ws);
        // Until the daemon has seen it leave.
        let until = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (_, v) = app.get("/api/beds").await;
            let beds = v["beds"].as_array().unwrap().clone();
            if beds.iter().all(|b| b["connected"] == false) {
                assert!(beds.len() <= 3, "{v}");
                break;
            }
            assert!(std::time::Instant::now() < until, "{v}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // An evicted bed's history stays readable.
    let (status, v) = app.get("/api/beds/junk-0/events").await;
    assert_eq!(status, 200, "{v}");
    let kinds: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"evicted"), "{kinds:?}");

    // A gateway holds at most its cap of beds at once.
    let mut live = Vec::new();
    for i in 0..3 {
        let (ws, first) = connect_raw(&url, &hello_with(&format!("a-{i}"), "gw-a", &gw_a)).await;
        assert!(welcomed(&first), "{first:?}");
        live.push(ws);
    }
    assert_eq!(
        refused(&url, &hello_with("a-3", "gw-a", &gw_a)).await,
        Some((4006, "device \"gw-a\" holds its maximum of 3 beds".into()))
    );
    // Other gateways fill the ward, up to the place kept for the registered monitor.
    for i in 0..2 {
        let (ws, first) = connect_raw(&url, &hello_with(&format!("b-{i}"), "gw-b", &gw_b)).await;
        assert!(welcomed(&first), "{first:?}");
        live.push(ws);
    }
    let (code, reason) = refused(&url, &hello_with("b-2", "gw-b", &gw_b))
        .await
        .unwrap();
    assert_eq!(code, 4005, "{reason}");
    assert!(
        reason.contains("1 kept for registered monitors"),
        "{reason}"
    );
    // The registered monitor finds its bed's place.
    let (_, first) = connect_raw(&url, &hello_with("bed-2", "mon-2", &mon)).await;
    assert!(welcomed(&first), "{first:?}");

    // Both refusals are audited, with the device as the actor.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let audit = holmes::serving::store::audit::read_all(&db).unwrap();
        let refusals: Vec<_> = audit.iter().filter(|r| r.1 == "bed_refused").collect();
        if refusals.len() == 2 {
            assert_eq!(refusals[0].0.as_deref(), Some("gw-a"), "{refusals:?}");
            assert_eq!(refusals[1].0.as_deref(), Some("gw-b"), "{refusals:?}");
            break;
        }
        assert!(std::time::Instant::now() < until, "{audit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}
