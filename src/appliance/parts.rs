//! The daemon's parts, one constructor each, in the order [`start`](super::server::start)
//! builds them: each takes its own config section(s) and the handles of the parts built before
//! it, and gives the handles later parts read. Blocking work (files, SQLite, burn) runs on the
//! blocking pool; what a part spawns is tracked by the daemon's one [`TaskTracker`] and stops
//! with its [`CancellationToken`]. The order they stop in is [`Stopping`]'s, written once.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::board::{self, Board, handover::AlarmFeed};
use crate::composer::plans::Plan;
use crate::composer::served::{self, ServedPlan};
use crate::composer::{self, service::Serving};
use crate::config::Config;
use crate::core::event::Event;
use crate::core::monitor_alarm::MonitorAlarmEvent;
use crate::core::window::ClosedWindow;
use crate::dashboard::auth::Users;
use crate::outbound::{self, Outbound};
use crate::serving::engine::accelerator::{self, Accelerator};
use crate::serving::engine::adjudicator::Adjudicator;
use crate::serving::engine::ensemble::{self, Prepared};
use crate::serving::engine::reload::{ZooStatus, watch_zoo};
use crate::serving::engine::{Engine, counter, sources};
use crate::serving::ingest::IngestSettings;
use crate::serving::ingest::devices::DeviceAuth;
use crate::serving::store::{self, Db, ServedEnsemble, StoreHandle, StoreReader};
use crate::serving::ward::{Ward, WardSettings, WardSink};
use crate::signal::beats::BeatCounter;

/// Why the daemon cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Ensemble(#[from] ensemble::EnsembleError),
    #[error(transparent)]
    Engine(#[from] crate::serving::engine::EngineError),
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
    #[error(transparent)]
    Pcd04In(#[from] crate::serving::ingest::pcd04::Pcd04Error),
    #[error(transparent)]
    Sdc(#[from] crate::serving::ingest::sdc::SdcConsumerError),
    #[error("sdc: {0}")]
    SdcTls(crate::core::tls::TlsError),
}

/// Runs `f` on the blocking pool; `what` names it should it panic (a bug).
async fn blocking<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| panic!("{what} panicked: {e}"))
}

/// The transport checked (plain HTTP only where `[server]` allows it) and the TLS acceptor
/// where `[server.tls]` asks for one.
pub(super) async fn tls(
    cfg: &Config,
    addr: SocketAddr,
) -> Result<Option<TlsAcceptor>, ServerError> {
    let sc = &cfg.server;
    crate::config::check_transport(addr, sc.tls.as_ref(), sc.allow_plain_http_on_network)
        .map_err(crate::http::tls::TlsError::from)?;
    let Some(t) = sc.tls.clone() else {
        return Ok(None);
    };
    let c = blocking("reading the TLS files", move || {
        crate::http::tls::server_config(&t)
    })
    .await?;
    Ok(Some(TlsAcceptor::from(c)))
}

/// The machine's accelerators.
pub(super) async fn accelerators() -> Arc<Vec<Accelerator>> {
    Arc::new(blocking("device discovery", accelerator::discover).await)
}

/// What serves at start-up: the plan the composer stored for this zoo, bed count and hardware
/// where it can be served, else the configured members (the composer then composes in the
/// background); the zoo's beat counter beside them where the config counts beats.
pub(super) struct StartServing {
    pub(super) plan: Option<Plan>,
    pub(super) prepared: Prepared,
    pub(super) beats: Option<BeatCounter>,
}

/// The ward's shared connection ([`Db`]), the database created and migrated: every part but
/// the store's writer and the API's reader reads and writes through it.
pub(super) async fn database(cfg: &Config) -> Result<Db, ServerError> {
    let path = cfg.storage.db.clone();
    Ok(blocking("opening the database", move || {
        Db::open(&path, &super::schema::WARD)
    })
    .await?)
}

