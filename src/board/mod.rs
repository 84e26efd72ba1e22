//! The ward board and its alarm book, the stage below both the page and the outbound links:
//! [`alarms`] is the alarm state machine (risk and technical alarms: raised, acknowledged,
//! silenced, ended) and its table, [`recorder`] stores each change and only then
//! [`handover`] hands it to the links without waiting, [`monitor_alarms`] keeps each bed's
//! monitor alarms with Holmes's opinions. The dashboard (`dashboard`) shows what the board
//! publishes; the links (`outbound`) read its alarm feed; neither imports the other.
//!
//! The board itself is an actor that keeps what the ward page shows (one tile per bed with its
//! latest score, trend, quality and state, and its monitor's recent alarms with Holmes's
//! opinions; the active alarms) from the scores the [`store`](crate::serving::store)'s writer
//! takes (committed, or held through a storage fault), the monitor alarms it commits, and the
//! [`ward`](crate::serving::ward)'s bed states, and publishes a
//! snapshot every second through a `watch` channel. Every page reads the latest snapshot, so
//! a slow or stuck client never holds back ingest or scoring. Alarm actions arrive as
//! commands and are persisted by [`AlarmDb`](alarms::AlarmDb) off the async workers.
//!
//! The risk alarm rule is the served plan's ([`served`](crate::composer::served): chosen below,
//! in the composer, for the ensemble serving now); the board serves each rule the plan
//! publishes and shows the one it serves ([`Board::alarm_rule`], read by `/api/health`).

pub(crate) mod alarms;
pub(crate) mod handover;
pub(crate) mod monitor_alarms;
mod recorder;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::composer::rule::ServedRule;
use crate::composer::served::ServedPlan;
use crate::config::DashboardConfig;
use crate::core::score::ScoreRecord;
use crate::core::score::ScoreStatus;
use crate::core::time::now_ms;
use crate::serving::store::audit::Action;
use crate::serving::store::{MonitorAlarmChange, StoreHandle, StoreReader};
use crate::serving::ward::{BedStatus, Ward};
use alarms::{Alarm, AlarmDb, AlarmError, Alarms, Thresholds, Transition};
use monitor_alarms::{MonitorAlarmBook, TileMonitorAlarm};
use recorder::Record;

/// One bed's tile.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Tile {
    pub(crate) bed: String,
    pub(crate) label: String,
    pub(crate) status: BedStatus,
    pub(crate) connected: bool,
    pub(crate) data_age_secs: Option<f64>,
    pub(crate) latest: Option<Latest>,
    /// `(window end ms, score)` over the trend span, oldest first.
    pub(crate) trend: Vec<(i64, f32)>,
    /// Active alarm kinds on this bed.
    pub(crate) alarms: Vec<&'static str>,
    /// The active risk alarm's onset: the end of the window at which the rule was met, on the
    /// bed's timeline (the monitor's clock, as the ECG strip's `end_ms`).
    pub(crate) risk_alarm_onset_ms: Option<i64>,
    /// Where that alarm's VT run began, when the beat counter raised it: the run's first beat,
    /// on the bed's timeline.
    pub(crate) risk_alarm_run_onset_ms: Option<i64>,
    /// When the ward raised that alarm (the server's clock: its age is counted from this).
    pub(crate) risk_alarm_raised_ms: Option<i64>,
    /// The monitor's own alarms received within the trend's span, newest first, at most
    /// [`SHOWN`](monitor_alarms::SHOWN), with Holmes's opinions.
    pub(crate) monitor_alarms: Vec<TileMonitorAlarm>,
}

/// A bed's latest committed window.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Latest {
    pub(crate) window_end_ms: i64,
    pub(crate) status: &'static str,
    pub(crate) score: Option<f32>,
    /// `low`, `elevated` (at or above the serving rule's `off`) or `high` (at or above its
    /// `on`).
    pub(crate) band: &'static str,
    pub(crate) partial: bool,
    pub(crate) missing: Vec<String>,
    /// Made by a cheaper rung of the plan's ladder.
    pub(crate) degraded: bool,
    /// Per lead slot the monitor sends: percent of the window lead-off, percent of samples
    /// that arrived, and whether the lead was usable (the members of its role scored it).
    pub(crate) leads: Vec<Option<(u8, u8, bool)>>,
}

/// What every dashboard client is sent.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Snapshot {
    pub(crate) generated_ms: i64,
    /// The serving rule's on-threshold (the tiles' trend line).
    pub(crate) risk_alarm_on: f64,
    pub(crate) beds: Vec<Tile>,
    pub(crate) alarms: Vec<Alarm>,
}

