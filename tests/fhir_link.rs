//! Issue 42's FHIR R4 link against a real FHIR server: Medplum's in-memory FHIR router with
//! the R4 definitions (`tests/fhir_peer/server.mjs`, started by `fhir_server`), which validates
//! every resource it is sent (400 + OperationOutcome on a bad one) and is searched back by
//! code. The daemon streams from scripted monitors; the tests read what the server holds and
//! check the coded values themselves (the server checks structure, not codes): heart rate as
//! LOINC 8867-4 and MDC 147842 in UCUM /min, the risk score under its local code, the risk
//! alarm as an alarm-event Observation; a refused resource parked and visible, a failing
//! server and a lost answer resent without a duplicate; across a killed server and a
//! restarted daemon, every resource the outbox held arrives once, in order; an admitted bed's
//! resources name its patient in `subject`, another bed's name none.
//!
//! `holmes validate` on the `[fhir]` section is checked here too (no server needed).
//!
//! Without node (20 or later) and the peer's packages (`cd tests/fhir_peer && npm ci`) the
//! server's tests print `SKIPPED`, unless `HOLMES_REQUIRE_FHIR` is set, as in CI.

mod common;
mod fhir_server;
mod hl7_receiver;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use fhir_server::*;
use hl7_receiver::{stream, stream_with};
use serde_json::Value;

const LOINC_HR: &str = "http://loinc.org|8867-4";
const MDC_HR: &str = "urn:iso:std:iso:11073:10101|147842";
const RISK: &str = "urn:holmes:fhir:codes|HOLMES-RISK";
const ALARM: &str = "urn:iso:std:iso:11073:10101|196616";
const TOKEN: &str = "s3cret-test-token";

/// Every Observation the server holds.
async fn everything(peer: &Peer, token: Option<&str>) -> Vec<Value> {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let (status, b) = peer
        .request("GET", "/Observation?_count=100000", &auth, "")
        .await;
    assert_eq!(status, 200, "{b}");
    b["entry"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|e| e["resource"].clone())
        .collect()
}

