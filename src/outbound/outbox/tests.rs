//! The outbox's tests: order, ids across a restart, parking, storage faults, and the monitors'
//! alarms queued once each and found in the store when the feed missed them.
use super::*;
use crate::config::Hl7Config;
use crate::outbound::hl7_spec;
use crate::outbound::message::Observation;

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    let mut c = crate::serving::store::open(&path).unwrap();
    crate::serving::store::migrate(&mut c, &path, &crate::outbound::TEST_SCHEMA).unwrap();
    (dir, path)
}

fn obs(bed: &str) -> Draft {
    Draft::Observation(Observation {
        bed: bed.into(),
        at_ms: 1,
        score: Some(0.5),
        heart_rate_bpm: None,
        risk_alarm: false,
        quality: "scored",
        patient: None,
    })
}

fn alarm(id: i64, phase: Phase) -> Draft {
    Draft::Alarm(AlarmReport {
        alarm_id: id,
        bed: "b1".into(),
        kind: AlarmKind::Risk,
        phase,
        raised_ms: 5,
        at_ms: 5,
        inactivation: "enabled",
        patient: None,
    })
}

#[tokio::test]
async fn messages_leave_in_order_and_survive_a_restart_with_their_ids() {
    let (_d, path) = setup();
    let cfg = Hl7Config::default();
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(tokio::sync::Notify::new());
    let (ob, th) = start(
        hl7_spec(&cfg),
        &Db::open(&path, &crate::outbound::TEST_SCHEMA).unwrap(),
        &Default::default(),
        status.clone(),
        wake.clone(),
    )
    .unwrap();
    ob.enqueue(obs("b1")).await;
    ob.enqueue(alarm(1, Phase::Start)).await;
    ob.enqueue(obs("b2")).await;
    let first = ob.next().await.unwrap();
    assert!(first.observation && first.body.contains("|ORU^R01^ORU_R01|1|"));
    ob.tell(Cmd::Sent(first.id)).await;
    assert!(
        ob.finish(Final::Acked {
            id: first.id,
            code: "AA".into(),
        })
        .await
    );
    let second = ob.next().await.unwrap();
    assert_eq!(second.id, 2);
    ob.finish(Final::Parked {
        id: 2,
        code: "AE".into(),
        reason: "no such bed".into(),
    })
    .await;
    assert_eq!(ob.next().await.unwrap().id, 3);
    assert_eq!(status.backlog.load(Ordering::Relaxed), 1);
    assert_eq!(status.parked.load(Ordering::Relaxed), 1);
    drop(ob);
    th.join().unwrap();
    // A new run: the pending message keeps its id and body; the alarm that started and
    // never ended gets its end queued behind it; a new message gets a fresh id.
    let status = Arc::new(LinkStatus::default());
    let c = crate::serving::store::open(&path).unwrap();
    c.execute(
        "INSERT INTO alarms (id, bed, kind, raised_ms, cleared_ms) VALUES (1, 'b1', 'risk', 5, 9)",
        [],
    )
    .unwrap();
    // The bed's patient as the store kept it from the earlier run: the end names it.
    let admitted = Admissions::default();
    admitted.set(
        "b1",
        Some(crate::core::patient::Patient {
            id: "MRN-1".into(),
            authority: "HOSP".into(),
        }),
    );
    let (ob, th) = start(
        hl7_spec(&cfg),
        &Db::open(&path, &crate::outbound::TEST_SCHEMA).unwrap(),
        &admitted,
        status.clone(),
        wake,
    )
    .unwrap();
    assert_eq!(status.backlog.load(Ordering::Relaxed), 2);
    assert_eq!(status.parked.load(Ordering::Relaxed), 1);
    let p = ob.next().await.unwrap();
    assert_eq!(p.id, 3);
    ob.finish(Final::Expired(3)).await;
    let end = ob.next().await.unwrap();
    assert_eq!(end.id, 4);
    assert!(end.body.contains("|end|") && end.body.contains("|ORU^R40^ORU_R40|4|"));
    assert!(
        end.body.contains("\rPID|1||MRN-1^^^HOSP^MR\r"),
        "{}",
        end.body
    );
    assert_eq!(status.dropped_observations.load(Ordering::Relaxed), 1);
    let audit: String = c
        .query_row(
            "SELECT detail FROM audit WHERE action = 'hl7_message_parked'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        audit.contains("no such bed") && audit.contains("\"control_id\":\"2\""),
        "{audit}"
    );
    drop(ob);
    th.join().unwrap();
}

