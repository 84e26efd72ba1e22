//! Issue 42's durable outbox against a real receiver (`tests/hl7_peer.py`, started by
//! `hl7_receiver`): across a receiver killed mid-stream, a daemon restarted mid-backlog and a
//! daemon killed with SIGKILL, every message the outbox committed arrives by its MSH-10, in
//! order, and an alarm a stopped run left open is ended (naming the patient its bed was
//! admitted with, which the database kept across the restart); after a long outage
//! observations too old are dropped and counted while the alarms queued meanwhile are
//! delivered.
//!
//! Without python3 and its `hl7` package these print `SKIPPED` (`pip install hl7`), unless
//! `HOLMES_REQUIRE_HL7` is set, as in CI.

mod common;
mod hl7_receiver;

use std::time::{Duration, Instant};

use hl7_receiver::*;

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
    let serve = || common::serve_child(&config);
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
        // No stale/lost technical alarm is raised after the stream stops (its report could
        // be queued after the backlog drained).
        c.ward.stale_secs = 3_600.0;
        c.ward.lost_secs = 7_200.0;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beds_patient_outlives_a_restart_in_the_reports_made_before_its_monitor_returns() {
    let test = "a_beds_patient_outlives_a_restart_in_the_reports_made_before_its_monitor_returns";
    if !hl7_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::start(dir.path(), 0, "aa");
    let port = peer.port;
    let db = dir.path().join("holmes.db");
    let config = {
        let db = db.clone();
        move |c: &mut holmes::config::Config| {
            hl7_config(c, port);
            c.storage.db = db.clone();
            // The risk alarms stay open across the restart; no technical alarm joins them.
            c.ward.stale_secs = 3_600.0;
            c.ward.lost_secs = 7_200.0;
        }
    };
    let app = common::spawn_app(config.clone()).await;
    // bed-1 is admitted in its hello and stays so; bed-2 is admitted, then discharged.
    let admitted = |bed: &str, id: &str| {
        let mut h = common::hello(bed, &format!("mon-{bed}"));
        h["patient"] = serde_json::json!({"id": id, "authority": "urn:oid:1.2.840.99.7"});
        h
    };
    let (_keep, none) = tokio::sync::mpsc::unbounded_channel();
    let one = stream_with(app.ws_url(), admitted("bed-1", "MRN-1"), none);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let two = stream_with(app.ws_url(), admitted("bed-2", "MRN-2"), rx);
    let pid3 = |m: &Msg| m.get("PID", 0, 3);
    let first = "MRN-1^^^&1.2.840.99.7&ISO^MR";
    for (bed, pid) in [("bed-1", first), ("bed-2", "MRN-2^^^&1.2.840.99.7&ISO^MR")] {
        let a = peer
            .wait(60.0, "the risk alarm's start", |m| {
                m.bed() == bed && m.is_alarm("HOLMES-RISK-ALARM^", "start")
            })
            .await;
        assert_eq!(pid3(&a), pid, "{}", a.text);
    }
    tx.send(serde_json::json!({"type": "patient", "patient": null}))
        .unwrap();
    peer.wait(30.0, "bed-2's report after its discharge", |m| {
        m.bed() == "bed-2" && m.kind() == ORU_R01 && pid3(m).is_empty()
    })
    .await;
    one.abort();
    two.abort();
    app.stop().await;
    let before = peer.received().len();

    // A new run; neither monitor has said hello again. The alarms the stopped run left open
    // are ended at start-up, bed-1's naming its patient, bed-2's no one.
    let app = common::spawn_app(config).await;
    let end = |bed: &'static str| {
        peer.wait(60.0, "the risk alarm's end", move |m| {
            m.bed() == bed && m.is_alarm("HOLMES-RISK-ALARM^", "end")
        })
    };
    let e1 = end("bed-1").await;
    assert_eq!(pid3(&e1), first, "{}", e1.text);
    let e2 = end("bed-2").await;
    assert!(pid3(&e2).is_empty(), "{}", e2.text);
    assert!(
        peer.received()[before..]
            .iter()
            .any(|m| m.control_id() == e1.control_id()),
        "the end was sent by the second run"
    );
    // /api/beds names bed-1's patient too, and the first report of its monitor's stream
    // after it comes back (with the same patient) as well; the same patient is no change,
    // so nothing new is audited.
    let (_, beds) = app.get("/api/beds").await;
    let listed = beds["beds"].as_array().unwrap();
    let bed = |b: &str| listed.iter().find(|x| x["bed"] == b).unwrap().clone();
    assert_eq!(
        bed("bed-1")["patient"],
        serde_json::json!({"id": "MRN-1", "authority": "urn:oid:1.2.840.99.7"}),
        "{beds}"
    );
    assert_eq!(bed("bed-2")["patient"], serde_json::Value::Null, "{beds}");
    // Its monitor comes back naming the same patient: no change, nothing new audited.
    let (_keep, none) = tokio::sync::mpsc::unbounded_channel();
    let one = stream_with(app.ws_url(), admitted("bed-1", "MRN-1"), none);
    let o = peer
        .wait(60.0, "bed-1's observation after the restart", |m| {
            m.bed() == "bed-1" && m.kind() == ORU_R01 && m.control_id() > e1.control_id()
        })
        .await;
    assert_eq!(pid3(&o), first, "{}", o.text);
    one.abort();
    app.stop().await;
    let mut actions: Vec<(String, String)> = patient_audit(&db, 3)
        .await
        .into_iter()
        .map(|r| (r.2["bed"].as_str().unwrap().to_owned(), r.1))
        .collect();
    actions.sort();
    assert_eq!(
        actions,
        [
            ("bed-1".to_string(), "patient_admitted".to_string()),
            ("bed-2".to_string(), "patient_admitted".to_string()),
            ("bed-2".to_string(), "patient_discharged".to_string()),
        ]
    );
}
