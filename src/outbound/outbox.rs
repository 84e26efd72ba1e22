//! The durable outbox of a link: every message in its table (`hl7_outbox` for HL7,
//! `fhir_outbox` for FHIR, one shape from one definition in the store's migrations, one queue
//! code here named by [`Names`]) from the moment it is queued until the receiver accepts it
//! (`acked`), refuses it (`parked`, with its reason and an audit row), or, for an observation,
//! it grows too old to matter (`dropped`, counted). A row's id is fixed when it is queued (the
//! HL7 link's MSH-10; a FHIR resource's identifier is rendered into its body), so a resend
//! after an outage or a restart is the same message. Messages leave in id order, which keeps
//! each bed's order.
//!
//! SQLite is blocking, so each table has one owner: its outbox thread (`holmes-hl7-outbox`,
//! `holmes-fhir-outbox`), through the ward's shared connection (the store's `Db`), taking [`Cmd`]s from a bounded channel
//! (the feed's drafts, the link's requests). It stops when every sender is gone. A batch it
//! cannot write is held and written again after a back-off (a storage fault loses no draft the
//! feed handed over); a final state it cannot write is answered as a failure, so the link backs
//! off before it sends that message again. The monitors' own alarms are queued once per phase,
//! and those the feed missed are found in the store ([`monitor_alarms`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rusqlite::{OptionalExtension, params};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

mod schema;
pub(crate) use schema::MIGRATIONS;

use super::LinkStatus;
use super::message::{AlarmReport, Draft, Phase};
use crate::board::alarms::AlarmKind;
use crate::core::patient::Admissions;
use crate::core::time::now_ms;
use crate::serving::store::Db;
use crate::serving::store::audit::{Action, AuditLog, SYSTEM};

mod monitor_alarms;

#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("outbox {path}: {source}")]
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
/// The reason a message too long to send is parked with.
const TOO_LONG: &str = "message longer than the link's limit";
/// How often acknowledged and dropped rows past `keep_sent_hours` are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// The back-off between tries of a batch that could not be written: from...
const HOLD_MIN: Duration = Duration::from_millis(100);
/// ...doubling up to.
const HOLD_MAX: Duration = Duration::from_secs(5);

/// How a link's drafts become rows: how many rows (messages) a draft makes, and each one's
/// body once its row id is known.
pub(crate) trait Render: Send + 'static {
    fn parts(&self, d: &Draft) -> usize;
    fn render(&self, d: &Draft, part: usize, id: i64, created_ms: i64) -> String;
}

/// The metric names, audit action and words of one link's outbox.
#[derive(Debug)]
pub(crate) struct Names {
    /// `HL7`, `FHIR`: in log lines.
    pub(crate) link: &'static str,
    pub(crate) thread: &'static str,
    pub(crate) table: &'static str,
    /// The key naming a row in a parked row's audit detail (`control_id`: the MSH-10).
    pub(crate) id_key: &'static str,
    pub(crate) parked_action: Action,
    pub(crate) acked_total: &'static str,
    pub(crate) parked_total: &'static str,
    pub(crate) dropped_total: &'static str,
    pub(crate) queued_total: &'static str,
    pub(crate) backlog: &'static str,
    pub(crate) parked: &'static str,
}

/// The HL7 link's outbox.
pub(crate) const HL7: Names = Names {
    link: "HL7",
    thread: "holmes-hl7-outbox",
    table: "hl7_outbox",
    id_key: "control_id",
    parked_action: Action::Hl7MessageParked,
    acked_total: "holmes_hl7_acked_total",
    parked_total: "holmes_hl7_parked_total",
    dropped_total: "holmes_hl7_observations_dropped_total",
    queued_total: "holmes_hl7_queued_total",
    backlog: "holmes_hl7_backlog",
    parked: "holmes_hl7_parked",
};

