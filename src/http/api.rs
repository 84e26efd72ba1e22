//! The API's handlers: beds and their history, models, the serving ensemble, health, and the
//! monitors' WebSocket upgrade. Each answers a typed body.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{Path, Query, State, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::listen::Place;
use super::{ApiError, AppState};
use crate::composer::plans::Plan;
use crate::composer::rule::ServedRule;
use crate::composer::service::Switch;
use crate::config::Combine;
use crate::core::event::Origin;
use crate::core::patient::Patient;
use crate::serving::engine::ensemble::ModelInfo;
use crate::serving::engine::profile::Profile;
use crate::serving::engine::reload::ZooStatus;
use crate::serving::store::{ScoreRow, StorageView};
use crate::serving::ward::{BedStatus, BedView};
use crate::zoo::LeadSets;

/// A monitor connection's read buffer, bytes. tungstenite zero-fills the whole buffer before
/// every read of the socket, so its 128 KiB default spent 14 % of the ingest's CPU clearing
/// memory for frames of a few hundred bytes (`docs/EXPERIMENTS.md`, 2026-11-26); a larger frame
/// is still read whole, in several reads.
const MONITOR_READ_BUFFER: usize = 8 * 1024;

pub(super) async fn ws_monitor(
    ws: WebSocketUpgrade,
    place: Option<Extension<Place>>,
    State(s): State<AppState>,
) -> Response {
    // A monitor takes a place kept for monitors when one is free (see `listen`).
    if let Some(Extension(p)) = place {
        p.move_to_monitors();
    }
    let max = s.ingest.ingest.max_frame_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .read_buffer_size(MONITOR_READ_BUFFER)
        .on_upgrade(move |socket| {
            crate::serving::ingest::connection(socket, s.ingest, s.ward, s.devices, s.shutdown)
        })
}

/// A bed as `/api/beds` lists it: the ward's view, its latest stored score and its active
/// risk alarm, if any.
#[derive(Debug, Serialize)]
pub(super) struct BedSummary {
    #[serde(flatten)]
    view: BedView,
    latest: Option<ScoreRow>,
    /// The active risk alarm's onset: the end of the window at which the rule was met, on the
    /// bed's timeline (the monitor's clock; `window_end_ms` and the ECG strip's `end_ms` are
    /// on it too). `null`: no risk alarm.
    risk_alarm_onset_ms: Option<i64>,
    /// Where that alarm's VT run began, when the beat counter raised it (the run's first beat,
    /// on the bed's timeline).
    risk_alarm_run_onset_ms: Option<i64>,
    /// When the ward raised that alarm (the server's clock, ms since the epoch).
    risk_alarm_raised_ms: Option<i64>,
    /// The patient the bed is admitted with, as its monitor said (kept across a restart);
    /// `null`: none.
    patient: Option<Patient>,
}

#[derive(Debug, Serialize)]
pub(super) struct Beds {
    beds: Vec<BedSummary>,
}

