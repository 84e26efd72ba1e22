//! Request bodies, held to two limits on every route before any handler runs: at most
//! `server.max_body_bytes` (a larger announced or sent body is answered `413` unread), and in
//! full within `server.body_read_timeout_secs` of the headers (a client that announces a body
//! and dribbles it, or never sends it, is answered `408`). Either way the connection is closed,
//! so a slow body holds its place no longer than the timeout. The headers' own timeout is
//! [`listen`](super::listen)'s.
//!
//! Every answer of the API and the dashboard takes a small JSON body or none; the monitors'
//! WebSocket upgrade has none (its messages have their own limit, `ingest.max_frame_bytes`).

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::ServerConfig;
use crate::dashboard::web::ErrorBody;

/// The limits on a request's body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    max_bytes: usize,
    read_timeout: Duration,
}

impl BodyLimits {
    pub(crate) fn new(cfg: &ServerConfig) -> BodyLimits {
        BodyLimits {
            max_bytes: cfg.max_body_bytes,
            read_timeout: Duration::from_secs_f64(cfg.body_read_timeout_secs),
        }
    }
}

/// Reads the request's body in full within the limits, then hands the request on.
pub(crate) async fn limit_body(State(l): State<BodyLimits>, req: Request, next: Next) -> Response {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body over {} bytes", l.max_bytes),
        )
    };
    if announced.is_some_and(|n| n > l.max_bytes as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(l.read_timeout, axum::body::to_bytes(body, l.max_bytes)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) if is_length_limit(&e) => too_large(),
        Ok(Err(e)) => refuse(
            StatusCode::BAD_REQUEST,
            format!("the request body could not be read: {e}"),
        ),
        Err(_) => {
            metrics::counter!("holmes_http_body_timeouts_total").increment(1);
            refuse(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    l.read_timeout.as_secs_f64()
                ),
            )
        }
    }
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// An error answer that closes the connection (what is left of the body is never read).
fn refuse(status: StatusCode, error: String) -> Response {
    let mut r = (status, Json(ErrorBody { error })).into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}