/// No identifier twice on the server.
fn assert_unique(all: &[Value]) {
    let ids: Vec<String> = all.iter().map(identifier).collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "duplicates on the server: {ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_reach_a_real_fhir_server_coded_and_refusals_park_while_failures_resend() {
    let test = "resources_reach_a_real_fhir_server_coded_and_refusals_park_while_failures_resend";
    if !fhir_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::start(dir.path(), 0, "ok", Some(TOKEN));
    let t = Some(TOKEN);
    // The server validates: a bad resource is refused with an OperationOutcome.
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let bad = r#"{"resourceType":"Observation","status":"final","valueQuantity":{"value":"high"}}"#;
    let (status, oo) = peer.request("POST", "/Observation", &auth, bad).await;
    assert_eq!(status, 400, "{oo}");
    assert_eq!(oo["resourceType"], "OperationOutcome", "{oo}");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let db = dir.path().join("holmes.db");
    let base = peer.base_url();
    let app = common::spawn_app(move |c| {
        fhir_config(c, base);
        c.fhir.token_file = token_file.display().to_string();
        c.storage.db = db;
    })
    .await;
    let streaming = stream(app.ws_url(), "bed-7");

    // Heart rate: LOINC and MDC, UCUM /min, a vital sign, the appliance, the bed, no subject.
    let hr = peer.wait_found(t, 60.0, LOINC_HR, |_| true).await;
    let codings = hr["code"]["coding"].as_array().unwrap();
    assert!(
        codings
            .iter()
            .any(|c| c["system"] == "http://loinc.org" && c["code"] == "8867-4"),
        "{hr}"
    );
    assert!(
        codings
            .iter()
            .any(|c| c["system"] == "urn:iso:std:iso:11073:10101" && c["code"] == "147842"),
        "{hr}"
    );
    let q = &hr["valueQuantity"];
    assert_eq!(q["system"], "http://unitsofmeasure.org", "{hr}");
    assert_eq!(
        (q["code"].as_str(), q["unit"].as_str()),
        (Some("/min"), Some("/min"))
    );
    assert_eq!(q["value"].as_f64(), Some(72.0), "the monitor's heart rate");
    assert_eq!(hr["category"][0]["coding"][0]["code"], "vital-signs");
    assert_eq!(hr["device"]["identifier"]["value"], "0123456789ABCDEF");
    assert_eq!(hr["extension"][0]["url"], "urn:holmes:fhir:bed");
    assert_eq!(hr["extension"][0]["valueString"], "bed-7");
    assert!(hr.get("subject").is_none(), "no patient is known: {hr}");
    assert!(identifier(&hr).starts_with("bed-7/heart-rate/"), "{hr}");
    assert_eq!(hr["identifier"][0]["system"], "urn:holmes:0123456789abcdef");
    assert!(
        peer.search(t, MDC_HR)
            .await
            .iter()
            .any(|r| r["id"] == hr["id"]),
        "found by its MDC code too"
    );

    // The risk score: its local code, dimensionless, with the alarm state and data quality.
    let risk = peer.wait_found(t, 30.0, RISK, |_| true).await;
    let score = risk["valueQuantity"]["value"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&score), "{risk}");
    assert_eq!(risk["valueQuantity"]["code"], "1");
    assert_eq!(risk["category"][0]["coding"][0]["code"], "survey");
    let quality = component(&risk, "HOLMES-DATA-QUALITY").unwrap();
    assert!(["scored", "partial"].contains(&quality.as_str()), "{risk}");
    assert!(
        component(&risk, "HOLMES-RISK-ALARM-STATE").is_some(),
        "{risk}"
    );

    // The risk alarm's start: an alarm-event Observation with its facets.
    let start = peer
        .wait_found(t, 30.0, ALARM, |r| {
            component(r, "68481").as_deref() == Some("start")
                && r["code"]["coding"][1]["code"] == "HOLMES-RISK-ALARM"
        })
        .await;
    assert_eq!(component(&start, "68482").as_deref(), Some("active"));
    assert_eq!(component(&start, "68483").as_deref(), Some("enabled"));
    assert_eq!(component(&start, "68484").as_deref(), Some("PH"));
    assert_eq!(component(&start, "68485").as_deref(), Some("SP"));
    assert!(start["effectivePeriod"]["start"].is_string(), "{start}");
    assert_eq!(start["extension"][0]["valueString"], "bed-7");

    // Every write is a conditional create on the resource's own identifier.
    for w in peer.writes().iter().skip(1) {
        assert_eq!(w.path, "/fhir/R4/Observation");
        let q = w.if_none_exist.as_deref().unwrap_or("");
        assert!(
            q.starts_with("identifier=urn%3Aholmes%3A0123456789abcdef|bed-7%2F"),
            "{w:?}"
        );
    }

    // A refusal: parked with the server's reason, visible, audited, never sent again.
    peer.set("refuse HOLMES-RISK");
    peer.wait_write(20.0, "a refusal", |w| w.status == 422)
        .await;
    let h = app
        .wait_health(10.0, "the refusal parked", |h| {
            h["fhir"]["last_parked"]["code"] == "422"
        })
        .await;
    let reason = h["fhir"]["last_parked"]["reason"].as_str().unwrap();
    assert!(reason.contains("refused by test"), "{h}");
    assert!(h["fhir"]["parked"].as_u64() >= Some(1), "{h}");
    assert_eq!(h["status"], "degraded");
    assert!(
        common::problems(&h)
            .iter()
            .any(|p| p.starts_with("fhir:") && p.contains("parked")),
        "{h}"
    );
    peer.set("ok");

    // A failing server: the same resource again after a back-off until it is taken.
    peer.set("fail");
    let failed = peer.wait_write(20.0, "a 503", |w| w.status == 503).await;
    app.wait_health(10.0, "the 503 shown", |h| {
        h["fhir"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("503"))
    })
    .await;
    peer.set("ok");
    peer.wait_write(20.0, "the failed resource taken", |w| {
        w.if_none_exist == failed.if_none_exist && w.status == 201
    })
    .await;

    // An answer lost on the way: sent again, and the server finds it holds it already.
    peer.set("lost");
    let lost = peer
        .wait_write(20.0, "a lost answer", |w| w.status == 0)
        .await;
    peer.set("ok");
    peer.wait_write(20.0, "the lost one sent again", |w| {
        w.if_none_exist == lost.if_none_exist && w.status == 200
    })
    .await;
    let h = app.health().await;
    assert_eq!(h["fhir"]["connected"], true, "{h}");
    assert!(h["fhir"]["last_ack_ms"].is_i64(), "{h}");
    streaming.abort();

    // Each refused resource sent once; nothing twice on the server.
    let writes = peer.writes();
    let refused: Vec<&Write> = writes.iter().filter(|w| w.status == 422).collect();
    for r in &refused {
        let n = writes
            .iter()
            .filter(|w| w.if_none_exist == r.if_none_exist)
            .count();
        assert_eq!(n, 1, "{r:?} sent again");
    }
    assert_unique(&everything(&peer, t).await);
    let metrics = app.get_raw("/metrics").await;
    for m in [
        "holmes_fhir_parked_total",
        "holmes_fhir_acked_total",
        "holmes_fhir_resent_total",
        "holmes_fhir_backlog",
    ] {
        assert!(metrics.contains(m), "{m} missing");
    }
    let audit: i64 = rusqlite::Connection::open(dir.path().join("holmes.db"))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM audit WHERE action = 'fhir_resource_parked'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        audit,
        refused.len() as i64,
        "one audit row per parked resource"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_and_a_restarted_daemon_make_no_duplicates_and_keep_order() {
    let test = "a_killed_server_and_a_restarted_daemon_make_no_duplicates_and_keep_order";
    if !fhir_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut peer = Peer::start(dir.path(), 0, "ok", None);
    let port = peer.port;
    let db = dir.path().join("holmes.db");
    let config = {
        let (db, base) = (db.clone(), peer.base_url());
        move |c: &mut holmes::config::Config| {
            fhir_config(c, base.clone());
            c.storage.db = db.clone();
            // No technical alarm is raised late in the test (its report would still be queued).
            c.ward.stale_secs = 3_600.0;
            c.ward.lost_secs = 7_200.0;
        }
    };
    let app = common::spawn_app(config.clone()).await;
    // bed-1 is admitted with a patient; the database keeps it across the restart.
    let mut hello = common::hello("bed-1", "mon-bed-1");
    hello["patient"] = serde_json::json!({"id": "MRN-1", "authority": "urn:oid:1.2.840.99.7"});
    let (_keep, none) = tokio::sync::mpsc::unbounded_channel();
    let beds = [
        stream_with(app.ws_url(), hello, none),
        stream(app.ws_url(), "bed-2"),
    ];
    for bed in ["bed-1", "bed-2"] {
        peer.wait_found(None, 60.0, LOINC_HR, |r| {
            r["extension"][0]["valueString"] == bed
        })
        .await;
    }
    // Mid-stream the server dies; a backlog builds.
    peer.kill();
    app.wait_health(30.0, "a backlog", |h| {
        h["fhir"]["connected"] == false && h["fhir"]["backlog"].as_u64() >= Some(3)
    })
    .await;
    // The daemon restarts mid-backlog.
    for b in beds {
        b.abort();
    }
    app.stop().await;
    let app = common::spawn_app(config).await;
    let h = app.health().await;
    assert!(h["fhir"]["backlog"].as_u64() >= Some(3), "{h}");
    // The server comes back on its port, holding what it held; the backlog drains.
    let peer = Peer::start(dir.path(), port, "ok", None);
    app.wait_health(60.0, "the backlog drained", |h| {
        h["fhir"]["connected"] == true && h["fhir"]["backlog"] == 0
    })
    .await;
    app.stop().await;

    // Every resource the outbox held is on the server once, and was first sent in the
    // outbox's order (which keeps each bed's).
    let all = everything(&peer, None).await;
    assert_unique(&all);
    let on_server: HashSet<String> = all.iter().map(identifier).collect();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut st = conn
        .prepare("SELECT state, body FROM fhir_outbox ORDER BY id")
        .unwrap();
    let rows: Vec<(String, Value)> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                serde_json::from_str(&r.get::<_, String>(1)?).unwrap(),
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(rows.len() >= 6, "{}", rows.len());
    assert!(
        rows.iter().all(|r| r.0 == "acked"),
        "{:?}",
        rows.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    let queued: Vec<String> = rows.iter().map(|r| identifier(&r.1)).collect();
    for id in &queued {
        assert!(on_server.contains(id), "{id} never arrived");
    }
    let mut first_sent: Vec<String> = Vec::new();
    for w in peer.writes() {
        let q = w.if_none_exist.unwrap();
        if !first_sent.contains(&q) {
            first_sent.push(q);
        }
    }
    let queued_queries: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "identifier=urn%3Aholmes%3A0123456789abcdef|{}",
                identifier(&r.1).replace('/', "%2F")
            )
        })
        .collect();
    assert_eq!(first_sent, queued_queries, "sent against queued");
    // The risk alarms open when the first run stopped were ended by the second, bed-1's with
    // its patient as `subject` (before its monitor said hello again), bed-2's with none.
    let mrn =
        serde_json::json!({"identifier": {"system": "urn:oid:1.2.840.99.7", "value": "MRN-1"}});
    for (bed, subject) in [("bed-1", mrn), ("bed-2", Value::Null)] {
        let ends = peer.search(None, ALARM).await;
        let end = ends
            .iter()
            .find(|r| {
                r["extension"][0]["valueString"] == bed
                    && component(r, "68481").as_deref() == Some("end")
                    && r["effectivePeriod"]["end"].is_string()
            })
            .unwrap_or_else(|| panic!("no end of {bed}'s risk alarm"));
        assert_eq!(end["subject"], subject, "{end}");
    }
}