/// The ward's beds, and the beds with stored scores that the ward does not hold (an earlier
/// run's, before their monitors reconnect; beds evicted from a full ward): those are `lost`.
pub(super) async fn beds(State(s): State<AppState>) -> Result<Json<Beds>, ApiError> {
    let reader = s.reader.clone();
    let latest = tokio::task::spawn_blocking(move || reader.latest_scores()).await??;
    let mut latest: HashMap<String, _> = latest.into_iter().map(|r| (r.bed.clone(), r)).collect();
    let snap = s.dashboard.board.snapshot();
    let admissions = s.ward.admissions();
    let patient = |bed: &str| admissions.get(bed).map(|p| (*p).clone());
    let risk = |bed: &str| {
        snap.alarms
            .iter()
            .find(|a| a.bed == bed && a.onset_ms.is_some())
    };
    let mut beds: Vec<BedSummary> = s
        .ward
        .views()
        .into_iter()
        .map(|view| {
            let risk = risk(&view.bed);
            BedSummary {
                latest: latest.remove(&view.bed),
                risk_alarm_onset_ms: risk.and_then(|a| a.onset_ms),
                risk_alarm_run_onset_ms: risk.and_then(|a| a.run_onset_ms),
                risk_alarm_raised_ms: risk.map(|a| a.raised_ms),
                patient: patient(&view.bed),
                view,
            }
        })
        .collect();
    beds.extend(latest.into_iter().map(|(bed, row)| BedSummary {
        patient: patient(&bed),
        view: BedView {
            bed,
            status: BedStatus::Lost,
            connected: false,
            device: None,
            data_age_secs: None,
            frames: 0,
            gaps: 0,
            duplicates: 0,
            windows_closed: 0,
            replies_dropped: 0,
        },
        latest: Some(row),
        risk_alarm_onset_ms: None,
        risk_alarm_run_onset_ms: None,
        risk_alarm_raised_ms: None,
    }));
    beds.sort_by(|a, b| a.view.bed.cmp(&b.view.bed));
    Ok(Json(Beds { beds }))
}

#[derive(Debug, Deserialize)]
pub(super) struct Range {
    since: Option<i64>,
    until: Option<i64>,
    limit: Option<i64>,
}

/// A bed the ward holds, a configured one, one the database knows (an earlier run's, or one
/// evicted from a full ward), or a system origin (`zoo`, `composer`, `server`: model, plan and
/// lifecycle events).
async fn known_bed(s: &AppState, bed: &str) -> Result<(), ApiError> {
    let known = s.ward.views().iter().any(|v| v.bed == bed)
        || s.configured_beds.iter().any(|b| b == bed)
        || Origin::SYSTEM.contains(&bed);
    let known = known || {
        let (reader, b) = (s.reader.clone(), bed.to_owned());
        tokio::task::spawn_blocking(move || reader.knows_bed(&b)).await??
    };
    if known {
        Ok(())
    } else {
        Err(ApiError::UnknownBed(bed.to_owned()))
    }
}

#[derive(Debug, Serialize)]
pub(super) struct BedScores {
    bed: String,
    scores: Vec<ScoreRow>,
}

pub(super) async fn bed_scores(
    State(s): State<AppState>,
    Path(bed): Path<String>,
    Query(q): Query<Range>,
) -> Result<Json<BedScores>, ApiError> {
    known_bed(&s, &bed).await?;
    let (since, until) = (q.since.unwrap_or(i64::MIN), q.until.unwrap_or(i64::MAX));
    if since > until {
        return Err(ApiError::BadQuery("since is after until".into()));
    }
    let limit = q.limit.unwrap_or(10_000).clamp(1, 100_000);
    let reader = s.reader.clone();
    let b = bed.clone();
    let scores =
        tokio::task::spawn_blocking(move || reader.scores(&b, since, until, limit)).await??;
    Ok(Json(BedScores { bed, scores }))
}

#[derive(Debug, Serialize)]
pub(super) struct EventRow {
    at_ms: i64,
    kind: String,
    detail: serde_json::Value,
}

#[derive(Debug, Serialize)]
pub(super) struct BedEvents {
    bed: String,
    events: Vec<EventRow>,
}

pub(super) async fn bed_events(
    State(s): State<AppState>,
    Path(bed): Path<String>,
) -> Result<Json<BedEvents>, ApiError> {
    known_bed(&s, &bed).await?;
    let reader = s.reader.clone();
    let b = bed.clone();
    let rows = tokio::task::spawn_blocking(move || reader.events(&b, 10_000)).await??;
    let events = rows
        .into_iter()
        .map(|(at_ms, kind, detail)| EventRow {
            at_ms,
            kind,
            detail,
        })
        .collect();
    Ok(Json(BedEvents { bed, events }))
}

