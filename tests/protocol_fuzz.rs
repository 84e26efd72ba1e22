//! The monitor protocol under hostile input: property tests over the parser (arbitrary bytes,
//! valid messages mutated, round trips of valid messages), and the hand-made corpus in
//! `tests/corpus/protocol/` fed to the parser and to a live server connection.

mod common;

use std::time::Duration;

use common::{Monitor, close_of, spawn_app};
use futures_util::{SinkExt, StreamExt};
use holmes::protocol::{
    BINARY_HEADER, BinarySamples, ClientMsg, EcgChannel, MAX_SEQ, Patient, VitalValue,
    VitalsChannel, encode_binary, parse_binary, parse_client,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_\\-]{1,12}"
}

fn sample() -> impl Strategy<Value = Option<f32>> {
    prop_oneof![
        Just(None),
        (-1.0e6f32..1.0e6).prop_map(Some),
        any::<f32>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Some),
    ]
}

/// A patient identity or none.
fn patient() -> impl Strategy<Value = Option<Patient>> {
    prop::option::of(
        (name(), "[A-Za-z0-9:./_\\-]{1,20}")
            .prop_map(|(id, authority)| Patient { id, authority })
            .prop_filter("a valid identity", |p| p.check().is_ok()),
    )
}

/// Any valid client message.
fn client_msg() -> impl Strategy<Value = ClientMsg> {
    let hello = (
        any::<u32>(),
        name(),
        name(),
        name(),
        prop::collection::vec((name(), 1.0f64..1000.0), 0..4),
        prop::collection::vec((name(), name()), 0..4),
        patient(),
    )
        .prop_map(
            |(protocol, bed, device, token, ecg, vitals, patient)| ClientMsg::Hello {
                protocol,
                bed,
                device,
                token,
                ecg: ecg
                    .into_iter()
                    .map(|(lead, hz)| EcgChannel { lead, hz })
                    .collect(),
                vitals: vitals
                    .into_iter()
                    .map(|(name, unit)| VitalsChannel { name, unit })
                    .collect(),
                patient,
            },
        );
    let samples = (
        0..=MAX_SEQ,
        any::<i64>(),
        prop::collection::btree_map(name(), prop::collection::vec(sample(), 0..30), 0..4),
        prop::collection::vec(name(), 0..3),
    )
        .prop_map(|(seq, t_ms, leads, lead_off)| ClientMsg::Samples {
            seq,
            t_ms,
            leads,
            lead_off,
        });
    let vitals = (
        0..=MAX_SEQ,
        any::<i64>(),
        prop::collection::vec(
            (
                name(),
                prop::option::of(-1.0e9f64..1.0e9),
                prop::collection::vec(name(), 0..2),
            ),
            0..5,
        ),
    )
        .prop_map(|(seq, t_ms, values)| ClientMsg::Vitals {
            seq,
            t_ms,
            values: values
                .into_iter()
                .map(|(name, value, status)| VitalValue {
                    name,
                    value,
                    status,
                })
                .collect(),
        });
    let admission = patient().prop_map(|patient| ClientMsg::Patient { patient });
    prop_oneof![hello, samples, vitals, admission, Just(ClientMsg::Bye {})]
}

/// Any JSON value, nested a little.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|x| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)),
        ".{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// How to damage a valid message.
#[derive(Debug, Clone)]
enum Mutation {
    /// Replace the value at the `k`-th key (of all keys, depth first) with something else.
    Replace(usize, Value),
    /// Remove the `k`-th key.
    Remove(usize),
    /// Add an unknown key at the top.
    Add(String, Value),
    /// Cut the text at a fraction of its length.
    Truncate(f64),
    /// Flip one byte of the text.
    Flip(f64, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), json_value()).prop_map(|(k, v)| Mutation::Replace(k, v)),
        any::<usize>().prop_map(Mutation::Remove),
        (".{1,8}", json_value()).prop_map(|(k, v)| Mutation::Add(k, v)),
        (0.0f64..1.0).prop_map(Mutation::Truncate),
        (0.0f64..1.0, any::<u8>()).prop_map(|(at, b)| Mutation::Flip(at, b)),
    ]
}

