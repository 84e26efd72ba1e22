//! HTTP: the router (`/ws/monitor`, `/api/...`, `/health/...`), its shared state, and the one
//! mapping from errors to status codes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{Path, Query, State, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::store::{StoreError, StoreHealth, StoreReader};
use crate::ward::Ward;

/// A served model, as `/api/models` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub name: String,
    pub version: u32,
    pub input: String,
    pub parameters: usize,
    pub macs_per_window: u64,
    pub sha256: String,
    pub val_roc_auc: Option<f64>,
    pub test_roc_auc: Option<f64>,
}

impl ModelInfo {
    pub fn of(mf: &crate::zoo::Manifest) -> ModelInfo {
        ModelInfo {
            name: mf.name.clone(),
            version: mf.version,
            input: mf.input.label(),
            parameters: mf.parameters,
            macs_per_window: mf.macs_per_window,
            sha256: mf.weights.sha256.clone(),
            val_roc_auc: mf.metrics.get("validation").map(|m| m.roc_auc),
            test_roc_auc: mf.metrics.get("test").map(|m| m.roc_auc),
        }
    }
}

/// Everything handlers need.
#[derive(Clone)]
pub struct AppState {
    pub cfg: Config,
    pub ward: Ward,
    /// The check of monitors' device tokens.
    pub devices: crate::devices::DeviceAuth,
    pub reader: StoreReader,
    pub store_health: Arc<StoreHealth>,
    /// The ensemble serving now and the composer's state.
    pub serving: Arc<std::sync::Mutex<crate::composer::service::Serving>>,
    pub engine: crate::engine::Engine,
    /// The zoo folder as the watcher last saw it.
    pub zoo: Arc<std::sync::Mutex<crate::engine::reload::ZooStatus>>,
    /// Bumped on every zoo change (the composer recomposes on it).
    pub zoo_generation: tokio::sync::watch::Receiver<u64>,
    pub shutdown: CancellationToken,
    /// Asks the composer to recompose now (closed when the composer is off).
    pub recompose: tokio::sync::mpsc::Sender<String>,
    /// The dashboard's ward board (tiles, alarms).
    pub board: crate::dashboard::board::Board,
    /// Users and sessions.
    pub users: Arc<std::sync::Mutex<crate::dashboard::auth::Users>>,
}

/// Errors a handler can return.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("unknown bed {0:?}")]
    UnknownBed(String),
    #[error("bad query: {0}")]
    BadQuery(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("internal task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self {
            ApiError::UnknownBed(_) => StatusCode::NOT_FOUND,
            ApiError::BadQuery(_) => StatusCode::BAD_REQUEST,
            ApiError::Store(_) | ApiError::Join(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        (status, Json(json!({"error": self.to_string()}))).into_response()
    }
}

pub fn router(state: AppState) -> Router {
    use crate::dashboard::web;
    let app = Router::new()
        .route("/", get(web::index))
        .route("/app.js", get(web::app_js))
        .route("/style.css", get(web::style))
        .route("/api/stream", get(web::stream))
        .route("/api/login", post(web::login))
        .route("/api/logout", post(web::logout))
        .route("/api/me", get(web::me))
        .route("/api/alarms", get(web::alarms))
        .route("/api/alarms/{id}/ack", post(web::ack))
        .route("/api/alarms/{id}/silence", post(web::silence))
        .route("/api/beds/{bed}/alarms", get(web::bed_alarms))
        .route("/api/beds/{bed}/strip", get(web::strip))
        .route("/ws/monitor", get(ws_monitor))
        .route("/api/beds", get(beds))
        .route("/api/beds/{bed}/scores", get(bed_scores))
        .route("/api/beds/{bed}/events", get(bed_events))
        .route("/api/models", get(models))
        .route("/api/ensemble", get(ensemble))
        .route("/api/ensemble/recompose", post(web::recompose))
        .route(
            "/health/live",
            get(|| async { Json(json!({"status": "live"})) }),
        )
        .route("/health/ready", get(ready))
        .route("/api/health", get(health))
        .route("/metrics", get(|| async { crate::telemetry::render() }))
        .fallback(web::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            web::read_guard,
        ))
        .layer(axum::middleware::from_fn(web::security_headers));
    // Over TLS, browsers are told to use nothing else for this host.
    let app = if state.cfg.server.tls.is_some() {
        app.layer(axum::middleware::from_fn(web::strict_transport))
    } else {
        app
    };
    app.with_state(state)
}

