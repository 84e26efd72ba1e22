//! Issue 42's HL7 v2 link against a real receiver: the Python `hl7` package's MLLP server
//! (`tests/hl7_peer.py`, started here), answering as each test tells it. The daemon streams
//! from scripted monitors; the tests read what the receiver got and check the coded values
//! themselves (the peer checks none): PCD-01 observation reports and PCD-04 alarm reports,
//! an acknowledgement on the dashboard as the alarm's inactivation state, AE and AR parked and
//! visible, unanswered, late and wrongly answered messages sent again with the same MSH-10,
//! garbage and a frame over the limit costing the receiver its connection (never scoring its
//! pace), a silent receiver holding up no shutdown; across a receiver killed mid-stream, a
//! daemon restarted mid-backlog and a daemon killed with SIGKILL, every message arriving by
//! its MSH-10, in order; observations too old dropped and counted while alarms wait; and the
//! link over TLS, refused by a receiver its CA does not vouch for.
//!
//! `holmes validate` on the `[hl7]` section is checked here too (no receiver needed).
//!
//! Without python3 and its `hl7` package the receiver's tests print `SKIPPED` (`pip install
//! hl7`), unless `HOLMES_REQUIRE_HL7` is set, as in CI.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{App, Monitor};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn hl7_available(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import hl7.mllp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("HOLMES_REQUIRE_HL7").is_none(),
            "HOLMES_REQUIRE_HL7 is set but python3 cannot import hl7 (pip install hl7)"
        );
        println!("SKIPPED {test}: python3's hl7 package not found (pip install hl7)");
    }
    ok
}

/// The receiver: `tests/hl7_peer.py` as a child process.
struct Peer {
    child: Child,
    port: u16,
    control: PathBuf,
    out: PathBuf,
}

impl Peer {
    /// Starts the peer on `port` (0: any) answering `mode`, recording into `dir`.
    fn start(dir: &Path, port: u16, mode: &str) -> Peer {
        Peer::start_with(dir, port, mode, None)
    }

