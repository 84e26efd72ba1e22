//! IHE PCD-04 in, driven as a ward's alarm gateway drives it: the Python `hl7` package's MLLP
//! client (`tests/pcd04_gateway.py`) sends ORU^R40 reports to the daemon's listener while a
//! real WebSocket monitor streams a real record (vfdb 422, of the test part) into the same bed.
//! The gateway's VT alarm gets Holmes's opinion from that bed's ECG, read back from the API and
//! the SQLite file; every report is answered (CA, CE or CR as IHE's enhanced mode asks; AA in
//! original mode), a bad one with the reason in ERR. Across `kill -9` of a daemon child
//! process, every report acknowledged is stored once, the gateway resending what it was not
//! answered.
//!
//! Without python3 and its `hl7` package these print `SKIPPED` (`pip install hl7`), unless
//! `HOLMES_REQUIRE_HL7` is set, as in CI.

mod common;
mod hl7_receiver;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Monitor, spawn_app};
use holmes::core::time::hl7_dtm as dtm;
use serde_json::{Value, json};

const T0: i64 = 1_700_000_000_000;
const FS: usize = 250;

/// An alarm report as a gateway sends it (IHE PCD TF-2's ACM layout), MSH-15 `AL`.
struct R<'a> {
    control: &'a str,
    bed: &'a str,
    id: &'a str,
    event: &'a str,
    onset: String,
    phase: &'a str,
    end_ms: Option<i64>,
}

impl R<'_> {
    fn text(&self) -> String {
        let state = if self.phase == "end" {
            "inactive"
        } else {
            "active"
        };
        let end = self.end_ms.map(dtm).unwrap_or_default();
        [
            format!(
                "MSH|^~\\&|GW^0123456789ABCDEF^EUI-64|ICU||HOLMES|{}||ORU^R40^ORU_R40|{}|P|2.6|||AL|NE||UNICODE UTF-8|||IHE_PCD_ACM_001^IHE PCD^1.3.6.1.4.1.19376.1.6.4.4^ISO",
                dtm(T0),
                self.control
            ),
            "PID|||MRN-1^^^HOSP^MR".into(),
            format!("PV1||I|ICU1^^{}", self.bed),
            format!(
                "OBR|1|{id}^GW|{id}^GW|196616^MDC_EVT_ALARM^MDC|||{}|{end}",
                self.onset,
                id = self.id
            ),
            "OBX|1||69837^MDC_DEV_MON_PHYSIO_MULTI_PARAM_MDS^MDC|1.0.0.0|||||||X".into(),
            format!("OBX|2|ST|{}|1.1.1.1.1|alarm||||PH~SP||F", self.event),
            format!("OBX|3|ST|68481^MDC_ATTR_EVENT_PHASE^MDC|1.1.1.1.3|{}||||||F", self.phase),
            format!("OBX|4|ST|68482^MDC_ATTR_ALARM_STATE^MDC|1.1.1.1.4|{state}||||||F"),
        ]
        .join("\r")
    }
}

const VT: &str = "199832^MDC_EVT_ECG_V_TACHY^MDC";
const VF: &str = "61444^NOM_EVT_ECG_V_FIB_TACHY^MDC";
const ASYSTOLE: &str = "199684^MDC_EVT_ECG_ASYSTOLE^MDC";

/// `tests/pcd04_gateway.py` sending `msgs` to `port`, its answers into `dir/acks.jsonl`.
fn gateway(dir: &Path, port: u16, msgs: &[String], deadline_secs: u32) -> Child {
    let file = dir.join("reports.json");
    std::fs::write(&file, serde_json::to_string(msgs).unwrap()).unwrap();
    Command::new("python3")
        .arg(common::root().join("tests/pcd04_gateway.py"))
        .arg(port.to_string())
        .arg(&file)
        .arg(dir.join("acks.jsonl"))
        .arg(deadline_secs.to_string())
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs")
}

/// The answers so far: per message index, the answer's MSA-1, ERR-2, ERR-3.1 and ERR-8.
fn acks(dir: &Path) -> Vec<(usize, [String; 4])> {
    let text = std::fs::read_to_string(dir.join("acks.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let ack = v["ack"].as_str().unwrap().to_string();
            let field = |seg: &str, n: usize| {
                ack.split(['\r', '\n'])
                    .find(|s| s.starts_with(&format!("{seg}|")))
                    .and_then(|s| s.split('|').nth(n))
                    .unwrap_or_default()
                    // HL7's escapes of the delimiters a reason may hold.
                    .replace("\\S\\", "^")
                    .replace("\\F\\", "|")
            };
            let err3 = field("ERR", 3)
                .split('^')
                .next()
                .unwrap_or_default()
                .to_string();
            (
                v["i"].as_u64().unwrap() as usize,
                [field("MSA", 1), field("ERR", 2), err3, field("ERR", 8)],
            )
        })
        .collect()
}

