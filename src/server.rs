//! Wiring of the daemon: store writer, scoring threads, ward and HTTP server, started in that
//! order and stopped in reverse through one [`CancellationToken`], SQLite flushed last.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::http::{AppState, ModelInfo, router};
use crate::scorer::{self, Ensemble, ScorerError};
use crate::store::{self, ServedEnsemble, StoreError, StoreReader};
use crate::ward::{Ward, WardOutputs};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Scorer(#[from] ScorerError),
    #[error("listening socket: {0}")]
    Io(#[from] std::io::Error),
}

/// A running daemon.
pub struct Running {
    pub addr: SocketAddr,
    /// Cancel to stop; then await [`Running::stopped`].
    pub shutdown: CancellationToken,
    join: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Waits until every task has stopped and the database is flushed.
    pub async fn stopped(self) {
        let _ = self.join.await;
    }
}

/// Starts the daemon on `listener`: loads and warms the ensemble, opens the database, and
/// serves until `shutdown` is cancelled.
pub async fn start(cfg: Config, listener: TcpListener) -> Result<Running, ServerError> {
    let addr = listener.local_addr()?;
    // The manifests of the members (loaded once here to describe them; each scoring thread
    // loads its own copy).
    let probe = Ensemble::load(&cfg.ensemble.models_dir, &cfg.ensemble.members, 0)?;
    let models: Vec<ModelInfo> = probe
        .members
        .iter()
        .map(|m| {
            let mf = &m.manifest;
            ModelInfo {
                name: mf.name.clone(),
                version: mf.version,
                input: mf.input.label(),
                parameters: mf.parameters,
                macs_per_window: mf.macs_per_window,
                sha256: mf.weights.sha256.clone(),
                val_roc_auc: mf.metrics.get("validation").map(|m| m.roc_auc),
                test_roc_auc: mf.metrics.get("test").map(|m| m.roc_auc),
            }
        })
        .collect();
    drop(probe);
    let described: Vec<(String, u32, String, String)> = models
        .iter()
        .map(|m| (m.name.clone(), m.version, m.sha256.clone(), m.input.clone()))
        .collect();
    let store_cfg = cfg.storage.clone();
    let (store, ensemble_id, writer) = tokio::task::spawn_blocking(move || {
        store::start(
            &store_cfg,
            ServedEnsemble {
                members: &described,
                source: "config",
            },
        )
    })
    .await
    .expect("store start-up does not panic")?;
    let reader = StoreReader::open(&cfg.storage.db)?;

    let (win_tx, win_rx) = mpsc::channel(cfg.scoring.queue);
    let (threads, dir, names) = (
        cfg.scoring.threads,
        cfg.ensemble.models_dir.clone(),
        cfg.ensemble.members.clone(),
    );
    let store2 = store.clone();
    let scorers = tokio::task::spawn_blocking(move || {
        scorer::start(threads, &dir, &names, ensemble_id, win_rx, store2)
    })
    .await
    .expect("scorer start-up does not panic")?;

    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    let ward = Ward::new(
        cfg.clone(),
        WardOutputs {
            windows: win_tx,
            store: store.clone(),
        },
        shutdown.child_token(),
        tracker.clone(),
    );
    let state = AppState {
        cfg: cfg.clone(),
        ward: ward.clone(),
        reader,
        store_health: store.health.clone(),
        ensemble_id,
        models: Arc::new(models),
        shutdown: shutdown.child_token(),
    };
    let app = router(state);
    let token = shutdown.clone();
    let join = tokio::spawn(async move {
        let serve =
            axum::serve(listener, app).with_graceful_shutdown(token.clone().cancelled_owned());
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "HTTP server failed");
        }
        // Beds stop, which closes the scorer queue; scorers drain and stop, then the writer.
        tracker.close();
        tracker.wait().await;
        drop(ward);
        let _ = tokio::task::spawn_blocking(move || {
            for s in scorers {
                let _ = s.join();
            }
            drop(store);
            let _ = writer.join();
        })
        .await;
    });
    tracing::info!(%addr, ensemble_id, "Holmes is serving");
    Ok(Running {
        addr,
        shutdown,
        join,
    })
}
