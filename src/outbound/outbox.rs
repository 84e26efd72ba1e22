//! The durable outbox: every message in the `hl7_outbox` table from the moment it is queued
//! until the receiver acknowledges it (`acked`), refuses it (`parked`, with its reason and
//! an audit row), or, for an observation, it grows too old to matter (`dropped`, counted).
//! A row's id is its MSH-10, so a resend after an outage or a restart is the same message.
//! Messages leave in id order, which keeps each bed's order.
//!
//! SQLite is blocking, so the table has one owner: the `holmes-hl7-outbox` thread, with a
//! connection of its own, taking [`Cmd`]s from a bounded channel (the feed's drafts, the
//! link's requests). It stops when every sender is gone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::LinkStatus;
use super::message::{AlarmReport, Draft, Phase, render};
use crate::config::Hl7Config;
use crate::core::time::now_ms;
use crate::dashboard::alarms::AlarmKind;
use crate::serving::store::audit::{Action, AuditLog, SYSTEM};

#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("HL7 outbox {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(transparent)]
    Store(#[from] crate::serving::store::StoreError),
}

/// Drafts taken into one transaction at most.
const BATCH: usize = 512;
/// The reason a message too long to frame is parked with.
const TOO_LONG: &str = "message longer than max_frame_bytes";
/// How often acknowledged and dropped rows past `keep_sent_hours` are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// A message waiting for the receiver.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pending {
    pub(crate) id: i64,
    pub(crate) observation: bool,
    pub(crate) created_ms: i64,
    pub(crate) body: String,
}

impl Pending {
    /// Its MSH-10.
    pub(crate) fn control_id(&self) -> String {
        self.id.to_string()
    }
}

/// What the outbox thread is asked.
pub(crate) enum Cmd {
    /// Queue a message (the feed).
    Enqueue(Draft),
    /// The oldest pending message, if any (the link).
    Next(oneshot::Sender<Option<Pending>>),
    /// It was written to the receiver once more.
    Sent(i64),
    /// The receiver accepted it (`code`: AA or CA).
    Acked { id: i64, code: String },
    /// The receiver refused it: parked with the reason, audited, never sent again.
    Parked {
        id: i64,
        code: String,
        reason: String,
    },
    /// An observation past `max_observation_age_secs`: dropped, counted.
    Expired(i64),
}

/// A cheap handle to the outbox thread.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: mpsc::Sender<Cmd>,
}

impl Outbox {
    /// Queues a draft without waiting; `false` when the queue is full (or the outbox stopped).
    pub(crate) fn try_enqueue(&self, d: Draft) -> bool {
        self.tx.try_send(Cmd::Enqueue(d)).is_ok()
    }

    /// Queues a draft, waiting for room.
    pub(crate) async fn enqueue(&self, d: Draft) {
        let _ = self.tx.send(Cmd::Enqueue(d)).await;
    }

    pub(crate) async fn next(&self) -> Option<Pending> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Cmd::Next(reply)).await.ok()?;
        rx.await.ok().flatten()
    }

    pub(crate) async fn tell(&self, c: Cmd) {
        let _ = self.tx.send(c).await;
    }
}

/// Opens the outbox on `db` (migrated by the store) and starts its thread. Alarms whose
/// start was queued by an earlier run and whose end never was (the daemon stopped or was
/// killed while they were active) get their end queued now, dated when the dashboard closed
/// them. Blocking.
pub(crate) fn start(
    cfg: &Hl7Config,
    db: &Path,
    status: Arc<LinkStatus>,
    wake: Arc<tokio::sync::Notify>,
) -> Result<(Outbox, std::thread::JoinHandle<()>), OutboxError> {
    let conn = crate::serving::store::open(db)?;
    let mut st = State {
        conn,
        path: db.to_owned(),
        cfg: cfg.clone(),
        status,
        wake,
        audit: AuditLog::new(db),
        pruned: Instant::now(),
    };
    st.count()?;
    let ends = st.unfinished_alarms()?;
    st.insert(&ends)?;
    let (tx, rx) = mpsc::channel(cfg.queue);
    let thread = std::thread::Builder::new()
        .name("holmes-hl7-outbox".into())
        .spawn(move || st.run(rx))
        .expect("spawning the outbox thread");
    Ok((Outbox { tx }, thread))
}

