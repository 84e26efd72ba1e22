//! Wiring of the daemon: store writer, serving engine (its ensemble prepared by
//! [`ensemble::prepare`]), ward (with the sink that hands its windows to the engine and its
//! events to the store), composer, the HL7 link where `[hl7]` turns it on, dashboard board and
//! HTTP server, started in that order and stopped in reverse through one [`CancellationToken`],
//! SQLite flushed last.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::composer::{self, service::Serving};
use crate::config::Config;
use crate::core::event::Event;
use crate::core::monitor_alarm::MonitorAlarmEvent;
use crate::core::window::ClosedWindow;
use crate::dashboard::DashboardState;
use crate::http::{AppState, router};
use crate::serving::engine::adjudicator::Adjudicator;
use crate::serving::engine::ensemble::{self, EnsembleError, Prepared};
use crate::serving::engine::reload::{ZooStatus, watch_zoo};
use crate::serving::engine::{Engine, EngineError, accelerator};
use crate::serving::ingest::IngestSettings;
use crate::serving::store::{self, ServedEnsemble, StoreError, StoreHandle, StoreReader};
use crate::serving::ward::{Ward, WardSettings, WardSink};
use crate::signal::beats::BeatCounter;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Ensemble(#[from] EnsembleError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("dashboard: {0}")]
    Dashboard(String),
    #[error("listening socket: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tls(#[from] crate::http::tls::TlsError),
    #[error(transparent)]
    Devices(#[from] crate::serving::ingest::devices::DeviceError),
    #[error("beat counter: {0}")]
    Beats(#[from] crate::signal::beats::BeatsError),
    #[error("HL7 link: {0}")]
    Outbound(#[from] crate::outbound::OutboundError),
}

/// The zoo's beat counter, when the config counts beats and the zoo holds one. Blocking.
fn load_beats(cfg: &Config) -> Result<Option<BeatCounter>, ServerError> {
    if !cfg.ensemble.count_beats {
        return Ok(None);
    }
    let c = ensemble::served_counter(cfg)?;
    match &c {
        Some(c) => tracing::info!(
            call_at = c.file.rule.call_at,
            min_bsqi = c.file.rule.min_bsqi,
            "Counting beats beside the members"
        ),
        None => tracing::info!("The zoo holds no beat counter; scores come from the members alone"),
    }
    Ok(c)
}

/// A running daemon.
pub struct Running {
    pub addr: SocketAddr,
    /// Cancel to stop; then await [`Running::stopped`].
    pub shutdown: CancellationToken,
    pub(crate) engine: Engine,
    /// The store writer's health (the watchdog reads its heartbeat).
    pub(crate) store_health: Arc<store::StoreHealth>,
    join: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Waits until every task has stopped and the database is flushed.
    pub async fn stopped(self) {
        let _ = self.join.await;
    }
}

/// Where the ward's output goes in the daemon: closed windows to the engine, events and
/// hellos to the store.
struct DaemonSink {
    engine: Engine,
    store: StoreHandle,
    adjudicator: Arc<Adjudicator>,
}

impl WardSink for DaemonSink {
    fn window(&self, w: ClosedWindow) {
        self.engine.submit(w);
    }

    fn event(&self, e: Event) {
        self.store.event(e);
    }

    fn bed_seen(&self, bed: &str, device: &str) {
        self.store.bed_seen(bed, device);
    }

    fn monitor_alarm(&self, e: MonitorAlarmEvent) {
        self.adjudicator.send(e);
    }
}

/// Starts the daemon on `listener`: loads and warms the ensemble, opens the database, and
/// serves until `shutdown` is cancelled.
pub async fn start(cfg: Config, listener: TcpListener) -> Result<Running, ServerError> {
    let addr = listener.local_addr()?;
    let sc = &cfg.server;
    crate::config::check_transport(addr, sc.tls.as_ref(), sc.allow_plain_http_on_network)
        .map_err(crate::http::tls::TlsError::from)?;
    let tls = match sc.tls.clone() {
        Some(t) => Some(
            tokio::task::spawn_blocking(move || crate::http::tls::server_config(&t))
                .await
                .expect("reading the TLS files does not panic")?,
        ),
        None => None,
    };
    crate::http::telemetry::handle();
    let devices = tokio::task::spawn_blocking(accelerator::discover)
        .await
        .expect("device discovery does not panic");
    let devices = Arc::new(devices);
    // The plan stored by the composer for this zoo, bed count and hardware, if any; else the
    // configured members (the composer then composes in the background).
    let (c2, d2) = (cfg.clone(), devices.clone());
    let (start_plan, prepared, beats) = tokio::task::spawn_blocking(move || {
        let beats = load_beats(&c2)?;
        let sources = ensemble::Sources {
            models_dir: &c2.ensemble.models_dir,
            db: &c2.storage.db,
            engine: &c2.engine,
            window_secs: c2.ward.window_secs,
            hop_secs: c2.ward.hop_secs,
            beats: beats.as_ref(),
        };
        let stored = crate::composer::planning::stored_plan(&c2, &d2, beats.as_ref());
        if let Some(p) = &stored {
            match ensemble::prepare(sources, &p.rungs[0].members, &d2, p.inputs.beds) {
                Ok(prep) => return Ok((stored, prep, beats)),
                Err(e) => {
                    tracing::warn!(error = %e, "The stored plan cannot be served; starting with the configured members")
                }
            }
        }
        let beds = crate::composer::planning::initial_beds(&c2);
        let prep = ensemble::prepare(sources, &c2.ensemble.members, &d2, beds)?;
        Ok::<_, ServerError>((None, prep, beats))
    })
    .await
    .expect("model loading does not panic")?;
    let Prepared {
        models,
        primary_share,
        specs,
        described,
        plan,
    } = prepared;
    let source = match &start_plan {
        Some(p) => format!("plan {}", p.version),
        None => "config".to_owned(),
    };
    let store_cfg = cfg.storage.clone();
    let counter = beats.as_ref().map(|b| b.sha256.clone());
    let (store, ensemble_id, writer) = tokio::task::spawn_blocking(move || {
        store::start(
            &store_cfg,
            ServedEnsemble {
                members: &described,
                source: &source,
                plan,
                counter: counter.as_deref(),
                primary_share,
            },
        )
    })
    .await
    .expect("store start-up does not panic")?;
    let db = cfg.storage.db.clone();
    let (reader, scored_until, admissions) = tokio::task::spawn_blocking(move || {
        let r = StoreReader::open(&db)?;
        let until = r.scored_until()?;
        let admissions = crate::serving::store::admissions::restore(&db)?;
        Ok::<_, crate::serving::store::StoreError>((r, until, admissions))
    })
    .await
    .expect("opening the database does not panic")?;

    let (engine_cfg, store2) = (cfg.engine.clone(), store.clone());
    let engine = tokio::task::spawn_blocking(move || {
        Engine::start(&engine_cfg, specs, store2, ensemble_id, beats)
    })
    .await
    .expect("engine start-up does not panic")?;

    let zoo_status = Arc::new(std::sync::Mutex::new(ZooStatus::default()));
    let (zoo_gen_tx, zoo_generation) = tokio::sync::watch::channel(0u64);
    let board_zoo_generation = zoo_generation.clone();
    let watcher = {
        let (dir, eng, st, status) = (
            cfg.ensemble.models_dir.clone(),
            engine.clone(),
            store.clone(),
            zoo_status.clone(),
        );
        let audit = crate::serving::store::audit::AuditLog::new(&cfg.storage.db);
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

    let adjudicator = Arc::new(Adjudicator::start(engine.beats(), store.clone())?);
    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    let ward = Ward::new(
        WardSettings {
            ward: cfg.ward.clone(),
            quality: cfg.quality.clone(),
            bed_queue: cfg.ingest.bed_queue,
        },
        Arc::new(DaemonSink {
            engine: engine.clone(),
            store: store.clone(),
            adjudicator: adjudicator.clone(),
        }),
        scored_until,
        admissions,
        shutdown.child_token(),
        tracker.clone(),
    );
    let (serving, serving_rx) = tokio::sync::watch::channel(Serving {
        models,
        source: if start_plan.is_some() {
            "plan"
        } else {
            "config"
        }
        .into(),
        plan: start_plan.clone(),
        primary_share,
        ..Default::default()
    });
    let (recompose, requests) = tokio::sync::mpsc::channel(4);
    if cfg.composer.enabled {
        let cx = composer::service::Context {
            cfg: cfg.clone(),
            engine: engine.clone(),
            store: store.clone(),
            ward: ward.clone(),
            devices: devices.clone(),
            serving,
            zoo_generation,
            requests,
            shutdown: shutdown.child_token(),
        };
        tracker.spawn(composer::service::run(cx, start_plan.is_some()));
    }
    let (db, acfg) = (cfg.storage.db.clone(), cfg.auth.clone());
    let devices = tokio::task::spawn_blocking(move || {
        crate::serving::ingest::devices::DeviceAuth::open(&db, &acfg)
    })
    .await
    .expect("reading the devices table does not panic")?;
    devices.spawn_watch(ward.clone(), shutdown.child_token(), &tracker);
    let (db, dcfg) = (cfg.storage.db.clone(), cfg.dashboard.clone());
    let users = tokio::task::spawn_blocking(move || crate::dashboard::auth::Users::open(&db))
        .await
        .expect("opening the users table does not panic")
        .map_err(|e| ServerError::Dashboard(e.to_string()))?;
    let (outbound, alarm_feed, outbox_thread) = if cfg.hl7.enabled {
        let s = crate::outbound::start(
            &cfg.hl7,
            &cfg.storage.db,
            store.subscribe(),
            store.subscribe_monitor_alarms(),
            ward.admissions(),
            shutdown.child_token(),
            &tracker,
        )
        .await?;
        (Some(s.handle), Some(s.alarm_feed), Some(s.outbox))
    } else {
        (None, None, None)
    };
    let (fhir, alarm_feed, fhir_outbox_thread) = if cfg.fhir.enabled {
        let s = crate::outbound::fhir::start(
            &cfg.fhir,
            &cfg.storage.db,
            store.subscribe(),
            store.subscribe_monitor_alarms(),
            ward.admissions(),
            shutdown.child_token(),
            &tracker,
        )
        .await?;
        let feed = match alarm_feed {
            Some(hl7) => hl7.and(s.alarm_feed),
            None => s.alarm_feed,
        };
        (Some(s.handle), Some(feed), Some(s.outbox))
    } else {
        (None, alarm_feed, None)
    };
    let plan = composer::served::start(
        dcfg.clone(),
        composer::served::RuleSource {
            models_dir: cfg.ensemble.models_dir.clone(),
            hop_secs: cfg.ward.hop_secs,
            window_secs: cfg.ward.window_secs,
        },
        serving_rx.clone(),
        board_zoo_generation,
        shutdown.child_token(),
        &tracker,
    )
    .await;
    let board = crate::board::start(
        dcfg,
        crate::board::Sources {
            ward: ward.clone(),
            store: store.clone(),
            reader: reader.clone(),
            plan,
            db: cfg.storage.db.clone(),
            alarm_feed,
        },
        shutdown.child_token(),
        &tracker,
    )
    .await;
    let state = AppState {
        dashboard: DashboardState::new(
            cfg.dashboard.clone(),
            board,
            users,
            cfg.storage.db.clone(),
            ward.clone(),
            cfg.composer.enabled.then_some(recompose),
        ),
        ingest: IngestSettings {
            ingest: cfg.ingest.clone(),
            leads: cfg.leads.clone(),
            audit: crate::serving::store::audit::AuditLog::new(&cfg.storage.db),
        },
        engine_cfg: cfg.engine.clone(),
        configured_beds: cfg.ward.beds.clone().into(),
        configured_members: cfg.ensemble.members.clone().into(),
        db: cfg.storage.db.clone(),
        tls: cfg.server.tls.is_some(),
        ward: ward.clone(),
        devices,
        reader,
        store_health: store.health.clone(),
        serving: serving_rx,
        engine: engine.clone(),
        zoo: zoo_status,
        shutdown: shutdown.child_token(),
        body_limits: crate::http::body::BodyLimits::new(&cfg.server),
        outbound,
        fhir,
    };
    let store_health = store.health.clone();
    let app = router(state);
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let token = shutdown.clone();
    let eng = engine.clone();
    let limits = crate::http::listen::ConnLimits::new(&cfg.server);
    let join = tokio::spawn(async move {
        crate::http::listen::serve(listener, tls, app, limits, token.clone()).await;
        // Beds stop; the engine finishes what is queued and stops; then the writer flushes.
        drop(watcher);
        tracker.close();
        tracker.wait().await;
        drop(ward);
        let _ = tokio::task::spawn_blocking(move || {
            // The feed and the link have stopped: the outbox thread finishes what it was
            // asked and ends.
            for t in [outbox_thread, fhir_outbox_thread].into_iter().flatten() {
                let _ = t.join();
            }
            // The beds have handed on their monitors' alarms: the adjudicator judges what
            // is queued and stops, then the engine.
            adjudicator.shutdown();
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
