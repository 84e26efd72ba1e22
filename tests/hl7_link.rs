//! Issue 42's HL7 v2 link against a real receiver: the Python `hl7` package's MLLP server
//! (`tests/hl7_peer.py`, started by `hl7_receiver`), answering as each test tells it. The
//! daemon streams from scripted monitors; the tests read what the receiver got and check the
//! coded values themselves (the peer checks none): PCD-01 observation reports and PCD-04 alarm
//! reports, an acknowledgement on the dashboard as the alarm's inactivation state, AE and AR
//! parked and visible, unanswered, late and wrongly answered messages sent again with the same
//! MSH-10, garbage and a frame over the limit costing the receiver its connection (never
//! scoring its pace), a silent receiver holding up no shutdown; and the link over TLS,
//! refused by a receiver its CA does not vouch for; the patient a monitor admits its bed with
//! in PID-3 of that bed's reports alone, as it changes, each change audited. Delivery across
//! outages, restarts and kills: `tests/hl7_durability.rs`.
//!
//! `holmes validate` on the `[hl7]` section is checked here too (no receiver needed).
//!
//! Without python3 and its `hl7` package the receiver's tests print `SKIPPED` (`pip install
//! hl7`), unless `HOLMES_REQUIRE_HL7` is set, as in CI.

mod common;
mod hl7_receiver;

use std::time::{Duration, Instant};

