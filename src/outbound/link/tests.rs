//! The link against an MLLP receiver written here (answering AA, or nothing), over a real
//! outbox: a final state the database cannot write backs the link off, and a receiver that
//! takes connections but never answers is logged once an episode.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio_util::codec::Framed;

use super::*;
use crate::outbound::message::{Draft, Observation};
use crate::outbound::{hl7_spec, outbox};

/// A receiver on a free port: counts the frames it gets and, with `answer`, acknowledges
/// each (AA, MSA-2 its MSH-10).
async fn receiver(answer: bool) -> (u16, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let frames = Arc::new(Mutex::new(0));
    let count = frames.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let count = count.clone();
            tokio::spawn(async move {
                let mut conn = Framed::new(tcp, Mllp::new(1 << 20));
                while let Some(Ok(f)) = conn.next().await {
                    *count.lock().unwrap() += 1;
                    if !answer {
                        continue;
                    }
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
    (port, frames)
}

fn config(port: u16) -> Hl7Config {
    Hl7Config {
        receiver: format!("127.0.0.1:{port}"),
        ack_timeout_secs: 0.2,
        connect_timeout_secs: 1.0,
        retry_min_ms: 300,
        retry_max_ms: 600,
        keepalive_secs: 60.0,
        ..Hl7Config::default()
    }
}

/// An outbox on a fresh database, and the link task over it.
fn link(
    cfg: &Hl7Config,
    dir: &std::path::Path,
) -> (Link, outbox::Outbox, std::thread::JoinHandle<()>) {
    let db =
        crate::serving::store::Db::open(&dir.join("h.db"), &crate::outbound::TEST_SCHEMA).unwrap();
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(Notify::new());
    let (ob, th) = outbox::start(
        hl7_spec(cfg),
        &db,
        &Default::default(),
        status.clone(),
        wake.clone(),
    )
    .unwrap();
    let l = Link {
        cfg: cfg.clone(),
        outbox: ob.clone(),
        status,
        wake,
        tls: None,
        shutdown: CancellationToken::new(),
    };
    (l, ob, th)
}

fn obs() -> Draft {
    Draft::Observation(Observation {
        bed: "b1".into(),
        at_ms: 1,
        score: Some(0.5),
        heart_rate_bpm: None,
        risk_alarm: false,
        quality: "scored",
        patient: None,
    })
}

#[tokio::test]
async fn an_acknowledgement_the_outbox_cannot_record_backs_the_link_off() {
    let dir = tempfile::tempdir().unwrap();
    let (port, frames) = receiver(true).await;
    let (l, ob, th) = link(&config(port), dir.path());
    ob.enqueue(obs()).await;
    let status = l.status.clone();
    while status.backlog.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Every update of the table fails (an acknowledgement cannot be recorded); reads work.
    let c = crate::serving::store::open(&dir.path().join("h.db")).unwrap();
    c.execute_batch(
        "CREATE TRIGGER refuse BEFORE UPDATE ON hl7_outbox
         BEGIN SELECT RAISE(FAIL, 'disk full (test)'); END;",
    )
    .unwrap();
    let stop = l.shutdown.clone();
    let task = tokio::spawn(l.run());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Sent, acknowledged, not recorded, so sent again: after 300, 600, 600 ms, not in a loop.
    let n = *frames.lock().unwrap();
    assert!((2..=5).contains(&n), "{n} sends in 1.5 s");
    c.execute_batch("DROP TRIGGER refuse;").unwrap();
    let t = std::time::Instant::now();
    while ob.next().await.is_some() {
        assert!(t.elapsed() < Duration::from_secs(5), "never recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    task.await.unwrap();
    drop(ob);
    th.join().unwrap();
}

/// Log lines written while a test runs.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_receiver_that_never_answers_is_one_episode_in_the_log() {
    let lines = Lines::default();
    let w = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    let (port, frames) = receiver(false).await;
    let (l, ob, th) = link(&config(port), dir.path());
    ob.enqueue(obs()).await;
    let stop = l.shutdown.clone();
    let task = tokio::spawn(l.run());
    // Each connection: three sends unanswered (0.2 s each, 0.3 and 0.6 s apart), dropped,
    // made again.
    let t = std::time::Instant::now();
    while *frames.lock().unwrap() < 7 {
        assert!(t.elapsed() < Duration::from_secs(15), "too few sends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    task.await.unwrap();
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("HL7 link connected").count(), 1, "{text}");
    assert_eq!(text.matches("HL7 link down").count(), 1, "{text}");
    drop(ob);
    th.join().unwrap();
}
