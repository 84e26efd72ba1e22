//! The drain benchmark (`cargo test --lib outbound::bench -- --ignored --nocapture`): a one-hour receiver outage at 1,024 beds and a 60-s cadence left in the
//! outbox (61,440 observation drafts: as many HL7 messages, twice as many FHIR resources),
//! then drained by each link against a receiver on loopback that answers at once (an MLLP
//! receiver answering AA; an HTTP server answering 201), timed, with the process's CPU time.
//! What it measures is Holmes's side of a drain (the outbox's reads and writes and one
//! message in flight), not a real receiver's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use super::message::{Draft, Observation};
use super::{LinkStatus, fhir, hl7_spec, link, mllp, outbox};
use crate::config::{BaseUrl, FhirConfig, Hl7Config};

const BEDS: usize = 1024;
const CADENCES: usize = 60;

fn cpu_secs() -> f64 {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).unwrap();
    let t = |v: nix::sys::time::TimeVal| v.tv_sec() as f64 + v.tv_usec() as f64 / 1e6;
    t(u.user_time()) + t(u.system_time())
}

/// An hour of one bed's observations, for every bed, in cadence order.
fn drafts() -> Vec<Draft> {
    let mut out = Vec::with_capacity(BEDS * CADENCES);
    for k in 0..CADENCES {
        for b in 0..BEDS {
            out.push(Draft::Observation(Observation {
                bed: format!("bed-{b}"),
                at_ms: 1_764_230_400_000 + (k as i64) * 60_000,
                score: Some(0.04),
                heart_rate_bpm: Some(72.0),
                risk_alarm: false,
                quality: "scored",
            }));
        }
    }
    out
}

/// Fills the outbox of `spec` with the hour (`rows` messages), then times the drain by `run` (the link task).
async fn drain(
    name: &str,
    spec: outbox::Spec,
    rows: u64,
    run: impl FnOnce(
        outbox::Outbox,
        Arc<LinkStatus>,
        Arc<Notify>,
        CancellationToken,
    ) -> tokio::task::JoinHandle<()>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let mut c = crate::serving::store::open(&path).unwrap();
    crate::serving::store::migrate(&mut c, &path).unwrap();
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(Notify::new());
    let (ob, th) = outbox::start(spec, &path, status.clone(), wake.clone()).unwrap();
    let t = Instant::now();
    for d in drafts() {
        ob.enqueue(d).await;
    }
    while status.backlog.load(Ordering::Relaxed) < rows {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queued = status.backlog.load(Ordering::Relaxed);
    let fill = t.elapsed();
    let stop = CancellationToken::new();
    let (t, cpu) = (Instant::now(), cpu_secs());
    let task = run(ob.clone(), status.clone(), wake, stop.clone());
    while status.backlog.load(Ordering::Relaxed) > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (secs, cpu) = (t.elapsed().as_secs_f64(), cpu_secs() - cpu);
    stop.cancel();
    task.await.unwrap();
    drop(ob);
    th.join().unwrap();
    println!(
        "{name}: {queued} queued in {:.1} s; drained in {secs:.1} s ({:.0}/s), CPU {cpu:.1} s ({:.0} us a message, receiver included)",
        fill.as_secs_f64(),
        queued as f64 / secs,
        cpu * 1e6 / queued as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: minutes, run by hand"]
async fn an_hours_outage_at_1024_beds_drains() {
    // HL7: a receiver answering AA at once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut conn = Framed::new(tcp, mllp::Mllp::new(1 << 20));
                while let Some(Ok(f)) = conn.next().await {
                    let text = String::from_utf8_lossy(&f).to_string();
                    let id = text.split('|').nth(9).unwrap_or("").to_owned();
                    let ack = format!(
                        "MSH|^~\\&|R|F|HOLMES|WARD|20250101000000||ACK^R01^ACK|A{id}|P|2.6\rMSA|AA|{id}\r"
                    );
                    if conn.send(ack.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let cfg = Hl7Config {
        receiver: format!("127.0.0.1:{port}"),
        queue: 65_536,
        ..Hl7Config::default()
    };
    let c = cfg.clone();
    let n = (BEDS * CADENCES) as u64;
    drain(
        "HL7",
        hl7_spec(&cfg),
        n,
        move |outbox, status, wake, shutdown| {
            tokio::spawn(
                link::Link {
                    cfg: c,
                    outbox,
                    status,
                    wake,
                    tls: None,
                    shutdown,
                }
                .run(),
            )
        },
    )
    .await;

    // FHIR: an HTTP/1.1 server answering 201 at once, keeping the connection.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (r, mut w) = tcp.into_split();
                let mut r = BufReader::new(r);
                loop {
                    let mut len = 0usize;
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let l = line.to_ascii_lowercase();
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; len];
                    r.read_exact(&mut body).await.unwrap();
                    let answer = "HTTP/1.1 201 Created\r\nContent-Type: application/fhir+json\r\nContent-Length: 2\r\n\r\n{}";
                    if w.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let cfg = FhirConfig {
        base_url: format!("http://127.0.0.1:{port}/fhir/R4"),
        queue: 65_536,
        ..FhirConfig::default()
    };
    let c = cfg.clone();
    drain(
        "FHIR",
        fhir::spec(&cfg),
        2 * n,
        move |outbox, status, wake, shutdown| {
            tokio::spawn(
                fhir::link::Link {
                    base: BaseUrl::parse(&c.base_url).unwrap(),
                    cfg: c,
                    outbox,
                    status,
                    wake,
                    tls: None,
                    shutdown,
                    failing: AtomicBool::new(false),
                }
                .run(),
            )
        },
    )
    .await;
}
