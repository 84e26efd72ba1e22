//! SQLite storage: one writer thread taking commands from a bounded channel and committing
//! them in batched transactions (WAL mode), schema migrations keyed by `PRAGMA user_version`,
//! [`retention`] (expiry, and thinning of old scores), and read queries for the API. When SQLite cannot write, rows wait in the
//! writer's bounded [`backlog`] and are written in order once it recovers.
//!
//! Fed through [`StoreHandle`]: the ward's events and hellos (through the daemon's ward sink),
//! the engine's scores, the zoo's and the composer's events; read through [`StoreReader`] by
//! the API. [`audit`] writes the audit log; [`lifecycle`] records starts and stops;
//! [`admissions`] keeps the beds' patients across restarts; [`monitor_alarms`] keeps the
//! monitors' own alarms with Holmes's opinions, each change broadcast once committed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::json;

use crate::config::StorageConfig;
use crate::core::event::Event;
use crate::core::score::ScoreRecord;
use crate::core::time::now_ms;

mod db;
pub(crate) mod monitor_alarms;
mod schema;
pub use db::Db;
pub(crate) use db::{open, open_read_only};
pub use schema::Schema;
pub(crate) use schema::{MIGRATIONS, Migration, STORE, migrate};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("database {path}: schema version {found} is newer than this build knows ({known})")]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
}

enum Cmd {
    /// Commit what is queued and stop.
    Close,
    Score(Arc<ScoreRecord>),
    Event(Event, i64),
    BedSeen(String, String, i64),
    MonitorAlarm(Box<MonitorAlarmRow>),
    MonitorAlarmEnd {
        bed: Arc<str>,
        id: String,
        end_ms: i64,
    },
}

/// Health of the writer, shared with `/health/ready` and `/api/health`.
#[derive(Debug, Default)]
pub struct StoreHealth {
    pub(crate) writable: AtomicBool,
    pub committed_scores: AtomicU64,
    pub(crate) dropped_commands: AtomicU64,
    /// Turns of the writer's loop (at least one a second when idle): the watchdog's sign of
    /// life.
    pub(crate) heartbeats: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
    /// The storage fault in progress, if any.
    pub(crate) fault: Mutex<Option<StorageFault>>,
    /// Storage fault episodes since start.
    pub(crate) fault_episodes: AtomicU64,
    /// Transactions that failed (first tries and retries).
    pub(crate) failed_transactions: AtomicU64,
    /// Rows waiting in memory for the database.
    pub(crate) backlog_rows: AtomicUsize,
    /// The backlog's capacity (`storage.backlog_rows`).
    pub(crate) backlog_capacity: AtomicUsize,
    /// Rows dropped from a full backlog (oldest first), since start.
    pub(crate) backlog_dropped_rows: AtomicU64,
    /// Rows the database refused for a reason other than storage (never retried).
    pub(crate) rejected_rows: AtomicU64,
    /// End-to-end latency of the latest scored windows (bounded), for the composer's watch
    /// on the budget.
    pub(crate) recent: Mutex<RecentLatency>,
}

/// The latest end-to-end latencies (ms) with their commit instants, at most [`RECENT_MAX`].
#[derive(Debug, Default)]
pub(crate) struct RecentLatency(std::collections::VecDeque<(Instant, f32)>);

pub(crate) const RECENT_MAX: usize = 4096;

/// The storage part of `/api/health`: a snapshot of [`StoreHealth`].
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StorageView {
    writable: bool,
    /// The storage fault in progress (null when none).
    fault: Option<StorageFault>,
    fault_episodes: u64,
    failed_transactions: u64,
    backlog_rows: usize,
    backlog_capacity: usize,
    backlog_dropped_rows: u64,
    rejected_rows: u64,
    dropped_commands: u64,
    committed_scores: u64,
    last_error: Option<String>,
}

impl StoreHealth {
    /// The storage part of `/api/health`.
    pub(crate) fn view(&self) -> StorageView {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StorageView {
            writable: self.writable.load(Ordering::Relaxed),
            fault: self.fault.lock().expect("lock").clone(),
            fault_episodes: n(&self.fault_episodes),
            failed_transactions: n(&self.failed_transactions),
            backlog_rows: self.backlog_rows.load(Ordering::Relaxed),
            backlog_capacity: self.backlog_capacity.load(Ordering::Relaxed),
            backlog_dropped_rows: n(&self.backlog_dropped_rows),
            rejected_rows: n(&self.rejected_rows),
            dropped_commands: n(&self.dropped_commands),
            committed_scores: n(&self.committed_scores),
            last_error: self.last_error.lock().expect("lock").clone(),
        }
    }
}