/// An alarm action by a signed-in user.
pub(crate) enum AlarmCmd {
    Ack {
        id: i64,
        user: String,
        reply: oneshot::Sender<Result<Alarm, AlarmError>>,
    },
    Silence {
        id: i64,
        user: String,
        secs: u64,
        reply: oneshot::Sender<Result<Alarm, AlarmError>>,
    },
}

/// Handle to the board. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Board {
    snapshot: watch::Receiver<Arc<Snapshot>>,
    /// The risk alarm rule serving now; the board's task holds the sender and changes it when
    /// another ensemble serves.
    rule: watch::Receiver<ServedRule>,
    cmd: mpsc::Sender<AlarmCmd>,
    /// One permit per open `/api/stream` client (`dashboard.max_stream_clients`).
    clients: Arc<tokio::sync::Semaphore>,
    max_clients: usize,
}

impl Board {
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    /// The risk alarm rule serving now.
    pub(crate) fn alarm_rule(&self) -> ServedRule {
        *self.rule.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshot.clone()
    }

    /// A place for one more live-feed client, held as long as its stream lives; `None` when
    /// `dashboard.max_stream_clients` are connected.
    pub(crate) fn stream_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.clients.clone().try_acquire_owned().ok()
    }

    /// Live-feed clients connected now.
    pub(crate) fn stream_clients(&self) -> usize {
        self.max_clients - self.clients.available_permits()
    }

    /// The most live-feed clients at once.
    pub(crate) fn max_stream_clients(&self) -> usize {
        self.max_clients
    }

    pub(crate) async fn ack(&self, id: i64, user: String) -> Result<Alarm, AlarmError> {
        let (reply, rx) = oneshot::channel();
        self.send(AlarmCmd::Ack { id, user, reply }).await;
        rx.await.unwrap_or(Err(AlarmError::Unknown(id)))
    }

    pub(crate) async fn silence(
        &self,
        id: i64,
        user: String,
        secs: u64,
    ) -> Result<Alarm, AlarmError> {
        let (reply, rx) = oneshot::channel();
        self.send(AlarmCmd::Silence {
            id,
            user,
            secs,
            reply,
        })
        .await;
        rx.await.unwrap_or(Err(AlarmError::Unknown(id)))
    }

    async fn send(&self, c: AlarmCmd) {
        let _ = self.cmd.send(c).await;
    }
}

struct BedBoard {
    latest: Option<Latest>,
    trend: VecDeque<(i64, f32)>,
}

/// Points kept per trend at most (4 h of 30-s windows is 480).
const TREND_MAX: usize = 2048;

/// What the board reads.
pub(crate) struct Sources {
    pub(crate) ward: Ward,
    pub(crate) store: StoreHandle,
    pub(crate) reader: StoreReader,
    /// What serves now and its risk alarm rule (the composer publishes it).
    pub(crate) plan: watch::Receiver<ServedPlan>,
    /// The database, for the alarms table.
    pub(crate) db: crate::serving::store::Db,
    /// Every alarm transition (raised, acknowledged, silenced, silence ended, cleared), for the
    /// outbound links (`outbound`: HL7, FHIR, each holding its receiver); `None` when nothing reads them. Sent
    /// without waiting, so the board never waits: a change that finds the channel full (or
    /// closed) is not reported; it is counted (`holmes_alarm_feed_dropped_total`, and a problem
    /// in `/api/health`) and logged at error once an episode.
    pub(crate) alarm_feed: Option<handover::AlarmFeed>,
}

/// Starts the board task, serving the served plan's risk alarm rule.
pub(crate) async fn start(
    cfg: DashboardConfig,
    src: Sources,
    shutdown: CancellationToken,
    tracker: &tokio_util::task::TaskTracker,
) -> Board {
    let (tx, snapshot) = watch::channel(Arc::new(Snapshot::default()));
    let (cmd_tx, cmd_rx) = mpsc::channel(64);
    let scores = src.store.subscribe();
    let monitor_alarms = src.store.subscribe_monitor_alarms();
    let max_clients = cfg.max_stream_clients;
    let first = src.plan.borrow().rule;
    let (rule_tx, rule) = watch::channel(first);
    tracker.spawn(run(
        cfg,
        src,
        (scores, monitor_alarms),
        Outputs {
            snapshot: tx,
            rule: rule_tx,
        },
        cmd_rx,
        shutdown,
    ));
    Board {
        snapshot,
        rule,
        cmd: cmd_tx,
        clients: Arc::new(tokio::sync::Semaphore::new(max_clients)),
        max_clients,
    }
}

