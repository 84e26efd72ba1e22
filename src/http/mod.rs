//! HTTP: the router (`/ws/monitor`, `/api/...`, `/health/...`, the dashboard's routes), the
//! state its handlers share ([`AppState`]), and its errors ([`error`]). The accept loop with
//! its connection limits ([`listen`]), the limits on request bodies (`body`), TLS ([`tls`])
//! and the Prometheus recorder behind `/metrics` ([`telemetry`]) live here too.

mod api;
pub(crate) mod body;
pub(crate) mod error;
pub(crate) mod listen;
pub(crate) mod telemetry;
pub mod tls;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::FromRef;
use axum::routing::get;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::composer::service::Serving;
use crate::config::EngineConfig;
use crate::dashboard::{self, DashboardState};
use crate::serving::engine::Engine;
use crate::serving::engine::reload::ZooStatus;
use crate::serving::ingest::IngestSettings;
use crate::serving::ingest::devices::DeviceAuth;
use crate::serving::store::{StoreHealth, StoreReader};
use crate::serving::ward::Ward;

pub(crate) use error::ApiError;

/// The monitors' WebSocket (the one path served on a connection place kept for monitors).
pub(crate) const MONITOR_PATH: &str = "/ws/monitor";

/// Everything handlers need. The dashboard's routes take their part through [`FromRef`].
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) dashboard: DashboardState,
    /// What a monitor connection reads of the configuration.
    pub(crate) ingest: IngestSettings,
    /// The engine's settings (the combination and the budget, for `/api/ensemble`).
    pub(crate) engine_cfg: EngineConfig,
    /// Beds configured in advance (known to the API before their monitors connect).
    pub(crate) configured_beds: Arc<[String]>,
    /// The configured members (`ensemble.members`): `/api/ensemble` shows them beside what
    /// serves, which the composer may have chosen otherwise.
    pub(crate) configured_members: Arc<[String]>,
    /// The ward's database (profiles are read from it).
    pub(crate) db: crate::serving::store::Db,
    /// Over TLS: every response says so (`Strict-Transport-Security`).
    pub(crate) tls: bool,
    pub(crate) ward: Ward,
    /// The check of monitors' device tokens.
    pub(crate) devices: DeviceAuth,
    pub(crate) reader: StoreReader,
    pub(crate) store_health: Arc<StoreHealth>,
    /// The ensemble serving now and the composer's state, as the composer publishes it.
    pub(crate) serving: watch::Receiver<Serving>,
    pub(crate) engine: Engine,
    /// The zoo folder as the watcher last saw it.
    pub(crate) zoo: Arc<Mutex<ZooStatus>>,
    pub(crate) shutdown: CancellationToken,
    /// Every request's body: its size and the time it may take to arrive.
    pub(crate) body_limits: body::BodyLimits,
    /// The HL7 link, where `[hl7]` turns it on (`/api/health` shows it).
    pub(crate) outbound: Option<crate::outbound::Outbound>,
    /// The FHIR link, where `[fhir]` turns it on (`/api/health` shows it).
    pub(crate) fhir: Option<crate::outbound::Outbound>,
}

impl FromRef<AppState> for DashboardState {
    fn from_ref(s: &AppState) -> DashboardState {
        s.dashboard.clone()
    }
}

/// The whole router: the API, the monitors' socket, health and metrics, and the dashboard;
/// outermost first: security headers on every answer, the same-origin check on
/// state-changing requests, the body's limits, the dashboard's read guard in front of `/api/`.
pub(crate) fn router(state: AppState) -> Router {
    use crate::dashboard::web;
    let app = Router::new()
        .merge(dashboard::routes::<AppState>())
        .route(MONITOR_PATH, get(api::ws_monitor))
        .route("/api/beds", get(api::beds))
        .route("/api/beds/{bed}/scores", get(api::bed_scores))
        .route("/api/beds/{bed}/events", get(api::bed_events))
        .route("/api/monitor_alarms", get(api::monitor_alarms))
        .route(
            "/api/beds/{bed}/monitor_alarms",
            get(api::bed_monitor_alarms),
        )
        .route(
            "/api/monitor_alarms/{key}/strip",
            get(api::monitor_alarm_strip),
        )
        .route("/api/models", get(api::models))
        .route("/api/ensemble", get(api::ensemble))
        .route("/health/live", get(api::live))
        .route("/health/ready", get(api::ready))
        .route("/api/health", get(api::health))
        .route("/metrics", get(|| async { telemetry::render() }))
        .fallback(web::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.dashboard.clone(),
            web::read_guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.body_limits,
            body::limit_body,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.dashboard.clone(),
            crate::dashboard::origin::same_origin,
        ))
        .layer(axum::middleware::from_fn(web::security_headers));
    // Over TLS, browsers are told to use nothing else for this host.
    let app = if state.tls {
        app.layer(axum::middleware::from_fn(web::strict_transport))
    } else {
        app
    };
    app.with_state(state)
}