    /// As [`start`](Self::start), over TLS with this PEM certificate and key.
    fn start_with(dir: &Path, port: u16, mode: &str, tls: Option<(&Path, &Path)>) -> Peer {
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

    fn set(&self, mode: &str) {
        let tmp = self.control.with_extension("tmp");
        std::fs::write(&tmp, mode).unwrap();
        std::fs::rename(tmp, &self.control).unwrap();
    }

    /// Everything received so far, in order.
    fn received(&self) -> Vec<Msg> {
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
    async fn wait(&self, secs: f64, what: &str, pred: impl Fn(&Msg) -> bool) -> Msg {
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
    fn kill(&mut self) {
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
struct Msg {
    text: String,
    answer: String,
}

impl Msg {
    fn segments(&self, name: &str) -> Vec<Vec<&str>> {
        self.text
            .split(['\r', '\n'])
            .filter(|s| s.starts_with(name))
            .map(|s| s.split('|').collect())
            .collect()
    }

    /// Field `n` of the `k`th (0-based) segment `name`; "" when absent.
    fn get(&self, name: &str, k: usize, n: usize) -> String {
        let segs = self.segments(name);
        let Some(s) = segs.get(k) else {
            return String::new();
        };
        // MSH-1 is the field separator itself: MSH-n sits at index n - 1.
        let i = if name == "MSH" { n - 1 } else { n };
        s.get(i).copied().unwrap_or("").to_owned()
    }

    fn kind(&self) -> String {
        self.get("MSH", 0, 9)
    }

    fn control_id(&self) -> i64 {
        self.get("MSH", 0, 10).parse().unwrap_or(-1)
    }

    fn bed(&self) -> String {
        self.get("PV1", 0, 3)
            .split('^')
            .nth(2)
            .unwrap_or("")
            .to_owned()
    }

    /// The OBX whose OBX-3 starts with `code`: (OBX-4, OBX-5, OBX-6, OBX-8, OBX-18).
    fn obx(&self, code: &str) -> Option<[String; 5]> {
        let n = self.segments("OBX").len();
        (0..n)
            .find(|&k| self.get("OBX", k, 3).starts_with(code))
            .map(|k| [4, 5, 6, 8, 18].map(|f| self.get("OBX", k, f)))
    }

    /// An alarm report's facet `n` value (OBX-4 `1.1.1.1.n`).
    fn facet(&self, n: usize) -> String {
        let segs = self.segments("OBX");
        (0..segs.len())
            .find(|&k| self.get("OBX", k, 4) == format!("1.1.1.1.{n}"))
            .map(|k| self.get("OBX", k, 5))
            .unwrap_or_default()
    }

    fn is_alarm(&self, event: &str, phase: &str) -> bool {
        self.kind() == "ORU^R40^ORU_R40"
            && self.get("OBX", 0, 3).starts_with(event)
            && self.facet(3) == phase
    }
}

const ORU_R01: &str = "ORU^R01^ORU_R01";

fn hl7_config(c: &mut holmes::config::Config, port: u16) {
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
fn stream(url: String, bed: &'static str) -> tokio::task::JoinHandle<()> {
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

/// A raw HTTP request to the daemon: status and JSON body.
async fn request(app: &App, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
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
fn check_order(got: &[Msg]) -> Vec<i64> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_reach_a_real_receiver_coded_and_refusals_park_while_silence_resends() {
    let test = "reports_reach_a_real_receiver_coded_and_refusals_park_while_silence_resends";
    if !hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::start(dir.path(), 0, "aa");
    let db = dir.path().join("holmes.db");
    holmes::dashboard::auth::Users::open(&db)
        .unwrap()
        .add(
            "nina",
            holmes::dashboard::auth::Role::Nurse,
            "night shift 7",
            false,
        )
        .unwrap();
    let port = peer.port;
    let app = common::spawn_app(move |c| {
        hl7_config(c, port);
        c.storage.db = db;
        c.ward.stale_secs = 1.0;
        c.ward.lost_secs = 2.0;
    })
    .await;
    let streaming = stream(app.ws_url(), "bed-7");

    // PCD-01: the codes, the bed, the equipment, the monitor's heart rate.
    let o = peer
        .wait(60.0, "observation report with a risk score", |m| {
            m.kind() == ORU_R01 && m.obx("HOLMES-RISK^").is_some()
        })
        .await;
    assert_eq!(o.get("MSH", 0, 12), "2.6");
    assert_eq!(
        o.get("MSH", 0, 21),
        "IHE_PCD_001^IHE PCD^1.3.6.1.4.1.19376.1.6.1.1.1^ISO"
    );
    assert_eq!(o.get("MSH", 0, 15), "AL");
    assert_eq!(o.get("MSH", 0, 16), "NE");
    assert_eq!(o.bed(), "bed-7");
    assert_eq!(o.get("PID", 0, 3), "", "no patient identity is known");
    let [sub, score, units, _, equipment] = o.obx("HOLMES-RISK^VT/VF risk score^99HOLMES").unwrap();
    assert_eq!(sub, "1.1.1.1");
    let score: f64 = score.parse().unwrap();
    assert!((0.0..=1.0).contains(&score), "{score}");
    assert_eq!(units, "262656^MDC_DIM_DIMLESS^MDC");
    assert_eq!(equipment, "HOLMES^^0123456789ABCDEF^EUI-64");
    let [_, hr, units, _, _] = o.obx("147842^MDC_ECG_HEART_RATE^MDC").unwrap();
    assert_eq!(
        (hr.as_str(), units.as_str()),
        ("72", "264864^MDC_DIM_BEAT_PER_MIN^MDC")
    );
    let quality = o.obx("HOLMES-DATA-QUALITY^").unwrap()[1].clone();
    assert!(
        ["scored", "partial"].contains(&quality.as_str()),
        "{quality}"
    );
    assert!(o.obx("HOLMES-RISK-ALARM-STATE^").is_some());

    // PCD-04: the risk alarm's start, its facets.
    let start = peer
        .wait(30.0, "risk alarm start", |m| {
            m.is_alarm("HOLMES-RISK-ALARM^", "start")
        })
        .await;
    assert_eq!(
        start.get("MSH", 0, 21),
        "IHE_PCD_ACM_001^IHE PCD^1.3.6.1.4.1.19376.1.6.4.4^ISO"
    );
    assert_eq!(start.bed(), "bed-7");
    assert_eq!(start.get("OBR", 0, 4), "196616^MDC_EVT_ALARM^MDC");
    let alarm_ref = start.get("OBR", 0, 2);
    let alarm_id: i64 = alarm_ref.split('^').next().unwrap().parse().unwrap();
    let facets: Vec<String> = (1..=7).map(|n| start.facet(n)).collect();
    assert_eq!(
        facets,
        ["risk", "", "start", "active", "enabled", "PH", "SP"],
        "{}",
        start.text
    );
    assert_eq!(start.get("OBX", 2, 3), "68481^MDC_ATTR_EVENT_PHASE^MDC");
    assert_eq!(start.get("OBX", 0, 8), "PH~SP");
    // Observation reports after it say the alarm is active.
    peer.wait(30.0, "an observation with the alarm active", |m| {
        m.kind() == ORU_R01
            && m.control_id() > start.control_id()
            && m.obx("HOLMES-RISK-ALARM-STATE^")
                .is_some_and(|o| o[1] == "active")
    })
    .await;

    // A nurse acknowledges it on the dashboard: a "continue" report, acknowledged.
    let body = r#"{"name":"nina","password":"night shift 7"}"#;
    let (code, text) = request(&app, "POST", "/api/login", "", body).await;
    assert_eq!(code, 200, "{text}");
    let cookie = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("set-cookie:")
                .then(|| l[11..].trim())
        })
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_owned();
    let (code, text) = request(
        &app,
        "POST",
        &format!("/api/alarms/{alarm_id}/ack"),
        &format!("Cookie: {cookie}\r\n"),
        "",
    )
    .await;
    assert_eq!(code, 200, "{text}");
    let cont = peer
        .wait(20.0, "the acknowledgement", |m| {
            m.is_alarm("HOLMES-RISK-ALARM^", "continue") && m.get("OBR", 0, 2) == alarm_ref
        })
        .await;
    assert_eq!(cont.facet(5), "alert-acknowledged");
    assert_eq!(cont.facet(4), "active");
    assert_eq!(
        cont.get("OBR", 0, 7),
        start.get("OBR", 0, 7),
        "the original start time"
    );

    // AE and AR: parked with the receiver's reason, visible and audited, never sent again.
    for code in ["ae", "ar"] {
        peer.set(code);
        peer.wait(20.0, "a message to refuse", |m| m.answer == code)
            .await;
        let upper = code.to_uppercase();
        let h = app
            .wait_health(10.0, "the refusal parked", |h| {
                h["hl7"]["last_parked"]["code"] == upper.as_str()
            })
            .await;
        let p = &h["hl7"]["last_parked"];
        assert!(
            p["reason"].as_str().unwrap().contains("refused by test"),
            "{h}"
        );
        assert!(h["hl7"]["parked"].as_u64() >= Some(1), "{h}");
        assert_eq!(h["status"], "degraded");
        assert!(
            common::problems(&h).iter().any(|p| p.contains("refused")),
            "{h}"
        );
    }
    peer.set("aa");
    peer.wait(20.0, "an acceptance after the refusals", |m| {
        m.answer == "aa" && m.control_id() > 0
    })
    .await;
    let parked: Vec<i64> = peer
        .received()
        .iter()
        .filter(|m| m.answer == "ae" || m.answer == "ar")
        .map(Msg::control_id)
        .collect();

    // Never answered: the same MSH-10 again, with back-off, until an answer comes.
    peer.set("never");
    let silent = peer
        .wait(20.0, "a message left unanswered", |m| m.answer == "never")
        .await;
    let sid = silent.control_id();
    let until = Instant::now() + Duration::from_secs(20);
    while peer
        .received()
        .iter()
        .filter(|m| m.control_id() == sid)
        .count()
        < 3
    {
        assert!(Instant::now() < until, "resent fewer than twice");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let copies: Vec<Msg> = peer
        .received()
        .into_iter()
        .filter(|m| m.control_id() == sid)
        .collect();
    assert!(
        copies.iter().all(|m| m.text == silent.text),
        "a resend is the same message"
    );
    // An answer naming another MSH-10 is not this message's: it goes again.
    peer.set("aa");
    let done = peer
        .wait(20.0, "an answer after the silence", |m| {
            m.answer == "aa" && m.control_id() > sid
        })
        .await
        .control_id();
    peer.set("wrong");
    let w = peer
        .wait(20.0, "a message answered for another", |m| {
            m.answer == "wrong" && m.control_id() > done
        })
        .await;
    let until = Instant::now() + Duration::from_secs(20);
    while peer
        .received()
        .iter()
        .filter(|m| m.control_id() == w.control_id())
        .count()
        < 2
    {
        assert!(
            Instant::now() < until,
            "not sent again after a mismatched answer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Late (after the 1-s timeout): sent again, and the late answer still counts.
    peer.set("late 1.5");
    let late = peer
        .wait(20.0, "a late answer", |m| {
            m.answer == "late 1.5" && m.control_id() > w.control_id()
        })
        .await
        .control_id();
    peer.set("aa");
    peer.wait(20.0, "a message after the late one", |m| {
        m.answer == "aa" && m.control_id() > late
    })
    .await;
    let copies = peer
        .received()
        .iter()
        .filter(|m| m.control_id() == late)
        .count();
    assert!(copies >= 2, "the late message was not sent again");
    let h = app.health().await;
    assert_eq!(h["hl7"]["connected"], true, "{h}");
    assert!(h["hl7"]["last_ack_ms"].is_i64(), "{h}");

    // Garbage and a frame over hl7.max_frame_bytes cost the receiver its connection; the
    // message goes again, same MSH-10, on the next one, and scoring never waits.
    let latest = |v: &Value| {
        v["beds"][0]["latest"]["window_end_ms"]
            .as_i64()
            .unwrap_or(0)
    };
    for (mode, error) in [
        ("garbage", "outside a frame"),
        ("huge 2000000", "longer than"),
    ] {
        let scored = latest(&app.get("/api/beds").await.1);
        // A message not yet received: an earlier one's resent copy may still be on its way.
        let before = peer.received().iter().map(Msg::control_id).max().unwrap();
        peer.set(mode);
        let m = peer
            .wait(20.0, mode, |m| m.answer == mode && m.control_id() > before)
            .await;
        app.wait_health(20.0, "the connection dropped", |h| {
            h["hl7"]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains(error))
        })
        .await;
        peer.set("aa");
        peer.wait(20.0, "the same message on a new connection", |x| {
            x.control_id() == m.control_id() && x.answer == "aa"
        })
        .await;
        let until = Instant::now() + Duration::from_secs(20);
        while latest(&app.get("/api/beds").await.1) <= scored {
            assert!(Instant::now() < until, "scoring stalled");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // The monitor goes: its bed is lost, a technical alarm.
    // (A bed is also lost for the moment between its hello and its first frame: only a report
    // queued after the monitor left counts.)
    let before = peer.received().iter().map(Msg::control_id).max().unwrap();
    streaming.abort();
    let lost = peer
        .wait(30.0, "a lost-signal alarm", |m| {
            m.control_id() > before && m.is_alarm("HOLMES-SIGNAL-LOST^", "start")
        })
        .await;
    assert_eq!(lost.bed(), "bed-7");
    assert_eq!(lost.facet(6), "PM");
    assert_eq!(lost.facet(7), "ST");

    // Each message once by MSH-10 (resends aside), in order; no parked one ever again.
    let got = peer.received();
    check_order(&got);
    for &id in &parked {
        assert_eq!(
            got.iter().filter(|m| m.control_id() == id).count(),
            1,
            "{id} resent"
        );
    }
    let metrics = app.get_raw("/metrics").await;
    for m in [
        "holmes_hl7_parked_total",
        "holmes_hl7_resent_total",
        "holmes_hl7_backlog",
    ] {
        assert!(metrics.contains(m), "{m} missing");
    }
    let audit: i64 = rusqlite::Connection::open(dir.path().join("holmes.db"))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM audit WHERE action = 'hl7_message_parked'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        audit,
        parked.len() as i64,
        "one audit row per parked message"
    );
    // A receiver that never answers holds up no shutdown: the nurse acknowledges the
    // lost-signal alarm, and that report goes unanswered.
    peer.set("never");
    let lost_id = lost.get("OBR", 0, 2);
    let lost_id = lost_id.split('^').next().unwrap();
    let (code, text) = request(
        &app,
        "POST",
        &format!("/api/alarms/{lost_id}/ack"),
        &format!("Cookie: {cookie}\r\n"),
        "",
    )
    .await;
    assert_eq!(code, 200, "{text}");
    let cont = peer
        .wait(20.0, "the lost-signal alarm acknowledged", |m| {
            m.answer == "never" && m.is_alarm("HOLMES-SIGNAL-LOST^", "continue")
        })
        .await;
    assert_eq!(cont.facet(5), "alert-acknowledged");
    let t = Instant::now();
    app.stop().await;
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_receiver_and_a_restarted_daemon_lose_nothing_and_keep_order() {
    let test = "a_killed_receiver_and_a_restarted_daemon_lose_nothing_and_keep_order";
    if !hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut peer = Peer::start(dir.path(), 0, "aa");
    let port = peer.port;
    let db = dir.path().join("holmes.db");
    let config = {
        let db = db.clone();
        move |c: &mut holmes::config::Config| {
            hl7_config(c, port);
            c.hl7.keepalive_secs = 1.0;
            c.storage.db = db.clone();
            // No technical alarm is raised late in the test (its report would still be queued).
            c.ward.stale_secs = 3_600.0;
            c.ward.lost_secs = 7_200.0;
        }
    };
    let app = common::spawn_app(config.clone()).await;
    let beds = [stream(app.ws_url(), "bed-1"), stream(app.ws_url(), "bed-2")];
    // Mid-stream, the receiver dies.
    peer.wait(60.0, "observations of both beds", |m| {
        m.bed() == "bed-2" && m.kind() == ORU_R01
    })
    .await;
    peer.wait(30.0, "more", |m| m.bed() == "bed-1" && m.kind() == ORU_R01)
        .await;
    peer.kill();
    let h = app
        .wait_health(20.0, "a backlog", |h| {
            h["hl7"]["connected"] == false && h["hl7"]["backlog"].as_u64() >= Some(3)
        })
        .await;
    assert!(h["hl7"]["oldest_pending_ms"].is_i64(), "{h}");
    // The daemon restarts mid-backlog.
    for b in beds {
        b.abort();
    }
    app.stop().await;
    let app = common::spawn_app(config).await;
    let h = app.health().await;
    assert!(h["hl7"]["backlog"].as_u64() >= Some(3), "{h}");
    // The receiver comes back on its port and the backlog drains.
    let peer = Peer::start(dir.path(), port, "aa");
    app.wait_health(60.0, "the backlog drained", |h| {
        h["hl7"]["connected"] == true && h["hl7"]["backlog"] == 0
    })
    .await;
    // Idle, the link keeps itself alive.
    let ka = peer
        .wait(10.0, "a keep-alive", |m| {
            m.get("OBR", 0, 4).starts_with("HOLMES-KEEP-ALIVE^")
        })
        .await;
    assert_eq!(ka.kind(), "ORU^R40^ORU_R40");
    app.stop().await;
    // Every message the outbox ever held arrived, each by its MSH-10, in order per bed.
    let got = peer.received();
    let first = check_order(&got);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut st = conn
        .prepare("SELECT id, state FROM hl7_outbox ORDER BY id")
        .unwrap();
    let rows: Vec<(i64, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(rows.len() >= 6, "{rows:?}");
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(first, ids, "received against queued");
    assert!(rows.iter().all(|r| r.1 == "acked"), "{rows:?}");
    // The risk alarms open when the first run stopped were ended by the second, with the
    // time the dashboard closed them.
    for bed in ["bed-1", "bed-2"] {
        let end = got
            .iter()
            .find(|m| m.bed() == bed && m.is_alarm("HOLMES-RISK-ALARM^", "end"))
            .unwrap_or_else(|| panic!("no end of {bed}'s risk alarm"));
        assert_eq!(end.facet(4), "inactive");
        assert!(!end.get("OBR", 0, 8).is_empty(), "{}", end.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_speaks_tls_to_a_receiver_its_ca_vouches_for() {
    let test = "the_link_speaks_tls_to_a_receiver_its_ca_vouches_for";
    if !hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["hl7.ward.test".into()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let peer = Peer::start_with(dir.path(), 0, "aa", Some((&cert, &key)));
    let (port, ca) = (peer.port, cert.clone());
    let app = common::spawn_app(move |c| {
        hl7_config(c, port);
        c.hl7.tls_ca = Some(ca);
        c.hl7.tls_server_name = Some("hl7.ward.test".into());
    })
    .await;
    let streaming = stream(app.ws_url(), "bed-3");
    let o = peer
        .wait(60.0, "an observation over TLS", |m| m.kind() == ORU_R01)
        .await;
    assert_eq!(o.bed(), "bed-3");
    let h = app
        .wait_health(10.0, "an acknowledgement", |h| {
            h["hl7"]["last_ack_ms"].is_i64()
        })
        .await;
    assert_eq!(h["hl7"]["connected"], true, "{h}");
    streaming.abort();
    app.stop().await;

    // A CA that does not vouch for the receiver: no connection, nothing delivered, the
    // reason in /api/health.
    let other = rcgen::generate_simple_self_signed(vec!["hl7.ward.test".into()]).unwrap();
    let wrong = dir.path().join("other.pem");
    std::fs::write(&wrong, other.cert.pem()).unwrap();
    let before = peer.received().len();
    let app = common::spawn_app(move |c| {
        hl7_config(c, port);
        c.hl7.tls_ca = Some(wrong);
        c.hl7.tls_server_name = Some("hl7.ward.test".into());
    })
    .await;
    let streaming = stream(app.ws_url(), "bed-3");
    let h = app
        .wait_health(30.0, "a refused certificate", |h| {
            h["hl7"]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("TLS"))
                && h["hl7"]["backlog"].as_u64() > Some(0)
        })
        .await;
    assert_eq!(h["hl7"]["connected"], false, "{h}");
    assert_eq!(peer.received().len(), before);
    streaming.abort();
    app.stop().await;
}

/// The outbox's rows as `(id, state, kind)`, read beside a running daemon.
fn outbox_rows(db: &Path) -> Vec<(i64, String, String)> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_9_mid_backlog_delivers_every_committed_message_after_restart() {
    let test = "a_daemon_killed_9_mid_backlog_delivers_every_committed_message_after_restart";
    if !hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    // The receiver is down at first: a port nothing listens on.
    let receiver = free();
    let mut cfg = common::test_config(dir.path());
    cfg.server.listen = format!("127.0.0.1:{}", free()).parse().unwrap();
    hl7_config(&mut cfg, receiver);
    let config = dir.path().join("holmes.toml");
    std::fs::write(&config, toml::to_string(&cfg).unwrap()).unwrap();
    let db = cfg.storage.db.clone();
    let serve = || {
        Command::new(env!("CARGO_BIN_EXE_holmes"))
            .args(["serve", "--config"])
            .arg(&config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let url = format!("ws://{}/ws/monitor", cfg.server.listen);
    let ready = |secs: u64| {
        let url = url.clone();
        async move {
            let until = Instant::now() + Duration::from_secs(secs);
            while tokio_tungstenite::connect_async(&url).await.is_err() {
                assert!(Instant::now() < until, "the daemon does not answer");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let mut daemon = serve();
    ready(120).await;
    let streaming = stream(url.clone(), "bed-4");
    // A backlog builds in the outbox, committed; then kill -9.
    let until = Instant::now() + Duration::from_secs(60);
    while outbox_rows(&db).iter().filter(|r| r.1 == "pending").count() < 5 {
        assert!(Instant::now() < until, "no backlog: {:?}", outbox_rows(&db));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let committed = outbox_rows(&db);
    daemon.kill().unwrap(); // SIGKILL
    daemon.wait().unwrap();
    streaming.abort();
    assert!(committed.iter().all(|r| r.1 == "pending"), "{committed:?}");

    // The receiver comes up, the daemon restarts: everything committed arrives, in order.
    let peer = Peer::start(dir.path(), receiver, "aa");
    let mut daemon = serve();
    ready(120).await;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = outbox_rows(&db);
        if rows.len() > committed.len() && rows.iter().all(|r| r.1 == "acked") {
            break;
        }
        assert!(Instant::now() < until, "not drained: {rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let got = peer.received();
    let first = check_order(&got);
    for (id, _, _) in &committed {
        assert!(
            first.contains(id),
            "{id}, committed before the kill, never arrived"
        );
    }
    // The risk alarm the killed run left open was ended by the next one.
    let start = got
        .iter()
        .find(|m| m.is_alarm("HOLMES-RISK-ALARM^", "start"))
        .expect("the risk alarm's start");
    assert!(
        got.iter().any(|m| m.is_alarm("HOLMES-RISK-ALARM^", "end")
            && m.get("OBR", 0, 2) == start.get("OBR", 0, 2)),
        "no end of alarm {}",
        start.get("OBR", 0, 2)
    );
}

#[test]
fn holmes_validate_checks_the_hl7_section() {
    let dir = tempfile::tempdir().unwrap();
    let run = |edit: &dyn Fn(&mut holmes::config::Config)| {
        let mut cfg = common::test_config(dir.path());
        cfg.hl7.enabled = true;
        edit(&mut cfg);
        let path = dir.path().join("holmes.toml");
        std::fs::write(&path, toml::to_string(&cfg).unwrap()).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_holmes"))
            .args(["validate", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let text =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        (o.status.success(), text)
    };
    let (ok, text) = run(&|_| {});
    assert!(ok, "{text}");
    assert!(
        text.contains("hl7: PCD-01 every 60 s and PCD-04 alarms to 127.0.0.1:2575"),
        "{text}"
    );
    let missing = dir.path().join("no-such-ca.pem");
    let (ok, text) = run(&|c| c.hl7.tls_ca = Some(missing.clone()));
    assert!(
        !ok && text.contains("hl7.tls_ca") && text.contains("no-such-ca.pem"),
        "{text}"
    );
    let (ok, text) = run(&|c| c.hl7.receiver = "ward-gateway".into());
    assert!(!ok && text.contains("hl7.receiver"), "{text}");
    let (ok, text) = run(&|c| c.hl7.facet_state = "68482".into());
    assert!(!ok && text.contains("hl7.facet_state"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_observations_are_dropped_and_counted_while_alarms_wait_for_the_receiver() {
    let test = "old_observations_are_dropped_and_counted_while_alarms_wait_for_the_receiver";
    if !hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let receiver = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = dir.path().join("holmes.db");
    let db2 = db.clone();
    let app = common::spawn_app(move |c| {
        hl7_config(c, receiver);
        c.hl7.max_observation_age_secs = 1.0;
        c.storage.db = db2;
    })
    .await;
    // The receiver is down while the bed streams and its risk alarm starts.
    let streaming = stream(app.ws_url(), "bed-5");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = outbox_rows(&db);
        let alarms = rows.iter().filter(|r| r.2 == "alarm").count();
        if alarms > 0 && rows.len() >= 4 {
            break;
        }
        assert!(Instant::now() < until, "no backlog: {rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    streaming.abort();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Back after more than max_observation_age_secs: what was queued then goes by kind.
    let peer = Peer::start(dir.path(), receiver, "aa");
    let h = app
        .wait_health(30.0, "the backlog drained", |h| {
            h["hl7"]["backlog"] == 0 && h["hl7"]["dropped_observations"].as_u64() > Some(0)
        })
        .await;
    assert!(
        common::problems(&h).iter().any(|p| p.contains("dropped")),
        "{h}"
    );
    app.stop().await;
    let rows = outbox_rows(&db);
    assert!(
        rows.iter().all(|r| r.2 == "observation" || r.1 == "acked"),
        "an alarm was not delivered: {rows:?}"
    );
    assert!(rows.iter().any(|r| r.1 == "dropped"), "{rows:?}");
    let got = peer.received();
    assert!(
        got.iter()
            .any(|m| m.is_alarm("HOLMES-RISK-ALARM^", "start"))
    );
    check_order(&got);
}
