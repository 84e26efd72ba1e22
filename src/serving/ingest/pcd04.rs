//! IHE PCD-04 in (`[pcd04_in]`): an MLLP listener that takes a gateway's (or central
//! station's) `ORU^R40` alarm reports, so that the monitors' own VT and VF alarms reach the
//! adjudicator from a ward's existing alarm path. Each report is read
//! ([`protocol::pcd04`](crate::protocol::pcd04)), kept in the inbox table (`pcd04_inbox`)
//! **before** it is acknowledged, then handed to the ward as the monitor's own connection hands
//! its alarms ([`Ward::gateway_alarm`]); a bad one is answered AE/AR (CE/CR) with the reason
//! in ERR, and nothing of it is kept; one that cannot be kept is answered AR (CE) so the
//! gateway sends it again. A gateway resends what was not acknowledged, so after a `kill -9`
//! nothing acknowledged is lost: at start-up the inbox hands on again every alarm (or end) of
//! the last `inbox_hours` that the store does not hold. An alarm, and its end, is handed on
//! once however often the gateway repeats it (phase `continue`, a resend after a restart):
//! what was handed on lately is remembered, and the store is asked about the rest.
//!
//! One task per gateway connection (at most `max_connections`, from `allowed_peers`), each
//! answering its reports in order; a connection silent for `idle_timeout_secs`, that does not
//! read its answers within it, or that sends bytes outside a frame or a frame over
//! `hl7.max_frame_bytes`, is closed.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rusqlite::params;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Hl7Config, Pcd04InConfig};
use crate::core::monitor_alarm::MonitorAlarmKind;
use crate::core::time::now_ms;
use crate::protocol::mllp::Mllp;
use crate::protocol::pcd04::{self, GatewayAlarm as Reported, Header, Refusal, Report};
use crate::serving::store::{Db, Migration, monitor_alarms};
use crate::serving::ward::{GatewayAlarm, Ward};

/// The inbox: every alarm report taken, as read, kept before it is acknowledged.
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 17,
    sql: "CREATE TABLE pcd04_inbox (
        id INTEGER PRIMARY KEY,
        received_ms INTEGER NOT NULL,
        control_id TEXT NOT NULL,
        bed TEXT NOT NULL,
        alarm_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        onset_ms INTEGER NOT NULL,
        end_ms INTEGER
    );
    CREATE INDEX pcd04_inbox_by_time ON pcd04_inbox (received_ms);",
}];

/// Alarms (and ends) remembered as handed on, so a gateway's resends are handed on once
/// without asking the store.
const REMEMBERED: usize = 8192;
/// How often the inbox drops reports older than `inbox_hours`, and how many rows a
/// statement deletes at most (the shared connection is not held long).
const PRUNE_EVERY: Duration = Duration::from_secs(60);
const PRUNE_ROWS: i64 = 5_000;

#[derive(Debug, thiserror::Error)]
pub enum Pcd04Error {
    #[error("pcd04_in: {0}")]
    Config(String),
    #[error("pcd04_in: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("pcd04_in: the inbox: {0}")]
    Inbox(#[from] rusqlite::Error),
}

/// What every connection shares.
struct Shared {
    cfg: Pcd04InConfig,
    /// `hl7.max_frame_bytes`, and the answers' MSH-3 and MSH-4.
    max_frame_bytes: usize,
    sender: (String, String),
    db: Db,
    ward: Ward,
    handed: Mutex<Handed>,
    /// The answers' MSH-10: a number a process.
    answers: AtomicU64,
}

/// An alarm's phase as handed on: bed, alarm id, onset, and whether it is the end.
type Key = (String, String, i64, bool);

/// The alarms and ends handed on lately, oldest first.
#[derive(Default)]
struct Handed {
    seen: HashSet<Key>,
    order: VecDeque<Key>,
}

impl Handed {
    fn contains(&self, key: &Key) -> bool {
        self.seen.contains(key)
    }

