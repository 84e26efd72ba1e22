//! The link to the FHIR server: one tokio task that connects (HTTP/1.1, TLS where the base
//! URL is https), and sends the outbox's oldest resource as a conditional create (`POST
//! {base}/Observation` with `If-None-Exist: identifier=...`), one in flight, before the next.
//! Accepted (2xx: created, or already there from an earlier send): done. Refused (a 4xx other
//! than 401, 403, 404, 405, 408 and 429): parked with the `OperationOutcome`'s reason, never
//! sent again. Anything else (5xx, those 4xx, which say the server, the base URL or the token
//! is wrong rather than the resource, a redirect, no answer within
//! `fhir.request_timeout_secs`, a broken connection): the same resource again after a
//! back-off doubling from `fhir.retry_min_ms` to `fhir.retry_max_ms`, on a new connection
//! where the old one failed or the token was refused (the token file is read again at each
//! connection). An observation that grows older than `fhir.max_observation_age_secs`
//! meanwhile is dropped and counted. Trouble is logged once per episode (until the server
//! answers a resource again).
//!
//! The link reads the outbox only through its thread and publishes what it sees in
//! [`LinkStatus`]; nothing upstream waits on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::client::{self, ClientError, Conn, Request};
use super::resource::{outcome_reason, request_of};
use crate::config::{BaseUrl, FhirConfig};
use crate::core::time::now_ms;
use crate::outbound::LinkStatus;
use crate::outbound::backoff::Backoff;
use crate::outbound::outbox::{Cmd, Final, Outbox, Pending};

#[derive(Debug, thiserror::Error)]
pub(crate) enum FhirError {
    /// The connection: opening it, a request on it, its answer.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The reason (the OperationOutcome's) is shown in `/api/health`, not logged: a server may
    /// quote the resource.
    #[error("the server answered {status}")]
    Server { status: u16, reason: String },
    /// The server closed the idle connection (its keep-alive ran out): open another.
    #[error("the server closed the idle connection")]
    Idle,
    #[error("cannot read fhir.token_file {path}: {reason}")]
    Token { path: String, reason: String },
    #[error("stopping")]
    Stopping,
}

/// What the server's status says of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Accepted,
    /// The resource itself is refused: park it.
    Refused,
    /// The server, the address or the token is wrong for now: send it again.
    Retry,
}

pub(crate) fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Accepted,
        401 | 403 | 404 | 405 | 408 | 429 => Verdict::Retry,
        400..=499 => Verdict::Refused,
        _ => Verdict::Retry,
    }
}

/// What the link task is given.
pub(crate) struct Link {
    pub(crate) cfg: FhirConfig,
    pub(crate) base: BaseUrl,
    pub(crate) outbox: Outbox,
    pub(crate) status: Arc<LinkStatus>,
    /// Woken by the outbox thread when a resource is queued.
    pub(crate) wake: Arc<Notify>,
    /// Set when the base URL is https.
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    pub(crate) shutdown: CancellationToken,
    /// In a failure episode (logged once, at warn, until the server answers a resource).
    pub(crate) failing: AtomicBool,
}

impl Link {
    fn set_connected(&self, on: bool) {
        self.status.connected.store(on, Ordering::Relaxed);
        metrics::gauge!("holmes_fhir_connected").set(if on { 1.0 } else { 0.0 });
    }

    /// Shows `e` and logs it: at warn once per episode, at debug while it lasts.
    fn trouble(&self, e: &FhirError) {
        if self.failing.swap(true, Ordering::Relaxed) {
            tracing::debug!(error = %e, "FHIR link trouble");
        } else {
            tracing::warn!(error = %e, server = %self.base.address(), "FHIR link trouble; resources wait in the outbox");
        }
        let shown = match e {
            FhirError::Server { reason, .. } => format!("{e}: {reason}"),
            _ => e.to_string(),
        };
        *self.status.last_error.lock().expect("status lock") = Some(shown);
    }

