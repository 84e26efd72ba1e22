//! The monitors' own alarms, driven as monitors drive them: a real WebSocket client streams a
//! real record (vfdb 422, of the test part, which the beat counter never learnt from) and sends
//! the monitor's VT alarm a few seconds into an annotated VT run; another bed streams sinus
//! rhythm and sends a VT alarm too, an asystole alarm and a malformed one. Holmes's opinions
//! are read back from the API and from the SQLite file; and, with both links on, from the HL7
//! receiver (the Python `hl7` package's MLLP server, as `tests/hl7_link.rs` starts it), the
//! FHIR server (Medplum, as `tests/fhir_link.rs` starts it) and the ward page in a headless
//! browser (as `tests/dashboard.rs` drives it), the strip the opinion read with them.

mod browser;
mod common;
mod fhir_server;
mod hl7_receiver;

use std::time::Duration;

use common::{Monitor, spawn_app};
use fantoccini::Locator;
use serde_json::{Value, json};

const T0: i64 = 1_700_000_000_000;

/// A stored monitor alarm: bed, id, kind, confirmed, end.
type Row = (String, String, String, Option<bool>, Option<i64>);
const FS: usize = 250;

/// Polls `path` until `pred` holds of its answer (or 30 s pass).
async fn wait_for(app: &common::App, path: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, v) = app.get(path).await;
        if status == 200 && pred(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{path} never answered as expected: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitors_vt_alarm_is_adjudicated_and_read_back_from_the_api_and_the_database() {
    let Some(leads) = common::vfdb_422(
        "a_monitors_vt_alarm_is_adjudicated_and_read_back_from_the_api_and_the_database",
    )
    .await
    else {
        return;
    };
    let leads = &leads;
    // vfdb 422's annotators mark VT from 1335.8 s; the monitor alarms at 1339 s, having
    // streamed the 20 s before.
    let alarm_secs = 1339.0;
    let from = ((alarm_secs - 20.0) * FS as f64) as usize;
    let to = (alarm_secs * FS as f64) as usize;
    let onset_ms = T0 + ((to - from) * 1000 / FS) as i64;

    let app = spawn_app(|_| {}).await;
    let mut vt = Monitor::connect(&app.ws_url(), "bed-vt", "mon-1").await;
    // The alarm may reach Holmes before its last samples do: it waits for them.
    vt.stream_record(T0, leads, from, to - 2 * FS).await;
    vt.send(json!({"type": "alarm", "id": "vt-1", "kind": "VT", "t_ms": onset_ms}))
        .await;
    stream_record_tail(&mut vt, leads, from, to).await;

    let mut sinus = Monitor::connect(&app.ws_url(), "bed-sinus", "mon-2").await;
    sinus.stream(T0, 0..150).await;
    // An alarm, and its end, before the samples up to its onset: the end follows the alarm.
    sinus
        .send(json!({"type": "alarm", "id": "s-4", "kind": "vt", "t_ms": T0 + 19_000}))
        .await;
    sinus
        .send(json!({"type": "alarm_end", "id": "s-4", "t_ms": T0 + 19_400}))
        .await;
    sinus.stream(T0, 150..200).await;
    // An alarm whose samples never come: stored without an opinion, saying why.
    sinus
        .send(json!({"type": "alarm", "id": "s-5", "kind": "vt", "t_ms": T0 + 100_000}))
        .await;
    sinus
        .send(json!({"type": "alarm", "id": "s-1", "kind": "vt", "t_ms": T0 + 19_000}))
        .await;
    sinus
        .send(json!({"type": "alarm", "id": "s-2", "kind": "asystole", "t_ms": T0 + 19_500}))
        .await;
    sinus
        .send(json!({"type": "alarm", "id": "s-3", "kind": "afib", "t_ms": T0 + 19_600}))
        .await;
    let e = sinus.expect(10.0, |v| v["type"] == "error").await;
    assert_eq!(e["code"], "malformed", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("unknown alarm kind"),
        "{e}"
    );

    // The VT bed's alarm: confirmed, with the run it saw.
    let v = wait_for(&app, "/api/beds/bed-vt/monitor_alarms", |v| {
        v["alarms"].as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    let a = &v["alarms"][0];
    assert_eq!(
        (a["id"].clone(), a["kind"].clone()),
        (json!("vt-1"), json!("vt"))
    );
    assert_eq!(a["onset_ms"], json!(onset_ms));
    assert_eq!(a["confirmed"], json!(true), "{a}");
    let reason = a["reason"].as_str().unwrap();
    assert!(reason.contains("ventricular beats at"), "{reason}");
    assert!(reason.contains("on II and V"), "{reason}");
    assert!(a["provenance"]["counter_sha256"].is_string(), "{a}");
    assert!(a["provenance"]["coverage"].as_f64().unwrap() > 0.99, "{a}");
    let took = a["judged_ms"].as_i64().unwrap() - a["received_ms"].as_i64().unwrap();
    assert!(
        (0..=2_000).contains(&took),
        "opinion {took} ms after the alarm"
    );

    // Its end, and the same alarm sent again after a reconnect: one row, ended.
    vt.send(json!({"type": "alarm_end", "id": "vt-1", "t_ms": onset_ms + 8_000}))
        .await;
    drop(vt);
    let mut again = Monitor::connect(&app.ws_url(), "bed-vt", "mon-1").await;
    again
        .send(json!({"type": "alarm", "id": "vt-1", "kind": "vt", "t_ms": onset_ms}))
        .await;
    wait_for(&app, "/api/beds/bed-vt/monitor_alarms", |v| {
        v["alarms"][0]["end_ms"] == json!(onset_ms + 8_000)
    })
    .await;

    // The sinus bed's: the VT alarm doubted, the asystole stored as received.
    let v = wait_for(&app, "/api/monitor_alarms", |v| {
        v["alarms"].as_array().is_some_and(|a| a.len() == 5)
    })
    .await;
    let by_id = |id: &str| {
        v["alarms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {v}"))
    };
    let s1 = by_id("s-1");
    assert_eq!(s1["confirmed"], json!(false), "{s1}");
    assert!(s1["reason"].as_str().unwrap().contains("no run"), "{s1}");
    let s2 = by_id("s-2");
    assert_eq!(
        (s2["confirmed"].clone(), s2["reason"].clone()),
        (Value::Null, Value::Null)
    );
    let s4 = by_id("s-4");
    assert_eq!(s4["end_ms"], json!(T0 + 19_400), "{s4}");
    assert_eq!(s4["confirmed"], json!(false), "{s4}");
    let s5 = by_id("s-5");
    assert_eq!(s5["confirmed"], Value::Null, "{s5}");
    assert!(
        s5["provenance"]["not_judged"]
            .as_str()
            .is_some_and(|w| w.contains("arrived")),
        "{s5}"
    );

    // The same rows in the database file.
    let db = rusqlite::Connection::open(app.dir.path().join("holmes.db")).unwrap();
    let rows: Vec<Row> = db
        .prepare(
            "SELECT bed, alarm_id, kind, confirmed, end_ms FROM monitor_alarms ORDER BY bed, alarm_id",
        )
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        [
            (
                "bed-sinus".into(),
                "s-1".into(),
                "vt".into(),
                Some(false),
                None
            ),
            (
                "bed-sinus".into(),
                "s-2".into(),
                "asystole".into(),
                None,
                None
            ),
            (
                "bed-sinus".into(),
                "s-4".into(),
                "vt".into(),
                Some(false),
                Some(T0 + 19_400)
            ),
            ("bed-sinus".into(), "s-5".into(), "vt".into(), None, None),
            (
                "bed-vt".into(),
                "vt-1".into(),
                "vt".into(),
                Some(true),
                Some(onset_ms + 8_000)
            ),
        ]
    );
    app.stop().await;
}

/// The last two seconds of [`Monitor::stream_record`]'s span, continuing its sequence numbers.
async fn stream_record_tail(m: &mut Monitor, leads: &[Vec<f32>], from: usize, to: usize) {
    let first = to - 2 * FS;
    for start in (first..to).step_by(25) {
        let seq = (start - from) / 25;
        let end = (start + 25).min(to);
        let frame = json!({"type": "samples", "seq": seq, "t_ms": T0 + seq as i64 * 100,
            "leads": {"II": &leads[0][start..end], "V": &leads[1][start..end]}});
        m.send(frame).await;
    }
}

/// The FHIR server's bearer token in [`a_monitors_alarm_and_holmess_opinion_go_out_and_onto_the_page`].
const TOKEN: &str = "s3cret-test-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitors_alarm_and_holmess_opinion_go_out_and_onto_the_page() {
    let test = "a_monitors_alarm_and_holmess_opinion_go_out_and_onto_the_page";
    if !hl7_receiver::hl7_available(test)
        || !fhir_server::fhir_available(test)
        || !browser::browser_available(test)
    {
        return;
    }
    let Some(leads) = common::vfdb_422(test).await else {
        return;
    };
    let leads = &leads;
    let alarm_secs = 1339.0;
    let from = ((alarm_secs - 20.0) * FS as f64) as usize;
    let to = (alarm_secs * FS as f64) as usize;
    let onset_ms = T0 + ((to - from) * 1000 / FS) as i64;

    let hl7_dir = tempfile::tempdir().unwrap();
    let hl7 = hl7_receiver::Peer::start(hl7_dir.path(), 0, "aa");
    let fhir_dir = tempfile::tempdir().unwrap();
    let fhir = fhir_server::Peer::start(fhir_dir.path(), 0, "ok", Some(TOKEN));
    let token_file = fhir_dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let (port, base) = (hl7.port, fhir.base_url());
    let app = spawn_app(move |c| {
        hl7_receiver::hl7_config(c, port);
        fhir_server::fhir_config(c, base);
        c.fhir.token_file = token_file.display().to_string();
        // Reports every second are enough here; the risk alarm is the ward's usual one.
        c.hl7.cadence_secs = 5.0;
        c.fhir.cadence_secs = 5.0;
        let usual = holmes::config::Config::default().dashboard;
        c.dashboard.risk_alarm_on = usual.risk_alarm_on;
        c.dashboard.risk_alarm_off = usual.risk_alarm_off;
        c.dashboard.derive_risk_alarm = usual.derive_risk_alarm;
    })
    .await;

    // The VT bed's monitor alarms a few seconds into a VT run; the sinus bed's raises an
    // asystole alarm, which Holmes does not judge, and ends it.
    let mut vt = Monitor::connect(&app.ws_url(), "bed-vt", "mon-1").await;
    vt.stream_record(T0, leads, from, to).await;
    vt.send(json!({"type": "alarm", "id": "vt-1", "kind": "vt", "t_ms": onset_ms}))
        .await;
    let mut sinus = Monitor::connect(&app.ws_url(), "bed-sinus", "mon-2").await;
    sinus.stream(T0, 0..150).await;
    sinus
        .send(json!({"type": "alarm", "id": "as-1", "kind": "asystole", "t_ms": T0 + 14_000}))
        .await;
    sinus
        .send(json!({"type": "alarm_end", "id": "as-1", "t_ms": T0 + 14_500}))
        .await;

    // The API: the opinion, and the strip it read.
    let v = wait_for(&app, "/api/beds/bed-vt/monitor_alarms", |v| {
        v["alarms"].as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    let a = v["alarms"][0].clone();
    assert_eq!(a["confirmed"], json!(true), "{a}");
    let reason = a["reason"].as_str().unwrap().to_owned();
    let probability = a["probability"].as_f64().unwrap();
    let key = a["key"].as_i64().unwrap();
    let (status, s) = app.get(&format!("/api/monitor_alarms/{key}/strip")).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["bed"], "bed-vt");
    assert_eq!(s["strip"]["end_ms"], json!(onset_ms));
    assert_eq!(s["strip"]["names"], json!(["II", "V"]));
    let ii = s["strip"]["leads"][0].as_array().unwrap();
    assert_eq!(ii.len(), 16 * FS, "the 16 s before the onset");
    // What the monitor sent up to the onset, to the microvolt.
    let sent = &leads[0][to - 16 * FS..to];
    let off = ii
        .iter()
        .zip(sent)
        .filter(|(a, b)| (a.as_f64().unwrap() - f64::from(**b)).abs() > 1e-3)
        .count();
    assert_eq!(
        off, 0,
        "samples of the strip that are not what the monitor sent"
    );
    let sinus_alarms = wait_for(&app, "/api/beds/bed-sinus/monitor_alarms", |v| {
        v["alarms"][0]["end_ms"] == json!(T0 + 14_500)
    })
    .await;
    let as_key = sinus_alarms["alarms"][0]["key"].as_i64().unwrap();
    let (status, _) = app
        .get(&format!("/api/monitor_alarms/{as_key}/strip"))
        .await;
    assert_eq!(status, 404, "a kind not judged keeps no strip");

    // The HL7 receiver: a PCD-04 report of the monitor's VT alarm, Holmes's opinion in it.
    let start = hl7
        .wait(30.0, "the monitor's VT alarm", |m| {
            m.is_alarm("199832^MDC_EVT_ECG_V_TACHY^MDC", "start")
        })
        .await;
    assert_eq!(start.bed(), "bed-vt");
    assert_eq!(start.get("OBR", 0, 3), "vt-1^bed-vt");
    assert_eq!(start.get("OBR", 0, 4), "196616^MDC_EVT_ALARM^MDC");
    assert_eq!(start.facet(1), "vt");
    assert_eq!(start.facet(8), "confirmed");
    let p: f64 = start.facet(9).parse().unwrap();
    assert!((p - probability).abs() < 5e-4, "{p} against {probability}");
    assert_eq!(start.facet(10), reason);
    let [sub, _, _, _, _] = start.obx("HOLMES-OPINION^").unwrap();
    assert_eq!(sub, "1.1.1.1.8");
    // The asystole alarm as received, and its end: no opinion.
    let asystole = hl7
        .wait(30.0, "the asystole alarm's end", |m| {
            m.is_alarm("199684^MDC_EVT_ECG_ASYSTOLE^MDC", "end")
        })
        .await;
    assert_eq!(asystole.bed(), "bed-sinus");
    assert_eq!(asystole.get("OBR", 0, 3), "as-1^bed-sinus");
    assert!(
        asystole.obx("HOLMES-OPINION^").is_none(),
        "{}",
        asystole.text
    );
    assert!(
        hl7.received()
            .iter()
            .any(|m| m.is_alarm("199684^MDC_EVT_ECG_ASYSTOLE^MDC", "start"))
    );

    // The FHIR server: the alarm's start, and the opinion focused on it.
    let t = Some(TOKEN);
    let alarm = fhir
        .wait_found(t, 30.0, "urn:iso:std:iso:11073:10101|199832", |_| true)
        .await;
    assert_eq!(
        fhir_server::identifier(&alarm),
        format!("bed-vt/monitor-alarm/vt-1/start/{onset_ms}")
    );
    assert_eq!(
        fhir_server::component(&alarm, "HOLMES-MONITOR-ALARM-ID").as_deref(),
        Some("vt-1")
    );
    let opinion = fhir
        .wait_found(t, 30.0, "urn:holmes:fhir:codes|HOLMES-OPINION", |_| true)
        .await;
    assert_eq!(opinion["focus"][0]["identifier"], alarm["identifier"][0]);
    assert_eq!(
        opinion["valueCodeableConcept"]["coding"][0]["code"],
        "confirmed"
    );
    assert_eq!(
        fhir_server::component(&opinion, "HOLMES-OPINION-REASON").as_deref(),
        Some(reason.as_str())
    );
    assert_eq!(opinion["extension"][0]["valueString"], "bed-vt");

    // The monitor ends its alarm: the end goes out over both links.
    vt.send(json!({"type": "alarm_end", "id": "vt-1", "t_ms": onset_ms + 8_000}))
        .await;
    let end = hl7
        .wait(30.0, "the VT alarm's end", |m| {
            m.is_alarm("199832^MDC_EVT_ECG_V_TACHY^MDC", "end")
        })
        .await;
    assert_eq!(end.get("OBR", 0, 3), "vt-1^bed-vt");
    assert_eq!(end.facet(8), "confirmed");
    fhir.wait_found(t, 30.0, "urn:iso:std:iso:11073:10101|199832", |r| {
        fhir_server::component(r, "68481").as_deref() == Some("end")
    })
    .await;

    // SQLite: the row with its strip, and each phase queued once on each link.
    let db = rusqlite::Connection::open(app.dir.path().join("holmes.db")).unwrap();
    let strip: Option<String> = db
        .query_row(
            "SELECT strip FROM monitor_alarms WHERE id = ?1",
            [key],
            |r| r.get(0),
        )
        .unwrap();
    assert!(strip.is_some_and(|s| s.contains("\"names\":[\"II\",\"V\"]")));
    for table in ["hl7_outbox", "fhir_outbox"] {
        let phases: Vec<String> = db
            .prepare(&format!(
                "SELECT phase FROM {table} WHERE kind = 'monitor_alarm' AND alarm_id = ?1 ORDER BY id"
            ))
            .unwrap()
            .query_map([key], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // FHIR: the start's alarm and opinion resources, then the end's.
        let want: &[&str] = if table == "hl7_outbox" {
            &["start", "end"]
        } else {
            &["start", "start", "end"]
        };
        assert_eq!(phases, want, "{table}");
    }

    // The page: each tile shows its monitor's alarm as received, and Holmes's opinion.
    let (_driver, c) = browser::browser().await;
    let page = format!("http://{}/", app.addr);
    c.goto(&page).await.unwrap();
    let tile = ".tile[data-bed='bed-vt'] .monitor-alarm";
    let shown = browser::until(30, "the VT alarm and its opinion on the tile", || async {
        browser::text(&c, tile)
            .await
            .filter(|t| t.contains("Monitor VT") && t.contains("confirmed") && t.contains(&reason))
    })
    .await;
    assert!(
        shown.contains(&format!("{}%", (probability * 100.0).round())),
        "{shown}"
    );
    assert!(shown.contains("ended"), "{shown}");
    browser::until(30, "the asystole alarm as received", || async {
        browser::text(&c, ".tile[data-bed='bed-sinus'] .monitor-alarm")
            .await
            .filter(|t| t.contains("Monitor asystole") && t.contains("received, not judged"))
    })
    .await;
    // The bed view: the alarm, its opinion and the strip it read, marked at the onset.
    c.goto(&format!("{page}#/bed/bed-vt")).await.unwrap();
    browser::until(30, "the opinion in the bed view", || async {
        browser::text(&c, "#bed-monitor-alarms .monitor-alarm")
            .await
            .filter(|t| t.contains("confirmed") && t.contains(&reason))
    })
    .await;
    browser::until(
        30,
        "the strip of both leads, marked at the onset",
        || async {
            let strips = c
                .find_all(Locator::Css(&format!(
                    "#bed-monitor-alarms canvas[data-monitor-alarm-strip='{key}']"
                )))
                .await
                .ok()?;
            let mut marks = Vec::new();
            for s in &strips {
                marks.push(s.attr("data-alarm-mark").await.ok()??);
            }
            (marks == ["inside", "inside"]).then_some(())
        },
    )
    .await;
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("monitor_alarms");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("bed.png"), c.screenshot().await.unwrap()).unwrap();
    c.close().await.unwrap();
    app.stop().await;
}
