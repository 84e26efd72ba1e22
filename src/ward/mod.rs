//! The ward: one aggregator per bed (ring buffers, timeline, window scheduler) and the
//! registry that connections attach to.
//!
//! [`ingest`](crate::ingest) validates frames and sends them to a bed through [`Ward`];
//! each bed's task ([`task`]) closes windows and hands them to the
//! [`engine`](crate::engine); technical events go to the [`store`](crate::store).

mod bed;
mod ring;
mod task;

pub use bed::{BedParams, BedState, Outcome, SampleFrame};
pub use task::{Attach, AttachError, BedCmd, BedStatus, BedView, Strip, Ward, WardOutputs};

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::dataset::MAX_LEADS;

/// Quality of one lead slot in a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LeadSlot {
    /// Fraction of the window's samples that arrived.
    pub coverage: f64,
    /// Seconds flagged lead-off.
    pub lead_off_secs: f64,
    /// Coverage and lead-off within the quality floor.
    pub usable: bool,
}

/// Data quality of a closed window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowQuality {
    /// Per lead slot (primary, secondary, third); `None` when the monitor has no such lead.
    pub leads: [Option<LeadSlot>; MAX_LEADS],
    /// Largest number of missing samples on any announced lead.
    pub gap_samples: usize,
    /// Fraction of the window's seconds with a heart-rate reading.
    pub hr_coverage: f64,
}

/// A window ready for scoring, materialised once and shared by every ensemble member.
#[derive(Debug, Clone)]
pub struct ClosedWindow {
    pub bed: Arc<str>,
    /// Window number on the bed's timeline.
    pub index: u64,
    /// Device time of the first sample and of the end (exclusive), ms.
    pub start_ms: i64,
    pub end_ms: i64,
    /// Usable leads' samples (mV, holes interpolated), by slot.
    pub ecg: [Option<Arc<[f32]>>; MAX_LEADS],
    /// One heart-rate value per second of the window, when enough arrived.
    pub heart_rate: Option<Arc<[f32]>>,
    pub quality: WindowQuality,
    /// When the window's last sample arrived (or the window was closed without it): the
    /// start of its end-to-end latency.
    pub last_sample_at: Instant,
}

/// Kinds of technical events recorded per bed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Connected,
    Disconnected,
    Superseded,
    Gap,
    Duplicate,
    TooLate,
    ClockJump,
    SeqReset,
    Outage,
    BadSamples,
    /// A model was added, changed, refused or removed (recorded under the bed `zoo`).
    ZooChange,
    /// The composer switched the serving ensemble (recorded under the bed `composer`).
    PlanChange,
    /// The daemon opened the database (under the bed `server`).
    ServerStart,
    /// The daemon flushed the database and stopped gracefully (under the bed `server`).
    ServerStop,
    /// Found at start-up: the previous run ended without `server_stop` (under `server`, and
    /// under each bed it scored, with the bed's last committed window).
    UncleanShutdown,
    /// A model panicked, failed or returned non-finite output (recorded under the bed `zoo`,
    /// at most once a minute per model).
    ModelFault,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Connected => "connected",
            EventKind::Disconnected => "disconnected",
            EventKind::Superseded => "superseded",
            EventKind::Gap => "gap",
            EventKind::Duplicate => "duplicate",
            EventKind::TooLate => "too_late",
            EventKind::ClockJump => "clock_jump",
            EventKind::SeqReset => "seq_reset",
            EventKind::Outage => "outage",
            EventKind::BadSamples => "bad_samples",
            EventKind::ZooChange => "zoo_change",
            EventKind::PlanChange => "plan_change",
            EventKind::ServerStart => "server_start",
            EventKind::ServerStop => "server_stop",
            EventKind::UncleanShutdown => "unclean_shutdown",
            EventKind::ModelFault => "model_fault",
        }
    }
}

/// A technical event (gap, reconnect, ...), stored with the bed and time.
#[derive(Debug, Clone, PartialEq)]
pub struct TechEvent {
    pub bed: Arc<str>,
    pub kind: EventKind,
    pub detail: serde_json::Value,
}