/// Visits the `k`-th key (mod the number of keys) of `v`, depth first.
fn nth_key(
    v: &mut Value,
    k: &mut usize,
    f: &mut dyn FnMut(&mut serde_json::Map<String, Value>, &str),
) -> bool {
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for key in keys {
                if *k == 0 {
                    f(m, &key);
                    return true;
                }
                *k -= 1;
                if nth_key(m.get_mut(&key).expect("key"), k, f) {
                    return true;
                }
            }
            false
        }
        Value::Array(a) => a.iter_mut().any(|x| nth_key(x, k, f)),
        _ => false,
    }
}

fn mutate(msg: &ClientMsg, m: &Mutation) -> Vec<u8> {
    let mut v = serde_json::to_value(msg).unwrap();
    let keys = {
        let s = v.to_string();
        s.matches("\":").count().max(1)
    };
    match m {
        Mutation::Replace(k, new) => {
            let mut k = k % keys;
            nth_key(&mut v, &mut k, &mut |map, key| {
                map.insert(key.to_owned(), new.clone());
            });
        }
        Mutation::Remove(k) => {
            let mut k = k % keys;
            nth_key(&mut v, &mut k, &mut |map, key| {
                map.remove(key);
            });
        }
        Mutation::Add(key, new) => {
            v.as_object_mut().unwrap().insert(key.clone(), new.clone());
        }
        Mutation::Truncate(_) | Mutation::Flip(..) => {}
    }
    let mut b = v.to_string().into_bytes();
    match m {
        Mutation::Truncate(f) => b.truncate((b.len() as f64 * f) as usize),
        Mutation::Flip(at, x) => {
            let i = ((b.len() as f64 * at) as usize).min(b.len() - 1);
            b[i] ^= x | 1;
        }
        _ => {}
    }
    b
}

/// Equal, numbers within a relative 1e-12: serde_json's default float parsing may land one
/// ulp off a printed f64 (samples are f32 and round-trip exactly; `hz` and vitals are f64).
fn same(a: &ClientMsg, b: &ClientMsg) -> bool {
    fn eq(x: &Value, y: &Value) -> bool {
        match (x, y) {
            // Integers (protocol, sequence numbers, timestamps) must match exactly; a float may
            // differ by 1e-12 relative, integral or not (1.3500869141464315e18 read back as
            // ...17e18, one ulp off).
            (Value::Number(p), Value::Number(q)) if p.is_f64() || q.is_f64() => {
                match (p.as_f64(), q.as_f64()) {
                    (Some(p), Some(q)) if p.is_finite() && q.is_finite() => {
                        (p - q).abs() <= 1e-12 * p.abs().max(q.abs())
                    }
                    (p, q) => p == q,
                }
            }
            (Value::Array(p), Value::Array(q)) => {
                p.len() == q.len() && p.iter().zip(q).all(|(x, y)| eq(x, y))
            }
            (Value::Object(p), Value::Object(q)) => {
                p.len() == q.len() && p.iter().all(|(k, v)| q.get(k).is_some_and(|w| eq(v, w)))
            }
            _ => x == y,
        }
    }
    eq(
        &serde_json::to_value(a).unwrap(),
        &serde_json::to_value(b).unwrap(),
    )
}