pub(super) async fn start_serving(
    cfg: &Config,
    db: &Db,
    devices: &Arc<Vec<Accelerator>>,
) -> Result<StartServing, ServerError> {
    let (cfg, db, devices) = (cfg.clone(), db.clone(), devices.clone());
    blocking("model loading", move || {
        let beats = load_beats(&cfg)?;
        let sources = sources::Sources {
            models_dir: &cfg.ensemble.models_dir,
            db: &db,
            engine: &cfg.engine,
            window_secs: cfg.ward.window_secs,
            hop_secs: cfg.ward.hop_secs,
            beats: beats.as_ref(),
        };
        let beds = crate::composer::planning::initial_beds(&cfg);
        let stored =
            crate::composer::planning::stored_plan(&cfg, &db, &devices, beds, beats.as_ref());
        if let Some(p) = &stored {
            match ensemble::prepare(sources, &p.rungs[0].members, &devices, p.inputs.beds) {
                Ok(prepared) => {
                    return Ok(StartServing {
                        plan: stored,
                        prepared,
                        beats,
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "The stored plan cannot be served; starting with the configured members")
                }
            }
        }
        let prepared = ensemble::prepare(sources, &cfg.ensemble.members, &devices, beds)?;
        Ok(StartServing {
            plan: None,
            prepared,
            beats,
        })
    })
    .await
}

/// The zoo's beat counter, when the config counts beats and the zoo holds one. Blocking.
fn load_beats(cfg: &Config) -> Result<Option<BeatCounter>, ServerError> {
    if !cfg.ensemble.count_beats {
        return Ok(None);
    }
    let c = counter::served_counter(cfg)?;
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

/// The store: its writer (the served ensemble recorded) and a reader.
pub(super) struct Storage {
    pub(super) store: StoreHandle,
    pub(super) ensemble_id: i64,
    pub(super) writer: std::thread::JoinHandle<()>,
    pub(super) reader: StoreReader,
    /// The ward's shared connection.
    pub(super) db: Db,
}

/// Where the last run left the beds, as the store kept it: where scoring stopped, and their
/// admissions. The ward resumes from it.
pub(super) struct Resume {
    scored_until: std::collections::HashMap<String, i64>,
    admissions: crate::core::patient::Admissions,
}

pub(super) async fn storage(
    cfg: &Config,
    db: Db,
    s: &StartServing,
) -> Result<(Storage, Resume), ServerError> {
    let store_cfg = cfg.storage.clone();
    let source = match &s.plan {
        Some(p) => format!("plan {}", p.version),
        None => "config".to_owned(),
    };
    let p = &s.prepared;
    let (described, plan, primary_share) = (p.described.clone(), p.plan.clone(), p.primary_share);
    let counter = s.beats.as_ref().map(|b| b.sha256.clone());
    let (store, ensemble_id, writer) = blocking("store start-up", move || {
        store::start(
            &store_cfg,
            &super::schema::WARD,
            ServedEnsemble {
                members: &described,
                source: &source,
                plan,
                counter: counter.as_deref(),
                primary_share,
            },
        )
    })
    .await?;
    let (path, d) = (cfg.storage.db.clone(), db.clone());
    let (reader, scored_until, admissions) = blocking("opening the database", move || {
        let r = StoreReader::open(&path)?;
        let until = r.scored_until()?;
        let admissions = store::admissions::restore(&d)?;
        Ok::<_, store::StoreError>((r, until, admissions))
    })
    .await?;
    Ok((
        Storage {
            store,
            ensemble_id,
            writer,
            reader,
            db,
        },
        Resume {
            scored_until,
            admissions,
        },
    ))
}

/// The engine, its workers warm, serving `s`'s members and counter; and what serves, as the
/// composer will publish it.
pub(super) async fn engine(
    cfg: &Config,
    s: StartServing,
    st: &Storage,
) -> Result<(Engine, Serving), ServerError> {
    let StartServing {
        plan,
        mut prepared,
        beats,
    } = s;
    let specs = std::mem::take(&mut prepared.specs);
    let (engine_cfg, store, id) = (cfg.engine.clone(), st.store.clone(), st.ensemble_id);
    let engine = blocking("engine start-up", move || {
        Engine::start(&engine_cfg, specs, store, id, beats)
    })
    .await?;
    let serving = Serving {
        models: prepared.models,
        source: if plan.is_some() { "plan" } else { "config" }.into(),
        plan,
        primary_share: prepared.primary_share,
        ..Default::default()
    };
    Ok((engine, serving))
}

/// What a monitor connection reads of the configuration.
pub(super) fn ingest(cfg: &Config, db: &Db) -> IngestSettings {
    IngestSettings {
        ingest: cfg.ingest.clone(),
        leads: cfg.leads.clone(),
        audit: store::audit::AuditLog::new(db),
    }
}

/// The zoo folder watched: a member changed on disk is hot-swapped, and each change bumps
/// `generation` (the composer and the served plan read it).
pub(super) struct Zoo {
    pub(super) status: Arc<Mutex<ZooStatus>>,
    pub(super) generation: watch::Receiver<u64>,
    /// Dropped to stop watching.
    pub(super) watcher: Option<notify::RecommendedWatcher>,
}

pub(super) async fn zoo(cfg: &Config, engine: &Engine, (store, db): (&StoreHandle, &Db)) -> Zoo {
    let status = Arc::new(Mutex::new(ZooStatus::default()));
    let (tx, generation) = watch::channel(0u64);
    let (dir, eng, st, s) = (
        cfg.ensemble.models_dir.clone(),
        engine.clone(),
        store.clone(),
        status.clone(),
    );
    let audit = store::audit::AuditLog::new(db);
    let watcher = blocking("zoo watcher start-up", move || {
        watch_zoo(dir, eng, st, audit, s, tx)
    })
    .await
    .inspect_err(
        |e| tracing::error!(error = %e, "Cannot watch the zoo folder; models will not hot-reload"),
    )
    .ok();
    Zoo {
        status,
        generation,
        watcher,
    }
}

/// Where the ward's output goes in the daemon: closed windows to the engine, events and
/// hellos to the store, monitors' alarms to the adjudicator.
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

/// The ward, its beds resuming where the last run left them.
pub(super) fn ward(
    cfg: &Config,
    engine: &Engine,
    (st, resume): (&Storage, Resume),
    adjudicator: &Arc<Adjudicator>,
    (shutdown, tracker): (&CancellationToken, &TaskTracker),
) -> Ward {
    Ward::new(
        WardSettings {
            ward: cfg.ward.clone(),
            quality: cfg.quality.clone(),
            bed_queue: cfg.ingest.bed_queue,
        },
        Arc::new(DaemonSink {
            engine: engine.clone(),
            store: st.store.clone(),
            adjudicator: adjudicator.clone(),
        }),
        resume.scored_until,
        resume.admissions,
        shutdown.child_token(),
        tracker.clone(),
    )
}

/// What serves published (`Serving`), and the composer recomposing it where `[composer]` is
/// on (with the sender of recomposition requests the page's "recompose" uses).
pub(super) struct Composer {
    pub(super) serving: watch::Receiver<Serving>,
    pub(super) recompose: Option<mpsc::Sender<String>>,
}

pub(super) fn composer(
    cfg: &Config,
    first: Serving,
    (engine, st, ward, devices): (&Engine, &Storage, &Ward, &Arc<Vec<Accelerator>>),
    zoo_generation: watch::Receiver<u64>,
    (shutdown, tracker): (&CancellationToken, &TaskTracker),
) -> Composer {
    let from_plan = first.plan.is_some();
    let (serving, rx) = watch::channel(first);
    if !cfg.composer.enabled {
        return Composer {
            serving: rx,
            recompose: None,
        };
    }
    let (recompose, requests) = mpsc::channel(4);
    let cx = composer::service::Context {
        cfg: cfg.clone(),
        db: st.db.clone(),
        engine: engine.clone(),
        store: st.store.clone(),
        ward: ward.clone(),
        devices: devices.clone(),
        serving,
        zoo_generation,
        requests,
        shutdown: shutdown.child_token(),
    };
    tracker.spawn(composer::service::run(cx, from_plan));
    Composer {
        serving: rx,
        recompose: Some(recompose),
    }
}

/// The monitors' device tokens, their revocations watched.
pub(super) async fn device_auth(
    cfg: &Config,
    (ward, db): (&Ward, &Db),
    (shutdown, tracker): (&CancellationToken, &TaskTracker),
) -> Result<DeviceAuth, ServerError> {
    let (db, acfg) = (db.clone(), cfg.auth.clone());
    let devices = blocking("reading the devices table", move || {
        DeviceAuth::open(&db, &acfg)
    })
    .await?;
    devices.spawn_watch(ward.clone(), shutdown.child_token(), tracker);
    Ok(devices)
}

/// The listener for a gateway's IHE PCD-04 alarm reports, where `[pcd04_in]` turns it on
/// (its inbox's unstored reports handed on again first); the address it bound.
pub(super) async fn pcd04_in(
    cfg: &Config,
    (ward, db): (&Ward, &Db),
    (shutdown, tracker): (&CancellationToken, &TaskTracker),
) -> Result<Option<SocketAddr>, ServerError> {
    if !cfg.pcd04_in.enabled {
        return Ok(None);
    }
    let token = shutdown.child_token();
    let at =
        crate::serving::ingest::pcd04::start(&cfg.pcd04_in, &cfg.hl7, db, ward, token, tracker)
            .await?;
    Ok(Some(at))
}

/// The SDC consumer, where `[sdc]` turns it on: the notification sink's address.
pub(super) async fn sdc(
    cfg: &Config,
    ward: &Ward,
    (shutdown, tracker): (&CancellationToken, &TaskTracker),
) -> Result<Option<SocketAddr>, ServerError> {
    if !cfg.sdc.enabled {
        return Ok(None);
    }
    let tls = match (&cfg.sdc.tls_ca, cfg.sdc.identity(cfg.server.tls.as_ref())) {
        (Some(ca), Some(me)) => {
            let (ca, me) = (ca.clone(), me.clone());
            let built = blocking("reading the SDC certificates", move || sdc_tls(ca, &me)).await;
            Some(built.map_err(ServerError::SdcTls)?)
        }
        _ => None,
    };
    let token = shutdown.child_token();
    let at = crate::serving::ingest::sdc::start(
        &cfg.sdc,
        tls,
        (&cfg.leads, &cfg.ingest.vital_ranges),
        ward,
        token,
        tracker,
    )
    .await?;
    Ok(Some(at))
}

/// The SDC consumer's two TLS sides from `[sdc] tls_ca` and Holmes's certificate. Blocking.
pub(super) fn sdc_tls(
    ca: std::path::PathBuf,
    me: &crate::config::TlsConfig,
) -> Result<crate::serving::ingest::sdc::SdcTls, crate::core::tls::TlsError> {
    use crate::core::tls::{Identity, client_config, server_config};
    let me = Identity {
        cert: &me.cert,
        key: &me.key,
    };
    Ok(crate::serving::ingest::sdc::SdcTls {
        client: client_config(&ca, Some(me))?,
        server: server_config(me, Some(&ca))?,
    })
}

/// The page's users.
pub(super) async fn users(db: &Db) -> Result<Users, ServerError> {
    let db = db.clone();
    blocking("opening the users table", move || Users::new(db))
        .await
        .map_err(|e| ServerError::Dashboard(e.to_string()))
}

/// The outbound links where their sections turn them on, each with its feed and outbox, and
/// the board's alarm feed to all of them.
#[derive(Default)]
pub(super) struct Links {
    pub(super) hl7: Option<Outbound>,
    pub(super) fhir: Option<Outbound>,
    pub(super) alarm_feed: Option<AlarmFeed>,
    /// The outbox threads: each ends once its feed and link have stopped.
    pub(super) outboxes: Vec<std::thread::JoinHandle<()>>,
}

/// The two links, built by one code path: each reads the store's committed scores and
/// monitor alarms, the ward's admissions, and takes the board's alarm transitions.
pub(super) async fn links(
    cfg: &Config,
    (store, db): (&StoreHandle, &Db),
    ward: &Ward,
    (shutdown, tracker): (&CancellationToken, &TaskTracker),
) -> Result<Links, ServerError> {
    /// The two links, in the order they start.
    enum Link {
        Hl7,
        Fhir,
    }
    let mut links = Links::default();
    for link in [Link::Hl7, Link::Fhir] {
        let (scores, alarms) = (store.subscribe(), store.subscribe_monitor_alarms());
        let (admissions, token) = (ward.admissions(), shutdown.child_token());
        let started = match link {
            Link::Hl7 if cfg.hl7.enabled => {
                outbound::start(&cfg.hl7, db, scores, alarms, admissions, token, tracker).await?
            }
            Link::Fhir if cfg.fhir.enabled => {
                outbound::fhir::start(&cfg.fhir, db, scores, alarms, admissions, token, tracker)
                    .await?
            }
            _ => continue,
        };
        let handle = match link {
            Link::Hl7 => &mut links.hl7,
            Link::Fhir => &mut links.fhir,
        };
        *handle = Some(started.handle);
        links.alarm_feed = Some(match links.alarm_feed.take() {
            Some(feed) => feed.and(started.alarm_feed),
            None => started.alarm_feed,
        });
        links.outboxes.push(started.outbox);
    }
    Ok(links)
}

/// The served plan (the rule for what serves, chosen below the page) and the board serving
/// its rule, handing its alarm changes to the links.
pub(super) async fn board(
    cfg: &Config,
    serving: watch::Receiver<Serving>,
    zoo_generation: watch::Receiver<u64>,
    (ward, st, alarm_feed): (&Ward, &Storage, Option<AlarmFeed>),
    (shutdown, tracker): (&CancellationToken, &TaskTracker),
) -> (Board, watch::Receiver<ServedPlan>) {
    let rules = served::RuleSource {
        models_dir: cfg.ensemble.models_dir.clone(),
        hop_secs: cfg.ward.hop_secs,
        window_secs: cfg.ward.window_secs,
    };
    let dcfg = cfg.dashboard.clone();
    let plan = served::start(
        dcfg.clone(),
        rules,
        serving,
        zoo_generation,
        shutdown.child_token(),
        tracker,
    )
    .await;
    let sources = board::Sources {
        ward: ward.clone(),
        store: st.store.clone(),
        reader: st.reader.clone(),
        plan: plan.clone(),
        db: st.db.clone(),
        alarm_feed,
    };
    let b = board::start(dcfg, sources, shutdown.child_token(), tracker).await;
    (b, plan)
}

/// What stops, in the order it must: nothing new arrives (the listener has stopped), the zoo
/// is no longer watched, the tasks (beds, composer, board, feeds and links) end, the ward
/// lets go of its sink; then, off the async workers: the outboxes finish what they were
/// asked, the adjudicator judges what the beds handed it, the engine finishes what is
/// queued, and the store's writer flushes last.
pub(super) struct Stopping {
    pub(super) watcher: Option<notify::RecommendedWatcher>,
    pub(super) tracker: TaskTracker,
    pub(super) ward: Ward,
    pub(super) outboxes: Vec<std::thread::JoinHandle<()>>,
    pub(super) adjudicator: Arc<Adjudicator>,
    pub(super) engine: Engine,
    pub(super) store: StoreHandle,
    pub(super) writer: std::thread::JoinHandle<()>,
}

impl Stopping {
    pub(super) async fn stop(self) {
        let Stopping {
            watcher,
            tracker,
            ward,
            outboxes,
            adjudicator,
            engine,
            store,
            writer,
        } = self;
        drop(watcher);
        tracker.close();
        tracker.wait().await;
        drop(ward);
        blocking("stopping", move || {
            for t in outboxes {
                let _ = t.join();
            }
            adjudicator.shutdown();
            engine.shutdown();
            store.close();
            let _ = writer.join();
        })
        .await;
    }
}