async fn ws_monitor(ws: WebSocketUpgrade, State(s): State<AppState>) -> Response {
    let max = s.cfg.ingest.max_frame_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| {
            crate::ingest::connection(socket, s.cfg, s.ward, s.devices, s.shutdown)
        })
}

async fn beds(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let reader = s.reader.clone();
    let latest = tokio::task::spawn_blocking(move || reader.latest_scores()).await??;
    let mut latest: HashMap<String, _> = latest.into_iter().map(|r| (r.bed.clone(), r)).collect();
    let beds: Vec<_> = s
        .ward
        .views()
        .into_iter()
        .map(|v| {
            let l = latest.remove(&v.bed);
            json!({"bed": v.bed, "status": v.status, "connected": v.connected, "device": v.device,
                   "data_age_secs": v.data_age_secs, "frames": v.frames, "gaps": v.gaps,
                   "duplicates": v.duplicates, "windows_closed": v.windows_closed, "latest": l})
        })
        .collect();
    Ok(Json(json!({"beds": beds})))
}

#[derive(Debug, Deserialize)]
struct Range {
    since: Option<i64>,
    until: Option<i64>,
    limit: Option<i64>,
}

fn known_bed(s: &AppState, bed: &str) -> Result<(), ApiError> {
    // `zoo` and `composer` hold the system's own events (model and plan changes).
    let known = s.ward.views().iter().any(|v| v.bed == bed)
        || s.cfg.ward.beds.iter().any(|b| b == bed)
        || matches!(bed, "zoo" | "composer");
    if known {
        Ok(())
    } else {
        Err(ApiError::UnknownBed(bed.to_owned()))
    }
}

async fn bed_scores(
    State(s): State<AppState>,
    Path(bed): Path<String>,
    Query(q): Query<Range>,
) -> Result<Json<serde_json::Value>, ApiError> {
    known_bed(&s, &bed)?;
    let (since, until) = (q.since.unwrap_or(i64::MIN), q.until.unwrap_or(i64::MAX));
    if since > until {
        return Err(ApiError::BadQuery("since is after until".into()));
    }
    let limit = q.limit.unwrap_or(10_000).clamp(1, 100_000);
    let reader = s.reader.clone();
    let b = bed.clone();
    let rows =
        tokio::task::spawn_blocking(move || reader.scores(&b, since, until, limit)).await??;
    Ok(Json(json!({"bed": bed, "scores": rows})))
}

async fn bed_events(
    State(s): State<AppState>,
    Path(bed): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    known_bed(&s, &bed)?;
    let reader = s.reader.clone();
    let b = bed.clone();
    let rows = tokio::task::spawn_blocking(move || reader.events(&b, 10_000)).await??;
    let events: Vec<_> = rows
        .into_iter()
        .map(|(at, kind, detail)| json!({"at_ms": at, "kind": kind, "detail": detail}))
        .collect();
    Ok(Json(json!({"bed": bed, "events": events})))
}

async fn models(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let zoo = s.zoo.lock().expect("zoo status lock").clone();
    let models = s.serving.lock().expect("serving lock").models.clone();
    let (db, m2) = (s.cfg.storage.db.clone(), models.clone());
    let profiles = tokio::task::spawn_blocking(move || {
        m2.iter()
            .map(|m| {
                crate::profile::load_profiles(&db, &m.name, &m.sha256).map(|p| (m.name.clone(), p))
            })
            .collect::<Result<std::collections::BTreeMap<_, _>, _>>()
    })
    .await??;
    Ok(Json(
        json!({"models": models, "serving": s.engine.members(), "zoo": zoo, "profiles": profiles}),
    ))
}