/// What the ingest path does with text: UTF-8 first, then the parser.
fn parse_bytes(b: &[u8]) -> Result<ClientMsg, String> {
    std::str::from_utf8(b)
        .map_err(|e| e.to_string())
        .and_then(parse_client)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(s in ".{0,300}") {
        if let Err(e) = parse_client(&s) {
            prop_assert!(!e.is_empty());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..400), leads in 0usize..20) {
        match parse_binary(&b, leads) {
            Ok(f) => {
                prop_assert_eq!(f.leads.len(), leads);
                prop_assert_eq!(b.len(), BINARY_HEADER + 2 * leads * f.leads.first().map_or(0, Vec::len));
            }
            Err(e) => prop_assert!(!e.is_empty()),
        }
        let _ = parse_bytes(&b);
    }

    #[test]
    fn headers_that_claim_too_much_are_refused(n in any::<u16>(), leads in 0u8..=255, extra in 0usize..64) {
        let mut b = vec![0xEC, 1, 0, 0];
        b.extend(7u64.to_le_bytes());
        b.extend(0i64.to_le_bytes());
        b.extend(n.to_le_bytes());
        b.extend([leads, 0]);
        b.extend(vec![0u8; extra]);
        let want = BINARY_HEADER + 2 * n as usize * leads as usize;
        let r = parse_binary(&b, leads as usize);
        prop_assert_eq!(r.is_ok(), b.len() == want, "{:?}", r.err());
    }

    #[test]
    fn mutated_messages_parse_or_fail_cleanly(msg in client_msg(), m in mutation()) {
        let b = mutate(&msg, &m);
        match parse_bytes(&b) {
            // Whatever parses is a message in its own right: it survives a round trip.
            Ok(parsed) => {
                let again = parse_client(&serde_json::to_string(&parsed).unwrap()).unwrap();
                prop_assert!(same(&again, &parsed), "{:?} != {:?}", again, parsed);
            }
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    #[test]
    fn valid_messages_round_trip(msg in client_msg()) {
        let text = serde_json::to_string(&msg).unwrap();
        let back = parse_client(&text).unwrap();
        prop_assert!(same(&back, &msg), "{:?} != {:?}", back, msg);
        // Samples are f32 and come back exactly.
        if let ClientMsg::Samples { .. } = msg {
            prop_assert_eq!(back, msg);
        }
    }

    #[test]
    fn binary_frames_round_trip(
        seq in 0..=MAX_SEQ,
        t_ms in any::<i64>(),
        n in 0usize..40,
        leads in prop::collection::vec(any::<bool>(), 1..16),
        raw in prop::collection::vec(prop::option::of(-32767i16..=32767), 16 * 40),
    ) {
        let f = BinarySamples {
            seq,
            t_ms,
            leads: (0..leads.len())
                .map(|l| (0..n).map(|j| raw[l * 40 + j].map(|q| q as f32 / 1000.0)).collect())
                .collect(),
            lead_off: leads.clone(),
        };
        let b = encode_binary(&f);
        prop_assert_eq!(b.len(), BINARY_HEADER + 2 * n * leads.len());
        prop_assert_eq!(parse_binary(&b, leads.len()).unwrap(), f);
    }
}

/// Found by CI: an integer written where a float `hz` belongs parses to an integral f64 whose
/// printed form reads back one ulp off. The round trip holds within `same`; integers do not get
/// that slack.
#[test]
fn an_integral_float_round_trips_within_one_ulp() {
    let text = r#"{"type":"hello","protocol":0,"bed":"-","device":"A","token":"_",
        "ecg":[{"lead":"a","hz":1350086914146431617}],"vitals":[]}"#;
    let parsed = parse_client(text).unwrap();
    let again = parse_client(&serde_json::to_string(&parsed).unwrap()).unwrap();
    assert!(same(&again, &parsed), "{again:?} != {parsed:?}");
    // Two timestamps one apart at this size are 1e-16 apart relative: a float's slack would
    // call them the same.
    let frame = |t_ms: i64| {
        parse_client(&format!(
            r#"{{"type":"samples","seq":1,"t_ms":{t_ms},"leads":{{"a":[0.5]}}}}"#
        ))
        .unwrap()
    };
    let t = 1_350_086_914_146_431_617;
    assert!(
        !same(&frame(t), &frame(t + 1)),
        "integers must match exactly"
    );
}

#[test]
fn deep_nesting_is_refused_before_parsing() {
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    let e = parse_client(&deep).unwrap_err();
    assert!(e.contains("nested deeper"), "{e}");
    // Brackets inside strings are not nesting.
    let ok = json!({"type": "vitals", "seq": 1, "t_ms": 0,
                    "values": [{"name": "[[[[[[[[[[[[", "value": 1.0, "status": []}]});
    assert!(parse_client(&ok.to_string()).is_ok());
}

/// One corpus entry: file, whether the parser accepts it, what a live connection answers.
struct Case {
    file: String,
    parses: bool,
    outcome: Outcome,
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Error(String),
    Close(u16),
}

fn corpus() -> Vec<(Case, Vec<u8>)> {
    let dir = common::root().join("tests/corpus/protocol");
    let listed = std::fs::read_to_string(dir.join("expect.txt")).unwrap();
    let cases: Vec<Case> = listed
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let outcome = match f[2].split_once(':').unwrap() {
                ("error", code) => Outcome::Error(code.to_owned()),
                ("close", code) => Outcome::Close(code.parse().unwrap()),
                other => panic!("bad outcome {other:?}"),
            };
            Case {
                file: f[0].to_owned(),
                parses: f[1] == "ok",
                outcome,
            }
        })
        .collect();
    // Every file in the folder is listed, so none is silently skipped.
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f != "expect.txt")
        .collect();
    files.sort();
    let mut names: Vec<String> = cases.iter().map(|c| c.file.clone()).collect();
    names.sort();
    assert_eq!(files, names, "expect.txt lists every corpus file");
    cases
        .into_iter()
        .map(|c| {
            let b = std::fs::read(dir.join(&c.file)).unwrap();
            (c, b)
        })
        .collect()
}

