//! Wiring of the daemon: store writer, serving engine, ward and HTTP server, started in that
//! order and stopped in reverse through one [`CancellationToken`], SQLite flushed last.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::engine::reload::{ZooStatus, watch_zoo};
use crate::engine::{Engine, EngineError, MemberSpec, device, plan};
use crate::http::{AppState, ModelInfo, router};
use crate::scorer::{Ensemble, ScorerError};
use crate::store::{self, ServedEnsemble, StoreError, StoreReader};
use crate::ward::{Ward, WardOutputs};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Scorer(#[from] ScorerError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("listening socket: {0}")]
    Io(#[from] std::io::Error),
}

/// A running daemon.
pub struct Running {
    pub addr: SocketAddr,
    /// Cancel to stop; then await [`Running::stopped`].
    pub shutdown: CancellationToken,
    pub engine: Engine,
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
    crate::telemetry::handle();
    // Validate every member once here (a missing or broken one refuses to start, naming it).
    let (dir, names) = (
        cfg.ensemble.models_dir.clone(),
        cfg.ensemble.members.clone(),
    );
    let probe = tokio::task::spawn_blocking(move || Ensemble::load(&dir, &names, 0))
        .await
        .expect("model loading does not panic")?;
    let models: Vec<ModelInfo> = probe
        .members
        .iter()
        .map(|m| ModelInfo::of(&m.manifest))
        .collect();
    let inputs: Vec<_> = probe.members.iter().map(|m| m.manifest.input).collect();
    drop(probe);
    let described: Vec<(String, u32, String, String)> = models
        .iter()
        .map(|m| (m.name.clone(), m.version, m.sha256.clone(), m.input.clone()))
        .collect();
    // Devices, and the profiles measured earlier by `holmes profile` (they set the batch caps),
    // read off the async workers.
    let (db, keys) = (
        cfg.storage.db.clone(),
        models
            .iter()
            .map(|m| (m.name.clone(), m.sha256.clone()))
            .collect::<Vec<_>>(),
    );
    let (devices, profiles) = tokio::task::spawn_blocking(move || {
        let mut profiles = std::collections::HashMap::new();
        for (name, sha) in keys {
            for p in crate::profile::load_profiles(&db, &name, &sha).unwrap_or_default() {
                profiles.insert((name.clone(), p.device.clone()), p);
            }
        }
        (device::discover(), profiles)
    })
    .await
    .expect("device discovery does not panic");
    let weights: Vec<(String, u64)> = models
        .iter()
        .map(|m| (m.name.clone(), m.parameters as u64 * 4))
        .collect();
    let beds = cfg.ward.beds.len().max(cfg.ward.max_beds.min(64));
    let cells = plan::plan(&weights, &devices, &profiles, &cfg.engine, beds);
    let plan = serde_json::to_string(&cells).expect("a plan serialises");
    let store_cfg = cfg.storage.clone();
    let (store, ensemble_id, writer) = tokio::task::spawn_blocking(move || {
        store::start(
            &store_cfg,
            ServedEnsemble {
                members: &described,
                source: "config",
                plan,
            },
        )
    })
    .await
    .expect("store start-up does not panic")?;
    let db = cfg.storage.db.clone();
    let reader = tokio::task::spawn_blocking(move || StoreReader::open(&db))
        .await
        .expect("opening the database does not panic")?;

    let specs: Vec<MemberSpec> = models
        .iter()
        .zip(inputs)
        .zip(cells)
        .map(|((m, input), cell)| MemberSpec {
            name: m.name.clone(),
            version: m.version,
            input,
            factory: device::zoo_factory(&cfg.ensemble.models_dir.join(&m.name), &cell.device),
            workers: cell.workers,
            batch_cap: cell.batch_cap,
            weight: 1.0,
            device: cell.device,
        })
        .collect();
    let (engine_cfg, store2) = (cfg.engine.clone(), store.clone());
    let engine =
        tokio::task::spawn_blocking(move || Engine::start(&engine_cfg, specs, store2, ensemble_id))
            .await
            .expect("engine start-up does not panic")?;

    let zoo_status = Arc::new(std::sync::Mutex::new(ZooStatus::default()));
    let (zoo_gen_tx, zoo_generation) = tokio::sync::watch::channel(0u64);
    let watcher = {
        let (dir, eng, st, status) = (
            cfg.ensemble.models_dir.clone(),
            engine.clone(),
            store.clone(),
            zoo_status.clone(),
        );
        tokio::task::spawn_blocking(move || watch_zoo(dir, eng, st, status, zoo_gen_tx))
            .await
            .expect("zoo watcher start-up does not panic")
    };
    let watcher = match watcher {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::error!(error = %e, "Cannot watch the zoo folder; models will not hot-reload");
            None
        }
    };

    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    let ward = Ward::new(
        cfg.clone(),
        WardOutputs {
            engine: engine.clone(),
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
        engine: engine.clone(),
        zoo: zoo_status,
        zoo_generation,
        shutdown: shutdown.child_token(),
    };
    let app = router(state);
    let token = shutdown.clone();
    let eng = engine.clone();
    let join = tokio::spawn(async move {
        let serve =
            axum::serve(listener, app).with_graceful_shutdown(token.clone().cancelled_owned());
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "HTTP server failed");
        }
        // Beds stop; the engine finishes what is queued and stops; then the writer flushes.
        drop(watcher);
        tracker.close();
        tracker.wait().await;
        drop(ward);
        let _ = tokio::task::spawn_blocking(move || {
            eng.shutdown();
            store.close();
            let _ = writer.join();
        })
        .await;
    });
    tracing::info!(%addr, ensemble_id, "Holmes is serving");
    Ok(Running {
        addr,
        shutdown,
        engine,
        join,
    })
}