impl RecentLatency {
    pub(crate) fn push(&mut self, at: Instant, ms: f32) {
        if self.0.len() == RECENT_MAX {
            self.0.pop_front();
        }
        self.0.push_back((at, ms));
    }

    /// p50, p95 and p99 (ms) and the count of the latencies committed within `span`.
    pub(crate) fn percentiles(&self, span: Duration) -> Option<([f64; 3], usize)> {
        let now = Instant::now();
        let mut v: Vec<f64> = self
            .0
            .iter()
            .rev()
            .take_while(|(t, _)| now.duration_since(*t) <= span)
            .map(|x| x.1 as f64)
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| crate::core::stats::percentile(&v, p);
        Some(([q(0.5), q(0.95), q(0.99)], v.len()))
    }

    /// p95 (ms) and count of the latencies committed within `span` before now.
    pub(crate) fn p95(&self, span: Duration) -> Option<(f64, usize)> {
        self.percentiles(span).map(|(q, n)| (q[1], n))
    }
}

/// Handle to the writer thread. Cheap to clone; sending never blocks an async task.
#[derive(Clone)]
pub struct StoreHandle {
    tx: SyncSender<Cmd>,
    pub health: Arc<StoreHealth>,
    /// Every score once it is committed (the dashboard listens; a slow listener lags and
    /// skips, it never holds the writer back).
    committed: tokio::sync::broadcast::Sender<Arc<ScoreRecord>>,
    /// Every monitor alarm's row once committed, raised and ended (the dashboard's board and
    /// the outbound links' feeds listen; a lagging listener skips and is told how many).
    monitor_alarms: tokio::sync::broadcast::Sender<Arc<MonitorAlarmChange>>,
}

/// Scores a lagging listener may fall behind by before it skips.
const COMMITTED_BACKLOG: usize = 4096;
/// Monitor alarm changes a lagging listener may fall behind by before it skips (a ward's
/// monitors raise a few an hour a bed; a burst of a whole ward's fits many times over).
const MONITOR_ALARM_BACKLOG: usize = 1024;

/// The ensemble and models this run serves, recorded at start-up.
pub struct ServedEnsemble<'a> {
    pub members: &'a [(String, u32, String, String)], // name, version, sha256, input
    pub source: &'a str,
    /// The plan's cells as JSON; a score's `ensemble_id` names members, plan and beat counter
    /// together.
    pub plan: String,
    /// SHA-256 of the beat counter served beside the members (`models/beats.json`), if any: a
    /// new counter is a new ensemble, as it is in the alarm rules.
    pub counter: Option<&'a str>,
    /// The primary lead's share the members pool with (`None`: the plain mean): another
    /// pooling is another ensemble.
    pub primary_share: Option<f64>,
}

/// Records the models and the ensemble (members, plan and beat counter) of `ensemble`, reusing
/// an identical row; returns the ensemble's id.
fn register(c: &Connection, ensemble: &ServedEnsemble<'_>) -> rusqlite::Result<i64> {
    let now = now_ms();
    for (name, version, sha, input) in ensemble.members {
        c.execute(
            "INSERT OR IGNORE INTO models (name, version, sha256, input, first_loaded_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![name, version, sha, input, now],
        )?;
    }
    let members = json!(
        ensemble
            .members
            .iter()
            .map(|m| json!({"name": m.0, "version": m.1}))
            .chain(ensemble.counter.map(|sha| json!({"beat_counter": sha})))
            .chain(ensemble.primary_share.map(|s| json!({"primary_share": s})))
            .collect::<Vec<_>>()
    )
    .to_string();
    let existing: Option<i64> = c
        .query_row(
            "SELECT id FROM ensembles WHERE members = ?1 AND plan = ?2 ORDER BY id DESC LIMIT 1",
            params![&members, &ensemble.plan],
            |r| r.get(0),
        )
        .optional()?;
    match existing {
        Some(id) => Ok(id),
        None => {
            c.execute(
                "INSERT INTO ensembles (members, created_ms, source, plan) VALUES (?1, ?2, ?3, ?4)",
                params![members, now, ensemble.source, ensemble.plan],
            )?;
            Ok(c.last_insert_rowid())
        }
    }
}

/// Records an ensemble while the daemon runs (through the ward's shared connection; WAL lets
/// it write beside the writer thread). Returns the ensemble's id.
pub(crate) fn register_ensemble(db: &Db, ensemble: &ServedEnsemble<'_>) -> Result<i64, StoreError> {
    register(&db.lock(), ensemble).map_err(|source| db.err(source))
}