#[test]
fn the_corpus_meets_the_parser() {
    for (c, b) in corpus() {
        let r = if c.file.ends_with(".bin") {
            parse_binary(&b, 2).map(|_| ())
        } else {
            parse_bytes(&b).map(|_| ())
        };
        assert_eq!(r.is_ok(), c.parses, "{}: {r:?}", c.file);
        if let Err(e) = r {
            assert!(!e.is_empty(), "{}: a clear error", c.file);
        }
    }
}

/// A masked WebSocket frame written by hand (a client library will not send non-UTF-8 text).
fn raw_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mask = [1u8, 2, 3, 4];
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8];
    f.extend(mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_corpus_meets_a_live_server() {
    let app = spawn_app(|_| {}).await;
    for (i, (c, b)) in corpus().into_iter().enumerate() {
        let bed = format!("fuzz-{i}");
        let mut m = Monitor::connect(&app.ws_url(), &bed, &bed).await;
        if c.file.ends_with(".bin") {
            m.ws.send(Message::Binary(b.into())).await.unwrap();
        } else if let Ok(t) = std::str::from_utf8(&b) {
            m.send_text(t).await;
        } else {
            let s = m.ws.get_mut();
            let tcp = match s {
                tokio_tungstenite::MaybeTlsStream::Plain(t) => t,
                _ => unreachable!("plain TCP"),
            };
            tcp.write_all(&raw_frame(1, &b)).await.unwrap();
        }
        match &c.outcome {
            Outcome::Error(code) => {
                let v = m.expect(5.0, |v| v["type"] == "error").await;
                assert_eq!(v["code"], code.as_str(), "{}: {v}", c.file);
                assert!(!v["message"].as_str().unwrap().is_empty());
                // The connection carries on: a valid frame is taken and acknowledged.
                m.stream(1_700_000_000_000, 0..12).await;
                m.expect(5.0, |v| v["type"] == "ack").await;
            }
            Outcome::Close(code) => {
                assert_eq!(m.closed(5.0).await.map(|c| c.0), Some(*code), "{}", c.file);
            }
        }
    }
    // The server is still fine.
    let (status, _) = app.get("/health/live").await;
    assert_eq!(status, 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_message_closes_with_1009_and_loses_nothing_sent_before() {
    let app = spawn_app(|c| c.ward.beds = vec!["bed-h".into()]).await;
    let mut m = Monitor::connect(&app.ws_url(), "bed-h", "dev-h").await;
    // Frames are read in order: all 100 reach the bed before the huge message is read.
    m.stream(1_700_000_000_000, 0..100).await;
    m.send_text(&"x".repeat(200_000)).await;
    assert_eq!(m.closed(5.0).await.map(|c| c.0), Some(1009));
    let again = Monitor::connect(&app.ws_url(), "bed-h", "dev-h").await;
    assert_eq!(again.welcome["next_samples_seq"], 100, "{}", again.welcome);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_messages_before_the_hello_close_with_their_code() {
    let app = spawn_app(|_| {}).await;
    // Not UTF-8: 1007, as after a hello.
    let (mut ws, _) = tokio_tungstenite::connect_async(app.ws_url())
        .await
        .unwrap();
    let tcp = match ws.get_mut() {
        tokio_tungstenite::MaybeTlsStream::Plain(t) => t,
        _ => unreachable!("plain TCP"),
    };
    tcp.write_all(&raw_frame(1, b"{\"type\": \"hello\xff\xfe\"}"))
        .await
        .unwrap();
    let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("answered in time")
        .and_then(Result::ok);
    assert_eq!(close_of(&m).map(|c| c.0), Some(1007), "{m:?}");
    // Too large: 1009.
    let (mut ws, _) = tokio_tungstenite::connect_async(app.ws_url())
        .await
        .unwrap();
    ws.send(Message::Text("x".repeat(200_000).into()))
        .await
        .unwrap();
    let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("answered in time")
        .and_then(Result::ok);
    assert_eq!(close_of(&m).map(|c| c.0), Some(1009), "{m:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_sequence_numbers_and_timestamps_are_taken_exactly() {
    let app = spawn_app(|c| c.ward.beds = vec!["edge".into()]).await;
    let mut m = Monitor::connect(&app.ws_url(), "edge", "dev-e").await;
    // Device time just above i64::MIN: 32 s of signal, each frame 100 ms after the last.
    let t0 = i64::MIN + 1_000;
    m.stream(t0, 0..320).await;
    // 2^64 - 1 is no sequence number: refused with the reason.
    let frame = |seq: u64, t_ms: i64| {
        json!({"type": "samples", "seq": seq, "t_ms": t_ms,
               "leads": {"II": vec![0.1; 25], "V": vec![-0.05; 25]}})
    };
    m.send(frame(u64::MAX, t0 + 32_000)).await;
    let v = m.expect(5.0, |v| v["type"] == "error").await;
    assert_eq!(v["code"], "malformed", "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("largest sequence number"),
        "{v}"
    );
    // A monitor that renumbers its frames from 2^62 is followed, and acknowledged exactly.
    let big = 1u64 << 62;
    for k in 0..10u64 {
        m.send(frame(big + k, t0 + 32_000 + k as i64 * 100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    m.send(frame(big + 10, t0 + 33_000)).await;
    let ack = m
        .expect(5.0, |v| {
            v["type"] == "ack" && v["samples_seq"].as_u64().unwrap() >= big
        })
        .await;
    assert_eq!(ack["samples_seq"].as_u64(), Some(big + 10), "{ack}");
    // The first window is scored on the device's own clock; no clock jump, no absurd gap.
    let rows = app.wait_scores("edge", 60.0, |r| !r.is_empty()).await;
    assert_eq!(rows[0]["window_end_ms"].as_i64(), Some(t0 + 30_000));
    assert_eq!(rows[0]["status"], "scored", "{}", rows[0]);
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let events = loop {
        let (_, v) = app.get("/api/beds/edge/events").await;
        let events = v["events"].as_array().cloned().unwrap_or_default();
        if events.iter().any(|e| e["kind"] == "seq_reset") {
            break events;
        }
        assert!(std::time::Instant::now() < until, "no seq_reset: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        !events.iter().any(|e| e["kind"] == "clock_jump"),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| e["kind"] == "gap"), "{events:?}");
    // The ward's board takes the score too (its trend spans hours before the window's end).
    app.wait_snapshot(10.0, |s| {
        s["beds"][0]["latest"]["window_end_ms"].as_i64() == Some(t0 + 30_000)
    })
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_tiny_frames_is_throttled_and_other_beds_keep_scoring() {
    let app = spawn_app(|c| {
        c.ingest.max_messages_per_sec = 200;
        c.ward.beds = vec!["good".into(), "flood".into()];
    })
    .await;
    let mut flood = Monitor::connect(&app.ws_url(), "flood", "dev-x").await;
    let mut good = Monitor::connect(&app.ws_url(), "good", "dev-g").await;
    // 1,000 tiny frames at once: five seconds' worth at 200 a second.
    let started = std::time::Instant::now();
    let tiny: Vec<Message> = (0..1000u64)
        .map(|k| {
            Message::Text(
                json!({"type": "vitals", "seq": k, "t_ms": k, "values": []})
                    .to_string()
                    .into(),
            )
        })
        .collect();
    for t in tiny {
        flood.ws.feed(t).await.unwrap();
    }
    flood.ws.flush().await.unwrap();
    // The other bed streams two windows meanwhile and gets both scored.
    good.stream(1_700_000_000_000, 0..620).await;
    let rows = app.wait_scores("good", 60.0, |r| r.len() >= 2).await;
    assert!(rows.iter().all(|r| r["status"] == "scored"), "{rows:?}");
    // The flooder heard why it is slowed down...
    let v = flood.expect(10.0, |v| v["type"] == "error").await;
    assert_eq!(v["code"], "rate_limited", "{v}");
    // ...and its messages are read at the configured rate: a probe sent after the flood is
    // answered only once the flood has been read, no sooner than 4 s after it began.
    flood.send_text("{").await;
    flood
        .expect(30.0, |v| v["type"] == "error" && v["code"] == "malformed")
        .await;
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(4), "read in {took:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_closed_and_connections_are_capped() {
    let app = spawn_app(|c| {
        c.server.header_read_timeout_secs = 1.0;
        c.ingest.hello_timeout_secs = 1.0;
        c.server.max_connections = 4;
    })
    .await;
    use tokio::io::AsyncReadExt;
    // Headers dribbled a byte at a time: closed at the header timeout, long before the
    // request would be complete (about 8 s at this pace).
    let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let req = b"GET /health/live HTTP/1.1\r\nHost: test\r\nX-Pad: aaaaaaaaaaaaaaaaaa\r\n\r\n";
    let started = std::time::Instant::now();
    let mut closed_at = None;
    for &byte in req.iter() {
        if s.write_all(&[byte]).await.is_err() {
            closed_at = Some(started.elapsed());
            break;
        }
        let mut buf = [0u8; 256];
        match tokio::time::timeout(Duration::from_millis(120), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed_at = Some(started.elapsed());
                break;
            }
            Ok(Ok(n)) => {
                // A timeout answer (408) before the close is fine; a real answer is not.
                let text = String::from_utf8_lossy(&buf[..n]).to_string();
                assert!(
                    text.starts_with("HTTP/1.1 408"),
                    "answered a partial request: {text}"
                );
                closed_at = Some(started.elapsed());
                break;
            }
            Err(_) => {}
        }
    }
    let t = closed_at.expect("the server closed the dribbling connection");
    assert!(t < Duration::from_secs(4), "closed after {t:?}");

    // A WebSocket that never says hello: closed with 4000 after the hello timeout.
    let (mut ws, _) = tokio_tungstenite::connect_async(app.ws_url())
        .await
        .unwrap();
    let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("closed in time")
        .and_then(Result::ok);
    let (code, reason) = close_of(&m).expect("a close frame");
    assert_eq!(code, 4000);
    assert!(reason.contains("hello"), "{reason}");
    drop(ws);

    // At most 4 connections: a fifth is answered 503 and closed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(tokio::net::TcpStream::connect(app.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), extra.read_to_end(&mut answer))
        .await
        .expect("answered at once")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    // The idle ones are closed by the header timeout, and their places come back.
    drop(idle);
    let until = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        if live(&app).await == Some(200) {
            break;
        }
        assert!(std::time::Instant::now() < until, "places come back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_bodies_are_cut_off_and_never_starve_the_monitors() {
    use tokio::io::AsyncReadExt;
    let app = spawn_app(|c| {
        c.server.max_connections = 50;
        c.server.monitor_share = 0.2;
        c.server.body_read_timeout_secs = 2.0;
    })
    .await;
    // A body over the limit is refused before it is read.
    let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    s.write_all(b"POST /api/login HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer))
        .await
        .expect("answered at once")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("request body over 16384 bytes"), "{answer}");

    // Sixty sign-ins, no session needed, each announcing a body and sending one byte of it.
    let started = std::time::Instant::now();
    let mut slow = Vec::new();
    for _ in 0..60 {
        let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
        let _ = s
            .write_all(b"POST /api/login HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
            .await;
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Meanwhile a monitor connects, is welcomed and acknowledged.
    let mut m = Monitor::connect(&app.ws_url(), "bed-s", "dev-s").await;
    m.stream(1_700_000_000_000, 0..10).await;
    m.expect(5.0, |v| v["type"] == "ack").await;
    // Every slow client is answered, none left holding a place: 408 once the body's time is
    // up (the 40 places open to any client), 503 on a place kept for monitors or beyond.
    let mut timed_out = 0;
    for mut s in slow {
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer))
            .await
            .expect("answered and closed");
        let answer = String::from_utf8_lossy(&answer);
        if answer.starts_with("HTTP/1.1 408") {
            assert!(answer.contains("did not arrive within 2 s"), "{answer}");
            timed_out += 1;
        } else {
            // Refused at once: 503, or reset before the answer was read.
            assert!(
                answer.is_empty() || answer.starts_with("HTTP/1.1 503"),
                "{answer}"
            );
        }
    }
    assert_eq!(timed_out, 40);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(8), "answered after {took:?}");
    // Their places come back.
    assert_eq!(live(&app).await, Some(200));
    app.stop().await;
}

/// `GET /health/live`'s status, or `None` when the connection is refused or reset.
async fn live(app: &common::App) -> Option<u16> {
    use tokio::io::AsyncReadExt;
    let mut s = tokio::net::TcpStream::connect(app.addr).await.ok()?;
    s.write_all(b"GET /health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    String::from_utf8_lossy(&buf).get(9..12)?.parse().ok()
}