    /// Remembers `key`; false where it was already.
    fn first(&mut self, key: Key) -> bool {
        if !self.seen.insert(key.clone()) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        true
    }
}

/// Binds the listener, hands on again what the inbox holds and the store does not, and
/// serves gateways until `shutdown`; returns the bound address.
pub(crate) async fn start(
    cfg: &Pcd04InConfig,
    hl7: &Hl7Config,
    db: &Db,
    ward: &Ward,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> Result<SocketAddr, Pcd04Error> {
    let addr = cfg.addr().map_err(Pcd04Error::Config)?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Pcd04Error::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        max_frame_bytes: hl7.max_frame_bytes,
        sender: (
            hl7.sending_application.clone(),
            hl7.sending_facility.clone(),
        ),
        db: db.clone(),
        ward: ward.clone(),
        handed: Mutex::new(Handed::default()),
        answers: AtomicU64::new(0),
    });
    let again = {
        let (db, since) = (db.clone(), now_ms() - inbox_ms(cfg));
        tokio::task::spawn_blocking(move || unsettled(&db, since))
            .await
            .expect("reading the inbox panicked")?
    };
    if !again.is_empty() {
        tracing::info!(
            alarms = again.len(),
            "Handing on again the gateway alarms taken but not stored"
        );
    }
    for (a, stored) in again {
        hand_on(&shared, a, Some(stored)).await;
    }
    tracker.spawn(prune(shared.clone(), shutdown.clone()));
    tracker.spawn(accept(listener, shared, shutdown, tracker.clone()));
    tracing::info!(addr = %bound, "Taking IHE PCD-04 alarm reports");
    Ok(bound)
}

fn inbox_ms(cfg: &Pcd04InConfig) -> i64 {
    (cfg.inbox_hours * 3_600_000.0) as i64
}

/// What the store holds of an alarm: `None` nothing, `Some(end)` the alarm, with its end
/// where one is stored.
type Stored = Option<Option<i64>>;

/// The inbox's alarms since `since_ms` (each once, with the latest end reported) whose alarm,
/// or end, the store does not hold, oldest first, each with what the store holds of it.
/// Blocking.
fn unsettled(db: &Db, since_ms: i64) -> rusqlite::Result<Vec<(Reported, Stored)>> {
    let c = db.lock();
    let mut st = c.prepare(
        "SELECT bed, alarm_id, MIN(kind), onset_ms, MAX(end_ms) FROM pcd04_inbox
         WHERE received_ms >= ?1 GROUP BY bed, alarm_id, onset_ms ORDER BY MIN(id)",
    )?;
    let rows = st.query_map([since_ms], |r| {
        let kind: String = r.get(2)?;
        Ok(Reported {
            bed: r.get(0)?,
            id: r.get(1)?,
            kind: kind.parse().unwrap_or(MonitorAlarmKind::Other),
            onset_ms: r.get(3)?,
            end_ms: r.get(4)?,
        })
    })?;
    let mut out = Vec::new();
    for a in rows {
        let a = a?;
        let stored = monitor_alarms::stored_end(&c, &a.bed, &a.id, a.onset_ms)?;
        let settled = match stored {
            None => false,
            Some(end) => a.end_ms.is_none() || end.is_some(),
        };
        if !settled {
            out.push((a, stored));
        }
    }
    Ok(out)
}

/// Drops the inbox's reports older than `inbox_hours`, every [`PRUNE_EVERY`].
async fn prune(shared: Arc<Shared>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(PRUNE_EVERY) => {}
        }
        let (db, before) = (shared.db.clone(), now_ms() - inbox_ms(&shared.cfg));
        let done = tokio::task::spawn_blocking(move || {
            loop {
                let n = db.lock().execute(
                    "DELETE FROM pcd04_inbox WHERE id IN
                     (SELECT id FROM pcd04_inbox WHERE received_ms < ?1 LIMIT ?2)",
                    params![before, PRUNE_ROWS],
                )?;
                if (n as i64) < PRUNE_ROWS {
                    return Ok::<_, rusqlite::Error>(());
                }
            }
        })
        .await;
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "Cannot prune the PCD-04 inbox");
        }
    }
}