/// GET `path` from the daemon at `addr`: the body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or(text)
}

fn wait_exit(child: &mut Child, secs: u64) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < until, "the gateway did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A stored monitor alarm: bed, id, kind, confirmed, end.
type Row = (String, String, String, Option<bool>, Option<i64>);

/// The stored monitor alarms, by bed and id.
fn stored(db: &Path) -> Vec<Row> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare(
            "SELECT bed, alarm_id, kind, confirmed, end_ms FROM monitor_alarms ORDER BY bed, alarm_id",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateways_vt_alarm_gets_holmess_opinion_from_the_beds_ecg_and_every_report_an_answer() {
    let test =
        "a_gateways_vt_alarm_gets_holmess_opinion_from_the_beds_ecg_and_every_report_an_answer";
    if !hl7_receiver::hl7_available(test) {
        return;
    }
    let Some(leads) = common::vfdb_422(test).await else {
        return;
    };
    let leads = &leads;
    // vfdb 422's annotators mark VT from 1335.8 s; the monitor alarms at 1339 s, its bed
    // having streamed the 20 s before.
    let (from, to) = (1319 * FS, 1339 * FS);
    let onset_ms = T0 + 20_000;
    let port = common::free_port();
    let app = spawn_app(|c| {
        c.pcd04_in.enabled = true;
        c.pcd04_in.listen = format!("127.0.0.1:{port}");
    })
    .await;
    let mut vt = Monitor::connect(&app.ws_url(), "bed-vt", "mon-1").await;
    vt.stream_record(T0, leads, from, to).await;

    let r = |control, bed, id, event, phase| R {
        control,
        bed,
        id,
        event,
        onset: dtm(onset_ms),
        phase,
        end_ms: None,
    };
    let start = r("M0", "bed-vt", "GW-1", VT, "start").text();
    let msgs = vec![
        start.clone(),
        // The gateway repeats the alarm while it lasts.
        r("M1", "bed-vt", "GW-1", VT, "continue").text(),
        start.replace("ORU^R40^ORU_R40", "ADT^A01^ADT_A01"),
        R {
            onset: "soon".into(),
            ..r("M3", "bed-vt", "GW-9", VT, "start")
        }
        .text(),
        r("M4", "bed-vt", "GW-2", ASYSTOLE, "start").text(),
        // A bed no monitor streams: stored, with no opinion.
        r("M5", "bed-none", "GW-3", VF, "start").text(),
        // A keep-alive, in original mode (no MSH-15).
        [
            "MSH|^~\\&|GW|ICU||HOLMES|20231114221320||ORU^R40^ORU_R40|M6|P|2.6",
            "OBR|1|||67860^MDC_ATTR_CONFIRM_TIMEOUT^MDC|||20231114221320",
        ]
        .join("\r"),
        R {
            end_ms: Some(onset_ms + 10_000),
            ..r("M7", "bed-vt", "GW-1", VT, "end")
        }
        .text(),
        start.replace("|AL|NE|", "|||").replace("|M0|", "|M8|"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut gw = gateway(dir.path(), port, &msgs, 60);
    assert!(wait_exit(&mut gw, 90).success());
    let got = acks(dir.path());
    let codes: Vec<&str> = got.iter().map(|(_, a)| a[0].as_str()).collect();
    assert_eq!(
        codes,
        ["CA", "CA", "CR", "CE", "CA", "CA", "AA", "CA", "AA"],
        "{got:?}"
    );
    assert_eq!(got[2].1[2], "200", "{got:?}");
    assert!(got[2].1[3].contains("ADT^A01"), "{got:?}");
    assert_eq!(got[3].1[1], "OBR^1^7", "{got:?}");
    assert!(got[3].1[3].contains("\"soon\""), "{got:?}");

    // The VT alarm: judged from bed-vt's ECG, confirmed, ended; one row however often sent.
    let until = Instant::now() + Duration::from_secs(30);
    let v = loop {
        let (status, v) = app.get("/api/beds/bed-vt/monitor_alarms").await;
        let done = v["alarms"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["id"] == "GW-1" && x["end_ms"] == json!(onset_ms + 10_000))
                && a.len() == 2
        });
        if status == 200 && done {
            break v;
        }
        assert!(Instant::now() < until, "not stored: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let a = v["alarms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == "GW-1")
        .unwrap();
    assert_eq!(a["kind"], "vt");
    assert_eq!(a["onset_ms"], json!(onset_ms));
    assert_eq!(a["confirmed"], json!(true), "{a}");
    assert!(a["reason"].as_str().unwrap().contains("on II and V"), "{a}");
    let db = app.dir.path().join("holmes.db");
    let rows = stored(&db);
    assert_eq!(
        rows,
        [
            ("bed-none".into(), "GW-3".into(), "vf".into(), None, None),
            (
                "bed-vt".into(),
                "GW-1".into(),
                "vt".into(),
                Some(true),
                Some(onset_ms + 10_000)
            ),
            (
                "bed-vt".into(),
                "GW-2".into(),
                "asystole".into(),
                None,
                None
            ),
        ]
    );
    // Every report taken was kept before it was answered.
    let kept: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM pcd04_inbox", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, 6);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_report_acknowledged_is_stored_once_across_kill_9() {
    let test = "every_report_acknowledged_is_stored_once_across_kill_9";
    if !hl7_receiver::hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let mut cfg = common::test_config(dir.path());
    cfg.server.listen = format!("127.0.0.1:{}", common::free_port())
        .parse()
        .unwrap();
    cfg.pcd04_in.enabled = true;
    cfg.pcd04_in.listen = format!("127.0.0.1:{port}");
    let config = dir.path().join("holmes.toml");
    std::fs::write(&config, toml::to_string(&cfg).unwrap()).unwrap();
    let db = cfg.storage.db.clone();
    let serve = || common::serve_child(&config);
    // 400 alarms over 40 beds no monitor streams, of four kinds; every fourth ended later.
    let kinds = [VT, VF, ASYSTOLE, "199694^MDC_EVT_ECG_BRADY_EXTREME^MDC"];
    let mut msgs = Vec::new();
    for n in 0..400usize {
        let (bed, id) = (format!("bed-{}", n % 40), format!("A-{n}"));
        let onset = T0 + n as i64 * 1000;
        let control = format!("C-{n}");
        msgs.push(
            R {
                control: &control,
                bed: &bed,
                id: &id,
                event: kinds[n % 4],
                onset: dtm(onset),
                phase: "start",
                end_ms: None,
            }
            .text(),
        );
        if n % 4 == 3 {
            let control = format!("E-{n}");
            msgs.push(
                R {
                    control: &control,
                    bed: &bed,
                    id: &id,
                    event: kinds[n % 4],
                    onset: dtm(onset),
                    phase: "end",
                    end_ms: Some(onset + 5_000),
                }
                .text(),
            );
        }
    }
    let mut daemon = serve();
    let mut gw = gateway(dir.path(), port, &msgs, 240);
    // Killed once a third of the reports are answered; the gateway waits, then resends.
    let until = Instant::now() + Duration::from_secs(120);
    while acks(dir.path()).len() < msgs.len() / 3 {
        assert!(
            Instant::now() < until,
            "too few answers: {}",
            acks(dir.path()).len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    daemon.kill().unwrap(); // SIGKILL
    daemon.wait().unwrap();
    let before = acks(dir.path()).len();
    assert!(before < msgs.len(), "the gateway finished before the kill");
    // What the killed run stored; the next run hands on everything else, and nothing twice.
    let kept_before = stored(&db);
    let ended_before = kept_before.iter().filter(|r| r.4.is_some()).count();
    std::thread::sleep(Duration::from_secs(1));
    let mut daemon = serve();
    assert!(wait_exit(&mut gw, 240).success(), "the gateway gave up");
    let got = acks(dir.path());
    let order: Vec<usize> = got.iter().map(|(i, _)| *i).collect();
    assert_eq!(order, (0..msgs.len()).collect::<Vec<_>>());
    assert!(got.iter().all(|(_, a)| a[0] == "CA"), "{got:?}");
    let until = Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let rows = stored(&db);
        let ended = rows.iter().filter(|r| r.4.is_some()).count();
        if rows.len() == 400 && ended == 100 {
            break rows;
        }
        assert!(
            Instant::now() < until,
            "{} of 400 stored, {ended} of 100 ended",
            rows.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let metrics = http_get(cfg.server.listen, "/metrics").await;
    let handed = |phase: &str| -> usize {
        let key = format!("holmes_pcd04_in_handed_total{{phase=\"{phase}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&key))
            .map_or(0, |v| v.trim().parse::<f64>().unwrap() as usize)
    };
    assert_eq!(handed("raised"), 400 - kept_before.len(), "{metrics}");
    assert_eq!(handed("ended"), 100 - ended_before, "{metrics}");
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    for n in 0..400usize {
        let r = rows
            .iter()
            .find(|r| r.1 == format!("A-{n}"))
            .unwrap_or_else(|| panic!("A-{n} lost"));
        assert_eq!(r.0, format!("bed-{}", n % 40));
        assert_eq!(r.4.is_some(), n % 4 == 3, "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_taken_but_never_stored_are_stored_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("holmes.db");
    let port = common::free_port();
    let config = |c: &mut holmes::config::Config| {
        c.storage.db = db.clone();
        c.pcd04_in.enabled = true;
        c.pcd04_in.listen = format!("127.0.0.1:{port}");
    };
    // A first run creates the database; a report it took (kept in the inbox) never reached
    // the store, as when the daemon is killed between the two; another's end did not either.
    spawn_app(config).await.stop().await;
    let now = holmes::core::time::now_ms();
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(&format!(
            "INSERT INTO pcd04_inbox (received_ms, control_id, bed, alarm_id, kind, onset_ms, end_ms)
             VALUES ({now}, 'C-1', 'bed-3', 'LOST-1', 'vt', {T0}, NULL),
                    ({now}, 'C-2', 'bed-3', 'OPEN-1', 'brady', {T0}, {end}),
                    ({old}, 'C-0', 'bed-3', 'TOO-OLD', 'vt', {T0}, NULL);
             INSERT INTO monitor_alarms (bed, alarm_id, kind, onset_ms, received_ms)
             VALUES ('bed-3', 'OPEN-1', 'brady', {T0}, {now});",
            end = T0 + 4_000,
            old = now - 2 * 3_600_000,
        ))
        .unwrap();
    }
    let app = spawn_app(config).await;
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = stored(&db);
        let want = [
            (
                "bed-3".to_string(),
                "LOST-1".to_string(),
                "vt".to_string(),
                None,
                None,
            ),
            (
                "bed-3".into(),
                "OPEN-1".into(),
                "brady".into(),
                None,
                Some(T0 + 4_000),
            ),
        ];
        if rows == want {
            break;
        }
        assert!(Instant::now() < until, "{rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The report older than inbox_hours is dropped, not handed on.
    app.stop().await;
    assert_eq!(stored(&db).len(), 2);
}

/// Sends `bytes` on a new connection to the listener at `port` and reads until it closes (or
/// 5 s pass): what came back.
async fn exchange(port: u16, bytes: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let _ = s.write_all(bytes).await;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, s.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if got.ends_with(&[0x1c, 0x0d]) {
            break;
        }
    }
    got
}

fn framed(text: &str) -> Vec<u8> {
    let mut f = vec![0x0b];
    f.extend_from_slice(text.as_bytes());
    f.extend_from_slice(&[0x1c, 0x0d]);
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_garbage_and_huge_frames_are_cut_off_and_the_listener_stays_up() {
    let report = R {
        control: "Z-1",
        bed: "bed-1",
        id: "Z",
        event: VT,
        onset: dtm(T0),
        phase: "start",
        end_ms: None,
    }
    .text();
    // Only the named gateway may connect: loopback is no gateway here.
    let port = common::free_port();
    let app = spawn_app(|c| {
        c.pcd04_in.enabled = true;
        c.pcd04_in.listen = format!("127.0.0.1:{port}");
        c.pcd04_in.allowed_peers = vec!["10.20.0.5".parse().unwrap()];
    })
    .await;
    assert!(exchange(port, &framed(&report)).await.is_empty());
    app.stop().await;

    let port = common::free_port();
    let app = spawn_app(|c| {
        c.pcd04_in.enabled = true;
        c.pcd04_in.listen = format!("127.0.0.1:{port}");
        c.hl7.max_frame_bytes = 4096;
    })
    .await;
    // Bytes outside a frame, and a frame over hl7.max_frame_bytes: closed without an answer.
    assert!(exchange(port, b"GET / HTTP/1.1\r\n\r\n").await.is_empty());
    let huge = framed(&format!("{report}\rNTE|1||{}", "x".repeat(10_000)));
    assert!(exchange(port, &huge).await.is_empty());
    // A report on a new connection is still answered, and taken.
    let answer = String::from_utf8(exchange(port, &framed(&report)).await).unwrap();
    assert!(answer.contains("MSA|CA|Z-1"), "{answer:?}");
    app.stop().await;
}