/// The newest monitor alarms with Holmes's opinions.
#[derive(Debug, Serialize)]
pub(super) struct MonitorAlarms {
    #[serde(skip_serializing_if = "Option::is_none")]
    bed: Option<String>,
    alarms: Vec<crate::serving::store::MonitorAlarmView>,
}

/// How many monitor alarms an answer holds at most.
const MONITOR_ALARMS_LIMIT: i64 = 1_000;

/// The ward's newest monitor alarms, newest first.
pub(super) async fn monitor_alarms(
    State(s): State<AppState>,
) -> Result<Json<MonitorAlarms>, ApiError> {
    let reader = s.reader.clone();
    let alarms =
        tokio::task::spawn_blocking(move || reader.monitor_alarms(None, MONITOR_ALARMS_LIMIT))
            .await??;
    Ok(Json(MonitorAlarms { bed: None, alarms }))
}

/// A bed's newest monitor alarms, newest first.
pub(super) async fn bed_monitor_alarms(
    State(s): State<AppState>,
    Path(bed): Path<String>,
) -> Result<Json<MonitorAlarms>, ApiError> {
    known_bed(&s, &bed).await?;
    let reader = s.reader.clone();
    let b = bed.clone();
    let alarms =
        tokio::task::spawn_blocking(move || reader.monitor_alarms(Some(&b), MONITOR_ALARMS_LIMIT))
            .await??;
    Ok(Json(MonitorAlarms {
        bed: Some(bed),
        alarms,
    }))
}

/// The strip a monitor alarm's opinion read.
#[derive(Debug, Serialize)]
pub(super) struct MonitorAlarmStrip {
    key: i64,
    bed: String,
    strip: crate::serving::store::AlarmStrip,
}

/// The 16 s of every lead before a monitor alarm's onset, as its opinion read them.
pub(super) async fn monitor_alarm_strip(
    State(s): State<AppState>,
    Path(key): Path<i64>,
) -> Result<Json<MonitorAlarmStrip>, ApiError> {
    let reader = s.reader.clone();
    let found = tokio::task::spawn_blocking(move || reader.monitor_alarm_strip(key)).await??;
    let (bed, strip) = found.ok_or(ApiError::NoStrip(key))?;
    Ok(Json(MonitorAlarmStrip { key, bed, strip }))
}

#[derive(Debug, Serialize)]
pub(super) struct Models {
    models: Vec<ModelInfo>,
    /// `(name, version)` of each member the engine runs.
    serving: Vec<(String, u32)>,
    zoo: ZooStatus,
    profiles: BTreeMap<String, Vec<Profile>>,
}

pub(super) async fn models(State(s): State<AppState>) -> Result<Json<Models>, ApiError> {
    let zoo = s.zoo.lock().expect("zoo status lock").clone();
    let models = s.serving.borrow().models.clone();
    let (db, m2) = (s.db.clone(), models.clone());
    let profiles = tokio::task::spawn_blocking(move || {
        m2.iter()
            .map(|m| {
                crate::serving::engine::profile::load_profiles(&db, &m.name, &m.sha256)
                    .map(|p| (m.name.clone(), p))
            })
            .collect::<Result<BTreeMap<_, _>, _>>()
    })
    .await??;
    Ok(Json(Models {
        models,
        serving: s.engine.members(),
        zoo,
        profiles,
    }))
}

#[derive(Debug, Serialize)]
pub(super) struct ComposerView {
    enabled: bool,
    composing: bool,
    compositions: u64,
    last_error: Option<String>,
    switches: Vec<Switch>,
}

#[derive(Debug, Serialize)]
pub(super) struct Latency {
    p50: f64,
    p95: f64,
    p99: f64,
    n: usize,
    span_secs: u64,
}

#[derive(Debug, Serialize)]
pub(super) struct QueueView {
    model: String,
    waiting: usize,
}

#[derive(Debug, Serialize)]
pub(super) struct WindowCounts {
    scored: u64,
    partial: u64,
    superseded: u64,
    dropped: u64,
    insufficient_signal: u64,
}

