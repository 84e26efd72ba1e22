//! The FHIR server the FHIR tests start (`tests/fhir_peer/server.mjs`: Medplum's in-memory
//! FHIR router with the R4 definitions behind `node:http`) and what they share: what it was
//! sent, searches back by code, the daemon's `[fhir]` settings for a test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The peer's folder of npm packages.
fn modules() -> PathBuf {
    common::root().join("tests/fhir_peer/node_modules/@medplum/fhir-router")
}

/// Node's major version, if node runs.
fn node_major() -> Option<u32> {
    let o = Command::new("node").arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&o.stdout);
    v.trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

pub fn fhir_available(test: &str) -> bool {
    let why = match node_major() {
        None => Some("node not found"),
        Some(v) if v < 20 => Some("node older than 20"),
        Some(_) if !modules().exists() => {
            Some("tests/fhir_peer has no node_modules (cd tests/fhir_peer && npm ci)")
        }
        Some(_) => None,
    };
    if let Some(why) = why {
        assert!(
            std::env::var_os("HOLMES_REQUIRE_FHIR").is_none(),
            "HOLMES_REQUIRE_FHIR is set but the FHIR peer cannot run: {why}"
        );
        println!("SKIPPED {test}: {why}");
        return false;
    }
    true
}

/// The server: `tests/fhir_peer/server.mjs` as a child process.
pub struct Peer {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

/// One write the server was sent, and its answer (0: none, the connection closed).
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub path: String,
    pub if_none_exist: Option<String>,
    pub status: u16,
}

impl Peer {
    /// Starts the server on `port` (0: any) answering `mode`, keeping its files in `dir`;
    /// with `token`, requests must carry it.
    pub fn start(dir: &Path, port: u16, mode: &str, token: Option<&str>) -> Peer {
        let port_file = dir.join("port");
        let _ = std::fs::remove_file(&port_file);
        std::fs::write(dir.join("control"), mode).unwrap();
        let mut cmd = Command::new("node");
        // Node 20's global WebSocket (which @medplum/core reads at load) is behind a flag.
        if node_major() == Some(20) {
            cmd.arg("--experimental-websocket");
        }
        let child = cmd
            .arg(common::root().join("tests/fhir_peer/server.mjs"))
            .arg(port.to_string())
            .arg(dir)
            .args(token)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(60);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < until, "the FHIR peer did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Peer {
            child,
            port,
            dir: dir.to_owned(),
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/fhir/R4", self.port)
    }

    pub fn set(&self, mode: &str) {
        let tmp = self.dir.join("control.tmp");
        std::fs::write(&tmp, mode).unwrap();
        std::fs::rename(tmp, self.dir.join("control")).unwrap();
    }

    /// Every write received so far, in order.
    pub fn writes(&self) -> Vec<Write> {
        std::fs::read_to_string(self.dir.join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| Write {
                path: v["path"].as_str().unwrap().to_owned(),
                if_none_exist: v["if_none_exist"].as_str().map(String::from),
                status: v["status"].as_u64().unwrap() as u16,
            })
            .collect()
    }

    /// Waits until a write satisfies `pred`.
    pub async fn wait_write(&self, secs: f64, what: &str, pred: impl Fn(&Write) -> bool) -> Write {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        loop {
            if let Some(w) = self.writes().into_iter().find(|w| pred(w)) {
                return w;
            }
            assert!(
                Instant::now() < until,
                "the server got no {what}; it got {:?}",
                self.writes()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A raw HTTP request: status and JSON body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &str,
        body: &str,
    ) -> (u16, Value) {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .unwrap();
        let req = format!(
            "{method} /fhir/R4{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Content-Type: application/fhir+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf).to_string();
        let status = text[9..12].parse().unwrap();
        let body = text.split_once("\r\n\r\n").map_or("", |b| b.1);
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    /// The Observations a search by `code` (`system|code`) finds, as the server holds them.
    pub async fn search(&self, token: Option<&str>, code: &str) -> Vec<Value> {
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        let path = format!(
            "/Observation?code={}&_count=10000",
            code.replace(':', "%3A")
        );
        let (status, b) = self.request("GET", &path, &auth, "").await;
        assert_eq!(status, 200, "{b}");
        b["entry"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|e| e["resource"].clone())
            .collect()
    }

    /// Waits until a search by `code` finds a resource satisfying `pred`.
    pub async fn wait_found(
        &self,
        token: Option<&str>,
        secs: f64,
        code: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        loop {
            if let Some(r) = self.search(token, code).await.into_iter().find(|r| pred(r)) {
                return r;
            }
            assert!(
                Instant::now() < until,
                "the server holds no matching {code}; writes: {:?}",
                self.writes()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGKILL, as a crashed server.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The daemon's `[fhir]` for a test: the peer's base URL, short timers, and every scored
/// window raising the bed's risk alarm (the configured fallback rule).
pub fn fhir_config(c: &mut holmes::config::Config, base_url: String) {
    c.fhir.enabled = true;
    c.fhir.base_url = base_url;
    c.fhir.cadence_secs = 0.5;
    c.fhir.request_timeout_secs = 2.0;
    c.fhir.connect_timeout_secs = 2.0;
    c.fhir.retry_min_ms = 200;
    c.fhir.retry_max_ms = 400;
    c.fhir.identifier_system = "urn:holmes:0123456789abcdef".into();
    c.fhir.device_id = "0123456789ABCDEF".into();
    c.dashboard.risk_alarm_on = 0.0;
    c.dashboard.risk_alarm_off = 0.0;
    c.dashboard.derive_risk_alarm = false;
}

/// A resource's identifier value.
pub fn identifier(r: &Value) -> String {
    r["identifier"][0]["value"].as_str().unwrap().to_owned()
}

/// The value of a resource's component coded `code`, as a string.
pub fn component(r: &Value, code: &str) -> Option<String> {
    r["component"].as_array()?.iter().find_map(|c| {
        (c["code"]["coding"][0]["code"] == code).then(|| {
            c["valueString"]
                .as_str()
                .or(c["valueCodeableConcept"]["coding"][0]["code"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
    })
}
