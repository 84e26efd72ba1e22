//! The [`store`](super)'s writer thread: the only SQLite writer. It takes commands from a
//! bounded channel, commits them in batched transactions, publishes scores to the live
//! listeners (as it takes them) and monitor alarms' rows (once committed), sweeps retention
//! hourly, and on a storage fault holds rows in its [`Backlog`](super::backlog::Backlog) until
//! the database can be written again.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

use super::backlog::{self, Backlog, Backoff, StorageFault};
use super::monitor_alarms::{self, MonitorAlarmChange, MonitorAlarmPhase};
use super::{Cmd, ScoreRecord, StoreHealth, lifecycle, now_ms};

pub(super) struct Writer {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    pub(super) rx: Receiver<Cmd>,
    pub(super) batch_rows: usize,
    pub(super) flush: Duration,
    pub(super) retention: super::retention::Policy,
    pub(super) health: Arc<StoreHealth>,
    pub(super) committed: tokio::sync::broadcast::Sender<Arc<ScoreRecord>>,
    /// Monitor alarms' rows as committed (the board and the outbound feeds listen).
    pub(super) monitor_alarms: tokio::sync::broadcast::Sender<Arc<MonitorAlarmChange>>,
    /// Rows of failed transactions, oldest first; non-empty only during a storage fault.
    pub(super) backlog: Backlog<Cmd>,
    pub(super) backoff: Backoff,
    /// The backlog overflowed in this fault episode (logged once).
    pub(super) overflowed: bool,
}