struct State {
    conn: Connection,
    path: PathBuf,
    cfg: Hl7Config,
    status: Arc<LinkStatus>,
    /// Woken when a message is queued (the link waits on it when the outbox is empty).
    wake: Arc<tokio::sync::Notify>,
    audit: AuditLog,
    pruned: Instant,
}

fn kind_of(s: &str) -> Option<AlarmKind> {
    [
        AlarmKind::Risk,
        AlarmKind::LeadOff,
        AlarmKind::Stale,
        AlarmKind::Lost,
    ]
    .into_iter()
    .find(|k| k.as_str() == s)
}

impl State {
    fn err(&self, source: rusqlite::Error) -> OutboxError {
        OutboxError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        while let Some(c) = rx.blocking_recv() {
            let res = match c {
                Cmd::Enqueue(d) => {
                    let mut batch = vec![d];
                    while batch.len() < BATCH {
                        match rx.try_recv() {
                            Ok(Cmd::Enqueue(d)) => batch.push(d),
                            Ok(other) => {
                                let r = self.insert(&batch).and_then(|()| self.handle(other));
                                batch.clear();
                                if let Err(e) = r {
                                    self.failed(&e);
                                }
                            }
                            Err(_) => break,
                        }
                    }
                    self.insert(&batch)
                }
                other => self.handle(other),
            };
            if let Err(e) = res {
                self.failed(&e);
            }
            if self.pruned.elapsed() >= PRUNE_EVERY {
                self.pruned = Instant::now();
                if let Err(e) = self.prune() {
                    self.failed(&e);
                }
            }
        }
    }

    fn failed(&self, e: &OutboxError) {
        tracing::error!(error = %e, "The HL7 outbox cannot be written");
        *self.status.last_error.lock().expect("status lock") = Some(e.to_string());
    }

    fn handle(&mut self, c: Cmd) -> Result<(), OutboxError> {
        let now = now_ms();
        match c {
            Cmd::Enqueue(d) => self.insert(&[d]),
            Cmd::Next(reply) => {
                let p = self.oldest()?;
                let _ = reply.send(p);
                Ok(())
            }
            Cmd::Sent(id) => self.exec(
                "UPDATE hl7_outbox SET attempts = attempts + 1 WHERE id = ?1",
                params![id],
            ),
            Cmd::Acked { id, code } => {
                self.finish(id, "acked", Some(&code), None)?;
                self.status.last_ack_ms.store(now, Ordering::Relaxed);
                metrics::counter!("holmes_hl7_acked_total").increment(1);
                Ok(())
            }
            Cmd::Parked { id, code, reason } => {
                self.finish(id, "parked", Some(&code), Some(&reason))?;
                self.status.parked.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("holmes_hl7_parked_total").increment(1);
                let kind: Option<String> = self
                    .conn
                    .query_row("SELECT kind FROM hl7_outbox WHERE id = ?1", [id], |r| {
                        r.get(0)
                    })
                    .optional()
                    .map_err(|e| self.err(e))?;
                // The reason stays out of the log (a receiver may quote the message): it is
                // in /api/health and the audit log.
                tracing::warn!(control_id = id, code = %code, "The HL7 receiver refused a message; it is parked");
                let detail = json!({"control_id": id.to_string(), "kind": kind, "code": code, "reason": reason});
                if let Err(e) = self
                    .audit
                    .write(Some(SYSTEM), Action::Hl7MessageParked, &detail)
                {
                    tracing::error!(error = %e, "Cannot write the audit log");
                }
                *self.status.last_parked.lock().expect("status lock") = Some(detail);
                Ok(())
            }
            Cmd::Expired(id) => {
                self.finish(
                    id,
                    "dropped",
                    None,
                    Some("older than max_observation_age_secs"),
                )?;
                self.status
                    .dropped_observations
                    .fetch_add(1, Ordering::Relaxed);
                metrics::counter!("holmes_hl7_observations_dropped_total").increment(1);
                Ok(())
            }
        }
    }

