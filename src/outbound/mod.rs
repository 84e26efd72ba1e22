//! Scores and alarms out to the hospital, over two links, each off by default: HL7 v2.6 over
//! MLLP, Holmes connecting out to one receiver (`[hl7]`), and FHIR R4 over HTTP(S) to one
//! server (`[fhir]`, [`fhir`]). HL7: IHE PCD-01 `ORU^R01` observation reports per bed every
//! `hl7.cadence_secs` (risk score, heart rate, risk alarm state, data quality) and IHE PCD-04
//! `ORU^R40` reports of every risk and technical alarm's start, change (acknowledged or
//! silenced on the dashboard) and end, and of every monitor's own alarm with Holmes's opinion
//! on it; FHIR: the same as Observation resources.
//!
//! Each link has its own [`feed`] (reading the store writer's broadcasts of scores and of the
//! monitors' alarms, and the [`board`](crate::board)'s alarm transitions, queueing
//! drafts), its own
//! [`outbox`] (the durable queue in SQLite on a thread of its own, which fixes each message's
//! id: the HL7 MSH-10) and its own link task: [`link`] for HL7 (one message in flight, answers
//! matched by MSA-2, refusals parked, resends with back-off, keep-alives; [`message`] builds
//! and reads the messages, [`mllp`](crate::protocol::mllp) frames them), [`fhir::link`] for FHIR.
//! [`LinkStatus`] is what `/api/health` and the metrics show of a link; both link tasks wait
//! with one [`backoff`].

/// The tables the links' tests use: the store's and the outboxes'.
#[cfg(test)]
pub(crate) const TEST_SCHEMA: crate::serving::store::Schema =
    crate::serving::store::Schema::new(&[crate::serving::store::MIGRATIONS, outbox::MIGRATIONS]);

pub(crate) mod backoff;
pub(crate) mod feed;
pub(crate) mod fhir;
pub(crate) mod link;
pub(crate) mod message;
pub(crate) mod outbox;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::board::handover::AlarmFeed;
use crate::config::Hl7Config;
use crate::core::patient::Admissions;
use crate::core::score::ScoreRecord;
use crate::serving::store::{Db, MonitorAlarmChange};

#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error(transparent)]
    Outbox(#[from] outbox::OutboxError),
    #[error("{0}")]
    Config(String),
    #[error("{section}.tls_ca {path}: {reason}")]
    Tls {
        section: &'static str,
        path: String,
        reason: String,
    },
}

/// A link's state, shared by its outbox thread, its link and feed tasks (writers) and
/// `/api/health` (reader).
#[derive(Debug, Default)]
pub(crate) struct LinkStatus {
    pub(crate) connected: AtomicBool,
    /// Messages waiting for the receiver.
    pub(crate) backlog: AtomicU64,
    /// When the oldest of them was queued, ms (0: none).
    pub(crate) oldest_pending_ms: AtomicI64,
    /// The receiver's last acceptance (a message's or a keep-alive's), ms (0: none yet).
    pub(crate) last_ack_ms: AtomicI64,
    /// Messages the receiver refused, in the outbox.
    pub(crate) parked: AtomicU64,
    /// Observations dropped as too old since start.
    pub(crate) dropped_observations: AtomicU64,
    /// Observations not queued since start: the outbox's queue was full.
    pub(crate) queue_dropped: AtomicU64,
    /// Alarm changes the board could not hand to the feed since start (its channel full or
    /// closed): their reports are never sent.
    pub(crate) alarm_feed_dropped: Arc<AtomicU64>,
    /// The last refusal: the message's id, kind, the receiver's code and reason.
    pub(crate) last_parked: Mutex<Option<serde_json::Value>>,
    /// The link's or the outbox's last error.
    pub(crate) last_error: Mutex<Option<String>>,
}

/// A link as `/api/health` shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LinkView {
    pub(crate) receiver: String,
    pub(crate) connected: bool,
    pub(crate) backlog: u64,
    pub(crate) oldest_pending_ms: Option<i64>,
    pub(crate) last_ack_ms: Option<i64>,
    pub(crate) parked: u64,
    pub(crate) last_parked: Option<serde_json::Value>,
    pub(crate) dropped_observations: u64,
    pub(crate) last_error: Option<String>,
}

