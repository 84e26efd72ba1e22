//! Wiring of the daemon: store writer, serving engine, ward and HTTP server, started in that
//! order and stopped in reverse through one [`CancellationToken`], SQLite flushed last.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::composer::{self, service::Serving};
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
    #[error("dashboard: {0}")]
    Dashboard(String),
    #[error("listening socket: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error(transparent)]
    Devices(#[from] crate::devices::DeviceError),
}

/// A running daemon.
pub struct Running {
    pub addr: SocketAddr,
    /// Cancel to stop; then await [`Running::stopped`].
    pub shutdown: CancellationToken,
    pub engine: Engine,
    /// The store writer's health (the watchdog reads its heartbeat).
    pub store_health: Arc<store::StoreHealth>,
    join: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Waits until every task has stopped and the database is flushed.
    pub async fn stopped(self) {
        let _ = self.join.await;
    }
}

/// An ensemble ready to serve: its members validated, placed by the planner and described
/// for the store.
pub struct Prepared {
    pub models: Vec<ModelInfo>,
    pub specs: Vec<MemberSpec>,
    /// `(name, version, sha256, input)` per member, for the store.
    pub described: Vec<(String, u32, String, String)>,
    /// The plan's cells as JSON.
    pub plan: String,
}

/// Loads and validates the named members (a missing or broken one is an error naming it),
/// reads their stored profiles and places them on `devices` for `beds` beds. Blocking.
pub fn prepare(
    cfg: &Config,
    names: &[String],
    devices: &[device::Device],
    beds: usize,
) -> Result<Prepared, ServerError> {
    let dir = &cfg.ensemble.models_dir;
    let probe = Ensemble::load(dir, names, 0)?;
    let models: Vec<ModelInfo> = probe
        .members
        .iter()
        .map(|m| ModelInfo::of(&m.manifest))
        .collect();
    let inputs: Vec<_> = probe.members.iter().map(|m| m.manifest.input).collect();
    drop(probe);
    let described = models
        .iter()
        .map(|m| (m.name.clone(), m.version, m.sha256.clone(), m.input.clone()))
        .collect();
    // The profiles measured earlier by `holmes profile` set the batch caps.
    let mut profiles = std::collections::HashMap::new();
    for m in &models {
        for p in
            crate::profile::load_profiles(&cfg.storage.db, &m.name, &m.sha256).unwrap_or_default()
        {
            profiles.insert((m.name.clone(), p.device.clone()), p);
        }
    }
    let weights: Vec<(String, u64)> = models
        .iter()
        .map(|m| (m.name.clone(), m.parameters as u64 * 4))
        .collect();
    let cells = plan::plan(&weights, devices, &profiles, &cfg.engine, beds);
    let plan = serde_json::to_string(&cells).expect("a plan serialises");
    let specs = models
        .iter()
        .zip(inputs)
        .zip(cells)
        .map(|((m, input), cell)| MemberSpec {
            name: m.name.clone(),
            version: m.version,
            input,
            factory: device::zoo_factory(&dir.join(&m.name), &cell.device),
            workers: cell.workers,
            batch_cap: cell.batch_cap,
            weight: 1.0,
            device: cell.device,
        })
        .collect();
    Ok(Prepared {
        models,
        specs,
        described,
        plan,
    })
}