#[derive(Debug, Serialize)]
pub(super) struct EnsembleView {
    id: i64,
    source: String,
    composed_plan: Option<Plan>,
    rung: usize,
    composer: ComposerView,
    members: Vec<MemberView>,
    /// The configured members (`ensemble.members`); what serves differs where the composer
    /// serves another plan or a lower rung of its ladder.
    configured_members: Vec<String>,
    combine: Combine,
    /// The primary lead's share the members pool with, from their alarm rule (absent: the
    /// plain mean).
    #[serde(skip_serializing_if = "Option::is_none")]
    primary_share: Option<f64>,
    slo_ms: u64,
    latency_ms: Option<Latency>,
    plan: Vec<serde_json::Value>,
    queues: Vec<QueueView>,
    windows: WindowCounts,
    members_dropped: u64,
    late_member_results: u64,
    model_faults: u64,
    batches: u64,
    batched_windows: u64,
}

/// Span of the latency percentiles in `/api/ensemble`.
const LATENCY_SPAN: Duration = Duration::from_secs(300);

pub(super) async fn ensemble(State(s): State<AppState>) -> Json<EnsembleView> {
    let c = s.engine.counters();
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let sv = s.serving.borrow().clone();
    let lat = s
        .store_health
        .recent
        .lock()
        .expect("lock")
        .percentiles(LATENCY_SPAN);
    Json(EnsembleView {
        id: s.engine.ensemble_id(),
        source: sv.source,
        composed_plan: sv.plan,
        rung: sv.rung,
        composer: ComposerView {
            // The dashboard holds the composer's request channel only when it runs.
            enabled: s.dashboard.recompose.is_some(),
            composing: sv.composing,
            compositions: sv.compositions,
            last_error: sv.last_error,
            switches: sv.switches,
        },
        members: members_with_faults(&s),
        configured_members: s.configured_members.to_vec(),
        combine: s.engine_cfg.combine,
        primary_share: sv.primary_share,
        slo_ms: s.engine_cfg.slo_ms,
        latency_ms: lat.map(|(q, n)| Latency {
            p50: q[0],
            p95: q[1],
            p99: q[2],
            n,
            span_secs: LATENCY_SPAN.as_secs(),
        }),
        plan: s.engine.plan(),
        queues: s
            .engine
            .queue_lengths()
            .into_iter()
            .map(|(model, waiting)| QueueView { model, waiting })
            .collect(),
        windows: WindowCounts {
            scored: n(&c.scored),
            partial: n(&c.partial),
            superseded: n(&c.superseded),
            dropped: n(&c.dropped),
            insufficient_signal: n(&c.insufficient),
        },
        members_dropped: n(&c.dropped_members),
        late_member_results: n(&c.late_members),
        model_faults: n(&c.model_faults),
        batches: n(&c.batches),
        batched_windows: n(&c.batched_windows),
    })
}

/// A serving member with its faults since start.
#[derive(Debug, Serialize)]
pub(super) struct MemberView {
    name: String,
    version: u32,
    faults: u64,
    last_fault: Option<String>,
    last_fault_ms: Option<i64>,
}