async fn accept(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let slots = Arc::new(Semaphore::new(shared.cfg.max_connections));
    loop {
        let (socket, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            got = listener.accept() => match got {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "PCD-04 listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let allowed = &shared.cfg.allowed_peers;
        let ip = peer.ip().to_canonical();
        if !allowed.is_empty() && !allowed.iter().any(|a| a.to_canonical() == ip) {
            tracing::warn!(peer = %ip, "PCD-04 listener: a gateway not in allowed_peers was refused");
            metrics::counter!("holmes_pcd04_in_connections_refused_total", "reason" => "peer")
                .increment(1);
            continue;
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(
                max = shared.cfg.max_connections,
                "PCD-04 listener: too many gateway connections; one refused"
            );
            metrics::counter!("holmes_pcd04_in_connections_refused_total", "reason" => "full")
                .increment(1);
            continue;
        };
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        tracker.spawn(async move {
            serve(socket, &shared, shutdown).await;
            drop(slot);
        });
    }
}

/// Answers one gateway's reports in order until it leaves, misbehaves, stays silent (or does
/// not read its answers) too long, or the daemon stops.
async fn serve(socket: TcpStream, shared: &Shared, shutdown: CancellationToken) {
    let mut framed = Framed::new(socket, Mllp::new(shared.max_frame_bytes));
    let idle = Duration::from_secs_f64(shared.cfg.idle_timeout_secs);
    loop {
        let frame = tokio::select! {
            _ = shutdown.cancelled() => return,
            got = tokio::time::timeout(idle, framed.next()) => match got {
                Err(_) => {
                    tracing::info!("PCD-04 listener: a silent gateway connection was closed");
                    return;
                }
                Ok(None) => return,
                Ok(Some(Err(e))) => {
                    tracing::warn!(error = %e, "PCD-04 listener: a gateway's framing is broken; closing");
                    metrics::counter!("holmes_pcd04_in_total", "outcome" => "framing").increment(1);
                    return;
                }
                Ok(Some(Ok(f))) => f,
            },
        };
        // A report taken is answered even while the daemon stops (what was kept is handed
        // on again at the next start); only a bed queue that stays full is given up on.
        let answer = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = take(shared, &frame) => a,
        };
        match tokio::time::timeout(idle, framed.send(answer.as_bytes())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "PCD-04 listener: cannot answer a gateway; closing");
                return;
            }
            Err(_) => {
                tracing::warn!("PCD-04 listener: a gateway does not read its answers; closing");
                return;
            }
        }
    }
}

/// One report: read, kept, handed on; the answer.
async fn take(shared: &Shared, frame: &[u8]) -> String {
    let text = String::from_utf8_lossy(frame);
    let (header, read) = pcd04::read(&text);
    let outcome = match read {
        Ok(Report::KeepAlive) => {
            metrics::counter!("holmes_pcd04_in_total", "outcome" => "keep_alive").increment(1);
            Ok(())
        }
        Ok(Report::Alarms(alarms)) => keep_and_hand_on(shared, header.as_ref(), alarms).await,
        Err(r) => Err(r),
    };
    if let Err(r) = &outcome {
        let outcome = match r.code {
            pcd04::AckCode::Reject => "rejected",
            pcd04::AckCode::Retry => "not_kept",
            _ => "error",
        };
        metrics::counter!("holmes_pcd04_in_total", "outcome" => outcome).increment(1);
        tracing::warn!(code = r.hl7_error, at = %r.location, "PCD-04 listener: a report was refused");
    }
    let (app, facility) = (&shared.sender.0, &shared.sender.1);
    let n = shared.answers.fetch_add(1, Ordering::Relaxed);
    let at = now_ms();
    let id = format!("HOLMES-ACK-{at}-{n}");
    pcd04::ack(
        header.as_ref(),
        outcome.as_ref().map(|_| ()),
        (app, facility),
        &id,
        at,
    )
}