    /// Connects, serves, and reconnects after a back-off until shutdown.
    pub(crate) async fn run(self) {
        let mut backoff = Backoff::new(self.cfg.retry_min_ms, self.cfg.retry_max_ms);
        let mut announced = false;
        loop {
            let res = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                r = self.open() => r,
            };
            let res = match res {
                Ok((conn, auth)) => {
                    self.set_connected(true);
                    // At info once, not again for a connection the server let go idle.
                    if self.failing.load(Ordering::Relaxed) || announced {
                        tracing::debug!(server = %self.base.address(), "FHIR link connected");
                    } else {
                        tracing::info!(server = %self.base.address(), "FHIR link connected");
                        announced = true;
                    }
                    let r = self.serve(conn, auth.as_deref(), &mut backoff).await;
                    self.set_connected(false);
                    r
                }
                Err(e) => Err(e),
            };
            if self.shutdown.is_cancelled() {
                return;
            }
            match res {
                // A keep-alive run out is no failure: connect again at once.
                Err(FhirError::Idle) => continue,
                Err(e) => {
                    metrics::counter!("holmes_fhir_connection_failures_total").increment(1);
                    self.trouble(&e);
                }
                Ok(()) => {}
            }
            if !backoff.wait(&self.shutdown).await {
                return;
            }
        }
    }

    /// Reads the token (if any) and opens a connection.
    async fn open(&self) -> Result<(Conn, Option<String>), FhirError> {
        let auth = if self.cfg.token_file.is_empty() {
            None
        } else {
            let path = &self.cfg.token_file;
            let t = tokio::fs::read_to_string(path)
                .await
                .map_err(|e| FhirError::Token {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
            Some(format!("Bearer {}", t.trim()))
        };
        let limit = Duration::from_secs_f64(self.cfg.connect_timeout_secs);
        let conn = client::connect(&self.base, self.tls.as_ref(), limit).await?;
        Ok((conn, auth))
    }

    /// Sends the outbox's resources on `conn`, one at a time, until the connection fails.
    async fn serve(
        &self,
        mut conn: Conn,
        auth: Option<&str>,
        backoff: &mut Backoff,
    ) -> Result<(), FhirError> {
        loop {
            let Some(p) = self.outbox.next().await else {
                tokio::select! {
                    _ = self.shutdown.cancelled() => return Err(FhirError::Stopping),
                    _ = self.wake.notified() => {}
                }
                continue;
            };
            if conn.is_closed() {
                return Err(FhirError::Idle);
            }
            self.deliver(&mut conn, auth, &p, backoff).await?;
        }
    }

    /// Sends `p` until the server answers it for good (or, for an observation, it grows too
    /// old).
    async fn deliver(
        &self,
        conn: &mut Conn,
        auth: Option<&str>,
        p: &Pending,
        backoff: &mut Backoff,
    ) -> Result<(), FhirError> {
        let Some((kind, query)) = request_of(&p.body) else {
            let f = Final::Parked {
                id: p.id,
                code: "unsendable".into(),
                reason: "the outbox row is not a resource with an identifier".into(),
            };
            return self.finish(f, backoff).await;
        };
        let path = format!("/{kind}");
        let max_age_ms = (self.cfg.max_observation_age_secs * 1000.0) as i64;
        let limit = Duration::from_secs_f64(self.cfg.request_timeout_secs);
        let mut first = true;
        loop {
            if p.observation && now_ms() - p.created_ms > max_age_ms {
                return self.finish(Final::Expired(p.id), backoff).await;
            }
            let mut headers = vec![("If-None-Exist", query.as_str())];
            if let Some(a) = auth {
                headers.push(("Authorization", a));
            }
            let req = Request {
                method: "POST",
                path: &path,
                headers: &headers,
                body: Some(&p.body),
            };
            let t = Instant::now();
            let r = tokio::select! {
                _ = self.shutdown.cancelled() => return Err(FhirError::Stopping),
                r = conn.send(&self.base, req, limit, self.cfg.max_response_bytes) => r,
            };
            self.outbox.tell(Cmd::Sent(p.id)).await;
            metrics::counter!(if first {
                "holmes_fhir_sent_total"
            } else {
                "holmes_fhir_resent_total"
            })
            .increment(1);
            first = false;
            let a = r?;
            metrics::histogram!("holmes_fhir_request_seconds").record(t.elapsed().as_secs_f64());
            let code = a.status.to_string();
            match verdict(a.status) {
                Verdict::Accepted => {
                    self.failing.store(false, Ordering::Relaxed);
                    return self.finish(Final::Acked { id: p.id, code }, backoff).await;
                }
                Verdict::Refused => {
                    self.failing.store(false, Ordering::Relaxed);
                    let reason = outcome_reason(a.status, &a.body);
                    let f = Final::Parked {
                        id: p.id,
                        code,
                        reason,
                    };
                    return self.finish(f, backoff).await;
                }
                Verdict::Retry => {
                    metrics::counter!("holmes_fhir_retried_answers_total").increment(1);
                    let e = FhirError::Server {
                        status: a.status,
                        reason: outcome_reason(a.status, &a.body),
                    };
                    // A refused token: a new connection reads the token file again.
                    if matches!(a.status, 401 | 403) {
                        return Err(e);
                    }
                    self.trouble(&e);
                    backoff.resend(&self.shutdown, FhirError::Stopping).await?;
                }
            }
        }
    }

    /// Records a resource's final state; one the outbox cannot write leaves it pending, so the
    /// link backs off before it goes again.
    async fn finish(&self, f: Final, backoff: &mut Backoff) -> Result<(), FhirError> {
        let written = self.outbox.finish(f).await;
        backoff
            .settle(written, &self.shutdown, FhirError::Stopping)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::message::{Draft, Observation};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn a_connection_the_server_let_go_idle_is_replaced_quietly() {
        // A server that answers 201 and then closes the connection, as one whose keep-alive
        // ran out; it counts the requests it got.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = got.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (r, mut w) = tcp.into_split();
                let mut r = BufReader::new(r);
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        break;
                    }
                    if line == "\r\n" {
                        let mut body = vec![0; len];
                        r.read_exact(&mut body).await.unwrap();
                        count.fetch_add(1, Ordering::Relaxed);
                        let _ = w
                            .write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
                            .await;
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let db = crate::serving::store::Db::open(
            &dir.path().join("f.db"),
            &crate::outbound::TEST_SCHEMA,
        )
        .unwrap();
        let cfg = FhirConfig {
            base_url: format!("http://127.0.0.1:{port}/fhir/R4"),
            retry_min_ms: 200,
            retry_max_ms: 400,
            ..FhirConfig::default()
        };
        let status = Arc::new(LinkStatus::default());
        let wake = Arc::new(Notify::new());
        let (ob, th) = crate::outbound::outbox::start(
            super::super::spec(&cfg),
            &db,
            &Default::default(),
            status.clone(),
            wake.clone(),
        )
        .unwrap();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(
            Link {
                base: BaseUrl::parse(&cfg.base_url).unwrap(),
                cfg,
                outbox: ob.clone(),
                status: status.clone(),
                wake,
                tls: None,
                shutdown: shutdown.clone(),
                failing: AtomicBool::new(false),
            }
            .run(),
        );
        for at_ms in [1, 2, 3] {
            ob.enqueue(Draft::Observation(Observation {
                bed: "b1".into(),
                at_ms,
                score: Some(0.5),
                heart_rate_bpm: None,
                risk_alarm: false,
                quality: "scored",
                patient: None,
            }))
            .await;
            let t = Instant::now();
            while status.backlog.load(Ordering::Relaxed) > 0 {
                assert!(t.elapsed() < Duration::from_secs(5), "not delivered");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Idle long enough for the client to see the server's close.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert_eq!(got.load(Ordering::Relaxed), 3, "each sent once");
        assert_eq!(*status.last_error.lock().unwrap(), None, "no trouble");
        shutdown.cancel();
        task.await.unwrap();
        drop(ob);
        th.join().unwrap();
    }

    #[test]
    fn statuses_say_accept_park_or_retry() {
        for (s, v) in [
            (201, Verdict::Accepted),
            (200, Verdict::Accepted),
            (400, Verdict::Refused),
            (409, Verdict::Refused),
            (412, Verdict::Refused),
            (422, Verdict::Refused),
            (401, Verdict::Retry),
            (404, Verdict::Retry),
            (429, Verdict::Retry),
            (302, Verdict::Retry),
            (500, Verdict::Retry),
            (503, Verdict::Retry),
        ] {
            assert_eq!(verdict(s), v, "{s}");
        }
    }
}
