//! The dashboard's HTTP side: the embedded page (`web/`), the live feed as server-sent events,
//! sign-in and sign-out, alarm actions, a bed's ECG strip and alarm history, the read-access
//! guard, and the security headers every response carries (a strict Content-Security-Policy:
//! scripts and styles only from this server, no inline script).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRef, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;

use super::auth::{self, User, Users};
use super::throttle::{Key, Throttle};
use crate::board::Board;
use crate::board::alarms::{Alarm, AlarmError, AlarmRow};
use crate::config::DashboardConfig;
use crate::serving::store::Db;
use crate::serving::store::audit::{Action, AuditLog};
use crate::serving::ward::{Strip, Ward};

/// What the dashboard's routes need; the app's state hands it over through axum's `FromRef`.
#[derive(Clone)]
pub(crate) struct DashboardState {
    pub(crate) cfg: DashboardConfig,
    pub(crate) board: Board,
    pub(crate) users: Arc<Mutex<Users>>,
    /// The ward's database: alarm history and the audit log.
    pub(crate) db: Db,
    /// For a bed's ECG strip.
    pub(crate) ward: Ward,
    /// Asks the composer to recompose now; `None` when the composer is off.
    pub(crate) recompose: Option<mpsc::Sender<String>>,
    /// Failed sign-ins per name and address (the back-off).
    pub(crate) throttle: Arc<Mutex<Throttle>>,
}

impl DashboardState {
    /// The dashboard's state; the sign-in back-off starts empty.
    pub(crate) fn new(
        cfg: DashboardConfig,
        board: Board,
        users: Users,
        db: Db,
        ward: Ward,
        recompose: Option<mpsc::Sender<String>>,
    ) -> DashboardState {
        DashboardState {
            throttle: Arc::new(Mutex::new(Throttle::new(&cfg))),
            cfg,
            board,
            users: Arc::new(Mutex::new(users)),
            db,
            ward,
            recompose,
        }
    }
}

/// The dashboard's routes: the page and its assets, the live feed, sign-in, alarms and their
/// actions, a bed's strip and alarm history, and the engineer's recompose button.
pub(crate) fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    DashboardState: FromRef<S>,
{
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/style.css", get(style))
        .route("/api/stream", get(stream))
        .route("/api/login", post(login))
        .route("/api/logout", post(logout))
        .route("/api/me", get(me))
        .route("/api/alarms", get(alarms))
        .route("/api/alarms/{id}/ack", post(ack))
        .route("/api/alarms/{id}/silence", post(silence))
        .route("/api/beds/{bed}/alarms", get(bed_alarms))
        .route("/api/beds/{bed}/strip", get(strip))
        .route("/api/ensemble/recompose", post(recompose))
}

/// Every way a dashboard request fails, and its one mapping to a status code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebError {
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(&'static str),
    /// A state-changing request from another origin (see [`origin`](super::origin)).
    #[error("{0}")]
    CrossSite(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(&'static str),
    #[error("{0}")]
    TooMany(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("internal task failed: {0}")]
    Internal(String),
}

/// The body of every error answer: `{"error": "..."}`.
#[derive(Debug, Serialize)]
pub(crate) struct ErrorBody {
    pub(crate) error: String,
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let status = match &self {
            WebError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            WebError::Forbidden(_) | WebError::CrossSite(_) => StatusCode::FORBIDDEN,
            WebError::NotFound(_) => StatusCode::NOT_FOUND,
            WebError::BadRequest(_) => StatusCode::BAD_REQUEST,
            WebError::Conflict(_) => StatusCode::CONFLICT,
            WebError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            WebError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            WebError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let body = ErrorBody {
            error: self.to_string(),
        };
        (status, Json(body)).into_response()
    }
}

impl From<AlarmError> for WebError {
    fn from(e: AlarmError) -> WebError {
        match e {
            AlarmError::Unknown(_) => WebError::NotFound(e.to_string()),
            AlarmError::BadSilence { .. } => WebError::BadRequest(e.to_string()),
            _ => WebError::Unavailable(e.to_string()),
        }
    }
}

impl From<tokio::task::JoinError> for WebError {
    fn from(e: tokio::task::JoinError) -> WebError {
        WebError::Internal(e.to_string())
    }
}

const INDEX: &str = include_str!("../../web/index.html");
const APP_JS: &str = include_str!("../../web/app.js");
const STYLE: &str = include_str!("../../web/style.css");

fn asset(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    asset(INDEX, "text/html; charset=utf-8")
}

async fn app_js() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

/// Security headers on every response.
pub(crate) async fn security_headers(req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    for (k, v) in [
        (
            "content-security-policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
    ] {
        h.insert(k, HeaderValue::from_static(v));
    }
    r
}

/// `Strict-Transport-Security` on every response (layered only when `[server.tls]` is set):
/// a year, this host only (a ward server's name is rarely a domain we may speak for).
pub(crate) async fn strict_transport(req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    r.headers_mut().insert(
        "strict-transport-security",
        HeaderValue::from_static("max-age=31536000"),
    );
    r
}

/// The signed-in user of a request, if any.
pub(crate) async fn user_of(s: &DashboardState, headers: &HeaderMap) -> Option<User> {
    let cookies = headers.get(header::COOKIE)?.to_str().ok()?;
    let token = auth::token_from_cookies(cookies)?.to_owned();
    let users = s.users.clone();
    tokio::task::spawn_blocking(move || users.lock().expect("users lock").session(&token))
        .await
        .ok()?
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "Session lookup failed");
            None
        })
}