async fn keep_and_hand_on(
    shared: &Shared,
    header: Option<&Header>,
    alarms: Vec<Reported>,
) -> Result<(), Refusal> {
    if alarms.iter().any(|a| !shared.ward.admits(&a.bed)) {
        return Err(Refusal {
            code: pcd04::AckCode::Error,
            hl7_error: "103",
            location: "PV1^1^3".into(),
            reason: "the bed is not configured and this ward refuses unknown beds".into(),
        });
    }
    let control_id = header.map(|h| h.control_id.clone()).unwrap_or_default();
    let (db, rows) = (shared.db.clone(), alarms.clone());
    let kept = tokio::task::spawn_blocking(move || {
        let mut c = db.lock();
        // Synced to disk before the answer (the shared connection's NORMAL survives a killed
        // process, not a power cut), then back.
        c.pragma_update(None, "synchronous", "FULL")?;
        let kept = keep(&mut c, &control_id, &rows);
        c.pragma_update(None, "synchronous", "NORMAL")?;
        kept
    })
    .await
    .expect("keeping a report panicked");
    if let Err(e) = kept {
        tracing::error!(error = %e, "PCD-04 listener: cannot keep a report; answered so that the gateway sends it again");
        return Err(Refusal::retry(
            "the report could not be kept; send it again",
        ));
    }
    metrics::counter!("holmes_pcd04_in_total", "outcome" => "accepted").increment(1);
    for a in alarms {
        hand_on(shared, a, None).await;
    }
    Ok(())
}

/// Writes a report's alarms into the inbox, in one transaction. Blocking.
fn keep(c: &mut rusqlite::Connection, control_id: &str, rows: &[Reported]) -> rusqlite::Result<()> {
    let tx = c.transaction()?;
    let received = now_ms();
    for a in rows {
        tx.execute(
            "INSERT INTO pcd04_inbox
                 (received_ms, control_id, bed, alarm_id, kind, onset_ms, end_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                received,
                control_id,
                a.bed,
                a.id,
                a.kind.as_str(),
                a.onset_ms,
                a.end_ms
            ],
        )?;
    }
    tx.commit()
}

/// Hands a report's alarm and end on to the ward, each once: not where it was handed on
/// lately, nor where the store holds it (`stored`, or asked now where `None`).
async fn hand_on(shared: &Shared, a: Reported, stored: Option<Stored>) {
    let key = |end: bool| -> Key { (a.bed.clone(), a.id.clone(), a.onset_ms, end) };
    let (raise_known, end_known) = {
        let h = shared.handed.lock().expect("lock");
        (h.contains(&key(false)), h.contains(&key(true)))
    };
    let wants_end = a.end_ms.is_some() && !end_known;
    if raise_known && !wants_end {
        return;
    }
    let stored = match stored {
        Some(s) => s,
        None => {
            let (db, a) = (shared.db.clone(), a.clone());
            let got = tokio::task::spawn_blocking(move || {
                monitor_alarms::stored_end(&db.lock(), &a.bed, &a.id, a.onset_ms)
            })
            .await
            .expect("reading the store panicked");
            match got {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "PCD-04 listener: cannot ask the store about an alarm; handing it on");
                    None
                }
            }
        }
    };
    let first = |end: bool| shared.handed.lock().expect("lock").first(key(end));
    if let Some(end) = stored {
        // Known to the store: remembered, so its resends need not ask again.
        first(false);
        if end.is_some() {
            first(true);
        }
    }
    if stored.is_none() && first(false) {
        let raised = GatewayAlarm::Raised {
            id: a.id.clone(),
            kind: a.kind,
            t_ms: a.onset_ms,
        };
        shared.ward.gateway_alarm(&a.bed, raised).await;
        metrics::counter!("holmes_pcd04_in_handed_total", "phase" => "raised").increment(1);
    }
    let end_stored = matches!(stored, Some(Some(_)));
    if let Some(end) = a.end_ms
        && !end_stored
        && first(true)
    {
        let ended = GatewayAlarm::Ended {
            id: a.id.clone(),
            t_ms: end,
        };
        shared.ward.gateway_alarm(&a.bed, ended).await;
        metrics::counter!("holmes_pcd04_in_handed_total", "phase" => "ended").increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resends_are_handed_on_once_and_the_memory_is_bounded() {
        let mut h = Handed::default();
        let k = |i: i64| ("bed-1".to_string(), "A".to_string(), i, false);
        assert!(h.first(k(0)));
        assert!(!h.first(k(0)));
        for i in 1..=REMEMBERED as i64 {
            assert!(h.first(k(i)));
        }
        assert_eq!(h.order.len(), REMEMBERED);
        assert_eq!(h.seen.len(), REMEMBERED);
        // The oldest was forgotten.
        assert!(h.first(k(0)));
    }
}