/// What the board's task publishes.
struct Outputs {
    snapshot: watch::Sender<Arc<Snapshot>>,
    /// The rule the board serves now.
    rule: watch::Sender<ServedRule>,
}

async fn run(
    cfg: DashboardConfig,
    src: Sources,
    (mut scores, mut monitor_rx): (
        broadcast::Receiver<Arc<ScoreRecord>>,
        broadcast::Receiver<Arc<MonitorAlarmChange>>,
    ),
    outputs: Outputs,
    mut cmds: mpsc::Receiver<AlarmCmd>,
    shutdown: CancellationToken,
) {
    let Sources {
        ward,
        reader,
        mut plan,
        db,
        alarm_feed,
        ..
    } = src;
    let Outputs {
        snapshot: out,
        rule: rule_tx,
    } = outputs;
    let mut plan_open = true;
    let span_ms = (cfg.trend_hours * 3.6e6) as i64;
    // Alarm persistence and the trends' first fill run on the blocking pool.
    let since = now_ms() - span_ms;
    let audit_log = crate::serving::store::audit::AuditLog::new(&db);
    let seed = reader.clone();
    let (adb, last_id, mut beds) = match tokio::task::spawn_blocking(move || {
        let adb = AlarmDb::new(db);
        let last = adb.resume(now_ms())?;
        let mut beds: HashMap<String, BedBoard> = HashMap::new();
        for r in reader.latest_scores().unwrap_or_default() {
            let rows = reader
                .scores(&r.bed, since, i64::MAX, TREND_MAX as i64)
                .unwrap_or_default();
            let trend = rows
                .iter()
                .filter_map(|x| x.score.map(|s| (x.window_end_ms, s as f32)))
                .collect();
            beds.insert(
                r.bed.clone(),
                BedBoard {
                    latest: None,
                    trend,
                },
            );
        }
        Ok::<_, AlarmError>((adb, last, beds))
    })
    .await
    .expect("board start-up does not panic")
    {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(error = %e, "The dashboard board cannot start; alarms are off");
            return;
        }
    };
    let mut book = MonitorAlarmBook::read(&seed).await;
    // Every change is stored before it is handed to the outbound links, in order.
    let (recorder, recorder_thread) =
        recorder::start(adb, audit_log, alarm_feed, cfg.alarm_write_queue);
    let first_rule = *rule_tx.borrow();
    let mut alarms = Alarms::new(
        Thresholds {
            lead_off: cfg.lead_off_alarm,
            max_silence_secs: cfg.max_silence_secs,
        },
        first_rule,
        last_id,
    );
    // Automatic transitions (raised, cleared, expired) and users' actions go to the recorder.
    let persist = |ts: Vec<Transition>| {
        let recorder = recorder.clone();
        async move {
            if ts.is_empty() {
                return;
            }
            for t in &ts {
                if let Transition::Raised(a) = t {
                    tracing::info!(id = a.id, kind = a.kind.as_str(), "Alarm raised");
                }
            }
            let _ = recorder.send(Record::Changes(ts)).await;
        }
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            r = scores.recv() => match r {
                Ok(s) => {
                    let rung = plan.borrow().serving.rung;
                    // The lead-off alarm watches the first lead the monitor sends: the primary,
                    // or the secondary where it sends that alone.
                    let lead_off = s.quality.leads.iter().flatten().next().map(|l| l.lead_off_secs / ((s.end_ms - s.start_ms) as f64 / 1000.0).max(1.0));
                    let latest = latest_of(&s, rung > 0, alarms.rule());
                    let b = beds.entry(s.bed.to_string()).or_insert_with(|| BedBoard { latest: None, trend: VecDeque::new() });
                    if let Some(v) = s.score {
                        b.trend.push_back((s.end_ms, v));
                        while b.trend.len() > TREND_MAX || b.trend.front().is_some_and(|x| x.0 < s.end_ms.saturating_sub(span_ms)) {
                            b.trend.pop_front();
                        }
                    }
                    b.latest = Some(latest);
                    persist(alarms.on_score(&s.bed, s.end_ms, s.score, s.run_onset_ms, lead_off, now_ms())).await;
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "The dashboard fell behind the scores");
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            r = monitor_rx.recv() => match r {
                Ok(c) => book.note(&c),
                // What it skipped is in the store.
                Err(broadcast::error::RecvError::Lagged(_)) => book = MonitorAlarmBook::read(&seed).await,
                Err(broadcast::error::RecvError::Closed) => break,
            },
            r = plan.changed(), if plan_open => {
                // Closed: the last plan's rule serves for good.
                plan_open = r.is_ok();
                let chosen = plan.borrow_and_update().rule;
                if alarms.set_rule(chosen) {
                    rule_tx.send_replace(chosen);
                }
            }
            Some(c) = cmds.recv() => {
                let now = now_ms();
                let (res, reply, action, user) = match c {
                    AlarmCmd::Ack { id, user, reply } => (alarms.acknowledge(id, &user, now), reply, Action::AlarmAcknowledged, user),
                    AlarmCmd::Silence { id, user, secs, reply } => (alarms.silence(id, &user, secs, now), reply, Action::AlarmSilenced, user),
                };
                match res {
                    Ok(t) => {
                        let id = match &t { Transition::Raised(a) | Transition::Changed(a) => a.id };
                        tracing::info!(id, action = action.as_str(), "Alarm action");
                        // The user hears back once the action and its audit entry are stored,
                        // or that they could not be (the action stands on the ward).
                        let _ = recorder.send(Record::Action { change: Box::new(t), user, action, reply }).await;
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
                let _ = out.send(Arc::new(snapshot(&cfg, &ward, &beds, &alarms, &book)));
            }
            _ = tick.tick() => {
                let now = now_ms();
                for v in ward.views() {
                    persist(alarms.on_status(&v.bed, v.status, now)).await;
                }
                persist(alarms.expire(now)).await;
                let _ = out.send(Arc::new(snapshot(&cfg, &ward, &beds, &alarms, &book)));
            }
        }
    }
    // What the recorder holds is stored (and handed over) before the board counts as stopped.
    drop(recorder);
    let _ = tokio::task::spawn_blocking(move || recorder_thread.join()).await;
}

fn latest_of(s: &ScoreRecord, degraded: bool, rule: ServedRule) -> Latest {
    let secs = ((s.end_ms - s.start_ms) as f64 / 1000.0).max(1.0);
    let band = match s.score {
        None => "none",
        Some(v) if v >= rule.rule.on => "high",
        Some(v) if v >= rule.rule.off => "elevated",
        Some(_) => "low",
    };
    Latest {
        window_end_ms: s.end_ms,
        status: s.status.as_str(),
        score: s.score,
        band,
        partial: s.status == ScoreStatus::Partial,
        missing: s.missing.clone(),
        degraded,
        leads: s
            .quality
            .leads
            .iter()
            .map(|l| {
                l.map(|l| {
                    (
                        (100.0 * l.lead_off_secs / secs).round().clamp(0.0, 100.0) as u8,
                        (100.0 * l.coverage).round().clamp(0.0, 100.0) as u8,
                        l.usable,
                    )
                })
            })
            .collect(),
    }
}

fn snapshot(
    cfg: &DashboardConfig,
    ward: &Ward,
    beds: &HashMap<String, BedBoard>,
    alarms: &Alarms,
    book: &MonitorAlarmBook,
) -> Snapshot {
    let since = now_ms() - (cfg.trend_hours * 3.6e6) as i64;
    let active = alarms.active();
    let mut by_bed: BTreeMap<&str, Vec<&'static str>> = BTreeMap::new();
    for a in &active {
        by_bed
            .entry(a.bed.as_str())
            .or_default()
            .push(a.kind.as_str());
    }
    let mut tiles: Vec<Tile> = ward
        .views()
        .into_iter()
        .map(|v| {
            let b = beds.get(&v.bed);
            let risk = alarms.risk_of(&v.bed);
            Tile {
                risk_alarm_onset_ms: risk.and_then(|a| a.onset_ms),
                risk_alarm_run_onset_ms: risk.and_then(|a| a.run_onset_ms),
                risk_alarm_raised_ms: risk.map(|a| a.raised_ms),
                label: cfg
                    .labels
                    .get(&v.bed)
                    .cloned()
                    .unwrap_or_else(|| v.bed.clone()),
                status: v.status,
                connected: v.connected,
                data_age_secs: v.data_age_secs,
                latest: b.and_then(|b| b.latest.clone()),
                trend: b
                    .map(|b| b.trend.iter().copied().collect())
                    .unwrap_or_default(),
                alarms: by_bed.get(v.bed.as_str()).cloned().unwrap_or_default(),
                monitor_alarms: book.recent(&v.bed, since),
                bed: v.bed,
            }
        })
        .collect();
    if cfg.sort == "risk" {
        tiles.sort_by(|a, b| {
            let s = |t: &Tile| t.latest.as_ref().and_then(|l| l.score).unwrap_or(-1.0);
            s(b).total_cmp(&s(a)).then(a.bed.cmp(&b.bed))
        });
    }
    Snapshot {
        generated_ms: now_ms(),
        risk_alarm_on: f64::from(alarms.rule().rule.on),
        beds: tiles,
        alarms: active,
    }
}