#[tokio::test]
async fn a_message_longer_than_max_frame_bytes_is_parked_not_queued() {
    let (_d, path) = setup();
    // Below validate's minimum, so that a default report is too long.
    let cfg = Hl7Config {
        max_frame_bytes: 200,
        ..Hl7Config::default()
    };
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(tokio::sync::Notify::new());
    let (ob, th) = start(
        hl7_spec(&cfg),
        &Db::open(&path, &crate::outbound::TEST_SCHEMA).unwrap(),
        &Default::default(),
        status.clone(),
        wake,
    )
    .unwrap();
    ob.enqueue(alarm(1, Phase::Start)).await;
    assert_eq!(ob.next().await, None, "nothing is left to block the queue");
    assert_eq!(status.backlog.load(Ordering::Relaxed), 0);
    assert_eq!(status.parked.load(Ordering::Relaxed), 1);
    drop(ob);
    th.join().unwrap();
    let c = crate::serving::store::open(&path).unwrap();
    let (state, reason): (String, String) = c
        .query_row("SELECT state, reason FROM hl7_outbox", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((state.as_str(), reason.as_str()), ("parked", TOO_LONG));
}

/// Polls `cond` for up to ten seconds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(10), "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_batch_the_database_refuses_is_held_and_written_once_it_recovers() {
    let (_d, path) = setup();
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(tokio::sync::Notify::new());
    let (ob, th) = start(
        hl7_spec(&Hl7Config::default()),
        &Db::open(&path, &crate::outbound::TEST_SCHEMA).unwrap(),
        &Default::default(),
        status.clone(),
        wake,
    )
    .unwrap();
    let c = crate::serving::store::open(&path).unwrap();
    c.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON hl7_outbox
         BEGIN SELECT RAISE(FAIL, 'disk full (test)'); END;",
    )
    .unwrap();
    for bed in ["b1", "b2", "b3"] {
        ob.enqueue(obs(bed)).await;
    }
    until("the failure shown", || {
        status
            .last_error
            .lock()
            .unwrap()
            .as_deref()
            .is_some_and(|e| e.contains("disk full (test)"))
    })
    .await;
    assert_eq!(ob.next().await, None, "nothing written yet");
    ob.enqueue(alarm(1, Phase::Start)).await;
    c.execute_batch("DROP TRIGGER refuse;").unwrap();
    until("the held drafts written", || {
        status.backlog.load(Ordering::Relaxed) == 4
    })
    .await;
    let mut beds = Vec::new();
    while let Some(p) = ob.next().await {
        let bed: String = c
            .query_row(
                "SELECT bed || ':' || kind FROM hl7_outbox WHERE id = ?1",
                [p.id],
                |r| r.get(0),
            )
            .unwrap();
        beds.push(bed);
        assert!(
            ob.finish(Final::Acked {
                id: p.id,
                code: "AA".into()
            })
            .await
        );
    }
    assert_eq!(
        beds,
        [
            "b1:observation",
            "b2:observation",
            "b3:observation",
            "b1:alarm"
        ],
        "nothing lost, in order"
    );
    drop(ob);
    th.join().unwrap();
}

