//! Dashboard clients that stop reading (a frozen browser tab, a half-dead link) must never slow
//! ingest or scoring: the live feed holds only the latest snapshot per client, big answers
//! wait in the client's own socket, and the number of live-feed clients is capped.

mod common;

use std::time::Duration;

use common::{App, Monitor, spawn_app};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

const T0: i64 = 1_700_000_000_000;
const BEDS: [&str; 2] = ["s1", "s2"];
const STUCK: usize = 8;

/// A client that asks for `path` and never reads the answer, with a small receive buffer so
/// the server's side fills quickly.
async fn stuck_client(app: &App, path: &str) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(2048).unwrap();
    let mut s = sock.connect(app.addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// Resident memory of this process (the daemon runs in it), bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// The window ends (device ms) of bed `b` in `(from_s, to_s]` seconds of signal: configured
/// beds close windows at evenly spread phases (s1 at 0 s, s2 at 15 s into each 30-s hop), and
/// the first needs 30 s of signal.
fn ends(b: usize, from_s: i64, to_s: i64) -> Vec<i64> {
    let phase = 15 * b as i64;
    (0..10)
        .map(|k| phase + 30 * k)
        .filter(|&e| e >= 30 && e > from_s && e <= to_s)
        .map(|e| T0 + e * 1000)
        .collect()
}

/// Streams `from_s..to_s` seconds of signal on every bed, then waits for each bed's windows
/// in that span; returns their rows per bed.
async fn phase(app: &App, mons: &mut [Monitor], from_s: u64, to_s: u64) -> Vec<Vec<Value>> {
    for m in mons.iter_mut() {
        m.stream(T0, from_s * 10..to_s * 10).await;
    }
    let mut out = Vec::new();
    for (b, bed) in BEDS.iter().enumerate() {
        let want = ends(b, 0, to_s as i64).len();
        let rows = app.wait_scores(bed, 60.0, |r| r.len() >= want).await;
        let skip = ends(b, 0, from_s as i64).len();
        out.push(rows[skip..].to_vec());
    }
    out
}

/// Exactly the bed's windows of the span, one per hop, every one fully scored.
fn one_scored_window_per_hop(rows: &[Value], want: &[i64]) {
    let got: Vec<i64> = rows
        .iter()
        .map(|r| r["window_end_ms"].as_i64().unwrap())
        .collect();
    assert_eq!(got, want, "{rows:?}");
    for r in rows {
        assert_eq!(r["status"], "scored", "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_dashboard_clients_never_slow_ingest_or_scoring() {
    let app = spawn_app(|c| {
        c.ward.beds = BEDS.iter().map(|b| b.to_string()).collect();
        // One window per 30 s of stream keeps the counting plain; the hop is not the subject.
        c.ward.hop_secs = 30;
        c.dashboard.max_stream_clients = STUCK + 1;
        // A window cut by the pause between phases waits for its samples, as a window held up
        // by a slow link would.
        c.ward.grace_secs = 30.0;
    })
    .await;
    let mut mons = Vec::new();
    for b in BEDS {
        mons.push(Monitor::connect(&app.ws_url(), b, &format!("dev-{b}")).await);
    }
    // Without stuck clients: 90 s of signal per bed.
    let before = phase(&app, &mut mons, 0, 90).await;

    // The live feed's clients, every one stuck; and readers of big answers that never read.
    let mut stuck = Vec::new();
    for _ in 0..STUCK {
        stuck.push(stuck_client(&app, "/api/stream").await);
    }
    for bed in BEDS {
        stuck.push(stuck_client(&app, &format!("/api/beds/{bed}/scores?limit=100000")).await);
        stuck.push(stuck_client(&app, "/metrics").await);
    }
    // At the cap, one more live-feed client is refused.
    let probe = stuck_client(&app, "/api/stream").await;
    app.wait_health(10.0, "the stuck clients counted", |h| {
        h["stream_clients"] == STUCK + 1
    })
    .await;
    let (status, body) = app.get("/api/stream").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("maximum"),
        "{body}"
    );
    drop(probe);
    app.wait_health(10.0, "the probe's place back", |h| {
        h["stream_clients"] == STUCK
    })
    .await;
    let rss_before = rss();

    // With them: the next 90 s, scored exactly as before, one window per bed per hop.
    let during = phase(&app, &mut mons, 90, 180).await;
    for (b, (x, y)) in before.iter().zip(&during).enumerate() {
        one_scored_window_per_hop(x, &ends(b, 0, 90));
        one_scored_window_per_hop(y, &ends(b, 90, 180));
    }
    // The ward's live state went on too: the board still publishes every second.
    let newest: Vec<Option<i64>> = during
        .iter()
        .map(|rows| rows.last().unwrap()["window_end_ms"].as_i64())
        .collect();
    let snap = app
        .wait_snapshot(10.0, |s| {
            s["beds"].as_array().is_some_and(|tiles| {
                tiles.len() == 2
                    && tiles
                        .iter()
                        .zip(&newest)
                        .all(|(t, n)| t["latest"]["window_end_ms"].as_i64() == *n)
            })
        })
        .await;
    assert_eq!(snap["beds"][0]["bed"], BEDS[0]);
    // Memory held for stuck clients is bounded by their sockets, not by how long they stall:
    // a few more seconds of snapshots add nothing measurable.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let grew = rss().saturating_sub(rss_before);
    assert!(grew < 64 << 20, "resident memory grew by {grew} bytes");

    // Gone clients give their places back.
    drop(stuck);
    app.wait_health(10.0, "the stuck clients' places back", |h| {
        h["stream_clients"] == 0
    })
    .await;
    let (status, _) = app.get("/api/health").await;
    assert_eq!(status, 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_that_never_reads_its_replies_is_still_read_and_scored() {
    use futures_util::{SinkExt, StreamExt};
    use serde_json::json;
    use tokio_tungstenite::tungstenite::Message;

    let app = spawn_app(|c| {
        c.ward.beds = vec!["deaf".into()];
        // One window per 30 s of stream keeps the counting plain; the hop is not the subject.
        c.ward.hop_secs = 30;
        // This test is about replies, not the message rate.
        c.ingest.max_messages_per_sec = 100_000;
    })
    .await;
    // A monitor with a small receive buffer that never reads what it is sent.
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(2048).unwrap();
    let tcp = sock.connect(app.addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(app.ws_url(), tcp)
        .await
        .unwrap();
    ws.send(Message::Text(
        common::hello("deaf", "dev-deaf").to_string().into(),
    ))
    .await
    .unwrap();
    let rss_before = rss();
    // 95 s of signal with its heart rate, every samples frame with one sample missing and sent
    // 40 times over. Each copy is answered `bad_samples` (the missing sample) and each copy
    // after the first `duplicate`: some 8 MB of replies never read, more than the sockets
    // between them hold.
    let stream = async {
        for seq in 0..950u64 {
            let mut x: Vec<Option<f32>> = (0..25)
                .map(|k| Some(common::signal(seq * 25 + k)))
                .collect();
            x[7] = None;
            let frame = json!({"type": "samples", "seq": seq, "t_ms": T0 + seq as i64 * 100,
                               "leads": {"II": x, "V": x}})
            .to_string();
            for _ in 0..40 {
                ws.feed(Message::Text(frame.clone().into())).await.unwrap();
            }
            if seq % 10 == 9 {
                let s = (seq + 1) / 10;
                let v = json!({"type": "vitals", "seq": s, "t_ms": T0 + s as i64 * 1000,
                               "values": [{"name": "hr", "value": 72.0, "status": []}]});
                ws.feed(Message::Text(v.to_string().into())).await.unwrap();
            }
            ws.flush().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(120), stream)
        .await
        .expect("the daemon kept reading");
    // Every window is scored all the same.
    let rows = app.wait_scores("deaf", 60.0, |r| r.len() >= 3).await;
    one_scored_window_per_hop(&rows, &[T0 + 30_000, T0 + 60_000, T0 + 90_000]);
    // The replies it did not read were dropped, and it shows.
    let (_, beds) = app.get("/api/beds").await;
    let deaf = &beds["beds"][0];
    assert_eq!(deaf["connected"], true, "{beds}");
    let dropped = deaf["replies_dropped"].as_u64().unwrap();
    assert!(dropped > 1000, "{beds}");
    let metrics = app.get_raw("/metrics").await;
    assert!(
        metrics.contains("holmes_monitor_replies_dropped_total"),
        "{metrics}"
    );
    let grew = rss().saturating_sub(rss_before);
    assert!(grew < 64 << 20, "resident memory grew by {grew} bytes");
    // Once it reads again, the connection is alive: what was queued arrives, then acks of the
    // frames it goes on sending.
    let (mut tx, mut rx) = ws.split();
    let more = tokio::spawn(async move {
        for seq in 950..1100u64 {
            let x: Vec<f32> = (0..25).map(|k| common::signal(seq * 25 + k)).collect();
            let f = json!({"type": "samples", "seq": seq, "t_ms": T0 + seq as i64 * 100,
                           "leads": {"II": x, "V": x}});
            if tx.send(Message::Text(f.to_string().into())).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let ack = async {
        while let Some(Ok(m)) = rx.next().await {
            if let Message::Text(t) = m {
                let v: serde_json::Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "ack" && v["samples_seq"].as_u64() >= Some(950) {
                    return;
                }
            }
        }
        panic!("the connection ended");
    };
    tokio::time::timeout(Duration::from_secs(30), ack)
        .await
        .expect("an ack of a newer frame");
    more.abort();
    app.stop().await;
}
