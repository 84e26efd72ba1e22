//! The dashboard's HTTP side: the embedded page (`web/`), the live feed as server-sent events,
//! sign-in and sign-out, alarm actions, a bed's ECG strip and alarm history, the read-access
//! guard, and the security headers every response carries (a strict Content-Security-Policy:
//! scripts and styles only from this server, no inline script).

use std::convert::Infallible;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::alarms::AlarmError;
use super::auth::{self, User};
use crate::audit::{Action, AuditLog};
use crate::http::AppState;

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

pub async fn index() -> Response {
    asset(INDEX, "text/html; charset=utf-8")
}

pub async fn app_js() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

pub async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

/// Security headers on every response.
pub async fn security_headers(req: Request, next: Next) -> Response {
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
pub async fn strict_transport(req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    r.headers_mut().insert(
        "strict-transport-security",
        HeaderValue::from_static("max-age=31536000"),
    );
    r
}

/// The signed-in user of a request, if any.
pub async fn user_of(s: &AppState, headers: &HeaderMap) -> Option<User> {
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

fn error(status: StatusCode, what: impl std::fmt::Display) -> Response {
    (status, Json(json!({"error": what.to_string()}))).into_response()
}

fn unauthorized(what: &str) -> Response {
    error(StatusCode::UNAUTHORIZED, what)
}

/// Read access: the API needs a signed-in user unless the config opens the ward view.
pub async fn read_guard(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let open = s.cfg.dashboard.public_ward_view
        || !path.starts_with("/api/")
        || ["/api/me", "/api/login", "/api/logout"].contains(&path);
    if open || user_of(&s, req.headers()).await.is_some() {
        next.run(req).await
    } else {
        unauthorized("sign in to see the ward")
    }
}

/// The ward feed: a snapshot at once, then one per update (about every second).
///
/// Each client holds at most the latest snapshot (a `watch` receiver) plus what its socket
/// buffers: a client that stops reading is skipped over, never queued for. At most
/// `dashboard.max_stream_clients` at once; more are answered 503.
pub async fn stream(State(s): State<AppState>) -> Response {
    let Some(permit) = s.board.stream_permit() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the live feed already has its maximum of {} clients",
                s.board.max_stream_clients()
            ),
        );
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
    Sse::new(feed)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Login {
    name: String,
    password: String,
}

pub async fn login(State(s): State<AppState>, Json(l): Json<Login>) -> Response {
    let (users, hours) = (s.users.clone(), s.cfg.dashboard.session_hours);
    let name = l.name.clone();
    let res = tokio::task::spawn_blocking(move || {
        let u = users.lock().expect("users lock");
        let user = u.verify(&l.name, &l.password)?;
        let token = user
            .as_ref()
            .map(|x| u.start_session(&x.name, hours))
            .transpose()?;
        Ok::<_, auth::AuthError>(user.zip(token))
    })
    .await;
    match res {
        Ok(Ok(Some((user, token)))) => {
            audit(&s, Some(&user.name), Action::SignIn, json!({}));
            let cookie = format!(
                "{}={token}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={}",
                auth::COOKIE,
                (hours * 3600.0) as u64
            );
            ([(header::SET_COOKIE, cookie)], Json(json!({"user": user}))).into_response()
        }
        Ok(Ok(None)) => {
            audit(&s, None, Action::SignInRefused, json!({"name": name}));
            unauthorized("unknown user or wrong password")
        }
        Ok(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

pub async fn logout(State(s): State<AppState>, headers: HeaderMap) -> Response {
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
    ([(header::SET_COOKIE, cookie)], Json(json!({"user": null}))).into_response()
}

pub async fn me(State(s): State<AppState>, headers: HeaderMap) -> Json<serde_json::Value> {
    let user = user_of(&s, &headers).await;
    Json(
        json!({"user": user, "public_ward_view": s.cfg.dashboard.public_ward_view,
                "risk_alarm_on": s.cfg.dashboard.risk_alarm_on,
                "max_silence_secs": s.cfg.dashboard.max_silence_secs}),
    )
}

pub async fn alarms(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"alarms": s.board.snapshot().alarms}))
}

fn alarm_result(r: Result<super::alarms::Alarm, AlarmError>) -> Response {
    match r {
        Ok(a) => Json(json!({"alarm": a})).into_response(),
        Err(e @ AlarmError::Unknown(_)) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ AlarmError::BadSilence { .. }) => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

pub async fn ack(State(s): State<AppState>, headers: HeaderMap, Path(id): Path<i64>) -> Response {
    let Some(u) = user_of(&s, &headers).await else {
        return unauthorized("sign in to acknowledge alarms");
    };
    alarm_result(s.board.ack(id, u.name).await)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SilenceBody {
    secs: u64,
}

pub async fn silence(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Json(b): Json<SilenceBody>,
) -> Response {
    let Some(u) = user_of(&s, &headers).await else {
        return unauthorized("sign in to silence alarms");
    };
    alarm_result(s.board.silence(id, u.name, b.secs).await)
}

/// An engineer asks the composer to recompose now (e.g. after changing the zoo by hand).
pub async fn recompose(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let Some(u) = user_of(&s, &headers).await else {
        return unauthorized("sign in to control the plan");
    };
    if u.role < super::auth::Role::Engineer {
        return error(StatusCode::FORBIDDEN, "engineers only");
    }
    if !s.cfg.composer.enabled {
        return error(
            StatusCode::CONFLICT,
            "the composer is off ([composer] enabled = false)",
        );
    }
    match s.recompose.try_send(format!("asked by {}", u.name)) {
        Ok(()) => {
            audit(&s, Some(&u.name), Action::RecomposeRequested, json!({}));
            (StatusCode::ACCEPTED, Json(json!({"recomposing": true}))).into_response()
        }
        Err(_) => error(
            StatusCode::TOO_MANY_REQUESTS,
            "a recomposition is already queued",
        ),
    }
}

pub async fn bed_alarms(State(s): State<AppState>, Path(bed): Path<String>) -> Response {
    let db = s.cfg.storage.db.clone();
    let b = bed.clone();
    let rows = tokio::task::spawn_blocking(move || {
        super::alarms::AlarmDb::open(&db).and_then(|d| d.history(&b, 500))
    })
    .await;
    match rows {
        Ok(Ok(r)) => Json(json!({"bed": bed, "alarms": r})).into_response(),
        Ok(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
pub struct StripQuery {
    secs: Option<f64>,
}

pub async fn strip(
    State(s): State<AppState>,
    Path(bed): Path<String>,
    Query(q): Query<StripQuery>,
) -> Response {
    let secs = q.secs.unwrap_or(10.0).clamp(1.0, 30.0);
    match s.ward.strip(&bed, secs).await {
        Some(st) => Json(json!({"bed": bed, "strip": st})).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("unknown bed {bed:?}")),
    }
}

/// Appends to the audit log off the async workers.
pub fn audit(s: &AppState, user: Option<&str>, action: Action, detail: serde_json::Value) {
    AuditLog::new(&s.cfg.storage.db).record(user, action, detail);
}

/// A 404 for anything else, as JSON under /api and plain text elsewhere.
pub async fn not_found(req: Request<Body>) -> Response {
    if req.uri().path().starts_with("/api/") {
        error(StatusCode::NOT_FOUND, "no such endpoint")
    } else {
        (StatusCode::NOT_FOUND, "not found").into_response()
    }
}