use hl7_receiver::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_reach_a_real_receiver_coded_and_refusals_park_while_silence_resends() {
    let test = "reports_reach_a_real_receiver_coded_and_refusals_park_while_silence_resends";
    if !hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::start(dir.path(), 0, "aa");
    let db = dir.path().join("holmes.db");
    common::add_user(
        &db,
        "nina",
        holmes::dashboard::auth::Role::Nurse,
        "night shift 7",
    );
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

    // She silences it for a second: "continue", audio paused; when the silence runs out,
    // "continue" again, the audio no longer paused.
    let (code, text) = request(
        &app,
        "POST",
        &format!("/api/alarms/{alarm_id}/silence"),
        &format!("Cookie: {cookie}\r\n"),
        r#"{"secs":1}"#,
    )
    .await;
    assert_eq!(code, 200, "{text}");
    let paused = peer
        .wait(20.0, "the silence", |m| {
            m.is_alarm("HOLMES-RISK-ALARM^", "continue")
                && m.get("OBR", 0, 2) == alarm_ref
                && m.facet(5) == "audio-paused"
        })
        .await;
    peer.wait(20.0, "the silence running out", |m| {
        m.is_alarm("HOLMES-RISK-ALARM^", "continue")
            && m.get("OBR", 0, 2) == alarm_ref
            && m.control_id() > paused.control_id()
            && m.facet(5) != "audio-paused"
    })
    .await;

    // CA and an ORA^R41 accept as AA does: the next message follows, not the same one again.
    for code in ["ca", "ora"] {
        peer.set(code);
        let first = peer
            .wait(20.0, "a message to accept", |m| m.answer == code)
            .await;
        peer.wait(20.0, "the message after an acceptance", |m| {
            m.answer == code && m.control_id() > first.control_id()
        })
        .await;
    }

    // AE, AR, CE and CR: parked with the receiver's reason, visible and audited, never sent
    // again.
    for code in ["ae", "ar", "ce", "cr"] {
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
        .filter(|m| ["ae", "ar", "ce", "cr"].contains(&m.answer.as_str()))
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
    // The resend goes unanswered, so only the late answer to the first copy can ack it.
    peer.set("never");
    let until = Instant::now() + Duration::from_secs(20);
    let outbox = dir.path().join("holmes.db");
    while !outbox_rows(&outbox)
        .iter()
        .any(|r| r.0 == late && r.1 == "acked")
    {
        assert!(
            Instant::now() < until,
            "the late answer did not ack the message: {:?}",
            outbox_rows(&outbox)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admitted_beds_reports_name_its_patient_in_pid_3_as_it_changes() {
    let test = "an_admitted_beds_reports_name_its_patient_in_pid_3_as_it_changes";
    if !hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::start(dir.path(), 0, "aa");
    let port = peer.port;
    let app = common::spawn_app(move |c| hl7_config(c, port)).await;
    let db = app.dir.path().join("holmes.db");

    // An identity HL7 cannot carry as it is, or with a control character: the hello is
    // refused, saying which part and why, and the bed is not admitted.
    for (id, why) in [("MRN|1", "delimiter"), ("MRN\u{7}", "control character")] {
        let mut h = common::hello("bed-9", "mon-bed-9");
        h["patient"] = json!({"id": id, "authority": "HOSP"});
        let (_ws, first) = common::connect_raw(&app.ws_url(), &h).await;
        let (code, reason) = common::close_of(&first).unwrap();
        assert_eq!(code, 4000, "{reason}");
        assert!(
            reason.contains("patient.id") && reason.contains(why),
            "{reason}"
        );
    }
    // A bad patient message is a per-frame error; the connection carries on.
    let mut m = common::Monitor::connect(&app.ws_url(), "bed-9", "mon-bed-9").await;
    m.send(json!({"type": "patient", "patient": {"id": "1", "authority": "H&S"}}))
        .await;
    let e = m.expect(10.0, |v| v["type"] == "error").await;
    assert_eq!(e["code"], "malformed", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("patient.authority"),
        "{e}"
    );
    m.send(json!({"type": "patient"})).await;
    let e = m.expect(10.0, |v| v["type"] == "error").await;
    assert!(e["message"].as_str().unwrap().contains("patient"), "{e}");
    drop(m);

    // bed-1 is admitted in its hello, bed-2 not.
    let mut h = common::hello("bed-1", "mon-bed-1");
    h["patient"] = json!({"id": "MRN-00417", "authority": "HOSP"});
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let one = stream_with(app.ws_url(), h, rx);
    let two = stream(app.ws_url(), "bed-2");
    let pid3 = |m: &Msg| m.get("PID", 0, 3);
    let first = "MRN-00417^^^HOSP^MR";
    let o = peer
        .wait(60.0, "bed-1's observation", |m| {
            m.kind() == ORU_R01 && m.bed() == "bed-1"
        })
        .await;
    assert_eq!(pid3(&o), first, "{}", o.text);
    let a = peer
        .wait(30.0, "bed-1's risk alarm", |m| {
            m.is_alarm("HOLMES-RISK-ALARM", "start") && m.bed() == "bed-1"
        })
        .await;
    assert_eq!(pid3(&a), first, "{}", a.text);
    let o2 = peer
        .wait(30.0, "bed-2's observation", |m| {
            m.kind() == ORU_R01 && m.bed() == "bed-2"
        })
        .await;
    assert_eq!(o2.segments("PID"), vec![vec!["PID", "1"]], "{}", o2.text);

    // Discharged, then admitted with another patient, without reconnecting.
    tx.send(json!({"type": "patient", "patient": null}))
        .unwrap();
    peer.wait(30.0, "bed-1's report after the discharge", |m| {
        m.bed() == "bed-1" && m.kind() == ORU_R01 && pid3(m).is_empty()
    })
    .await;
    // An OID authority is CX.4's universal id, of type ISO.
    let second = "4711^^^&1.2.840.99.7&ISO^MR";
    tx.send(
        json!({"type": "patient", "patient": {"id": "4711", "authority": "urn:oid:1.2.840.99.7"}}),
    )
    .unwrap();
    peer.wait(30.0, "bed-1's report after the new admission", |m| {
        m.bed() == "bed-1" && m.kind() == ORU_R01 && pid3(m) == second
    })
    .await;
    one.abort();
    two.abort();
    // Every report carries the identity in force when it was made: in MSH-10 order, bed-1's
    // went from the first patient to none to the second, never back; bed-2's never had one.
    let mut got = peer.received();
    got.sort_by_key(Msg::control_id);
    got.dedup_by_key(|m| m.control_id());
    let mut seen: Vec<String> = Vec::new();
    for m in got.iter().filter(|m| m.bed() == "bed-1") {
        if seen.last() != Some(&pid3(m)) {
            seen.push(pid3(m));
        }
    }
    assert_eq!(seen, [first, "", second]);
    assert!(
        got.iter()
            .filter(|m| m.bed() == "bed-2")
            .all(|m| pid3(m).is_empty())
    );

    // One audit row a change, the device the actor; none for bed-2 or the refused hellos.
    let rows = patient_audit(&db, 3).await;
    let mrn = json!({"id": "MRN-00417", "authority": "HOSP"});
    let oid = json!({"id": "4711", "authority": "urn:oid:1.2.840.99.7"});
    assert_eq!(
        rows,
        vec![
            (
                "mon-bed-1".to_string(),
                "patient_admitted".to_string(),
                json!({"bed": "bed-1", "patient": mrn, "previous": null})
            ),
            (
                "mon-bed-1".to_string(),
                "patient_discharged".to_string(),
                json!({"bed": "bed-1", "patient": mrn})
            ),
            (
                "mon-bed-1".to_string(),
                "patient_admitted".to_string(),
                json!({"bed": "bed-1", "patient": oid, "previous": null})
            ),
        ]
    );
    app.stop().await;
}

#[test]
fn holmes_validate_checks_the_hl7_section() {
    let dir = tempfile::tempdir().unwrap();
    let run = |edit: &dyn Fn(&mut holmes::config::Config)| {
        let mut cfg = common::test_config(dir.path());
        cfg.hl7.enabled = true;
        edit(&mut cfg);
        common::holmes_validate(dir.path(), &cfg)
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