fn members_with_faults(s: &AppState) -> Vec<MemberView> {
    let faults = s.engine.model_faults();
    s.engine
        .members()
        .into_iter()
        .map(|(name, version)| {
            let f = faults.get(&name).cloned().unwrap_or_default();
            MemberView {
                name,
                version,
                faults: f.faults,
                last_fault: f.last_fault,
                last_fault_ms: f.last_fault_ms,
            }
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub(super) struct Health {
    /// `ok`, or `degraded` with the reasons in `problems`.
    status: &'static str,
    problems: Vec<String>,
    storage: StorageView,
    models: Vec<MemberView>,
    model_faults: u64,
    /// The lead sets the serving ensemble scores (a monitor sending only a lead set it does
    /// not cover gets no score).
    lead_sets: LeadSets,
    beds_connected: usize,
    stream_clients: usize,
    /// The risk alarm rule serving now: validated for the serving ensemble, or the configured
    /// fallback (`validated: false`).
    alarm_rule: ServedRule,
    /// The HL7 link (`null` when `[hl7]` is off): connected, backlog, oldest pending, last
    /// acknowledgement, parked messages.
    hl7: Option<crate::outbound::LinkView>,
    /// The FHIR link (`null` when `[fhir]` is off), as the HL7 link.
    fhir: Option<crate::outbound::LinkView>,
}

/// Everything an operator needs at a glance: storage (fault, backlog), models (faults, zoo
/// folders that do not load, lead sets the serving ensemble covers), connections. `status` is
/// `ok`, or `degraded` with the reasons; the answer is always 200 (readiness for a load
/// balancer is `/health/ready`).
pub(super) async fn health(State(s): State<AppState>) -> Json<Health> {
    let storage = s.store_health.view();
    let models = members_with_faults(&s);
    let mut problems = Vec::new();
    if !s.store_health.writable.load(Ordering::Relaxed) {
        problems.push("storage: the database cannot be written; rows are held in memory".into());
    }
    if s.store_health.backlog_dropped_rows.load(Ordering::Relaxed) > 0 {
        problems.push("storage: rows were dropped from a full backlog".into());
    }
    if models.iter().any(|m| m.faults > 0) {
        problems.push("models: a member has failed on some windows".into());
    }
    let counter = crate::serving::engine::counter::BEATS_NAME;
    if s.engine
        .model_faults()
        .get(counter)
        .is_some_and(|f| f.faults > 0)
    {
        problems.push(
            "models: the beat counter has failed on some windows (scored by the members alone)"
                .into(),
        );
    }
    let lead_sets = s.engine.lead_sets();
    if !lead_sets.is_full() {
        problems.push(format!(
            "leads: the ensemble scores no bed whose monitor sends {}",
            lead_sets.missing().join(" or ")
        ));
    }
    let (refused, rules_error) = {
        let z = s.zoo.lock().expect("zoo status lock");
        (z.refused.clone(), z.rules_error.clone())
    };
    for (name, why) in refused {
        problems.push(format!("zoo: model folder {name} does not load: {why}"));
    }
    if let Some(e) = rules_error {
        problems.push(format!(
            "zoo: the alarm rules do not read ({e}); the risk alarm rule serving stays"
        ));
    }
    for o in [&s.outbound, &s.fhir].into_iter().flatten() {
        problems.extend(o.problems());
    }
    Json(Health {
        status: if problems.is_empty() {
            "ok"
        } else {
            "degraded"
        },
        problems,
        storage,
        models,
        model_faults: s.engine.counters().model_faults.load(Ordering::Relaxed),
        lead_sets,
        beds_connected: s.ward.connected_beds(),
        stream_clients: s.dashboard.board.stream_clients(),
        alarm_rule: s.dashboard.board.alarm_rule(),
        hl7: s.outbound.as_ref().map(|o| o.view()),
        fhir: s.fhir.as_ref().map(|o| o.view()),
    })
}

#[derive(Debug, Serialize)]
pub(super) struct Live {
    status: &'static str,
}

pub(super) async fn live() -> Json<Live> {
    Json(Live { status: "live" })
}

#[derive(Debug, Serialize)]
pub(super) struct Ready {
    models_loaded: usize,
    database_writable: bool,
    last_database_error: Option<String>,
    storage_backlog_rows: usize,
}

pub(super) async fn ready(State(s): State<AppState>) -> Response {
    let writable = s.store_health.writable.load(Ordering::Relaxed);
    let body = Ready {
        models_loaded: s.engine.members().len(),
        database_writable: writable,
        last_database_error: s.store_health.last_error.lock().expect("lock").clone(),
        storage_backlog_rows: s.store_health.backlog_rows.load(Ordering::Relaxed),
    };
    let status = if writable && !s.engine.members().is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}