async fn ensemble(State(s): State<AppState>) -> Json<serde_json::Value> {
    let c = s.engine.counters();
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let sv = s.serving.lock().expect("serving lock").clone();
    let lat = s
        .store_health
        .recent
        .lock()
        .expect("lock")
        .percentiles(std::time::Duration::from_secs(300));
    Json(json!({
        "id": s.engine.ensemble_id(),
        "source": sv.source,
        "composed_plan": sv.plan,
        "rung": sv.rung,
        "composer": {"enabled": s.cfg.composer.enabled, "composing": sv.composing,
                     "compositions": sv.compositions, "last_error": sv.last_error, "switches": sv.switches},
        "members": members_with_faults(&s),
        "combine": s.cfg.engine.combine,
        "slo_ms": s.cfg.engine.slo_ms,
        "latency_ms": lat.map(|(q, n)| json!({"p50": q[0], "p95": q[1], "p99": q[2], "n": n, "span_secs": 300})),
        "plan": s.engine.plan(),
        "queues": s.engine.queue_lengths().into_iter().map(|(m, n)| json!({"model": m, "waiting": n})).collect::<Vec<_>>(),
        "windows": {"scored": n(&c.scored), "partial": n(&c.partial), "superseded": n(&c.superseded),
                    "dropped": n(&c.dropped), "insufficient_signal": n(&c.insufficient)},
        "members_dropped": n(&c.dropped_members),
        "late_member_results": n(&c.late_members),
        "model_faults": n(&c.model_faults),
        "batches": n(&c.batches),
        "batched_windows": n(&c.batched_windows),
    }))
}

/// The serving members with their fault counts since start.
fn members_with_faults(s: &AppState) -> Vec<serde_json::Value> {
    let faults = s.engine.model_faults();
    s.engine
        .members()
        .iter()
        .map(|(name, version)| {
            let f = faults.get(name).cloned().unwrap_or_default();
            json!({"name": name, "version": version, "faults": f.faults,
                   "last_fault": f.last_fault, "last_fault_ms": f.last_fault_ms})
        })
        .collect()
}

/// Everything an operator needs at a glance: storage (fault, backlog), models (faults),
/// connections. `status` is `ok`, or `degraded` with the reasons; the answer is always 200
/// (readiness for a load balancer is `/health/ready`).
async fn health(State(s): State<AppState>) -> Json<serde_json::Value> {
    let storage = s.store_health.view();
    let members = members_with_faults(&s);
    let mut problems = Vec::new();
    if !s.store_health.writable.load(Ordering::Relaxed) {
        problems.push("storage: the database cannot be written; rows are held in memory");
    }
    if s.store_health.backlog_dropped_rows.load(Ordering::Relaxed) > 0 {
        problems.push("storage: rows were dropped from a full backlog");
    }
    if members.iter().any(|m| m["faults"].as_u64() > Some(0)) {
        problems.push("models: a member has failed on some windows");
    }
    Json(json!({
        "status": if problems.is_empty() { "ok" } else { "degraded" },
        "problems": problems,
        "storage": storage,
        "models": members,
        "model_faults": s.engine.counters().model_faults.load(Ordering::Relaxed),
        "beds_connected": s.ward.connected_beds(),
        "stream_clients": s.board.stream_clients(),
    }))
}

async fn ready(State(s): State<AppState>) -> Response {
    let writable = s.store_health.writable.load(Ordering::Relaxed);
    let body = json!({
        "models_loaded": s.engine.members().len(),
        "database_writable": writable,
        "last_database_error": *s.store_health.last_error.lock().expect("lock"),
        "storage_backlog_rows": s.store_health.backlog_rows.load(Ordering::Relaxed),
    });
    let status = if writable && !s.engine.members().is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}