#[tokio::test]
async fn a_final_state_the_database_refuses_is_answered_so_and_the_message_stays_pending() {
    let (_d, path) = setup();
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(tokio::sync::Notify::new());
    let (ob, th) = start(
        hl7_spec(&Hl7Config::default()),
        &Db::open(&path, &crate::outbound::TEST_SCHEMA).unwrap(),
        &Default::default(),
        status.clone(),
        wake,
    )
    .unwrap();
    ob.enqueue(obs("b1")).await;
    let p = ob.next().await.unwrap();
    let c = crate::serving::store::open(&path).unwrap();
    c.execute_batch(
        "CREATE TRIGGER refuse BEFORE UPDATE ON hl7_outbox
         BEGIN SELECT RAISE(FAIL, 'disk full (test)'); END;",
    )
    .unwrap();
    let acked = Final::Acked {
        id: p.id,
        code: "AA".into(),
    };
    assert!(!ob.finish(acked.clone()).await, "the failure is answered");
    assert_eq!(ob.next().await.map(|q| q.id), Some(p.id), "still pending");
    assert_eq!(status.backlog.load(Ordering::Relaxed), 1);
    c.execute_batch("DROP TRIGGER refuse;").unwrap();
    assert!(ob.finish(acked).await);
    assert_eq!(ob.next().await, None);
    drop(ob);
    th.join().unwrap();
}

#[test]
fn pruned_parked_observations_leave_the_parked_count_and_fhir_drafts_make_a_row_per_resource() {
    let (_d, path) = setup();
    let cfg = crate::config::FhirConfig::default();
    let status = Arc::new(LinkStatus::default());
    let mut st = State {
        db: Db::open(&path, &crate::outbound::TEST_SCHEMA).unwrap(),
        spec: crate::outbound::fhir::spec(&cfg),
        status: status.clone(),
        wake: Arc::new(tokio::sync::Notify::new()),
        audit: AuditLog::new(&Db::open(&path, &crate::outbound::TEST_SCHEMA).unwrap()),
        pruned: Instant::now(),
        admissions: Admissions::default(),
    };
    let with_hr = Draft::Observation(Observation {
        heart_rate_bpm: Some(70.0),
        ..match obs("b1") {
            Draft::Observation(o) => o,
            _ => unreachable!(),
        }
    });
    st.insert(&[with_hr, alarm(1, Phase::Start)]).unwrap();
    assert_eq!(
        status.backlog.load(Ordering::Relaxed),
        3,
        "risk, heart rate, alarm"
    );
    let first = st.oldest().unwrap().unwrap();
    assert!(first.body.contains("\"HOLMES-RISK\"") && first.observation);
    st.finish_as(Final::Parked {
        id: first.id,
        code: "400".into(),
        reason: "HTTP 400: invalid".into(),
    })
    .unwrap();
    assert_eq!(status.parked.load(Ordering::Relaxed), 1);
    let audit: String = st
        .db
        .lock()
        .query_row(
            "SELECT detail FROM audit WHERE action = 'fhir_resource_parked'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(audit.contains("\"outbox_id\":\"1\""), "{audit}");
    // Past keep_sent_hours the parked observation is deleted, and no longer counted.
    st.db
        .lock()
        .execute(
            "UPDATE fhir_outbox SET done_ms = 0 WHERE id = ?1",
            [first.id],
        )
        .unwrap();
    st.prune().unwrap();
    assert_eq!(status.parked.load(Ordering::Relaxed), 0);
    assert_eq!(status.backlog.load(Ordering::Relaxed), 2);
}

/// A monitor alarm's row in the store, received `received_ms`; its key.
fn stored_monitor_alarm(
    c: &rusqlite::Connection,
    id: &str,
    kind: &str,
    received_ms: i64,
    end_ms: Option<i64>,
) -> i64 {
    c.execute(
        "INSERT INTO monitor_alarms (bed, alarm_id, kind, onset_ms, received_ms, end_ms,
            confirmed, probability, reason, judged_ms, provenance)
         VALUES ('b1', ?1, ?2, 1000, ?3, ?4, ?5, ?6, ?7, ?8, '{}')",
        rusqlite::params![
            id,
            kind,
            received_ms,
            end_ms,
            (kind == "vt").then_some(true),
            (kind == "vt").then_some(0.9),
            (kind == "vt").then_some("6 ventricular beats at 170/min on II"),
            (kind == "vt").then_some(received_ms + 300),
        ],
    )
    .unwrap();
    c.last_insert_rowid()
}

/// The bodies of the pending messages, oldest first, each acknowledged as it is read.
async fn drain(ob: &Outbox) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(p) = ob.next().await {
        ob.finish(Final::Acked {
            id: p.id,
            code: "AA".into(),
        })
        .await;
        out.push(p.body);
    }
    out
}

