//! The monitors' own alarms, driven as monitors drive them: a real WebSocket client streams a
//! real record (vfdb 422, of the test part, which the beat counter never learnt from) and sends
//! the monitor's VT alarm a few seconds into an annotated VT run; another bed streams sinus
//! rhythm and sends a VT alarm too, an asystole alarm and a malformed one. Holmes's opinions
//! are read back from the API and from the SQLite file.

mod common;

use std::time::Duration;

use common::{Monitor, spawn_app};
use serde_json::{Value, json};

const T0: i64 = 1_700_000_000_000;

/// A stored monitor alarm: bed, id, kind, confirmed, end.
type Row = (String, String, String, Option<bool>, Option<i64>);
const FS: usize = 250;

/// Sends `leads[..][from..to]` as II and V in frames of 25 samples, 100 ms apart from `T0`.
async fn stream_record(m: &mut Monitor, leads: &[Vec<f32>], from: usize, to: usize) {
    for (seq, start) in (from..to).step_by(25).enumerate() {
        let end = (start + 25).min(to);
        let frame = json!({"type": "samples", "seq": seq, "t_ms": T0 + seq as i64 * 100,
            "leads": {"II": &leads[0][start..end], "V": &leads[1][start..end]}});
        m.send(frame).await;
    }
}

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
    let Some(data) = common::data_dir(
        "a_monitors_vt_alarm_is_adjudicated_and_read_back_from_the_api_and_the_database",
    ) else {
        return;
    };
    let keys = vec![(holmes::training::dataset::Database::Vfdb, "422".to_string())];
    let recs =
        tokio::task::spawn_blocking(move || holmes::training::dataset::load_keys(&data, &keys))
            .await
            .unwrap()
            .unwrap();
    let leads = recs[0].leads();
    // vfdb 422's annotators mark VT from 1335.8 s; the monitor alarms at 1339 s, having
    // streamed the 20 s before.
    let alarm_secs = 1339.0;
    let from = ((alarm_secs - 20.0) * FS as f64) as usize;
    let to = (alarm_secs * FS as f64) as usize;
    let onset_ms = T0 + ((to - from) * 1000 / FS) as i64;

    let app = spawn_app(|_| {}).await;
    let mut vt = Monitor::connect(&app.ws_url(), "bed-vt", "mon-1").await;
    // The alarm may reach Holmes before its last samples do: it waits for them.
    stream_record(&mut vt, leads, from, to - 2 * FS).await;
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

/// The last two seconds of [`stream_record`]'s span, continuing its sequence numbers.
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