/// The FHIR link's outbox.
pub(crate) const FHIR: Names = Names {
    link: "FHIR",
    thread: "holmes-fhir-outbox",
    table: "fhir_outbox",
    id_key: "outbox_id",
    parked_action: Action::FhirResourceParked,
    acked_total: "holmes_fhir_acked_total",
    parked_total: "holmes_fhir_parked_total",
    dropped_total: "holmes_fhir_observations_dropped_total",
    queued_total: "holmes_fhir_queued_total",
    backlog: "holmes_fhir_backlog",
    parked: "holmes_fhir_parked",
};

/// What an outbox is made of.
pub(crate) struct Spec {
    pub(crate) names: &'static Names,
    pub(crate) render: Box<dyn Render>,
    /// Longest body the link can send; a longer one is parked as it is queued.
    pub(crate) max_body_bytes: usize,
    pub(crate) keep_sent_hours: f64,
    /// The channel's capacity (the link's `queue`).
    pub(crate) queue: usize,
}

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
    /// A message's final state, answered `true` once written (`false`: it stays pending).
    Final(Final, oneshot::Sender<bool>),
    /// Queue this run's monitor alarms the feed missed (it fell behind the store's broadcast).
    CatchUp,
}

/// A message's final state.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Final {
    /// The receiver accepted it (`code`: AA or CA; the HTTP status).
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

    /// Asks for this run's monitor alarms the feed missed to be queued, waiting for room.
    pub(crate) async fn catch_up(&self) {
        let _ = self.tx.send(Cmd::CatchUp).await;
    }

    pub(crate) async fn tell(&self, c: Cmd) {
        let _ = self.tx.send(c).await;
    }

    /// Records a final state; `false` when it could not be written (the message stays
    /// pending: back off before sending it again) or the outbox stopped.
    pub(crate) async fn finish(&self, f: Final) -> bool {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Cmd::Final(f, reply)).await.is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }
}

/// Opens the outbox on `db` (migrated by the store) and starts its thread. Alarms whose
/// start was queued by an earlier run and whose end never was (the daemon stopped or was
/// killed while they were active) get their end queued now, dated when the dashboard closed
/// them, naming the patient `admissions` has for the bed (the one the store kept from the
/// earlier run); monitor alarms stored and never queued (by this run so far, or by the last
/// where its link ran) are queued after them. Blocking.
pub(crate) fn start(
    spec: Spec,
    db: &Db,
    admissions: &Admissions,
    status: Arc<LinkStatus>,
    wake: Arc<tokio::sync::Notify>,
) -> Result<(Outbox, std::thread::JoinHandle<()>), OutboxError> {
    let queue = spec.queue;
    let thread_name = spec.names.thread;
    let mut st = State {
        db: db.clone(),
        spec,
        status,
        wake,
        audit: AuditLog::new(db),
        pruned: Instant::now(),
        admissions: admissions.clone(),
    };
    st.count()?;
    // Where the earlier run's link served, before this run queues anything.
    let missed_since = st.missed_since_at_start()?;
    let ends = st.unfinished_alarms(admissions)?;
    st.insert(&ends)?;
    if let Some(since) = missed_since {
        let missed = st.missed_monitor_alarms(since)?;
        st.insert(&missed)?;
    }
    let (tx, rx) = mpsc::channel(queue);
    let thread = std::thread::Builder::new()
        .name(thread_name.into())
        .spawn(move || st.run(rx))
        .expect("spawning the outbox thread");
    Ok((Outbox { tx }, thread))
}