/// Starts the daemon on `listener`: loads and warms the ensemble, opens the database, and
/// serves until `shutdown` is cancelled.
pub async fn start(cfg: Config, listener: TcpListener) -> Result<Running, ServerError> {
    let addr = listener.local_addr()?;
    let sc = &cfg.server;
    crate::tls::check_transport(addr, sc.tls.as_ref(), sc.allow_plain_http_on_network)?;
    let tls = match sc.tls.clone() {
        Some(t) => Some(
            tokio::task::spawn_blocking(move || crate::tls::server_config(&t))
                .await
                .expect("reading the TLS files does not panic")?,
        ),
        None => None,
    };
    crate::telemetry::handle();
    let devices = tokio::task::spawn_blocking(device::discover)
        .await
        .expect("device discovery does not panic");
    let devices = Arc::new(devices);
    // The plan stored by the composer for this zoo, bed count and hardware, if any; else the
    // configured members (the composer then composes in the background).
    let (c2, d2) = (cfg.clone(), devices.clone());
    let (start_plan, prepared) = tokio::task::spawn_blocking(move || {
        let stored = crate::composer::service::stored_plan(&c2, &d2);
        if let Some(p) = &stored {
            match prepare(&c2, &p.rungs[0].members, &d2, p.inputs.beds) {
                Ok(prep) => return Ok((stored, prep)),
                Err(e) => {
                    tracing::warn!(error = %e, "The stored plan cannot be served; starting with the configured members")
                }
            }
        }
        let beds = crate::composer::service::initial_beds(&c2);
        prepare(&c2, &c2.ensemble.members, &d2, beds).map(|p| (None, p))
    })
    .await
    .expect("model loading does not panic")?;
    let Prepared {
        models,
        specs,
        described,
        plan,
    } = prepared;
    let source = match &start_plan {
        Some(p) => format!("plan {}", p.version),
        None => "config".to_owned(),
    };
    let store_cfg = cfg.storage.clone();
    let (store, ensemble_id, writer) = tokio::task::spawn_blocking(move || {
        store::start(
            &store_cfg,
            ServedEnsemble {
                members: &described,
                source: &source,
                plan,
            },
        )
    })
    .await
    .expect("store start-up does not panic")?;
    let db = cfg.storage.db.clone();
    let (reader, scored_until) = tokio::task::spawn_blocking(move || {
        let r = StoreReader::open(&db)?;
        let until = r.scored_until()?;
        Ok::<_, crate::store::StoreError>((r, until))
    })
    .await
    .expect("opening the database does not panic")?;

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
        let audit = crate::audit::AuditLog::new(&cfg.storage.db);
        tokio::task::spawn_blocking(move || watch_zoo(dir, eng, st, audit, status, zoo_gen_tx))
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
            scored_until: Arc::new(scored_until),
        },
        shutdown.child_token(),
        tracker.clone(),
    );
    let serving = Arc::new(std::sync::Mutex::new(Serving {
        models,
        source: if start_plan.is_some() {
            "plan"
        } else {
            "config"
        }
        .into(),
        plan: start_plan.clone(),
        ..Default::default()
    }));
    let (recompose, requests) = tokio::sync::mpsc::channel(4);
    if cfg.composer.enabled {
        let cx = composer::service::Context {
            cfg: cfg.clone(),
            engine: engine.clone(),
            store: store.clone(),
            ward: ward.clone(),
            devices: devices.clone(),
            serving: serving.clone(),
            zoo_generation: zoo_generation.clone(),
            requests,
            shutdown: shutdown.child_token(),
        };
        tracker.spawn(composer::service::run(cx, start_plan.is_some()));
    }
    let (db, acfg) = (cfg.storage.db.clone(), cfg.auth.clone());
    let devices = tokio::task::spawn_blocking(move || crate::devices::DeviceAuth::open(&db, &acfg))
        .await
        .expect("reading the devices table does not panic")?;
    devices.spawn_watch(ward.clone(), shutdown.child_token(), &tracker);
    let (db, dcfg) = (cfg.storage.db.clone(), cfg.dashboard.clone());
    let users = tokio::task::spawn_blocking(move || crate::dashboard::auth::Users::open(&db))
        .await
        .expect("opening the users table does not panic")
        .map_err(|e| ServerError::Dashboard(e.to_string()))?;
    let board = crate::dashboard::board::start(
        dcfg,
        crate::dashboard::board::Sources {
            ward: ward.clone(),
            store: store.clone(),
            reader: reader.clone(),
            serving: serving.clone(),
            db: cfg.storage.db.clone(),
        },
        shutdown.child_token(),
        &tracker,
    );
    let state = AppState {
        recompose,
        board,
        users: Arc::new(std::sync::Mutex::new(users)),
        cfg: cfg.clone(),
        ward: ward.clone(),
        devices,
        reader,
        store_health: store.health.clone(),
        serving,
        engine: engine.clone(),
        zoo: zoo_status,
        zoo_generation,
        shutdown: shutdown.child_token(),
    };
    let store_health = store.health.clone();
    let app = router(state);
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let token = shutdown.clone();
    let eng = engine.clone();
    let limits = crate::listen::ConnLimits::new(&cfg.server);
    let join = tokio::spawn(async move {
        crate::listen::serve(listener, tls, app, limits, token.clone()).await;
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
    let scheme = if cfg.server.tls.is_some() {
        "https"
    } else {
        "http"
    };
    tracing::info!(%addr, scheme, ensemble_id, "Holmes is serving");
    Ok(Running {
        addr,
        shutdown,
        engine,
        store_health,
        join,
    })
}
