//! The appliance: Holmes run as a system service on the ward server.
//!
//! - [`serve`]: `holmes serve` — starts the [`server`](crate::appliance::server), tells systemd when it is
//!   ready (models warm, the HTTP port answering), pings systemd's watchdog while the engine
//!   and the store writer make progress, and on SIGTERM or ctrl-c stops within
//!   [`ServiceConfig::shutdown_timeout_secs`] (monitors closed with 1001 going-away, windows in
//!   flight committed, the store flushed and SQLite checkpointed).
//! - [`notify`]: systemd's notify protocol (`READY=1`, `STATUS=`, `WATCHDOG=1`, `STOPPING=1`)
//!   and the liveness check behind the watchdog pings.
//! - [`validate`]: `holmes validate` — checks a config, the zoo and the database path without
//!   starting anything (the unit's `ExecStartPre=`).
//!
//! The unit file, sysusers file and install notes live in `systemd/`.

pub(crate) mod notify;
mod parts;
pub mod schema;
pub mod server;
pub(crate) mod validate;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::Config;
use notify::{Liveness, Notifier};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ApplianceError {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Server(#[from] crate::appliance::server::ServerError),
    #[error("the HTTP port {addr} does not answer after start-up: {reason}")]
    NotAnswering { addr: SocketAddr, reason: String },
    #[error(
        "shutdown did not finish within service.shutdown_timeout_secs = {secs} s; \
         scores still queued for the database may be lost"
    )]
    ShutdownTimeout { secs: f64 },
}

/// `holmes serve`: runs the daemon until SIGTERM or ctrl-c, speaking systemd's notify
/// protocol when `NOTIFY_SOCKET` is set.
pub(crate) async fn serve(cfg: Config) -> Result<(), ApplianceError> {
    let notifier = Notifier::from_env();
    notifier.status("Loading and warming the ensemble");
    let addr = cfg.server.listen;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ApplianceError::Bind { addr, source })?;
    let service = cfg.service.clone();
    let running = crate::appliance::server::start(cfg, listener).await?;
    // Ready means a monitor can connect now: the port must answer HTTP, not only be bound.
    probe_http(running.addr).await?;
    notifier.ready(&format!(
        "Serving on {} with {} members",
        running.addr,
        running.engine.members().len()
    ));
    let watchdog = notifier.watchdog_interval().map(|every| {
        let live = Liveness::new(
            running.engine.clone(),
            running.store_health.clone(),
            Duration::from_secs_f64(service.watchdog_stall_secs),
        );
        tokio::spawn(notify::watchdog(notifier.clone(), every, live))
    });
    shutdown_signal().await;
    tracing::info!(
        timeout_secs = service.shutdown_timeout_secs,
        "Shutting down: closing monitors, finishing windows in flight, flushing the database"
    );
    notifier.stopping("Shutting down");
    if let Some(w) = watchdog {
        w.abort();
    }
    running.shutdown.cancel();
    let bound = Duration::from_secs_f64(service.shutdown_timeout_secs);
    match tokio::time::timeout(bound, running.stopped()).await {
        Ok(()) => {
            tracing::info!("Shutdown complete");
            Ok(())
        }
        Err(_) => Err(ApplianceError::ShutdownTimeout {
            secs: service.shutdown_timeout_secs,
        }),
    }
}

/// One HTTP request to `/health/ready` on the bound port (loopback when bound to every
/// interface). The accept loop must react: an answer, a close or a reset (a TLS listener
/// refusing plain HTTP) will do; a kernel backlog alone accepts the connection and then stays
/// silent until the timeout.
async fn probe_http(addr: SocketAddr) -> Result<(), ApplianceError> {
    let mut target = addr;
    if target.ip().is_unspecified() {
        target.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let fail = |reason: String| ApplianceError::NotAnswering { addr, reason };
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(target)
            .await
            .map_err(|e| fail(e.to_string()))?;
        s.write_all(b"GET /health/ready HTTP/1.1\r\nHost: holmes\r\nConnection: close\r\n\r\n")
            .await
            .map_err(|e| fail(e.to_string()))?;
        let mut head = [0u8; 16];
        match s.read(&mut head).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
            Err(e) => Err(fail(e.to_string())),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .map_err(|_| fail("no answer within 10 s".into()))?
}

/// SIGTERM or ctrl-c, whichever comes first.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
