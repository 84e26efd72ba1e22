//! The daemon end to end: a real server on port 0 with a temporary SQLite file, driven by real
//! WebSocket clients, checked through the HTTP API.

mod common;

use std::time::Duration;

use common::{Monitor, close_of, connect_raw, hello, spawn_app};
use holmes::config::Stagger;
use serde_json::json;

const T0: i64 = 1_700_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bed_gets_a_score_every_hop() {
    let app = spawn_app(|_| {}).await;
    let mut mons = Vec::new();
    for b in 1..=3 {
        mons.push(Monitor::connect(&app.ws_url(), &format!("bed-{b}"), &format!("dev-{b}")).await);
    }
    // 95 s of signal per bed, sent faster than real time: windows end on each bed's timeline.
    for m in &mut mons {
        m.stream(T0, 0..950).await;
    }
    for b in 1..=3 {
        let rows = app
            .wait_scores(&format!("bed-{b}"), 60.0, |r| r.len() >= 2)
            .await;
        for r in &rows {
            assert_eq!(r["status"], "scored", "{r}");
            let s = r["score"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&s));
            assert_eq!(
                r["window_end_ms"].as_i64().unwrap() - r["window_start_ms"].as_i64().unwrap(),
                30_000
            );
            let members = r["members"].as_array().unwrap();
            assert_eq!(members.len(), 3);
            assert!(members.iter().all(|m| m["prob"].is_number()), "{r}");
            assert!(r["latency_ms"].as_f64().unwrap() >= 0.0);
        }
        let ends: Vec<i64> = rows
            .iter()
            .map(|r| r["window_end_ms"].as_i64().unwrap())
            .collect();
        let hop_ms = i64::from(holmes::config::Config::default().ward.hop_secs) * 1000;
        assert_eq!(ends[1] - ends[0], hop_ms, "one window per hop");
    }
    // Window phases are spread: the three beds do not share window ends.
    let (_, beds) = app.get("/api/beds").await;
    let ends: std::collections::BTreeSet<i64> = beds["beds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let hop_ms = i64::from(holmes::config::Config::default().ward.hop_secs) * 1000;
            b["latest"]["window_end_ms"].as_i64().unwrap() % hop_ms
        })
        .collect();
    assert_eq!(ends.len(), 3, "{beds}");
    let (status, ready) = app.get("/health/ready").await;
    assert_eq!(status, 200, "{ready}");
    // The three members, and the zoo's beat counter listed after them.
    let (_, models) = app.get("/api/models").await;
    let listed: Vec<&str> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 4, "{models}");
    assert_eq!(listed[3], "beats", "{models}");
    let (_, ens) = app.get("/api/ensemble").await;
    assert_eq!(ens["members"].as_array().unwrap().len(), 3);
    assert!(ens["windows"]["scored"].as_u64().unwrap() >= 6, "{ens}");
    assert!(ens["batches"].as_u64().unwrap() >= 1);
    let metrics = app.get_raw("/metrics").await;
    for name in [
        "holmes_windows_total",
        "holmes_end_to_end_seconds_bucket",
        "holmes_compute_seconds",
        "holmes_batch_size",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    assert!(!metrics.contains("bed-1"), "no bed id in metric labels");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_get_errors_and_lose_no_good_data() {
    // A configured bed alone has phase 0: its first window is [0 s, 30 s).
    let app = spawn_app(|c| c.ward.beds = vec!["bed-x".into()]).await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-x", "dev-x").await;
    m.stream(T0, 0..100).await;
    m.send_text("{not json").await;
    m.expect(5.0, |v| v["type"] == "error" && v["code"] == "malformed")
        .await;
    m.send(json!({"type": "samples", "seq": 100, "t_ms": T0 + 10_000, "leads": {"aVR": [0.1]}}))
        .await;
    m.expect(5.0, |v| v["code"] == "bad_shape" && v["seq"] == 100)
        .await;
    m.send(json!({"type": "samples", "seq": 100, "t_ms": T0 + 10_000, "leads": {"II": [0.1, 0.2], "V": [0.1]}})).await;
    m.expect(5.0, |v| v["code"] == "bad_shape").await;
    // Duplicate of an accepted frame.
    m.stream(T0, 50..51).await;
    m.expect(5.0, |v| v["code"] == "duplicate" && v["seq"] == 50)
        .await;
    // Missing and out-of-range samples are discarded, the rest of the frame is kept.
    let mut x: Vec<serde_json::Value> = (0..25).map(|k| json!(common::signal(2500 + k))).collect();
    x[3] = json!(null);
    x[4] = json!(1.0e6);
    m.send(json!({"type": "samples", "seq": 100, "t_ms": T0 + 10_000, "leads": {"II": x, "V": x}}))
        .await;
    m.expect(5.0, |v| v["code"] == "bad_samples" && v["seq"] == 100)
        .await;
    m.send(hello("bed-x", "dev-x")).await;
    m.expect(5.0, |v| v["code"] == "unexpected_hello").await;
    // The connection still works: the rest of the stream gives a clean first window.
    m.stream(T0, 101..320).await;
    let rows = app.wait_scores("bed-x", 30.0, |r| !r.is_empty()).await;
    assert_eq!(rows[0]["status"], "scored");
    assert!(
        rows[0]["quality"]["gap_samples"].as_u64().unwrap() <= 2,
        "{}",
        rows[0]
    );
    let (_, ev) = app.get("/api/beds/bed-x/events").await;
    assert!(
        ev["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "connected")
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implausible_vitals_are_answered_and_count_as_absent() {
    let app = spawn_app(|c| c.ward.beds = vec!["bed-v".into()]).await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-v", "dev-v").await;
    // 32 s of clean ECG; the heart rate every second is -5 bpm, except 1e300 at 5 s (finite
    // as JSON, not as the f32 it is kept as) and 400 bpm at 6 s.
    for seq in 0..320u64 {
        let x: Vec<f32> = (0..25).map(|k| common::signal(seq * 25 + k)).collect();
        m.send(
            json!({"type": "samples", "seq": seq, "t_ms": T0 + seq as i64 * 100,
                      "leads": {"II": x, "V": x}}),
        )
        .await;
        if seq % 10 == 9 {
            let s = (seq + 1) / 10;
            let hr = match s {
                5 => 1e300,
                6 => 400.0,
                _ => -5.0,
            };
            m.send(
                json!({"type": "vitals", "seq": s, "t_ms": T0 + s as i64 * 1000,
                          "values": [{"name": "hr", "value": hr, "status": []}]}),
            )
            .await;
        }
    }
    for (seq, says) in [
        (1, "hr -5 is outside its plausible range [0, 350]"),
        (5, "hr 1e300 is not a finite number"),
        (6, "hr 400 is outside its plausible range [0, 350]"),
    ] {
        let v = m
            .expect(10.0, |v| v["code"] == "bad_vitals" && v["seq"] == seq)
            .await;
        assert!(v["message"].as_str().unwrap().contains(says), "{v}");
    }
    // The ECG members score the window; the vitals member had no heart rate to read.
    let rows = app.wait_scores("bed-v", 30.0, |r| !r.is_empty()).await;
    let r = &rows[0];
    assert_eq!(r["status"], "scored", "{r}");
    assert_eq!(r["quality"]["hr_coverage"], 0.0, "{r}");
    let members = r["members"].as_array().unwrap();
    let vitals = members
        .iter()
        .find(|m| m["name"] == "vitals-hr-mlp")
        .unwrap();
    assert!(vitals["prob"].is_null(), "{r}");
    assert!(
        members
            .iter()
            .filter(|m| m["name"] != "vitals-hr-mlp")
            .all(|m| m["prob"].is_number()),
        "{r}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fatal_hellos_close_with_documented_codes() {
    let app = spawn_app(|c| {
        c.ward.beds = vec!["known".into()];
        c.ward.admit_unknown_beds = false;
        c.ingest.max_frame_bytes = 4096;
    })
    .await;
    let url = app.ws_url();
    // 4001 (token not accepted) is driven in tests/security.rs.
    assert_eq!(
        close_of(&connect_raw(&url, &hello("stranger", "d1")).await.1).map(|c| c.0),
        Some(4004)
    );
    let mut h = hello("known", "d1");
    h["ecg"][0]["hz"] = json!(500);
    let c = close_of(&connect_raw(&url, &h).await.1).unwrap();
    assert_eq!(c.0, 4000);
    assert!(c.1.contains("500"), "{c:?}");
    let (_, first) = connect_raw(
        &url,
        &json!({"type": "vitals", "seq": 1, "t_ms": 0, "values": []}),
    )
    .await;
    assert_eq!(close_of(&first).map(|c| c.0), Some(4000));

    let mut a = Monitor::connect(&url, "known", "d1").await;
    // Another device may not take the bed...
    assert_eq!(
        close_of(&connect_raw(&url, &hello("known", "d2")).await.1).map(|c| c.0),
        Some(4003)
    );
    // ...the same device reconnecting supersedes its old connection.
    let mut b = Monitor::connect(&url, "known", "d1").await;
    assert_eq!(a.closed(5.0).await.map(|c| c.0), Some(4009));
    // A frame over the size limit closes with 1009.
    let big = "x".repeat(10_000);
    b.send_text(&format!("{{\"type\":\"bye\",\"pad\":\"{big}\"}}"))
        .await;
    assert_eq!(b.closed(5.0).await.map(|c| c.0), Some(1009));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_monitor_is_closed_after_the_idle_time_and_a_streaming_one_never() {
    let app = spawn_app(|c| c.ingest.idle_timeout_secs = 1.5).await;
    let url = app.ws_url();
    let mut quiet = Monitor::connect(&url, "quiet", "d1").await;
    let mut busy = Monitor::connect(&url, "busy", "d2").await;
    quiet.stream(T0, 0..3).await;
    // The busy monitor streams in real time for twice the idle time (the server's idle
    // timer fires once meanwhile and is moved on), the quiet one stays silent.
    let started = tokio::time::Instant::now();
    busy.stream_live(T0, 0..30).await;
    assert_eq!(
        quiet.closed(1.0).await,
        Some((4010, "nothing received for 1.5 s".into()))
    );
    assert!(started.elapsed() >= Duration::from_millis(2_900));
    // Still open: a frame a second after the last is acknowledged.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    busy.stream(T0, 30..31).await;
    busy.expect(5.0, |v| v["type"] == "ack" && v["samples_seq"] == 30)
        .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_mid_window_keeps_the_window_and_bed_goes_stale_then_lost() {
    let app = spawn_app(|c| {
        c.ward.beds = vec!["bed-r".into()];
        c.ward.stale_secs = 0.5;
        c.ward.lost_secs = 1.5;
    })
    .await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-r", "dev-r").await;
    m.stream(T0, 0..150).await; // 15 s, half a window
    m.expect(5.0, |v| v["type"] == "ack").await;
    drop(m);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-r", "dev-r").await;
    let next = m.welcome["next_samples_seq"].as_u64().unwrap();
    assert_eq!(next, 150, "the bed kept its buffer: {}", m.welcome);
    m.stream(T0, next..320).await;
    let rows = app.wait_scores("bed-r", 30.0, |r| !r.is_empty()).await;
    assert_eq!(rows[0]["status"], "scored");
    assert_eq!(rows[0]["quality"]["gap_samples"], 0);
    // Silence: live, then stale, then lost.
    m.send(json!({"type": "bye"})).await;
    drop(m);
    let status = || async {
        let (_, v) = app.get("/api/beds").await;
        v["beds"][0]["status"].as_str().unwrap_or("").to_owned()
    };
    // Polled, not slept: a loaded machine may answer late, but the order must hold.
    let mut seen = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while seen.last().map(String::as_str) != Some("lost") && std::time::Instant::now() < until {
        let s = status().await;
        if seen.last() != Some(&s) {
            seen.push(s);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let from_stale: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .skip_while(|s| *s == "live")
        .collect();
    assert_eq!(from_stale, ["stale", "lost"], "statuses seen: {seen:?}");
    let (code, _) = app.get("/api/beds/nobody/scores").await;
    assert_eq!(code, 404);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_frames_are_scored_like_json() {
    use futures_util::SinkExt;
    use holmes::protocol::{BinarySamples, encode_binary};
    use tokio_tungstenite::tungstenite::Message;
    let app = spawn_app(|c| c.ward.beds = vec!["bed-b".into()]).await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-b", "dev-b").await;
    for seq in 0..320u64 {
        let x: Vec<Option<f32>> = (0..25)
            .map(|k| Some(common::signal(seq * 25 + k)))
            .collect();
        let v = x.iter().map(|s| s.map(|s| -0.5 * s)).collect();
        let f = BinarySamples {
            seq,
            t_ms: T0 + seq as i64 * 100,
            leads: vec![x, v],
            lead_off: vec![false, false],
        };
        m.ws.send(Message::Binary(encode_binary(&f).into()))
            .await
            .unwrap();
    }
    m.ws.send(Message::Binary(vec![0xEC, 1, 0].into()))
        .await
        .unwrap();
    m.expect(5.0, |v| {
        v["code"] == "malformed" && v["message"].as_str().unwrap().contains("header")
    })
    .await;
    let rows = app.wait_scores("bed-b", 30.0, |r| !r.is_empty()).await;
    assert_eq!(rows[0]["status"], "scored");
    assert_eq!(rows[0]["quality"]["gap_samples"], 0);
    // No heart rate was sent: the vitals member sits out, the ECG members score.
    let probs: Vec<bool> = rows[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["prob"].is_number())
        .collect();
    assert_eq!(probs, vec![true, true, false], "{}", rows[0]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gaps_late_frames_and_lead_off_are_recorded() {
    // A 30-s hop: frame 200 (at 20 s) is then in no window after the first, so once that
    // one closed it is too late (at a shorter hop the next window would still take it).
    let app = spawn_app(|c| {
        c.ward.beds = vec!["bed-g".into()];
        c.ward.hop_secs = 30;
    })
    .await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-g", "dev-g").await;
    m.stream(T0, 0..100).await;
    m.stream(T0, 105..150).await; // frames 100..105 are missing for now
    m.stream(T0, 100..105).await; // ...and arrive late, filling the hole
    for seq in 150..170u64 {
        let x: Vec<f32> = (0..25).map(|k| common::signal(seq * 25 + k)).collect();
        m.send(
            json!({"type": "samples", "seq": seq, "t_ms": T0 + seq as i64 * 100,
                      "leads": {"II": x, "V": x}, "lead_off": ["V"]}),
        )
        .await;
    }
    m.stream(T0, 170..200).await;
    m.stream(T0, 201..320).await; // frame 200 never comes (in time)
    let rows = app.wait_scores("bed-g", 30.0, |r| !r.is_empty()).await;
    let q = &rows[0]["quality"];
    assert_eq!(
        q["gap_samples"], 25,
        "frames 100-104 filled their hole, 200 is a gap: {q}"
    );
    assert_eq!(q["leads"][1]["lead_off_secs"], 2.0, "{q}");
    assert_eq!(q["leads"][0]["lead_off_secs"], 0.0, "{q}");
    // Frame 200 arriving after its window closed is too late; a resent frame is a duplicate.
    m.stream(T0, 200..201).await;
    m.expect(5.0, |v| v["code"] == "too_late" && v["seq"] == 200)
        .await;
    m.stream(T0, 7..8).await;
    m.expect(5.0, |v| v["code"] == "duplicate" && v["seq"] == 7)
        .await;
    let (_, ev) = app.get("/api/beds/bed-g/events").await;
    assert!(
        ev["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "gap"),
        "{ev}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_is_readable_after_a_restart_before_the_monitor_returns() {
    let keep = tempfile::tempdir().unwrap();
    let db = keep.path().join("holmes.db");
    let db1 = db.clone();
    // Unstaggered (phase 0): the bed's windows end at 30 s and every hop after.
    let app = spawn_app(move |c| {
        c.storage.db = db1;
        c.ward.stagger = Stagger::Off;
    })
    .await;
    // The bed is admitted with a patient in its monitor's hello; /api/beds names them.
    let mrn = json!({"id": "MRN-00417", "authority": "urn:oid:1.2.840.99.7"});
    let mut h = hello("dur-2", "dev-d");
    h["patient"] = mrn.clone();
    let mut m = Monitor::connect_with(&app.ws_url(), &h).await;
    m.stream(T0, 0..950).await;
    // Every window of the 95 s streamed, so that none lands after `before` is read.
    let ward = holmes::config::Config::default().ward;
    let all = ((95 - ward.window_secs) / ward.hop_secs + 1) as usize;
    let before = app.wait_scores("dur-2", 60.0, |r| r.len() >= all).await;
    let (_, beds) = app.get("/api/beds").await;
    assert_eq!(beds["beds"][0]["patient"], mrn, "{beds}");
    drop(m);
    app.stop().await;

    // A new daemon on the same database; the monitor has not reconnected.
    let app = spawn_app(move |c| {
        c.storage.db = db;
        c.ward.stagger = Stagger::Off;
    })
    .await;
    let (status, beds) = app.get("/api/beds").await;
    assert_eq!(status, 200, "{beds}");
    let listed = beds["beds"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{beds}");
    assert_eq!(listed[0]["bed"], "dur-2");
    assert_eq!(listed[0]["status"], "lost", "{beds}");
    assert_eq!(listed[0]["connected"], false, "{beds}");
    // The patient outlives the restart.
    assert_eq!(listed[0]["patient"], mrn, "{beds}");
    assert_eq!(
        listed[0]["latest"]["window_end_ms"],
        before.last().unwrap()["window_end_ms"],
        "{beds}"
    );
    let (status, v) = app.get("/api/beds/dur-2/scores").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["scores"].as_array().unwrap().len(), before.len(), "{v}");
    let (status, v) = app.get("/api/beds/dur-2/events").await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "connected"),
        "{v}"
    );
    // A bed the database never saw is still unknown.
    let (status, v) = app.get("/api/beds/never-seen/scores").await;
    assert_eq!(status, 404, "{v}");
    // When the monitor returns, the bed is the ward's again: live, one entry; its hello
    // names no patient, so the bed has none any more.
    let mut m = Monitor::connect(&app.ws_url(), "dur-2", "dev-d").await;
    m.stream(T0 + 95_000, 0..10).await;
    let (_, beds) = app.get("/api/beds").await;
    let listed = beds["beds"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{beds}");
    assert_eq!(listed[0]["connected"], true, "{beds}");
    assert_eq!(listed[0]["patient"], serde_json::Value::Null, "{beds}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wall_clock_stagger_spreads_beds_whose_monitors_started_apart() {
    // Two configured beds: slots 0 and half the 2-s hop on the daemon's clock. Their monitors
    // start 0.5 s apart and stream in real time, each stamping its frames with the wall clock.
    let app = spawn_app(|c| {
        c.ward.stagger = Stagger::WallClock;
        c.ward.beds = vec!["slot-a".into(), "slot-b".into()];
        (c.ward.window_secs, c.ward.hop_secs) = (5, 2);
        c.ensemble.members = vec!["ecg-primary-5s-w8-d2".into()];
    })
    .await;
    let url = app.ws_url();
    let mut monitors = Vec::new();
    for (k, bed) in ["slot-a", "slot-b"].into_iter().enumerate() {
        let url = url.clone();
        monitors.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500 * k as u64)).await;
            let mut m = Monitor::connect(&url, bed, &format!("dev-{bed}")).await;
            let t0 = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            m.stream_live(t0, 0..90).await;
            m
        }));
    }
    let mut kept = Vec::new();
    for m in monitors {
        kept.push(m.await.unwrap());
    }
    let ends = |rows: Vec<serde_json::Value>| -> Vec<i64> {
        let mut e: Vec<i64> = rows
            .iter()
            .map(|r| r["window_end_ms"].as_i64().unwrap())
            .collect();
        e.sort();
        e
    };
    let a = ends(app.wait_scores("slot-a", 30.0, |r| r.len() >= 2).await);
    let b = ends(app.wait_scores("slot-b", 30.0, |r| r.len() >= 2).await);
    // Each bed's windows end a hop apart, and the beds' half a hop apart on the wall clock
    // (give or take the sending's jitter). Placed on each bed's own timeline instead, they
    // would be 1.5 s apart, as the monitors' start.
    for w in [&a, &b] {
        assert!(w.windows(2).all(|p| p[1] - p[0] == 2000), "{a:?} {b:?}");
    }
    let apart = (b[0] - a[0]).rem_euclid(2000);
    assert!((apart - 1000).abs() < 150, "{apart} ms apart: {a:?} {b:?}");
    drop(kept);
    app.stop().await;
}

/// A frame larger than the connection's 8 KiB read buffer (but within `ingest.max_frame_bytes`)
/// is read whole, in several reads, and accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_larger_than_the_read_buffer_is_accepted_whole() {
    let app = spawn_app(|c| c.ward.beds = vec!["bed-big".into()]).await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-big", "dev-big").await;
    // Four seconds in one frame: 1,000 samples a lead, about 20 KiB of JSON.
    let x: Vec<f32> = (0..1000).map(common::signal).collect();
    let v: Vec<f32> = x.iter().map(|s| -0.5 * s).collect();
    let frame = json!({"type": "samples", "seq": 0, "t_ms": T0, "leads": {"II": x, "V": v}});
    let text = frame.to_string();
    assert!(text.len() > 16 * 1024, "{} bytes", text.len());
    m.send_text(&text).await;
    let reply = m
        .expect(5.0, |v| v["type"] == "ack" || v["type"] == "error")
        .await;
    assert_eq!(reply["type"], "ack", "{reply}");
    assert_eq!(reply["samples_seq"], 0, "{reply}");
    app.stop().await;
}

/// The lead-off technical alarm watches the first lead a monitor sends: a monitor sending V
/// alone raises it when V is off, and the ward's snapshot gives that lead in the secondary slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_sending_v_alone_raises_lead_off() {
    let app = spawn_app(|c| c.ward.beds = vec!["bed-v".into()]).await;
    let mut h = hello("bed-v", "dev-v");
    h["ecg"] = json!([{"lead": "V", "hz": 250}]);
    let mut m = Monitor::connect_with(&app.ws_url(), &h).await;
    // 20 s of V, then 20 s with V off.
    m.stream_leads(T0, 0..200, &["V"]).await;
    for seq in 200..400u64 {
        let x: Vec<f32> = (0..25).map(|k| common::signal(seq * 25 + k)).collect();
        m.send(
            json!({"type": "samples", "seq": seq, "t_ms": T0 + seq as i64 * 100,
                      "leads": {"V": x}, "lead_off": ["V"]}),
        )
        .await;
    }
    let snap = app
        .wait_snapshot(30.0, |s| {
            s["beds"][0]["alarms"]
                .as_array()
                .is_some_and(|a| a.iter().any(|k| k == "lead_off"))
        })
        .await;
    let leads = &snap["beds"][0]["latest"]["leads"];
    assert!(leads[0].is_null(), "{snap}");
    assert!(leads[1][0].as_u64().is_some_and(|off| off > 50), "{snap}");
    app.stop().await;
}

/// Monitors name their leads in many ways: one sending I and II uses both (II in the
/// primary slot, I in the secondary), one sending II and aVR likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lead_a_monitor_sends_takes_a_role() {
    let app = spawn_app(|c| c.ward.beds = vec!["bed-i".into(), "bed-r".into()]).await;
    for (bed, names) in [("bed-i", ["I", "II"]), ("bed-r", ["aVR", "II"])] {
        let mut h = hello(bed, &format!("dev-{bed}"));
        h["ecg"] = json!([{"lead": names[0], "hz": 250}, {"lead": names[1], "hz": 250}]);
        let mut m = Monitor::connect_with(&app.ws_url(), &h).await;
        for seq in 0..320u64 {
            let x: Vec<f32> = (0..25).map(|k| common::signal(seq * 25 + k)).collect();
            let other: Vec<f32> = x.iter().map(|s| -0.5 * s).collect();
            m.send(
                json!({"type": "samples", "seq": seq, "t_ms": T0 + seq as i64 * 100,
                          "leads": {names[0]: other, names[1]: x}}),
            )
            .await;
        }
        let reply = m
            .expect(5.0, |v| v["type"] == "ack" || v["type"] == "error")
            .await;
        assert_eq!(reply["type"], "ack", "{bed}: {reply}");
        let snap = app
            .wait_snapshot(30.0, |s| {
                s["beds"].as_array().is_some_and(|beds| {
                    beds.iter().any(|b| {
                        b["bed"] == bed
                            && b["latest"]["leads"][0][2] == true
                            && b["latest"]["leads"][1][2] == true
                    })
                })
            })
            .await;
        let tile = snap["beds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["bed"] == bed)
            .unwrap();
        // Scored from both leads: every member answered.
        assert_eq!(tile["latest"]["missing"], json!([]), "{tile}");
    }
    app.stop().await;
}