/// Opens (creating and migrating) the database, records the served ensemble, and starts the
/// writer thread. Returns the handle and the ensemble's id.
pub fn start(
    cfg: &StorageConfig,
    schema: &Schema,
    ensemble: ServedEnsemble<'_>,
) -> Result<(StoreHandle, i64, std::thread::JoinHandle<()>), StoreError> {
    let path = cfg.db.clone();
    let err = |source| StoreError::Sqlite {
        path: path.clone(),
        source,
    };
    let mut c = open(&path)?;
    migrate(&mut c, &path, schema)?;
    let ensemble_id = register(&c, &ensemble).map_err(err)?;
    if let Some(u) = lifecycle::record_start(&c).map_err(err)? {
        tracing::warn!(
            previous_start_ms = u.previous_start_ms,
            last_commit_ms = u.last_commit_ms,
            beds = u.beds,
            "The previous run did not shut down cleanly; recorded as unclean_shutdown"
        );
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(cfg.batch_rows * 16);
    let health = Arc::new(StoreHealth::default());
    health.writable.store(true, Ordering::Relaxed);
    health
        .backlog_capacity
        .store(cfg.backlog_rows, Ordering::Relaxed);
    metrics::gauge!("holmes_store_fault").set(0.0);
    let (committed, _) = tokio::sync::broadcast::channel(COMMITTED_BACKLOG);
    let (monitor_alarms, _) = tokio::sync::broadcast::channel(MONITOR_ALARM_BACKLOG);
    let writer = Writer {
        conn: c,
        path,
        rx,
        batch_rows: cfg.batch_rows,
        flush: Duration::from_millis(cfg.flush_ms),
        retention: retention::Policy::of(cfg),
        health: health.clone(),
        committed: committed.clone(),
        monitor_alarms: monitor_alarms.clone(),
        backlog: Backlog::new(cfg.backlog_rows),
        backoff: Backoff::new(
            Duration::from_millis(cfg.retry_min_ms),
            Duration::from_millis(cfg.retry_max_ms),
        ),
        overflowed: false,
    };
    let join = std::thread::Builder::new()
        .name("holmes-store".into())
        .spawn(move || writer.run())
        .expect("spawn the store writer");
    Ok((
        StoreHandle {
            tx,
            health,
            committed,
            monitor_alarms,
        },
        ensemble_id,
        join,
    ))
}

impl StoreHandle {
    /// Scores from now on, as the writer takes them: committed, or held in the backlog while
    /// the database cannot be written (so the live ward keeps moving through a storage fault).
    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<ScoreRecord>> {
        self.committed.subscribe()
    }

    /// Monitor alarms from now on, each as the writer commits its row (raised, with or without
    /// an opinion) and its end: once written, never while a storage fault holds it.
    pub(crate) fn subscribe_monitor_alarms(
        &self,
    ) -> tokio::sync::broadcast::Receiver<Arc<MonitorAlarmChange>> {
        self.monitor_alarms.subscribe()
    }

    fn send(&self, cmd: Cmd) {
        match self.tx.try_send(cmd) {
            Ok(()) => {}
            Err(TrySendError::Full(cmd)) => {
                // Scores and monitor alarms must not be lost: wait for room. Engine threads
                // may block; a tokio worker (a bed committing a superseded window) hands the
                // wait to the runtime.
                if matches!(
                    cmd,
                    Cmd::Score(_) | Cmd::MonitorAlarm(_) | Cmd::MonitorAlarmEnd { .. }
                ) {
                    let on_worker = tokio::runtime::Handle::try_current().is_ok_and(|h| {
                        h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
                    });
                    if on_worker {
                        tokio::task::block_in_place(|| {
                            let _ = self.tx.send(cmd);
                        });
                    } else {
                        let _ = self.tx.send(cmd);
                    }
                } else {
                    self.health.dropped_commands.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                self.health.dropped_commands.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Asks the writer to commit everything sent so far and stop (the last step of shutdown).
    pub fn close(&self) {
        let _ = self.tx.send(Cmd::Close);
    }

    pub(crate) fn score(&self, r: ScoreRecord) {
        self.send(Cmd::Score(Arc::new(r)));
    }

    /// A monitor's alarm with its opinion; a second row for the same bed and id is ignored
    /// (a monitor resending after a reconnect).
    pub(crate) fn monitor_alarm(&self, row: MonitorAlarmRow) {
        self.send(Cmd::MonitorAlarm(Box::new(row)));
    }

    /// The monitor's alarm `id` of `bed` ended at `end_ms` (device time).
    pub(crate) fn monitor_alarm_end(&self, bed: Arc<str>, id: String, end_ms: i64) {
        self.send(Cmd::MonitorAlarmEnd { bed, id, end_ms });
    }

    pub(crate) fn event(&self, e: Event) {
        self.send(Cmd::Event(e, now_ms()));
    }

    pub(crate) fn bed_seen(&self, bed: &str, device: &str) {
        self.send(Cmd::BedSeen(bed.to_owned(), device.to_owned(), now_ms()));
    }
}

pub(crate) mod admissions;
pub mod audit;
mod backlog;
pub(crate) mod lifecycle;
mod reader;
mod retention;
mod writer;
pub(crate) use backlog::StorageFault;
use backlog::{Backlog, Backoff};
pub use monitor_alarms::{AlarmStrip, MonitorAlarmView};
pub(crate) use monitor_alarms::{MonitorAlarmChange, MonitorAlarmPhase, MonitorAlarmRow};
pub use reader::{ScoreRow, StoreReader};
use writer::Writer;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_beat_counter_is_a_new_ensemble() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.db");
        let mut c = open(&p).unwrap();
        migrate(&mut c, &p, &STORE).unwrap();
        let members = [("m".to_owned(), 1, "aa".to_owned(), "ecg".to_owned())];
        let served = |counter| ServedEnsemble {
            members: &members,
            source: "test",
            plan: "[]".into(),
            counter,
            primary_share: None,
        };
        let plain = register(&c, &served(None)).unwrap();
        let counted = register(&c, &served(Some("c1"))).unwrap();
        let recounted = register(&c, &served(Some("c2"))).unwrap();
        assert_ne!(plain, counted);
        assert_ne!(counted, recounted);
        // The same members, plan and counter reuse their row.
        assert_eq!(register(&c, &served(Some("c1"))).unwrap(), counted);
        assert_eq!(register(&c, &served(None)).unwrap(), plain);
        let stored: String = c
            .query_row(
                "SELECT members FROM ensembles WHERE id = ?1",
                [counted],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            stored,
            json!([{"name": "m", "version": 1}, {"beat_counter": "c1"}]).to_string()
        );
        // Pooled by lead, the same members and counter are another ensemble.
        let pooled = ServedEnsemble {
            primary_share: Some(0.9),
            ..served(Some("c1"))
        };
        let weighted = register(&c, &pooled).unwrap();
        assert_ne!(weighted, counted);
        assert_eq!(register(&c, &pooled).unwrap(), weighted);
        let stored: String = c
            .query_row(
                "SELECT members FROM ensembles WHERE id = ?1",
                [weighted],
                |r| r.get(0),
            )
            .unwrap();
        assert!(stored.ends_with(r#"{"primary_share":0.9}]"#), "{stored}");
    }

    #[test]
    fn migrations_apply_once_and_refuse_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.db");
        let mut c = open(&p).unwrap();
        migrate(&mut c, &p, &STORE).unwrap();
        migrate(&mut c, &p, &STORE).unwrap();
        let v: i64 = c
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, STORE.version());
        c.pragma_update(None, "user_version", 99).unwrap();
        let e = migrate(&mut c, &p, &STORE).unwrap_err().to_string();
        assert!(e.contains("h.db") && e.contains("newer"), "{e}");
    }

    #[test]
    fn storage_view_shows_the_fault_and_the_backlog() {
        let h = StoreHealth::default();
        assert_eq!(
            serde_json::to_value(h.view()).unwrap(),
            json!({"writable": false, "fault": null, "fault_episodes": 0,
                   "failed_transactions": 0, "backlog_rows": 0, "backlog_capacity": 0,
                   "backlog_dropped_rows": 0, "rejected_rows": 0, "dropped_commands": 0,
                   "committed_scores": 0, "last_error": null})
        );
        h.writable.store(true, Ordering::Relaxed);
        *h.fault.lock().unwrap() = Some(StorageFault {
            since_ms: 5,
            error: "disk full".into(),
            retries: 2,
        });
        *h.last_error.lock().unwrap() = Some("disk full".into());
        for (a, v) in [
            (&h.fault_episodes, 1),
            (&h.failed_transactions, 3),
            (&h.backlog_dropped_rows, 4),
            (&h.rejected_rows, 5),
            (&h.dropped_commands, 6),
            (&h.committed_scores, 7),
        ] {
            a.store(v, Ordering::Relaxed);
        }
        h.backlog_rows.store(8, Ordering::Relaxed);
        h.backlog_capacity.store(9, Ordering::Relaxed);
        assert_eq!(
            serde_json::to_value(h.view()).unwrap(),
            json!({"writable": true,
                   "fault": {"since_ms": 5, "error": "disk full", "retries": 2},
                   "fault_episodes": 1, "failed_transactions": 3, "backlog_rows": 8,
                   "backlog_capacity": 9, "backlog_dropped_rows": 4, "rejected_rows": 5,
                   "dropped_commands": 6, "committed_scores": 7, "last_error": "disk full"})
        );
    }
}
