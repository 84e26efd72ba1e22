//! The API's errors and their one mapping to status codes; every error answers
//! `{"error": "..."}` (the dashboard's [`ErrorBody`]).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::dashboard::web::ErrorBody;
use crate::serving::store::StoreError;

/// Errors an API handler can return.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("unknown bed {0:?}")]
    UnknownBed(String),
    #[error(
        "no strip is kept for monitor alarm {0} (no such alarm, or a kind Holmes does not judge)"
    )]
    NoStrip(i64),
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
            ApiError::UnknownBed(_) | ApiError::NoStrip(_) => StatusCode::NOT_FOUND,
            ApiError::BadQuery(_) => StatusCode::BAD_REQUEST,
            ApiError::Store(_) | ApiError::Join(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        let body = ErrorBody {
            error: self.to_string(),
        };
        (status, Json(body)).into_response()
    }
}
