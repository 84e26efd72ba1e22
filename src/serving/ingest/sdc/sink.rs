//! The notification sink: one HTTP listener the devices post their reports to, each device's
//! session at a path of its own with a random token (a post at any other path, a stale
//! session's or a stranger's, is refused; a body over [`MAX_REPORT_BYTES`] too; a report that
//! finds its device's queue full is dropped and counted). With TLS (`[sdc] tls_ca`) it speaks
//! HTTPS only, to devices whose certificate the CA signed: each connection's handshake runs in
//! a task of its own (at most [`HANDSHAKES`] at once, each within 10 s), so a slow or silent
//! peer never holds up accepting. Past that many silent peers at once, a device's new
//! connection waits: the sink belongs on the device network, firewalled to the devices.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The largest report the sink takes (a second of 12 leads at 1,000 Hz is about 100 kB).
pub(crate) const MAX_REPORT_BYTES: usize = 512 * 1024;
/// TLS handshakes run at once; a connection beyond them waits to be accepted.
const HANDSHAKES: usize = 64;

/// A device's queue and its session's token (empty between sessions).
pub(super) type Slot = (mpsc::Sender<Bytes>, Arc<std::sync::Mutex<String>>);

/// Serves the sink on `listener` until `shutdown`: plain HTTP, or HTTPS with `tls`.
pub(super) fn serve(
    listener: TcpListener,
    local: SocketAddr,
    tls: Option<TlsAcceptor>,
    slots: Vec<Slot>,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) {
    let app = Router::new()
        .route("/sdc/{device}/{token}/{what}", post(notified))
        .layer(DefaultBodyLimit::max(MAX_REPORT_BYTES))
        .with_state(Arc::new(slots));
    let stop = shutdown.clone().cancelled_owned();
    match tls {
        None => {
            tracker.spawn(async move {
                if let Err(e) = axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
                {
                    tracing::error!(error = %e, "SDC: the notification sink stopped");
                }
            });
        }
        Some(acceptor) => {
            let (tx, rx) = mpsc::channel(HANDSHAKES);
            tracker.spawn(accept(listener, acceptor, tx, shutdown, tracker.clone()));
            let listener = Handshaken { rx, local };
            tracker.spawn(async move {
                if let Err(e) = axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
                {
                    tracing::error!(error = %e, "SDC: the notification sink stopped");
                }
            });
        }
    }
}

/// Accepts connections and hands each, once its TLS handshake is done, to the server.
async fn accept(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    done: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let places = Arc::new(Semaphore::new(HANDSHAKES));
    loop {
        let place = tokio::select! {
            _ = shutdown.cancelled() => return,
            p = places.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors, mostly: wait rather than spin.
                    tracing::warn!(error = %e, "SDC: the sink cannot accept");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (acceptor, done) = (acceptor.clone(), done.clone());
        tracker.spawn(async move {
            let _place = place;
            // A failed handshake is counted and logged at debug by `handshake`.
            if let Some(io) = crate::core::tls::handshake(&acceptor, stream).await {
                let _ = done.send((io, peer)).await;
            }
        });
    }
}

/// The sink's connections, each past its TLS handshake, as axum's server takes them.
struct Handshaken {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl axum::serve::Listener for Handshaken {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accepting task stopped (shutdown): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// A device's report, handed to its task; 202 with an empty body, as devices expect. A post
/// at another session's (or a made-up) path is refused.
async fn notified(
    State(slots): State<Arc<Vec<Slot>>>,
    Path((device, token, _what)): Path<(usize, String, String)>,
    body: Bytes,
) -> StatusCode {
    let Some((tx, current)) = slots.get(device) else {
        return StatusCode::NOT_FOUND;
    };
    if token.is_empty() || *current.lock().expect("lock") != token {
        metrics::counter!("holmes_sdc_reports_refused_total").increment(1);
        return StatusCode::NOT_FOUND;
    }
    if tx.try_send(body).is_err() {
        metrics::counter!("holmes_sdc_reports_dropped_total").increment(1);
    }
    StatusCode::ACCEPTED
}
