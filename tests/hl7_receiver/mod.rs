//! The HL7 receiver the HL7 tests start (`tests/hl7_peer.py`, the Python `hl7` package's MLLP
//! server) and what they share: reading what it received field by field, the daemon's
//! `[hl7]` settings for a test, a monitor streaming in the background, the order check.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::common::{self, App, Monitor};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub fn hl7_available(test: &str) -> bool {
    common::python_has(test, "hl7.mllp", "HOLMES_REQUIRE_HL7", "hl7")
}

/// The receiver: `tests/hl7_peer.py` as a child process.
pub struct Peer {
    child: Child,
    pub port: u16,
    control: PathBuf,
    out: PathBuf,
}

impl Peer {
    /// Starts the peer on `port` (0: any) answering `mode`, recording into `dir`.
    pub fn start(dir: &Path, port: u16, mode: &str) -> Peer {
        Peer::start_with(dir, port, mode, None)
    }

    /// As [`start`](Self::start), over TLS with this PEM certificate and key.
    pub fn start_with(dir: &Path, port: u16, mode: &str, tls: Option<(&Path, &Path)>) -> Peer {
        let control = dir.join("control");
        let out = dir.join("received.jsonl");
        let port_file = dir.join("port");
        let _ = std::fs::remove_file(&port_file);
        std::fs::write(&control, mode).unwrap();
        let child = Command::new("python3")
            .arg(common::root().join("tests/hl7_peer.py"))
            .args([port.to_string().as_str()])
            .arg(&control)
            .arg(&out)
            .arg(&port_file)
            .args(tls.map(|(c, k)| [c, k]).into_iter().flatten())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < until, "the HL7 peer did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Peer {
            child,
            port,
            control,
            out,
        }
    }

    pub fn set(&self, mode: &str) {
        let tmp = self.control.with_extension("tmp");
        std::fs::write(&tmp, mode).unwrap();
        std::fs::rename(tmp, &self.control).unwrap();
    }

    /// Everything received so far, in order.
    pub fn received(&self) -> Vec<Msg> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| Msg {
                text: v["msg"].as_str().unwrap().to_owned(),
                answer: v["answer"].as_str().unwrap().to_owned(),
            })
            .collect()
    }

    /// Waits until some received message satisfies `pred`; returns it.
    pub async fn wait(&self, secs: f64, what: &str, pred: impl Fn(&Msg) -> bool) -> Msg {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        loop {
            if let Some(m) = self.received().into_iter().find(|m| pred(m)) {
                return m;
            }
            assert!(
                Instant::now() < until,
                "the receiver got no {what}; it got (MSH-10, MSH-9, answer) {:?}",
                self.received()
                    .iter()
                    .map(|m| (m.control_id(), m.kind(), m.answer.clone()))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL, as a crashed receiver.
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

/// One message as received, read field by field (HL7 numbering).
#[derive(Debug, Clone)]
pub struct Msg {
    pub text: String,
    pub answer: String,
}

impl Msg {
    pub fn segments(&self, name: &str) -> Vec<Vec<&str>> {
        self.text
            .split(['\r', '\n'])
            .filter(|s| s.starts_with(name))
            .map(|s| s.split('|').collect())
            .collect()
    }

    /// Field `n` of the `k`th (0-based) segment `name`; "" when absent.
    pub fn get(&self, name: &str, k: usize, n: usize) -> String {
        let segs = self.segments(name);
        let Some(s) = segs.get(k) else {
            return String::new();
        };
        // MSH-1 is the field separator itself: MSH-n sits at index n - 1.
        let i = if name == "MSH" { n - 1 } else { n };
        s.get(i).copied().unwrap_or("").to_owned()
    }

    pub fn kind(&self) -> String {
        self.get("MSH", 0, 9)
    }

    pub fn control_id(&self) -> i64 {
        self.get("MSH", 0, 10).parse().unwrap_or(-1)
    }

    pub fn bed(&self) -> String {
        self.get("PV1", 0, 3)
            .split('^')
            .nth(2)
            .unwrap_or("")
            .to_owned()
    }

    /// The OBX whose OBX-3 starts with `code`: (OBX-4, OBX-5, OBX-6, OBX-8, OBX-18).
    pub fn obx(&self, code: &str) -> Option<[String; 5]> {
        let n = self.segments("OBX").len();
        (0..n)
            .find(|&k| self.get("OBX", k, 3).starts_with(code))
            .map(|k| [4, 5, 6, 8, 18].map(|f| self.get("OBX", k, f)))
    }

    /// An alarm report's facet `n` value (OBX-4 `1.1.1.1.n`).
    pub fn facet(&self, n: usize) -> String {
        let segs = self.segments("OBX");
        (0..segs.len())
            .find(|&k| self.get("OBX", k, 4) == format!("1.1.1.1.{n}"))
            .map(|k| self.get("OBX", k, 5))
            .unwrap_or_default()
    }

    pub fn is_alarm(&self, event: &str, phase: &str) -> bool {
        self.kind() == "ORU^R40^ORU_R40"
            && self.get("OBX", 0, 3).starts_with(event)
            && self.facet(3) == phase
    }
}

pub const ORU_R01: &str = "ORU^R01^ORU_R01";

pub fn hl7_config(c: &mut holmes::config::Config, port: u16) {
    c.hl7.enabled = true;
    c.hl7.receiver = format!("127.0.0.1:{port}");
    c.hl7.cadence_secs = 0.5;
    c.hl7.ack_timeout_secs = 1.0;
    c.hl7.retry_min_ms = 200;
    c.hl7.retry_max_ms = 400;
    c.hl7.connect_timeout_secs = 2.0;
    c.hl7.equipment_id = "HOLMES^^0123456789ABCDEF^EUI-64".into();
    // Every scored window raises the bed's risk alarm (the configured fallback rule).
    c.dashboard.risk_alarm_on = 0.0;
    c.dashboard.risk_alarm_off = 0.0;
    c.dashboard.derive_risk_alarm = false;
}

/// Streams `bed` ten times faster than real time until the task is aborted.
pub fn stream(url: String, bed: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut m = Monitor::connect(&url, bed, &format!("mon-{bed}")).await;
        let t0 = 1_700_000_000_000;
        let mut seq = 0;
        loop {
            m.stream(t0, seq..seq + 20).await;
            seq += 20;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Streams as [`stream`] with this `hello`, sending each message of `extra` (a `patient`
/// message, say) between two bursts of frames, until the task is aborted.
pub fn stream_with(
    url: String,
    hello: Value,
    mut extra: tokio::sync::mpsc::UnboundedReceiver<Value>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut m = Monitor::connect_with(&url, &hello).await;
        let t0 = 1_700_000_000_000;
        let mut seq = 0;
        loop {
            while let Ok(v) = extra.try_recv() {
                m.send(v).await;
            }
            m.stream(t0, seq..seq + 20).await;
            seq += 20;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// The rows of the audit log about patients, as `(actor, action, detail)`, once there are
/// `n` of them (they are written off the connection's task), in a minute at most.
pub async fn patient_audit(db: &Path, n: usize) -> Vec<(String, String, Value)> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let rows: Vec<(String, String, Value)> = holmes::serving::store::audit::read_all(db)
            .unwrap()
            .into_iter()
            .filter(|r| r.1.starts_with("patient_"))
            .map(|(u, a, d)| (u.unwrap_or_default(), a, serde_json::from_str(&d).unwrap()))
            .collect();
        if rows.len() >= n || Instant::now() > until {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A raw HTTP request to the daemon: status and JSON body.
pub async fn request(
    app: &App,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nOrigin: http://{}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        app.addr,
        app.addr,
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    (text[9..12].parse().unwrap(), text)
}

/// Control ids as first received: each once, increasing overall and per bed.
pub fn check_order(got: &[Msg]) -> Vec<i64> {
    let mut seen = HashSet::new();
    let mut first = Vec::new();
    let mut per_bed: BTreeMap<String, i64> = BTreeMap::new();
    for m in got.iter().filter(|m| m.control_id() >= 0) {
        let id = m.control_id();
        if !seen.insert(id) {
            continue;
        }
        assert!(
            first.last().is_none_or(|&l| l < id),
            "out of order: {id} after {first:?}"
        );
        let last = per_bed.entry(m.bed()).or_insert(0);
        assert!(*last < id, "bed {} out of order at {id}", m.bed());
        *last = id;
        first.push(id);
    }
    first
}

/// The outbox's rows as `(id, state, kind)`, read beside a running daemon.
pub fn outbox_rows(db: &Path) -> Vec<(i64, String, String)> {
    let Ok(c) = rusqlite::Connection::open(db) else {
        return Vec::new();
    };
    let Ok(mut st) = c.prepare("SELECT id, state, kind FROM hl7_outbox ORDER BY id") else {
        return Vec::new();
    };
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map(|rows| rows.filter_map(Result::ok).collect())
        .unwrap_or_default()
}