/// A handle to a running link, for health. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Outbound {
    /// `hl7` or `fhir`: how its problems begin.
    link: &'static str,
    receiver: String,
    /// Five answer timeouts, ms: a message pending longer is a problem even while connected.
    stuck_ms: i64,
    status: Arc<LinkStatus>,
}

impl Outbound {
    pub(crate) fn view(&self) -> LinkView {
        let s = &self.status;
        let some = |v: i64| (v > 0).then_some(v);
        LinkView {
            receiver: self.receiver.clone(),
            connected: s.connected.load(Ordering::Relaxed),
            backlog: s.backlog.load(Ordering::Relaxed),
            oldest_pending_ms: some(s.oldest_pending_ms.load(Ordering::Relaxed)),
            last_ack_ms: some(s.last_ack_ms.load(Ordering::Relaxed)),
            parked: s.parked.load(Ordering::Relaxed),
            last_parked: s.last_parked.lock().expect("status lock").clone(),
            dropped_observations: s.dropped_observations.load(Ordering::Relaxed)
                + s.queue_dropped.load(Ordering::Relaxed),
            last_error: s.last_error.lock().expect("status lock").clone(),
        }
    }

    /// What `/api/health` lists as problems of the link.
    pub(crate) fn problems(&self) -> Vec<String> {
        let v = self.view();
        let link = self.link;
        let mut out = Vec::new();
        if !v.connected {
            out.push(format!(
                "{link}: not connected to {}; {} message(s) wait in the outbox",
                v.receiver, v.backlog
            ));
        }
        if let Some(oldest) = v.oldest_pending_ms
            && crate::core::time::now_ms() - oldest > self.stuck_ms
        {
            out.push(format!(
                "{link}: the oldest of {} message(s) in the outbox has waited {} s for the receiver",
                v.backlog,
                (crate::core::time::now_ms() - oldest) / 1000
            ));
        }
        if v.parked > 0 {
            out.push(format!(
                "{link}: {} message(s) parked in the outbox (refused by the receiver, or too long to send)",
                v.parked
            ));
        }
        let lost = self.status.alarm_feed_dropped.load(Ordering::Relaxed);
        if lost > 0 {
            out.push(format!(
                "{link}: {lost} alarm change(s) could not be handed to the {} feed and will not be reported (holmes_alarm_feed_dropped_total)", link.to_ascii_uppercase()
            ));
        }
        if v.dropped_observations > 0 {
            out.push(format!(
                "{link}: {} observation report(s) dropped (too old or the queue full)",
                v.dropped_observations
            ));
        }
        out
    }
}

/// The HL7 link's messages: one per draft, its row id the MSH-10.
struct Hl7Render(Hl7Config);

impl outbox::Render for Hl7Render {
    fn parts(&self, _: &message::Draft) -> usize {
        1
    }

    fn render(&self, d: &message::Draft, _: usize, id: i64, created_ms: i64) -> String {
        message::render(&self.0, d, &id.to_string(), created_ms)
    }
}

/// The HL7 link's outbox.
pub(crate) fn hl7_spec(cfg: &Hl7Config) -> outbox::Spec {
    outbox::Spec {
        names: &outbox::HL7,
        render: Box::new(Hl7Render(cfg.clone())),
        max_body_bytes: cfg.max_frame_bytes,
        keep_sent_hours: cfg.keep_sent_hours,
        queue: cfg.queue,
    }
}

/// The link, started.
pub(crate) struct Started {
    pub(crate) handle: Outbound,
    /// For the board: every alarm transition.
    pub(crate) alarm_feed: AlarmFeed,
    /// The outbox thread: it ends once the feed and the link have stopped.
    pub(crate) outbox: std::thread::JoinHandle<()>,
}