impl Writer {
    pub(super) fn run(mut self) {
        let mut last_retention = Instant::now() - Duration::from_secs(3600);
        loop {
            self.health.heartbeats.fetch_add(1, Ordering::Relaxed);
            let wait = if self.backlog.is_empty() {
                Duration::from_secs(1)
            } else {
                self.backoff
                    .due()
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_secs(1))
            };
            let first = match self.rx.recv_timeout(wait) {
                Ok(c) => c,
                Err(RecvTimeoutError::Timeout) => {
                    self.retry();
                    self.retention(&mut last_retention);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut closing = matches!(first, Cmd::Close);
            let mut batch = vec![first];
            // Take what is already queued (batching under load costs no latency at low load),
            // then wait at most `flush` for more.
            while batch.len() < self.batch_rows && !closing {
                match self.rx.try_recv() {
                    Ok(c) => {
                        closing = matches!(c, Cmd::Close);
                        batch.push(c);
                    }
                    Err(_) => break,
                }
            }
            let deadline = Instant::now() + self.flush;
            while batch.len() < self.batch_rows && !closing && !self.flush.is_zero() {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.rx.recv_timeout(left) {
                    Ok(c) => {
                        closing = matches!(c, Cmd::Close);
                        batch.push(c);
                    }
                    Err(_) => break,
                }
            }
            self.commit(batch);
            if closing {
                // Whatever was sent before the close is already in the channel: drain it.
                let rest: Vec<Cmd> = self.rx.try_iter().collect();
                if !rest.is_empty() {
                    self.commit(rest);
                }
                // A last try for rows still waiting on the database.
                if !self.backlog.is_empty() {
                    self.backoff = Backoff::new(Duration::ZERO, Duration::ZERO);
                    self.retry();
                    if !self.backlog.is_empty() {
                        tracing::error!(
                            rows = self.backlog.len(),
                            "The database is still not writable at shutdown; rows held in memory are lost"
                        );
                    }
                }
                // A clean stop is recorded only when nothing is left behind; otherwise the
                // next start finds no stop and records an unclean shutdown.
                if self.backlog.is_empty() {
                    if let Err(e) = lifecycle::record_stop(&self.conn) {
                        tracing::error!(error = %e, "Could not record the clean stop");
                    }
                    lifecycle::checkpoint(&self.conn);
                }
                break;
            }
            self.retention(&mut last_retention);
        }
        tracing::info!(path = %self.path.display(), "Store writer flushed and stopped");
    }

    /// Writes a batch, or holds it in the backlog (behind rows already waiting, so rows reach
    /// the database in the order they came) while the database cannot be written.
    fn commit(&mut self, mut batch: Vec<Cmd>) {
        batch.retain(|c| !matches!(c, Cmd::Close));
        if batch.is_empty() {
            return;
        }
        if !self.backlog.is_empty() {
            self.taken(&batch);
            self.hold(batch);
            self.retry();
            return;
        }
        let t = Instant::now();
        match write(&mut self.conn, &batch) {
            Ok(changes) => {
                metrics::histogram!("holmes_sqlite_commit_seconds")
                    .record(t.elapsed().as_secs_f64());
                self.taken(&batch);
                self.committed(&batch, changes);
            }
            Err(e) if backlog::is_storage_fault(&e) => {
                self.fault(&e);
                self.taken(&batch);
                self.hold(batch);
            }
            Err(e) => {
                self.taken(&batch);
                self.reject(&e, batch.len());
            }
        }
    }

    /// Records the end-to-end latency of the batch's scores and publishes them to the live
    /// listeners: once per row, when the writer takes it (committed or held).
    fn taken(&self, batch: &[Cmd]) {
        let now = Instant::now();
        let mut recent = self.health.recent.lock().expect("lock");
        for c in batch {
            if let Cmd::Score(r) = c {
                let e2e = now.duration_since(r.last_sample_at);
                metrics::histogram!("holmes_end_to_end_seconds").record(e2e.as_secs_f64());
                if r.score.is_some() {
                    recent.push(now, e2e.as_secs_f32() * 1000.0);
                }
            }
        }
        drop(recent);
        for c in batch {
            if let Cmd::Score(r) = c {
                let _ = self.committed.send(r.clone());
            }
        }
    }

    /// Counts the committed scores and tells the listeners the monitor alarms' `changes`.
    fn committed(&self, rows: &[Cmd], changes: Vec<MonitorAlarmChange>) {
        let scores = rows.iter().filter(|c| matches!(c, Cmd::Score(_))).count() as u64;
        self.health
            .committed_scores
            .fetch_add(scores, Ordering::Relaxed);
        for c in changes {
            // None listening (no page, no link) is no error.
            let _ = self.monitor_alarms.send(Arc::new(c));
        }
    }

    /// A transaction failed on storage: the first failure of an episode is logged (once) and
    /// raises the fault; every failure is counted.
    fn fault(&mut self, e: &rusqlite::Error) {
        self.health
            .failed_transactions
            .fetch_add(1, Ordering::Relaxed);
        metrics::counter!("holmes_store_write_errors_total").increment(1);
        *self.health.last_error.lock().expect("lock") = Some(e.to_string());
        self.backoff.failed(Instant::now());
        let mut fault = self.health.fault.lock().expect("lock");
        match &mut *fault {
            Some(f) => {
                f.retries += 1;
                f.error = e.to_string();
                tracing::debug!(error = %e, retries = f.retries, "Database still not writable");
            }
            None => {
                tracing::error!(
                    path = %self.path.display(), error = %e, capacity = self.backlog_capacity(),
                    "Database write failed; holding rows in memory and retrying until it recovers"
                );
                *fault = Some(StorageFault {
                    since_ms: now_ms(),
                    error: e.to_string(),
                    retries: 0,
                });
                self.health.fault_episodes.fetch_add(1, Ordering::Relaxed);
                self.health.writable.store(false, Ordering::Relaxed);
                metrics::gauge!("holmes_store_fault").set(1.0);
            }
        }
    }

    fn backlog_capacity(&self) -> usize {
        self.health.backlog_capacity.load(Ordering::Relaxed)
    }

    /// Rows the database refused for a reason that waiting cannot fix: counted and logged.
    fn reject(&self, e: &rusqlite::Error, rows: usize) {
        self.health
            .failed_transactions
            .fetch_add(1, Ordering::Relaxed);
        self.health
            .rejected_rows
            .fetch_add(rows as u64, Ordering::Relaxed);
        metrics::counter!("holmes_store_write_errors_total").increment(1);
        metrics::counter!("holmes_store_rejected_rows_total").increment(rows as u64);
        *self.health.last_error.lock().expect("lock") = Some(e.to_string());
        tracing::error!(error = %e, rows, "The database refused a batch; its rows are dropped");
    }

    /// Appends rows to the backlog, dropping (and counting) the oldest when it is full.
    fn hold(&mut self, batch: Vec<Cmd>) {
        let mut dropped = 0u64;
        for c in batch {
            if self.backlog.push(c).is_some() {
                dropped += 1;
            }
        }
        if dropped > 0 {
            self.health
                .backlog_dropped_rows
                .fetch_add(dropped, Ordering::Relaxed);
            metrics::counter!("holmes_store_backlog_dropped_rows_total").increment(dropped);
            if !self.overflowed {
                self.overflowed = true;
                tracing::error!(
                    capacity = self.backlog_capacity(),
                    "Storage backlog full; dropping the oldest rows (counted in /api/health)"
                );
            }
        }
        self.backlog_changed();
    }

    fn backlog_changed(&self) {
        self.health
            .backlog_rows
            .store(self.backlog.len(), Ordering::Relaxed);
        metrics::gauge!("holmes_store_backlog_rows").set(self.backlog.len() as f64);
    }

    /// Writes the backlog, oldest first, one batch per transaction, if its retry is due.
    fn retry(&mut self) {
        while !self.backlog.is_empty() && Instant::now() >= self.backoff.due() {
            let rows = self.backlog.front(self.batch_rows);
            let n = rows.len();
            match write(&mut self.conn, rows) {
                Ok(changes) => {
                    let written: Vec<Cmd> = self.backlog.pop_front(n).collect();
                    self.committed(&written, changes);
                    self.backlog_changed();
                }
                Err(e) if backlog::is_storage_fault(&e) => {
                    self.fault(&e);
                    return;
                }
                Err(e) => {
                    self.backlog.pop_front(n).for_each(drop);
                    self.reject(&e, n);
                    self.backlog_changed();
                }
            }
        }
        if self.backlog.is_empty() {
            self.recovered();
        }
    }

    /// The backlog is written: the fault episode ends.
    fn recovered(&mut self) {
        let Some(f) = self.health.fault.lock().expect("lock").take() else {
            return;
        };
        self.backoff.reset();
        self.overflowed = false;
        self.health.writable.store(true, Ordering::Relaxed);
        metrics::gauge!("holmes_store_fault").set(0.0);
        tracing::warn!(
            secs = (now_ms() - f.since_ms) as f64 / 1000.0,
            retries = f.retries,
            dropped_rows = self.health.backlog_dropped_rows.load(Ordering::Relaxed),
            "Database writable again; the held rows are written"
        );
    }
}

/// Writes `batch` in one transaction; the monitor alarms' rows it changed, in order.
fn write(conn: &mut Connection, batch: &[Cmd]) -> rusqlite::Result<Vec<MonitorAlarmChange>> {
    let tx = conn.transaction()?;
    let mut changes = Vec::new();
    for cmd in batch {
        match cmd {
            Cmd::Close => {}
            Cmd::Score(r) => {
                let latency_ms = r.last_sample_at.elapsed().as_secs_f64() * 1000.0;
                tx.execute(
                    "INSERT INTO scores (bed, window_index, window_start_ms, window_end_ms, status, score,
                        members, ensemble_id, quality, latency_ms, committed_ms, missing, timing)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    params![
                        &*r.bed,
                        r.window_index as i64,
                        r.start_ms,
                        r.end_ms,
                        r.status.as_str(),
                        r.score,
                        serde_json::to_string(&r.members).expect("members serialise"),
                        (r.ensemble_id > 0).then_some(r.ensemble_id),
                        serde_json::to_string(&r.quality).expect("quality serialises"),
                        latency_ms,
                        now_ms(),
                        serde_json::to_string(&r.missing).expect("names serialise"),
                        r.timing.as_ref().map(|t| t.to_string()),
                    ],
                )?;
            }
            Cmd::Event(e, at) => {
                tx.execute(
                    "INSERT INTO events (bed, at_ms, kind, detail) VALUES (?1, ?2, ?3, ?4)",
                    params![e.origin.as_str(), at, e.kind.as_str(), e.detail.to_string()],
                )?;
            }
            Cmd::MonitorAlarm(a) => {
                // Sent again (a monitor resending after a reconnect): nothing changed.
                if let Some(alarm) = monitor_alarms::insert(&tx, a)? {
                    changes.push(MonitorAlarmChange {
                        phase: MonitorAlarmPhase::Raised,
                        alarm,
                    });
                }
            }
            Cmd::MonitorAlarmEnd { bed, id, end_ms } => {
                // The newest alarm of that id that began by its end.
                match monitor_alarms::end(&tx, bed, id, *end_ms)? {
                    Some(alarm) => changes.push(MonitorAlarmChange {
                        phase: MonitorAlarmPhase::Ended,
                        alarm,
                    }),
                    None => {
                        metrics::counter!("holmes_monitor_alarm_ends_unmatched_total").increment(1);
                    }
                }
            }
            Cmd::BedSeen(bed, device, at) => {
                tx.execute(
                    "INSERT INTO beds (bed, device, first_seen_ms, last_seen_ms) VALUES (?1, ?2, ?3, ?3)
                     ON CONFLICT (bed) DO UPDATE SET device = ?2, last_seen_ms = ?3",
                    params![bed, device, at],
                )?;
            }
        }
    }
    tx.commit()?;
    Ok(changes)
}

impl Writer {
    fn retention(&mut self, last: &mut Instant) {
        if last.elapsed() < Duration::from_secs(3600) {
            return;
        }
        *last = Instant::now();
        match super::retention::sweep(&self.conn, self.retention, now_ms()) {
            Ok(s) => tracing::debug!(
                expired_scores = s.expired_scores,
                expired_events = s.expired_events,
                expired_monitor_alarms = s.expired_monitor_alarms,
                thinned_scores = s.thinned_scores,
                "Retention sweep"
            ),
            Err(e) => tracing::warn!(error = %e, "Retention sweep failed"),
        }
    }
}
