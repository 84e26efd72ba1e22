//! The accept loop in front of the [`http`](crate::http) router, with the connection-level
//! limits that `axum::serve` does not offer:
//!
//! - at most `server.max_connections` connections at once, WebSockets included (the place is
//!   held by the socket itself, so it is kept through an upgrade); one more is answered `503`
//!   and closed at once;
//! - a share of those places (`server.monitor_share`) is kept for the monitors: a monitor's
//!   WebSocket moves into one when it opens (so monitors fill those first), and a connection
//!   that finds only such a place may open `/ws/monitor` and nothing else (any other request
//!   is answered `503` and the connection closed), so pages, API clients and sign-in attempts,
//!   however many or slow, never take the last places from the monitors;
//! - a request's headers must arrive within `server.header_read_timeout_secs` (hyper's HTTP/1
//!   header timer, which also closes a connection that sends nothing): a client dribbling its
//!   headers byte by byte (slowloris) is closed. Its body is held to
//!   `server.body_read_timeout_secs` and `server.max_body_bytes` by [`body`](super::body).
//!
//! Each request carries its client's address (axum's `ConnectInfo<SocketAddr>`; the sign-in
//! back-off counts failures per address). With `[server.tls]` each connection's TLS handshake
//! runs in its own task ([`tls::handshake`](crate::http::tls::handshake)) before
//! [`serve_connection`], which serves a stream of any transport.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::MONITOR_PATH;
use crate::config::ServerConfig;

/// What a connection over the limit is told before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
Content-Length: 47\r\nConnection: close\r\n\r\n{\"error\": \"too many connections, retry later\"}\n";

/// The limits every accepted connection is held to.
#[derive(Debug, Clone)]
pub(crate) struct ConnLimits {
    /// Places any connection may take.
    places: Arc<Semaphore>,
    /// Places kept for monitors' WebSockets.
    monitor_places: Arc<Semaphore>,
    header_read_timeout: Duration,
}

/// A connection's place, shared by its stream (which holds it until the connection closes)
/// and its requests: a monitor's WebSocket moves it into the places kept for monitors, so
/// monitors fill those first and leave the others to pages and API clients.
#[derive(Debug, Clone)]
pub(crate) struct Place(Arc<Mutex<Permit>>);

#[derive(Debug)]
struct Permit {
    _permit: OwnedSemaphorePermit,
    /// One of the places kept for monitors (only `/ws/monitor` is served on it).
    kept: bool,
    monitor_places: Arc<Semaphore>,
}

impl Place {
    fn kept(&self) -> bool {
        self.0.lock().expect("place lock").kept
    }

    /// A monitor's WebSocket opens on this connection: it moves into a place kept for
    /// monitors if one is free, giving its other place back.
    pub(crate) fn move_to_monitors(&self) {
        let mut p = self.0.lock().expect("place lock");
        if p.kept {
            return;
        }
        if let Ok(kept) = p.monitor_places.clone().try_acquire_owned() {
            p._permit = kept;
            p.kept = true;
        }
    }
}

impl ConnLimits {
    pub(crate) fn new(cfg: &ServerConfig) -> ConnLimits {
        let kept = (cfg.max_connections as f64 * cfg.monitor_share).floor() as usize;
        let kept = kept.min(cfg.max_connections);
        ConnLimits {
            places: Arc::new(Semaphore::new(cfg.max_connections - kept)),
            monitor_places: Arc::new(Semaphore::new(kept)),
            header_read_timeout: Duration::from_secs_f64(cfg.header_read_timeout_secs),
        }
    }

    /// A place for one more connection (one kept for monitors when the others are taken), or
    /// `None` at the limit.
    pub(crate) fn admit(&self) -> Option<Place> {
        let (permit, kept) = match self.places.clone().try_acquire_owned() {
            Ok(p) => (p, false),
            Err(_) => (self.monitor_places.clone().try_acquire_owned().ok()?, true),
        };
        Some(Place(Arc::new(Mutex::new(Permit {
            _permit: permit,
            kept,
            monitor_places: self.monitor_places.clone(),
        }))))
    }
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then waits for the connections'
/// requests in flight (upgraded WebSockets close through their own shutdown token).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Router,
    limits: ConnLimits,
    shutdown: CancellationToken,
) {
    let conns = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %e, "Accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Some(place) = limits.admit() else {
            metrics::counter!("holmes_connections_refused_total").increment(1);
            tracing::debug!(%peer, "Connection refused: at server.max_connections");
            // Best effort: the socket is new, its send buffer empty.
            let _ = stream.try_write(BUSY);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let conn = Conn {
            app: app.clone(),
            peer,
            place: place.clone(),
            header_read_timeout: limits.header_read_timeout,
            shutdown: shutdown.clone(),
        };
        match &tls {
            None => {
                let io = Held {
                    io: stream,
                    _place: place,
                };
                conns.spawn(serve_connection(io, conn));
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                conns.spawn(async move {
                    // The place is held through the handshake: a crowd of silent TLS clients
                    // counts against the limit too.
                    if let Some(io) = crate::http::tls::handshake(&acceptor, stream).await {
                        let io = Held { io, _place: place };
                        serve_connection(io, conn).await;
                    }
                });
            }
        }
    }
    conns.close();
    conns.wait().await;
}

/// One accepted connection: what serves it and what it may ask for.
pub(crate) struct Conn {
    pub(crate) app: Router,
    /// The client's address, handed to every request as `ConnectInfo<SocketAddr>`.
    pub(crate) peer: SocketAddr,
    /// Its place, handed to every request (on a place kept for monitors only `/ws/monitor`
    /// is served).
    pub(crate) place: Place,
    pub(crate) header_read_timeout: Duration,
    pub(crate) shutdown: CancellationToken,
}

/// Serves HTTP/1.1 (with upgrades) on one accepted stream.
pub(crate) async fn serve_connection<I>(io: I, c: Conn)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (peer, place) = (c.peer, c.place);
    let app = TowerToHyperService::new(c.app);
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        let served = !place.kept() || req.uri().path() == MONITOR_PATH;
        req.extensions_mut().insert(ConnectInfo(peer));
        req.extensions_mut().insert(place.clone());
        let served = served.then(|| hyper::service::Service::call(&app, req));
        async move {
            match served {
                Some(f) => f.await,
                None => Ok(kept_for_monitors()),
            }
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(c.header_read_timeout);
    let conn = builder
        .serve_connection(TokioIo::new(io), svc)
        .with_upgrades();
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "Connection ended with an error");
            }
        }
        _ = c.shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// The answer to a request other than the monitors' WebSocket on a place kept for monitors.
fn kept_for_monitors() -> Response<Body> {
    metrics::counter!("holmes_connections_refused_total").increment(1);
    let body = r#"{"error": "too many connections, retry later (the rest are kept for monitors)"}"#;
    Response::builder()
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONNECTION, "close")
        .body(Body::from(body))
        .expect("a static response")
}

/// A stream that holds its connection's place until it is dropped (after an upgrade, when
/// the WebSocket closes).
struct Held<I> {
    io: I,
    _place: Place,
}

impl<I: AsyncRead + Unpin> AsyncRead for Held<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Held<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