#[tokio::test]
async fn a_monitor_alarms_phases_go_once_and_what_the_feed_missed_is_found_in_the_store() {
    let (_d, path) = setup();
    let c = crate::serving::store::open(&path).unwrap();
    let now = now_ms();
    // The run before this one began a minute ago, and its link queued a report; this run
    // began a second ago.
    for at in [now - 60_000, now - 1_000] {
        c.execute(
            "INSERT INTO events (bed, at_ms, kind, detail) VALUES ('server', ?1, 'server_start', '{}')",
            [at],
        )
        .unwrap();
    }
    c.execute(
        "INSERT INTO hl7_outbox (kind, bed, created_ms, body, state) VALUES ('observation', 'b1', ?1, 'x', 'acked')",
        [now - 50_000],
    )
    .unwrap();
    // Before that run: not the link's to send. In it: a VT alarm whose start went out and
    // whose end did not, and an asystole alarm the feed never queued.
    stored_monitor_alarm(&c, "old", "vt", now - 90_000, None);
    let vt = stored_monitor_alarm(&c, "vt-1", "vt", now - 30_000, Some(9_000));
    c.execute(
        "INSERT INTO hl7_outbox (kind, bed, alarm_id, phase, created_ms, body, state)
         VALUES ('monitor_alarm', 'b1', ?1, 'start', ?2, 'x', 'acked')",
        rusqlite::params![vt, now - 29_000],
    )
    .unwrap();
    let asystole = stored_monitor_alarm(&c, "as-1", "asystole", now - 20_000, None);
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(tokio::sync::Notify::new());
    let cfg = Hl7Config::default();
    let (ob, th) = start(
        hl7_spec(&cfg),
        &Db::open(&path, &crate::outbound::TEST_SCHEMA).unwrap(),
        &Default::default(),
        status.clone(),
        wake,
    )
    .unwrap();
    let sent = drain(&ob).await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[0].contains("|vt-1^b1|") && sent[0].contains("|end|"),
        "{}",
        sent[0]
    );
    assert!(
        sent[0].contains("|HOLMES-OPINION^") && sent[0].contains("|confirmed|"),
        "{}",
        sent[0]
    );
    assert!(
        sent[1].contains("|as-1^b1|") && sent[1].contains("|199684^MDC_EVT_ECG_ASYSTOLE^MDC|"),
        "{}",
        sent[1]
    );
    assert!(
        !sent[1].contains("HOLMES-OPINION"),
        "a kind not judged carries no opinion"
    );
    // Handed over again (the feed, after the store): nothing new.
    let rows = crate::serving::store::monitor_alarms::received_since(&c, 0).unwrap();
    let again = rows.iter().find(|a| a.key == asystole).unwrap();
    ob.enqueue(Draft::MonitorAlarm(
        crate::outbound::message::MonitorAlarmReport::of(again, Phase::Start, None),
    ))
    .await;
    assert_eq!(ob.next().await, None);
    // The feed fell behind: this run's alarms it skipped are looked up.
    stored_monitor_alarm(&c, "vt-2", "vt", now, None);
    ob.catch_up().await;
    let sent = drain(&ob).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].contains("|vt-2^b1|") && sent[0].contains("|start|"),
        "{}",
        sent[0]
    );
    drop(ob);
    th.join().unwrap();
    // A link turned on after a run without it sends nothing of that run.
    let (_d2, path2) = setup();
    let c2 = crate::serving::store::open(&path2).unwrap();
    for at in [now - 60_000, now - 1_000] {
        c2.execute(
            "INSERT INTO events (bed, at_ms, kind, detail) VALUES ('server', ?1, 'server_start', '{}')",
            [at],
        )
        .unwrap();
    }
    stored_monitor_alarm(&c2, "vt-1", "vt", now - 30_000, None);
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(tokio::sync::Notify::new());
    let (ob, th) = start(
        hl7_spec(&cfg),
        &Db::open(&path2, &crate::outbound::TEST_SCHEMA).unwrap(),
        &Default::default(),
        status,
        wake,
    )
    .unwrap();
    assert_eq!(ob.next().await, None);
    drop(ob);
    th.join().unwrap();
}