    fn exec(&self, sql: &str, p: impl rusqlite::Params) -> Result<(), OutboxError> {
        self.conn.execute(sql, p).map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Ends a pending message; a message no longer pending (answered twice) is left as it is.
    fn finish(
        &mut self,
        id: i64,
        state: &str,
        code: Option<&str>,
        reason: Option<&str>,
    ) -> Result<(), OutboxError> {
        let n = self
            .conn
            .execute(
                "UPDATE hl7_outbox SET state = ?2, done_ms = ?3, ack_code = ?4, reason = ?5
                 WHERE id = ?1 AND state = 'pending'",
                params![id, state, now_ms(), code, reason],
            )
            .map_err(|e| self.err(e))?;
        if n > 0 {
            self.status.backlog.fetch_sub(1, Ordering::Relaxed);
        }
        self.publish_oldest()
    }

    /// Writes drafts in one transaction, each row's id its MSH-10.
    fn insert(&mut self, drafts: &[Draft]) -> Result<(), OutboxError> {
        if drafts.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let err = |source| OutboxError::Sqlite {
            path: path.clone(),
            source,
        };
        let now = now_ms();
        let mut too_long = Vec::new();
        let tx = self.conn.transaction().map_err(err)?;
        for d in drafts {
            let (kind, alarm, phase) = match d {
                Draft::Observation(_) => ("observation", None, None),
                Draft::Alarm(a) => ("alarm", Some(a.alarm_id), Some(a.phase.as_str())),
            };
            tx.execute(
                "INSERT INTO hl7_outbox (kind, bed, alarm_id, phase, created_ms, body, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, '', 'pending')",
                params![kind, d.bed(), alarm, phase, now],
            )
            .map_err(err)?;
            let id = tx.last_insert_rowid();
            let body = render(&self.cfg, d, &id.to_string(), now);
            if body.len() > self.cfg.max_frame_bytes {
                // It could never be framed: sending it would fail and hold up the queue.
                tx.execute(
                    "UPDATE hl7_outbox SET body = ?2, state = 'parked', done_ms = ?3, reason = ?4
                     WHERE id = ?1",
                    params![id, body, now, TOO_LONG],
                )
                .map_err(err)?;
                too_long.push((id, kind));
                continue;
            }
            tx.execute(
                "UPDATE hl7_outbox SET body = ?2 WHERE id = ?1",
                params![id, body],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        for &(id, kind) in &too_long {
            tracing::warn!(
                control_id = id,
                kind,
                "An HL7 message is longer than hl7.max_frame_bytes; it is parked"
            );
            self.status.parked.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("holmes_hl7_parked_total").increment(1);
            let detail = json!({"control_id": id.to_string(), "kind": kind, "code": null, "reason": TOO_LONG});
            if let Err(e) = self
                .audit
                .write(Some(SYSTEM), Action::Hl7MessageParked, &detail)
            {
                tracing::error!(error = %e, "Cannot write the audit log");
            }
            *self.status.last_parked.lock().expect("status lock") = Some(detail);
        }
        let n = (drafts.len() - too_long.len()) as u64;
        self.status.backlog.fetch_add(n, Ordering::Relaxed);
        metrics::counter!("holmes_hl7_queued_total").increment(n);
        self.publish_oldest()?;
        self.wake.notify_one();
        Ok(())
    }

    fn oldest(&self) -> Result<Option<Pending>, OutboxError> {
        self.conn
            .query_row(
                "SELECT id, kind, created_ms, body FROM hl7_outbox WHERE state = 'pending'
                 ORDER BY id LIMIT 1",
                [],
                |r| {
                    Ok(Pending {
                        id: r.get(0)?,
                        observation: r.get::<_, String>(1)? == "observation",
                        created_ms: r.get(2)?,
                        body: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    fn publish_oldest(&self) -> Result<(), OutboxError> {
        let oldest = self.oldest()?.map_or(0, |p| p.created_ms);
        let s = &self.status;
        s.oldest_pending_ms.store(oldest, Ordering::Relaxed);
        metrics::gauge!("holmes_hl7_backlog").set(s.backlog.load(Ordering::Relaxed) as f64);
        metrics::gauge!("holmes_hl7_parked").set(s.parked.load(Ordering::Relaxed) as f64);
        Ok(())
    }

    /// The backlog and parked counts as the table holds them (at start-up).
    fn count(&self) -> Result<(), OutboxError> {
        let (pending, parked): (u64, u64) = self
            .conn
            .query_row(
                "SELECT count(*) FILTER (WHERE state = 'pending'),
                        count(*) FILTER (WHERE state = 'parked') FROM hl7_outbox",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err(e))?;
        self.status.backlog.store(pending, Ordering::Relaxed);
        self.status.parked.store(parked, Ordering::Relaxed);
        self.publish_oldest()
    }

    /// End reports for alarms an earlier run reported started and never ended.
    fn unfinished_alarms(&self) -> Result<Vec<Draft>, OutboxError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT a.id, a.bed, a.kind, a.raised_ms, a.cleared_ms, a.acked_ms
                 FROM alarms a JOIN (SELECT alarm_id FROM hl7_outbox WHERE kind = 'alarm'
                                     GROUP BY alarm_id HAVING sum(phase = 'end') = 0) o
                   ON a.id = o.alarm_id
                 ORDER BY a.id",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, bed, kind, raised, cleared, acked)| {
                Some(Draft::Alarm(AlarmReport {
                    alarm_id: id,
                    bed,
                    kind: kind_of(&kind)?,
                    phase: Phase::End,
                    raised_ms: raised,
                    at_ms: cleared.unwrap_or_else(now_ms),
                    inactivation: if acked.is_some() {
                        "alert-acknowledged"
                    } else {
                        "enabled"
                    },
                }))
            })
            .collect())
    }

    /// Deletes acknowledged and dropped rows, and parked observations, past `keep_sent_hours`,
    /// except the rows of an alarm whose end has not been queued (a restart still needs to
    /// know it started). Parked alarms are kept.
    fn prune(&self) -> Result<(), OutboxError> {
        let before = now_ms() - (self.cfg.keep_sent_hours * 3.6e6) as i64;
        self.exec(
            "DELETE FROM hl7_outbox WHERE done_ms < ?1
               AND ((state = 'parked' AND kind = 'observation')
                    OR (state IN ('acked', 'dropped')
                        AND (kind = 'observation'
                             OR alarm_id IN (SELECT alarm_id FROM hl7_outbox WHERE phase = 'end'))))",
            params![before],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::message::Observation;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        let mut c = crate::serving::store::open(&path).unwrap();
        crate::serving::store::migrate(&mut c, &path).unwrap();
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
        })
    }

    #[tokio::test]
    async fn messages_leave_in_order_and_survive_a_restart_with_their_ids() {
        let (_d, path) = setup();
        let cfg = Hl7Config::default();
        let status = Arc::new(LinkStatus::default());
        let wake = Arc::new(tokio::sync::Notify::new());
        let (ob, th) = start(&cfg, &path, status.clone(), wake.clone()).unwrap();
        ob.enqueue(obs("b1")).await;
        ob.enqueue(alarm(1, Phase::Start)).await;
        ob.enqueue(obs("b2")).await;
        let first = ob.next().await.unwrap();
        assert!(first.observation && first.body.contains("|ORU^R01^ORU_R01|1|"));
        ob.tell(Cmd::Sent(first.id)).await;
        ob.tell(Cmd::Acked {
            id: first.id,
            code: "AA".into(),
        })
        .await;
        let second = ob.next().await.unwrap();
        assert_eq!(second.id, 2);
        ob.tell(Cmd::Parked {
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
        let (ob, th) = start(&cfg, &path, status.clone(), wake).unwrap();
        assert_eq!(status.backlog.load(Ordering::Relaxed), 2);
        assert_eq!(status.parked.load(Ordering::Relaxed), 1);
        let p = ob.next().await.unwrap();
        assert_eq!(p.id, 3);
        ob.tell(Cmd::Expired(3)).await;
        let end = ob.next().await.unwrap();
        assert_eq!(end.id, 4);
        assert!(end.body.contains("|end|") && end.body.contains("|ORU^R40^ORU_R40|4|"));
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
        let (ob, th) = start(&cfg, &path, status.clone(), wake).unwrap();
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
}
