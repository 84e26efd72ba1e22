//! The accept loop in front of the [`http`](crate::http) router, with the connection-level
//! limits that `axum::serve` does not offer:
//!
//! - at most `server.max_connections` connections at once, WebSockets included (the place is
//!   held by the socket itself, so it is kept through an upgrade); one more is answered `503`
//!   and closed at once;
//! - a request's headers must arrive within `server.header_read_timeout_secs` (hyper's HTTP/1
//!   header timer, which also closes a connection that sends nothing): a client dribbling its
//!   headers byte by byte (slowloris) is closed.
//!
//! With `[server.tls]` each connection's TLS handshake runs in its own task
//! ([`tls::handshake`](crate::http::tls::handshake)) before [`serve_connection`], which serves a
//! stream of any transport.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ServerConfig;

/// What a connection over the limit is told before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
Content-Length: 47\r\nConnection: close\r\n\r\n{\"error\": \"too many connections, retry later\"}\n";

/// The limits every accepted connection is held to.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    places: Arc<Semaphore>,
    header_read_timeout: Duration,
}

impl ConnLimits {
    pub fn new(cfg: &ServerConfig) -> ConnLimits {
        ConnLimits {
            places: Arc::new(Semaphore::new(cfg.max_connections)),
            header_read_timeout: Duration::from_secs_f64(cfg.header_read_timeout_secs),
        }
    }

    /// A place for one more connection, or `None` at the limit.
    pub fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.places.clone().try_acquire_owned().ok()
    }
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then waits for the connections'
/// requests in flight (upgraded WebSockets close through their own shutdown token).
pub async fn serve(
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
        let (app, timeout, shutdown) = (app.clone(), limits.header_read_timeout, shutdown.clone());
        match &tls {
            None => {
                let io = Held {
                    io: stream,
                    _place: place,
                };
                conns.spawn(serve_connection(io, app, timeout, shutdown));
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                conns.spawn(async move {
                    // The place is held through the handshake: a crowd of silent TLS clients
                    // counts against the limit too.
                    if let Some(io) = crate::http::tls::handshake(&acceptor, stream).await {
                        let io = Held { io, _place: place };
                        serve_connection(io, app, timeout, shutdown).await;
                    }
                });
            }
        }
    }
    conns.close();
    conns.wait().await;
}

/// Serves HTTP/1.1 (with upgrades) on one accepted stream.
pub async fn serve_connection<I>(
    io: I,
    app: Router,
    header_read_timeout: Duration,
    shutdown: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
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
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// A stream that holds its connection's place until it is dropped (after an upgrade, when
/// the WebSocket closes).
struct Held<I> {
    io: I,
    _place: OwnedSemaphorePermit,
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