/// Read access: the API needs a signed-in user unless the config opens the ward view.
pub(crate) async fn read_guard(
    State(s): State<DashboardState>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    let open = s.cfg.public_ward_view
        || !path.starts_with("/api/")
        || ["/api/me", "/api/login", "/api/logout"].contains(&path);
    if open || user_of(&s, req.headers()).await.is_some() {
        next.run(req).await
    } else {
        WebError::Unauthorized("sign in to see the ward").into_response()
    }
}

/// The ward feed: a snapshot at once, then one per update (about every second).
///
/// Each client holds at most the latest snapshot (a `watch` receiver) plus what its socket
/// buffers: a client that stops reading is skipped over, never queued for. At most
/// `dashboard.max_stream_clients` at once; more are answered 503.
async fn stream(State(s): State<DashboardState>) -> Result<Response, WebError> {
    let Some(permit) = s.board.stream_permit() else {
        return Err(WebError::Unavailable(format!(
            "the live feed already has its maximum of {} clients",
            s.board.max_stream_clients()
        )));
    };
    let rx = s.board.subscribe();
    let feed = futures_util::stream::unfold((rx, true, permit), |(mut rx, first, p)| async move {
        if !first && rx.changed().await.is_err() {
            return None;
        }
        let snap = rx.borrow_and_update().clone();
        let data = serde_json::to_string(&*snap).expect("a snapshot serialises");
        Some((
            Ok::<_, Infallible>(Event::default().event("ward").data(data)),
            (rx, false, p),
        ))
    });
    Ok(Sse::new(feed)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    name: String,
    password: String,
}

/// Who is signed in (`null` when nobody).
#[derive(Debug, Serialize)]
struct Me {
    user: Option<User>,
}

async fn login(
    State(s): State<DashboardState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Json(l): Json<Login>,
) -> Result<Response, WebError> {
    let mut keys = vec![Key::user(&l.name)];
    keys.extend(peer.map(|p| Key::Addr(p.0.0.ip())));
    let wait = s
        .throttle
        .lock()
        .expect("throttle lock")
        .wait(&keys, Instant::now());
    if let Some(wait) = wait {
        // Refused before the password is checked: a guesser learns nothing here.
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        let e = WebError::TooMany(format!("too many failed sign-ins; try again in {secs} s"));
        return Ok(([(header::RETRY_AFTER, secs.to_string())], e).into_response());
    }
    let (users, hours) = (s.users.clone(), s.cfg.session_hours);
    let name = l.name.clone();
    let res = tokio::task::spawn_blocking(move || {
        // The users' lock (every session lookup needs it) is not held through argon2.
        let credentials = users.lock().expect("users lock").credentials(&l.name)?;
        let user = credentials.check(&l.password)?;
        let token = user
            .as_ref()
            .map(|x| {
                users
                    .lock()
                    .expect("users lock")
                    .start_session(&x.name, hours)
            })
            .transpose()?;
        Ok::<_, auth::AuthError>(user.zip(token))
    })
    .await?;
    match res {
        Ok(Some((user, token))) => {
            s.throttle.lock().expect("throttle lock").succeeded(&keys);
            audit(&s, Some(&user.name), Action::SignIn, json!({}));
            let cookie = format!(
                "{}={token}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={}",
                auth::COOKIE,
                (hours * 3600.0) as u64
            );
            let me = Me { user: Some(user) };
            Ok(([(header::SET_COOKIE, cookie)], Json(me)).into_response())
        }
        Ok(None) => {
            audit(&s, None, Action::SignInRefused, json!({"name": name}));
            let shut = s
                .throttle
                .lock()
                .expect("throttle lock")
                .failed(&keys, Instant::now());
            for (key, wait) in shut {
                let (what, who) = match key {
                    Key::User(n) => ("name", n),
                    Key::Addr(a) => ("address", a.to_string()),
                };
                tracing::warn!(what, %who, secs = wait.as_secs_f64(), "Sign-in backing off");
                let detail = json!({what: who, "secs": wait.as_secs_f64()});
                audit(&s, None, Action::SignInBackoff, detail);
            }
            Err(WebError::Unauthorized("unknown user or wrong password"))
        }
        Err(e) => Err(WebError::Unavailable(e.to_string())),
    }
}

async fn logout(State(s): State<DashboardState>, headers: HeaderMap) -> Response {
    if let Some(token) = headers
        .get(header::COOKIE)
        .and_then(|c| c.to_str().ok())
        .and_then(auth::token_from_cookies)
        .map(str::to_owned)
    {
        let users = s.users.clone();
        let _ = tokio::task::spawn_blocking(move || {
            users.lock().expect("users lock").end_session(&token)
        })
        .await;
    }
    let cookie = format!(
        "{}=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0",
        auth::COOKIE
    );
    ([(header::SET_COOKIE, cookie)], Json(Me { user: None })).into_response()
}

/// `GET /api/me`: the user and what the page needs to know of the dashboard's settings.
#[derive(Debug, Serialize)]
struct MeView {
    user: Option<User>,
    public_ward_view: bool,
    risk_alarm_on: f64,
    max_silence_secs: u64,
}

async fn me(State(s): State<DashboardState>, headers: HeaderMap) -> Json<MeView> {
    Json(MeView {
        user: user_of(&s, &headers).await,
        public_ward_view: s.cfg.public_ward_view,
        risk_alarm_on: f64::from(s.board.alarm_rule().rule.on),
        max_silence_secs: s.cfg.max_silence_secs,
    })
}

#[derive(Debug, Serialize)]
struct Alarms {
    alarms: Vec<Alarm>,
}

async fn alarms(State(s): State<DashboardState>) -> Json<Alarms> {
    Json(Alarms {
        alarms: s.board.snapshot().alarms.clone(),
    })
}

/// The alarm as an action left it.
#[derive(Debug, Serialize)]
struct AlarmView {
    alarm: Alarm,
}

async fn ack(
    State(s): State<DashboardState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<AlarmView>, WebError> {
    let Some(u) = user_of(&s, &headers).await else {
        return Err(WebError::Unauthorized("sign in to acknowledge alarms"));
    };
    let alarm = s.board.ack(id, u.name).await?;
    Ok(Json(AlarmView { alarm }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SilenceBody {
    secs: u64,
}

async fn silence(
    State(s): State<DashboardState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Json(b): Json<SilenceBody>,
) -> Result<Json<AlarmView>, WebError> {
    let Some(u) = user_of(&s, &headers).await else {
        return Err(WebError::Unauthorized("sign in to silence alarms"));
    };
    let alarm = s.board.silence(id, u.name, b.secs).await?;
    Ok(Json(AlarmView { alarm }))
}

/// An engineer asks the composer to recompose now (e.g. after changing the zoo by hand).
#[derive(Debug, Serialize)]
struct Recomposing {
    recomposing: bool,
}

async fn recompose(
    State(s): State<DashboardState>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<Recomposing>), WebError> {
    let Some(u) = user_of(&s, &headers).await else {
        return Err(WebError::Unauthorized("sign in to control the plan"));
    };
    if u.role < super::auth::Role::Engineer {
        return Err(WebError::Forbidden("engineers only"));
    }
    let Some(tx) = &s.recompose else {
        return Err(WebError::Conflict(
            "the composer is off ([composer] enabled = false)",
        ));
    };
    match tx.try_send(format!("asked by {}", u.name)) {
        Ok(()) => {
            audit(&s, Some(&u.name), Action::RecomposeRequested, json!({}));
            Ok((
                StatusCode::ACCEPTED,
                Json(Recomposing { recomposing: true }),
            ))
        }
        Err(_) => Err(WebError::TooMany(
            "a recomposition is already queued".into(),
        )),
    }
}

#[derive(Debug, Serialize)]
struct BedAlarms {
    bed: String,
    alarms: Vec<AlarmRow>,
}

async fn bed_alarms(
    State(s): State<DashboardState>,
    Path(bed): Path<String>,
) -> Result<Json<BedAlarms>, WebError> {
    let (db, b) = (s.db.clone(), bed.clone());
    let alarms = tokio::task::spawn_blocking(move || {
        crate::board::alarms::AlarmDb::new(db).history(&b, 500)
    })
    .await?
    .map_err(|e| WebError::Unavailable(e.to_string()))?;
    Ok(Json(BedAlarms { bed, alarms }))
}

#[derive(Deserialize)]
struct StripQuery {
    secs: Option<f64>,
}

#[derive(Debug, Serialize)]
struct BedStrip {
    bed: String,
    strip: Strip,
}

async fn strip(
    State(s): State<DashboardState>,
    Path(bed): Path<String>,
    Query(q): Query<StripQuery>,
) -> Result<Json<BedStrip>, WebError> {
    let secs = q.secs.unwrap_or(10.0).clamp(1.0, 30.0);
    match s.ward.strip(&bed, secs).await {
        Some(strip) => Ok(Json(BedStrip { bed, strip })),
        None => Err(WebError::NotFound(format!("unknown bed {bed:?}"))),
    }
}

/// Appends to the audit log off the async workers.
fn audit(s: &DashboardState, user: Option<&str>, action: Action, detail: serde_json::Value) {
    AuditLog::new(&s.db).record(user, action, detail);
}

/// A 404 for anything else, as JSON under /api and plain text elsewhere.
pub(crate) async fn not_found(req: Request<Body>) -> Response {
    if req.uri().path().starts_with("/api/") {
        WebError::NotFound("no such endpoint".into()).into_response()
    } else {
        (StatusCode::NOT_FOUND, "not found").into_response()
    }
}
