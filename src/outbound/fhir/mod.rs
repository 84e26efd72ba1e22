//! Scores and alarms out to the hospital as FHIR R4 (`[fhir]`, off by default): per bed every
//! `fhir.cadence_secs` a heart-rate and a risk-score Observation, an alarm-event Observation
//! for every alarm's start, change and end, and for each monitor's own alarm its start and end
//! with Holmes's opinion as an Observation whose `focus` is the alarm ([`resource`] says which
//! codes and why), each posted to the server as a conditional create on its stable identifier.
//!
//! It shares the HL7 link's parts: a [`feed`](super::feed) of its own, an
//! [`outbox`](super::outbox) on the `fhir_outbox` table with its own thread, and
//! [`LinkStatus`](super::LinkStatus); [`link`] is its task and [`client`] its HTTP connection.

pub(crate) mod client;
pub(crate) mod link;
pub(crate) mod resource;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::message::Draft;
use super::outbox::{FHIR, Render, Spec};
use super::{Feeding, Opened, Outbound, OutboundError, Started};
use crate::config::{BaseUrl, FhirConfig};
use crate::core::patient::Admissions;
use crate::core::score::ScoreRecord;
use crate::serving::store::{Db, MonitorAlarmChange};

/// The FHIR link's rows: a draft's resources, rendered once, so a resend is the same body.
struct FhirRender(FhirConfig);

impl Render for FhirRender {
    fn parts(&self, d: &Draft) -> usize {
        resource::parts(d)
    }

    fn render(&self, d: &Draft, part: usize, _id: i64, created_ms: i64) -> String {
        resource::render(&self.0, d, part, created_ms)
    }
}

/// The FHIR link's outbox.
pub(crate) fn spec(cfg: &FhirConfig) -> Spec {
    Spec {
        names: &FHIR,
        render: Box::new(FhirRender(cfg.clone())),
        // A resource is a few KB; the server's own limit is its business (a 413 parks it).
        max_body_bytes: usize::MAX,
        keep_sent_hours: cfg.keep_sent_hours,
        queue: cfg.queue,
    }
}

/// Opens the FHIR outbox on `db` and starts the feed and the link under `shutdown`.
pub(crate) async fn start(
    cfg: &FhirConfig,
    db: &Db,
    scores: broadcast::Receiver<Arc<ScoreRecord>>,
    monitor_alarms: broadcast::Receiver<Arc<MonitorAlarmChange>>,
    admissions: Admissions,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> Result<Started, OutboundError> {
    let base = BaseUrl::parse(&cfg.base_url).map_err(OutboundError::Config)?;
    let Opened {
        outbox,
        thread,
        tls,
        status,
        wake,
        alarm_feed,
    } = super::open_outbox(
        "fhir",
        cfg.tls_ca.clone(),
        spec(cfg),
        Feeding {
            db,
            cadence_secs: cfg.cadence_secs,
            scores,
            monitor_alarms,
            admissions,
            shutdown: &shutdown,
            tracker,
        },
    )
    .await?;
    let server = base.address();
    tracker.spawn(
        link::Link {
            cfg: cfg.clone(),
            base,
            outbox,
            status: status.clone(),
            wake,
            tls,
            shutdown,
            failing: AtomicBool::new(false),
        }
        .run(),
    );
    tracing::info!(server = %server, tls = cfg.tls_ca.is_some(), "FHIR link started");
    Ok(Started {
        handle: Outbound {
            link: "fhir",
            receiver: cfg.base_url.clone(),
            stuck_ms: (5.0 * cfg.request_timeout_secs * 1000.0) as i64,
            status: status.clone(),
        },
        alarm_feed,
        outbox: thread,
    })
}