/// The outbox's rows, in order: (state, kind).
fn outbox_rows(db: &std::path::Path) -> Vec<(String, String)> {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return Vec::new();
    };
    let Ok(mut st) = conn.prepare("SELECT state, kind FROM fhir_outbox ORDER BY id") else {
        return Vec::new();
    };
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map(|rows| rows.map(Result::unwrap).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_observations_are_dropped_and_counted_while_alarms_wait_for_the_server() {
    let test = "old_observations_are_dropped_and_counted_while_alarms_wait_for_the_server";
    if !fhir_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on yet: the server is away while the bed streams.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = dir.path().join("holmes.db");
    let app = common::spawn_app({
        let db = db.clone();
        move |c| {
            fhir_config(c, format!("http://127.0.0.1:{port}/fhir/R4"));
            c.fhir.max_observation_age_secs = 1.0;
            c.storage.db = db.clone();
            // No stale/lost technical alarm is raised after the stream stops (its report could
            // be queued after the backlog drained).
            c.ward.stale_secs = 3_600.0;
            c.ward.lost_secs = 7_200.0;
        }
    })
    .await;
    let streaming = stream(app.ws_url(), "bed-5");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = outbox_rows(&db);
        if rows.iter().any(|r| r.1 == "alarm") && rows.len() >= 4 {
            break;
        }
        assert!(Instant::now() < until, "no backlog: {rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    streaming.abort();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Back after more than max_observation_age_secs: what was queued then goes by kind.
    let peer = Peer::start(dir.path(), port, "ok", None);
    let h = app
        .wait_health(60.0, "the backlog drained", |h| {
            h["fhir"]["backlog"] == 0 && h["fhir"]["dropped_observations"].as_u64() > Some(0)
        })
        .await;
    assert!(
        common::problems(&h).iter().any(|p| p.contains("dropped")),
        "{h}"
    );
    app.stop().await;
    let rows = outbox_rows(&db);
    assert!(
        rows.iter().all(|r| r.1 == "observation" || r.0 == "acked"),
        "an alarm was not delivered: {rows:?}"
    );
    assert!(rows.iter().any(|r| r.0 == "dropped"), "{rows:?}");
    let alarms = peer.search(None, ALARM).await;
    assert!(
        alarms
            .iter()
            .any(|r| r["extension"][0]["valueString"] == "bed-5"
                && component(r, "68481").as_deref() == Some("start")),
        "the risk alarm's start never arrived"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admitted_beds_resources_name_its_patient_as_subject_and_others_none() {
    let test = "an_admitted_beds_resources_name_its_patient_as_subject_and_others_none";
    if !fhir_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::start(dir.path(), 0, "ok", None);
    let base = peer.base_url();
    let app = common::spawn_app(move |c| fhir_config(c, base)).await;
    // bed-1's monitor names a URI authority, bed-3's a namespace id; bed-2's none.
    let admitted = |bed: &str, authority: &str| {
        let mut h = common::hello(bed, &format!("mon-{bed}"));
        h["patient"] = serde_json::json!({"id": format!("MRN-{bed}"), "authority": authority});
        let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
        hl7_receiver::stream_with(app.ws_url(), h, rx)
    };
    let one = admitted("bed-1", "urn:oid:1.2.840.99.7");
    let three = admitted("bed-3", "HOSP");
    let two = stream(app.ws_url(), "bed-2");
    let bed = |r: &Value| {
        r["extension"][0]["valueString"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let want_one =
        serde_json::json!({"identifier": {"system": "urn:oid:1.2.840.99.7", "value": "MRN-bed-1"}});
    let want_three = serde_json::json!({"identifier": {
        "system": "urn:holmes:fhir:authority:HOSP",
        "value": "MRN-bed-3",
        "assigner": {"display": "HOSP"}
    }});
    // The server validated and stored each kind with the subject, for every bed.
    for code in [LOINC_HR, RISK, ALARM] {
        for b in ["bed-1", "bed-2", "bed-3"] {
            peer.wait_found(None, 60.0, code, |r| bed(r) == b).await;
        }
    }
    one.abort();
    two.abort();
    three.abort();
    let all = everything(&peer, None).await;
    for r in &all {
        match bed(r).as_str() {
            "bed-1" => assert_eq!(r["subject"], want_one, "{r}"),
            "bed-3" => assert_eq!(r["subject"], want_three, "{r}"),
            _ => assert!(r.get("subject").is_none(), "{r}"),
        }
    }
    app.stop().await;
}

#[test]
fn holmes_validate_checks_the_fhir_section() {
    let dir = tempfile::tempdir().unwrap();
    let run = |edit: &dyn Fn(&mut holmes::config::Config)| {
        let mut cfg = common::test_config(dir.path());
        cfg.fhir.enabled = true;
        edit(&mut cfg);
        common::holmes_validate(dir.path(), &cfg)
    };
    let (ok, text) = run(&|_| {});
    assert!(ok, "{text}");
    assert!(
        text.contains(
            "fhir: Observations every 60 s and alarm events to http://127.0.0.1:8103/fhir/R4, no bearer token"
        ),
        "{text}"
    );
    let missing = dir.path().join("no-such-token");
    let (ok, text) = run(&|c| c.fhir.token_file = missing.display().to_string());
    assert!(
        !ok && text.contains("fhir.token_file") && text.contains("no-such-token"),
        "{text}"
    );
    let (ok, text) = run(&|c| c.fhir.base_url = "https://ehr.example/fhir/R4".into());
    assert!(!ok && text.contains("fhir.tls_ca"), "{text}");
    let (ok, text) = run(&|c| c.fhir.base_url = "ehr.example/fhir".into());
    assert!(!ok && text.contains("fhir.base_url"), "{text}");
    let ca = dir.path().join("no-such-ca.pem");
    let (ok, text) = run(&|c| {
        c.fhir.base_url = "https://ehr.example/fhir/R4".into();
        c.fhir.tls_ca = Some(ca.clone());
    });
    assert!(!ok && text.contains("no-such-ca.pem"), "{text}");
}