struct State {
    db: Db,
    spec: Spec,
    status: Arc<LinkStatus>,
    /// Woken when a message is queued (the link waits on it when the outbox is empty).
    wake: Arc<tokio::sync::Notify>,
    audit: AuditLog,
    pruned: Instant,
    /// The beds' patients, for the monitor alarms found in the store.
    admissions: Admissions,
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
            path: self.db.path().to_owned(),
            source,
        }
    }

    fn names(&self) -> &'static Names {
        self.spec.names
    }

    fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        // Drafts taken from the channel and not yet written (a batch whose transaction
        // failed waits here, in order, and goes first).
        let mut held: Vec<Draft> = Vec::new();
        let mut hold_wait = HOLD_MIN;
        loop {
            if held.is_empty() {
                match rx.blocking_recv() {
                    Some(Cmd::Enqueue(d)) => held.push(d),
                    Some(other) => self.handle(other),
                    None => break,
                }
            }
            // Take what else is queued, up to a batch (while the database refuses, all of it,
            // so the link's requests are still answered); other commands are answered after
            // the drafts before them are written. Held drafts are bounded: past the channel's
            // capacity plus a batch, an observation is dropped (counted); alarms are kept.
            let failing = hold_wait > HOLD_MIN;
            let mut after = None;
            while (held.len() < BATCH || failing) && after.is_none() {
                match rx.try_recv() {
                    Ok(Cmd::Enqueue(d)) => {
                        if held.len() >= self.spec.queue + BATCH
                            && matches!(d, Draft::Observation(_))
                        {
                            self.status.queue_dropped.fetch_add(1, Ordering::Relaxed);
                            metrics::counter!(self.names().dropped_total).increment(1);
                        } else {
                            held.push(d);
                        }
                    }
                    Ok(other) => after = Some(other),
                    Err(_) => break,
                }
            }
            if !held.is_empty() {
                match self.insert(&held) {
                    Ok(()) => {
                        held.clear();
                        hold_wait = HOLD_MIN;
                    }
                    Err(e) => {
                        self.failed(&e);
                        if let Some(c) = after.take() {
                            self.handle(c);
                        }
                        if rx.is_closed() && rx.is_empty() {
                            break;
                        }
                        std::thread::sleep(hold_wait);
                        hold_wait = (hold_wait * 2).min(HOLD_MAX);
                        continue;
                    }
                }
            }
            if let Some(c) = after {
                self.handle(c);
            }
            if self.pruned.elapsed() >= PRUNE_EVERY {
                self.pruned = Instant::now();
                if let Err(e) = self.prune() {
                    self.failed(&e);
                }
            }
        }
        if !held.is_empty() {
            // Every sender is gone (shutdown) and the database still refuses: one last try.
            if let Err(e) = self.insert(&held) {
                tracing::error!(error = %e, lost = held.len(), link = self.names().link, "Drafts could not be written to the outbox before shutdown; they are lost");
            }
        }
    }

    fn failed(&self, e: &OutboxError) {
        tracing::error!(error = %e, link = self.names().link, "The outbox cannot be written");
        *self.status.last_error.lock().expect("status lock") = Some(e.to_string());
    }

    /// A command other than a draft; its failure is logged and shown.
    fn handle(&mut self, c: Cmd) {
        let res = match c {
            Cmd::Enqueue(d) => self.insert(&[d]),
            Cmd::Next(reply) => self.oldest().map(|p| {
                let _ = reply.send(p);
            }),
            Cmd::Sent(id) => self.exec(
                &format!(
                    "UPDATE {} SET attempts = attempts + 1 WHERE id = ?1",
                    self.names().table
                ),
                params![id],
            ),
            Cmd::Final(f, reply) => {
                let r = self.finish_as(f);
                let _ = reply.send(r.is_ok());
                r
            }
            Cmd::CatchUp => self.catch_up(),
        };
        if let Err(e) = res {
            self.failed(&e);
        }
    }

    fn finish_as(&mut self, f: Final) -> Result<(), OutboxError> {
        let names = self.names();
        match f {
            Final::Acked { id, code } => {
                self.finish(id, "acked", Some(&code), None)?;
                self.status.last_ack_ms.store(now_ms(), Ordering::Relaxed);
                metrics::counter!(names.acked_total).increment(1);
                Ok(())
            }
            Final::Parked { id, code, reason } => {
                self.finish(id, "parked", Some(&code), Some(&reason))?;
                self.status.parked.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(names.parked_total).increment(1);
                let kind: Option<String> = self
                    .db
                    .lock()
                    .query_row(
                        &format!("SELECT kind FROM {} WHERE id = ?1", names.table),
                        [id],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(|e| self.err(e))?;
                // The reason stays out of the log (a receiver may quote the message): it is
                // in /api/health and the audit log.
                tracing::warn!(id, code = %code, link = names.link, "The receiver refused a message; it is parked");
                let detail = json!({names.id_key: id.to_string(), "kind": kind, "code": code, "reason": reason});
                self.parked(detail);
                Ok(())
            }
            Final::Expired(id) => {
                self.finish(
                    id,
                    "dropped",
                    None,
                    Some("older than max_observation_age_secs"),
                )?;
                self.status
                    .dropped_observations
                    .fetch_add(1, Ordering::Relaxed);
                metrics::counter!(names.dropped_total).increment(1);
                Ok(())
            }
        }
    }

    /// Audits a parked message and shows it as the last one.
    fn parked(&self, detail: serde_json::Value) {
        if let Err(e) = self
            .audit
            .write(Some(SYSTEM), self.names().parked_action, &detail)
        {
            tracing::error!(error = %e, "Cannot write the audit log");
        }
        *self.status.last_parked.lock().expect("status lock") = Some(detail);
    }

    fn exec(&self, sql: &str, p: impl rusqlite::Params) -> Result<(), OutboxError> {
        self.db.lock().execute(sql, p).map_err(|e| self.err(e))?;
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
            .db
            .lock()
            .execute(
                &format!(
                    "UPDATE {} SET state = ?2, done_ms = ?3, ack_code = ?4, reason = ?5
                     WHERE id = ?1 AND state = 'pending'",
                    self.names().table
                ),
                params![id, state, now_ms(), code, reason],
            )
            .map_err(|e| self.err(e))?;
        if n > 0 {
            self.status.backlog.fetch_sub(1, Ordering::Relaxed);
        }
        self.publish_oldest()
    }

    /// Writes drafts in one transaction (all or none), each of their messages a row whose
    /// id is fixed before its body is rendered.
    fn insert(&mut self, drafts: &[Draft]) -> Result<(), OutboxError> {
        if drafts.is_empty() {
            return Ok(());
        }
        let path = self.db.path().to_owned();
        let err = |source| OutboxError::Sqlite {
            path: path.clone(),
            source,
        };
        let table = self.names().table;
        let now = now_ms();
        let mut too_long = Vec::new();
        let mut queued = 0u64;
        let db = self.db.clone();
        let mut conn = db.lock();
        let tx = conn.transaction().map_err(err)?;
        for d in drafts {
            let (kind, alarm, phase) = match d {
                Draft::Observation(_) => ("observation", None, None),
                Draft::Alarm(a) => ("alarm", Some(a.alarm_id), Some(a.phase.as_str())),
                Draft::MonitorAlarm(m) => {
                    // Each phase of a monitor's alarm goes once, however often it is handed
                    // over (the feed, and the store looked through for what it missed).
                    if monitor_alarms::queued(&tx, table, m.key, m.phase.as_str()).map_err(err)? {
                        continue;
                    }
                    (monitor_alarms::KIND, Some(m.key), Some(m.phase.as_str()))
                }
            };
            for part in 0..self.spec.render.parts(d) {
                tx.execute(
                    &format!(
                        "INSERT INTO {table} (kind, bed, alarm_id, phase, created_ms, body, state)
                         VALUES (?1, ?2, ?3, ?4, ?5, '', 'pending')"
                    ),
                    params![kind, d.bed(), alarm, phase, now],
                )
                .map_err(err)?;
                let id = tx.last_insert_rowid();
                let body = self.spec.render.render(d, part, id, now);
                if body.len() > self.spec.max_body_bytes {
                    // It could never be sent: trying would fail and hold up the queue.
                    tx.execute(
                        &format!(
                            "UPDATE {table} SET body = ?2, state = 'parked', done_ms = ?3, reason = ?4
                             WHERE id = ?1"
                        ),
                        params![id, body, now, TOO_LONG],
                    )
                    .map_err(err)?;
                    too_long.push((id, kind));
                    continue;
                }
                tx.execute(
                    &format!("UPDATE {table} SET body = ?2 WHERE id = ?1"),
                    params![id, body],
                )
                .map_err(err)?;
                queued += 1;
            }
        }
        tx.commit().map_err(err)?;
        // Released before the audit rows below, which write through it.
        drop(conn);
        let names = self.names();
        for &(id, kind) in &too_long {
            tracing::warn!(
                id,
                kind,
                link = names.link,
                "A message is longer than its link can send; it is parked"
            );
            self.status.parked.fetch_add(1, Ordering::Relaxed);
            metrics::counter!(names.parked_total).increment(1);
            self.parked(
                json!({names.id_key: id.to_string(), "kind": kind, "code": null, "reason": TOO_LONG}),
            );
        }
        self.status.backlog.fetch_add(queued, Ordering::Relaxed);
        metrics::counter!(names.queued_total).increment(queued);
        self.publish_oldest()?;
        self.wake.notify_one();
        Ok(())
    }

    fn oldest(&self) -> Result<Option<Pending>, OutboxError> {
        self.db
            .lock()
            .query_row(
                &format!(
                    "SELECT id, kind, created_ms, body FROM {} WHERE state = 'pending'
                     ORDER BY id LIMIT 1",
                    self.names().table
                ),
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
        metrics::gauge!(self.names().backlog).set(s.backlog.load(Ordering::Relaxed) as f64);
        metrics::gauge!(self.names().parked).set(s.parked.load(Ordering::Relaxed) as f64);
        Ok(())
    }

    /// The backlog and parked counts as the table holds them (at start-up, after pruning).
    fn count(&self) -> Result<(), OutboxError> {
        let (pending, parked): (u64, u64) = self
            .db
            .lock()
            .query_row(
                &format!(
                    "SELECT count(*) FILTER (WHERE state = 'pending'),
                            count(*) FILTER (WHERE state = 'parked') FROM {}",
                    self.names().table
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err(e))?;
        self.status.backlog.store(pending, Ordering::Relaxed);
        self.status.parked.store(parked, Ordering::Relaxed);
        self.publish_oldest()
    }

    /// End reports for alarms an earlier run reported started and never ended, each with the
    /// patient its bed is admitted with in `admissions` (as the earlier run left it: the
    /// monitors have not said hello yet).
    fn unfinished_alarms(&self, admissions: &Admissions) -> Result<Vec<Draft>, OutboxError> {
        let c = self.db.lock();
        let mut st = c
            .prepare(&format!(
                "SELECT a.id, a.bed, a.kind, a.raised_ms, a.cleared_ms, a.acked_ms
                 FROM alarms a JOIN (SELECT alarm_id FROM {} WHERE kind = 'alarm'
                                     GROUP BY alarm_id HAVING sum(phase = 'end') = 0) o
                   ON a.id = o.alarm_id
                 ORDER BY a.id",
                self.names().table
            ))
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
                    patient: admissions.get(&bed),
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
    /// except the rows of a dashboard alarm whose end has not been queued (a restart still
    /// needs to know it started; a monitor's alarm, which its monitor may never end, is
    /// pruned as an observation is). Parked alarms are kept. The counts are read again
    /// afterwards (the parked observations deleted are no longer parked).
    fn prune(&self) -> Result<(), OutboxError> {
        let before = now_ms() - (self.spec.keep_sent_hours * 3.6e6) as i64;
        let table = self.names().table;
        self.exec(
            &format!(
                "DELETE FROM {table} WHERE done_ms < ?1
                   AND ((state = 'parked' AND kind = 'observation')
                        OR (state IN ('acked', 'dropped')
                            AND (kind IN ('observation', ?2)
                                 OR (kind = 'alarm' AND alarm_id IN
                                     (SELECT alarm_id FROM {table} WHERE kind = 'alarm' AND phase = 'end')))))"
            ),
            params![before, monitor_alarms::KIND],
        )?;
        self.count()
    }
}

#[cfg(test)]
mod tests;
