//! The daemon: its parts built in order, one constructor each ([`parts`](super::parts)), and
//! stopped in the one order [`Stopping`] writes down, through one [`CancellationToken`]: the
//! store writer, the engine (its ensemble prepared by [`ensemble::prepare`]), the zoo
//! watcher, the ward (with the sink that hands its windows to the engine, its events to the
//! store and its monitors' alarms to the adjudicator), the composer, a gateway's alarm reports
//! in where `[pcd04_in]` takes them, the SDC devices where `[sdc]` lists them, the outbound
//! links where `[hl7]` and `[fhir]` turn them on, the served plan and the board, and the HTTP
//! server; SQLite flushed last.
//!
//! [`ensemble::prepare`]: crate::serving::engine::ensemble::prepare

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use super::parts::ServerError;
use super::parts::{self, Stopping};
use crate::config::Config;
use crate::dashboard::DashboardState;
use crate::http::{AppState, router};
use crate::serving::engine::Engine;
use crate::serving::engine::adjudicator::Adjudicator;
use crate::serving::store;

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

/// Names the threads of rayon's global pool, where the members' convolutions run,
/// `holmes-kernel-N`. Unnamed, each would carry the name of the thread that first used the pool
/// (a tokio one), and `top` or `perf` would show the inference as the runtime's threads. Where
/// the pool is already built, it is left as it is.
fn name_kernel_threads() {
    let _ = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("holmes-kernel-{i}"))
        .build_global();
}

/// Starts the daemon on `listener`: loads and warms the ensemble, opens the database, and
/// serves until `shutdown` is cancelled.
pub async fn start(cfg: Config, listener: TcpListener) -> Result<Running, ServerError> {
    name_kernel_threads();
    let addr = listener.local_addr()?;
    let tls = parts::tls(&cfg, addr).await?;
    crate::http::telemetry::handle();
    let accelerators = parts::accelerators().await;
    let db = parts::database(&cfg).await?;
    let first = parts::start_serving(&cfg, &db, &accelerators).await?;
    let (st, resume) = parts::storage(&cfg, db, &first).await?;
    let (engine, first) = parts::engine(&cfg, first, &st).await?;
    let zoo = parts::zoo(&cfg, &engine, (&st.store, &st.db)).await;
    let adjudicator = Arc::new(Adjudicator::start(engine.beats(), st.store.clone())?);
    let (shutdown, tracker) = (CancellationToken::new(), TaskTracker::new());
    let on = (&shutdown, &tracker);
    let ward = parts::ward(&cfg, &engine, (&st, resume), &adjudicator, on);
    let serving = (&engine, &st, &ward, &accelerators);
    let composer = parts::composer(&cfg, first, serving, zoo.generation.clone(), on);
    let devices = parts::device_auth(&cfg, (&ward, &st.db), on).await?;
    parts::pcd04_in(&cfg, (&ward, &st.db), on).await?;
    parts::sdc(&cfg, &ward, on).await?;
    let users = parts::users(&st.db).await?;
    let links = parts::links(&cfg, (&st.store, &st.db), &ward, on).await?;
    let c = composer.serving.clone();
    let (board, _plan) =
        parts::board(&cfg, c, zoo.generation, (&ward, &st, links.alarm_feed), on).await;
    let state = AppState {
        dashboard: DashboardState::new(
            cfg.dashboard.clone(),
            board,
            users,
            st.db.clone(),
            ward.clone(),
            composer.recompose,
        ),
        ingest: parts::ingest(&cfg, &st.db),
        engine_cfg: cfg.engine.clone(),
        configured_beds: cfg.ward.beds.clone().into(),
        configured_members: cfg.ensemble.members.clone().into(),
        db: st.db.clone(),
        tls: cfg.server.tls.is_some(),
        ward: ward.clone(),
        devices,
        reader: st.reader,
        store_health: st.store.health.clone(),
        serving: composer.serving,
        engine: engine.clone(),
        zoo: zoo.status,
        shutdown: shutdown.child_token(),
        body_limits: crate::http::body::BodyLimits::new(&cfg.server),
        outbound: links.hl7,
        fhir: links.fhir,
    };
    let store_health = st.store.health.clone();
    let limits = crate::http::listen::ConnLimits::new(&cfg.server);
    let stopping = Stopping {
        watcher: zoo.watcher,
        tracker,
        ward,
        outboxes: links.outboxes,
        adjudicator,
        engine: engine.clone(),
        store: st.store,
        writer: st.writer,
    };
    let token = shutdown.clone();
    let join = tokio::spawn(async move {
        crate::http::listen::serve(listener, tls, router(state), limits, token).await;
        stopping.stop().await;
    });
    let scheme = ["http", "https"][usize::from(cfg.server.tls.is_some())];
    tracing::info!(%addr, scheme, ensemble_id = st.ensemble_id, "Holmes is serving");
    Ok(Running {
        addr,
        shutdown,
        engine,
        store_health,
        join,
    })
}