/// Opens the outbox on `db` and starts the feed (its reports carrying the beds' patients of
/// `admissions`) and the link under `shutdown`.
pub(crate) async fn start(
    cfg: &Hl7Config,
    db: &Db,
    scores: broadcast::Receiver<Arc<ScoreRecord>>,
    monitor_alarms: broadcast::Receiver<Arc<MonitorAlarmChange>>,
    admissions: Admissions,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> Result<Started, OutboundError> {
    let Opened {
        outbox,
        thread,
        tls,
        status,
        wake,
        alarm_feed,
    } = open_outbox(
        "hl7",
        cfg.tls_ca.clone(),
        hl7_spec(cfg),
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
    tracker.spawn(
        link::Link {
            cfg: cfg.clone(),
            outbox,
            status: status.clone(),
            wake,
            tls,
            shutdown,
        }
        .run(),
    );
    tracing::info!(receiver = %cfg.receiver, tls = cfg.tls_ca.is_some(), "HL7 link started");
    Ok(Started {
        handle: Outbound {
            link: "hl7",
            receiver: cfg.receiver.clone(),
            stuck_ms: (5.0 * cfg.ack_timeout_secs * 1000.0) as i64,
            status: status.clone(),
        },
        alarm_feed,
        outbox: thread,
    })
}

/// Where a link's feed reads from and writes to.
pub(crate) struct Feeding<'a> {
    pub(crate) db: &'a Db,
    pub(crate) cadence_secs: f64,
    pub(crate) scores: broadcast::Receiver<Arc<ScoreRecord>>,
    /// The monitors' alarms the store commits (its broadcast).
    pub(crate) monitor_alarms: broadcast::Receiver<Arc<MonitorAlarmChange>>,
    /// The beds' patients (the ward's).
    pub(crate) admissions: Admissions,
    pub(crate) shutdown: &'a CancellationToken,
    pub(crate) tracker: &'a TaskTracker,
}

/// What both links start from: the outbox open on its own thread, the TLS client where
/// `tls_ca` is set, and the feed filling the outbox at the cadence.
pub(crate) struct Opened {
    pub(crate) outbox: outbox::Outbox,
    pub(crate) thread: std::thread::JoinHandle<()>,
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    pub(crate) status: Arc<LinkStatus>,
    pub(crate) wake: Arc<tokio::sync::Notify>,
    pub(crate) alarm_feed: AlarmFeed,
}

/// Opens the outbox of `spec` (and reads `section`'s `tls_ca`) on a blocking thread, then
/// starts the feed.
pub(crate) async fn open_outbox(
    section: &'static str,
    tls_ca: Option<std::path::PathBuf>,
    spec: outbox::Spec,
    f: Feeding<'_>,
) -> Result<Opened, OutboundError> {
    let status = Arc::new(LinkStatus::default());
    let wake = Arc::new(tokio::sync::Notify::new());
    let (names, queue) = (spec.names, spec.queue);
    let (d, s, w) = (f.db.clone(), status.clone(), wake.clone());
    let a = f.admissions.clone();
    let (outbox, thread, tls) = tokio::task::spawn_blocking(move || {
        let tls = tls_ca
            .as_deref()
            .map(|ca| client_config(section, ca))
            .transpose()?;
        let (outbox, thread) = outbox::start(spec, &d, &a, s, w)?;
        Ok::<_, OutboundError>((outbox, thread, tls))
    })
    .await
    .expect("opening an outbox does not panic")?;
    let (alarm_tx, alarms) = mpsc::channel(queue);
    f.tracker.spawn(
        feed::Feed {
            cadence: Duration::from_secs_f64(f.cadence_secs),
            outbox: outbox.clone(),
            names,
            status: status.clone(),
            scores: f.scores,
            alarms,
            monitor_alarms: f.monitor_alarms,
            admissions: f.admissions,
            shutdown: f.shutdown.clone(),
        }
        .run(),
    );
    let alarm_feed = AlarmFeed::new(alarm_tx, status.alarm_feed_dropped.clone());
    Ok(Opened {
        outbox,
        thread,
        tls,
        status,
        wake,
        alarm_feed,
    })
}

/// The TLS client trusting only the CA certificates of `ca_pem` (`section`'s `tls_ca`), as
/// [`core::tls`](crate::core::tls) builds it. Blocking.
pub(crate) fn client_config(
    section: &'static str,
    ca_pem: &Path,
) -> Result<Arc<rustls::ClientConfig>, OutboundError> {
    use crate::core::tls::TlsError;
    crate::core::tls::client_config(ca_pem, None).map_err(|e| OutboundError::Tls {
        section,
        path: ca_pem.display().to_string(),
        reason: match e {
            TlsError::Pem { reason, .. } => reason,
            other => other.to_string(),
        },
    })
}
